"""The reference, read by a lexer that reads an i32 literal's digits before its sign: the
literal -2147483648 is read as 2147483648, out of range, and the program rejected
(issue 55: INT_MIN arrived only through buffers, so this survived the ci profile)."""

from gradient_conformance import reference

NAME = "int-min-literal"


def build(source):
    for number, line in enumerate(source.splitlines(), start=1):
        if "-2147483648" in line.split("#")[0].split():
            raise SyntaxError(f"line {number}: integer literal 2147483648 out of range")
    return reference.build(source)
