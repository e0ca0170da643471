"""`python -m conformance vectors --out DIR`: generated cases with the reference's expected
bits or expected rejection, as case files any implementation in any language can check.
docs/commands.md, "Test vectors"; VECTORS.md says how a runner must compare.
"""

from __future__ import annotations

import hashlib
import json
import pathlib

import hypothesis
import numpy as np
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from gradient_conformance import reference
from gradient_conformance.conformance.casefiles import single_op_source
from gradient_conformance.conformance.divergence import write_atomically
from gradient_conformance.conformance.options import PROFILES
from gradient_conformance.conformance.readings import expected
from gradient_conformance.generators import (
    Case,
    differentiable_programs,
    exact_programs,
    invalid_gradients,
    near_misses,
    order_sensitive_gradients,
)
from gradient_conformance.generators.buffers import ANY_F32
from gradient_conformance.generators.tapes import (
    TapeCase,
    invalid_tapes,
    order_sensitive_tapes,
    tapes,
)
from gradient_conformance.reference import cases
from gradient_conformance.reference.ops import TRANSCENDENTAL
from gradient_conformance.reference.tape import backprop_bits, format_tape_case, tape_to_json

# /2: tape vectors (NNNNN-tape*.json) beside the programs, which a /1 runner does not know.
FORMAT = "gradient-conformance-vectors/2"


@st.composite
def transcendental_samples(draw, *, max_size: int = 32) -> Case:
    """One of exp2, log2, sin over a list of f32 values; shrinks towards one value, 0.0."""
    op = draw(st.sampled_from(sorted(TRANSCENDENTAL)))
    values = draw(st.lists(ANY_F32, min_size=1, max_size=max_size))
    source = single_op_source(op, len(values))
    return Case(source, {0: np.array(values, np.float32)}, None,
                f"{op} over {len(values)} values", features=frozenset({op}))


# (kind, strategy, share of the vectors): what a vector set is made of. The tape kinds are
# for a runner of backprop(tape) (SPEC.md, "Tapes"), a student's compiler in any language.
PROGRAM_KINDS = [
    ("forward", exact_programs(), 0.22),
    ("gradient", differentiable_programs(exclude=TRANSCENDENTAL), 0.26),
    ("order", order_sensitive_gradients(), 0.09),
    ("near-miss", near_misses(), 0.09),
    ("rejection", invalid_gradients(), 0.17),
    ("transcendental", transcendental_samples(), 0.05),
]
TAPE_KINDS = [
    ("tape", tapes(), 0.07),
    ("tape-order", order_sensitive_tapes(), 0.02),
    ("tape-rejection", invalid_tapes(), 0.03),
]
KINDS = PROGRAM_KINDS + TAPE_KINDS
# What --profile means for vectors (the suite's profiles, plugin.PROFILES): ci draws the same
# set every time (seed 0 unless given), dev and nightly a fresh one unless --seed is given.


def counts(total: int) -> dict[str, int]:
    """How many vectors of each kind make `total`: the shares, the rest to the first kinds."""
    got = {kind: int(total * share) for kind, _, share in KINDS}
    for kind, _, _ in KINDS[: total - sum(got.values())]:
        got[kind] += 1
    return got


def case_key(case) -> tuple:
    if isinstance(case, TapeCase):
        return (json.dumps(tape_to_json(case.tape)),)
    return (case.source, tuple(sorted((k, v.tobytes()) for k, v in case.buffers.items())))


def draw_cases(strategy, count: int, *, seed: int | None, key=case_key) -> list:
    """`count` distinct cases from `strategy` (distinct by `key`), drawn by Hypothesis outside
    any test: the same ones for the same seed, fresh ones for None."""
    found: dict = {}
    for attempt in range(10):
        if len(found) >= count:
            break

        @settings(max_examples=2 * (count - len(found)) + 5, database=None,
                  deadline=None, phases=[Phase.generate],
                  suppress_health_check=list(HealthCheck))
        @given(st.data())
        def collect(data):
            case = data.draw(strategy)
            if len(found) < count:
                found.setdefault(key(case), case)

        (collect if seed is None else hypothesis.seed(seed * 1000 + attempt)(collect))()
    return list(found.values())


