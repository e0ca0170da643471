"""The text form: the parser accepts what SPEC.md says and reports everything else as an
IRError naming the line; printing and parsing again gives the same graph."""

from __future__ import annotations

import math
import string
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gradient_conformance import reference
from gradient_conformance.conformance import readings
from gradient_conformance.reference import cases
from gradient_conformance.reference.errors import IRError
from gradient_conformance.reference.syntax import format_program, parse
from tests.conftest import CASES, SHARED_EXAMPLES
from tests.smooth import smooth_programs

VALID = [p for p in cases.case_paths([CASES, SHARED_EXAMPLES])
         if not cases.load_case(p).error]

# Text made of the language's own pieces, so that random programs get past the lexer often.
_PIECES = ["%a", "%b", "%x", "%i", "@f", "=", "[", "]", ",", "1", "-1", "2.0", "1e-3", "nan",
           "inf", "true", "2147483648", "1e99999", "load", "store", "add", "mul", "reduce",
           "range", "end", "def", "return", "call", "gradient", "buffer", "slot=0",
           "dtype=f32", "shape=[2]", "shape=[]", "op=add", "axis=[0]", "expand", "detach",
           "where", "cast", "dtype=i32", "#", "\n", " ", "\t", "\x00", "é", "[[", "=="]


def _pieces_text():
    return st.lists(st.sampled_from(_PIECES), max_size=60).map(" ".join)


def _build_raises_only_irerror(text: str) -> None:
    try:
        reference.build(text)
    except IRError as problem:
        assert problem.line >= 0 and str(problem)
        if problem.line:
            assert f"line {problem.line}" in str(problem)


@settings(max_examples=300)
@given(st.text(max_size=200))
def test_random_text_raises_only_irerror(text):
    _build_raises_only_irerror(text)


@settings(max_examples=300)
@given(st.binary(max_size=200))
def test_random_bytes_raise_only_irerror(data):
    _build_raises_only_irerror(data.decode("latin-1"))


@settings(max_examples=500)
@given(_pieces_text())
def test_random_statements_raise_only_irerror(text):
    _build_raises_only_irerror(text)


@settings(max_examples=200)
@given(st.lists(st.sampled_from(["%i = range 2", "end %i", "%j = range 1", "end %j",
                                 "def @f %a", "end @f", "return %a", "%b = add %a %a"]),
                max_size=30))
def test_unbalanced_blocks_raise_only_irerror(lines):
    _build_raises_only_irerror("\n".join(lines))


@st.composite
def _function_programs(draw):
    """Programs of def blocks (mostly valid bodies that call any function, themselves
    included) and top-level calls: recursion, calls of later functions, arity mismatches."""
    lines = []
    for name in draw(st.lists(st.sampled_from(["@f", "@g"]), min_size=1, max_size=3)):
        lines.append(f"def {name} %a")
        lines.append(draw(st.sampled_from(["  %b = call @f %a", "  %b = call @g %a",
                                           "  %b = mul %a %a", "  %b = call @f %a %a"])))
        if draw(st.booleans()):
            lines.append(draw(st.sampled_from(["  %c = call @g %b", "  %c = gradient %b %a"])))
        lines += ["  return %b", f"end {name}"]
    lines += ["%i = buffer slot=0 dtype=f32 shape=[]", "%x = load %i"]
    lines += draw(st.lists(st.sampled_from(["%y = call @f %x", "%z = call @g %x",
                                             "%w = call @f 1", "%v = call @g %x %x"]),
                           min_size=1, max_size=3, unique=True))
    return "\n".join(lines)


@settings(max_examples=500)
@given(_function_programs())
def test_random_function_shapes_raise_only_irerror(text):
    """Text-level fuzzing seldom forms a whole def; these are whole defs and calls."""
    _build_raises_only_irerror(text)


@pytest.mark.parametrize("text", [
    "%x = add " + "1.0 " * 20000,  # a very long line
    "\n".join(f"%i{k} = range 1" for k in range(200)),  # nesting past the limit
    "%a = buffer slot=0 dtype=f32 shape=[100000,100000]",  # a value past the size limit
    "%a = buffer slot=99999999999999999999 dtype=f32",
    "%a = buffer slot=0 dtype=f32 shape=[" + "1," * 5000 + "1]",
    "%x = add 1e-99999999999999999999999999 1.0",
    "def @f %a\n" * 3,
])
def test_hostile_text_raises_only_irerror(text):
    _build_raises_only_irerror(text)


def _same_graph(a: str, b: str) -> bool:
    return reference.compile_program(a).graph.keys() == reference.compile_program(b).graph.keys()


