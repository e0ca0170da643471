"""Find the f32 inputs of exp2, log2 and sin whose exact result lies nearest a rounding
boundary (the midpoint of two f32), where a result computed in binary64 and then rounded to
f32 is most likely wrong (a double rounding). Prints a table for generators/hard_to_round.py.

Every f32 input is scanned with numpy in binary64 to find candidates; each candidate's
distance from the midpoint is then measured exactly with MPFR (gmpy2) and the correctly
rounded f32 taken from reference.exact, so the table does not trust the libm it is measured
with. Run: python benchmarks/hard_to_round.py [--keep N] (about a minute per op on 2 cores).
"""

from __future__ import annotations

import argparse
import sys

import gmpy2
import numpy as np

from gradient_conformance.reference import exact

OPS = {"exp2": (np.exp2, gmpy2.exp2, exact.f32_exp2),
       "log2": (np.log2, gmpy2.log2, exact.f32_log2),
       "sin": (np.sin, gmpy2.sin, exact.f32_sin)}
CHUNK = 1 << 24
NEAR = 2.0 ** -18  # candidates: binary64 result within this many f32 ulps of a midpoint


def _midpoint_offset(y: np.ndarray) -> np.ndarray:
    """How far each binary64 value lies from the nearest midpoint of two f32, in f32 ulps
    of its binade (inf where it is no finite normal f32 result)."""
    with np.errstate(all="ignore"):
        mantissa = np.frexp(np.abs(y))[0]  # |y| = mantissa * 2^e, mantissa in [0.5, 1)
        scaled = mantissa * 2.0 ** 24  # one f32 ulp is 1.0 here
        offset = np.abs(scaled - np.floor(scaled) - 0.5)
    normal = np.isfinite(y) & (np.abs(y) >= 2.0 ** -126) & (np.abs(y) < 2.0 ** 128)
    return np.where(normal, offset, np.inf)


def candidates(op: str) -> np.ndarray:
    """Every finite f32 input whose binary64 result is within NEAR ulps of a midpoint."""
    function = OPS[op][0]
    found = []
    for start in range(0, 1 << 32, CHUNK):
        bits = np.arange(start, start + CHUNK, dtype=np.uint64).astype(np.uint32)
        x = bits.view(np.float32)
        with np.errstate(all="ignore"):
            y = function(x.astype(np.float64))
        found.append(bits[_midpoint_offset(y) < NEAR])
    return np.concatenate(found)


def exact_offset(op: str, bits: int) -> float:
    """The exact result's distance from the nearest f32 midpoint, in f32 ulps (MPFR)."""
    with gmpy2.context(precision=200):
        y = abs(OPS[op][1](gmpy2.mpfr(exact.decode(bits))))
        mantissa = gmpy2.frexp(y)[1]  # (e, mantissa)
        scaled = mantissa * gmpy2.mpfr(2) ** 24
        return float(abs(scaled - gmpy2.floor(scaled) - gmpy2.mpfr("0.5")))


def in_binary64(op: str, bits: int) -> int:
    with np.errstate(all="ignore"):
        return exact.f32_from_float(float(OPS[op][0](np.float64(exact.decode(bits)))))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keep", type=int, default=12, help="inputs kept per op")
    parser.add_argument("ops", nargs="*", default=sorted(OPS))
    args = parser.parse_args(argv)
    for op in args.ops:
        found = candidates(op)
        ranked = sorted((exact_offset(op, int(b)), int(b)) for b in found)[:args.keep]
        wrong = sum(in_binary64(op, b) != OPS[op][2](b) for _, b in ranked)
        print(f"# {op}: {len(found)} candidates; of the {len(ranked)} nearest, binary64 then "
              f"f32 rounds {wrong} wrongly here", file=sys.stderr)
        print(f'    "{op}": [' + ", ".join(f"0x{b:08x}" for _, b in ranked) + "],")
        for offset, b in ranked:
            print(f"    # 0x{b:08x} {exact.decode(b)!r}: {offset:.3e} ulps from a midpoint"
                  f"{'' if in_binary64(op, b) == OPS[op][2](b) else ' (binary64: wrong)'}",
                  file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
