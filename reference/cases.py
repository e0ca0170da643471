"""Case files: `.ir` programs with their expected behaviour in `#:` lines. docs/suite.md, "Case
files".

    #: in 0 = -2.0 -1.0 0x3f800000      initial contents of slot 0, row-major (else zeros)
    #: out 1 = 10.0 1.0                 slot 1 after the run, bit for bit (NaN matches NaN)
    #: near 1 = 0.333                   within 1e-5 + 1e-4 |want| (what run-examples means)
    #: error                            build must reject the program
    #: error no-rule                    ... and with this kind (a rule code, syntax, invalid)
    #: error-mentions TEXT              ... and the message must contain TEXT
    #: run-error                        build must accept it and run must fail (an index)

The format is the one of ../shared/spec/examples, extended by an error kind and run-error.
"""

from __future__ import annotations

import errno
import math
import os
import pathlib
import re
import stat
from dataclasses import dataclass, field

import numpy as np

from . import exact
from .builder import MAX_BUFFER_ELEMENTS
from .errors import BeyondLimit, BuildError, IRError
from .graph import MAX_ELEMENTS
from .interp import NUMPY_DTYPES
from .ops import POISON
from .syntax import parse

_EXPECT = re.compile(r"#:\s*(in|out|near)\s+(\d+)\s*=(.*)")
NUMPY = NUMPY_DTYPES  # IR dtype -> numpy dtype


@dataclass
class Case:
    name: str
    source: str
    inputs: dict[int, np.ndarray] = field(default_factory=dict)
    outputs: dict[int, np.ndarray] = field(default_factory=dict)
    near: dict[int, np.ndarray] = field(default_factory=dict)
    error: str | None = None  # None: valid; "any": some rejection; else the kind
    mentions: list[str] = field(default_factory=list)
    run_error: bool = False
    # The decisions of SPEC.md its expectation rests on (`#: decision NAME`, SPEC.md's
    # opening), not the course's text.
    decisions: list[str] = field(default_factory=list)


def value(token: str, dtype: str):
    """One value of an expectation: decimal (rounded once, exactly), 0x bits, true/false.
    An f32 is its bits (an int), never a Python float, through which a signalling NaN would
    reach numpy quiet: `values_array` makes the array from them."""
    if dtype == "bool":
        if token not in ("true", "false"):
            raise ValueError(f"a bool is true or false, not {token!r}")
        return token == "true"
    if token.lower().startswith("0x"):
        bits = int(token, 16)
        return bits if dtype == "f32" else exact.to_signed(bits)
    if dtype == "f32":
        return exact.f32_from_text(token)
    return exact.i32_from_text(token)


def values_array(values: list, dtype: str) -> np.ndarray:
    """The values `value` read, as an array of `dtype`: f32 from their bits, exactly."""
    if dtype == "f32":
        return np.array(values, np.uint32).view(np.float32)
    return np.array(values, dtype=NUMPY[dtype])


def buffer_slots(source: str) -> dict[int, tuple[str, tuple[int, ...]]]:
    """slot -> (dtype, shape), from the buffer statements of a program that parses."""
    return slots_of(parse(source))


def slots_of(statements) -> dict[int, tuple[str, tuple[int, ...]]]:
    """buffer_slots, for a program already parsed."""
    slots = {}
    total = 0
    for s in statements:
        if s.op == "buffer":
            shape = s.attr("shape", ())
            shape = (shape,) if isinstance(shape, int) else tuple(shape)
            # Checked before anything is allocated: a case of a few bytes may declare a
            # buffer of gigabytes, or many buffers just under the limit (SPEC.md, "Limits").
            if all(isinstance(d, int) for d in shape) and math.prod(shape) > MAX_ELEMENTS:
                raise BuildError(s.line, "shape", f"buffer shape {list(shape)} has more than "
                                 f"{MAX_ELEMENTS} elements, the reference's limit")
            total += math.prod(d for d in shape if isinstance(d, int))
            if total > MAX_BUFFER_ELEMENTS:
                raise BeyondLimit(s.line, "shape", f"the buffers declared so far hold more "
                                  f"than {MAX_BUFFER_ELEMENTS} elements together, the "
                                  "reference's limit")
            slots[s.attr("slot")] = (s.attr("dtype"), shape)
    return slots


