"""Where an implementation departs from the spec: the statement a divergence starts at.
SPEC.md, "Diagnosis" (Location).

After a check has found (and Hypothesis has shrunk) a divergence of values, the suite asks the
implementation more questions through the same protocol, on the same inputs:

- **Forward.** The program again, with probe slots that store the values of the top-level
  statements in the cone of the first differing slot. The first of them (in program order)
  whose value differs, all its operands probed agreeing, is the place.
- **Gradients.** When that place is a `gradient` statement whose loss and x agree, the
  program again with `gradient y u` stored for the nodes u of its walk that have names. The
  first node of the walk whose adjoint differs while every node that sends it a share agrees
  names the share that went wrong (one sender) or the fold of its shares (several).
- **Hash consing.** A gradient against a node that, by hash consing, is a node an earlier
  gradient's expansion built is said to be that, rather than a numeric error.
- **Refusals.** An implementation that rejects a valid program, or fails to run it: the
  shortest prefix of the program (cut between top-level statements) that it refuses the
  same way, found by bisection, names the statement it starts to.

Probes are bounded (MAX_PROBES slots a run, at most two runs of the implementation, or
for a refusal one build a halving of the program), honour
the implementation's declared unsupported features, and never change a verdict: a probe
program the implementation refuses, or that makes it give other results for the original
slots, ends the location with the reason.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass

import numpy as np

from gradient_conformance.conformance.outcome import Outcome, compare
from gradient_conformance.conformance.running import Reading
from gradient_conformance.reference import SPEC, exact
from gradient_conformance.reference.errors import IRError
from gradient_conformance.reference.gradient import post_order
from gradient_conformance.reference.program import Define, Loop, Program, Store, walk

MAX_PROBES = 48  # probe slots in one run of the implementation


@dataclass
class Location:
    """`line`: the statement located (0 when not located); `kind`: what departs there (a
    value, a share, a fold, a blocked edge, hash consing, a rejection; for tapes, a share or
    a sum); `op`: the statement's op; `says`: where and what, in one sentence; `reason`:
    why nothing was located; `probes` and `runs`: what it cost."""

    line: int = 0
    says: str = ""
    reason: str = ""
    kind: str = ""
    op: str = ""
    probes: int = 0
    runs: int = 0
    seconds: float = 0.0  # what finding it cost

    def text(self) -> str:
        """The location in one line, as the terminal shows it."""
        if self.line:
            return f"location: {self.says}"
        return f"location: none ({self.reason})"

    def to_dict(self) -> dict:
        return asdict(self)


def locate(impl, reading: Reading, buffers, want: Outcome, got: Outcome, *,
           rule: str | None = None) -> Location:
    """Where `got` departs from `want` on this program, asking `impl` what it must."""
    if got.status == "failure":
        return Location(reason="the implementation misbehaved (a crash, a timeout or junk): "
                        "there is no value to probe")
    statements = reading.statements or []
    if rule is not None or (want.status == "rejected" and got.status == "ok"):
        lines = [s.line for s in statements if s.op == "gradient"]
        if len(lines) == 1:
            return Location(lines[0], f"line {lines[0]}, `{_text(reading, lines[0])}`: the "
                            f"spec rejects it{f' [{rule}]' if rule else ''}; the "
                            "implementation accepts it", kind="rejection", op="gradient")
        return Location(reason="the spec rejects the program; the implementation accepts "
                        "it (the rule is named above)")
    if want.status == "ok" and got.status in ("rejected", "run-error") and statements:
        return _Probe(impl, reading, None, buffers, want, got).refusal()
    if want.status != "ok" or got.status != "ok":
        return Location(reason=f"the spec's outcome is {want.status} and the implementation's "
                        f"{got.status}: a status, not a value to probe")
    try:
        program = reading.program()
    except IRError:
        return Location(reason="the program does not build")
    difference = compare(want, got)
    if difference is None or not difference.elements:
        return Location(reason="the outputs agree bit for bit (the check compared them "
                        "otherwise)")
    return _Probe(impl, reading, program, buffers, want, got).forward(
        difference.elements[0].slot)


class _Probe:
    @property
    def built(self) -> Program:
        """The spec's program: the probes that read it run only where the reference built
        it."""
        assert self.program is not None
        return self.program

    def __init__(self, impl, reading: Reading, program: Program | None, buffers, want: Outcome,
                 got: Outcome):
        self.impl, self.reading, self.program = impl, reading, program
        self.buffers, self.want, self.got = buffers, want, got
        defines = [d for d in program.statements if isinstance(d, Define)] if program else []
        self.names = {d.node: d for d in defines}
        self.restated: dict = {}  # node -> every top-level statement naming it
        for d in defines:
            self.restated.setdefault(d.node, []).append(d)
        self.runs = self.probes = 0
        self.started = time.monotonic()

    def done(self, line: int = 0, says: str = "", reason: str = "", kind: str = "") -> Location:
        op = next((st.op for st in self.reading.statements or [] if st.line == line), "")
        return Location(line, says, reason, kind, op, self.probes, self.runs,
                        time.monotonic() - self.started)

    def refusal(self) -> Location:
        """Where an implementation that refuses a valid program (a rejection, a run-time
        error) starts to: the shortest prefix of the program, cut between top-level
        statements, that it refuses the same way, found by bisection (each prefix a program
        the spec accepts)."""
        units = _top_level_units(self.reading.statements)
        lines = self.reading.source.splitlines()

        def refused(k: int) -> bool | None:
            prefix = Reading("\n".join(lines[:units[k][1]]) + "\n")
            buffers = {s: a for s, a in self.buffers.items() if s in prefix.slots}
            if prefix.outcome(buffers).status != "ok":
                return None
            self.runs += 1
            got = self.impl.run_case(prefix.source, buffers, prefix.slots) \
                if self.got.status == "run-error" else self.impl.build_only(prefix.source)
            return got.status == self.got.status
        low, high = 0, len(units) - 1  # the whole program is refused: high holds
        while low < high:
            middle = (low + high) // 2
            answer = refused(middle)
            if answer is None:
                return self.done(reason="a prefix of the program is not one the spec accepts")
            low, high = (low, middle) if answer else (middle + 1, high)
        line = units[low][0]
        said = self.got.message.splitlines()[0][:200] if self.got.message else ""
        return self.done(line, (
            f"line {line}, `{_text(self.reading, line)}`: the implementation "
            f"{'rejects' if self.got.status == 'rejected' else 'fails to run'} the program "
            f"from this statement on, where the spec accepts it"
            + (f" ({said})" if said else "")), kind=self.got.status)

    def forward(self, slot: int) -> Location:
        buffer = self.built.buffers.get(slot)
        if buffer is not None and not any(s.buffer is buffer for s in stores(self.program)):
            return self.done(buffer.line, (
                f"line {buffer.line}, `{_text(self.reading, buffer.line)}`: the program never "
                "stores into this slot, so it ends as it began; the implementation's ends "
                f"otherwise: {_values(compare(self.want_of(slot), self.got_of(slot)))}"),
                kind="unwritten")
        in_cone, _ = cone(self.program, slot)
        defines = [d for d in self.built.statements if isinstance(d, Define) and
                   d.node in in_cone and d.node.op != "buffer"][:MAX_PROBES]
        if not defines:
            return self._literal_stored(slot) or self._inside_a_loop(in_cone, slot) or self.done(
                reason="no named top-level value in the differing slot's cone (a literal, or "
                "a value made inside a call)")
        values = self.ask([(d.name, d.node) for d in defines])
        if isinstance(values, str):
            return self.done(reason=values)
        for d in defines:
            if values[d.name] is None:
                continue
            differing = [o for o in d.node.operands if o in self.names and
                         values.get(self.names[o].name) is not None]
            if differing:
                continue
            if d.expansion is not None:
                return self.gradient(d, values[d.name])
            return self.done(d.line, f"line {d.line}, `{_text(self.reading, d.line)}`: "
                             f"{_values(values[d.name])}, operands equal", kind="value")
        return self._inside_a_loop(in_cone, slot) or self.done(
            reason="every value probed agrees: the difference arises in a store or a call")

    def _literal_stored(self, slot: int) -> Location | None:
        """A top-level store of a literal into `slot`: the literal is the value that
        differs (its reading: SPEC.md, "Text form"). Of several, the one stored at the
        first differing element's index."""
        difference = compare(self.final_of(slot), self.got_of(slot))
        index = difference.elements[0].index
        stores = [s for s in self.built.statements if isinstance(s, Store) and
                  s.buffer is self.built.buffers[slot] and s.value.is_literal]
        stores.sort(key=lambda s: s.index is None or s.index.attr("value") != index)
        if not stores:
            return None
        line = stores[0].line
        return self.done(line, f"line {line}, `{_text(self.reading, line)}`: the literal it "
                         f"stores; {_values(difference)}", kind="literal")

    def want_of(self, slot: int) -> Outcome:
        """The slot's initial contents."""
        return Outcome("ok", {slot: self.buffers[slot]})

    def final_of(self, slot: int) -> Outcome:
        """The slot's final contents by the spec."""
        return Outcome("ok", {slot: self.want.buffers[slot]})

    def got_of(self, slot: int) -> Outcome:
        return Outcome("ok", {slot: self.got.buffers[slot]})

    def _inside_a_loop(self, in_cone: set, slot: int) -> Location | None:
        """The outermost range whose body stores into `slot` or makes a value of its cone:
        the values of a body are not probed (they change with each iteration)."""
        for loop in self.built.statements:
            if not isinstance(loop, Loop):
                continue
            inside = any(s.buffer.attr("slot") == slot if isinstance(s, Store) else
                         isinstance(s, Define) and s.node in in_cone for s in walk(loop.body))
            if inside:
                return self.done(loop.line, (
                    f"line {loop.line}, `{_text(self.reading, loop.line)}`: every value "
                    "probed outside it agrees, and the differing slot is made in its body, "
                    "whose values are not probed"), kind="loop")
        return None

    def gradient(self, d: Define, difference) -> Location:
        """Where the gradient statement `d` departs, its loss and x agreeing."""
        x, y = d.expansion.x, d.expansion.y
        x_define, y_define = self.names.get(x), self.names.get(y)
        made = _made_by_gradient(self.program, x)
        if made is not None and x_define is not None and made.line not in (x_define.line,
                                                                           d.line):
            return self.done(d.line, (
                f"line {d.line}, `{_text(self.reading, d.line)}`: {x_define.name} (line "
                f"{x_define.line}) is, by hash consing, the node the gradient on line "
                f"{made.line} built, so this gradient is taken against that node (SPEC.md, "
                f"\"Hash consing\"); {_values(difference)}, as if they were kept apart"),
                kind="hash-consing")
        walked = [v.node for v in d.expansion.visits if v.node in self.names
                  and v.node is not y and v.node is not x]
        walked = self._valid(y_define, walked)[:MAX_PROBES] if y_define else []
        adjoints = self.ask([(self.names[u].name, u, y_define.name) for u in walked]) \
            if walked and y_define else {}
        if isinstance(adjoints, str):
            return self.done(reason=adjoints)
        # The walk visits every sender of a node before the node: the first node whose
        # adjoint differs has senders whose adjoints agree (or were not probed).
        for v in d.expansion.visits:
            if v.node is y:
                continue
            if v.node is x:
                adjoint, shown = difference, x_define.name if x_define else "x"
            elif v.node in walked:
                adjoint, shown = adjoints[self.names[v.node].name], self.names[v.node].name
            else:
                continue
            if adjoint is None:
                continue
            senders = [s for s in v.senders if s is not None]
            same = self.restated.get(v.node, [])
            if len(same) > 1:
                named = " and ".join(f"{n.name} (line {n.line})" for n in same)
                return self.done(same[0].line, (
                    f"line {same[0].line}, `{_text(self.reading, same[0].line)}`: by hash "
                    f"consing, {named} are one node (SPEC.md, \"Hash consing\"), whose "
                    f"adjoint in the gradient on line {d.line} sums the shares of every use "
                    f"of either: {_values(adjoint)}, as an implementation that kept them apart "
                    "would give"),
                    kind="hash-consing")
            blocked = _blocked(d.expansion, v.node)
            if blocked:
                return self._blocked_edge(d, blocked[0], shown, adjoint, senders)
            if len(senders) <= 1:
                line = senders[0].line if senders else y.line
                return self.done(line, (
                    f"line {line}, `{_text(self.reading, line)}`: the share it sends to "
                    f"{shown} in the gradient on line {d.line}; the adjoint of {shown}: "
                    f"{_values(adjoint)}, every adjoint before it agreeing"), kind="share")
            named = ", ".join(self.names[s].name if s in self.names else "?" for s in senders)
            return self.done(v.node.line, (
                f"line {v.node.line}, `{_text(self.reading, v.node.line)}`: the fold of the "
                f"{len(senders)} shares {shown} receives (from {named}) in the gradient on line "
                f"{d.line}: {_values(adjoint)}, every sender's adjoint agreeing"), kind="fold")
        blocked = _blocked(d.expansion)
        if blocked:
            shown = x_define.name if x_define else "x"
            return self._blocked_edge(d, blocked[0], shown, difference, [])
        return self.done(reason=f"the gradient on line {d.line} differs, but no adjoint "
                         "probed locates it")

    def _blocked_edge(self, d: Define, edge, shown: str, adjoint, senders) -> Location:
        """A node whose rule passes nothing to an operand on the way to x (a detach, a cast
        to i32): an implementation that lets the gradient through departs there, unless a
        share the spec does send is what differs (`senders`, said too)."""
        user, operand = edge
        line = user.line
        towards = self.names[operand].name if operand in self.names else "its operand"
        others = ", ".join(f"{self.names[s].name} (line {s.line})" if s in self.names else
                           f"line {s.line}" for s in senders)
        return self.done(line, (
            f"line {line}, `{_text(self.reading, line)}`: the spec passes no share through it "
            f"to {towards} in the gradient on line {d.line}; the adjoint of {shown}: "
            f"{_values(adjoint)}, as if a share went through"
            + (f" (or the share {others} sends differs)" if others else "")), kind="blocked")

    def _valid(self, y: Define, nodes: list) -> list:
        """The nodes u for which `gradient y u` is a program the spec accepts here: all of
        them at once when it accepts them together (one build), else one by one."""
        def accepted(some) -> bool:
            lines = "".join(f"%__valid{k} = gradient {y.name} {self.names[u].name}\n"
                            for k, u in enumerate(some))
            try:
                Reading(self.reading.source + lines).program()
            except IRError:
                return False
            return True
        if accepted(nodes):
            return nodes
        return [u for u in nodes if accepted([u])]

    def ask(self, wanted: list[tuple]) -> dict[str, object] | str:
        """Probe each (name, node) value (or, with a third element y, `gradient y name`):
        name -> its first differing element's Difference, or None where it agrees; or why
        it could not be asked."""
        slots = self.reading.slots
        base = max(slots, default=-1) + 1
        lines, buffers, probes = [], dict(self.buffers), {}
        for k, (name, node, *y) in enumerate(wanted):
            slot, probe = base + k, f"%__probe{k}"
            lines.append(f"{probe} = buffer slot={slot} dtype={node.dtype} "
                         f"shape=[{', '.join(map(str, node.shape))}]")
            value = name
            if y:
                value = f"%__adjoint{k}"
                lines.append(f"{value} = gradient {y[0]} {name}")
            lines.append(f"store {probe} {value}")
            buffers[slot] = np.zeros(node.shape, {"f32": np.float32, "i32": np.int32,
                                                  "bool": np.bool_}[node.dtype])
            probes[slot] = name
        source = self.reading.source.rstrip("\n") + "\n" + "\n".join(lines) + "\n"
        probed = Reading(source)
        if probed.features & self.impl.unsupported():
            return "the probe program uses what the implementation does not support"
        want = probed.outcome(buffers)
        if want.status != "ok":
            return f"the probe program is not valid: {want.message}"
        self.runs += 1
        self.probes += len(wanted)
        got = self.impl.run_case(source, buffers, probed.slots)
        if got.status != "ok":
            return (f"the implementation did not run the probe program: {got.status}"
                    + (f" ({got.message.splitlines()[0][:200]})" if got.message else ""))
        same = {s: a for s, a in got.buffers.items() if s in self.got.buffers}
        if compare(Outcome("ok", self.got.buffers), Outcome("ok", same)) is not None:
            return ("the implementation gave other results for the program's own slots once "
                    "probes were added")
        return {name: compare(Outcome("ok", {s: want.buffers[s]}),
                              Outcome("ok", {s: got.buffers[s]})) for s, name in probes.items()}


