"""The reference, except that a call whose body's value does not depend on its parameters
(the body drops them, detaches them or casts them through an i32) is inlined before the
gradient is built: the dependence read off the inlined body, where the spec's call depends
on x through its argument and is a node with no rule (SPEC.md, "Depends on x"). A gradient
through such a call is then accepted (issue 55: no program took a gradient through a call
whose body drops, detaches or casts the parameter x reaches). Top-level calls only."""

import re

from gradient_conformance import reference

NAME = "call-dependence-by-body"
_STATEMENT = re.compile(r"^(\s*)(%\S+)\s*=\s*(\S+)\s*(.*)$")


def _bodies(lines):
    """@name -> (parameters, [(target, op, rest)], returned name)."""
    found, current = {}, None
    for line in lines:
        words = line.split("#")[0].split()
        if words[:1] == ["def"]:
            current = (words[1], words[2:], [])
        elif words[:1] == ["end"] and current:
            found[current[0]] = (current[1], current[2], current[3] if len(current) > 3
                                 else None)
            current = None
        elif current and words[:1] == ["return"]:
            current = (*current[:3], words[1])
        elif current and (match := _STATEMENT.match(line.split("#")[0])):
            current[2].append(match.groups()[1:])
    return found


def _depends(params, body, returned) -> bool:
    hot = set(params)
    for target, op, rest in body:
        operands = [w for w in rest.split() if w.startswith("%")]
        to_other_dtype = op == "cast" and "dtype=f32" not in rest  # an i32 or bool: cold
        if op != "detach" and not to_other_dtype and any(o in hot for o in operands):
            hot.add(target)
    return returned in hot


def build(source):
    lines = source.splitlines()
    bodies = _bodies(lines)
    out, in_body = [], False
    for k, line in enumerate(lines):
        code = line.split("#")[0]
        words = code.split()
        if words[:1] == ["def"]:
            in_body = True
        elif words[:1] == ["end"] and words[1:2] and words[1].startswith("@"):
            in_body = False  # `end @f`; `end %i` closes a range
        match = _STATEMENT.match(code)
        if not in_body and match and match.group(3) == "call":
            indent, target, _, rest = match.groups()
            name, *args = rest.split()
            params, body, returned = bodies[name]
            if not _depends(params, body, returned):
                names = dict(zip(params, args, strict=True))
                for inner, op, text in body:
                    names[inner] = f"%in{k}_{inner[1:]}"
                    text = " ".join(names.get(w, w) for w in text.split())
                    out.append(f"{indent}{names[inner]} = {op} {text}")
                out.append(f"{indent}{target} = add {names[returned]} 0.0")
                continue
        out.append(line)
    return reference.build("\n".join(out) + "\n")