FILE_BYTES = 256 << 20  # the most the suite reads of a file a user names (a case, a list)


def read_file(path: str | pathlib.Path, limit: int = FILE_BYTES) -> str:
    """The text of a regular file a user named, at most `limit` bytes: OSError (with a
    strerror saying what is wrong) for anything else, so that a link to /dev/zero or to a
    FIFO is an error, never a read without end or a wait for a writer; UnicodeDecodeError
    for text that is not UTF-8. Links to a regular file are followed."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file (a device, a FIFO or a folder)")
        os.set_blocking(fd, True)
        with os.fdopen(fd, "rb", closefd=False) as stream:
            data = stream.read(limit + 1)
    finally:
        os.close(fd)
    if len(data) > limit:
        raise OSError(errno.EFBIG, f"larger than {limit >> 20} MiB, more than the suite reads")
    return data.decode("utf-8")


def load_case(path: str | pathlib.Path) -> Case:
    path = pathlib.Path(path)
    return parse_case(read_file(path), path.name)


def parse_case(source: str, name: str = "<case>") -> Case:
    case = Case(name, source)
    slots = None
    for line in source.splitlines():
        line = line.strip()
        match = _EXPECT.match(line)
        if match:
            slots = slots if slots is not None else buffer_slots(source)
            kind, slot = match.group(1), int(match.group(2))
            if slot not in slots:
                raise ValueError(f"{name}: '#: {kind} {slot}' names a slot the program does not "
                                 "declare")
            dtype, shape = slots[slot]
            array = values_array([value(t, dtype) for t in match.group(3).split()], dtype)
            if array.size != int(np.prod(shape)):
                raise ValueError(f"{name}: '{kind} {slot}' gives {array.size} values for shape "
                                 f"{list(shape)}")
            {"in": case.inputs, "out": case.outputs, "near": case.near}[kind][slot] = \
                array.reshape(shape)
        elif re.match(r"#:\s*error-mentions\s", line):
            case.mentions.append(line.split("error-mentions", 1)[1].strip())
            case.error = case.error or "any"
        elif re.match(r"#:\s*error\b", line):
            kind = line.split("error", 1)[1].strip()
            case.error = kind or "any"
        elif re.match(r"#:\s*run-error\b", line):
            case.run_error = True
        elif re.match(r"#:\s*decision\s", line):
            case.decisions += line.split("decision", 1)[1].split()
    return case


def same_bits(want: np.ndarray, got: np.ndarray) -> bool:
    """Equal dtype, shape and bits, except that any NaN matches any NaN."""
    if want.dtype != got.dtype or want.shape != got.shape:
        return False
    if want.dtype == np.float32:
        w, g = want.view(np.uint32).ravel(), got.view(np.uint32).ravel()
        return all(exact.same_f32(int(a), int(b)) for a, b in zip(w, g, strict=True))
    return bool(np.array_equal(want, got))


def output_only_slots(source: str) -> set[int]:
    """The slots `source` never loads, so that their initial contents matter only where
    the program does not store into them."""
    return output_only(parse(source))


def output_only(statements) -> set[int]:
    """output_only_slots, for a program already parsed."""
    names = {s.target: s.attr("slot") for s in statements if s.op == "buffer"}
    loaded = {names.get(s.operands[0].text) for s in statements
              if s.op == "load" and s.operands}
    return set(names.values()) - loaded


def poisoned(declared: tuple[str, tuple[int, ...]]) -> np.ndarray:
    """A slot's POISON contents, or zeros for a bool slot (`declared`: dtype and shape)."""
    dtype, shape = declared
    if dtype == "bool":
        return np.zeros(shape, np.bool_)
    return np.full(shape, POISON, np.uint32).view(NUMPY[dtype])


def initial_buffers(case: Case, slots) -> dict[int, np.ndarray]:
    return {slot: case.inputs.get(slot, np.zeros(shape, NUMPY[dtype]))
            for slot, (dtype, shape) in slots.items()}