def _top_level_units(statements) -> list[tuple[int, int]]:
    """(first line, last line) of each top-level statement, or whole range or def block:
    the places a program can be cut and stay a program."""
    units, depth, start = [], 0, 0
    for s in statements:
        if depth == 0:
            start = s.line
        if s.op in ("def", "range"):
            depth += 1
        elif s.op == "end":
            depth -= 1
        if depth == 0:
            units.append((start, s.line))
    return units


def stores(program: Program) -> list[Store]:
    """Every store of the program, those in range bodies included, in program order."""
    return [s for s in walk(program.statements) if isinstance(s, Store)]


def cone(program: Program, slot: int | None) -> tuple[set, list[Store]]:
    """(the nodes the final value of `slot` depends on, the stores they reach): through
    operands, loads (every store into the loaded buffer) and calls (the instance of the
    body called). From every store when `slot` is None."""
    every = stores(program)
    into: dict = {}
    for s in every:
        into.setdefault(s.buffer, []).append(s)
    reached: list[Store] = []  # in the order reached; a Store hashes by identity
    taken: set = set()
    seen: set = set()
    nodes: list = []

    def take(found) -> None:
        for s in found:
            if s not in taken:
                taken.add(s)
                reached.append(s)
                nodes.extend(n for n in (s.value, s.index) if n is not None)

    take(every if slot is None else into.get(program.buffers.get(slot), []))
    while nodes:
        node = nodes.pop()
        if node in seen:
            continue
        seen.add(node)
        nodes.extend(node.operands)
        if node.op == "load":
            take(into.get(node.operands[0], []))
        elif node.op == "call" and node in program.calls:
            nodes.append(program.calls[node].result)
    return seen, reached


