# Everything runs in .venv, created on first use from the pinned requirements.
STACK ?= dev
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: install render test lint typecheck unit docs bench clean

install: $(VENV)/.installed

$(VENV)/.installed: requirements.txt requirements-dev.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	touch $@

## Run the program for Pulumi.$(STACK).yaml under mocks and write build/$(STACK)/.
render: install
	$(BIN)/python -m tests.harness.render --stack $(STACK)

## Lint, type-check and run the test suite.
test: lint typecheck unit

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: install
	$(BIN)/mypy

unit: install
	$(BIN)/pytest

## Regenerate the configuration table in README.md from the config models.
docs: install
	$(BIN)/python -m tests.harness.docs --write

## How long `python -m analysis metrics` takes on a generated 100 000-step log (goal: < 2 s).
bench: install
	$(BIN)/python -m analysis.benchmark

clean:
	rm -rf build $(VENV) .pytest_cache .mypy_cache .ruff_cache
