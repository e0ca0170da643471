"""`gradient y x`: the checks, the walk, and its trace. SPEC.md, "gradient".

The walk is iterative: a chain of 10^5 nodes neither recurses nor hits a limit. What the
spec could have chosen otherwise (the rules, the order, the fold, which edges a gradient
flows along, the rejections) comes from a `Semantics` (reference/semantics.py); the
functions here named in it are the spec's own choices.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from operator import attrgetter

from . import errors, exact
from .errors import GradientError
from .graph import Graph, Node
from .rules import rule_key


class Emitter:
    """Builds the nodes of an expansion in the gradient statement's scope and line (its
    origin, for a variant that keeps an expansion's nodes apart from the program's)."""

    def __init__(self, graph: Graph, scope: int, line: int):
        self.graph, self.scope, self.line = graph, scope, line

    def __call__(self, op: str, /, *operands: Node, **attrs) -> Node:
        items = [(k, v) for k, v in attrs.items() if v is not None]
        return self.graph.node(op, operands, items, scope=self.scope, line=self.line,
                               origin=self.line)

    def f32(self, text: str) -> Node:
        return self.graph.const("f32", exact.f32_from_text(text), scope=self.scope,
                                line=self.line, origin=self.line)


@dataclass
class Visit:
    """One node the walk visited: the shares it received in arrival order (and the node
    that sent each, None for y's 1.0), their fold, and what it passed to which operand (by
    operand index)."""

    node: Node
    shares: list[Node]
    senders: list[Node | None] = field(default_factory=list)
    gradient: Node | None = None
    passed: list[tuple[int, Node]] = field(default_factory=list)


@dataclass
class Expansion:
    y: Node
    x: Node
    result: Node
    visits: list[Visit]


def expand(graph: Graph, y: Node, x: Node, *, scope: int, line: int, token: str,
           on_open_range: Callable[[Node], bool],
           stored_values: Callable[[Node], Iterable[Node]],
           describe: Callable[[Node], str], semantics) -> Expansion:
    """Expand `gradient y x` into nodes of `graph`, or raise GradientError.

    `on_open_range(n)`: n depends on a range whose body holds this gradient.
    `stored_values(load)`: the values of the stores that `load` may read.
    `describe(n)`: how the error messages name a node.
    `semantics`: the rules, order, fold, flow and rejections to use (the spec's: SPEC).
    """
    _check(y, x, line, token, on_open_range, describe, semantics.rejections)
    for rejects in semantics.more_rejections:
        problem = rejects(y, x, stored_values)
        if problem:
            raise errors.BuildError(line, token, f"gradient rejected: {problem}")
    e = Emitter(graph, scope, line)
    carries = semantics.depends_on(y, x, stored_values, semantics.flows)
    # The loss's own gradient: 1.0. A loss of any other shape, which only a semantics with
    # loss-not-f32-scalar lifted lets through, is summed implicitly: d(sum y)/dy is 1.0 at
    # every element, so its seed is 1.0 expanded to y's shape (a scalar seed would say that
    # only one of y's elements counts).
    seed = e.f32("1.0") if not y.shape else e("expand", e.f32("1.0"), shape=y.shape)
    received: dict[Node, Visit] = {y: Visit(y, [seed], [None])}
    visits, result = [], None
    for node in reversed(semantics.post_order(y)):
        visit = received.get(node)
        if visit is None:
            continue
        visits.append(visit)
        visit.gradient = semantics.fold(e, visit.shares, visit.senders)
        if node is x:
            result = visit.gradient  # x passes nothing on; the walk goes on to the end
            continue
        rule = semantics.rules.get(rule_key(node))
        if rule is None:
            if node not in carries or errors.NO_RULE not in semantics.rejections:
                continue  # it would pass nothing: a loss that does not depend on x
            raise GradientError(
                line, token, errors.NO_RULE,
                f"the walk from {describe(y)} to {describe(x)} reaches {describe(node)}, and "
                f"'{rule_key(node).replace('.', ' op=')}' has no gradient rule"
                + (" (gradients do not go through memory)" if node.op == "load" else ""))
        for k, operand in enumerate(node.operands):
            if operand in carries:
                share = rule(e, node, visit.gradient, k)
                if share is not None:
                    receiver = received.setdefault(operand, Visit(operand, []))
                    receiver.shares.append(share)
                    receiver.senders.append(node)
                    visit.passed.append((k, share))
    return Expansion(y, x, result if result is not None else _zeros(e, x), visits)


def _check(y, x, line, token, on_open_range, describe, rules) -> None:
    """The rejection rules that do not need the walk, in the order SPEC.md gives them, of
    those in force (`rules`: the spec has them all)."""
    if errors.LOSS_NOT_F32_SCALAR in rules and (y.op == "buffer" or y.dtype != "f32"
                                                or y.shape != ()):
        kind = "a buffer" if y.op == "buffer" else f"{y.dtype}{list(y.shape)}"
        raise GradientError(line, token, errors.LOSS_NOT_F32_SCALAR,
                            f"the loss {describe(y)} is {kind}; it must be an f32 scalar "
                            "(shape []): reduce it first")
    if errors.X_NOT_F32 in rules and (x.op == "buffer" or x.dtype != "f32"):
        kind = "a buffer" if x.op == "buffer" else f"an {x.dtype} value"
        raise GradientError(line, token, errors.X_NOT_F32,
                            f"{describe(x)} is {kind}; gradient is taken against an f32 value")
    if errors.X_LITERAL in rules and x.is_literal:
        raise GradientError(line, token, errors.X_LITERAL,
                            f"x is the literal {describe(x)}, which stands for every equal "
                            "literal of the program; name a value instead")
    for role, node in (("the loss", y), ("x", x)):
        if errors.OPEN_RANGE in rules and on_open_range(node):
            raise GradientError(line, token, errors.OPEN_RANGE,
                                f"{role} {describe(node)} depends on the range this gradient "
                                "is in (its counter, or a load inside its body)")


OPERANDS = attrgetter("operands")  # what the spec's walk descends to: every operand


def post_order(root: Node, operands_of: Callable[[Node], Iterable[Node]] = OPERANDS) \
        -> list[Node]:
    """Depth first from root, operands left to right, each node once (SPEC.md, "The walk").
    `operands_of`: what the walk descends to from a node (a variant of the spec may
    choose otherwise)."""
    order, seen = [], {root}
    stack = [(root, iter(operands_of(root)))]
    while stack:
        node, operands = stack[-1]
        for operand in operands:
            if operand not in seen:
                seen.add(operand)
                stack.append((operand, iter(operands_of(operand))))
                break
        else:
            stack.pop()
            order.append(node)
    return order


def left_fold(e: Emitter, shares: list[Node], senders=()) -> Node:
    """The spec's sum of shares: `s1`, then `add s1 s2`, then `add (add s1 s2) s3`, in
    arrival order (who sent them does not matter)."""
    total = shares[0]
    for share in shares[1:]:
        total = e("add", total, share)
    return total


def flows(node: Node, operand: Node) -> bool:
    """Whether a gradient may flow from `node` to its `operand` (SPEC.md, "Depends on x"):
    both f32, `node` no detach, `operand` no buffer."""
    return node.dtype == "f32" and node.op != "detach" and operand.dtype == "f32" and \
        operand.op != "buffer"


def _zeros(e: Emitter, x: Node) -> Node:
    zero = e.f32("0.0")
    return e("expand", zero, shape=x.shape) if x.shape else zero


def depends_on(y: Node, x: Node, stored_values, flows) -> set[Node]:
    """The nodes of y's graph that depend on x: x, and every node with an operand that
    depends on x and that a gradient `flows` to (the spec's: f32 nodes but detach, and their
    f32 operands), or, for a load, a stored value it may read. Memory can make cycles (a loop
    that loads what it stores), so this is a reachability search backwards from x, not a
    recursion."""
    def inputs(node: Node) -> list[Node]:
        if node is x or node.op == "buffer":
            return []
        found = [o for o in node.operands if flows(node, o)]
        if node.op == "load":
            found += [v for v in stored_values(node) if flows(node, v)]
        return found

    return between(y, x, inputs)


def between(y: Node, x: Node, inputs: Callable[[Node], Iterable[Node]]) -> set[Node]:
    """The nodes on some path from y down to x, following `inputs` (neither past x): x and y
    among them, or none if there is no such path. Memory can make cycles, so it is a search
    down from y, then back up from x through the users it found."""
    users: dict[Node, list[Node]] = {}
    seen, stack = {y}, [y]
    while stack:
        node = stack.pop()
        if node is x:
            continue
        for operand in inputs(node):
            users.setdefault(operand, []).append(node)
            if operand not in seen:
                seen.add(operand)
                stack.append(operand)
    if x not in seen:
        return set()
    on, stack = {x}, [x]
    while stack:
        for user in users.get(stack.pop(), ()):
            if user not in on:
                on.add(user)
                stack.append(user)
    return on


def reachable(root: Node, through: Callable[[Node], bool] = lambda node: True) -> set[Node]:
    """root and every node it uses, descending only from the nodes `through` accepts."""
    seen, stack = {root}, [root]
    while stack:
        node = stack.pop()
        if not through(node):
            continue
        for operand in node.operands:
            if operand not in seen:
                seen.add(operand)
                stack.append(operand)
    return seen
