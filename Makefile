# optdiv developer entry points.
#
#   make venv   create .venv (Python 3.11) with optdiv[dev], nox and uv
#   make demo   optdivbo on breast_cancer (budget 30) with `optdiv run`, into runs/demo, then `optdiv show` of it
#   make test   build every nox session from nothing and run it (what CI runs)
#   make clean  remove .venv, .nox and build/test caches
#
# Only .venv is reused between runs; the nox sessions are always rebuilt by
# `make test` (use `.venv/bin/nox -r -s NAME` by hand to reuse one).

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := test

VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.optdiv-installed

# First interpreter that actually runs: a pyenv shim on PATH may exist and
# still fail, so probe with --version instead of `command -v`.
PYTHON ?= $(shell for p in python3.11 python3; do \
		if $$p --version >/dev/null 2>&1; then echo $$p; break; fi; done)

NOX_SESSIONS := tests autosklearn openbox autogluon

.PHONY: venv demo test clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	@test -n "$(PYTHON)" || { echo "no working python3.11/python3 found" >&2; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet uv
	$(BIN)/uv pip install --python $(BIN)/python -e '.[dev]' nox uv
	touch $@

demo: venv
	rm -rf runs/demo
	$(BIN)/optdiv run --data sklearn:breast_cancer --method optdivbo --budget 30 --out runs/demo
	$(BIN)/optdiv show runs/demo

# --no-reuse-existing-virtualenvs: every session is created from scratch, even
# if .nox/ is left over from an earlier run. nox runs all sessions even when
# one fails and exits non-zero if any failed.
test: venv
	$(BIN)/nox --no-reuse-existing-virtualenvs --no-color -s $(NOX_SESSIONS)

clean:
	rm -rf $(VENV) .nox build dist .pytest_cache .benchmarks *.egg-info
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
