"""The suite's checks, one module per group (docs/suite.md, "The conformance suite"). Only test
modules live here, and nothing outside this folder imports them: the plugin, `fuzz` and
`mutants` find them as pytest collects them. A check is a test that takes the `impl` fixture
(and `tally`, what it measured); one decorated with Hypothesis's `given` is a generated check,
which `fuzz` also runs. Adding a check is adding a function, or a file, here. A module's
`RANK` says where its checks run (collection.rank): case files first, then the cheaper and more
telling checks.

- test_forward.py: final slots bit for bit; exp2, log2, sin within the declared ulps; the
  forward error of every elementwise op.
- test_gradient_bits.py: gradients bit for bit (the walk, the fold, every rule's op form).
- test_derivative.py: every implementation's outputs near the true derivative.
- test_accumulation.py: shares summed in arrival order; a failure names the order used.
- test_rejection.py: invalid gradients rejected; near misses accepted.
- test_semantics.py: detach, higher order, hash consing, loops and calls, i32, by name.
- test_cases.py: every case file the package ships.
- test_enumerated.py: enumerated from the tables: every rule at every value class of its
  operands and of g, identity in every spelling, every rejection in every disguise.
- test_tape.py: the tape exercise's backprop(tape).

What they share (the verdict, the checks' kit) is in conformance/running.py, reading a case
in conformance/readings.py, what they measure in conformance/tallies.py, and the one
comparison in conformance/outcome.py.
"""
