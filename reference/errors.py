"""The reference's errors. SPEC.md, "Errors".

Every error the reference raises for bad input is an `IRError`: it names the line, the token
at fault, and what was expected. Nothing else escapes the parser, the builder or the
interpreter; anything else would be a bug in the reference.
"""

from __future__ import annotations

# Stable codes of the gradient rejection rules (SPEC.md, "When gradient is rejected").
LOSS_NOT_F32_SCALAR = "loss-not-f32-scalar"
X_NOT_F32 = "x-not-f32"
X_LITERAL = "x-literal"
OPEN_RANGE = "open-range"
NO_RULE = "no-rule"
IN_FUNCTION = "in-function"
RULES = (LOSS_NOT_F32_SCALAR, X_NOT_F32, X_LITERAL, OPEN_RANGE, NO_RULE, IN_FUNCTION)


# Python's programming errors: raised from an implementation's build, a crash, not a
# rejection, unless the implementation names the class as deliberate
# (CAPABILITIES["rejection"]; impl-protocol.md; SPEC.md, "The protocol").
PROGRAMMING_ERRORS = frozenset({
    "TypeError", "NameError", "AttributeError", "UnboundLocalError", "KeyError", "IndexError",
    "RecursionError", "AssertionError", "ZeroDivisionError", "NotImplementedError"})


class IRError(Exception):
    """Bad input: `line` is 1-based (0 when the error concerns the whole text), `token` is the
    text at fault, `message` says what is wrong and what was expected."""

    kind = "invalid"
    limit = False  # beyond one of the reference's own limits (BeyondLimit), not the course's

    def __init__(self, line: int, token: str, message: str):
        self.line, self.token, self.message = line, token, message
        super().__init__(self.describe())

    def describe(self) -> str:
        where = f"line {self.line}" if self.line else "end of text"
        at = f" at '{_clip(self.token)}'" if self.token else ""
        return f"{where}{at}: {self.message}"


class ParseError(IRError):
    """The text does not follow the grammar."""

    kind = "syntax"


class BuildError(IRError):
    """Well-formed text that is not a valid program: names, dtypes, shapes, structure."""

    kind = "invalid"


class BeyondLimit(BuildError):
    """A program beyond one of the reference's own limits (SPEC.md, "Limits"): a value's
    elements, nesting. The course's text sets no limit, so no expectation of the suite rests
    on one: a check leaves such a program out."""

    limit = True


class LineBeyondLimit(ParseError):
    """A line of more tokens than the reference reads (SPEC.md, "Limits")."""

    limit = True


class GradientError(BuildError):
    """A `gradient` that the rules reject; `rule` is one of RULES."""

    def __init__(self, line: int, token: str, rule: str, message: str):
        assert rule in RULES, rule
        self.rule = rule
        super().__init__(line, token, f"gradient rejected [{rule}]: {message}")

    @property
    def kind(self) -> str:  # type: ignore[override]
        return self.rule


class RunError(IRError):
    """A failure while running a valid program: an index out of range, or bad buffers."""

    kind = "run"


class IndexOutOfRange(RunError, IndexError):
    """An index out of range: the one run-time error a valid program may have. It is an
    IndexError too, as the protocol's callers look for (SPEC.md, "Statuses")."""


def _clip(token: str, limit: int = 40) -> str:
    token = token.encode("unicode_escape").decode("ascii")
    return token if len(token) <= limit else token[: limit - 3] + "..."
