# Two entry points, both self-contained on a fresh machine: each creates .venv and installs
# what it needs before doing anything else. The main job needs only the package; the tests
# need their extras, the adapters' systems, and a few Debian packages.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
CORE := $(VENV)/.core
TEST := $(VENV)/.test

.PHONY: test conformance lint slow bench clean

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

$(CORE): pyproject.toml | $(VENV)/bin/python
	$(PY) -m pip install --quiet -e .
	touch $(CORE)

$(TEST): pyproject.toml $(CORE)
	$(PY) -m pip install --quiet -e '.[test,torch,tinygrad,micrograd]'
	touch $(TEST)

# Debian's Chromium, Redis server and clang: for the report's browser test, the shared fuzzing
# database's test, and tinygrad's constant-folded gradients (realized on its CPU device). Only
# where we are root with apt-get; elsewhere those tests skip, saying why.
SYSTEM_STAMP := $(VENV)/.system
$(SYSTEM_STAMP): | $(VENV)/bin/python
	@if command -v chromium >/dev/null && command -v redis-server >/dev/null && \
		command -v clang >/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
			chromium redis-server clang >/dev/null) || echo "could not install chromium, redis-server, clang"; \
	else echo "not root with apt-get: the browser and Redis tests will skip"; fi
	touch $(SYSTEM_STAMP)

# Every test of the project, plus the linter, on both cores.
test: $(TEST) $(SYSTEM_STAMP)
	$(VENV)/bin/ruff check .
	$(PY) -m pytest -q -n 2

# The main job: the conformance suite, ci profile, against the bundled fast implementation,
# with its HTML report (and JSON beside it) in out/. IMPL=... to run it against another.
IMPL ?= gradient_conformance.implementations.fast
conformance: $(CORE)
	$(VENV)/bin/gradient-conformance --impl=$(IMPL) --profile=ci -q \
		--report=out/conformance.html --report-json=out/conformance.json

# The opt-in slow profile: 10^5 bit patterns per op for the rounding cross-check, and more.
slow: $(TEST)
	$(PY) -m pytest -q --slow

# Benchmarks (SPEC.md, "Benchmarks"): the workloads on the reference and the fast
# implementation (IMPLS=... to add others), then the suite's own speed. Figures, not tests.
IMPLS ?= gradient_conformance.implementations.fast
bench: $(TEST)
	$(PY) -m pytest benchmarks $(foreach i,$(IMPLS),--impl=$(i)) -p no:cacheprovider \
		--benchmark-json=out/benchmarks.json
	$(PY) -m benchmarks.suite_speed
	$(PY) -m benchmarks.suite_modes

lint: $(TEST)
	$(VENV)/bin/ruff check .

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis .gradient-conformance build *.egg-info
