# Two entry points, both self-contained on a fresh machine: they create .venv and install
# the project before doing anything else.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: test conformance lint slow clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

# Every test of the project, plus the linter.
test: $(STAMP)
	$(VENV)/bin/ruff check .
	$(PY) -m pytest -q

# The main job: the conformance suite, ci profile, against the bundled fast implementation.
IMPL ?= implementations.fast
conformance: $(STAMP)
	$(PY) -m pytest conformance --impl=$(IMPL) --profile=ci -q

# The opt-in slow profile: 10^5 bit patterns per op for the rounding cross-check, and more.
slow: $(STAMP)
	$(PY) -m pytest -q --slow

lint: $(STAMP)
	$(VENV)/bin/ruff check .

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
