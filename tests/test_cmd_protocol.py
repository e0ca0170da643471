"""The JSON-lines protocol: `gradient-conformance serve` (and `python -m reference serve`),
and the client that stands between the suite and an untrusted process
(conformance/transports/jsonlines.py).
SPEC.md, "The protocol"."""

from __future__ import annotations

import sys
import textwrap

import numpy as np
import pytest

from gradient_conformance.conformance.transports.command import Command
from gradient_conformance.conformance.transports.jsonlines import (
    decode_buffer,
    encode_buffer,
)
from gradient_conformance.reference import cases
from tests.conftest import CASES, FAST, ROOT

ALL = cases.case_paths([CASES])


@pytest.fixture(scope="module", params=["conformance", "reference"])
def served(request):
    argv = ([sys.executable, "-m", "gradient_conformance", "serve", "reference"]
            if request.param == "conformance" else [sys.executable, "-m", "reference", "serve"])
    impl = Command(argv, timeout=20, cwd=str(ROOT))
    yield impl
    impl.close()


def test_every_case_passes_through_the_protocol(served):
    failures = [f"{p.name}: {why}" for p in ALL
                for ok, why in [cases.check(cases.load_case(p), served.build)] if not ok]
    assert not failures, failures
    assert served.restarts == 0


def test_run_failure_says_index(served):
    source = (CASES / "run" / "index_out_of_range.ir").read_text()
    got = served.case(source, {0: np.int32(3).reshape(()), 1: np.zeros(3, np.float32)},
                      cases.buffer_slots(source))
    assert got.status == "run-error" and got.index, got


def test_rejection_is_a_rejection(served):
    got = served.case("%x = frob 1.0\n", None, {})
    assert got.status == "rejected" and "unknown op" in got.message


@pytest.mark.parametrize("array", [
    np.array([0.0, -0.0, np.inf, 1e-45], np.float32),
    np.array([[-(2**31), 2**31 - 1]], np.int32),
    np.array([True, False], np.bool_),
    np.array([0x7F800001], np.uint32).view(np.float32),  # a signalling NaN keeps its bits
])
def test_buffers_round_trip_bit_for_bit(array):
    back = decode_buffer(encode_buffer(array))
    assert back.dtype == array.dtype and back.shape == array.shape
    assert back.tobytes() == array.tobytes()


@pytest.mark.parametrize("value", [
    {"dtype": "f64", "shape": [1], "bits": [0]}, {"dtype": "f32", "shape": [2], "bits": [0]},
    {"dtype": "f32", "shape": [-1], "bits": []}, {"dtype": "f32", "shape": [1], "bits": [1.5]},
    {"dtype": "f32", "shape": [1], "bits": [2**40]}, [], None,
])
def test_malformed_buffers_are_refused(value):
    with pytest.raises(ValueError):
        decode_buffer(value)


FAKE = textwrap.dedent("""
    import json, os, sys, time
    for line in sys.stdin:
        request = json.loads(line)
        text = request.get("build", "")
        if "JUNK" in text:
            print("hello, I am not JSON", flush=True)
        elif "CRASH" in text:
            sys.stderr.write("segmentation fault (pretend)\\n")
            sys.stderr.flush()
            os._exit(3)
        elif "HANG" in text:
            time.sleep(60)
        elif "WRONG" in text:
            print(json.dumps({"id": 12345, "ok": True}), flush=True)
        else:
            print(json.dumps({"id": request["id"], "ok": True}), flush=True)
""")


@pytest.fixture
def fake(tmp_path):
    script = tmp_path / "fake_impl.py"
    script.write_text(FAKE)
    impl = Command([sys.executable, str(script)], timeout=2.0)
    yield impl
    impl.close()


@pytest.mark.parametrize(("program", "reason", "said"), [
    ("# JUNK\n", "junk", "not a JSON reply"), ("# CRASH\n", "crash", "status 3"),
    ("# HANG\n", "timeout", "deadline"), ("# WRONG\n", "junk", "a reply to request"),
])
def test_misbehaviour_is_a_failure_and_the_process_restarts(fake, program, reason, said):
    got = fake.case(program, None, {})
    assert got.status == "failure" and got.reason == reason and said in got.message, got
    if reason == "crash":
        assert "segmentation fault (pretend)" in got.message
    assert fake.case("# fine\n", None, {}).status == "ok"  # a fresh process answers
    assert fake.restarts == 1


def test_a_run_reply_without_buffers_is_junk(fake):
    got = fake.case("# fine\n", {0: np.zeros(2, np.float32)}, {0: ("f32", (2,))})
    assert got.status == "failure" and got.reason == "junk" and "malformed" in got.message


def test_a_served_module_says_what_it_is_and_what_it_claims(tmp_path):
    """The reply to the first request carries the module's NAME, VERSION and CAPABILITIES,
    so a system served from another venv is measured on what it claims, as in process."""
    from gradient_conformance.conformance.transports.loading import LoadFailed, load
    (tmp_path / "partial.py").write_text(textwrap.dedent(f"""\
        from {FAST} import build  # noqa: F401
        NAME, VERSION = "partial", "7"
        CAPABILITIES = {{"unsupported": ["range"], "ulp": {{"sin": 3}}}}
        """))
    impl = load(f"cmd:{sys.executable} -m gradient_conformance serve partial.py",
                base=str(tmp_path))
    try:
        assert (impl.name, impl.version) == ("partial", "7")
        assert impl.unsupported() == {"range"} and impl.ulps("sin") == 3
    finally:
        impl.transport.close()
    (tmp_path / "claims.py").write_text(f"from {FAST} import build  # noqa: F401\n"
                                         "CAPABILITIES = {'ulp': {'add': 1}}\n")
    with pytest.raises(LoadFailed, match="only exp2, log2, sin may declare"):
        load(f"cmd:{sys.executable} -m gradient_conformance serve claims.py",
             base=str(tmp_path))
