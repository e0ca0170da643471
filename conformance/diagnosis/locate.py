"""Where an implementation departs from the spec: the statement a divergence starts at.
docs/diagnosis.md, "Diagnosis" (Location).

After a check has found (and Hypothesis has shrunk) a divergence of values, the suite asks the
implementation more questions through the same protocol, on the same inputs:

- **Forward.** The program again, with probe slots that store the values of the top-level
  statements in the cone of the first differing slot. The first of them (in program order)
  whose value differs, all its operands probed agreeing, is the place.
- **Gradients.** When that place is a `gradient` statement whose loss and x agree, the
  program again with `gradient y u` stored for the nodes u of its walk that have names. The
  first node of the walk whose adjoint differs while every node that sends it a share agrees
  is where it goes wrong: the share its one sender sends, or, with several, the fold of them
  or any one share. A statement is named only when it is the one place left: one sender and
  no other way in; or, of several places, the only one that a variant which reproduces every
  output (diagnosis) changes. Otherwise the places are listed, as candidates.
- **Hash consing.** A gradient against a node that, by hash consing, is a node an earlier
  gradient's expansion built is said to be that, in the spec's terms, beside the rule forms
  of that gradient (which decide which nodes it builds); the same variant test decides.
- **Refusals.** An implementation that rejects a valid program, or fails to run it: the
  shortest prefix of the program (cut between top-level statements) that it refuses the
  same way, found by bisection, names the statement it starts to.

Values are compared as the check compared them (within the ulps it allowed). Probes are
bounded (MAX_PROBES slots a run, at most two runs of the implementation, or
for a refusal one build a halving of the program), honour
the implementation's declared unsupported features, and never change a verdict: a probe
program the implementation refuses, or that makes it give other results for the original
slots, ends the location with the reason.
"""

from __future__ import annotations

import functools
import re
import time
from dataclasses import asdict, dataclass, field

import numpy as np

from gradient_conformance.conformance.diagnosis.variants import CATALOGUE, parts
from gradient_conformance.conformance.outcome import Outcome, compare
from gradient_conformance.conformance.readings import Reading
from gradient_conformance.conformance.running import traps
from gradient_conformance.reference import SPEC, exact
from gradient_conformance.reference.errors import IRError
from gradient_conformance.reference.gradient import post_order, reachable
from gradient_conformance.reference.interp import EXACT, NUMPY_DTYPES, Interpreter, from_numpy
from gradient_conformance.reference.program import (
    Define,
    Loop,
    Program,
    Store,
    cone,
    made_by_gradient,
    stores,
    walk,
)
from gradient_conformance.reference.rules import rule_key
from gradient_conformance.reference.tape import LEAVES
from gradient_conformance.reports.records import raised_at

MAX_PROBES = 48  # probe slots in one run of the implementation


@dataclass
class Location:
    """`line`: the statement located (0 when not located); `kind`: what departs there (a
    value, a share, a fold, a blocked edge, hash consing, a rejection; for tapes, a share or
    a sum); `op`: the statement's op; `says`: where and what, in one sentence; `reason`:
    why nothing was located; `candidates`: the lines of the places the probes could not
    tell apart (`says` lists them); `decided_by`: the answers that decided it, each a
    probe's (or the check's own outputs', or a variant's) in one phrase; `probes` and `runs`:
    what it cost."""

    line: int = 0
    says: str = ""
    reason: str = ""
    kind: str = ""
    op: str = ""
    probes: int = 0
    runs: int = 0
    seconds: float = 0.0  # what finding it cost
    candidates: list[int] = field(default_factory=list)
    decided_by: list[str] = field(default_factory=list)

    def text(self) -> str:
        """The location in one line, as the terminal shows it, with what decided it."""
        if self.line or self.candidates:
            decided = f" Decided by: {'; '.join(self.decided_by)}." if self.decided_by else ""
            return f"location: {self.says}{decided}"
        return f"location: none ({self.reason})"

    def to_dict(self) -> dict:
        return asdict(self)


