"""A case's program as the reference reads it: `Reading`, parsed once, whose outcome
under the spec is the expected one and, under a variant of the spec (diagnosis), is built again
from the same parse. docs/suite.md, "The conformance suite"."""

from __future__ import annotations

import functools

import numpy as np

from gradient_conformance import reference
from gradient_conformance.conformance.outcome import Outcome
from gradient_conformance.reference import SPEC, Semantics, cases, conditions
from gradient_conformance.reference.builder import build_program
from gradient_conformance.reference.errors import GradientError, IndexOutOfRange, IRError
from gradient_conformance.reference.ops import (
    features_of_statements,
    typed_features,
)
from gradient_conformance.reference.program import (
    Define,
    Program,
    cone,
    made_by_gradient,
    walk,
)
from gradient_conformance.reference.syntax import parse


class Reading:
    """A program as the reference reads it: parsed once (`statements`, or the `error` of a
    source that does not parse), built under the spec once and kept, and under any other
    semantics on demand. The oracle is trusted and called directly: only its IRErrors are
    answers; anything else it raises is a bug of the suite's, and ends the check as an
    error rather than be blamed on the implementation. `measure`: whether its run under the
    spec also measures the conditions it took; not for a re-run of a case already counted
    (Hypothesis's shrink, the reducer), whose conditions nobody reads."""

    def __init__(self, source: str, statements=(), *, measure: bool = True,
                 built: Program | None = None):
        self.source, self.measure = source, measure
        self.statements: list | None = list(statements) or None  # parsed already, if given
        self.error: IRError | None = None
        if self.statements is None:
            try:
                self.statements = parse(source)
            except IRError as problem:
                self.error = problem
        # The spec's build, kept; given by a strategy that built it from these statements.
        self._spec: Program | IRError | None = built if self.statements else None
        self.reached: frozenset[str] | None = None  # the conditions of its last run

    def conditions(self, buffers=None) -> frozenset[str]:
        """The spec's conditions this case took (reference/conditions.py): those of its run
        under the spec, or, for a program that was only built or is rejected, of its build."""
        if self.reached is not None:
            return self.reached
        try:
            program, problem = self.program(), None
        except IRError as rejected:
            program, problem = None, rejected
        self.reached = frozenset(conditions.measure(
            self.source, self.statements or [], buffers, program=program,
            problem=problem).names)
        return self.reached

    @functools.cached_property
    def slots(self) -> dict[int, tuple[str, tuple[int, ...]]]:
        """slot -> (dtype, shape), as the program declares them."""
        return cases.slots_of(self.statements or [])

    @functools.cached_property
    def features(self) -> frozenset[str]:
        return features_of_statements(self.statements or [])

    @functools.cached_property
    def built_nodes(self) -> tuple | None:
        """Every node of its build under the spec, its calls' bodies' too (None when it does
        not build)."""
        try:
            program = self.program()
        except IRError:
            return None
        graphs = [program.graph, *(i.graph for i in program.calls.values())]
        return tuple(n for g in graphs for n in g.nodes)

    @functools.cached_property
    def reaches(self) -> frozenset[str]:
        """Its features and the op of every node of its build, those its gradients build
        included (a rule's expansion holds ops the text need not write: log2's share has a
        recip, whose rule its second derivative takes): what a variant of an op's arithmetic
        or rule can change (variants.applies)."""
        nodes = self.built_nodes
        return self.features if nodes is None else \
            self.features | frozenset(n.op for n in nodes)

    @functools.cached_property
    def uses(self) -> frozenset[str]:
        """Its features and, when it builds, its ops by dtype (`and:bool`): what it needs of
        an implementation (CAPABILITIES["unsupported"])."""
        nodes = self.built_nodes
        return self.features if nodes is None else self.features | typed_features(nodes)

    def program(self, semantics: Semantics = SPEC) -> Program:
        """The built program, or the IRError that rejects it."""
        if self.error is not None:
            raise self.error
        assert self.statements is not None  # parsed: else self.error says why not
        if semantics is not SPEC:
            if semantics.reads is not SPEC.reads:  # a variant that reads the text otherwise
                read = semantics.reads(self.source)
                if read != self.source:  # else it reads what the spec reads: no parse
                    return build_program(parse(read), semantics)
            return build_program(self.statements, semantics)
        if self._spec is None:
            try:
                self._spec = build_program(self.statements, SPEC)
            except IRError as problem:
                self._spec = problem
        if isinstance(self._spec, IRError):
            raise self._spec
        return self._spec

    def outcome(self, buffers, semantics: Semantics = SPEC, *,
                build_only: bool = False) -> Outcome:
        """The reference's outcome on `buffers` (under `semantics`; only built, when
        `build_only`)."""
        try:
            program = self.program(semantics)
        except IRError as problem:  # reason "limit": the reference's own, not the course's
            return Outcome("rejected", message=str(problem), reason="limit" * problem.limit)
        if build_only:
            return Outcome("ok")
        # Under the spec, the run also measures the conditions the case took.
        reached = None
        if semantics is SPEC and self.measure:
            reached = conditions.Reached()
            reached.text(self.source, self.statements or [])
            reached.program(program)
        observe = reached.observe if reached is not None else None
        try:
            final = reference.Runner(program, observe=observe)(
                {s: a.copy() for s, a in buffers.items()})
        except IndexOutOfRange as problem:
            if reached is not None:
                reached.rejected(problem)
                self.reached = frozenset(reached.names)
            return Outcome("run-error", message=str(problem), index=True)
        if reached is not None:
            self.reached = frozenset(reached.names)
        return Outcome("ok", buffers=final)


