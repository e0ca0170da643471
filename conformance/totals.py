"""A run's totals, from its checks' records: what the reports are made of.
docs/reports.md, "Reports".

Each check that runs yields one record (a JSON dict, so that it can ride on a pytest report
from an xdist worker, or come back from a fuzzing process): its name, its outcome, the cases
it ran and their ops, the forward errors and figures it measured, and its divergence, if
any (with `more`: those of other signatures it found on a second look). `Totals` adds
records up, the same way for the suite (plugin.py) and for `fuzz`.
"""

from __future__ import annotations

from gradient_conformance.conformance.tallies import merge_figures
from gradient_conformance.reports.records import Divergence, divergence_from_dict


class Totals:
    """`outcomes`: check -> outcome -> count; `areas`: area -> outcome -> count (a test in
    its area of the rubric); `cases`: check -> cases run; `skips`: check
    -> its skip reasons; `ops`: op -> check -> [cases run, divergences]; `conditions`:
    check -> condition -> cases that took it (reference/conditions.py); `ulps`: op -> the
    forward error figures; `figures`: name -> merged figures; `divergences`: in arrival
    order."""

    def __init__(self):
        self.outcomes: dict[str, dict[str, int]] = {}
        # area -> outcome -> count: the tests of each area of the rubric (docs/grading.md)
        self.areas: dict[str, dict[str, int]] = {}
        self.cases: dict[str, int] = {}
        self.skips: dict[str, set[str]] = {}
        self.ops: dict[str, dict[str, list[int]]] = {}
        self.conditions: dict[str, dict[str, int]] = {}  # check -> condition -> cases
        self.generated: set[str] = set()  # the checks Hypothesis drives
        self.ulps: dict[str, dict] = {}
        self.figures: dict[str, dict] = {}
        # check -> how (tallies.HOW) -> outputs compared; check -> why -> outputs left out
        # (docs/suite.md, "What a pass compared").
        self.compared: dict[str, dict[str, int]] = {}
        self.left_out: dict[str, dict[str, int]] = {}
        self.divergences: list[Divergence] = []
        self.known: dict[str, int] = {}  # a --known entry -> the checks that found it again
        # What had to be ended of the implementation: [processes left behind, restarts for
        # memory] (docs/isolation.md, "Isolation").
        self.ended = [0, 0]

    def take(self, record: dict) -> list[Divergence]:
        """Add one check's record; its divergences (the first, then any more). A record is
        data from another process: ValueError, and nothing added, unless it is well formed."""
        found = _checked(record)
        check = record["check"]
        per_check = self.outcomes.setdefault(check, {})
        per_check[record["outcome"]] = per_check.get(record["outcome"], 0) + 1
        area = record.get("area", "")
        if area:
            per_area = self.areas.setdefault(area, {})
            per_area[record["outcome"]] = per_area.get(record["outcome"], 0) + 1
        self.cases[check] = self.cases.get(check, 0) + record.get("cases", 0)
        if record.get("skip"):
            self.skips.setdefault(check, set()).add(record["skip"])
        for op, cases in record.get("ops", {}).items():
            self.ops.setdefault(op, {}).setdefault(check, [0, 0])[0] += cases
        if record.get("generated") is True:
            self.generated.add(check)
        per_check_conditions = self.conditions.setdefault(check, {})
        for name, count in condition_counts(record.get("conditions")).items():
            per_check_conditions[name] = per_check_conditions.get(name, 0) + count
        self.ulps.update(record.get("ulps", {}))
        for k, n in enumerate(record.get("ended", [])):
            self.ended[k] += n
        for name, values in record.get("figures", {}).items():
            self.figures[name] = merge_figures(self.figures.get(name, {}), values)
        for field, into in (("compared", self.compared), ("left_out", self.left_out)):
            counts = into.setdefault(check, {})
            for key, n in record.get(field, {}).items():
                counts[key] = counts.get(key, 0) + n
        for entry in record.get("known", []):
            self.known[entry] = self.known.get(entry, 0) + 1
        for d in found:
            d.area = area
            self.divergences.append(d)
            for op in d.ops:
                self.ops.setdefault(op, {}).setdefault(check, [0, 0])[1] += 1
        return found


