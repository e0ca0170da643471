"""A generated check is one file: the suite, `fuzz` and `mutants` find it as pytest collects
it, with no list to add it to (docs/suite.md, "The conformance suite"). The check here is written
as a user (or a contributor, in conformance/checks/) would write one, and given on the
command line beside the installed checks."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

from gradient_conformance.conformance.commands.fuzz import fuzz

ROOT = pathlib.Path(__file__).resolve().parent.parent
CHECK = "test_recip_at_a_drawn_point"
CHECK_FILE = f'''
import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from gradient_conformance.conformance.running import run_both, verdict

SOURCE = """%in = buffer slot=0 dtype=f32 shape=[]
%out = buffer slot=1 dtype=f32 shape=[]
%x = load %in
%y = recip %x
%g = gradient %y %x
store %out %g
"""


@given(data=st.data())
def {CHECK}(impl, tally, data):
    x = data.draw(st.floats(0.25, 4.0, width=32))
    buffers = {{0: np.array(x, np.float32), 1: np.zeros((), np.float32)}}
    tally.case({{"recip", "gradient"}})
    reading, want, got = run_both(impl, SOURCE, buffers)
    verdict(tally, reading, buffers, want, got)
'''
VARIANT = "recip-form"  # writes recip's share otherwise: a drawn point tells


def _check_file(tmp_path: pathlib.Path) -> pathlib.Path:
    path = tmp_path / "test_my_check.py"
    path.write_text(CHECK_FILE)
    return path


def test_fuzz_runs_a_new_check(tmp_path):
    path = _check_file(tmp_path)
    progress = fuzz(f"variant:{VARIANT}", minutes=3, rounds=1, batch=30, jobs=1,
                    out=tmp_path / "out", checks=[CHECK], paths=(str(path),),
                    log=open(os.devnull, "w"))
    assert CHECK in progress.checks  # collected among the generated checks
    assert progress.totals.cases[CHECK] > 0
    assert {d.check for d in progress.best.values()} == {CHECK}
    saved = list((tmp_path / "out" / "divergences").glob("*/*.ir"))
    assert saved and "%y = recip %x" in saved[0].read_text()


def test_mutants_run_a_new_check(tmp_path):
    path = _check_file(tmp_path)
    run = subprocess.run([sys.executable, "-m", "gradient_conformance", "mutants",
                          "--variant", VARIANT, "-k", CHECK, str(path)], cwd=tmp_path,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"test_my_check.py::{CHECK}" in run.stdout and "1 of 1 killed" in run.stdout, \
        run.stdout
