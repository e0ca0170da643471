"""Declares an error in ulps for add, which the spec makes exact: a usage error."""

from gradient_conformance.implementations.fast import build  # noqa: F401

CAPABILITIES = {"ulp": {"add": 4}}