def _blocked(expansion, towards=None) -> list[tuple]:
    """(user, operand) for each edge of y's graph that leads to `towards` (x, unless given)
    but along which the spec lets no gradient flow (a detach, a cast to i32; SPEC.md, "The
    rules"); the nodes nearest y first. A gradient let through such an edge reaches every
    node below it."""
    towards = expansion.x if towards is None else towards
    leads: set = set()
    order = post_order(expansion.y)
    for node in order:  # operands before the nodes that use them
        if node is towards or any(o in leads for o in node.operands):
            leads.add(node)
    return [(node, o) for node in reversed(order) if node in leads and node is not towards
            for o in node.operands if o in leads and not SPEC.flows(node, o)]


def _made_by_gradient(program: Program, node) -> Define | None:
    """The gradient statement whose expansion first made `node`, if one did."""
    for d in program.statements:
        if isinstance(d, Define) and d.expansion is not None and node in d.created:
            return d
    return None


def _values(difference) -> str:
    e = difference.elements[0]
    where = f"[{e.index}]" if e.index or difference.elements[1:] else ""
    return (f"spec{where} {e.expected} ({e.expected_bits}), implementation {e.actual} "
            f"({e.actual_bits})")


def _text(reading: Reading, line: int, limit: int = 100) -> str:
    """Line `line` of the program, as written (cut, if longer than `limit`)."""
    lines = reading.source.splitlines()
    text = lines[line - 1].split("#")[0].strip() if 0 < line <= len(lines) else ""
    return text if len(text) <= limit else f"{text[:limit - 3]}..."


