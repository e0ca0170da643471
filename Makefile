# Two entry points, both self-contained on a fresh machine: each creates .venv and installs
# what it needs before doing anything else. The main job needs only the package; the tests
# need their extras, the adapters' systems, and a few Debian packages.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
CORE := $(VENV)/.core
TEST := $(VENV)/.test

.PHONY: test test-all conformance lint slow bench systems clean mxnet tfjs

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

$(CORE): pyproject.toml | $(VENV)/bin/python
	$(PY) -m pip install --quiet -e .
	touch $(CORE)

$(TEST): pyproject.toml $(CORE)
	$(PY) -m pip install --quiet -e '.[test,torch,tinygrad,micrograd,autograd,cluster]'
	touch $(TEST)

# Debian's Chromium, Redis server, clang, bubblewrap and tmux: for the report's browser test,
# the shared fuzzing database's test, tinygrad's constant-folded gradients (realized on its
# CPU device), the implementation's sandbox, and the test that watches a terminal. Only where
# we are root with apt-get; elsewhere those tests skip, saying why.
SYSTEM_STAMP := $(VENV)/.system
$(SYSTEM_STAMP): | $(VENV)/bin/python
	@if command -v chromium >/dev/null && command -v redis-server >/dev/null && \
		command -v clang >/dev/null && command -v bwrap >/dev/null && \
		command -v tmux >/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
			chromium redis-server clang bubblewrap tmux >/dev/null) || \
			echo "could not install chromium, redis-server, clang, bubblewrap, tmux"; \
	else echo "not root with apt-get: the browser, Redis and sandbox tests will skip"; fi
	touch $(SYSTEM_STAMP)

# Two systems served from outside the project's venv (docs/adapters.md, "Adapters"): MXNet 1.9.1,
# which needs numpy older than 1.24, in a venv of its own with this package but none of its
# dependencies except numpy and mpmath; and TensorFlow.js 4.22 in Node, from its lockfile.
# Where one cannot be installed, its tests skip, saying why.
MXNET_VENV := .venv-mxnet
MXNET := $(MXNET_VENV)/.ready
$(MXNET): pyproject.toml
	@($(PYTHON) -m venv $(MXNET_VENV) && \
	  $(MXNET_VENV)/bin/python -m pip install --quiet numpy==1.23.5 mxnet==1.9.1 mpmath && \
	  $(MXNET_VENV)/bin/python -m pip install --quiet --no-deps -e . && \
	  touch $(MXNET)) || echo "could not install MXNet 1.9.1 in $(MXNET_VENV)"
mxnet: $(MXNET)

TFJS := adapters/tfjs/node_modules/.package-lock.json
$(TFJS): adapters/tfjs/package-lock.json
	@(command -v npm >/dev/null && cd adapters/tfjs && npm ci --silent --no-audit --no-fund) \
		|| echo "could not install TensorFlow.js in adapters/tfjs"
tfjs: $(TFJS)

# The first tier: every behaviour of the project with the least work that shows it, plus the
# linter and the type checker, on both cores (README, "The commands on a fresh clone"). Work
# stealing: a worker that runs out takes tests queued for the other, so the long ones end
# less often with one core idle.
test: $(TEST) $(SYSTEM_STAMP) $(MXNET) $(TFJS)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	$(PY) -m pytest -q -n 2 --dist worksteal -m "not slow"

# Both tiers: the first, then the second, which measures the suite's power (every seeded
# fault under the whole ci profile, each variant's ci run located, mutants over the whole
# catalogue, 10^5 bit patterns per op for correct rounding, the cluster fuzzed for minutes,
# the benchmark scripts run whole). CI runs this.
test-all: test
	$(MAKE) slow

# The main job: the conformance suite, ci profile, against the bundled fast implementation,
# with its HTML report (and JSON beside it) in out/. IMPL=... to run it against another.
IMPL ?= gradient_conformance.implementations.fast
conformance: $(CORE)
	$(VENV)/bin/gradient-conformance --impl=$(IMPL) --profile=ci -q \
		--report=out/conformance.html --report-json=out/conformance.json

# The second tier alone.
slow: $(TEST) $(SYSTEM_STAMP) $(MXNET) $(TFJS)
	$(PY) -m pytest -q -n 2 --dist worksteal --slow -m slow

# Benchmarks (docs/benchmarks.md, "Benchmarks"): the workloads on the reference and the fast
# implementation (IMPLS=... to add others), then the suite's own speed. Figures, not tests.
IMPLS ?= gradient_conformance.implementations.fast
bench: $(TEST)
	$(PY) -m pytest benchmarks $(foreach i,$(IMPLS),--impl=$(i)) -p no:cacheprovider \
		--benchmark-json=out/benchmarks.json
	$(PY) -m benchmarks.results

# docs/systems.md, generated whole: the ci profile against every system this checkout can
# run, with the systems the tests do not install (JAX, TensorFlow, PyTensor, Warp, Dr.Jit)
# added to the venv first. Not part of the tests: the second tier runs the matrix of the
# systems `make test` installs, into a temporary folder.
SYSTEMS := $(VENV)/.systems
$(SYSTEMS): pyproject.toml $(TEST)
	$(PY) -m pip install --quiet -e '.[jax,tensorflow,pytensor,warp,drjit]'
	touch $(SYSTEMS)

systems: $(SYSTEMS) $(MXNET) $(TFJS)
	$(VENV)/bin/gradient-conformance matrix --systems --report out/matrix/matrix.html \
		--markdown docs/systems.md

lint: $(TEST)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

clean:
	rm -rf $(VENV) $(MXNET_VENV) adapters/tfjs/node_modules .pytest_cache .hypothesis .gradient-conformance build *.egg-info
