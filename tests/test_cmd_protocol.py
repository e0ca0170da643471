"""The JSON-lines protocol: `python -m reference serve`, and the client that stands between
the suite and an untrusted process (conformance/protocol.py). SPEC.md, "The protocol"."""

from __future__ import annotations

import sys
import textwrap

import numpy as np
import pytest

from conformance.protocol import (
    BuildRejected,
    CommandImplementation,
    ImplementationFailure,
    RunFailed,
)
from reference import cases
from reference.serve import decode_buffer, encode_buffer
from tests.conftest import CASES, ROOT, SHARED_EXAMPLES

ALL = cases.case_paths([CASES] + ([SHARED_EXAMPLES] if SHARED_EXAMPLES.is_dir() else []))


@pytest.fixture(scope="module")
def served():
    impl = CommandImplementation([sys.executable, "-m", "reference", "serve"], cwd=ROOT)
    yield impl
    impl.close()


def test_every_case_passes_through_the_protocol(served):
    failures = [f"{p.name}: {why}" for p in ALL
                for ok, why in [cases.check(cases.load_case(p), served.build)] if not ok]
    assert not failures, failures
    assert served.restarts == 0


def test_run_failure_says_index(served):
    run = served.build((CASES / "run" / "index_out_of_range.ir").read_text())
    with pytest.raises(RunFailed) as raised:
        run({0: np.int32(3).reshape(()), 1: np.zeros(3, np.float32)})
    assert raised.value.kind == "index"


def test_rejection_is_build_rejected(served):
    with pytest.raises(BuildRejected, match="unknown op"):
        served.build("%x = frob 1.0\n")


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
    impl = CommandImplementation([sys.executable, str(script)], timeout=2.0)
    yield impl
    impl.close()


@pytest.mark.parametrize(("program", "reason"), [
    ("# JUNK\n", "junk"), ("# CRASH\n", "crash"), ("# HANG\n", "timeout"),
    ("# WRONG\n", "mismatch"),
])
def test_misbehaviour_is_a_failure_and_the_process_restarts(fake, program, reason):
    with pytest.raises(ImplementationFailure) as raised:
        fake.build(program)
    assert raised.value.reason == reason
    if reason == "crash":
        assert "segmentation fault (pretend)" in raised.value.stderr
    fake.build("# fine\n")  # the next request starts a fresh process and succeeds
    assert fake.restarts == 1


def test_a_run_reply_without_buffers_is_junk(fake):
    run = fake.build("# fine\n")  # the fake answers a run with no buffers at all
    with pytest.raises(ImplementationFailure) as raised:
        run({0: np.zeros(2, np.float32)})
    assert raised.value.reason == "junk"