def locate_tape(tape, want: Outcome, got: Outcome) -> Location:
    """Where a tape's derivatives depart: the last entry (the walk runs from the end) whose
    derivative differs while every later entry's agrees. Every derivative is already known,
    so nothing is probed. `line` is the entry's line as the report shows the tape (entry k
    on line k + 1)."""
    difference = compare(want, got)
    if got.status != "ok" or want.status != "ok" or difference is None or \
            not difference.differing:
        return Location(reason="a tape accepted or rejected otherwise, or a failure: no "
                        "derivative to compare")
    wrong = {k for _, k in difference.differing}
    k = max(wrong)
    users = [m for m, entry in enumerate(tape) if m > k and isinstance(entry, list | tuple)
             and k in entry[1:]]
    values = (f"spec {exact.f32_to_text(want.derivatives[k])} (0x{want.derivatives[k]:08x}), "
              f"implementation {exact.f32_to_text(got.derivatives[k])} "
              f"(0x{got.derivatives[k]:08x})")
    if len(users) == 1:
        m = users[0]
        return Location(m + 1, f"entry {m}, {list(tape[m])!r}: the share it sends to entry "
                        f"{k}; the derivative of entry {k}: {values}, every later derivative "
                        "agreeing", kind="share", op=str(tape[m][0]))
    return Location(k + 1, f"entry {k}, {list(tape[k])!r}: the sum of the "
                    f"{len(users) or 'no'} shares it receives"
                    + (f" (from entries {', '.join(map(str, users))})" if users else "")
                    + f": {values}, every later derivative agreeing", kind="sum",
                    op=str(tape[k][0]) if isinstance(tape[k], list | tuple) else "")
