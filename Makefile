# Everything runs in .venv, created on first use from the pinned requirements. The CRDs of the
# pinned Kueue, JobSet and GKE networking releases come from the Go module proxy (with
# `go mod download` where Go is installed, else over HTTPS), checked against their pinned hashes
# and cached by version under ~/.cache/nemo-gke (tools/crds.py).
STACK ?= dev
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
RUNTIME_VENV := .venv-runtime

PYTEST := $(BIN)/pytest --numprocesses=auto --maxprocesses=4

# $(call timed,COMMAND): run COMMAND, then print how long the target took, its status kept. Every
# target that can take over a minute says so itself.
define timed
	@echo '$(1)'; start=$$(date +%s); $(1); rc=$$?; echo "make $@: $$(( $$(date +%s) - start )) s"; exit $$rc
endef

.PHONY: help install crds render test lint typecheck unit stacks repo docs docs-check identities bench integration-tools integration integration-engine runtime-check gpu-train gpu-parity clean
.DEFAULT_GOAL := help

## List the targets and what each does (the first line of the comment above each).
help:
	@awk '/^## /{if (!doc) doc = substr($$0, 4); next} \
		/^[a-z-]+:/{if (doc) printf "  %-20s %s\n", substr($$1, 1, length($$1) - 1), doc} {doc = ""}' $(MAKEFILE_LIST)

## The virtual environment from the pinned requirements, and the CRD cache.
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

## Lint, type-check and run the unit, stacks and repo tiers (what CI runs first).
test: install
	$(call timed,$(MAKE) --no-print-directory lint typecheck && $(PYTEST) tests/unit tests/stacks tests/repo)

## ruff check and ruff format --check.
lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

## mypy --strict on every package.
typecheck: install
	$(BIN)/mypy

## Pure functions: planners, facts, config rules, the harness, the pod payload, the analytics.
unit: install
	$(PYTEST) tests/unit

## Whole programs under the mocks: every shipped stack and its variants, validated.
stacks: install
	$(PYTEST) tests/stacks

## The repository itself: layering, conventions, docs drift, the lane's pins.
repo: install
	$(PYTEST) tests/repo

## Regenerate every generated block of README.md and docs/.
## (catalog tables, configuration, dev summary)
docs: install
	$(BIN)/python -m tools.docs --write

## Run every offline command of the docs on a fresh copy of the checkout.
## Each with its own `make install`; prints each command's time and why the others are not run.
docs-check: install
	$(call timed,$(BIN)/python -m tools.docs_commands --run)

## Rewrite tests/identities/ from the program.
## Only while nothing is deployed; otherwise add aliases.
identities: install
	$(BIN)/python -m tools.identities --write

## Render time of every shipped stack and the metrics benchmark, each against its goal.
bench: install
	$(BIN)/python -m tools.bench

## Build the integration lane's binaries from Go modules (cached by version).
integration-tools:
	$(call timed,integration/build-tools.sh)

## The integration tier (tests/integration) on the lane; prints each test's time.
## Builds the lane's tools (cached); stack files read by harness.stackfile and by the Pulumi CLI's
## own config reader, compared; a loopback control plane,
## kwok nodes shaped like each existing-cluster stack's pools and the pinned Kueue and JobSet
## admitting its runs; the real-engine scenarios under the Pulumi CLI and Kubernetes provider the
## tools include (or PULUMI_BIN_DIR's). Prints each test's time.
integration: install integration-tools
	$(call timed,$(BIN)/pytest -p no:xdist -s -v --durations=0 tests/integration)

## The real-engine scenarios alone; fails when the Pulumi binaries are absent.
integration-engine: install integration-tools
	$(call timed,NEMO_GKE_ENGINE_REQUIRED=1 $(BIN)/pytest -p no:xdist -s -v tests/integration/test_engine.py)

## The Megatron-Bridge launcher's configuration step against the real, pinned library; no GPU.
## Builds .venv-runtime from requirements-runtime.txt (2.2 GB of wheels from PyPI, 94 s in all measured),
## then builds and validates the configuration of every Megatron-Bridge run and catalog recipe
## with the launcher's own code, compares each catalog recipe's with NVIDIA's own (tools/parity.py),
## and shows that a renamed field and a missing CommOverlapConfig fail.
runtime-check: install
	$(call timed,$(MAKE) --no-print-directory $(RUNTIME_VENV)/.installed && $(BIN)/python -m tools.runtime_check --python $(RUNTIME_VENV)/bin/python)

## The launcher trains for real on this machine's GPU (needs one NVIDIA GPU): a four-layer Llama 3 8B
## on generated data for 30 steps, without Transformer Engine, in .venv-runtime; then reads the run's
## DLLogger log with `python -m analysis metrics` beside NVIDIA's figure, and fails when the layout
## planner's memory per GPU is more than 10 % from the allocator's peak. Files in build/gpu-train/.
## Checked before the 2.2 GB runtime environment is installed: the NVIDIA driver sees a GPU.
gpu-train: install
	@nvidia-smi -L >/dev/null 2>&1 || { echo "gpu-train: make gpu-train needs an NVIDIA GPU: nvidia-smi -L finds none (nothing was downloaded)" >&2; exit 2; }
	$(MAKE) $(RUNTIME_VENV)/.installed
	$(BIN)/python -m tools.gpu_train --python $(RUNTIME_VENV)/bin/python

## The launcher beside NVIDIA's own configuration on this machine's GPU: make gpu-train's slice
## trained twice, the launcher's ConfigContainer and NVIDIA's (tools/nvidia_path.py, which
## make runtime-check compares field by field), by the same loop; fails when the launcher's step
## is more than 3 % slower. BF16 without Transformer Engine (no wheel). Files in build/gpu-train/.
gpu-parity: install
	@nvidia-smi -L >/dev/null 2>&1 || { echo "gpu-parity: make gpu-parity needs an NVIDIA GPU: nvidia-smi -L finds none (nothing was downloaded)" >&2; exit 2; }
	$(MAKE) $(RUNTIME_VENV)/.installed
	$(BIN)/python -m tools.gpu_train --python $(RUNTIME_VENV)/bin/python --against-nvidia

$(RUNTIME_VENV)/.installed: requirements-runtime.txt
	$(PYTHON) -m venv $(RUNTIME_VENV)
	$(RUNTIME_VENV)/bin/pip install --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
		-r requirements-runtime.txt
	touch $@

## Remove build/, .venv and the tools' caches.
clean:
	rm -rf build $(VENV) $(RUNTIME_VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