def locate(impl, reading: Reading, buffers, want: Outcome, got: Outcome, *,
           rule: str | None = None, ulps: int = 0, variants=()) -> Location:
    """Where `got` departs from `want` on this program, asking `impl` what it must; values
    compared within `ulps`, as the check compared them. `variants`: the names of those
    that reproduce every output (diagnosis), which may decide between candidates."""
    statements = reading.statements or []
    if got.status == "failure":
        how = failed_as(got.message)
        if how is not None and want.status == "ok" and statements:
            return _Probe(impl, reading, None, buffers, want, got).refusal(how)
        return Location(reason="the implementation misbehaved (a timeout, junk, or a failure "
                        "that names no signal and no exception of its code): there is no "
                        "value to probe, and no one way of failing to find the start of")
    if rule is not None or (want.status == "rejected" and got.status == "ok"):
        lines = [s.line for s in statements if s.op == "gradient"]
        if len(lines) == 1:
            return Location(lines[0], f"line {lines[0]}, `{_text(reading, lines[0])}`: the "
                            f"spec rejects it{f' [{rule}]' if rule else ''}; the "
                            "implementation accepts it", kind="rejection", op="gradient",
                            decided_by=["no probe: the check's own run, in which the "
                                        "implementation accepted the program, and the "
                                        "program's one gradient"])
        said = f" [{rule}]" if rule else ""
        why = f" ({want.message[:200]})" if want.message and want.message != rule else ""
        apart = (f"; of its {len(lines)} gradients none is told apart as the one rejected"
                 if lines else "")
        return Location(reason=f"the spec rejects the program{said}{why}; the implementation "
                        f"accepts it{apart}")
    if want.status == "ok" and got.status in ("rejected", "run-error") and statements:
        return _Probe(impl, reading, None, buffers, want, got).refusal()
    if want.status != "ok" or got.status != "ok":
        return Location(reason=f"the spec's outcome is {want.status} and the implementation's "
                        f"{got.status}: a status, not a value to probe")
    try:
        program = reading.program()
    except IRError:
        return Location(reason="the program does not build")
    difference = compare(want, got, ulps=ulps)
    if difference is None or not difference.elements:
        return Location(reason="the outputs agree as the check compares them (the check "
                        "found the difference otherwise)")
    return _Probe(impl, reading, program, buffers, want, got, ulps=ulps,
                  variants=variants).forward(difference.elements[0].slot)


def failed_as(message: str) -> str | None:
    """How a failure's message says the implementation failed, in words that tell one way of
    failing from another: the signal that killed its process, or the exception it raised and
    the place in its own code (reports.records.raised_at); None for any other failure."""
    signal = killed_by(message)
    if signal is not None:
        return f"killed by {signal}"
    raised = raised_at(message)
    return f"crashes with {raised[0]} at {raised[1]}" if raised is not None else None


def killed_by(message: str) -> str | None:
    """The signal a failure's message says killed the process ("signal 8 SIGFPE"), if it
    says one (transports/process.py words it)."""
    found = re.search(r"killed by (signal \d+(?: [A-Z0-9]+)?)", message or "")
    return found.group(1) if found else None


def changes(variants) -> set[str]:
    """What the named variants change, in the terms of the places location tells apart:
    `fold` (the sum of shares, or the walk's order that decides it), `rule:KEY` (a row of
    the rules), `blocked` (which edges a gradient flows along), `hash-consing`, `leaf`,
    `share` (a tape's operands), `forward` (arithmetic, the text)."""
    found = set()
    for name in variants:
        for part in parts(CATALOGUE[name]):
            if part.field in ("fold", "post_order", "tape_fold"):
                found.add("fold")
            elif part.field == "rules":
                row = ".".join(filter(None, (part.key, part.sub)))  # rules.rule_key's name
                found.add(f"rule:{row}")
                if part.key in ("detach", "cast", "bitcast"):
                    found.add("blocked")
            elif part.field == "flows":
                found.add("blocked")
            elif part.field == "key":
                found.add("hash-consing")
            elif part.field == "tape_leaf":
                found.add("leaf")
            elif part.field == "tape_operands":
                found.add("share")
            else:
                found.add("forward")
    return found


