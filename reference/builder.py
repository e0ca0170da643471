"""From parsed statements to a built program: names, scopes, buffers, ranges, functions, and
every `gradient` expanded. SPEC.md, "Text form", "Buffers and memory", "Loops", "Functions".

Everything invalid is rejected here, at build time, with a BuildError (or a GradientError)
naming the line and the token.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field, replace

from . import errors, gradient
from .errors import BeyondLimit, BuildError, GradientError
from .graph import DTYPES, Graph, Node, SignatureError, check_shape, infer
from .ops import OPS
from .program import Define, Function, Instance, Loop, Program, Store
from .semantics import SPEC, Semantics
from .syntax import Operand, Statement

MAX_NESTING = 64  # ranges inside ranges, and calls inside function bodies; SPEC.md, "Limits"
MAX_RUNS = 1 << 22  # statements run (a body's once per turn) and turns taken; SPEC.md, "Limits"
MAX_BUFFER_ELEMENTS = 1 << 26  # in all the buffers of one program together; SPEC.md, "Limits"
_EFFECT_OPS = ("store", "end", "return", "def")


# --- the builder ----------------------------------------------------------------------------


def gradients_stood_in(statements: list[Statement]) -> list[Statement]:
    """The statements with each `gradient y x` stood in for by a statement that decides
    nothing of the gradient: `detach x` (`load x` where x names a buffer), a value of x's
    shape and dtype, as the gradient is; and beside it `detach y` (`load y`), so that the
    loss's name and scope are checked too. Where the structure of a program is checked
    apart from gradient acceptance (the adapter kit, the JSON form): whether a loss or an x
    is fit to differentiate is left to whoever differentiates. A helper statement's name,
    "%g loss", has a space, which no name of a program can (ir.md)."""
    out: list[Statement] = []
    buffers = {s.target for s in statements if s.op == "buffer"}
    depth = 0  # in a function body no buffer is visible, and a name is a parameter's
    for s in statements:
        depth += (s.op == "def") - (s.op == "end" and depth > 0 and _closes_def(s))
        if s.op != "gradient" or len(s.operands) != 2 or s.target is None:
            out.append(s)
            continue
        visible = buffers if depth == 0 else set()
        y, x = s.operands
        out.append(replace(s, target=f"{s.target} loss", op=_reading(y, visible),
                           operands=(y,), attrs=()))
        out.append(replace(s, op=_reading(x, visible), operands=(x,), attrs=()))
    return out


def _reading(o: Operand, buffers: set) -> str:
    """The op that reads `o` as a value: `load` of a buffer, `detach` of anything else."""
    return "load" if o.kind == "name" and o.text in buffers else "detach"


def _closes_def(s: Statement) -> bool:
    """Whether an `end` closes a function (`end @f`) rather than a range (`end %i`)."""
    return bool(s.operands) and s.operands[0].kind == "func"


def _count(s: Statement) -> int:
    """A range statement's count as written, where it is a count (checked when it is built)."""
    operand = s.operands[0] if len(s.operands) == 1 else None
    value = operand.value if operand is not None and operand.kind == "i32" else 0
    return max(value, 0) if isinstance(value, int) else 0


def build_program(statements: list[Statement], semantics: Semantics = SPEC) -> Program:
    """Build and check a parsed program, by the spec or by `semantics`. Raises BuildError or
    GradientError."""
    return _Builder(semantics).run(statements)


def _target(s: Statement) -> str:
    """The name a value statement defines: `_statement` refused one without it."""
    assert s.target is not None, s
    return s.target


def _tag(counter: Node) -> int:
    """A range counter's tag: its loop's id, which `_range` always gives it."""
    assert counter.tag is not None, counter
    return counter.tag


@dataclass(eq=False)
class _Frame:
    body: list
    loop: Loop | None
    names: list[str] = field(default_factory=list)


