"""The conformance suite. docs/suite.md, "The conformance suite"; README.md, "Layout", names its
rooms and what each may import: outcome.py (the one comparison), readings.py, findings.py,
tallies.py, true_derivative.py, running.py (the checks' kit: how a check runs a case),
casefiles.py, diagnosis/, transports/ (calling an implementation without trusting it),
divergence.py (a divergence described once), reduce.py, explain.py, known.py, totals.py,
options.py, failure.py (what follows a divergence, in order), the rest of the plugin
(collection.py, session.py, and plugin.py, its hooks alone), checks/ (the test modules only)
and commands/.
"""
