"""Kueue flavors and the ClusterQueue spec, built directly from pools of every machine type."""

from __future__ import annotations

import pytest

from components.scheduling import PROVISIONING_CHECK, cluster_queue_spec
from facts.gke import DWS_CAPACITY, CapacityType
from facts.machines import MACHINE_TYPES, allocatable_memory_mib, allocatable_millicores, machine_type
from planners.pools import PoolFacts
from planners.queues import plan_flavor, plan_flavors


def pool(
    name: str, machine: str, nodes: int, capacity: CapacityType = CapacityType.ON_DEMAND, compact: bool = False
) -> PoolFacts:
    min_nodes = 0 if capacity in DWS_CAPACITY else nodes
    return PoolFacts(name, machine, "us-central1-b", nodes, capacity, compact, min_nodes)


@pytest.mark.parametrize("name", list(MACHINE_TYPES))
def test_a_flavor_quota_is_the_pool_s_whole_allocatable_capacity(name: str) -> None:
    machine = machine_type(name)
    flavor = plan_flavor(pool("p", name, 3))
    assert (flavor.name, flavor.pool, flavor.nodes) == ("p", "p", 3)
    assert flavor.gpus == 3 * machine.gpus
    assert flavor.cpu_millicores == 3 * allocatable_millicores(machine.vcpus)
    assert flavor.memory_mib == 3 * allocatable_memory_mib(machine.memory_gib)
    assert flavor.node_labels == {
        "cloud.google.com/gke-accelerator": machine.gke_accelerator,
        "cloud.google.com/gke-nodepool": "p",
    }
    assert flavor.tolerations == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]


@pytest.mark.parametrize(
    ("capacity", "compact", "topology"),
    [
        (CapacityType.ON_DEMAND, False, False),
        (CapacityType.ON_DEMAND, True, True),
        (CapacityType.RESERVATION, False, True),
        (CapacityType.SPOT, False, False),
        # Compact flex-start nodes carry the labels, but the pool scales from zero: see below.
        (CapacityType.FLEX_START, True, False),
    ],
)
def test_only_compact_or_reserved_pools_carry_topology_labels(
    capacity: CapacityType, compact: bool, topology: bool
) -> None:
    assert plan_flavor(pool("p", "a3-ultragpu-8g", 2, capacity, compact)).topology is topology


@pytest.mark.parametrize("capacity", [CapacityType.ON_DEMAND, CapacityType.RESERVATION, CapacityType.FLEX_START])
def test_a_pool_that_can_be_at_zero_nodes_gets_no_topology_without_a_provisioning_request(
    capacity: CapacityType,
) -> None:
    """Kueue's topology-aware scheduling places a workload only on Ready nodes that carry the
    topology labels; nodes that do not exist yet are reached only through a ProvisioningRequest
    admission check (kubernetes-sigs/kueue site/content/en/docs/concepts/topology_aware_scheduling.md
    @v0.19.2, "ClusterAutoscaler support"; pkg/scheduler/flavorassigner/tas_flavorassigner.go:104-108;
    KEP 2724 non-goal "support Cluster Autoscaler without ProvisioningRequest"). With topology on
    such a flavor the run would stay suspended and the pool at zero: so the flavor carries none, and
    the run is admitted by quota, its pods scale the pool up."""
    empty = PoolFacts("p", "a3-ultragpu-8g", "us-central1-b", 4, capacity, True, 0)
    flavor = plan_flavor(empty)
    assert not flavor.topology and "zero nodes" in str(flavor.topology_problem)
    # The same pool with a node always up keeps its topology.
    assert plan_flavor(PoolFacts("p", "a3-ultragpu-8g", "us-central1-b", 4, capacity, True, 1)).topology


def test_queued_pools_tolerate_the_queued_taint_and_need_the_provisioning_check() -> None:
    flavors = plan_flavors(
        [pool("a", "a3-highgpu-8g", 2), pool("q", "a3-highgpu-8g", 4, CapacityType.QUEUED_PROVISIONING)]
    )
    assert flavors[1].queued and not flavors[0].queued
    assert {"key": "cloud.google.com/gke-queued", "operator": "Exists", "effect": "NoSchedule"} in flavors[
        1
    ].tolerations
    spec = cluster_queue_spec(flavors, "nemo", "LowerPriority")
    assert spec["admissionChecksStrategy"] == {"admissionChecks": [{"name": PROVISIONING_CHECK, "onFlavors": ["q"]}]}


def test_the_cluster_queue_covers_gpus_cpu_and_memory_with_each_flavor_s_quota() -> None:
    flavors = plan_flavors([pool("a", "a3-megagpu-8g", 32), pool("b", "a3-highgpu-1g", 2)])
    spec = cluster_queue_spec(flavors, "team", "Never")
    assert spec["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": "team"}}
    assert spec["preemption"] == {"withinClusterQueue": "Never", "reclaimWithinCohort": "Never"}
    (group,) = spec["resourceGroups"]
    assert group["coveredResources"] == ["nvidia.com/gpu", "cpu", "memory"]
    quotas = {f["name"]: {r["name"]: r["nominalQuota"] for r in f["resources"]} for f in group["flavors"]}
    assert quotas["a"] == {
        "nvidia.com/gpu": 256,
        "cpu": f"{flavors[0].cpu_millicores}m",
        "memory": f"{flavors[0].memory_mib}Mi",
    }
    assert quotas["b"]["nvidia.com/gpu"] == 2
    assert "admissionChecksStrategy" not in spec
