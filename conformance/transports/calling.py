"""Calling a Python implementation's functions, and saying what each call did in the terms of
SPEC.md, "Statuses": ok, rejected, run-error or failure.

One place for the rules, used wherever a Python module is called: in the isolated worker
(transports/worker_process.py), in the JSON-lines server (`gradient-conformance serve`), and
in the unprotected in-process mode. So a module gets the same statuses however it is run.

- An exception from `build` is a rejection: the protocol's deliberate answer. Running out of
  memory or of recursion depth is not a decision, and neither is an exception that is not an
  `Exception` (SystemExit, KeyboardInterrupt): those are failures.
- An exception from `run` is a run-time error; it blames an index when it is an IndexError or
  says that an index is out of range or bounds.
- What `run` and `backprop` return is read here, before any reply: the slots, dtypes and
  shapes the program declares; one number per tape entry.
"""

from __future__ import annotations

import copy
import importlib
import importlib.util
import numbers
import pathlib
import re
import sys
import sysconfig
import traceback
from dataclasses import dataclass

import numpy as np

MESSAGE_LIMIT = 4000  # characters of any message an implementation writes
# The IR's dtypes as numpy's own dtype strings: a tampered numpy.float32 cannot change them.
DTYPE_STRINGS = {"f32": "<f4", "i32": "<i4", "bool": "|b1"}
_INDEX = re.compile(r"index.*out of (range|bounds)|out of (range|bounds).*index", re.I | re.S)


class Deadline(BaseException):
    """The in-process mode's alarm going off: never the implementation's own answer, so
    every handler here lets it through."""


@dataclass
class Answer:
    """What one call did. `value`: build's run callable; run's {slot: array}; backprop's
    list of floats. `reason` (for a failure): crash, resource or junk."""

    status: str
    message: str = ""
    reason: str = ""
    index: bool = False
    value: object = None


def bounded(text: str, limit: int = MESSAGE_LIMIT) -> str:
    """`text` cut to `limit` characters, saying how many were left out."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... [{len(text) - limit} more characters not kept]"


def describe(problem: BaseException) -> str:
    """`Type: message (file:line)`, the line being the innermost of the implementation's
    own code (`own`) that the exception went through: the student's line that called numpy
    wrongly, not numpy's line that raised (said before it, "raised in file:line"); the
    innermost line of all where none is the implementation's own. Bounded, the place kept."""
    try:
        text = str(problem)
    except Exception as inner:  # noqa: BLE001 - an exception whose __str__ raises
        text = f"<its message could not be read: {type(inner).__name__}>"
    frames = traceback.extract_tb(problem.__traceback__) if problem.__traceback__ else []
    mine = [f for f in frames if own(f.filename)]
    where = ""
    if frames:
        at = mine[-1] if mine else frames[-1]
        where = f" ({at.filename}:{at.lineno})"
        if at is not frames[-1]:
            where = f" (raised in {frames[-1].filename}:{frames[-1].lineno}){where}"
    return f"{bounded(f'{type(problem).__name__}: {bounded(text)}')}{where}"


# Where code that is not the implementation's lives: the standard library, installed
# packages, and this module (it runs the implementation's calls).
_NOT_OWN = tuple(dict.fromkeys(
    str(pathlib.Path(p).resolve()) for key in ("stdlib", "platstdlib", "purelib", "platlib")
    if (p := sysconfig.get_paths().get(key))))
_HERE = str(pathlib.Path(__file__).resolve().parent)


def own(filename: str) -> bool:
    """Whether `filename` is the implementation's own code: a real file outside the standard
    library, the installed packages (site-packages, dist-packages) and this module's folder."""
    if filename.startswith("<"):  # <frozen ...>, <string>
        return False
    path = str(pathlib.Path(filename).resolve())
    parts = pathlib.Path(path).parts
    return not ("site-packages" in parts or "dist-packages" in parts
                or path.startswith((*_NOT_OWN, _HERE)))


def is_index_error(problem: BaseException) -> bool:
    return isinstance(problem, IndexError) or bool(_INDEX.search(str(problem)[:MESSAGE_LIMIT]))


def _not_a_decision(problem: BaseException) -> Answer | None:
    """The failure an exception is when it is no deliberate answer; None when it is one."""
    if isinstance(problem, Deadline):
        raise problem
    if isinstance(problem, MemoryError):
        return Answer("failure", f"it ran out of memory: {describe(problem)}", "resource")
    if isinstance(problem, RecursionError):
        return Answer("failure", f"it ran out of recursion depth: {describe(problem)}",
                      "resource")
    if not isinstance(problem, Exception):
        return Answer("failure", f"it raised {describe(problem)}", "crash")
    return None


class LoadFailed(Exception):
    """The module named by --impl could not be loaded; the message says where it failed."""


def load_module(spec: str, base: str):
    """The module `spec` names, as a user expects from a directory `base`: `reference` is the
    project's oracle, `variant:NAME` the oracle with a variant of the catalogue; a path
    ending in .py is that file (its folder importable, as for a script); anything else is a
    module name, looked up from `base` first."""
    if spec == "reference":
        return importlib.import_module("gradient_conformance.reference")
    if spec.startswith("variant:"):
        from gradient_conformance.conformance.diagnosis.variants import implementation
        try:
            return implementation(spec.removeprefix("variant:"))
        except KeyError as problem:
            raise LoadFailed(str(problem.args[0])) from None
    try:
        if spec.endswith(".py"):
            path = (pathlib.Path(base) / spec).resolve()
            if not path.is_file():
                raise LoadFailed(f"no such file: {path}")
            sys.path.insert(0, str(path.parent))
            module_spec = importlib.util.spec_from_file_location(path.stem, path)
            if module_spec is None or module_spec.loader is None:
                raise LoadFailed(f"{path} cannot be imported as a Python module")
            module = importlib.util.module_from_spec(module_spec)
            sys.modules[path.stem] = module
            module_spec.loader.exec_module(module)
            return module
        sys.path.insert(0, base)
        return importlib.import_module(spec)
    except LoadFailed:
        raise
    except BaseException as problem:  # noqa: BLE001 - SystemExit at import included
        raise LoadFailed(load_problem(spec, problem)) from None


