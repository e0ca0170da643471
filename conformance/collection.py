"""Which collected tests are the suite's checks, the ids an xfails or skips file names, and how
the checks are prepared and ordered for a run. docs/suite.md, "The conformance suite".

Imported by the plugin in every pytest run of the venv, so it imports nothing but pytest.
"""

from __future__ import annotations

import inspect
import pathlib
import re
from dataclasses import dataclass

import pytest

from gradient_conformance.conformance.options import generated_with


def is_generated(item) -> bool:
    """Whether a collected check is one Hypothesis drives."""
    return hasattr(getattr(item, "obj", None), "hypothesis")


def is_check(item) -> bool:
    """Whether a collected test is one of the suite's checks: a test that takes this
    plugin's `impl` fixture. The installed checks do; so does a check file of the user's
    own given on the command line. A test that is given an `impl` of its own (a parameter,
    or a fixture its module defines) is the user's own test, not a check."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    return "impl" in getattr(item, "fixturenames", ()) and "impl" not in params and not \
        hasattr(getattr(item, "module", None), "impl")


def stable_id(item) -> str:
    """The id an xfails or skips entry matches: the check's module and name and its
    parameter (`test_cases.py::test_case_file[examples/max_tie.ir]`), the same wherever the
    implementation or the suite is installed."""
    return f"{pathlib.Path(item.path).name}::{item.name}"


_ENTRY = re.compile(r"(?:(?P<module>[\w.-]+\.py)(?:::|$))?(?:(?P<check>[A-Za-z_]\w*)"
                    r"(?:\[(?P<param>[^\[\]]+)\])?)?")


@dataclass(frozen=True)
class Entry:
    """One line of an xfails or skips file, read as the parts of a stable id it names
    (docs/suite.md, "The conformance suite"): a module (`test_tape.py`), a check
    (`test_forward.py::test_exact_programs_bit_for_bit`, or its name alone), one instance
    (`test_cases.py::test_case_file[examples/max_tie.ir]`), or a parameter alone (a case
    file, `examples/max_tie.ir`). An entry matches an id whose parts are those; it is never
    a substring of one."""

    text: str
    module: str | None
    check: str | None
    param: str | None

    @classmethod
    def parse(cls, text: str) -> Entry | None:
        found = _ENTRY.fullmatch(text)
        if found and (found["module"] or found["check"]):
            return cls(text, found["module"], found["check"], found["param"])
        if "[" not in text and "]" not in text and "::" not in text and " " not in text:
            return cls(text, None, None, text)  # a parameter alone: a case file's path
        return None

    def matches(self, item) -> bool:
        module, check, shown = parts(item)
        return ((self.module is None or self.module == module)
                and (self.check is None or self.check == check)
                and (self.param is None or self.param == shown))


def parts(item) -> tuple[str, str, str | None]:
    """The module, check and parameter of a test's stable id."""
    check, _, param = item.name.partition("[")
    return pathlib.Path(item.path).name, check, param[:-1] if param.endswith("]") else None


class Entries:
    """An xfails or skips file's entries indexed by the parts they name, so that finding
    those that match a test is eight lookups however long the file (a file of millions of
    lines, matched against every test in turn, took minutes)."""

    def __init__(self, entries: list[Entry]):
        self.all = entries
        self._by: dict[tuple, list[Entry]] = {}
        for entry in entries:
            self._by.setdefault((entry.module, entry.check, entry.param), []).append(entry)

    def matching(self, item) -> list[Entry]:
        module, check, param = parts(item)
        keys = dict.fromkeys((m, c, p) for m in (module, None) for c in (check, None)
                             for p in (param, None))  # each once: a test without a parameter
        return [e for key in keys if key in self._by for e in self._by[key]]


STALE_SHOWN = 20  # stale entries warned of one by one; the rest counted


def read_entries(path: str | None, base: pathlib.Path) -> list[Entry]:
    if not path:
        return []
    file = base / path
    try:
        from gradient_conformance.reference.cases import read_file
        lines = read_file(file).splitlines()
    except (OSError, UnicodeDecodeError) as problem:
        raise pytest.UsageError(f"could not read {path}: "
                                f"{getattr(problem, 'strerror', None) or problem}") from None
    entries = []
    for number, line in enumerate(lines, start=1):
        text = line.split("#")[0].strip()
        if not text:
            continue
        entry = Entry.parse(text)
        if entry is None:
            raise pytest.UsageError(f"{path}, line {number}: {text!r} is not a check's id or "
                                    "a part of one (MODULE.py, MODULE.py::CHECK, "
                                    "CHECK[PARAMETER], or a case file's path)")
        entries.append(entry)
    return entries


def check_name(item) -> str:
    return getattr(item, "originalname", None) or item.name


def prepare(config, items: list, settings, base: pathlib.Path) -> None:
    """The checks among `items` made ready to run: marked as the xfails and skips files say,
    each generated check given its Hypothesis `settings`, and all put in the order they run
    in (`rank`); a stale entry of either file is a warning."""
    suite = [item for item in items if is_check(item)]
    xfails = Entries(read_entries(config.getoption("--conformance-xfails-file"), base))
    skips = Entries(read_entries(config.getoption("--conformance-skips-file"), base))
    used = set()
    for item in suite:
        for entry in skips.matching(item):
            used.add(entry.text)
            item.add_marker(pytest.mark.skip(reason="listed in the skips file: "
                                             f"{entry.text}"))
        for entry in xfails.matching(item):
            used.add(entry.text)
            item.add_marker(pytest.mark.xfail(reason="listed in the xfails file: "
                                              f"{entry.text}", strict=True))
    for item in suite:
        if is_generated(item):
            if "data" not in inspect.signature(item.obj.hypothesis.inner_test).parameters:
                raise pytest.UsageError(f"{stable_id(item)}: a generated check draws from "
                                        "Hypothesis through one argument, "
                                        "@given(data=st.data())")
            item.obj = generated_with(item.obj, settings)
    stale = sorted({e.text for e in xfails.all + skips.all} - used)
    for text in stale[:STALE_SHOWN]:
        config.issue_config_time_warning(pytest.PytestWarning(
            f"the xfails or skips file names {text!r}, which matches no check's id in "
            "this run: a stale entry"), stacklevel=2)
    if len(stale) > STALE_SHOWN:
        config.issue_config_time_warning(pytest.PytestWarning(
            f"the xfails or skips files name {len(stale) - STALE_SHOWN} more entries that "
            "match no check's id in this run"), stacklevel=2)
    # The cheapest and most telling first: case files (a second kills most faults), then
    # each module by its RANK. A stable sort of the collection order, the same in every
    # xdist worker.
    order = {id(item): k for k, item in enumerate(items)}
    items.sort(key=lambda item: (rank(item), order[id(item)]))


def rank(item) -> tuple[int, int]:
    """Where a collected test runs: a user's own tests first, as collected; then the case
    files; then the other checks that Hypothesis does not drive (fixed programs, a second
    each at most); then each module's generated checks by its RANK
    (conformance/checks/__init__.py)."""
    if not is_check(item):
        return (-1, 0)
    params = getattr(getattr(item, "callspec", None), "params", {})
    if "path" in params or "name" in params:
        return (0, 0)
    module_rank = getattr(item.module, "RANK", 9)
    return (2, module_rank) if is_generated(item) else (1, module_rank)