def check(case: Case, build) -> tuple[bool, str]:
    """Run one case against an implementation's `build`; (passed, why)."""
    try:
        run = build(case.source)
    except Exception as problem:  # noqa: BLE001 - any exception from build is a rejection
        if case.error is None:
            return False, f"build raised {type(problem).__name__}: {problem}"
        kind = getattr(problem, "kind", None)
        if case.error != "any" and isinstance(problem, IRError) and kind != case.error:
            return False, f"rejected as '{kind}', expected '{case.error}': {problem}"
        missing = [t for t in case.mentions if t not in str(problem)]
        if missing:
            return False, f"rejected, but the message does not mention {missing}: {problem}"
        return True, f"rejected as expected: {problem}"
    if case.error is not None:
        return False, "build accepted an invalid program"
    try:
        out = run(initial_buffers(case, buffer_slots(case.source)))
    except Exception as problem:  # noqa: BLE001 - reported, not raised
        if case.run_error:
            return True, f"run failed as expected: {problem}"
        return False, f"run raised {type(problem).__name__}: {problem}"
    if case.run_error:
        return False, "run succeeded, and a run-time error was expected"
    for slot, want in case.outputs.items():
        got = np.asarray(out.get(slot))
        if not same_bits(want, got):
            return False, f"slot {slot}: expected {want.tolist()}, got {got.tolist()}"
    for slot, want in case.near.items():
        got = np.asarray(out.get(slot), dtype=np.float64)
        if got.shape != want.shape or not np.all(np.abs(got - want) <= 1e-5 + 1e-4 * abs(want)):
            return False, f"slot {slot}: expected about {want.tolist()}, got {got.tolist()}"
    return True, "ok"


def format_values(array: np.ndarray, dtype: str) -> str:
    """An array's elements as an expectation writes them: f32 as exact bits in hex (so no
    decimal rounding is ever involved), i32 in decimal, bool as true/false."""
    flat: np.ndarray = np.asarray(array, NUMPY[dtype]).ravel()
    if dtype == "f32":
        return " ".join(f"0x{b:08x}" for b in flat.view(np.uint32).tolist())
    if dtype == "bool":
        return " ".join("true" if v else "false" for v in flat.tolist())
    return " ".join(str(v) for v in flat.tolist())


def format_case(source: str, *, inputs: dict[int, np.ndarray], outputs=None, error=None,
                run_error: bool = False, comments=(), directives=(), slots=None,
                header_last: bool = False) -> str:
    """The case file for `source`: the inverse of `parse_case`. `outputs` (slot -> array) are
    expected bit for bit; `error` is a rejection kind (or "any"); `comments` open the file,
    and `directives` follow them as `#:` lines that this parser ignores (a vector's class).
    The program's own `#:` lines are dropped, so a case is never expected twice. A source
    that does not parse (a syntax-error case) can only carry an error. `slots`: the
    program's (slots_of), when the caller has them. `header_last`: the comments and `#:`
    lines after the program, whose own `#:` lines become empty comments, so that every
    statement keeps the line number it had in `source` (a saved divergence: the run, the
    file and its replay number the lines alike)."""
    if slots is None:
        slots = buffer_slots(source) if inputs or outputs else {}
    lines = [f"# {line}".rstrip() for text in comments for line in str(text).splitlines()]
    lines += [f"#: {directive}" for directive in directives]
    for slot, array in sorted(inputs.items()):
        lines.append(f"#: in {slot} = {format_values(array, slots[slot][0])}")
    if error is not None:
        lines.append("#: error" + ("" if error == "any" else f" {error}"))
    elif run_error:
        lines.append("#: run-error")
    for slot, array in sorted((outputs or {}).items()):
        lines.append(f"#: out {slot} = {format_values(array, slots[slot][0])}")
    if header_last:
        body = ["#" if line.lstrip().startswith("#:") else line for line in source.splitlines()]
        return "\n".join([*body, *lines]).rstrip("\n") + "\n"
    body = [line for line in source.splitlines() if not line.lstrip().startswith("#:")]
    return "\n".join(lines + body).rstrip("\n") + "\n"


def case_paths(paths) -> list[pathlib.Path]:
    """The .ir files named, folders searched recursively, in a stable order."""
    found = []
    for p in map(pathlib.Path, paths):
        found += sorted(p.rglob("*.ir")) if p.is_dir() else [p]
    return found
