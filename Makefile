# Everything runs in .venv, created on first use from the pinned requirements. The CRD schemas
# custom resources are validated against come from the Go module proxy (`go mod download`) and
# are cached by version under ~/.cache/nemo-gke/crds (tools/crds.py).
STACK ?= dev
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
GO := $(shell command -v go 2>/dev/null)

.PHONY: install crds render test require-go lint typecheck unit docs identities bench clean

install: $(VENV)/.installed crds

$(VENV)/.installed: requirements.txt requirements-dev.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	touch $@

## The CRD schemas of the pinned Kueue, JobSet and gke-networking-api releases (needs Go).
crds: $(VENV)/.installed
ifdef GO
	$(BIN)/python -m tools.crds fetch
else
	@echo "Go not found: custom resources (Kueue, JobSet, GKE networking) cannot be validated; install Go (https://go.dev/dl/) for that and for make test"
endif

## Run the program for Pulumi.$(STACK).yaml under mocks and write build/$(STACK)/.
render: install
	$(BIN)/python -m tools.render --stack $(STACK)

## Lint, type-check and run the unit suite (needs Go for the CRD schemas).
test: require-go install lint typecheck unit

require-go:
	@command -v go >/dev/null 2>&1 || { echo "make test needs Go: it fetches the CRD schemas the tests validate against (https://go.dev/dl/)" >&2; exit 1; }

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: install
	$(BIN)/mypy

unit: install
	$(BIN)/pytest

## Regenerate the configuration table in README.md from the config models.
docs: install
	$(BIN)/python -m tools.docs --write

## Rewrite tests/identities/ from the program (only while nothing is deployed; otherwise add aliases).
identities: install
	$(BIN)/python -m tools.identities --write

## Render time of every shipped stack and the metrics benchmark, each against its goal.
bench: install
	$(BIN)/python -m tools.bench

clean:
	rm -rf build $(VENV) .pytest_cache .mypy_cache .ruff_cache
