"""The lesson's tape exercise: `backprop(tape)`, slow and exact. SPEC.md, "Tapes".

A tape is a program as a list: entry k is ["input", v], ["const", v], ["add", i, j] or
["mul", i, j] with i, j < k. Values are computed forward in f32. The derivative of the last
entry with respect to every entry comes back by the walk of gradient.md on the list: the last
entry receives 1.0; entries are processed from the last to the first; an entry that received
shares sums them as a left fold in arrival order, then passes its shares to operand i and then
to operand j (add: g to each; mul: g * other). The shares are the rules table's own rows
(rules.py), evaluated in f32 instead of built as nodes.

Every f32 result comes from reference/exact.py: this module computes nothing itself.
"""

from __future__ import annotations

import math
import numbers

from . import exact
from .errors import IRError
from .interp import EXACT, elementwise_table
from .semantics import SPEC

LEAVES = ("input", "const")
OPERATIONS = ("add", "mul")  # an entry's op, on two earlier entries
KINDS = (*LEAVES, *OPERATIONS)


class TapeError(IRError):
    """A tape that is not valid: `entry` is the index at fault (None for the whole tape), and
    `kind` one of empty, entry, kind, operand, value."""

    def __init__(self, entry: int | None, kind: str, message: str):
        self.entry, self.kind = entry, kind
        super().__init__(0 if entry is None else entry + 1, "", message)

    def describe(self) -> str:
        return self.message if self.entry is None else f"entry {self.entry}: {self.message}"


def value_bits(entry: int, value) -> int:
    """An entry's value as f32 bits: a number rounded once to the nearest f32 (ties to even),
    infinities and NaN as they are, like the IR's literals. Anything else is a TapeError."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TapeError(entry, "value", f"the value {value!r} is not a number")
    if isinstance(value, numbers.Integral):
        return exact.f32_from_dyadic(int(value), 0)
    return exact.f32_from_float(float(value))


def check(tape) -> list[tuple]:
    """The tape as (kind, payload) tuples: (kind, bits) or (kind, i, j). Raises TapeError."""
    if not isinstance(tape, list | tuple):
        raise TapeError(None, "entry", f"a tape is a list of entries, not {type(tape).__name__}")
    if not tape:
        raise TapeError(None, "empty", "the tape is empty: there is no last entry to "
                        "differentiate")
    entries: list[tuple] = []  # (kind, value bits) or (kind, operand, operand)
    for k, entry in enumerate(tape):
        if not isinstance(entry, list | tuple) or not entry:
            raise TapeError(k, "entry", f"an entry is a list like [\"add\", 0, 1], not "
                            f"{entry!r}")
        kind = entry[0]
        if kind not in KINDS:
            raise TapeError(k, "kind", f"unknown kind {kind!r} (known: {', '.join(KINDS)})")
        arity = 1 if kind in LEAVES else 2
        if len(entry) != arity + 1:
            raise TapeError(k, "entry", f"{kind} takes {arity} "
                            f"{'value' if arity == 1 else 'operand indices'}, not "
                            f"{len(entry) - 1}")
        if arity == 1:
            entries.append((kind, value_bits(k, entry[1])))
            continue
        for operand in entry[1:]:
            if isinstance(operand, bool) or not isinstance(operand, numbers.Integral):
                raise TapeError(k, "operand", f"operand {operand!r} is not an entry index")
            if not 0 <= int(operand) < k:
                raise TapeError(k, "operand", f"operand {operand} is not an earlier entry "
                                f"(entry {k} may use entries 0 to {k - 1})")
        entries.append((kind, int(entry[1]), int(entry[2])))
    return entries


class Scalar:
    """One value on the tape, shaped like a graph node for the rules table: the rules read a
    node's operands, and the tape's entries have operands too."""

    __slots__ = ("operands", "value")

    def __init__(self, value, operands=()):
        self.value, self.operands = value, operands


class Evaluator:
    """The emitter the rules are given, computing in `domain` instead of building nodes: a
    rule's op form is then evaluated exactly as the IR would evaluate the nodes it builds."""

    def __init__(self, domain):
        self.domain, self.table = domain, elementwise_table(domain)

    def __call__(self, op: str, /, *operands: Scalar) -> Scalar:
        return Scalar(self.table[op, "f32"](*(o.value for o in operands)), operands)

    def f32(self, text: str) -> Scalar:
        return Scalar(self.domain.literal(exact.f32_from_text(text)))


