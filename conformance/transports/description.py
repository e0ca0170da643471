"""What a Python implementation says of itself: its NAME, VERSION, CAPABILITIES and the
protocol functions it defines. SPEC.md, "The protocol". One description, whichever transport
carries it (the worker's first reply, a served module's first reply, or in process), so a
module is measured on the same claims however it is run."""

from __future__ import annotations

import json

FUNCTIONS = ("build", "backprop")
TEXT_LIMIT = 200  # characters of a NAME or VERSION kept


def describe_module(module) -> dict:
    """{name, version, capabilities, functions}, each safe to send as JSON. CAPABILITIES
    that are not JSON become a dict the suite refuses with a usage error, saying so."""
    said: dict[str, object] = {key.lower(): str(getattr(module, key, "") or "")[:TEXT_LIMIT]
            for key in ("NAME", "VERSION")}
    capabilities = getattr(module, "CAPABILITIES", None)
    try:
        json.dumps(capabilities, allow_nan=False)
    except (TypeError, ValueError):
        capabilities = {"unreadable": repr(capabilities)[:TEXT_LIMIT]}
    said["capabilities"] = capabilities
    said["functions"] = [f for f in FUNCTIONS if callable(getattr(module, f, None))]
    return said