# The bits of the f32 literals a program may write as two nodes of equal value.
ZEROS = {exact.encode(0.0): "0.0", exact.encode(-0.0): "-0.0"}


class _Asker:
    """The implementation's side of location: the questions asked of it, each a program the
    spec accepts (the program with probes added, or a prefix of it), run through the same
    protocol as the check ran it, and how many runs and probes that took. `got`: what the
    implementation gave for the program itself; `ulps`: the check's tolerance."""

    def __init__(self, impl, reading: Reading, buffers, got: Outcome, *, ulps: int = 0):
        self.impl, self.reading, self.buffers, self.got = impl, reading, buffers, got
        self.ulps = ulps
        self.runs = self.probes = 0

    def refuses(self, lines: int, signal: str | None) -> bool | None:
        """Whether the implementation refuses the program's first `lines` lines as it
        refused the whole (killed by `signal`, when given); None when the spec does not
        accept that prefix, or it would trap where the implementation declares it does."""
        prefix = Reading("\n".join(self.reading.source.splitlines()[:lines]) + "\n")
        buffers = {s: a for s, a in self.buffers.items() if s in prefix.slots}
        if prefix.outcome(buffers).status != "ok" or traps(self.impl, prefix, buffers):
            return None
        self.runs += 1
        got = self.impl.run_case(prefix.source, buffers, prefix.slots) \
            if self.got.status != "rejected" else self.impl.build_only(prefix.source)
        if signal is not None:
            return got.status == "failure" and failed_as(got.message) == signal
        return got.status == self.got.status

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
            buffers[slot] = np.zeros(node.shape, NUMPY_DTYPES[node.dtype])
            probes[slot] = name
        source = self.reading.source.rstrip("\n") + "\n" + "\n".join(lines) + "\n"
        probed = Reading(source)
        if probed.uses & self.impl.unsupported():
            return "the probe program uses what the implementation does not support"
        want = probed.outcome(buffers)
        if want.status != "ok":
            return f"the probe program is not valid: {want.message}"
        if traps(self.impl, probed, buffers):
            return ("the probe program divides by zero or overflows where the "
                    "implementation declares that integer division traps")
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
                              Outcome("ok", {s: got.buffers[s]}), ulps=self.ulps)
                for s, name in probes.items()}