@pytest.mark.parametrize("path", VALID, ids=lambda p: p.name)
def test_printing_and_parsing_again_gives_the_same_graph(path):
    source = path.read_text()
    printed = format_program(parse(source))
    assert _same_graph(source, printed)
    assert format_program(parse(printed)) == printed  # the canonical form is a fixed point


@settings(max_examples=100)
@given(smooth_programs(second_order=False))
def test_generated_programs_round_trip(case):
    printed = format_program(parse(case.source))
    assert _same_graph(case.source, printed)


def test_round_trip_can_tell_graphs_apart():
    """_same_graph is no tautology: one changed literal makes another graph."""
    base = "%a = buffer slot=0 dtype=f32 shape=[]\n%x = load %a\n%y = mul %x 2.0\n"
    assert not _same_graph(base, base.replace("2.0", "-2.0"))


@settings(max_examples=200)
@given(st.sampled_from(["f32", "i32"]), st.integers(1, 6), st.sampled_from(
    list(string.ascii_letters)))
def test_error_names_the_line_of_an_undefined_name(dtype, padding, letter):
    text = "\n" * padding + (f"%a = buffer slot=0 dtype={dtype} shape=[]\n"
                              f"%y = add %{letter}q %{letter}q\n")
    with pytest.raises(IRError) as raised:
        reference.build(text)
    assert raised.value.line == padding + 2
    assert f"%{letter}q" in str(raised.value)


def test_a_signalling_nan_is_read_as_its_bits_by_every_reader(tmp_path):
    """Before, a case file's hex inputs were read through a Python float, and 0x7f800001 (a
    signalling NaN) reached the reference quiet, as 0x7fc00001. Every reader of a case file
    (parse_case: the case-file check, replay, vectors) and `python -m reference run --in`
    keep its bits."""
    source = ("#: in 0 = 0x7f800001 0xff800001\n#: out 0 = 0x7f800001 0xff800001\n"
              "%a = buffer slot=0 dtype=f32 shape=[2]\n%x = load %a\nstore %a %x\n")
    case = cases.parse_case(source)
    assert case.inputs[0].view(np.uint32).tolist() == [0x7f800001, 0xff800001]
    assert case.outputs[0].view(np.uint32).tolist() == [0x7f800001, 0xff800001]
    program = tmp_path / "snan.ir"
    program.write_text(source)
    run = subprocess.run([sys.executable, "-m", "gradient_conformance.reference", "run",
                          str(program), "--in", "0=0x7f800001", "--bits"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and "0x7f800001" in run.stdout, run.stdout + run.stderr


@pytest.mark.parametrize("text", [
    "%x = add " + "1.0 " * 20000,  # more tokens on one line than the reference reads
    "\n".join(f"%i{k} = range 1" for k in range(100)),  # ranges nested past 64
    "%a = buffer slot=0 dtype=f32 shape=[5000,5000]",  # a value past 2^24 elements
    "%a = buffer slot=0 dtype=f32 shape=[4]\n%x = load %a\n"
    "%y = expand %x shape=[5000,5000]",  # made past it, not declared
])
def test_a_program_beyond_the_reference_s_limits_is_judged_on_none(text):
    """SPEC.md, "Limits": the limits are the reference's own, which the course's text does not
    set; no expectation rests on them: the reference's rejection says so (reason "limit"),
    and a check leaves such a program out, saying why, where one within them is sent."""
    from gradient_conformance.conformance import running
    want = readings.Reading(text).outcome({}, build_only=True)
    assert want.status == "rejected" and want.reason == "limit", want
    assert "one of its own limits" in running.beyond_limits(want)
    within = readings.Reading("%a = buffer slot=0 dtype=f32 shape=[4]\n%b = load %a\n"
                             "%x = add %b %b\n%y = add %x %b\n").outcome({}, build_only=True)
    invalid = readings.Reading("%x = add %b 1.0\n").outcome({}, build_only=True)
    assert running.beyond_limits(within) == running.beyond_limits(invalid) == ""


def test_no_program_the_suite_ships_or_draws_goes_beyond_a_limit():
    """SPEC.md, "Limits": no case file is rejected for a limit, and the generators' bounds
    stay within them (a drawn value's shape), so no check's expectation rests on a limit."""
    from gradient_conformance.generators import writer
    from gradient_conformance.reference.graph import MAX_ELEMENTS
    for path in sorted(CASES.rglob("*.ir")):
        assert readings.Reading(path.read_text()).outcome(
            {}, build_only=True).reason != "limit", path
    assert max(math.prod(shape) for shape in writer.SHAPES) <= MAX_ELEMENTS
