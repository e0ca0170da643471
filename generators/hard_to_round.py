"""The f32 inputs of exp2, log2 and sin whose exact results lie nearest the midpoint of two
f32: the hardest to round correctly. A result computed in binary64 and then rounded to f32
(a double rounding) can go the wrong way on them, where random inputs almost never meet
one (about one input in 2^28). Each op's list is ordered nearest first.

Found by benchmarks/hard_to_round.py: every f32 input is evaluated in binary64, those whose
result lies within 2^-18 ulps of a midpoint are kept, and each one's exact distance is then
measured with MPFR at 200 bits (tests/test_rounding.py measures them again). Binary64
carries 29 bits more than f32, so it resolves about 2^-29 = 1.9e-9 ulps: on the machine the
table was made on, numpy's binary64 exp2 and sin, rounded to f32, are wrong on two inputs
each (marked), and log2 on none of these. docs/generators.md, "Generators".
"""

from __future__ import annotations

HARD_TO_ROUND: dict[str, tuple[int, ...]] = {
    # 3.2e-11 .. 1.3e-8 ulps from a midpoint; binary64 wrong on 0xbcf3a937 and 0x3b429d37
    "exp2": (0xb52d1f9a, 0xbcf3a937, 0x3b429d37, 0xb8d3d026, 0xbaec2b40, 0x3a07857c,
             0x3c02a9ad, 0x36879cf7, 0xbe1f29de, 0x33b8aa3b, 0x3dc9abe2, 0xb466d4cb),
    # 5.0e-9 .. 7.0e-9 ulps: one mantissa at many exponents (log2 adds the exponent)
    "log2": (0x3ea07ab9, 0x40207ab9, 0x002452a4, 0x0048a548, 0x00914a90, 0x01114a90,
             0x01914a90, 0x02114a90, 0x02914a90, 0x03114a90, 0x03914a90, 0x04114a90),
    # 4.7e-10 .. 2.3e-9 ulps, in pairs of opposite sign; binary64 wrong on +-9830.3984375
    "sin": (0x73243f06, 0xf3243f06, 0x46199998, 0xc6199998, 0x55cafb2a, 0xd5cafb2a,
            0x67a9242b, 0xe7a9242b, 0x4371ade3, 0xc371ade3, 0x5f208d82, 0xdf208d82),
}
