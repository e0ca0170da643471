"""An implementation that raises, hangs, returns the wrong slots, dtypes or shapes, returns NaN
everywhere, or (over cmd:) crashes or prints junk is reported as a divergence with that reason,
and the suite goes on to the next case."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from tests.conftest import ROOT

BROKEN = {  # the body of run(buffers)
    "raises": "raise RuntimeError('kaboom in run')",
    "hangs": "time.sleep(30)",
    "wrong_dtype": "return {k: v.astype('float64') for k, v in buffers.items()}",
    "missing_slot": "return {}",
    "nan_everywhere": ("return {k: np.full_like(v, np.nan) if v.dtype == np.float32 else v "
                       "for k, v in buffers.items()}"),
    "script_message": "raise RuntimeError('<script>alert(1)</script>')",
}
REASONS = {"raises": "kaboom in run", "hangs": "no answer within 1 s",
           "wrong_dtype": "came back as float64", "missing_slot": "run returned slots []",
           "nan_everywhere": "expected", "script_message": "<script>alert(1)</script>"}


def _suite(impl: str, *extra: str):
    return subprocess.run(
        [sys.executable, "-m", "pytest", "conformance", f"--impl={impl}", "--max-examples=3",
         "--no-shrink",
         "--case-timeout=1", "-q", "-p", "no:cacheprovider", "-k",
         "exact_programs or invalid_gradients",
         *extra], cwd=ROOT, capture_output=True, text=True, timeout=900)


@pytest.mark.parametrize("kind", sorted(BROKEN))
def test_a_broken_implementation_is_reported_and_the_suite_goes_on(tmp_path, kind):
    module = tmp_path / f"broken_{kind}.py"
    module.write_text(textwrap.dedent("""
        import time
        import numpy as np
        from implementations import fast

        def build(source):
            fast.build(source)  # accepts and rejects like the fast implementation

            def run(buffers):
                BODY
            return run
    """).replace("BODY", BROKEN[kind]))
    result = _suite(str(module))
    output = result.stdout + result.stderr
    assert result.returncode == 1, output[-2000:]  # failures, not an internal error
    assert REASONS[kind] in output, output[-2000:]
    assert "1 passed" in output.splitlines()[-1]  # the rejection check still ran and passed


def test_a_crashing_or_junk_printing_command_is_reported(tmp_path):
    script = tmp_path / "flaky.py"
    script.write_text(textwrap.dedent("""
        import json, os, sys
        for n, line in enumerate(sys.stdin):
            if n % 3 == 2:
                sys.stderr.write("fatal: out of cheese\\n"); sys.stderr.flush(); os._exit(9)
            if n % 3 == 1:
                print("junk", flush=True); continue
            print(json.dumps({"id": json.loads(line)["id"], "ok": True}), flush=True)
    """))
    result = _suite(f"cmd:{sys.executable} {script}")
    output = result.stdout + result.stderr
    assert result.returncode == 1, output[-2000:]
    assert "out of cheese" in output or "junk" in output


def test_unsupported_features_are_never_generated_and_are_skipped_with_the_reason(tmp_path):
    module = tmp_path / "partial.py"
    module.write_text(textwrap.dedent("""
        from implementations import fast

        NAME = "partial"
        CAPABILITIES = {"unsupported": ["range", "call", "bitcast", "higher_order"],
                        "ulp": fast.CAPABILITIES["ulp"], "bit_exact_gradients": True}

        def build(source):
            code = " ".join(line.split("#")[0] for line in source.splitlines())
            for word in ("range", "call", "bitcast"):  # it truly cannot do these
                if f" {word} " in f" {code} ":
                    raise NotImplementedError(word)
            return fast.build(source)
    """))
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "conformance", f"--impl={module}",
         "--max-examples=30", "-v", "-rs", "-p", "no:cacheprovider"],
        cwd=ROOT, capture_output=True, text=True, timeout=900)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    assert "unsupported" in output and "skipped" in output.splitlines()[-1]
    assert "implementation: partial" in output  # the name stands in the header
    assert "[partial" in output  # and in every test id


def test_skips_and_xfails_files_are_honoured_and_stale_ids_warned(tmp_path):
    skips = tmp_path / "skips.txt"
    skips.write_text("conformance/test_forward.py::test_exact_programs_bit_for_bit\n"
                     "conformance/test_nothing.py::test_gone  # a stale id\n")
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "conformance", "--impl=reference", "--max-examples=5",
         f"--skips-file={skips}", "-q", "-rs", "-p", "no:cacheprovider", "-k", "forward"],
        cwd=ROOT, capture_output=True, text=True, timeout=900)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    assert "listed in --skips-file" in output
    assert "test_nothing.py::test_gone" in output and "stale" in output
