"""The project's layout as README's "Layout" states it: no import cycle anywhere (imports inside
functions included), and nothing outside `conformance/checks/` imports from it. The imports
are read from the source, not run, so a lazy import counts as much as one at the top."""

from __future__ import annotations

import ast
import pathlib
import re
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
# The repository's folders as the installed package names them (pyproject.toml).
PACKAGES = ("reference", "generators", "conformance", "reports", "implementations", "adapters")
CHECKS = "gradient_conformance.conformance.checks"


def module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(["gradient_conformance", *parts])


def modules() -> dict[str, pathlib.Path]:
    return {module_name(p): p for package in PACKAGES for p in (ROOT / package).rglob("*.py")
            if "node_modules" not in p.parts}


def imports(name: str, path: pathlib.Path, known: set[str]) -> set[str]:
    """The project's modules `name` imports, anywhere in its body. `from P import x` is the
    module P.x when that is a module, else P; `reference/` imports itself relatively."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [(alias.name, None) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[:len(anchor) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            targets = [(base, alias.name) for alias in node.names]
        else:
            continue
        for base, member in targets:
            if member and f"{base}.{member}" in known:
                found.add(f"{base}.{member}")
            elif base in known:
                found.add(base)
    found.discard(name)
    return found


def graph() -> dict[str, set[str]]:
    found = modules()
    return {name: imports(name, path, set(found)) for name, path in found.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's, iteratively)."""
    index, low, on_stack, stack, out = {}, {}, set(), [], []
    for start in edges:
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        out.append(sorted(component))
    return out


def test_no_module_imports_itself_back():
    assert cycles(graph()) == []


def test_nothing_outside_the_checks_imports_them():
    """Not the package's other modules, nor the tests and benchmarks beside it: the checks
    are found as pytest collects them."""
    known = set(modules())
    beside = {f"{folder}.{p.stem}": p for folder in ("tests", "benchmarks")
              for p in (ROOT / folder).rglob("*.py")}
    reaching = sorted(f"{name} imports {target}"
                      for name, path in {**modules(), **beside}.items()
                      if not name.startswith(CHECKS)
                      for target in imports(name, path, known) if target.startswith(CHECKS))
    assert reaching == []


# The rooms of conformance/, in README's order: each imports only rooms before it.
ROOMS = ("outcome", "readings", "findings", "tallies", "true_derivative", "propagated",
         "running", "casefiles", "diagnosis", "transports", "explain", "divergence", "reduce",
         "known", "totals", "options", "failure", "areas", "collection", "session", "plugin",
         "checks", "commands")


def _room(name: str) -> str | None:
    prefix = "gradient_conformance.conformance."
    return name.removeprefix(prefix).split(".")[0] if name.startswith(prefix) else None


def test_the_rooms_of_conformance_import_one_way():
    found = set()
    for name, targets in graph().items():
        here = _room(name)
        if here is None or here == "__main__":
            continue
        assert here in ROOMS, f"{name}: a room README's Layout does not name"
        found |= {f"{name} imports {t}" for t in targets if _room(t) and _room(t) != here
                  and ROOMS.index(_room(t)) > ROOMS.index(here)}
    assert sorted(found) == []


def test_reports_render_without_the_suite():
    assert sorted(f"{name} imports {t}" for name, targets in graph().items()
                  if name.startswith("gradient_conformance.reports") for t in targets
                  if not t.startswith("gradient_conformance.reports")) == []


# Which of the repository's packages each may import (besides itself): the oracle imports
# nothing of the rest; the strategies build on the oracle; the suite on both and on the
# reports, which import nothing of the project; the matrix reads the list of systems from
# adapters/systems.py (data, importing no system).
MAY_IMPORT = {
    "reference": set(),
    "generators": {"reference"},
    "reports": set(),
    "conformance": {"reference", "generators", "reports", "adapters"},
    "implementations": set(),
    "adapters": {"reference"},
}


def _package(name: str) -> str:
    return name.split(".")[1] if name.count(".") else ""


def test_the_packages_depend_one_way():
    """generators/ and conformance/ depend on reference/, never the reverse (README,
    "Layout"); the op table they derive from is reference/ops.py."""
    found = sorted(f"{name} imports {t}" for name, targets in graph().items()
                   for t in targets if _package(t) != _package(name)
                   and _package(t) not in MAY_IMPORT[_package(name)])
    assert found == []
    assert {t for name, targets in graph().items() if _package(name) == "conformance"
            for t in targets if _package(t) == "adapters"} <= {
        "gradient_conformance.adapters.systems"}


def test_the_detector_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_every_package_is_installed():
    """A subpackage pyproject.toml does not list would be missing from the wheel."""
    import tomllib
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
                 ["packages"])
    packages = {module_name(p) for package in PACKAGES for p in (ROOT / package).rglob(
        "__init__.py") if "node_modules" not in p.parts}
    assert packages - listed == set()