class _Builder:
    def __init__(self, semantics):
        self.semantics = semantics
        self.graph = Graph(semantics.key, semantics.scope_of)
        self.top: list = []
        self.frames = [_Frame(self.top, None)]
        self.visible: dict[str, Node] = {}
        self.defined_at: dict[str, int] = {}  # every top-level name ever defined -> its line
        self.buffers: dict[int, Node] = {}
        self.stores_to: dict[int, int] = defaultdict(int)  # slot -> stores so far
        self.functions: dict[str, Function] = {}
        self.definitions: list[Statement] = []
        self.calls: dict[Node, Instance] = {}
        self.names: dict[Node, str] = {}
        self.runs = 0  # statements the program runs, counted as it is built (MAX_RUNS)
        self.buffer_elements = 0  # in its buffers so far (MAX_BUFFER_ELEMENTS)
        self.loads_in: dict[Node, frozenset[int]] = {}  # load -> ranges it was made inside
        self.next_range = 1

    @property
    def scope(self) -> int:
        loop = self.frames[-1].loop
        return _tag(loop.counter) if loop else 0

    def run(self, statements: list[Statement]) -> Program:
        pending_def: list[Statement] | None = None
        for statement in statements:
            if pending_def is not None:
                pending_def.append(statement)
                closes = _func_operand(statement) == _func_operand(pending_def[0])
                if statement.op == "end" and closes:
                    self._define_function(pending_def)
                    pending_def = None
                elif statement.op == "def":
                    raise BuildError(statement.line, "def", "a def cannot stand inside "
                                     f"another (the def of {pending_def[0].operands[0].text} on "
                                     f"line {pending_def[0].line} is still open)")
                continue
            if statement.op == "def":
                if len(self.frames) > 1:
                    raise BuildError(statement.line, "def", "def stands at top level only, "
                                     "not inside a range")
                if statement.target or not _func_operand(statement):
                    raise BuildError(statement.line, statement.target or "def",
                                     "expected 'def @name %param ...'")
                pending_def = [statement]
                continue
            self._statement(statement)
        if pending_def is not None:
            first = pending_def[0]
            name = first.operands[0].text
            raise BuildError(0, name, f"the def of {name} on line {first.line} is never closed "
                             f"(expected 'end {name}')")
        loop = self.frames[-1].loop
        if loop is not None:
            raise BuildError(0, loop.name, f"the range {loop.name} opened on line {loop.line} "
                             f"is never closed (expected 'end {loop.name}')")
        return Program(self.graph, self.top, dict(sorted(self.buffers.items())), self.functions,
                       self.definitions, self.calls, self.names, self.semantics)

    # --- statements -------------------------------------------------------------------------

    def _statement(self, s: Statement) -> None:
        if s.op in _EFFECT_OPS and s.target:
            raise BuildError(s.line, s.target, f"{s.op} gives no value to name; write it "
                             f"without '{s.target} ='")
        if s.op not in _EFFECT_OPS and not s.target:
            raise BuildError(s.line, s.op, f"a {s.op} statement needs a name: '%name = {s.op} ...'")
        # Bounded before anything runs: a case of ten lines may nest two ranges of 2^31 turns
        # (the run's own length, never a deadline, so the bound holds on any machine).
        turns = math.prod(f.loop.count for f in self.frames if f.loop is not None)
        self.runs += turns * (1 + (s.op == "range" and _count(s)))
        if self.runs > MAX_RUNS:
            raise BeyondLimit(s.line, _target(s) or s.op, f"the program runs more than "
                              f"{MAX_RUNS} statements (each statement of a range body once a "
                              "turn, and each turn)")
        handler = {"buffer": self._buffer, "store": self._store, "range": self._range,
                   "end": self._end, "gradient": self._gradient,
                   "return": self._misplaced}.get(s.op, self._value)
        handler(s)

    def _misplaced(self, s: Statement) -> None:
        raise BuildError(s.line, s.op, "return stands only at the end of a def body")

    def _name(self, s: Statement, node: Node) -> None:
        name = _target(s)
        if name in self.defined_at:
            raise BuildError(s.line, name, f"{name} is already defined on line "
                             f"{self.defined_at[name]}; every name is assigned once")
        self.defined_at[name] = s.line
        self.visible[name] = node
        self.frames[-1].names.append(name)
        self.names.setdefault(node, name)

    def _bind(self, s: Statement, node: Node, first: int) -> Define:
        self._name(s, node)
        define = Define(s.line, _target(s), node, self.graph.nodes[first:])
        self.frames[-1].body.append(define)
        return define

    def _buffer(self, s: Statement) -> None:
        if len(self.frames) > 1:
            raise BuildError(s.line, _target(s), "buffers are declared at top level, not inside "
                             "a range")
        if s.operands:
            raise BuildError(s.line, s.operands[0].text, "buffer takes no operands, only "
                             "slot=, dtype= and shape=")
        attrs = dict(s.attrs)
        extra = set(attrs) - {"slot", "dtype", "shape"}
        if extra:
            raise BuildError(s.line, sorted(extra)[0], "buffer takes only slot=, dtype= and "
                             "shape=")
        slot, dtype = attrs.get("slot"), attrs.get("dtype")
        if not isinstance(slot, int) or slot < 0:
            raise BuildError(s.line, str(slot), "buffer needs slot=N, a non-negative integer")
        if slot in self.buffers:
            raise BuildError(s.line, str(slot), f"slot {slot} is already declared on line "
                             f"{self.buffers[slot].line}")
        if dtype not in DTYPES:
            raise BuildError(s.line, str(dtype), "buffer needs dtype=f32, dtype=i32 or "
                             "dtype=bool")
        shape = _shape_attr(s, attrs.get("shape", ()))
        self.buffer_elements += math.prod(shape)
        if self.buffer_elements > MAX_BUFFER_ELEMENTS:
            raise BeyondLimit(s.line, str(slot), f"the buffers declared so far hold more than "
                              f"{MAX_BUFFER_ELEMENTS} elements together")
        first = len(self.graph.nodes)
        node = self.graph.node("buffer", (), (("slot", slot),), line=s.line, dtype=dtype,
                               shape=shape)
        self.buffers[slot] = node
        self._bind(s, node, first)

    def _store(self, s: Statement) -> None:
        if len(s.operands) not in (2, 3):
            raise BuildError(s.line, "store", "store takes a buffer, a value and an optional "
                             f"index, not {len(s.operands)} operands")
        _no_attrs(s)
        first = len(self.graph.nodes)
        buffer, value, *index = (self._operand(s, o) for o in s.operands)
        if buffer.op != "buffer":
            raise BuildError(s.line, s.operands[0].text, "store writes to a buffer, and "
                             f"{s.operands[0].text} is a value")
        if value.op == "buffer":
            raise BuildError(s.line, s.operands[1].text, "store writes a value, and "
                             f"{s.operands[1].text} is a buffer: load it first")
        if value.dtype != buffer.dtype:
            raise BuildError(s.line, s.operands[1].text, f"the buffer is {buffer.dtype} and the "
                             f"value {value.dtype}" + _literal_hint(value, buffer.dtype))
        if index:
            if index[0].op == "buffer":
                raise BuildError(s.line, s.operands[2].text, "operand 3 of store is a buffer, "
                                 "a handle and not a value: load it first")
            if index[0].dtype != "i32" or index[0].shape != ():
                raise BuildError(s.line, s.operands[2].text, "an index must be an i32 scalar")
            if value.shape != ():
                raise BuildError(s.line, s.operands[1].text, "a store to one element takes a "
                                 f"scalar value, not {list(value.shape)}")
        elif not value.is_literal and value.shape != buffer.shape:
            raise BuildError(s.line, s.operands[1].text, f"the buffer has shape "
                             f"{list(buffer.shape)} and the value {list(value.shape)}")
        self.stores_to[buffer.attr("slot")] += 1
        self.frames[-1].body.append(Store(s.line, buffer, value, index[0] if index else None,
                                          self.graph.nodes[first:]))

    def _range(self, s: Statement) -> None:
        _no_attrs(s)
        if len(s.operands) != 1 or s.operands[0].kind != "i32":
            token = s.operands[0].text if s.operands else "range"
            raise BuildError(s.line, token, "range takes one operand, its count: an i32 literal")
        count = s.operands[0].value
        assert isinstance(count, int)  # an i32 literal's value (syntax.py)
        if count < 0:
            raise BuildError(s.line, s.operands[0].text, "the count of a range cannot be "
                             "negative")
        if len(self.frames) > MAX_NESTING:
            raise BeyondLimit(s.line, _target(s), f"ranges nest deeper than {MAX_NESTING}")
        loop_id = self.next_range
        self.next_range += 1
        counter = self.graph.node("range", (), (("count", count),), scope=loop_id, tag=loop_id,
                                  line=s.line, dtype="i32", shape=())
        loop = Loop(s.line, counter, _target(s), count)
        self.frames[-1].body.append(loop)
        self.frames.append(_Frame(loop.body, loop))
        self._name(s, counter)  # in the body's frame: visible in the body only

    def _end(self, s: Statement) -> None:
        _no_attrs(s)
        frame = self.frames[-1]
        token = s.operands[0].text if len(s.operands) == 1 else "end"
        if frame.loop is None:
            raise BuildError(s.line, token, "end closes nothing: no range is open"
                             + (" (a def's end closes it only after a def)"
                                if token.startswith("@") else ""))
        if len(s.operands) != 1 or token != frame.loop.name:
            raise BuildError(s.line, token, f"expected 'end {frame.loop.name}' to close the "
                             f"range opened on line {frame.loop.line}")
        self.frames.pop()
        for name in frame.names:
            del self.visible[name]

    def _value(self, s: Statement) -> None:
        first = len(self.graph.nodes)
        node = self._value_node(s, self._operand, self.graph, self.scope)
        if node.op == "load" and node not in self.loads_in:
            self.loads_in[node] = frozenset(_tag(f.loop.counter) for f in self.frames if f.loop)
        self._bind(s, node, first)

    def _gradient(self, s: Statement) -> None:
        _no_attrs(s)
        if len(s.operands) != 2:
            raise BuildError(s.line, "gradient", f"gradient takes y and x, not "
                             f"{len(s.operands)} operands")
        first = len(self.graph.nodes)
        y, x = (self._operand(s, o) for o in s.operands)
        reaching = reaching_stores(self.top)
        open_ranges = {f.loop.counter.tag for f in self.frames if f.loop}
        expansion = gradient.expand(
            self.graph, y, x, scope=self.scope, line=s.line, token=s.operands[1].text,
            on_open_range=lambda n: bool(self._ranges_of(n) & open_ranges),
            stored_values=lambda load: [store.value for store in reaching.get(load, ())],
            describe=self._describe, semantics=self.semantics)
        self._bind(s, expansion.result, first).expansion = expansion

    # --- values (shared with function bodies) ----------------------------------------------

    def _operand(self, s: Statement, o: Operand) -> Node:
        if o.kind == "name":
            node = self.visible.get(o.text)
            if node is None:
                raise BuildError(s.line, o.text, self._undefined(o.text))
            return node
        return self._literal_or_func(s, o, self.graph, self.scope)

    def _undefined(self, name: str) -> str:
        if name in self.defined_at:
            return (f"{name} (line {self.defined_at[name]}) is defined inside a range body and "
                    "visible only there")
        return f"{name} is not defined; names are used only after the line that defines them"

    def _value_node(self, s: Statement, operand, graph: Graph, scope: int) -> Node:
        """The node of a value statement: an op of the signature table, or a call."""
        if s.op == "call":
            return self._call(s, operand, graph, scope)
        operands = tuple(operand(s, o) for o in s.operands)
        attrs = dict(s.attrs)
        if isinstance(attrs.get("axis"), int):
            attrs["axis"] = (attrs["axis"],)
        for key in ("shape",):
            if key in attrs:
                attrs[key] = _shape_attr(s, attrs[key])
        tag = None
        if s.op == "load" and operands and operands[0].op == "buffer":
            tag = self.stores_to[operands[0].attr("slot")]  # loads merge only between stores
        try:
            return graph.node(s.op, operands, attrs.items(), scope=scope, tag=tag, line=s.line)
        except SignatureError as problem:
            k = problem.operand
            token = s.operands[k].text if k is not None and k < len(s.operands) else s.op
            raise (BeyondLimit if problem.limit else BuildError)(s.line, token,
                                                                 str(problem)) from None

    def _call(self, s: Statement, operand, graph: Graph, scope: int) -> Node:
        _no_attrs(s)
        if not s.operands or s.operands[0].kind != "func":
            raise BuildError(s.line, "call", "call takes an @function, then its arguments")
        name = s.operands[0].text
        function = self.functions.get(name)
        if function is None:
            raise BuildError(s.line, name, f"{name} is not defined; a function is defined with "
                             "def before its first call")
        args = tuple(operand(s, o) for o in s.operands[1:])
        if len(args) != len(function.params):
            raise BuildError(s.line, name, f"{name} takes {len(function.params)} arguments, "
                             f"not {len(args)}")
        for o, arg in zip(s.operands[1:], args, strict=True):
            if arg.op == "buffer":
                raise BuildError(s.line, o.text, f"{o.text} is a buffer: load it first")
        instance = self._instance(function, args, s.line)
        node = graph.node("call", args, (("func", name),), scope=scope, line=s.line,
                          dtype=instance.result.dtype, shape=instance.result.shape)
        self.calls[node] = instance
        return node

    # --- functions --------------------------------------------------------------------------

    # Complex on purpose: each rule of a def's text, in ir.md's order, with its own error.
    def _define_function(self, statements: list[Statement]) -> None:  # noqa: C901
        head, body = statements[0], statements[1:-1]
        if head.target or head.attrs or not head.operands or head.operands[0].kind != "func":
            raise BuildError(head.line, head.op, "expected 'def @name %param ...'")
        name = head.operands[0].text
        params = [o.text for o in head.operands[1:]]
        for o in head.operands[1:]:
            if o.kind != "name":
                raise BuildError(head.line, o.text, "a parameter is a %name")
        if len(set(params)) != len(params):
            raise BuildError(head.line, name, "a parameter name appears twice")
        if name in self.functions:
            raise BuildError(head.line, name, f"{name} is already defined on line "
                             f"{self.functions[name].line}")
        depth = 1
        seen = set(params)
        for k, s in enumerate(body):
            last = k == len(body) - 1
            if s.op == "gradient" and errors.IN_FUNCTION in self.semantics.rejections:
                raise GradientError(s.line, "gradient", errors.IN_FUNCTION,
                                    f"a gradient cannot stand in a function body ({name})")
            if s.op in ("buffer", "load", "store", "range", "end", "def"):
                raise BuildError(s.line, s.op, f"a function body holds value ops only, not "
                                 f"{s.op}")
            if s.op == "return":
                if not last or len(s.operands) != 1 or s.target or s.attrs:
                    raise BuildError(s.line, "return", "a body ends with exactly one "
                                     "'return %value', as its last statement")
            elif not s.target:
                raise BuildError(s.line, s.op, f"a {s.op} statement needs a name")
            if s.op == "call" and s.operands and s.operands[0].kind == "func":
                callee = s.operands[0].text
                if callee not in self.functions:
                    raise BuildError(s.line, callee, f"{name} calls {callee}, which is not "
                                     "defined before it: a body calls only functions defined "
                                     "before it, so there is no recursion")
                depth = max(depth, 1 + self.functions[callee].depth)
            _text_alone(s, seen, name)
        if not body or body[-1].op != "return":
            raise BuildError(statements[-1].line, "end", f"the body of {name} must end with "
                             "'return %value'")
        if depth > MAX_NESTING:
            raise BeyondLimit(head.line, name, f"calls nest deeper than {MAX_NESTING}")
        self.functions[name] = Function(name, head.line, params, body, depth)
        self.definitions += statements



    def _instance(self, function: Function, args: tuple[Node, ...], line: int) -> Instance:
        """The body built for these argument types (dtype and shape), made once."""
        signature = tuple((a.dtype, a.shape) for a in args)
        if signature in function.instances:
            return function.instances[signature]
        graph = Graph(self.semantics.key, self.semantics.scope_of)
        params = [graph.node("param", (), (("index", k),), dtype=d, shape=sh, line=function.line)
                  for k, (d, sh) in enumerate(signature)]
        env = dict(zip(function.params, params, strict=True))
        defined = {p: function.line for p in function.params}

        def operand(s: Statement, o: Operand) -> Node:
            if o.kind == "name":
                if o.text not in env:
                    raise BuildError(s.line, o.text, f"{o.text} is not defined in {function.name}"
                                     "; a body sees its parameters and its own names only")
                return env[o.text]
            return self._literal_or_func(s, o, graph, 0)

        statements = []
        try:
            for s in function.body:
                if s.op == "return":
                    result = operand(s, s.operands[0])
                    break
                if s.target in defined:
                    raise BuildError(s.line, s.target, f"{s.target} is already defined on line "
                                     f"{defined[s.target]}")
                first = len(graph.nodes)
                expansion = None
                if s.op == "gradient":  # only where the semantics lets one stand here
                    y, x = (operand(s, o) for o in s.operands)
                    expansion = gradient.expand(
                        graph, y, x, scope=0, line=s.line, token=s.operands[1].text,
                        on_open_range=lambda n: False, stored_values=lambda load: (),
                        describe=self._describe, semantics=self.semantics)
                    node = expansion.result
                else:
                    node = self._value_node(s, operand, graph, 0)
                env[_target(s)], defined[_target(s)] = node, s.line
                statements.append(Define(s.line, _target(s), node, graph.nodes[first:],
                                         expansion))
        except BuildError as problem:
            types = ", ".join(f"{d}{list(sh)}" for d, sh in signature) or "no arguments"
            raise BuildError(problem.line, problem.token, f"{problem.message} (in "
                             f"{function.name}, called on line {line} with {types})") from None
        instance = Instance(graph, params, result, statements)
        function.instances[signature] = instance
        return instance

    def _literal_or_func(self, s: Statement, o: Operand, graph: Graph, scope: int) -> Node:
        if o.kind == "func":
            raise BuildError(s.line, o.text, f"{o.text} is a function: only call takes one")
        value = self.semantics.literal(o.text) if o.kind == "f32" else o.value
        return graph.const(o.kind, value, scope=scope, line=s.line)

    # --- what gradient asks -------------------------------------------------------------------

    def _ranges_of(self, node: Node) -> frozenset[int]:
        """The ranges a node depends on: through a counter, or a load made inside a body."""
        memo: dict[Node, frozenset[int]] = {}
        inputs = self.semantics.range_inputs
        for n in gradient.post_order(node, inputs):
            own = frozenset((_tag(n),)) if n.op == "range" else self.loads_in.get(n, frozenset())
            memo[n] = own.union(*(memo[o] for o in inputs(n)))
        return memo[node]

    def _describe(self, node: Node) -> str:
        if node.is_literal:
            value = node.attr("value")
            return Operand(node.dtype, "", value).canonical()
        name = self.names.get(node)
        if name:
            return f"{name} (line {node.line})" if node.line else name
        return f"the {node.op} node made on line {node.line}"


