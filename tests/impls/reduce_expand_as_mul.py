"""The reference, except that a reduce op=add over the axes an expand broadcast is one
multiplication by the count of copies (an algebraic simplification), where the spec sums
the copies as a left fold, rounding at each add (issue 55: it passed the ci profile).
Shapes are followed through buffers, loads, reshapes and expands written in the program,
enough for the programs that show it."""

import math
import re

from gradient_conformance import reference

NAME = "reduce-expand-as-mul"
_SHAPED = re.compile(r"^(\s*)(%\S+)\s*=\s*(buffer|reshape|expand)\b.*shape=\[([\d,\s]*)\]")
_FROM = re.compile(r"^\s*%\S+\s*=\s*(?:reshape|expand)\s+(\S+)")
_LOAD = re.compile(r"^\s*(%\S+)\s*=\s*load\s+(%\S+)\s*$")
_REDUCE = re.compile(r"^(\s*)(%\S+)\s*=\s*reduce\s+(%\S+)\s+op=add\s+axis=\[([\d,\s]*)\]\s*$")


def _dims(text: str) -> tuple[int, ...]:
    return tuple(int(n) for n in text.split(",") if n.strip())


def build(source):
    shapes: dict[str, tuple[int, ...]] = {}
    expands: dict[str, str] = {}  # an expand's name -> its operand's
    out = []
    for line in source.splitlines():
        code = line.split("#")[0]
        if found := _SHAPED.match(code):
            shapes[found.group(2)] = _dims(found.group(4))
            if found.group(3) == "expand":
                expands[found.group(2)] = _FROM.match(code).group(1)
        elif (found := _LOAD.match(code)) and found.group(2) in shapes:
            shapes[found.group(1)] = shapes[found.group(2)]
        elif (found := _REDUCE.match(code)) and found.group(3) in expands:
            indent, target, expanded, axes = found.groups()
            operand = expands[expanded]
            before, after = shapes.get(operand), shapes[expanded]
            axes = _dims(axes)
            if before is not None and len(before) == len(after) and \
                    all(before[a] == 1 for a in axes):
                count = math.prod(after[a] for a in axes)
                out.append(f"{indent}{target} = mul {operand} {float(count)!r}")
                continue
        out.append(line)
    return reference.build("\n".join(out) + "\n")
