"""The reference, except that a 0 in reshape's shape= means "the operand's dim there" (ONNX's
Reshape without allowzero): [0,3] reshaped to [2,0] is read as [2,3], whose element count
differs, and the program is rejected (issue 55: no generated shape had a 0-length dim, and
no case file reshaped an empty value). Shapes are followed through buffers and whole loads,
enough for the programs that show it."""

import math
import re

from gradient_conformance import reference

NAME = "reshape-zero-copies"
_BUFFER = re.compile(r"^\s*(%\S+)\s*=\s*buffer\b.*shape=\[([\d,\s]*)\]")
_LOAD = re.compile(r"^\s*(%\S+)\s*=\s*load\s+(%\S+)\s*$")
_RESHAPE = re.compile(r"^\s*(%\S+)\s*=\s*reshape\s+(%\S+)\s+shape=\[([\d,\s]*)\]")


def _shape(text: str) -> tuple[int, ...]:
    return tuple(int(n) for n in text.split(",") if n.strip())


def build(source):
    shapes: dict[str, tuple[int, ...]] = {}
    for number, line in enumerate(source.splitlines(), start=1):
        code = line.split("#")[0]
        if found := _BUFFER.match(code):
            shapes[found.group(1)] = _shape(found.group(2))
        elif (found := _LOAD.match(code)) and found.group(2) in shapes:
            shapes[found.group(1)] = shapes[found.group(2)]
        elif (found := _RESHAPE.match(code)) and found.group(2) in shapes:
            operand, target = shapes[found.group(2)], _shape(found.group(3))
            copied = tuple(operand[k] if d == 0 and k < len(operand) else d
                           for k, d in enumerate(target))
            if math.prod(copied) != math.prod(target) or copied != target:
                raise ValueError(f"line {number}: reshape to {list(copied)}: "
                                 f"{math.prod(copied)} elements, not {math.prod(operand)}")
    return reference.build(source)