def reaching_stores(statements: list) -> dict[Node, set[Store]]:
    """For each load, the stores whose written value it may read (SPEC.md, "Buffers and memory").

    Program order, statically: a store of the whole buffer hides the stores before it; a store
    to one element adds itself to them. A range body's loads also read what the body stored in
    earlier iterations, found by running the body's flow to a fixed point.
    """
    found: dict[Node, set[Store]] = defaultdict(set)

    def flow(body: list, state: dict[int, frozenset]) -> dict[int, frozenset]:
        for s in body:
            if isinstance(s, Define) and s.node.op == "load":
                found[s.node] |= state.get(s.node.operands[0].attr("slot"), frozenset())
            elif isinstance(s, Store):
                slot = s.buffer.attr("slot")
                earlier = frozenset() if s.index is None else state.get(slot, frozenset())
                state = {**state, slot: earlier | {s}}
            elif isinstance(s, Loop) and s.count > 0:
                entry = state
                while True:
                    out = flow(s.body, entry)
                    merged = {k: state.get(k, frozenset()) | out.get(k, frozenset())
                              for k in state.keys() | out.keys()}
                    if s.count == 1 or merged == entry:
                        break
                    entry = merged
                state = out
        return state

    flow(statements, {})
    return found


# --- small helpers ----------------------------------------------------------------------------