def _checked(record) -> list[Divergence]:
    """The divergences of a well-formed record, or ValueError saying what is wrong."""
    if not isinstance(record, dict):
        raise ValueError(f"a check's record is {type(record).__name__}, not an object")
    for name, kind in (("check", str), ("area", str), ("outcome", str), ("cases", int),
                       ("skip", str), ("ops", dict), ("ulps", dict), ("figures", dict),
                       ("more", list), ("known", list), ("compared", dict),
                       ("left_out", dict)):
        value = record.get(name, kind())
        if not isinstance(value, kind) or isinstance(value, bool) or \
                (name in ("check", "outcome") and not value):
            raise ValueError(f"a check's record whose {name!r} is not a {kind.__name__}")
    if not all(isinstance(k, str) and type(v) is int for k, v in record.get("ops", {}).items()):
        raise ValueError("a check's record whose 'ops' are not op -> cases")
    if not all(isinstance(k, str) and type(v) is int and v >= 0
               for field in ("compared", "left_out") for k, v in record.get(field, {}).items()):
        raise ValueError("a check's record whose 'compared' or 'left_out' are not counts")
    if not all(isinstance(entry, str) for entry in record.get("known", [])):
        raise ValueError("a check's record whose 'known' are not entries")
    if not all(isinstance(v, dict) for v in (*record.get("ulps", {}).values(),
                                             *record.get("figures", {}).values())):
        raise ValueError("a check's record whose 'ulps' or 'figures' are not objects")
    if not all(isinstance(v, int | float) and not isinstance(v, bool)
               for figures in record.get("figures", {}).values() for v in figures.values()):
        raise ValueError("a check's record whose figures are not numbers")
    ended = record.get("ended", [0, 0])
    if not isinstance(ended, list) or len(ended) != 2 or not all(
            type(n) is int and n >= 0 for n in ended):
        raise ValueError("a check's record whose 'ended' is not two counts")
    if record.get("divergence") is None:
        return []
    return [divergence_from_dict(record["divergence"])] + [
        divergence_from_dict(m) for m in record.get("more", [])]


def condition_counts(value) -> dict[str, int]:
    """A record's conditions: the model's names with whole counts, whatever else came back
    (a record is data from another process)."""
    from gradient_conformance.reference.conditions import MEASURED
    if not isinstance(value, dict):
        return {}
    return {k: v for k, v in value.items() if k in MEASURED and type(v) is int and v > 0}


def coverage(per_check: dict[str, dict[str, int]], generated=frozenset()) -> dict:
    """How much of the model of conditions a run took (docs/generators.md, "Conditions"): the
    model's
    size, how many conditions some check took, and those none did, in the model's order;
    and how many the `generated` checks (those Hypothesis drives) took alone, named."""
    from gradient_conformance.reference.conditions import CONDITIONS, PAIRS, PRODUCTS
    reached = {name for counts in per_check.values() for name in counts}
    by_generated = {name for check, counts in per_check.items() if check in generated
                    for name in counts}
    return {"model": len(CONDITIONS), "reached": len(reached & set(CONDITIONS)),
            "unreached": [name for name in CONDITIONS if name not in reached],
            "says": {name: c.says for name, c in CONDITIONS.items() if name not in reached},
            "generated": sorted(c for c in generated if c in per_check),
            "generated_reached": len(by_generated & set(CONDITIONS)),
            "checks": {check: len(set(counts) & set(CONDITIONS))
                       for check, counts in per_check.items()},
            "products": _share(PRODUCTS, reached, by_generated),
            "pairs": _share(PAIRS, reached, by_generated)}


def _share(model, reached: set[str], by_generated: set[str]) -> dict:
    """How much of `model` (the products or the pairs) a run took, and its generated checks
    alone."""
    return {"model": len(model), "reached": len(reached & set(model)),
            "generated_reached": len(by_generated & set(model))}
