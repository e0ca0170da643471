"""The reference, except that a cast to bool goes through a truncating cast to i32 first:
every f32 of magnitude below 1 but zero (0.5, a subnormal) becomes false, where the spec's
`!= 0` gives true (issue 55: casts at fractions and subnormals survived the ci profile)."""

import re

from gradient_conformance import reference

NAME = "bool-through-i32"
_CAST = re.compile(r"^(\s*)(%\S+)\s*=\s*cast\s+(\S+)\s+dtype=bool\s*$")


def build(source):
    lines = []
    for line in source.splitlines():
        code = line.split("#")[0]
        found = _CAST.match(code)
        if found:
            indent, name, operand = found.groups()
            lines += [f"{indent}{name}__i32 = cast {operand} dtype=i32",
                      f"{indent}{name} = cast {name}__i32 dtype=bool"]
        else:
            lines.append(line)
    return reference.build("\n".join(lines) + "\n")
