"""A run's totals, from its checks' records: what the reports are made of. SPEC.md, "Reports".

Each check that runs yields one record (a JSON dict, so that it can ride on a pytest report
from an xdist worker, or come back from a fuzzing process): its name, its outcome, the cases
it ran and their ops, the forward errors and figures it measured, and its divergence, if
any. `Totals` adds records up, the same way for the suite (plugin.py) and for `fuzz`.
"""

from __future__ import annotations

from gradient_conformance.conformance.running import merge_figures
from gradient_conformance.reports.records import Divergence, divergence_from_dict


class Totals:
    """`outcomes`: check -> outcome -> count; `cases`: check -> cases run; `skips`: check
    -> its skip reasons; `ops`: op -> check -> [cases run, divergences]; `ulps`: op -> the
    forward error figures; `figures`: name -> merged figures; `divergences`: in arrival
    order."""

    def __init__(self):
        self.outcomes: dict[str, dict[str, int]] = {}
        self.cases: dict[str, int] = {}
        self.skips: dict[str, set[str]] = {}
        self.ops: dict[str, dict[str, list[int]]] = {}
        self.ulps: dict[str, dict] = {}
        self.figures: dict[str, dict] = {}
        self.divergences: list[Divergence] = []

    def take(self, record: dict) -> Divergence | None:
        """Add one check's record; its divergence, if it has one."""
        check = record["check"]
        per_check = self.outcomes.setdefault(check, {})
        per_check[record["outcome"]] = per_check.get(record["outcome"], 0) + 1
        self.cases[check] = self.cases.get(check, 0) + record.get("cases", 0)
        if record.get("skip"):
            self.skips.setdefault(check, set()).add(record["skip"])
        for op, cases in record.get("ops", {}).items():
            self.ops.setdefault(op, {}).setdefault(check, [0, 0])[0] += cases
        self.ulps.update(record.get("ulps", {}))
        for name, values in record.get("figures", {}).items():
            self.figures[name] = merge_figures(self.figures.get(name, {}), values)
        if record.get("divergence") is None:
            return None
        d = divergence_from_dict(record["divergence"])
        self.divergences.append(d)
        for op in d.ops:
            self.ops.setdefault(op, {}).setdefault(check, [0, 0])[1] += 1
        return d
