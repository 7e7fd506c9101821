"""Kueue flavors and the ClusterQueue spec, built directly from pools of every machine type."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from typing import Any

import pytest
import yaml

from components.scheduling import KueueControllerArgs, cluster_queue_spec, kueue_configuration
from facts.gke import DWS_CAPACITY, CapacityType
from facts.kubernetes import GPU_TAINT, KUEUE_API, TOPOLOGY_NAME, Taint, cpu_quantity, mib_quantity, versioned_name
from facts.kueue import PROVISIONING_CHECK, WithinClusterQueue
from facts.machines import MACHINE_TYPES, CpuArch, allocatable_memory_mib, allocatable_millicores, machine_type
from harness import cel
from harness.runner import RUN_AT
from planners.pools import GpuPoolExport
from planners.queues import TOPOLOGY, TOPOLOGY_SPEC, Flavor, booking_closed, plan_flavor, plan_flavors


def pool(
    name: str, machine: str, nodes: int, capacity: CapacityType = CapacityType.ON_DEMAND, compact: bool = False
) -> GpuPoolExport:
    min_nodes = 0 if capacity in DWS_CAPACITY else nodes
    return GpuPoolExport(name, machine, "us-central1-b", nodes, capacity, compact, min_nodes)


@pytest.mark.parametrize("name", list(MACHINE_TYPES))
def test_a_flavor_quota_is_the_pool_s_whole_allocatable_capacity(name: str) -> None:
    machine = machine_type(name)
    flavor = plan_flavor(pool("p", name, 3))
    assert (flavor.pool, flavor.nodes) == ("p", 3) and flavor.name.startswith("p-")
    assert flavor.gpus == 3 * machine.gpus
    assert flavor.cpu_millicores == 3 * allocatable_millicores(machine.vcpus)
    assert flavor.memory_mib == 3 * allocatable_memory_mib(machine.memory_gib)
    assert flavor.node_labels == {
        "cloud.google.com/gke-accelerator": machine.gke_accelerator,
        "cloud.google.com/gke-nodepool": "p",
    }
    # The GPU taint, and exactly the taint GKE puts on Arm nodes (GKE: prepare Arm workloads).
    arch = [{"key": "kubernetes.io/arch", "operator": "Equal", "value": "arm64", "effect": "NoSchedule"}]
    assert flavor.tolerations == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
        *(arch if machine.cpu_arch is CpuArch.ARM64 else []),
    ]


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
    empty = GpuPoolExport("p", "a3-ultragpu-8g", "us-central1-b", 4, capacity, True, 0)
    flavor = plan_flavor(empty)
    assert not flavor.topology and "zero nodes" in str(flavor.topology_problem)
    # The same pool with a node always up keeps its topology.
    assert plan_flavor(GpuPoolExport("p", "a3-ultragpu-8g", "us-central1-b", 4, capacity, True, 1)).topology


def test_queued_pools_tolerate_the_queued_taint_and_need_the_provisioning_check() -> None:
    flavors = plan_flavors(
        [pool("a", "a3-highgpu-8g", 2), pool("q", "a3-highgpu-8g", 4, CapacityType.QUEUED_PROVISIONING)], RUN_AT
    )
    assert flavors[1].queued and not flavors[0].queued
    assert {"key": "cloud.google.com/gke-queued", "operator": "Exists", "effect": "NoSchedule"} in flavors[
        1
    ].tolerations
    spec = cluster_queue_spec(flavors, "nemo", WithinClusterQueue.LOWER_PRIORITY)
    checks = {"admissionChecks": [{"name": PROVISIONING_CHECK, "onFlavors": [flavors[1].name]}]}
    assert spec["admissionChecksStrategy"] == checks


def test_the_cluster_queue_covers_gpus_cpu_and_memory_with_each_flavor_s_quota() -> None:
    flavors = plan_flavors([pool("a", "a3-megagpu-8g", 32), pool("b", "a3-highgpu-1g", 2)], RUN_AT)
    spec = cluster_queue_spec(flavors, "team", WithinClusterQueue.NEVER)
    assert spec["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": "team"}}
    assert spec["preemption"] == {"withinClusterQueue": "Never", "reclaimWithinCohort": "Never"}
    (group,) = spec["resourceGroups"]
    assert group["coveredResources"] == ["nvidia.com/gpu", "cpu", "memory"]
    quotas = {f["name"]: {r["name"]: r["nominalQuota"] for r in f["resources"]} for f in group["flavors"]}
    assert quotas[flavors[0].name] == {
        "nvidia.com/gpu": "256",
        "cpu": cpu_quantity(flavors[0].cpu_millicores),
        "memory": mib_quantity(flavors[0].memory_mib),
    }
    assert quotas[flavors[1].name]["nvidia.com/gpu"] == "2"
    assert "admissionChecksStrategy" not in spec


def test_kueue_objects_are_plain_data_as_kubectl_and_the_lane_write_them() -> None:
    """What the components build is written as YAML too (the lane's Kueue configuration file):
    enum members would not serialise (yaml.safe_dump refuses str subclasses)."""
    flavors = plan_flavors([pool("a", "a3-megagpu-8g", 32)], RUN_AT)
    args = KueueControllerArgs({"pool": "system"}, 1800, 5, 2)
    for built in (cluster_queue_spec(flavors, "team", WithinClusterQueue.LOWER_PRIORITY), kueue_configuration(args)):
        assert yaml.safe_load(yaml.safe_dump(built)) == built


def _resource_flavor(flavor: Flavor) -> dict[str, Any]:
    return {"apiVersion": KUEUE_API, "kind": "ResourceFlavor", "metadata": {"name": flavor.name}, "spec": flavor.spec}


# One pool, then the changes a stack file can make to it without renaming it.
_BEFORE = GpuPoolExport("p", "a3-ultragpu-8g", "us-central1-b", 4, CapacityType.RESERVATION, False, 4)
_CHANGES = {
    "machine type": dataclasses.replace(_BEFORE, machine_type="a4-highgpu-8g"),
    "queued provisioning": dataclasses.replace(_BEFORE, capacity_type=CapacityType.QUEUED_PROVISIONING, min_nodes=0),
    "scales to zero": dataclasses.replace(_BEFORE, min_nodes=0),
    "spot": dataclasses.replace(_BEFORE, capacity_type=CapacityType.SPOT),
    "more nodes": dataclasses.replace(_BEFORE, max_nodes=8, min_nodes=8),
}


@pytest.mark.parametrize("change", list(_CHANGES))
def test_a_changed_pool_never_patches_a_resource_flavor_in_a_way_kueue_refuses(change: str) -> None:
    """Once `topologyName` is set, Kueue's CEL rules make a ResourceFlavor's nodeLabels,
    tolerations and topologyName immutable (kubernetes-sigs/kueue@v0.19.2
    apis/kueue/v1beta2/resourceflavor_types.go, the XValidation rules on ResourceFlavorSpec,
    evaluated here from the pinned CRD). The Kubernetes provider patches an object whose name is
    unchanged (pulumi-kubernetes provider/pkg/provider/provider.go Diff: only metadata.name and
    namespace force a replacement of a custom resource), so a flavor keeps its name exactly when
    its spec is unchanged: every other change is a new flavor, which the API server accepts."""
    before, after = plan_flavor(_BEFORE), plan_flavor(_CHANGES[change])
    assert before.topology, "the pool before the change has topology, so the rules apply"
    if before.name == after.name:
        assert after.spec == before.spec
        assert not cel.update_errors(_resource_flavor(before), _resource_flavor(after))
    else:
        assert after.spec != before.spec
        assert not cel.create_errors(_resource_flavor(after))
    assert (before.name == after.name) is (change == "more nodes"), "only the quota changed"


def test_a_flavor_patched_in_place_would_be_refused() -> None:
    """The check above can fail: the same spec change under an unchanged name is refused by
    the CEL rules (kueue resourceflavor_types.go: 'tolerations are immutable when topologyName
    is set')."""
    before, after = plan_flavor(_BEFORE), plan_flavor(_CHANGES["queued provisioning"])
    same_name = _resource_flavor(after) | {"metadata": {"name": before.name}}
    errors = cel.update_errors(_resource_flavor(before), same_name)
    assert any("immutable when topologyName is set" in error for error in errors), errors


def test_the_topology_is_named_after_its_levels() -> None:
    """A Kueue Topology's levels are immutable (kueue apis/kueue/v1beta2/topology_types.go:
    `self == oldSelf` on spec.levels): other levels must be another Topology, so its name
    carries their digest, and flavors name it (their own name follows)."""
    topology = {"apiVersion": KUEUE_API, "kind": "Topology", "metadata": {"name": TOPOLOGY}, "spec": TOPOLOGY_SPEC}
    assert not cel.create_errors(topology)
    fewer = {**topology, "spec": {"levels": TOPOLOGY_SPEC["levels"][1:]}}
    assert cel.update_errors(topology, fewer), "the API server refuses new levels under the same name"
    assert versioned_name(TOPOLOGY_NAME, fewer["spec"]) != TOPOLOGY
    assert plan_flavor(_BEFORE).spec["topologyName"] == TOPOLOGY


@pytest.mark.parametrize(
    ("toleration", "tolerated"),
    [
        ({"key": "k", "operator": "Exists", "effect": "NoSchedule"}, True),
        ({"key": "k", "operator": "Exists"}, True),  # no effect: every effect
        ({"operator": "Exists"}, True),  # no key with Exists: every taint
        ({"key": "k", "operator": "Equal", "value": "v", "effect": "NoSchedule"}, True),
        ({"key": "k", "value": "v"}, True),  # no operator means Equal
        ({"key": "k", "operator": "Equal", "value": "w", "effect": "NoSchedule"}, False),
        ({"key": "k", "operator": "Exists", "effect": "NoExecute"}, False),
        ({"key": "other", "operator": "Exists"}, False),
        ({"key": "k", "operator": "Lt", "value": "v"}, False),
    ],
)
def test_a_taint_is_tolerated_as_the_scheduler_decides(toleration: dict[str, str], tolerated: bool) -> None:
    """k8s.io/api core/v1 toleration.go `ToleratesTaint`, for the taint k=v:NoSchedule."""
    assert Taint("k", "v").tolerated_by([toleration]) is tolerated


def test_an_existing_pool_s_flavor_tolerates_its_taints_exactly() -> None:
    """Only what GKE's GPU toleration leaves untolerated gets a toleration of its own, as declared."""
    taints = (GPU_TAINT, Taint("nvidia.com/gpu", "present", "NoExecute"), Taint("team/x", "", "NoSchedule"))
    existing = dataclasses.replace(pool("p", "a3-ultragpu-8g", 2), node_labels={"pool": "p"}, taints=taints)
    flavor = plan_flavor(existing)
    assert flavor.tolerations == [GPU_TAINT.toleration(), *(t.exact_toleration() for t in taints[1:])]
    assert all(t.tolerated_by(flavor.tolerations) for t in existing.node_taints)


def test_a_booked_pool_s_quota_is_open_within_its_booking_only() -> None:
    """Kueue admits on quota: outside its booking a booked pool's flavor has none, so the runs of
    a chain through it are admitted on the chain's next pools (planners.queues.booking_closed)."""
    booked = dataclasses.replace(
        pool("a4", "a4-highgpu-8g", 2, CapacityType.RESERVATION),
        booked_from="2026-12-14T00:00:00Z",
        booked_until="2026-12-21T00:00:00Z",
    )
    other = pool("b", "a4-highgpu-8g", 2)

    def gpus(now: datetime) -> dict[str, str]:
        spec = cluster_queue_spec(plan_flavors([booked, other], now), "nemo", WithinClusterQueue.NEVER)
        return {
            f["name"].split("-")[0]: next(r["nominalQuota"] for r in f["resources"] if r["name"] == "nvidia.com/gpu")
            for f in spec["resourceGroups"][0]["flavors"]
        }

    before, start, end = (
        datetime(2026, 12, 13, 23, tzinfo=UTC),
        datetime(2026, 12, 14, tzinfo=UTC),
        datetime(2026, 12, 21, tzinfo=UTC),
    )
    assert gpus(before) == {"a4": "0", "b": "16"}
    assert gpus(start) == {"a4": "16", "b": "16"}
    assert gpus(end) == {"a4": "0", "b": "16"}
    assert "booked from 2026-12-14T00:00:00Z" in (booking_closed(booked, before) or "")
    assert "ended at 2026-12-21T00:00:00Z" in (booking_closed(booked, end) or "")
    assert booking_closed(other, before) is None
    # The flavor itself (its name, labels, tolerations) does not change with the quota.
    assert plan_flavors([booked], before)[0].name == plan_flavors([booked], start)[0].name