def expected(source: str, buffers, semantics: Semantics = SPEC, *,
             build_only: bool = False) -> Outcome:
    """The reference's outcome for a program read once and used once."""
    return Reading(source).outcome(buffers, semantics, build_only=build_only)


def made_by_gradients(reading: Reading) -> set[int]:
    """The slots whose final values depend on a gradient statement (a gradient's value, or
    anything computed from one), in a program the spec builds: what an implementation that
    does not claim bit-exact gradients need not give bit for bit."""
    program = reading.program()
    made = {s.node for s in program.statements if getattr(s, "expansion", None) is not None}
    return {slot for slot in program.buffers if cone(program, slot)[0] & made}


def hash_consed_gradients(program: Program) -> list[Define]:
    """The gradient statements taken against a node that, by hash consing, an earlier
    gradient's expansion built (SPEC.md, "Hash consing"): which node their x is follows
    from that gradient's rule forms, so their value is no calculus for an implementation
    whose forms differ."""
    return [s for s in program.statements if isinstance(s, Define) and s.expansion is not None
            and made_by_gradient(program, s.expansion.x) is not None]


def stores_a_gradient(statements, line: int | None = None) -> bool:
    """Whether a program stores a value computed from a gradient statement (the one at
    `line`, if given), read from its text, since a program the spec rejects has no graph to
    ask: where a variant that accepts a rejected gradient says what it computes, not only
    that it accepts. Names are scoped as ir.md scopes them (a function body's are its own),
    and a call's result is computed from a gradient when the function returns a value that
    is, or when an argument is."""
    scopes: list[set[str]] = [set()]  # the names computed from the gradient, per scope
    returns: set[str] = set()  # the functions whose result is computed from it
    function = []  # the function whose body this is, innermost last
    for s in statements:
        uses = {o.text for o in s.operands if o.kind == "name"}
        made = scopes[-1]
        if s.op == "def":
            scopes.append(set())
            function.append(s.operands[0].text if s.operands else "")
            continue
        if s.op == "end" and s.operands and s.operands[0].kind == "func" and function:
            scopes.pop()
            function.pop()
            continue
        if s.op == "return":
            if uses & made and function:
                returns.add(function[-1])
            continue
        if s.op == "store" and uses & made:
            return True
        called = s.op == "call" and s.operands and s.operands[0].text in returns
        if s.target is not None and (uses & made or called or (
                s.op == "gradient" and (line is None or s.line == line))):
            made.add(s.target)
    return False