def forward(entries: list[tuple], domain=EXACT, override=None) -> list[Scalar]:
    """Every entry's value, in `domain` (f32 bits by default). `override` replaces the values
    of some entries (entry -> value in the domain), as finite differences need."""
    e = Evaluator(domain)
    values: list[Scalar] = []
    for k, entry in enumerate(entries):
        if entry[0] in LEAVES:
            value = Scalar(domain.literal(entry[1]))
        else:
            value = e(entry[0], values[entry[1]], values[entry[2]])
        if override and k in override:
            value = Scalar(override[k], value.operands)
        values.append(value)
    return values


def walk(entries: list[tuple], values: list[Scalar], semantics=SPEC
         ) -> tuple[list[int], list[list[int]]]:
    """(derivatives, shares): each entry's derivative in f32 bits, and the shares it received
    in arrival order. An entry that received no share gets +0.0 and passes nothing. `values`
    are in `semantics.tape_domain`, as `forward` gives them."""
    domain = semantics.tape_domain
    e = Evaluator(domain)
    shares: list[list] = [[] for _ in entries]
    senders: list[list] = [[] for _ in entries]
    shares[-1].append(e.f32("1.0").value)
    senders[-1].append(None)
    derivatives = [domain.literal(exact.POS_ZERO)] * len(entries)
    for k in semantics.tape_order(entries):
        if not shares[k]:
            continue  # the last entry does not depend on entry k
        g = semantics.tape_fold(domain, shares[k], senders[k])
        if entries[k][0] in LEAVES:
            derivatives[k] = semantics.tape_leaf(domain, entries[k][0], g)
            continue
        derivatives[k] = g
        if not semantics.tape_passes_on(domain, g):
            continue
        rule = semantics.rules[entries[k][0]]
        # operand i first, then j (i == j receives twice)
        for position in semantics.tape_operands(entries[k][1], entries[k][2]):
            operand = entries[k][1 + position]
            shares[operand].append(rule(e, values[k], Scalar(g), position).value)
            senders[operand].append(k)
    return ([domain.to_bits(v) for v in derivatives],
            [[domain.to_bits(v) for v in received] for received in shares])


def backprop_bits(tape, semantics=SPEC) -> list[int]:
    """The derivatives of the last entry, as f32 bits (by the spec, or by `semantics`)."""
    entries = check(tape)
    return walk(entries, forward(entries, semantics.tape_domain), semantics)[0]


def backprop_trace(tape) -> str:
    """The spec's walk of a valid tape, an entry a line from the last: its derivative, and
    the shares it received in arrival order, each with the entry that sent it."""
    entries = check(tape)
    derivatives, shares = walk(entries, forward(entries))
    senders: list[list] = [[] for _ in entries]
    senders[-1].append("the start")
    for k in range(len(entries) - 1, -1, -1):
        if shares[k] and entries[k][0] not in LEAVES:
            for position in SPEC.tape_operands(entries[k][1], entries[k][2]):
                senders[entries[k][1 + position]].append(f"entry {k}")
    lines = []
    for k in range(len(entries) - 1, -1, -1):
        received = [f"{exact.f32_to_text(b)} from {s}" for b, s in zip(shares[k], senders[k],
                                                                       strict=True)]
        lines.append(f"{k}: {list(tape[k])!r}  derivative "
                     f"{exact.f32_to_text(derivatives[k])} (0x{derivatives[k]:08x})"
                     + (f" = {' + '.join(received)}" if received else ": receives no share"))
    return "\n".join(lines)


def backprop(tape) -> list[float]:
    """The protocol entry point: the derivative of the last entry with respect to every
    entry, as Python floats that are exactly f32 values."""
    return [exact.decode(b) for b in backprop_bits(tape)]


