# Set-up is automatic: the first `make demo` or `make test` creates .venv.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: demo test test-fast mutations bench lint clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test,bench,fast,cuda,export,distributed,amp]'
	touch $@

demo: $(VENV)/.installed
	$(PY) -m tracejit demo

# the CUDA backend's tests run in a process of their own, on Numba's CUDA simulator (it
# must be switched on before Numba's first import) unless a GPU is there; they run beside
# the rest of the suite (the simulator keeps one core busy, the suite mostly the other),
# and their output follows the suite's
SUITE ?=
CUDA_SUITE ?= tests/cuda_backend
test: $(VENV)/.installed
	@log=$$(mktemp); \
	NUMBA_ENABLE_CUDASIM=$${NUMBA_ENABLE_CUDASIM:-1} $(PY) -m pytest -q $(CUDA_SUITE) \
		>$$log 2>&1 & cuda=$$!; \
	$(PY) -m pytest $(SUITE); suite=$$?; \
	wait $$cuda; sim=$$?; \
	echo "--- $(CUDA_SUITE), on Numba's CUDA simulator unless a GPU is there:"; \
	cat $$log; rm -f $$log; \
	test $$suite -eq 0 && test $$sim -eq 0

# the fast tier: every test that compiles nothing with Numba (tests/conftest.py, --fast)
test-fast: $(VENV)/.installed
	$(PY) -m pytest --fast

# break one thing at a time in a copy of the checkout; every mutant must be killed
mutations: $(VENV)/.installed
	$(PY) -m tracejit.testing.mutations

bench: $(VENV)/.installed
	$(PY) -m tracejit bench

lint: $(VENV)/.installed
	$(PY) -m pip install --quiet ruff && $(VENV)/bin/ruff check tracejit tests benchmarks examples

clean:
	rm -rf $(VENV) .pytest_cache