def rejection(reading: Reading) -> IRError | None:
    """The reference's rejection of a program, or None if it accepts it."""
    try:
        reading.program()
    except IRError as problem:
        return problem
    return None


def rejected_line(reading: Reading) -> int | None:
    """The line of the gradient the reference rejects the program for, if a gradient rule
    rejects it."""
    problem = rejection(reading)
    return problem.line if isinstance(problem, GradientError) else None


def rejected_as(reading: Reading) -> str:
    """The kind of the reference's rejection of a program (as a case file's `#: error KIND`
    names it: syntax, invalid, or a gradient rule's code), or "" if it accepts it."""
    return str(getattr(rejection(reading), "kind", "") or "")


def stores_of(reading: Reading, values, stem: str) \
        -> tuple[list[str], list[str], dict[int, np.ndarray]]:
    """Lines that store each (name, node) of `values` into a buffer of its own: each buffer's
    declaration (a slot past the program's, named `stem` and a number, made apart from the
    program's names), each store, and each buffer's initial contents (zeros)."""
    taken = {s.target for s in reading.statements or () if s.target}
    slot = max(reading.slots, default=-1) + 1
    declared, kept, added = [], [], {}
    for k, (name, node) in enumerate(values):
        target = f"{stem}{k}"
        while target in taken:
            target += "_"
        shape = ",".join(str(n) for n in node.shape)
        declared.append(f"{target} = buffer slot={slot + k} dtype={node.dtype} shape=[{shape}]")
        kept.append(f"store {target} {name}")
        added[slot + k] = np.zeros(node.shape, cases.NUMPY[node.dtype])
    return declared, kept, added


def appended(reading: Reading, lines: list[str]) -> Reading:
    """The program with `lines` added after its last line."""
    return Reading(reading.source.rstrip("\n") + "\n" + "\n".join(lines) + "\n",
                   measure=False)


def gradients_shown(reading: Reading, buffers: dict) -> tuple[Reading, dict, str] | None:
    """A program the spec rejects by a gradient rule, made to show what the rejected gradient
    is: where nothing computed from it is stored, it is stored into a buffer of its own
    (zeros to start; where it is a statement of the top level), so that a variant that
    accepts it says what it computes and the implementation's values are compared with the
    variant's. Its inputs with that buffer added, and with a slot of f32 zeros (what a case
    file gives a slot it says nothing of, at which most gradients are zero for every variant
    alike) at 0.75 instead. With how it was changed, for its label ("" for neither); None
    for any other program, one no lifted rule builds, or one whose gradient no top-level
    store can reach."""
    statements, problem = reading.statements, rejection(reading)
    if statements is None or not isinstance(problem, GradientError):
        return None
    inputs = {s: np.full_like(a, 0.75) if a.dtype == np.float32 and a.size and not a.any()
              else a for s, a in buffers.items()}
    changed = ", its zeros at 0.75" if any(inputs[s] is not a for s, a in buffers.items()) \
        else ""
    line = problem.line
    if stores_a_gradient(statements, line):
        return reading, inputs, changed
    program = conditions.rebuilt(statements, problem)
    if program is None:
        return None
    # The rejected gradient, where a store can reach it: a statement of the top level, or of
    # a range body (stored there on each pass: the last pass's value stays).
    top = {id(d) for d in program.statements}
    gradients = [d for d in walk(program.statements) if isinstance(d, Define) and
                 d.line == line and d.expansion is not None and d.node.dtype == "f32"]
    if not gradients:
        return None
    declared, kept, added = stores_of(reading, [(d.name, d.node) for d in gradients],
                                      "%stored")
    inputs.update(added)
    source = reading.source.rstrip("\n").split("\n")
    if all(id(d) in top for d in gradients):
        text = source + declared + kept
    else:  # declared first, stored right after the gradient's line, in its body
        at = source[line - 1]
        indent = at[:len(at) - len(at.lstrip())]
        text = declared + source[:line] + [indent + k for k in kept] + source[line:]
    stored = Reading("\n".join(text) + "\n", measure=False)
    return (stored, inputs, f", its gradient stored{changed}") \
        if stored.statements is not None else None