class _Probe:
    """Location's reasoning over the spec's program: which statements, shares and folds a
    difference can start at, asking the implementation (`asker`) only what decides it."""

    @property
    def built(self) -> Program:
        """The spec's program: the probes that read it run only where the reference built
        it."""
        assert self.program is not None
        return self.program

    def __init__(self, impl, reading: Reading, program: Program | None, buffers, want: Outcome,
                 got: Outcome, *, ulps: int = 0, variants=()):
        self.reading, self.program = reading, program
        self.buffers, self.want, self.got = buffers, want, got
        defines = [d for d in program.statements if isinstance(d, Define)] if program else []
        self.names = {d.node: d for d in defines}
        self.restated: dict = {}  # node -> every top-level statement naming it
        for d in defines:
            self.restated.setdefault(d.node, []).append(d)
        self.asker = _Asker(impl, reading, buffers, got, ulps=ulps)
        self.ask = self.asker.ask
        self.started = time.monotonic()
        self.ulps = ulps
        self.variants = list(variants)
        self.deciding = [changes([name]) for name in self.variants]  # what each changes
        self.decided: list[str] = []  # the answers that decide the location, in order

    def done(self, line: int = 0, says: str = "", reason: str = "", kind: str = "") -> Location:
        op = next((st.op for st in self.reading.statements or [] if st.line == line), "")
        return Location(line, says, reason, kind, op, self.asker.probes, self.asker.runs,
                        time.monotonic() - self.started,
                        decided_by=list(self.decided) if line or says else [])

    def among(self, places: list[tuple], where: str, deciding=None) -> Location:
        """One of several places (line, kind, what departs there, what a variant changes to
        depart there): named if it is the only one, or the only one that the variants which
        reproduce every output change; else listed as candidates (those the variants change,
        when they narrow them). `where`: the measured difference they share, said once;
        `deciding`: what each variant changes, where it is read otherwise than `changes`."""
        location, kind = _among(places, where, self.deciding if deciding is None else
                                deciding, self.variants,
                                lambda line: f"line {line}, `{_text(self.reading, line)}`")
        self.decided += location.decided_by
        found = self.done(location.line, location.says, location.reason, kind)
        found.candidates = location.candidates
        return found

    def refusal(self, signal: str | None = None) -> Location:
        """Where an implementation that refuses a valid program (a rejection, a run-time
        error, or a failure: its process killed by a signal, a trap, or a crash of its code,
        as `signal` words it, failed_as) starts to: the shortest prefix of the program, cut
        between top-level statements, that it refuses the same way, found by bisection
        (each prefix a program the spec accepts)."""
        units = top_level_units(self.reading.statements)

        how = signal if signal else \
            ("rejected" if self.got.status == "rejected" else "failed to run")
        unlike = "no such crash" if how.startswith("crashes") else "not " + how

        def refused(k: int) -> bool | None:
            answer = self.asker.refuses(units[k][1], signal)
            if answer is not None:
                self.decided.append(f"the prefix to line {units[k][1]}: "
                                    f"{how if answer else unlike}")
            return answer
        low, high = 0, len(units) - 1  # the whole program is refused: high holds
        while low < high:
            middle = (low + high) // 2
            answer = refused(middle)
            if answer is None:
                return self.done(reason="a prefix of the program is not one the spec accepts")
            low, high = (low, middle) if answer else (middle + 1, high)
        line = units[low][0]
        self.decided.append(f"the whole program: {how} (the check's own run)")
        if signal is not None:
            who = "the implementation's process is" if signal.startswith("killed") else \
                "the implementation"
            return self.done(line, (
                f"line {line}, `{_text(self.reading, line)}`: {who} {signal} from this "
                "statement on, where the spec runs it"
                + ("; cut before it, the program was not" if low > 0 else "")), kind="crash")
        said = self.got.message.splitlines()[0][:200] if self.got.message else ""
        return self.done(line, (
            f"line {line}, `{_text(self.reading, line)}`: the implementation "
            f"{'rejects' if self.got.status == 'rejected' else 'fails to run'} the program "
            f"from this statement on, where the spec accepts it"
            + (f" ({said})" if said else "")), kind=self.got.status)

    def forward(self, slot: int) -> Location:
        buffer = self.built.buffers.get(slot)
        if buffer is not None and not any(s.buffer is buffer for s in stores(self.built)):
            self.decided += [f"no probe: the program's text (no store into slot {slot}) and "
                             "the check's own outputs"]
            return self.done(buffer.line, (
                f"line {buffer.line}, `{_text(self.reading, buffer.line)}`: the program never "
                "stores into this slot, so it ends as it began; the implementation's ends "
                f"otherwise: {_values(compare(self.want_of(slot), self.got_of(slot)))}"),
                kind="unwritten")
        in_cone, _ = cone(self.built, slot)
        defines = [d for d in self.built.statements if isinstance(d, Define) and
                   d.node in in_cone and d.node.op != "buffer"][:MAX_PROBES]
        if not defines:
            self.decided.append(f"no probe: no named top-level value in slot {slot}'s cone; "
                                "the check's own outputs")
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
            self.decided.append(f"a forward probe of {d.name}: differs")
            # A gradient's value is made of its expansion's nodes; what it reads is y and x.
            read = (d.expansion.y, d.expansion.x) if d.expansion is not None else \
                d.node.operands
            operands = [self.names[o].name for o in dict.fromkeys(read)
                        if o in self.names and self.names[o].name in values]
            if operands:
                self.decided.append(f"forward probes of {', '.join(operands)}: agree")
            if d.expansion is not None:
                return self.gradient(d, values[d.name])
            return self.done(d.line, f"line {d.line}, `{_text(self.reading, d.line)}`: "
                             f"{_values(values[d.name])}, operands equal", kind="value")
        self.decided.append(f"forward probes of the {len(defines)} top-level values in slot "
                            f"{slot}'s cone: agree")
        return self._inside_a_loop(in_cone, slot) or self.done(
            reason="every value probed agrees: the difference arises in a store or a call")

    def _literal_stored(self, slot: int) -> Location | None:
        """A top-level store of a literal into `slot`: the literal is the value that
        differs (its reading: SPEC.md, "Text form"). Of several, the one stored at the
        first differing element's index."""
        difference = compare(self.final_of(slot), self.got_of(slot))
        if difference is None:  # the slot's final values agree: no literal to blame
            return None
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
        expansion = d.expansion
        assert expansion is not None  # `d` is a gradient statement
        x, y = expansion.x, expansion.y
        x_define, y_define = self.names.get(x), self.names.get(y)
        made = made_by_gradient(self.built, x)
        if made is not None and x_define is not None and made.line not in (x_define.line,
                                                                           d.line):
            return self._hash_consed_x(d, x_define, made, difference)
        walked = [v.node for v in expansion.visits if v.node in self.names
                  and v.node is not y and v.node is not x]
        walked = self._valid(y_define, walked)[:MAX_PROBES] if y_define else []
        adjoints = self.ask([(self.names[u].name, u, y_define.name) for u in walked]) \
            if walked and y_define else {}
        if isinstance(adjoints, str):
            return self.done(reason=adjoints)
        agreeing: list[str] = []
        # The walk visits every sender of a node before the node: the first node whose
        # adjoint differs has senders whose adjoints agree (or were not probed).
        for v in expansion.visits:
            if v.node is y:
                continue
            if v.node is x:
                adjoint, shown = difference, x_define.name if x_define else "x"
            elif v.node in walked:
                adjoint, shown = adjoints[self.names[v.node].name], self.names[v.node].name
            else:
                continue
            if adjoint is None:
                agreeing.append(shown)
                continue
            self.decided += ([f"adjoint probes (`gradient {y_define.name} u`) of "
                              f"{', '.join(agreeing)}: agree"] if agreeing and y_define else [])
            if v.node is not x:  # x's adjoint is the gradient's value, probed above
                self.decided.append(f"the adjoint probe of {shown}: differs")
            return self.among(self._places(d, v, shown, adjoint), (
                f"in the gradient on line {d.line}, the adjoint of {shown}: "
                f"{_values(adjoint)}, every adjoint before it agreeing"))
        blocked = _blocked(d.expansion)
        if blocked:
            shown = x_define.name if x_define else "x"
            self.decided.append(f"adjoint probes of {', '.join(agreeing)}: agree" if agreeing
                                else "no adjoint on the way differs")
            return self.among([self._blocked_place(d, edge, shown) for edge in blocked[:1]],
                              f"the adjoint of {shown}: {_values(difference)}")
        return self.done(reason=f"the gradient on line {d.line} differs, but no adjoint "
                         "probed locates it")

    def _places(self, d: Define, v, shown: str, adjoint) -> list[tuple]:
        """Every place that could make the first differing adjoint (of `v`, shown as
        `shown`; `adjoint` its difference) differ while its senders' agree: the share each
        sender sends, the fold of several (or of one, started from 0.0, where the spec's
        -0.0 came back +0.0), an edge the spec lets no gradient through, hash consing that
        makes two statements one node in the spec, and hash consing that could make `v` one
        node with another of equal value in the implementation (and so send it their
        shares)."""
        senders = list(dict.fromkeys(s for s in v.senders if s is not None))
        expansion = d.expansion
        assert expansion is not None  # `d` is the gradient statement whose walk visited v
        places = []
        twins = self._twins(d, v.node)
        if twins:
            named = ", ".join(twins)
            places.append((v.node.line, "hash-consing", (
                f"folding: {shown} made one node with {named} (one uses the other and their "
                "values are equal here; the spec keeps them apart, and with them one it gives "
                "exactly the implementation's outputs)"),
                "hash-consing"))
        first = adjoint.elements[0]
        if len(senders) == 1 and (first.expected_bits, first.actual_bits) == ("0x80000000",
                                                                             "0x00000000"):
            places.append((v.node.line, "fold", f"the sum of the one share {shown} receives, "
                           "started from 0.0 (which makes -0.0 +0.0)", "fold"))
        same = self.restated.get(v.node, [])
        if len(same) > 1:
            named = " and ".join(f"{n.name} (line {n.line})" for n in same)
            places.append((same[0].line, "hash-consing", (
                f"by hash consing, {named} are one node (SPEC.md, \"Hash consing\"), whose "
                "adjoint sums the shares of every use of either, where an implementation that "
                "kept them apart would not"), "hash-consing"))
        if len(senders) > 1:
            named = ", ".join(self.names[s].name if s in self.names else f"line {s.line}"
                              for s in senders)
            places.append((v.node.line, "fold", f"the fold of the {len(senders)} shares "
                           f"{shown} receives (from {named})", "fold"))
        for s in senders:
            places.append((s.line or expansion.y.line, "share",
                           f"the share it sends to {shown} (the rule of {rule_key(s)})",
                           f"rule:{rule_key(s)}"))
            places += self._zero_literal_places(s)
        places += [self._blocked_place(d, edge, shown) for edge in _blocked(expansion,
                                                                            v.node)[:1]]
        return places

    @functools.cached_property
    def _zeros_written(self) -> set[int]:
        """The bits of the f32 literals 0.0 and -0.0 the program writes, of those two."""
        return {n.attr("value") for n in self.built.graph.nodes
                if n.is_literal and n.dtype == "f32" and n.attr("value") in ZEROS}

    def _zero_literal_places(self, sender) -> list[tuple]:
        """A signed zero that `sender` reads, where the program also writes the other zero:
        its share depends on that operand, and an implementation that made the two literals
        one node (they are equal in value, not in bits) reads the other zero there. Forward
        probes cannot see it: a literal is no statement's value."""
        return [(sender.line, "literal", (
            f"its literal {ZEROS[o.attr('value')]}: the program also writes "
            f"{ZEROS[other]}, a literal equal in value and not in bits, which the spec keeps "
            "a node of its own (SPEC.md, \"Hash consing\")"), "hash-consing")
            for o in dict.fromkeys(sender.operands) if o.is_literal and o.dtype == "f32"
            and o.attr("value") in ZEROS
            for other in self._zeros_written - {o.attr("value")}]

    def _twins(self, d: Define, node) -> list[str]:
        """The names of the other named nodes, before the gradient `d`, that `node` depends on
        or that depend on it, with its dtype, shape and value in the spec's run, and for
        which the program with the two made one (every use of the later name written as the
        earlier) gives, by the spec, exactly the implementation's outputs: what its folding
        (`where true a b` to a, `x + 0.0` to x) could have made one node, verified."""
        values = self.values
        mine = values.get(node)
        if mine is None:
            return []
        below = reachable(node)
        found = []
        for other, define in self.names.items():
            if other is node or define.line > d.line or other.dtype != node.dtype:
                continue
            if other not in below and node not in reachable(other):
                continue
            theirs = values.get(other)
            if theirs is not None and theirs.shape == mine.shape and \
                    all(a == b for a, b in zip(theirs.flat, mine.flat, strict=True)) and \
                    self._merged_reproduces(self.names[node], define):
                found.append(define.name)
        return found

    def _merged_reproduces(self, a: Define, b: Define) -> bool:
        """Whether the program with `a` and `b` one node gives the implementation's outputs
        by the spec, compared as the check compared."""
        earlier, later = sorted((a, b), key=lambda define: define.line)
        use = re.compile(re.escape(later.name) + r"(?![\w.])")
        lines = self.reading.source.splitlines()
        merged = [line if k <= later.line else
                  use.sub(earlier.name, line.partition("#")[0])
                  for k, line in enumerate(lines, start=1)]
        outcome = Reading("\n".join(merged) + "\n").outcome(self.buffers)
        return outcome.status == "ok" and set(outcome.buffers) == set(self.got.buffers) and \
            compare(outcome, self.got, ulps=self.ulps) is None

    @functools.cached_property
    def values(self) -> dict:
        """Every top-level node's value in the spec's run (bits), or none if it cannot be
        had."""
        try:
            memory = {slot: from_numpy(array, self.built.buffers[slot].dtype, EXACT)
                      for slot, array in self.buffers.items() if slot in self.built.buffers}
            return Interpreter(self.built).evaluate(memory)[1]
        except Exception:  # noqa: BLE001 - without values, no twin is offered
            return {}

    def _blocked_place(self, d: Define, edge, shown: str) -> tuple:
        """A node whose rule passes nothing to an operand on the way to x (a detach, a cast
        to i32): an implementation that lets the gradient through departs there."""
        user, operand = edge
        towards = self.names[operand].name if operand in self.names else "its operand"
        return (user.line, "blocked", f"the spec passes no share through it to {towards} "
                f"in the gradient on line {d.line}; {shown} differs as if a share went "
                "through", "blocked")

    def _hash_consed_x(self, d: Define, x_define: Define, made: Define, difference) \
            -> Location:
        """x is, by hash consing, a node the gradient `made` built: in the spec, which node
        x is follows from that gradient's rule forms. An implementation departs here when
        its hash consing keeps the two apart, or when its rule forms build other nodes (x
        is then a node of its own)."""
        self.decided.append(f"the reference's hash consing: {x_define.name} is a node the "
                            f"gradient on line {made.line} built")
        fact = (f"{x_define.name} (line {x_define.line}) is, in the spec, by hash consing the "
                f"node that the gradient on line {made.line} built, so the gradient on line "
                f"{d.line} is taken against that node, and its adjoint sums the shares of its "
                "uses inside that expansion too (SPEC.md, \"Hash consing\")")
        forms = sorted({k.split(":", 1)[1] for tags in self.deciding for k in tags
                        if k.startswith("rule:")})
        places = [(made.line, "rule-form", (
            "its rule forms and sums decide which nodes it builds; with others "
            f"{x_define.name} is a node of its own"), "built"),
            (x_define.line, "hash-consing", f"hash consing: an implementation that keeps "
             f"{x_define.name} apart from that node", "hash-consing")]
        where = f"{fact}; {_values(difference)}"
        if forms:
            where += f" (the rule form of {', '.join(forms)} reproduces every output)"
        # A variant of a rule or of the fold changes the nodes that gradient builds.
        return self.among(places, where, [tags | ({"built"} if "fold" in tags or any(
            k.startswith("rule:") for k in tags) else set()) for tags in self.deciding])

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


