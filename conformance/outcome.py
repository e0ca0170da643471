"""What one case did (`Outcome`), and the one comparison of what was expected with what came
back (`compare`). SPEC.md, "Statuses"; docs/suite.md, "The conformance suite".

Every place that asks whether two outcomes agree asks `compare`: the checks, the divergence
records, diagnosis (is a variant's outcome the implementation's?), the tape checks and
replay. So "agrees" means one thing: the same status (a run-time error blaming an index, as
the reference's does), every f32 element bit for bit or within the ulps allowed (any NaN
matching any NaN, but the poison an output slot starts with matching only itself), every
other element equal.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from gradient_conformance.reference import exact
from gradient_conformance.reference.ops import POISON
from gradient_conformance.reports.records import Element

MAX_ELEMENTS = 16  # differing elements kept for a record; the count of the rest is given


@dataclass
class Outcome:
    """What one case did. `status`: ok (with `buffers`, or a tape's `derivatives` as f32
    bits), rejected (a deliberate answer at build), run-error (`index`: it blamed an index)
    or failure (`reason`: timeout, crash, resource, junk or protocol)."""

    status: str
    buffers: dict[int, np.ndarray] = field(default_factory=dict)
    message: str = ""
    index: bool = False
    derivatives: list[int] = field(default_factory=list)
    reason: str = ""


@dataclass
class Difference:
    """How two outcomes differ. `summary`: the first difference in words a person can act
    on; `kind`: what differs (a status pair, failure, bits, nan, signed-zero, infinity,
    unwritten, value, missing); `elements`: the first MAX_ELEMENTS differing elements;
    `differing`: every differing (slot, index), a tape's derivatives being slot 0."""

    summary: str
    kind: str
    elements: list[Element] = field(default_factory=list)
    differing: frozenset[tuple[int, int]] = frozenset()

    def __str__(self) -> str:
        return self.summary


def _first_line(message: str) -> str:
    """A message's first line, for a summary of one line: its others are shown apart, each
    marked as the implementation's (reports/terminal.py)."""
    first, _, rest = message.partition("\n")
    return first + (" (more lines below)" if rest.strip() else "")


def compare(want: Outcome, got: Outcome, *, ulps: int = 0) -> Difference | None:
    """None when `got` agrees with `want`; else how it differs. Only the slots `want` holds
    are compared (a case file may expect some of a program's slots only)."""
    if got.status == "failure":
        return Difference(f"the implementation misbehaved: {_first_line(got.message)}",
                          "failure")
    if want.status != got.status:
        said = f" ({_first_line(got.message)})" if got.message else ""
        return Difference(f"expected {want.status}, got {got.status}{said}",
                          f"{want.status}->{got.status}")
    if want.status == "run-error" and want.index and not got.index:
        return Difference("expected a run-time error for an index out of range; the run "
                          f"failed, but not blaming an index: {got.message}", "not-an-index")
    if want.status != "ok":
        return None
    if want.derivatives or got.derivatives:
        return _derivatives(want.derivatives, got.derivatives)
    found: list[tuple[Element, str]] = []
    for slot, w in sorted(want.buffers.items()):
        g = got.buffers.get(slot)
        if g is None or g.shape != w.shape or g.dtype != w.dtype:
            shown = "nothing" if g is None else f"{g.dtype}{list(g.shape)}"
            return Difference(f"slot {slot}: expected {w.dtype}{list(w.shape)}, got {shown}",
                              "missing")
        found += _elements(slot, w, g, ulps)
    return _difference(found, "slot {slot}[{index}]")


def agrees(want: Outcome, got: Outcome, *, ulps: int = 0) -> bool:
    return compare(want, got, ulps=ulps) is None


def f32_agree(want: int, got: int, ulps: int = 0) -> bool:
    """Whether an f32 result (bit patterns) agrees: bit for bit, any NaN matching any NaN,
    or within `ulps` of each other for two numbers; but POISON matches only itself, since a
    slot that comes back holding it was left as it started (generators/buffers.py)."""
    if got == POISON != want:
        return False
    if exact.same_f32(want, got):
        return True
    return ulps > 0 and not (exact.is_nan(want) or exact.is_nan(got)) and \
        exact.ulp_distance(want, got) <= ulps


def _derivatives(want: list[int], got: list[int]) -> Difference | None:
    if len(want) != len(got):
        return Difference(f"expected {len(want)} derivatives, got {len(got)}", "missing")
    found = _f32_elements(0, want, got, 0)
    difference = _difference(found, "derivative {index}")
    if difference is not None:
        difference.summary += f"; {len(found)} of {len(want)} derivatives differ"
    return difference


def _elements(slot: int, want: np.ndarray, got: np.ndarray, ulps: int) -> list:
    if want.dtype == np.float32:
        return _f32_elements(slot, want.view(np.uint32).ravel().tolist(),
                             got.view(np.uint32).ravel().tolist(), ulps)
    found = []
    for k in np.flatnonzero(want.ravel() != got.ravel()).tolist():
        a, b = want.ravel()[k].item(), got.ravel()[k].item()
        found.append((Element(slot, k, _text(a), bits_text(a), _text(b), bits_text(b)), "value"))
    return found


def _f32_elements(slot: int, want: list[int], got: list[int], ulps: int) -> list:
    found = []
    for k, (a, b) in enumerate(zip(want, got, strict=True)):
        if not f32_agree(a, b, ulps):
            nan = exact.is_nan(a) or exact.is_nan(b)
            found.append((Element(slot, k, exact.f32_to_text(a), f"0x{a:08x}",
                                  exact.f32_to_text(b), f"0x{b:08x}",
                                  None if nan else exact.ulp_distance(a, b)), _kind(a, b)))
    return found


def _difference(found: list, where: str) -> Difference | None:
    """The Difference of these (element, kind) pairs, or None when there are none."""
    if not found:
        return None
    first, kind = found[0]
    left = " (its initial contents, left unchanged)" if kind == "unwritten" else ""
    apart = "" if first.ulps is None else f", {first.ulps} ulps apart"
    summary = (f"{where.format(slot=first.slot, index=first.index)}: expected "
               f"{_shown(first.expected, first.expected_bits)}, got "
               f"{_shown(first.actual, first.actual_bits)}{left}{apart}")
    return Difference(summary, kind, [e for e, _ in found[:MAX_ELEMENTS]],
                      frozenset((e.slot, e.index) for e, _ in found))


def _kind(a: int, b: int) -> str:
    if b == POISON:
        return "unwritten"
    if exact.is_nan(a) != exact.is_nan(b):
        return "nan"
    if (a | b) & 0x7FFFFFFF == 0:
        return "signed-zero"
    if (a & 0x7FFFFFFF == 0x7F800000) != (b & 0x7FFFFFFF == 0x7F800000):
        return "infinity"
    return "bits"


def _shown(value: str, bits: str) -> str:
    return value if value == bits else f"{value} ({bits})"


def _text(v) -> str:
    return str(v).lower() if isinstance(v, bool) else str(v)


def bits_text(v) -> str:
    """An element that is not f32 as a record shows its bits: a bool's word, an i32's 32
    bits in hex."""
    return str(v).lower() if isinstance(v, bool) else f"0x{v & 0xFFFFFFFF:08x}"
