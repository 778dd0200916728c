# Two commands do everything on a fresh Debian/Ubuntu machine, as root:
#   make run    the main job (on p4sim; SWITCH=bmv2 for the real BMv2 switch)
#   make test   lint, type check and the whole test suite
SHELL := /bin/bash
PY := .venv/bin/python
SWITCH ?= p4sim
export SWITCH

.PHONY: run test pytest lint format typecheck bench stop clean setup setup-test need-root

setup:
	@bash scripts/bootstrap.sh

# What only the tests need on top (e.g. chromium for the dashboard test): --test.
setup-test:
	@bash scripts/bootstrap.sh --test

need-root:
	@[ "$$(id -u)" = 0 ] || { echo "make: this needs root (Mininet, network namespaces, raw sockets): run it as root"; exit 1; }

run: need-root setup
	@$(PY) -m topologies.demo

test: need-root setup-test lint typecheck pytest

pytest:
	@$(PY) -m pytest -n auto --dist loadgroup $(PYTEST_ARGS)

lint:
	@$(PY) -m ruff check .
	@$(PY) -m ruff format --check .

format: setup
	@$(PY) -m ruff format .
	@$(PY) -m ruff check --fix .

typecheck:
	@$(PY) -m mypy

bench: setup
	@$(PY) -m tests.bench

stop:
	@[ -x $(PY) ] && $(PY) scripts/stop.py || python3 scripts/stop.py

clean: stop
	rm -rf build results run .pytest_cache .mypy_cache .ruff_cache .hypothesis
	find . -name __pycache__ -prune -not -path './.venv/*' -exec rm -rf {} +