def to_program(tape) -> str:
    """The IR program with the tape's ops: leaf k is element k of slot 0 (loaded, so not a
    hash-consed literal), and element k of slot 1 receives the gradient of the last entry
    with respect to entry k. On a tape whose every entry but the last is used exactly once,
    the two give the same bits; elsewhere hash consing and the walk's order may differ."""
    entries = check(tape)
    n = len(entries)
    lines = [f"%in = buffer slot=0 dtype=f32 shape=[{n}]",
             f"%out = buffer slot=1 dtype=f32 shape=[{n}]"]
    for k, entry in enumerate(entries):
        if entry[0] in LEAVES:
            lines.append(f"%e{k} = load %in {k}")
        else:
            lines.append(f"%e{k} = {entry[0]} %e{entry[1]} %e{entry[2]}")
    for k in range(n):
        lines += [f"%g{k} = gradient %e{n - 1} %e{k}", f"store %out %g{k} {k}"]
    return "\n".join(lines) + "\n"


def leaf_values(tape) -> list[int]:
    """Slot 0 of `to_program`: each leaf's value as f32 bits, 0 for the other entries."""
    return [entry[1] if entry[0] in LEAVES else exact.POS_ZERO for entry in check(tape)]


# --- tape case files (SPEC.md, "Tapes"): JSON, like the .ir case files for programs --------


def tape_from_json(data) -> list:
    """A case file's tape: a leaf value {"bits": "0x7f800000"} is those f32 bits (JSON has no
    infinity or NaN); everything else is taken as it is written."""
    out = []
    for entry in data:
        if isinstance(entry, list) and len(entry) == 2 and isinstance(entry[1], dict) and \
                set(entry[1]) == {"bits"}:
            out.append([entry[0], exact.decode(int(entry[1]["bits"], 16))])
        else:
            out.append(entry)
    return out


def tape_to_json(tape) -> list:
    """The inverse of `tape_from_json`: a non-finite leaf value as {"bits": ...}."""
    out = []
    for entry in tape:
        if isinstance(entry, list | tuple) and len(entry) == 2 and isinstance(entry[1], float) \
                and not math.isfinite(entry[1]):
            out.append([entry[0], {"bits": f"0x{value_bits(0, entry[1]):08x}"}])
        else:
            out.append(list(entry) if isinstance(entry, list | tuple) else entry)
    return out


def load_tape_case(text: str) -> dict:
    """A tape case file: {"tape": [...], "derivatives": [...]} or {"tape": [...], "error":
    KIND}, with an optional "description". Derivatives are decimals (rounded once) or hex
    bits, as strings. Returns tape, derivatives (f32 bits or None), error, description."""
    import json
    try:
        data = json.loads(text)
    except RecursionError:
        raise ValueError("a tape case nested too deep to read") from None
    if not isinstance(data, dict) or "tape" not in data or \
            ("derivatives" in data) == ("error" in data):
        raise ValueError('a tape case is {"tape": [...], "derivatives": [...]} or '
                         '{"tape": [...], "error": "KIND"}')
    derivatives = None
    if "derivatives" in data:
        derivatives = [int(d, 16) if d.lower().startswith("0x") else exact.f32_from_text(d)
                       for d in data["derivatives"]]
    return {"tape": tape_from_json(data["tape"]), "derivatives": derivatives,
            "error": data.get("error"), "description": data.get("description", "")}


def format_tape_case(tape, *, derivatives=None, error=None, description="") -> str:
    """A tape case file's text (the inverse of `load_tape_case`), one entry a line."""
    import json
    lines = ["{", f'  "description": {json.dumps(description)},', '  "tape": [']
    entries = tape_to_json(tape)
    lines += [f"    {json.dumps(e)}{',' if k + 1 < len(entries) else ''}"
              for k, e in enumerate(entries)]
    lines.append("  ],")
    if error is not None:
        lines.append(f'  "error": {json.dumps(error)}')
    else:
        lines.append('  "derivatives": [' + ", ".join(f'"0x{b:08x}"' for b in derivatives)
                     + "]")
    return "\n".join([*lines, "}"]) + "\n"