def test_the_far_sides_of_the_transports_need_numpy_alone():
    """What runs in the implementation's process (the worker, a served module: in MXNet's
    venv, with numpy and mpmath only) imports neither Hypothesis nor the oracle."""
    import subprocess
    import sys
    for module in ("gradient_conformance.conformance.transports.jsonlines",
                   "gradient_conformance.conformance.transports.worker_process",
                   "gradient_conformance.conformance.commands.serve"):
        run = subprocess.run([sys.executable, "-c", f"import sys, {module}; print(sorted("
                              "m for m in sys.modules if m.split('.')[0] in ('hypothesis', "
                              "'jinja2', 'pytest') or m.startswith('gradient_conformance."
                              "reference')))"], capture_output=True, text=True, check=True)
        assert run.stdout.strip() == "[]", (module, run.stdout)


def test_a_module_is_served_without_the_suite_s_dependencies():
    """`gradient-conformance serve` as MXNet's venv runs it: with Hypothesis, Jinja2 and
    pytest not importable, it still answers the protocol's first request."""
    import json
    import subprocess
    import sys
    blocked = ("import sys\nfor name in ('hypothesis', 'jinja2', 'pytest'):\n"
               "    sys.modules[name] = None\n"
               "from gradient_conformance.conformance.commands import main\n"
               "sys.exit(main(['serve', 'gradient_conformance.implementations.fast']))\n")
    run = subprocess.run([sys.executable, "-c", blocked], input='{"id": 1, "build": ""}\n',
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    reply = json.loads(run.stdout.splitlines()[0])
    assert reply["id"] == 1 and reply["ok"] is True and reply["name"] == "fast", reply


def _private_uses(path: pathlib.Path) -> list[str]:
    """pytest's private modules imported, and private attributes read of pytest's objects
    (an item, a config, a session, a request, a report)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import | ast.ImportFrom):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else \
                [a.name for a in node.names]
            found += [f"{path.name}:{node.lineno} imports {n}" for n in names
                      if n.split(".")[0] == "_pytest"]
        elif isinstance(node, ast.Attribute) and node.attr.startswith("_") and \
                not node.attr.startswith("__") and isinstance(node.value, ast.Name) and \
                node.value.id in ("item", "config", "session", "request", "report", "items"):
            found.append(f"{path.name}:{node.lineno} reads {node.value.id}.{node.attr}")
        elif isinstance(node, ast.Constant) and node.value in ("_fixtureinfo", "_request"):
            found.append(f"{path.name}:{node.lineno} names {node.value}")
    return found


def test_the_plugin_and_fuzz_use_only_pytest_s_public_interface():
    found = [line for path in sorted((ROOT / "conformance").rglob("*.py"))
             for line in _private_uses(path)]
    assert found == []


def test_one_function_runs_the_suite_in_a_subprocess():
    """commands/suite.py's in_subprocess: the other commands call it, and write no
    `python -m gradient_conformance` run of their own (fuzz's Dask task runs a session of
    its own, not the command)."""
    found = []
    for path in sorted((ROOT / "conformance").rglob("*.py")):
        if path.name == "suite.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.List) and any(
                    isinstance(e, ast.Constant) and e.value == "gradient_conformance"
                    for e in node.elts) and any(
                    isinstance(e, ast.Constant) and e.value == "-m" for e in node.elts):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert found == []


# Where a machine keeps a checkout, a home or a virtual environment: a tracked file that names
# one was written from a run, not for every reader (generated figures take them out:
# benchmarks/results.py, `scrubbed`).
MACHINE_PATH = re.compile(r"(?<![\w.])/(?:work|root|home/[a-z][\w.-]*|Users/[\w.-]+)/")


def test_no_tracked_text_file_names_a_path_of_the_machine_that_wrote_it():
    import subprocess
    listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True)
    if listed.returncode != 0:
        pytest.skip("not a git checkout: nothing is tracked")
    found = []
    for name in listed.stdout.splitlines():
        path = ROOT / name
        try:
            text = path.read_text()
        except (UnicodeDecodeError, OSError):
            continue  # binary, or a link to what is not here
        here = (str(ROOT), sys.prefix)
        found += [f"{name}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)}"
                  for m in MACHINE_PATH.finditer(text)] + \
                 [f"{name}: {where}" for where in here if where in text]
    assert found == []


def test_the_machine_path_pattern_finds_what_it_should():
    home, work = "/ho" + "me/ana/", "/wo" + "rk/main/"  # split, so this file names none
    assert MACHINE_PATH.search(f"see {work}adapters/x.py:30")
    assert MACHINE_PATH.search(f"in {home}.venv/lib") and MACHINE_PATH.search("/ro" + "ot/.c")
    assert not MACHINE_PATH.search("/tmp/x /dev/zero /proc/self /usr/bin/bwrap ./work/x")
