# Two entry points, each self-contained on a fresh machine: `make demo` and `make test`.
# The venv sees system site-packages so a machine's own torch (e.g. a CUDA build) is used as is;
# where no torch is importable, the CPU wheel torch==2.13.0 is installed, never an unpinned CUDA build.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: demo test test-fast lint docs

$(VENV)/.ready: pyproject.toml
	$(PYTHON) -m venv --system-site-packages $(VENV)
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install "torch==2.13.0"
	$(PY) -m pip install -e ".[test]"
	touch $@

demo: $(VENV)/.ready
	$(PY) -m featgraph demo

# The whole suite on every core (pytest-xdist; the kernel cache builds under locks and atomic renames); an
# idle worker takes queued tests from a busy one (worksteal), so a long test late in one queue does not end
# the run alone.
test: $(VENV)/.ready
	$(PY) -m ruff check .
	$(VENV)/bin/lint-imports
	$(PY) -m pytest -q -n auto --dist worksteal

# The inner loop: everything but the slow marker (doc build, torchrun launches, fuzz searches, bench commands).
test-fast: $(VENV)/.ready
	$(PY) -m pytest -q -n auto -m "not slow"

# The documentation site (mkdocs.yml): built into build/docs with --strict; SERVE=1 serves it instead.
docs: $(VENV)/.ready
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs $(if $(SERVE),serve,build --strict)
