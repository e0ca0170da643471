"""`gradient-conformance serve MODULE_OR_FILE`: a Python implementation over the JSON-lines
protocol, in a process of its own. SPEC.md, "The protocol".

It lets any Python implementation, under any interpreter with this package installed (even
without its dependencies but numpy: an old framework's own venv), be run as
`--impl="cmd:PYTHON -m gradient_conformance serve MODULE"`. What the module prints goes to
stderr, not into the channel; its statuses are those of conformance/transports/calling.py.
"""

from __future__ import annotations

import os
import sys


def serve_module(spec: str) -> int:
    from gradient_conformance.conformance.transports.calling import LoadFailed, load_module
    from gradient_conformance.conformance.transports.jsonlines import serve
    channel = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # the module's prints must not look like replies
    try:
        module = load_module(spec, os.getcwd())
    except LoadFailed as problem:
        print(f"gradient-conformance serve: could not load {spec}: {problem}", file=sys.stderr)
        return 2

    def write(text: str) -> None:
        channel.write(text)
        channel.flush()

    serve(module, sys.stdin, write)
    return 0


def add_parser(commands) -> None:
    parser = commands.add_parser("serve", help="speak the JSON-lines protocol on stdin and "
                                "stdout for a Python implementation")
    parser.add_argument("impl", help="a module name, a .py file, or reference")


def run(args) -> int:
    return serve_module(args.impl)

