"""What the terminal shows of a run: a divergence as a failed check's text, and the lines of
the run's figures. docs/reports.md, "Reports". Pure functions of the records, as html.py is."""

from __future__ import annotations

from gradient_conformance.reports.records import Divergence

SHOWN_VALUES = 16  # input values per slot in the terminal
LINE_LIMIT = 160  # characters of a program's line in the terminal; the report keeps it whole
MESSAGE_LINES = 40  # lines of what the implementation said, in the terminal; the report: all


def cut(line: str, limit: int = LINE_LIMIT) -> str:
    """A program's line as the terminal shows it: whole up to `limit` characters, else its
    start and end with how much is left out between them, said."""
    if len(line) <= limit:
        return line
    head, tail = line[:limit - 60], line[-30:]
    return (f"{head} ... [{len(line) - len(head) - len(tail)} characters cut, of "
            f"{len(line)}; the report has the line whole] ... {tail}")


def terminal_text(d: Divergence, *, shown_before: str = "") -> str:
    """A divergence as the terminal shows a failed check: what differs, the program (the
    case's, not the suite's source) with the lines that made the differing slot marked, the
    inputs in decimal and hex, what the implementation said (MESSAGE_LINES of it at most;
    only named, as `shown_before`, for a crash whose cause an earlier divergence showed),
    and how to replay it."""
    out = [d.summary] + ([d.description] if d.description and d.description != d.summary
                         else [])
    tape = is_tape(d)
    if d.source:
        marked = set(d.highlight)
        if tape:
            out.append("--- the tape" + (" (the entry marked > is the first whose derivative "
                                         "differs)" if marked else "") + " ---")
            out += [f"{'>' if k in marked else ' '} {cut(line)}"
                    for k, line in enumerate(d.source.splitlines(), start=1)]
        else:
            # A missed rejection marks its gradients (divergence.py), any other divergence
            # the stores of the first differing slot.
            marks = "are the gradients the spec rejects" if d.expected_status == "rejected" \
                else "store the first differing slot"
            out.append("--- the program" + (f" (lines marked > {marks})" if marked else "")
                       + " ---")
            out += [f"{'>' if k in marked else ' '}{k:4}  {cut(line)}"
                    for k, line in enumerate(d.source.splitlines(), start=1)]
    if d.reduction:
        out.append(d.reduction)
    if d.inputs:
        out.append("--- inputs ---")
        for slot in d.inputs:
            pairs = [value if value == bits else f"{value} ({bits})"
                     for value, bits in zip(slot["values"], slot["bits"], strict=False)]
            more = len(pairs) - SHOWN_VALUES
            out.append(f"slot {slot['slot']} {slot['dtype']}{slot['shape']}: "
                       + "  ".join(pairs[:SHOWN_VALUES]) + (f"  ... {more} more" if more > 0
                                                            else ""))
    if d.elements:
        out.append("--- differing derivatives ---" if tape else "--- differing elements ---")
        out += [f"{f'entry {e.index}' if tape else f'slot {e.slot}[{e.index}]'}: expected "
                f"{e.expected} ({e.expected_bits}), got {e.actual} ({e.actual_bits})"
                + ("" if e.ulps is None else f", {e.ulps} ulps apart")
                for e in d.elements]
    if tape and d.trace:
        out += ["--- the reference's backprop, from the last entry (shares in arrival "
                "order) ---", d.trace]
    if d.actual_message and d.actual_message not in d.summary and shown_before:
        out.append(f"--- the implementation said: the same crash as an earlier divergence of "
                   f"this run ({shown_before}); its message is shown in full once, there ---")
    elif d.actual_message and d.actual_message not in d.summary:
        # Each of its lines marked as its own, so that none reads as one of the suite's.
        said = d.actual_message.splitlines()
        if len(said) > MESSAGE_LINES:  # a student's exception may print thousands of lines
            cut_out = len(said) - MESSAGE_LINES
            said = [*said[:MESSAGE_LINES // 2],
                    f"... [{cut_out} lines cut, of {len(said)}; the report has them all] ...",
                    *said[-MESSAGE_LINES // 2:]]
        out += ["--- the implementation said ---", *(f"| {line}" for line in said)]
    if d.diagnosis_line:
        out.append(d.diagnosis_line)
    if d.location_line:
        out.append(d.location_line)
    if d.case_file:
        out.append(f"case file: {d.case_file}")
    if d.replay:
        out.append(f"replay:    {d.replay}")
    return "\n".join(out)


def is_tape(d: Divergence) -> bool:
    """Whether a divergence is a tape's (backprop's), not a program's: its case file, named
    by the suite from its content, is a tape's JSON."""
    return d.case_name.endswith(".json")


def figures_lines(figures: dict[str, dict]) -> list[str]:
    """The run's figures in words, one line for each kind measured."""
    return [WRITERS[name](values) for name, values in sorted(figures.items())
            if name in WRITERS]


def _derivative(measured: dict) -> str:
    """The derivative check's figures: what was measured, and against what bound."""
    outputs, over = measured.get("outputs", 0), measured.get("over", 0)
    k, c = measured.get("bound_K", "?"), measured.get("bound_C", "?")
    diverged = measured.get("diverged", 0)
    verdict = (f"{over} of {outputs} outputs beyond it" if over else
               f"every one of {outputs} outputs within it")
    if diverged:  # a failed check's figures are of the cases before its divergences
        verdict = (f"{diverged} divergences found (above); of the {outputs} outputs "
                   f"measured before, {over} outputs beyond it")
    reruns = measured.get("reruns", 0)
    return (f"gradients against the true derivative: {measured.get('cases', 0)} cases "
            + (f"(and {reruns} re-runs while shrinking, not counted) " if reruns else "")
            + f"({measured.get('differenced', 0)} gradients by 50-digit finite differences, "
            f"the rest read over the reals); the bound is K = {k} times the reference's own "
            f"f32 error there plus C = {c} ulps of the true value: {verdict}, the worst "
            f"{_share(measured.get('max_used', 0.0))}")


def _share(used: float) -> str:
    """How much of its bound the worst output used: a percentage, or a multiple past 100."""
    return f"at {used:.0%} of its bound" if used < 100 else f"at {used:.3g} times its bound"


WRITERS = {"derivative": _derivative}


def failure_stage_lines(divergences: list[Divergence], run: float, budget: float) -> list[str]:
    """What reducing and explaining the run's divergences cost, together and each, against
    the run's time and their one budget (docs/diagnosis.md, "The failure stage")."""
    from gradient_conformance.reports.records import counted
    reduced = [d.reduce_seconds for d in divergences if d.reduction.startswith("reduced: from")]
    explained = [d.diagnosis.get("seconds", 0.0) + d.location.get("seconds", 0.0)
                 for d in divergences if "tried" in d.diagnosis]
    if not reduced and not explained:
        return []
    probes = sum(d.location.get("runs", 0) for d in divergences)
    both = sum(reduced) + sum(explained)
    return [f"reduction and explanation: {counted(len(reduced), 'divergence')} reduced in "
            f"{sum(reduced):.1f} s; {counted(len(explained), 'divergence')} re-run under the "
            f"catalogue's variants, confirmed and probed ({counted(probes, 'run')} of the "
            f"implementation) in {sum(explained):.1f} s; together {both:.1f} s, "
            f"{100 * both / max(run, 1e-9):.1f}% of the run's {run:.0f} s (their budget: "
            f"{budget:.0f} s)"]


def compared_lines(compared: dict[str, dict[str, int]],
                   left_out: dict[str, dict[str, int]]) -> list[str]:
    """What the checks compared, in all and per check (docs/suite.md, "What a pass
    compared"): outputs bit for bit, within the declared ulps, against the true derivative,
    statuses; then what was left out, and why."""
    def said(counts: dict[str, int]) -> str:
        return ", ".join(f"{n} {how}" for how, n in counts.items() if n) or "nothing"
    total: dict[str, int] = {}
    for counts in compared.values():
        for how, n in counts.items():
            total[how] = total.get(how, 0) + n
    lines = [f"compared: {said(total)} (outputs; statuses by kind)"]
    lines += [f"  {check}: {said(counts)}" for check, counts in sorted(compared.items())
              if any(counts.values())]
    reasons: dict[str, int] = {}
    for counts in left_out.values():
        for why, n in counts.items():
            reasons[why] = reasons.get(why, 0) + n
    lines += [f"left out: {n} outputs {why}" for why, n in sorted(reasons.items())]
    return lines