def tape_vector_text(number: int, kind: str, case: TapeCase) -> tuple[str, dict]:
    """One tape vector file (a tape case file: SPEC.md, "Tapes"), and its entry."""
    error = case.expect_error
    text = format_tape_case(case.tape, error=error,
                            derivatives=None if error else backprop_bits(case.tape),
                            description=f"vector {number}: {kind}; {case.description}")
    klass = "tape-rejection" if error else "tape-bit-exact"
    return text, {"class": klass, "kind": kind, "uses": [],
                  "expect": "rejected" if error else "derivatives"}


def vector_text(number: int, kind: str, case: Case) -> tuple[str, dict]:
    """One vector file, and its entry in index.json."""
    ops = sorted(set(case.features) & TRANSCENDENTAL)
    if case.expect_error is not None:
        klass, outputs, error, run_error = "rejection", None, case.expect_error, False
    else:
        want = expected(case.source, case.buffers)
        if want.status == "rejected":
            raise AssertionError(f"the reference rejects a valid {kind} case: {want.message}")
        run_error = want.status == "run-error"
        outputs = None if run_error else want.buffers
        error = None
        klass = f"ulp-bounded {ops[0]}" if kind == "transcendental" else "bit-exact"
    uses = f"; uses {' '.join(ops)}" if ops and kind != "transcendental" else ""
    text = cases.format_case(case.source, inputs=case.buffers, outputs=outputs, error=error,
                             run_error=run_error,
                             comments=[f"vector {number}: {kind}{uses}", case.description],
                             directives=[f"class {klass}"])
    entry = {"class": klass, "kind": kind, "uses": ops, "expect": "rejected" if error else
             "run-error" if run_error else "outputs"}
    return text, entry


def export(out: pathlib.Path, *, count: int, profile: str = "ci",
           seed: int | None = None) -> dict:
    """Write `count` vectors and index.json (the manifest) into `out`; return the manifest."""
    out.mkdir(parents=True, exist_ok=True)
    if seed is None and profile == "ci":
        seed = 0
    index, number = [], 0
    strategies = {kind: strategy for kind, strategy, _ in KINDS}
    for kind, n in counts(count).items():
        if n == 0:
            continue
        for case in draw_cases(strategies[kind], n, seed=seed):
            number += 1
            tape = isinstance(case, TapeCase)
            text, entry = (tape_vector_text if tape else vector_text)(number, kind, case)
            name = f"{number:05d}-{kind}.{'json' if tape else 'ir'}"
            write_atomically(out / name, text)  # a link in DIR is replaced, not written through
            index.append({"file": name, **entry,
                          "sha256": hashlib.sha256(text.encode()).hexdigest()})
    manifest = {"format": FORMAT, "reference": reference.VERSION, "profile": profile,
                "seed": seed, "count": len(index), "vectors": index}
    write_atomically(out / "index.json", json.dumps(manifest, indent=1) + "\n")
    return manifest


def add_parser(commands) -> None:
    parser = commands.add_parser("vectors", help="export generated cases with expected bits")
    parser.add_argument("--out", required=True, help="the folder to write into")
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--profile", default="ci", choices=sorted(PROFILES),
                         help="ci: the same vectors every time; dev, nightly: fresh ones")
    parser.add_argument("--seed", type=int, default=None, help="draw the set of this seed")


def run(args) -> int:
    if args.count < 1:
        raise ValueError("--count must be at least 1")
    out = pathlib.Path(args.out)
    manifest = export(out, count=args.count, profile=args.profile, seed=args.seed)
    size = sum(f.stat().st_size for f in out.iterdir() if f.is_file())
    classes: dict[str, int] = {}
    for v in manifest["vectors"]:
        classes[v["class"]] = classes.get(v["class"], 0) + 1
    print(f"{manifest['count']} vectors in {out}/ ({size / 1e6:.2f} MB with index.json): "
          + ", ".join(f"{n} {k}" for k, n in sorted(classes.items())))
    return 0

