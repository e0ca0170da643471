"""The conformance suite. SPEC.md, "The conformance suite"; README.md, "Layout", names its
rooms and what each may import: outcome.py (the one comparison), running.py (how a check
runs a case), diagnosis/, transports/ (calling an implementation without trusting it),
divergence.py (a divergence described once), totals.py, plugin.py, checks/ (the test modules
only) and commands/.
"""
