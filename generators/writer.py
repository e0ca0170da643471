"""A random program, written one statement at a time.

The writer keeps a pool of the values written so far and knows, for each, what a gradient
through it would meet. So every gradient it writes is valid by construction, and the
strategies (steps.py, programs.py) can ask for valid programs without rejection sampling.
Choices are drawn so that Hypothesis shrinks towards fewer statements, the first (simplest)
kinds of step, the earliest values and the first literals.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from gradient_conformance.generators import choices
from gradient_conformance.reference import exact
from gradient_conformance.reference.conditions import I32_CLASSES
from gradient_conformance.reference.syntax import Statement, parse

# Literals, simplest first: shrinking walks towards the front.
F32_LITERALS = ("2.0", "0.5", "-1.0", "1.0", "3.0", "0.0", "-0.0", "1e-3", "-2.5")
# The generators' own first (what a shrink goes towards), then every i32 class the
# enumerations take (INT_MIN, INT_MAX, the shift counts' edges), each as likely as the others.
I32_LITERALS = tuple(dict.fromkeys(("1", "2", "0", "-1", "7", "31", *I32_CLASSES)))
# Base shapes, simplest first; the next two have a middle axis of size 1 and, at rank 4, one of
# size > 1 between others, so that reduces and expands meet every kind of axis; the last two
# are empty, at rank 1 and with a 0-length middle axis.
SHAPES = ((), (3,), (2, 3), (2, 1, 2), (2, 3, 1, 2), (0,), (2, 0, 3))
# About one program in EMPTY_ONE_IN has an empty base shape (a 0-length dim) when the shapes
# it may take hold one: a floor, so that every value of such a program may be empty, without
# their taking a share of the draws as large as the other shapes'.
EMPTY_ONE_IN = 8
# Swarm testing (docs/generators.md, "Generators"): each program turns some of these on, so that a
# condition none of the others crowds out comes up in whole programs of it. Off is what each
# shrinks towards.
SWARM = ("literal operands", "same operand", "respelled")
FAIR = 16  # Writer.fairly: the width of the range read per option


def shape_text(shape: tuple[int, ...]) -> str:
    return "[" + ",".join(map(str, shape)) + "]"


@dataclass
class Val:
    """A value of the program being written.

    `reach`: the f32 values this one depends on through gradient-carrying edges (f32 operands,
    not through detach), each mapped to whether some such path crosses a node with no rule.
    `dirty`: somewhere upstream (any edge) is a node with no rule. `ranged`: depends on an open
    range's counter or a load in its body.
    """

    text: str
    dtype: str
    shape: tuple[int, ...]
    reach: dict[str, bool] = field(default_factory=dict)
    dirty: bool = False
    ranged: bool = False
    literal: bool = False
    is_load: bool = False  # a load of an input buffer: its bits are the caller's
    maybe_literal: bool = False  # a scalar gradient result can be the literal 1.0 or 0.0
    positive: bool = False  # > 0 at every input: recip, log2 and sqrt may take it
    # Some of its elements are equal whatever the inputs (an expand, a cast from bool or
    # i32, a literal), so a max over it ties: a kink no smooth input can avoid.
    tied: bool = False
    # The values this one is the max of (a reduce op=max, expanded or reshaped): equal to
    # each of them somewhere, so a comparison or max against them ties.
    maxed: frozenset[str] = frozenset()
    # The name of the node it is, when another name holds it too (a buffer loaded again
    # with no store to it between: SPEC.md, "Hash consing"): what `reach` is keyed by.
    node: str = ""

    @property
    def key(self) -> str:
        return self.node or self.text


class Writer:
    def __init__(self, draw: Callable, *, exclude: frozenset[str] = frozenset(),
                 prune: bool = True):
        self.stream = choices.Stream(draw, packed=False)
        self.exclude, self.prune = exclude, prune
        self.dtypes: tuple[str, ...] = ("f32", "i32", "bool")  # what steps may draw
        self.smooth = False  # inputs will be kept from kinks: write no max that must tie
        self.base: tuple[int, ...] | None = None  # the shape of new inputs (None: any)
        self.decls: list[str] = []
        self.defs: list[str] = []
        self.body: list[str] = []
        self.pool: list[Val] = []
        self.depth = 0
        self._names = itertools.count()
        self._slots = itertools.count()
        self.functions: list[str] = []
        self.inputs: dict[tuple[str, tuple[int, ...]], str] = {}  # (dtype, shape) -> buffer
        self.loaded: dict[str, Val] = {}  # an input buffer -> the node a load of it is now
        self.gradients = 0
        # Statements written alike are one node in the reference (hash consing), so the writer
        # keeps one Val for them too: (scope, right-hand side) -> Val.
        self.written: dict[tuple[int, str], Val] = {}
        self.scope = 0
        self._scopes = itertools.count(1)
        self.used: set[str] = set()  # values some later statement reads
        self.swarm: frozenset[str] = frozenset()  # the SWARM features this program turns on

    # --- choices ----------------------------------------------------------------------------
    # Each read from the stream (choices.py), shrinking towards the first option (or `low`,
    # False).

    def integer(self, low: int, high: int) -> int:
        return self.stream.integer(low, high)

    def choose(self, options):
        return self.stream.choose(options)

    def flip(self) -> bool:
        return self.stream.flip()

    def fairly(self, options):
        """One of `options` (a menu of ops), each about as often as the others: Hypothesis
        draws a bounded integer at its bounds far more often than between them (of the menu
        and, or, xor, shl, shr, `and` was in 7 % of programs and shr in 1 %), so the index is
        read from a range FAIR times wider. Shrinks towards the first option, as `choose`
        does. docs/generators.md, "Generators"."""
        return options[self.stream.integer(0, FAIR * len(options) - 1) // FAIR]

    # --- text -------------------------------------------------------------------------------

    def fresh(self, stem: str = "v") -> str:
        return f"%{stem}{next(self._names)}"

    def line(self, text: str) -> None:
        self.body.append("  " * self.depth + text)

    def text(self) -> str:
        """The program as written so far, statement for statement."""
        return "\n".join(self.defs + self.decls + self.body) + "\n"

    def program(self) -> tuple[str, list[Statement]]:
        """The program's text and its statements, from one parse: what a drawn case is made
        of. Written otherwise where the program turns that on (`respelled`), then pruned of
        what nothing observable uses (see `pruned`), unless it was written statement by
        statement on purpose (invalid programs, near misses)."""
        text = self.text()
        if "respelled" in self.swarm:
            text = respelled(text, self.stream)
        return pruned(text) if self.prune else (text, parse(text))

    def buffer(self, dtype: str, shape: tuple[int, ...], stem: str = "b") -> str:
        name = self.fresh(stem)
        self.decls.append(f"{name} = buffer slot={next(self._slots)} dtype={dtype} "
                          f"shape={shape_text(shape)}")
        return name

    # --- values -----------------------------------------------------------------------------

    def value(self, op: str, operands: list[Val], dtype: str, shape: tuple[int, ...], *,
              attrs: str = "", carry: list[Val] | None = None, no_rule: bool = False,
              ranged: bool = False) -> Val:
        """Write `%v = op operands attrs` and add it to the pool. `carry`: the operands a
        gradient passes through (default: all); `no_rule`: the op has no gradient rule."""
        text = " ".join([op, *(o.text for o in operands)]) + (f" {attrs}" if attrs else "")
        self.used.update(o.text for o in operands)
        if (self.scope, text) in self.written:
            return self.written[(self.scope, text)]
        name = self.fresh()
        self.line(f"{name} = {text}")
        reach: dict[str, bool] = {}
        if dtype == "f32":
            reach[name] = False
            for o in operands if carry is None else carry:
                if o.dtype == "f32":
                    for upstream, crossed in o.reach.items():
                        reach[upstream] = reach.get(upstream, False) or crossed or no_rule
        tied = op == "expand" or (op == "cast" and operands[0].dtype != "f32") or all(
            o.tied or o.literal for o in operands if o.dtype != "func")
        maxed: frozenset[str] = frozenset()
        if op == "reduce" and "op=max" in attrs:
            maxed = operands[0].maxed | {operands[0].text}
        elif op in ("expand", "reshape"):
            maxed = operands[0].maxed
        v = Val(name, dtype, shape, reach, no_rule or any(o.dirty for o in operands),
                ranged or any(o.ranged for o in operands), tied=tied, maxed=maxed)
        self.pool.append(v)
        self.written[(self.scope, text)] = v
        return v

    def enter(self) -> int:
        """Open a range body: its values are values of one iteration, apart from the rest."""
        self.depth += 1
        outer, self.scope = self.scope, next(self._scopes)
        return outer

    def leave(self, outer: int, saved: int) -> None:
        self.depth -= 1
        self.scope = outer
        del self.pool[saved:]

    def literal(self, dtype: str) -> Val:
        menu = {"f32": F32_LITERALS, "i32": I32_LITERALS, "bool": ("true", "false")}[dtype]
        return Val(self.fairly(menu), dtype, (), literal=True)

    def input(self, dtype: str, shape: tuple[int, ...]) -> Val:
        """The load of a new input buffer of this dtype and shape (a buffer of its own, so the
        load is a node of its own). Inside a range body the load depends on the range."""
        self.inputs[(dtype, shape)] = self.buffer(dtype, shape, "in")
        name = self.fresh("x")
        self.line(f"{name} = load {self.inputs[(dtype, shape)]}")
        v = Val(name, dtype, shape, {name: False} if dtype == "f32" else {},
                ranged=self.depth > 0, is_load=True)
        self.pool.append(v)
        if not self.depth:
            self.loaded[self.inputs[(dtype, shape)]] = v
        return v

    def pick(self, dtype: str, shape: tuple[int, ...], *, literal_ok: bool = True,
             recent: bool = False, where: Callable[[Val], bool] = lambda v: True) -> Val:
        """An operand: an earlier value (reused, so programs are DAGs, not trees), a literal,
        or a new input. Shrinks towards the earliest value (the most recent one if `recent`:
        chains, where the earliest values feed every level), then a literal."""
        found = [v for v in self.pool if v.dtype == dtype and v.shape == shape and where(v)]
        if recent:
            found.reverse()
        # A new input only while few values fit (otherwise programs fall apart into islands),
        # and only of the base shape: other shapes come from reductions and reshapes.
        new_input = len(found) < 2 and self.base in (None, shape)
        extra = (["literal"] if literal_ok else []) + (["input"] if new_input else [])
        if not found and not extra:
            return self.value("expand", [self.literal(dtype)], dtype, shape,
                              attrs=f"shape={shape_text(shape)}")
        k = self.integer(0, len(found) + len(extra) - 1)
        if k < len(found):
            return found[k]
        if extra[k - len(found)] == "literal":
            return self.literal(dtype)
        return self.input(dtype, shape)

    def apart(self, a: Val) -> Callable[[Val], bool]:
        """Which values a comparison or a max may pair with a: not a itself, which ties at
        every input, nor, in a smooth program, a max of a or a value a is the max of, which
        equal a somewhere by construction."""
        if not self.smooth:
            return lambda v: v is not a
        return lambda v: v is not a and a.text not in v.maxed and v.text not in a.maxed

    def shapes_in_pool(self, dtype: str) -> list[tuple[int, ...]]:
        seen: list[tuple[int, ...]] = []
        for v in self.pool:
            if v.dtype == dtype and v.shape not in seen:
                seen.append(v.shape)
        return seen

    def dtype(self, *candidates: str) -> str | None:
        """One of the candidate dtypes that the program may use, or None if none may."""
        allowed = [d for d in candidates if d in self.dtypes]
        return self.choose(allowed) if allowed else None

    def choose_shape(self, dtype: str, base: tuple[int, ...]) -> tuple[int, ...]:
        shapes = self.shapes_in_pool(dtype)
        return self.choose(shapes) if shapes else base

    def same(self) -> bool:
        """Whether a binary op takes the same value twice (when the program turns it on)."""
        return "same operand" in self.swarm and self.flip()

    def literal_operand(self) -> bool:
        """Whether an operand that could be a value is a literal instead (when the program
        turns it on)."""
        return "literal operands" in self.swarm and self.flip()

    # --- statements without value ------------------------------------------------------------

    def store(self, value: Val, stem: str = "out") -> None:
        """Store a value into a new output buffer of its dtype and shape."""
        out = self.buffer(value.dtype, value.shape, stem)
        self.line(f"store {out} {value.text}")
        self.used.add(value.text)

    def sinks(self) -> list[Val]:
        """The values no later statement reads: what a program must store to be observed."""
        return [v for v in self.pool if not v.literal and v.text not in self.used]

    # --- gradient ---------------------------------------------------------------------------

    def loss(self, value: Val, op: str = "add") -> Val:
        """An f32 scalar from an f32 value: itself, or its reduce (op=add or op=max; add
        where a max would tie and the inputs are to be smooth)."""
        if value.shape == ():
            return value
        return self.value("reduce", [value], "f32", (), attrs=f"op={self.untied(op, value)}")

    def untied(self, op: str, value: Val) -> str:
        """`op`, or add in place of a max over a tied value in a smooth program."""
        return "add" if op == "max" and self.smooth and value.tied else op

    def valid_xs(self, y: Val, *, include_unreached: bool = True) -> list[Val]:
        """The values a gradient of y may be taken against: f32, not literals, not on a path
        through a node without a rule, not depending on an open range."""
        return [v for v in self.pool if v.dtype == "f32" and not v.ranged
                and not v.literal and not v.maybe_literal
                and (y.reach.get(v.key) is False
                     or (include_unreached and v.key not in y.reach))]

    def gradient(self, y: Val, x: Val) -> Val:
        """Write `gradient y x`. The result depends on all y depends on; if anything upstream of
        y has no rule, a gradient through the result is not trusted to be valid."""
        text = f"gradient {y.text} {x.text}"
        if (self.scope, text) in self.written:  # the same expansion: one node
            return self.written[(self.scope, text)]
        name = self.fresh("g")
        self.line(f"{name} = {text}")
        self.used.update((y.text, x.text))
        self.gradients += 1
        reach = {u: y.dirty or x.dirty for u in y.reach if u != y.key}
        reach[name] = False
        g = Val(name, "f32", x.shape, reach, y.dirty or x.dirty, y.ranged or x.ranged,
                maybe_literal=x.shape == ())
        self.pool.append(g)
        self.written[(self.scope, text)] = g
        return g


def pruned(source: str) -> tuple[str, list[Statement]]:
    """`source` without the value statements whose value nothing observable uses, then
    without unused buffers and functions; with its statements, numbered as its lines, from
    one parse. Every value op is pure, so this changes no result; it only makes programs (and
    shrunk counterexamples) shorter. Stores, ranges and their ends always stay."""
    statements = parse(source)
    lines = [line for line in source.splitlines() if line.split("#")[0].strip()]
    live: set[str] = set()
    keep = [False] * len(statements)
    for k in range(len(statements) - 1, -1, -1):
        s = statements[k]
        effect = s.op in ("store", "range", "end", "return") or s.op == "def"
        if effect or s.target in live:
            keep[k] = True
            live.update(o.text for o in s.operands if o.kind in ("name", "func"))
    # A function whose calls were all dropped goes too, with its body.
    kept, skipping = [], False
    for s, line, alive in zip(statements, lines, keep, strict=True):
        if s.op == "def":
            skipping = s.operands[0].text not in live
        if not skipping and alive:
            kept.append((s, line))
        if s.op == "end" and s.operands and s.operands[0].kind == "func":
            skipping = False
    return ("\n".join(line for _, line in kept) + "\n",
            [Statement(k, s.target, s.op, s.operands, s.attrs)
             for k, (s, _) in enumerate(kept, start=1)])


def respellings(text: str) -> list[str]:
    """Other spellings of an f32 literal with the same bits (SPEC.md, "Text form": a `.` or
    an exponent, the decimal rounded to nearest): 2.0 as 2., 2.00, 2e0 or 2.0E+0."""
    if text in ("inf", "-inf", "nan"):
        return []
    bits = exact.f32_from_text(text)
    mantissa, _, power = text.lower().partition("e")
    candidates = [f"{mantissa}E{power}"] if power else [f"{text}e0", f"{mantissa}E+0"]
    if "." in mantissa and not power:
        candidates += [f"{mantissa}0", mantissa.rstrip("0") or mantissa]
    if mantissa.lstrip("-").startswith("0."):
        candidates.append(mantissa.replace("0.", ".", 1) + (f"e{power}" if power else ""))
    return [c for c in candidates if c != text and ("." in c or "e" in c.lower()) and
            exact.f32_from_text(c) == bits]


_F32_LITERAL = re.compile(r"^-?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$|^-?inf$|^nan$")


def confusable(k: int) -> str:
    """The k-th name of a program renamed (`respelled`): in fours that differ only in a dot,
    an underscore or a letter's case (%t0, %t.0, %t_0, %T0, %t1, ...), all allowed by the
    grammar ('%' [A-Za-z_][A-Za-z0-9_.]*) and all distinct, so that an implementation that
    folds any of them together misreads the program."""
    return ("%t{}", "%t.{}", "%t_{}", "%T{}")[k % 4].format(k // 4)


_NAME = re.compile(r"%[A-Za-z_][A-Za-z0-9_.]*")


def respelled(source: str, stream) -> str:
    """`source` written otherwise, its meaning unchanged: attributes in reverse order (on
    every line, or on every other line, so that one program writes them both ways), tokens
    apart by two spaces, comments (trailing, and lines that are only an indented comment,
    each followed by a blank line), f32 literals spelled otherwise (respellings), names
    renamed to `confusable` ones. Each is one choice for the whole program; which spelling a
    literal takes follows from its line, so that the text is a function of the choices."""
    reorder, spaced, commented, literals, renamed = (stream.flip() for _ in range(5))
    alternate = reorder and stream.flip()
    names: dict[str, str] = {}
    seen: dict[str, int] = {}  # a literal -> its spellings so far, from its first line
    lines = []
    for number, line in enumerate(source.splitlines(), start=1):
        indent = line[:len(line) - len(line.lstrip())]
        if renamed:
            line = _NAME.sub(lambda m: names.setdefault(m.group(), confusable(len(names))),
                             line)
        tokens = line.split()
        if reorder and (not alternate or number % 2):
            attributes = [k for k, t in enumerate(tokens) if "=" in t and t != "="]
            for k, t in zip(attributes, reversed([tokens[k] for k in attributes]), strict=True):
                tokens[k] = t
        if literals:
            for k, t in enumerate(tokens):
                if k and "=" not in t and _F32_LITERAL.match(t) and ("." in t or "e" in t):
                    # Each occurrence of a literal spelled the next way (as written among
                    # them), from its line: one literal written two ways in one program.
                    others = [t, *respellings(t)]
                    seen[t] = seen.get(t, number) + 1
                    tokens[k] = others[seen[t] % len(others)]
        text = indent + ("  " if spaced else " ").join(tokens)
        if commented and number % 3 == 0:
            text += "  # respelled"
        if commented and number % 4 == 2:
            # A line that is only a comment, indented as the statement after it (a body's
            # too), and a blank line: line numbers a message gives move past both.
            lines += [f"{indent or '  '}# respelled: {number}", ""]
        lines.append(text)
    return "\n".join(lines) + "\n"
