"""The program as JSON (reference/jsonform.py): parsed and structure-checked by the
reference, sent with each build to a server that asks for it, so that an adapter in any
language needs no IR reader. SPEC.md, "The protocol"."""

from __future__ import annotations

import re
import sys

import pytest

from gradient_conformance.conformance.transports.loading import LoadFailed, load
from gradient_conformance.reference import cases
from gradient_conformance.reference.jsonform import program_json
from gradient_conformance.reference.syntax import parse
from tests.conftest import CASES, ROOT

SERVER = f"cmd:{sys.executable} {ROOT / 'tests' / 'impls' / 'json_server.py'}"
VALID = [p for p in cases.case_paths([CASES]) if cases.load_case(p).error is None]


def _statements(body):
    for s in body:
        yield s
        yield from _statements(s.get("body", []))


@pytest.mark.parametrize("path", VALID, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_valid_case_file_as_json(path):
    """Its buffers, its statements with their dtypes and shapes (at top level and in ranges,
    one each), its literals as the reference's bits, and each name resolved to the line that
    defined it in its scope."""
    source = cases.load_case(path).source
    json_form = program_json(source)
    assert "error" not in json_form, json_form
    parsed = {s.line: s for s in parse(source)}
    defined = {s.line: {s.target} | ({o.text for o in s.operands[1:]} if s.op == "def" else set())
               for s in parsed.values()}
    top = [s for s in _statements(json_form["body"]) if s["op"] not in ("store", "range")]
    assert all("dtype" in s and "shape" in s for s in top)
    everything = [*_statements(json_form["body"]),
                  *(s for f in json_form["functions"] for s in _statements(f["body"]))]
    for s in everything:
        for o in s["operands"]:
            if "name" in o:
                assert o["name"] in defined[o["line"]], (s["line"], o)
            if "literal" in o and o["dtype"] == "f32":
                written = next(w for w in parsed[s["line"]].operands if w.kind == "f32")
                assert 0 <= o["literal"] < 2**32 and (written.value == o["literal"] or any(
                    w.value == o["literal"] for w in parsed[s["line"]].operands))
    assert sorted(b["slot"] for b in json_form["buffers"]) == sorted(
        cases.buffer_slots(source))


def test_a_program_the_structure_check_refuses_is_its_error():
    for path in sorted((CASES / "errors").glob("*.ir")):
        json_form = program_json(path.read_text())
        # The reference's words, which name the line (or the end of the text).
        assert set(json_form) == {"error"} and re.match(r"(line \d+|end of text)",
                                                        json_form["error"]), path


def test_a_server_that_asks_gets_the_program_and_one_that_asks_for_more_is_a_usage_error():
    impl = load(SERVER, base=str(ROOT))
    try:
        outcome = impl.build_only((CASES / "examples" / "lesson_three_shares.ir").read_text())
        assert outcome.status == "ok", outcome
        refused = impl.build_only("%a = buffer slot=0 dtype=f32 shape=[]\n%x = load %b\n")
        assert refused.status == "rejected" and "line 2" in refused.message
    finally:
        impl.close()
    with pytest.raises(LoadFailed, match="asks for the program as 'xml'"):
        load(f"{SERVER} xml", base=str(ROOT))
