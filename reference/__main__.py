"""The reference on the command line. docs/commands.md, "The command line".

    python -m reference run PROGRAM.ir [--in 0=1,2,3] [--bits] [--trace]
    python -m reference expand PROGRAM.ir [--trace]
    python -m reference check CASE.ir|FOLDER ...
    python -m reference serve            (the JSON-lines protocol on stdin and stdout)

Bad input is reported as `FILE:LINE: message` on stderr with exit status 1, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys

import numpy as np

from . import Runner, build, cases, compile_program, exact
from .errors import IRError
from .printer import format_expanded, format_trace


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m reference", description=__doc__.split(
        "\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="run a program and print the final slots")
    run.add_argument("program")
    run.add_argument("--in", dest="inputs", action="append", default=[], metavar="S=V,V,...",
                     help="initial contents of slot S (else the file's '#: in' lines, else 0)")
    run.add_argument("--bits", action="store_true", help="print f32 values as hex bits too")
    run.add_argument("--trace", action="store_true", help="print each gradient's walk first")
    expand = commands.add_parser("expand", help="print the program with gradients expanded")
    expand.add_argument("program")
    expand.add_argument("--trace", action="store_true", help="print each gradient's walk too")
    check = commands.add_parser("check", help="run case files against the reference")
    check.add_argument("paths", nargs="+")
    commands.add_parser("serve", help="speak the JSON-lines protocol on stdin and stdout")
    args = parser.parse_args(argv)
    if args.command == "serve":
        # The suite's own server (conformance/commands/serve.py), run on the reference: the
        # one command that needs the installed package, not just this folder.
        serve = importlib.import_module("gradient_conformance.conformance.commands.serve")
        return serve.serve_module("reference")
    try:
        return {"run": _run, "expand": _expand, "check": _check}[args.command](args)
    except IRError as problem:
        name = getattr(args, "program", "<input>")
        line = f":{problem.line}" if problem.line else ""
        print(f"{name}{line}: {problem.message}"
              + (f" (at '{problem.token}')" if problem.token else ""), file=sys.stderr)
        return 1
    except (OSError, ValueError) as problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2


def _source(path: str) -> str:
    from .cases import read_file
    return read_file(path)


def _run(args) -> int:
    source = _source(args.program)
    program = compile_program(source)
    if args.trace:
        print(format_trace(program), end="")
    case = cases.parse_case(source, args.program)
    slots = {s: (n.dtype, n.shape) for s, n in program.buffers.items()}
    for item in args.inputs:
        slot_text, _, values = item.partition("=")
        slot = int(slot_text)
        if slot not in slots:
            raise ValueError(f"--in {item}: the program declares no slot {slot}")
        dtype, shape = slots[slot]
        tokens = [t for t in values.replace(",", " ").split() if t]
        array = cases.values_array([cases.value(t, dtype) for t in tokens], dtype)
        if array.size not in (1, int(np.prod(shape))):
            raise ValueError(f"--in {item}: {array.size} values for shape {list(shape)}")
        # One value fills the whole slot; otherwise the values are the slot, row-major.
        case.inputs[slot] = array.reshape(shape) if array.size == int(np.prod(shape)) else \
            np.repeat(array, int(np.prod(shape))).reshape(shape)
    final = Runner(program)(cases.initial_buffers(case, slots))
    for slot, values in final.items():
        print(f"out {slot} = {_format_values(values, args.bits)}")
    return 0


def _format_values(values: np.ndarray, bits: bool) -> str:
    if values.dtype == np.float32:
        words = values.view(np.uint32).ravel()
        return " ".join(exact.f32_to_text(int(w)) + (f" (0x{int(w):08x})" if bits else "")
                        for w in words)
    if values.dtype == np.bool_:
        return " ".join("true" if v else "false" for v in values.ravel())
    return " ".join(str(int(v)) for v in values.ravel())


def _expand(args) -> int:
    program = compile_program(_source(args.program))
    print(format_expanded(program), end="")
    if args.trace:
        print()
        print("# the walk", *("# " + line for line in format_trace(program).splitlines()),
              sep="\n")
    return 0


def _check(args) -> int:
    passed = failed = 0
    for path in cases.case_paths(args.paths):
        try:
            case = cases.load_case(path)
        except (OSError, ValueError, IRError) as problem:
            ok, why = False, f"unreadable case file: {problem}"
        else:
            ok, why = cases.check(case, build)
        passed, failed = passed + ok, failed + (not ok)
        print(f"{'PASS' if ok else 'FAIL'} {path}: {why}")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
