"""Fixtures: run stacks under the mocks, once per (stack, mode), always schema-validated."""

from __future__ import annotations

import ast
import copy
import gc
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest

from config.loader import ConfigError
from facts.project import PROJECT
from harness.mocks import RecordedResource
from harness.runner import StackFailed, StackRun, load_stack_values, run_stack
from harness.schemas import resource_errors


def parse_source(text: str) -> ast.Module:
    """`ast.parse` with the garbage collector paused. On CPython 3.11.7 a collection during the parse
    can run a finalizer that parses too (an unretrieved asyncio Future of an earlier mocked run logs
    its traceback, and 3.11's traceback formatting calls `ast.parse`), and the nested parse corrupts
    the shared depth counter: "SystemError: AST constructor recursion depth mismatch"
    (python/cpython#106905, fixed in 3.11.8)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        return ast.parse(text)
    finally:
        if enabled:
            gc.enable()


MODES = pytest.mark.parametrize("preview", [False, True], ids=["update", "preview"])


def assert_valid(run: StackRun) -> None:
    """Every registered resource matches its real schema."""
    errors = [
        f"{r.type} {r.name}: {error}"
        for r in run.resources
        for error in resource_errors(r, run.manifest(r), preview=run.preview)
    ]
    assert not errors, "schema validation failed:\n  " + "\n  ".join(errors)


Render = Callable[..., StackRun]
NODE_POOL = "gcp:container/nodePool:NodePool"


def gpu_pools(run: StackRun) -> list[RecordedResource]:
    """The GPU node pools of a run (not the system or supervisor CPU pools)."""
    return [p for p in run.of_type(NODE_POOL) if p.inputs["nodeConfig"].get("guestAccelerators")]


def flavors_by_pool(run: StackRun) -> dict[str, dict[str, Any]]:
    """Each GPU pool's ResourceFlavor manifest, by the pool its node labels select."""
    flavors = map(run.manifest, run.of_type("kubernetes:kueue.x-k8s.io/v1beta2:ResourceFlavor"))
    return {f["spec"]["nodeLabels"]["cloud.google.com/gke-nodepool"]: f for f in flavors}


@pytest.fixture(scope="session")
def render() -> Iterator[Render]:
    """render(stack, preview=False, **overrides) → a validated StackRun; cached without overrides."""
    cache: dict[tuple[str, bool], StackRun] = {}

    def _render(stack: str, preview: bool = False, values: Mapping[str, Any] | None = None) -> StackRun:
        if values is None and (stack, preview) in cache:
            return cache[(stack, preview)]
        run = run_stack(stack, values=values, preview=preview)
        assert_valid(run)
        if values is None:
            cache[(stack, preview)] = run
        return run

    yield _render


def with_model(stack: str, model: str, run: int = 0) -> dict[str, Any]:
    """A shipped stack's values with its `run`th run training `model` (the shipped examples train
    the current recipes; a test of an older runtime names its model)."""
    values = load_stack_values(stack)
    training = copy.deepcopy(values[f"{PROJECT}:training"])
    training["runs"][run]["model"] = model
    return {**values, f"{PROJECT}:training": training}


def rejected(
    values: Mapping[str, Any], stack: str = "dev", upstream: Mapping[str, Mapping[str, Any]] | None = None
) -> ConfigError:
    """Run the program on bad config (or upstream outputs): it must fail with a ConfigError and
    register nothing."""
    with pytest.raises(StackFailed) as failure:
        run_stack(stack, values=values, upstream=upstream)
    assert isinstance(failure.value.error, ConfigError), failure.value.error
    assert failure.value.resources == [], [r.urn for r in failure.value.resources]
    return failure.value.error


def millicores(quantity: str) -> int:
    """A CPU quantity as the program writes it (`215`, `1500m`) in millicores."""
    return int(quantity[:-1]) if quantity.endswith("m") else int(quantity) * 1000


def mebibytes(quantity: str) -> int:
    """A memory quantity as the program writes it (`2822Gi`, `1536Mi`) in MiB."""
    units = {"Mi": 1, "Gi": 1024, "Ti": 1024**2, "Pi": 1024**3}
    return int(quantity[:-2]) * units[quantity[-2:]]


def issue_for(error: ConfigError, key: str) -> str:
    """The message of the issue about `key` (the full nemo-gke key); fails if there is none."""
    for issue in error.issues:
        if issue.key == key:
            return str(issue)
    raise AssertionError(f"no issue for {key}; issues: {[str(i) for i in error.issues]}")
