# Set-up is automatic: the first `make demo` or `make test` creates .venv.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: demo test bench lint clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test,bench,fast]'
	touch $@

demo: $(VENV)/.installed
	$(PY) -m tracejit demo

test: $(VENV)/.installed
	$(PY) -m pytest

bench: $(VENV)/.installed
	$(PY) -m tracejit bench

lint: $(VENV)/.installed
	$(PY) -m pip install --quiet ruff && $(VENV)/bin/ruff check tracejit tests benchmarks examples

clean:
	rm -rf $(VENV) .pytest_cache
