"""The real Pulumi engine on the lane: the CLI and kubernetes provider drive the `existing` stack
(its run on Megatron-Bridge), a run-only stack on top of it (its run on NeMo 2) and the same stack
on the cluster's own namespace and claims, through the Automation API (integration/engine.py). The
tests share one session and run in file order; each prints what the engine and the controllers
did. Skipped, saying why, where the binaries are absent (`make integration-tools` builds them)."""

from __future__ import annotations

import contextlib
import gc
import inspect
import os
from collections.abc import Iterator

import pytest

from integration.engine import Scenarios, binaries_dir, missing_binaries, session

# `make integration-engine` sets it: there, missing binaries fail the tests instead.
REQUIRED = bool(os.environ.get("NEMO_GKE_ENGINE_REQUIRED"))
pytestmark = pytest.mark.skipif(missing_binaries() is not None and not REQUIRED, reason=str(missing_binaries()))


@pytest.fixture(scope="module")
def scenarios() -> Iterator[Scenarios]:
    found = binaries_dir(None)
    if found is None:
        pytest.fail(str(missing_binaries()))
    with session(found) as running:
        yield running


@pytest.fixture(autouse=True)
def close_abandoned_programs() -> Iterator[None]:
    """After a failed run the Automation API leaves the inline program's coroutine suspended
    (pulumi/runtime/stack.py `run_in_stack`, still referenced by its server for a while). Garbage
    collected later, its finalizer raises RuntimeError ("no running event loop"); collected inside
    an `ast.parse` (pytest's assertion rewriting of the hypothesis plugin it imports at the end),
    that error trips CPython 3.11's AST recursion check and ends the session with a SystemError,
    every test passed. Each test's abandoned programs are closed here instead."""
    yield
    for abandoned in [o for o in gc.get_objects() if inspect.iscoroutine(o) and o.cr_frame is not None]:
        if abandoned.cr_code.co_name == "run_in_stack":
            with contextlib.suppress(RuntimeError):
                abandoned.close()


def test_up_admits_the_run_in_one_topology_block(scenarios: Scenarios) -> None:
    print(f"engine: {scenarios.up_admits_the_run_in_one_block()}")


def test_an_upgrade_of_the_program_leaves_the_running_run_alone(scenarios: Scenarios) -> None:
    print(f"engine: {scenarios.an_upgrade_leaves_the_running_run_alone()}")


def test_a_changed_run_is_refused_at_its_revision_and_replaced_with_a_raised_one(scenarios: Scenarios) -> None:
    print(f"engine: {scenarios.a_changed_run_is_refused_then_replaced_with_its_revision()}")


def test_refresh_then_preview_finds_nothing_to_change_while_running_and_after(scenarios: Scenarios) -> None:
    print(f"engine: {scenarios.refresh_finds_nothing_to_change()}")


def test_a_finished_run_is_never_submitted_again(scenarios: Scenarios) -> None:
    print(f"engine: {scenarios.a_finished_run_is_never_submitted_again()}")


def test_a_run_only_stack_reads_its_upstream_and_destroys_alone(scenarios: Scenarios) -> None:
    print(f"engine: {scenarios.run_only_stack_destroys_alone()}")


def test_an_upstream_stack_the_backend_does_not_hold_is_refused_by_key(scenarios: Scenarios) -> None:
    print(f"engine: {scenarios.an_unknown_upstream_is_refused_by_key()}")


def test_a_relabelled_pool_moves_the_queue_to_a_new_flavor(scenarios: Scenarios) -> None:
    print(f"engine: {scenarios.relabelled_pool_moves_the_queue_to_a_new_flavor()}")


def test_a_run_larger_than_its_pool_is_refused_before_anything_is_registered(scenarios: Scenarios) -> None:
    print(f"engine: {scenarios.oversized_run_is_refused_before_registration()}")


def test_a_run_an_interrupted_up_left_on_the_cluster_is_never_run_twice(scenarios: Scenarios) -> None:
    print(f"engine: {scenarios.a_run_an_interrupted_up_left_is_never_run_twice()}")


def test_destroy_completes_with_no_manual_step_and_leaves_nothing(scenarios: Scenarios) -> None:
    print(f"engine: {scenarios.destroy_leaves_nothing_behind()}")


def test_an_object_of_the_stacks_name_that_kubectl_wrote_is_refused_and_left_alone(scenarios: Scenarios) -> None:
    print(f"engine: {scenarios.a_taken_name_is_refused_and_left_alone()}")


def test_an_up_killed_while_creating_converges_with_cancel_and_up(scenarios: Scenarios) -> None:
    print(f"engine: {scenarios.interrupted_up_converges()}")


def test_the_clusters_own_namespace_and_claims_are_used_and_kept(scenarios: Scenarios) -> None:
    print(f"engine: {scenarios.cluster_namespace_and_claims_are_used_and_kept()}")
