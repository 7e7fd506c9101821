"""facts.kueue against the pinned Kueue release's ClusterQueue CRD: the enums config accepts and
the components write are the API server's, and the item limits are its `maxItems`."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

import pytest

from facts import kueue, versions
from facts.controller_api import CONTROLLER_KINDS
from harness.runner import stack_with
from stacks import installed
from tests.conftest import issue_for, rejected


def cluster_queue_spec_schema() -> dict[str, Any]:
    (kind,) = (k for k in CONTROLLER_KINDS if k.kind == "ClusterQueue")
    schema: dict[str, Any] = installed.record(kind.module)["schemas"][f"{kind.api} ClusterQueue"]
    return schema["properties"]["spec"]["properties"]


@pytest.mark.parametrize(
    ("enum", "path"),
    [
        (kueue.QueueingStrategy, ("queueingStrategy",)),
        (kueue.WithinClusterQueue, ("preemption", "withinClusterQueue")),
        (kueue.ReclaimWithinCohort, ("preemption", "reclaimWithinCohort")),
        (kueue.BorrowWithinCohort, ("preemption", "borrowWithinCohort", "policy")),
    ],
)
def test_enums_are_the_pinned_crds(enum: type[StrEnum], path: tuple[str, ...]) -> None:
    node: dict[str, Any] = {"properties": cluster_queue_spec_schema()}
    for key in path:
        node = node["properties"][key]
    assert sorted(node["enum"]) == sorted(e.value for e in enum), f"Kueue {versions.KUEUE.version}"


def test_item_limits_are_the_pinned_crds() -> None:
    groups = cluster_queue_spec_schema()["resourceGroups"]
    group = groups["items"]["properties"]
    assert (groups["maxItems"], group["flavors"]["maxItems"], group["coveredResources"]["maxItems"]) == (
        kueue.MAX_RESOURCE_GROUPS,
        kueue.MAX_FLAVORS_PER_GROUP,
        kueue.MAX_COVERED_RESOURCES,
    )


def test_more_pools_than_a_cluster_queue_has_flavors_are_refused() -> None:
    """One flavor per pool in one resource group: the API server refuses a 65th."""
    pools = [{"name": f"p{i}", "machineType": "a3-highgpu-1g", "nodeCount": 1} for i in range(65)]
    message = issue_for(rejected(stack_with("dev", gpuPools=pools, training={})), "gpuPools")
    assert "has 65 entries; at most 64 are allowed" in message


def test_preemption_takes_the_apis_values_only() -> None:
    message = issue_for(rejected(stack_with("dev", kueue={"preemption": "Always"})), "kueue.preemption")
    for value in kueue.WithinClusterQueue:
        assert value.value in message