def load_problem(spec: str, problem: BaseException) -> str:
    """What went wrong importing `spec`, with the lines of the user's code it went through
    (not the import machinery's, nor ours)."""
    ours = pathlib.Path(__file__).resolve().parent
    frames = [f for f in traceback.extract_tb(problem.__traceback__)
              if "importlib" not in f.filename and not pathlib.Path(f.filename).resolve()
              .is_relative_to(ours)]
    if isinstance(problem, ModuleNotFoundError) and not frames:
        return (f"no module named {problem.name!r} (looked up from {sys.path[0]} first, then "
                "the installed packages): name a module importable there, or a .py file")
    lines = [f"{type(problem).__name__}: {bounded(str(problem), 1000)}"]
    lines += [f"  {f.filename}:{f.lineno}, in {f.name}: {(f.line or '').strip()}"
              for f in frames[-4:]]
    return "\n".join(lines)


# Python's programming errors: raised from build, a crash, not a rejection, unless the
# implementation names the class as deliberate (CAPABILITIES["rejection"];
# impl-protocol.md; SPEC.md, "The protocol"). RecursionError is a failure of its own above.
# reference/errors.py's PROGRAMMING_ERRORS, written out: this module runs in the
# implementation's process and imports nothing of the package (tests/test_protocol.py
# keeps the two equal).
CRASHES = frozenset({"TypeError", "NameError", "AttributeError", "UnboundLocalError",
                     "KeyError", "IndexError", "RecursionError", "AssertionError",
                     "ZeroDivisionError", "NotImplementedError"})


def _crash(problem: BaseException) -> str:
    """"crash:CLASS" for a built-in class of programming error (not the implementation's own
    subclass of one), raised from build or backprop, for the suite to judge against the
    capabilities it was given (SPEC.md, "The protocol" and "Tapes"); else ""."""
    kind = type(problem)
    return f"crash:{kind.__name__}" if kind.__name__ in CRASHES and \
        kind.__module__ == "builtins" else ""


def call_build(module, source: str) -> Answer:
    try:
        run = module.build(source)
    except BaseException as problem:  # noqa: BLE001 - every outcome is the implementation's
        return _not_a_decision(problem) or Answer("rejected", describe(problem),
                                                  _crash(problem))
    if not callable(run):
        return Answer("failure", f"build returned {_kind(run)}, not a callable run", "junk")
    return Answer("ok", value=run)


def call_run(run, buffers: dict[int, np.ndarray],
             declared: dict[int, tuple[str, tuple[int, ...]]]) -> Answer:
    """Run on copies of `buffers`, and read back every declared slot as an array of its
    declared dtype and shape."""
    try:
        out = run({slot: array.copy() for slot, array in buffers.items()})
    except BaseException as problem:  # noqa: BLE001
        return _not_a_decision(problem) or Answer("run-error", describe(problem),
                                                  index=is_index_error(problem))
    try:
        return read_outputs(out, declared)
    except BaseException as problem:  # noqa: BLE001 - an __array__ or __eq__ that raises
        return _not_a_decision(problem) or Answer(
            "failure", f"its result could not be read: {describe(problem)}", "junk")


def read_outputs(out, declared) -> Answer:
    if not isinstance(out, dict):
        return Answer("failure", f"run returned {_kind(out)}, not a dict of slots", "junk")
    slots = list(out)
    if len(slots) > len(declared) + 16 or set(slots) != set(declared):
        shown = sorted(map(repr, slots[:len(declared) + 16]))
        return Answer("failure", bounded(f"run returned slots [{', '.join(shown)}], the "
                                         f"program declares {sorted(declared)}"), "junk")
    arrays = {}
    for slot, (dtype, shape) in sorted(declared.items()):
        value = np.asarray(out[slot])
        if value.dtype.str != DTYPE_STRINGS[dtype] or value.shape != tuple(shape):
            return Answer("failure", f"slot {slot} came back as {value.dtype}"
                          f"{list(value.shape)}, declared {dtype}{list(shape)}", "junk")
        arrays[slot] = np.array(value, order="C")  # a copy: the caller owns it
    return Answer("ok", value=arrays)


def call_backprop(module, tape) -> Answer:
    """The derivatives as Python floats, one per number returned; whether each is an f32 is
    for the suite to judge."""
    try:
        got = module.backprop(copy.deepcopy(tape))
    except BaseException as problem:  # noqa: BLE001
        return _not_a_decision(problem) or Answer("rejected", describe(problem),
                                                  _crash(problem))
    try:
        values = list(got)
        floats = []
        for k, v in enumerate(values):
            if isinstance(v, bool) or not isinstance(v, numbers.Real):
                return Answer("failure", bounded(f"derivative {k} is {_kind(v)}, not a "
                                                 "number"), "junk")
            floats.append(float(v))
    except BaseException as problem:  # noqa: BLE001
        return _not_a_decision(problem) or Answer(
            "failure", f"backprop returned {_kind(got)}, which could not be read as a list "
            f"of numbers: {describe(problem)}", "junk")
    return Answer("ok", value=floats)


def _kind(value) -> str:
    """A short, safe description of a returned value: its type, and its repr if that works."""
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001
        text = "?"
    return f"{type(value).__name__} {bounded(text, 200)}"
