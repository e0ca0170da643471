"""The conformance suite. SPEC.md, "The conformance suite".

What is tested is in checks/ (each test_*.py module a group of checks, compare.py what they
share). What runs them: plugin.py (the pytest plugin), implementation.py and its transports
(worker.py, protocol.py, process.py, calling.py: the implementation kept apart and called
without trust), record.py (what a run saw). The commands beside pytest are in commands/:
replay, vectors, fuzz, matrix, report, serve, spec.
"""