def top_level_units(statements) -> list[tuple[int, int]]:
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


def locate_tape(tape, want: Outcome, got: Outcome, variants=()) -> Location:
    """Where a tape's derivatives depart: at the last entry (the walk runs from the end)
    whose derivative differs while every later entry's agrees. Every derivative is already
    known, so nothing is probed. The places that could make it differ: the share each user
    sends it, the sum of several, and, for an input or a constant, what its derivative is
    made of what it received; named when one is left (or one is what the `variants` that
    reproduce every derivative change), else listed. `line` is an entry's line as the
    report shows the tape (entry k on line k + 1)."""
    difference = compare(want, got)
    if got.status != "ok" or want.status != "ok" or difference is None or \
            not difference.differing:
        return Location(reason="a tape accepted or rejected otherwise, or a failure: no "
                        "derivative to compare")
    wrong = {k for _, k in difference.differing}
    k = max(wrong)
    # The shares entry k receives: one for each time an operation names it as an operand
    # (twice for ["mul", k, k]). An input's or a constant's second element is its value,
    # never an operand: 0.0 is not entry 0.
    shares = [m for m, entry in enumerate(tape) if m > k and isinstance(entry, list | tuple)
              and entry and entry[0] not in LEAVES
              for o in entry[1:] if type(o) is int and o == k]
    users = sorted(set(shares))
    values = (f"the derivative of entry {k}: spec {exact.f32_to_text(want.derivatives[k])} "
              f"(0x{want.derivatives[k]:08x}), implementation "
              f"{exact.f32_to_text(got.derivatives[k])} (0x{got.derivatives[k]:08x}), every "
              "later derivative agreeing")
    kind = str(tape[k][0]) if isinstance(tape[k], list | tuple) and tape[k] else ""
    places = [(m + 1, "share", f"the share{'s' if shares.count(m) > 1 else ''} it sends to "
               f"entry {k}", "share") for m in users]
    if len(shares) > 1:
        places.insert(0, (k + 1, "sum", "the sum of the "
                          f"{len(shares)} shares it receives (from entries "
                          f"{', '.join(map(str, shares))})", "fold"))
    if kind in ("input", "const"):
        made = {0: "made of no share: it receives none", 1: "made of the one share it "
                "receives"}.get(len(shares), f"made of the {len(shares)} shares it receives")
        places.append((k + 1, "leaf", f"the derivative of an {kind} entry, {made}", "leaf"))
    if not places:
        return Location(reason=f"{values}, but entry {k} receives no share")
    location, kind_ = _among(places, values, [changes([n]) for n in variants], list(variants),
                             lambda line: f"entry {line - 1}, {list(tape[line - 1])!r}")
    location.kind = kind_
    location.decided_by.insert(0, "no probe: the derivatives the implementation gave, every "
                               f"entry after {k} agreeing")
    if location.line:
        location.op = str(tape[location.line - 1][0])
    return location


