"""The checks' fixtures; and the plugin itself when the project runs from a checkout without
being installed (installed, the pytest11 entry point has loaded it already)."""

from __future__ import annotations

import sys

import pytest

if "conformance.plugin" not in sys.modules:
    from conformance.plugin import (  # noqa: F401
        pytest_addoption,
        pytest_collection_modifyitems,
        pytest_configure,
        pytest_generate_tests,
        pytest_report_header,
        pytest_terminal_summary,
        pytest_unconfigure,
    )


@pytest.fixture(scope="session")
def impl(request):
    """The implementation under test (parametrized by the plugin, so that its name stands in
    every test id)."""
    impl = getattr(request, "param", None)
    if impl is None:
        pytest.skip("no --impl given: the conformance suite is inert")
    return impl


@pytest.fixture(autouse=True)
def _protocol_function(request):
    """Skip a check whose protocol function the implementation does not define: each check
    module names the one it needs (`build` unless it says)."""
    if "impl" not in request.fixturenames:
        return
    impl = request.getfixturevalue("impl")
    function = getattr(request.module, "PROTOCOL_FUNCTION", "build")
    if not impl.provides(function):
        pytest.skip(f"{impl.label} defines no {function}(): these checks are for "
                    "implementations that do (SPEC.md, \"The protocol\")")
