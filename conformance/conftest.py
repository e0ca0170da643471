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