def _among(places: list[tuple], where: str, deciding: list[set[str]], variants: list[str],
           shown) -> tuple[Location, str]:
    """The location among `places` (see _Probe.among), and its kind; `deciding`: what each
    variant that reproduces every output changes. The variants decide only when each of
    them changes one of the places: one that changes none shows the places may not be all
    there are. `shown(line)` names a place's statement."""
    tags = {p[3] for p in places}
    why = "no variant that reproduces every output decides"
    narrowed: list[str] = []
    if deciding and not all(changed & tags for changed in deciding):
        outside = ", ".join(f"[{n}]" for n, changed in zip(variants, deciding, strict=True)
                            if not changed & tags)
        why = (f"{outside} reproduces every output and changes none of them, so the cause may "
               "be elsewhere")
        deciding = []
    if len(places) > 1 and deciding:
        decided = [p for p in places if p[3] in set().union(*deciding)]
        named = ", ".join(f"[{n}]" for n in variants)
        by = [f"the variant{'s' if len(variants) > 1 else ''} reproducing every output "
              f"({named}), which change{'' if len(variants) > 1 else 's'} "
              f"{'only this one' if len(decided) == 1 else 'these'} of the {len(places)} places"]
        if len(decided) == 1:
            line, kind, what, _ = decided[0]
            which = (f"the variant reproducing every output ({named}) changes"
                     if len(variants) == 1 else
                     f"the variants reproducing every output ({named}) change")
            return Location(line, (
                f"{shown(line)}: {what}; {where}. Of the {len(places)} places that could give "
                f"it, this is the one that {which}"), decided_by=by), kind
        if decided:
            places, why = decided, (f"each is what one of the variants reproducing every "
                                    f"output ({named}) changes")
            narrowed = by
    if len(places) == 1:
        line, kind, what, _ = places[0]
        return Location(line, f"{shown(line)}: {what}; {where}",
                        decided_by=narrowed or ["it is the one place that could give it"]), kind
    listed = "; ".join(f"{shown(line)}: {what}" for line, _, what, _ in places)
    return Location(says=(f"{where}; the probes cannot tell which of these {len(places)} "
                          f"places departs ({why}): {listed}"),
                    reason="the probes cannot tell which of several places departs",
                    candidates=[line for line, *_ in places], decided_by=narrowed), "candidates"