def _func_operand(s: Statement):
    return s.operands[0].text if s.operands and s.operands[0].kind == "func" else None


def _shape_attr(s: Statement, shape) -> tuple[int, ...]:
    if isinstance(shape, int):
        shape = (shape,)
    try:
        return check_shape(shape)
    except SignatureError as problem:
        raise (BeyondLimit if problem.limit else BuildError)(s.line, "shape",
                                                             str(problem)) from None


def _no_attrs(s: Statement) -> None:
    if s.attrs:
        raise BuildError(s.line, s.attrs[0][0], f"{s.op} takes no attributes")


def _literal_hint(value: Node, dtype: str) -> str:
    if value.is_literal and dtype == "f32" and value.dtype == "i32":
        return "; write an f32 literal with a '.', like 1.0"
    return ""


__all__ = ["Define", "Function", "Instance", "Loop", "Program", "Store", "build_program",
           "infer", "reaching_stores"]


def _text_alone(s: Statement, seen: set[str], function: str) -> None:
    """What a function body's statement `s` gets wrong by its text alone, raised as its
    BuildError at its def, whether or not the function is ever called (ir.md: every error in
    the text is reported with its line; the types of a body wait for a call): an unknown op,
    a wrong count of operands, an attribute its op does not take, a name not defined before
    it. `seen`: the parameters and the body's names so far, to which `s`'s is added."""
    for o in s.operands:
        if o.kind == "name" and o.text not in seen:
            raise BuildError(s.line, o.text, f"{o.text} is not defined in {function}; a body "
                             "sees its parameters and its own names only")
    if s.op not in ("call", "return", "gradient"):
        if s.op not in OPS:
            raise BuildError(s.line, s.op, f"unknown op '{s.op}'")
        arity = OPS[s.op].arity
        low, high = arity if isinstance(arity, tuple) else (arity, arity)
        if not low <= len(s.operands) <= high:
            want = f"{low}" if low == high else f"{low} or {high}"
            raise BuildError(s.line, s.op, f"{s.op} takes {want} operand"
                             f"{'s' if high > 1 else ''}, not {len(s.operands)}")
        extra = {key for key, _ in s.attrs} - OPS[s.op].attributes
        if extra:
            raise BuildError(s.line, sorted(extra)[0], f"{s.op} takes no attribute "
                             f"{sorted(extra)[0]}=")
    if s.target:
        seen.add(s.target)
