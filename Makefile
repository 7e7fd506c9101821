# Everything runs in .venv, created on first use from the pinned requirements. The CRDs of the
# pinned Kueue, JobSet and GKE networking releases come from the Go module proxy (with
# `go mod download` where Go is installed, else over HTTPS), checked against their pinned hashes
# and cached by version under ~/.cache/nemo-gke (tools/crds.py).
STACK ?= dev
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: install crds render test lint typecheck unit docs docs-check identities bench integration-tools integration integration-engine clean

install: $(VENV)/.installed crds

$(VENV)/.installed: requirements.txt requirements-dev.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	touch $@

## The CRDs of the pinned Kueue, JobSet and gke-networking-api releases.
crds: $(VENV)/.installed
	$(BIN)/python -m tools.crds fetch

## Run the program for Pulumi.$(STACK).yaml under mocks and write build/$(STACK)/.
render: install
	$(BIN)/python -m tools.render --stack $(STACK)

## Lint, type-check and run the unit suite.
test: install lint typecheck unit

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: install
	$(BIN)/mypy

unit: install
	$(BIN)/pytest --numprocesses=auto --maxprocesses=4

## Regenerate every generated block of README.md and docs/ (catalog tables, configuration, dev summary).
docs: install
	$(BIN)/python -m tools.docs --write

## Run every offline command of the docs as written on a fresh copy of the checkout, with its
## own `make install`; print each command's time and why the others are not run.
docs-check: install
	$(BIN)/python -m tools.docs_commands --run

## Rewrite tests/identities/ from the program (only while nothing is deployed; otherwise add aliases).
identities: install
	$(BIN)/python -m tools.identities --write

## Render time of every shipped stack and the metrics benchmark, each against its goal.
bench: install
	$(BIN)/python -m tools.bench

## Build the integration lane's Kubernetes-side binaries from Go modules (cached by version).
integration-tools:
	integration/build-tools.sh

## The integration lane: build the tools (cached); stack files read by harness.stackfile and by the Pulumi
## CLI's own config reader, compared on a corpus; then a loopback control plane, kwok nodes
## shaped like a stack's pools, the pinned Kueue and JobSet managers, and the stack's objects
## admitted by the real Kueue: `existing` (a catalog machine, placed by topology), then
## `existing-oke` (a machine outside the catalog, no topology). Then the seven real-engine
## scenarios where a Pulumi CLI and kubernetes provider are at hand (PULUMI_BIN_DIR), else the
## reason they are skipped. Prints each phase's time.
integration: install integration-tools
	$(BIN)/python -m integration.stackfile_check
	$(BIN)/python -m integration.lane smoke --stack existing
	$(BIN)/python -m integration.lane smoke --stack existing-oke
	$(BIN)/python -m integration.engine --if-available

## The real-engine scenarios alone; fails when the Pulumi binaries are absent.
integration-engine: install integration-tools
	$(BIN)/python -m integration.engine

clean:
	rm -rf build $(VENV) .pytest_cache .mypy_cache .ruff_cache
