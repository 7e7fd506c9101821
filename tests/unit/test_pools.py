"""The node pool planner: GKE's capacity rules and the platform's defaults, for every machine
type and capacity mode, without Pulumi."""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest

from facts.errors import RuleError
from facts.gcp import resource_name_problem
from facts.gke import (
    DWS_CAPACITY,
    CapacityType,
    capacity_problem,
    compact_placement_problem,
    default_compact,
    reserved_node_key,
)
from facts.machines import MACHINE_TYPES, machine_type
from planners.pools import Autoscaling, NodePoolSpec, node_pool_advice, plan_node_pool


def nodes_of(machine: str) -> int:
    """A pool size every machine takes: a whole NVLink domain where a pool is one."""
    record = machine_type(machine)
    return record.nvlink_domain_nodes if record.accelerator_topology else 4


def spec(machine: str, capacity: CapacityType, **changes: object) -> NodePoolSpec:
    autoscaled = capacity in DWS_CAPACITY
    nodes = nodes_of(machine)
    base = NodePoolSpec(
        name="pool",
        machine_type=machine,
        zone="us-central1-b",
        capacity_type=capacity,
        node_count=None if autoscaled else nodes,
        autoscaling=Autoscaling(0, nodes) if autoscaled else None,
        compact=default_compact(capacity, machine_type(machine), nodes),
        reservation="res" if capacity is CapacityType.RESERVATION else None,
    )
    return replace(base, **changes)  # type: ignore[arg-type]


# Every machine with every capacity mode it is offered in.
OFFERED = [
    (m, c) for m, c in itertools.product(MACHINE_TYPES, CapacityType) if not capacity_problem(c, MACHINE_TYPES[m])
]


@pytest.mark.parametrize(("name", "capacity"), OFFERED)
def test_every_machine_and_capacity_mode_gets_a_plan_gke_accepts(name: str, capacity: CapacityType) -> None:
    plan = plan_node_pool(spec(name, capacity), "proj", "c")
    machine = machine_type(name)
    assert plan.taints[0] == {"key": "nvidia.com/gpu", "value": "present", "effect": "NO_SCHEDULE"}
    assert plan.boot_disk_type == machine.boot_disk_types[0]
    assert plan.region == "us-central1"
    assert plan.spot is (capacity is CapacityType.SPOT)
    assert plan.flex_start is (capacity in DWS_CAPACITY)
    # Flex-start and queued provisioning: from zero, no auto-repair, never a reservation.
    if capacity in DWS_CAPACITY:
        assert plan.autoscaling is not None and plan.autoscaling["total_min_node_count"] == 0
        assert plan.initial_node_count == 0 and plan.node_count is None
        assert plan.auto_repair is False
        assert plan.reservation_affinity == {"consume_reservation_type": "NO_RESERVATION"}
    else:
        assert plan.node_count == nodes_of(name) and plan.autoscaling is None and plan.auto_repair is True
    # Compact placement only where GKE allows it for the mode and machine; a workload policy to
    # create for flex-start, or for a machine placed by its accelerator topology.
    assert not plan.compact or compact_placement_problem(capacity, machine) is None
    policy = plan.compact and (capacity is CapacityType.FLEX_START or machine.accelerator_topology is not None)
    assert (plan.workload_policy is not None) == policy
    assert plan.queued_provisioning is (capacity is CapacityType.QUEUED_PROVISIONING)


def test_a_reservation_is_consumed_by_path_with_its_block_and_owner() -> None:
    plan = plan_node_pool(
        spec("a3-ultragpu-8g", CapacityType.RESERVATION, reservation_block="b1", reservation_project="shared"), "p", "c"
    )
    assert plan.reservation_affinity == {
        "consume_reservation_type": "SPECIFIC_RESERVATION",
        "key": "compute.googleapis.com/reservation-name",
        "values": ["projects/shared/reservations/res/reservationBlocks/b1"],
    }
    assert plan_node_pool(spec("a3-highgpu-8g", CapacityType.ON_DEMAND), "p", "c").reservation_affinity is None


@pytest.mark.parametrize(
    ("changes", "key"),
    [
        ({"node_count": 2, "autoscaling": Autoscaling(0, 2)}, "nodeCount"),
        ({"capacity_type": CapacityType.FLEX_START}, "autoscaling"),
        ({"reservation": "r"}, "capacity.reservation"),
        ({"compact": True, "capacity_type": CapacityType.QUEUED_PROVISIONING, "node_count": None,
          "autoscaling": Autoscaling(0, 2)}, "placement"),
        ({"compact": False, "placement_policy": "p"}, "placementPolicy"),
        ({"disk_type": "pd-standard"}, "diskType"),
        ({"zone": "us-central1"}, "zone"),
    ],
)  # fmt: skip
def test_a_spec_that_breaks_a_rule_is_refused_with_its_key(changes: dict[str, object], key: str) -> None:
    with pytest.raises(RuleError) as error:
        plan_node_pool(spec("a3-highgpu-8g", CapacityType.ON_DEMAND, **changes), "p", "c")
    assert error.value.key == key


def test_the_platform_defaults_to_compact_multi_node_eight_gpu_pools_where_gke_allows_it() -> None:
    assert default_compact(CapacityType.ON_DEMAND, machine_type("a3-megagpu-8g"), 2)
    assert not default_compact(CapacityType.ON_DEMAND, machine_type("a3-megagpu-8g"), 1)
    assert not default_compact(CapacityType.SPOT, machine_type("a3-highgpu-4g"), 4)
    assert not default_compact(CapacityType.FLEX_START, machine_type("a3-megagpu-8g"), 4)
    assert default_compact(CapacityType.FLEX_START, machine_type("a3-ultragpu-8g"), 4)
    assert not default_compact(CapacityType.QUEUED_PROVISIONING, machine_type("a4-highgpu-8g"), 4)


@pytest.mark.parametrize("name", list(MACHINE_TYPES))
def test_a_zone_the_catalog_does_not_list_is_advice_not_an_error(name: str) -> None:
    machine = machine_type(name)
    listed = sorted(machine.zones)[0]
    assert node_pool_advice(spec(name, CapacityType.ON_DEMAND, zone=listed)) == []
    (advice,) = node_pool_advice(spec(name, CapacityType.ON_DEMAND, zone="antarctica-south1-a"))
    assert f"cannot confirm {name} capacity in antarctica-south1-a" in advice and listed in advice


def test_a_placeholder_reservation_is_advice() -> None:
    pool = spec("a3-megagpu-8g", CapacityType.RESERVATION, zone="us-central1-c", reservation="your-reservation")
    assert node_pool_advice(pool) == [
        "capacity.reservation 'your-reservation' is the example's placeholder: set your own"
    ]


@pytest.mark.parametrize(("name", "capacity"), OFFERED)
def test_no_pool_sets_a_label_or_taint_under_a_prefix_kubernetes_or_gke_keeps(
    name: str, capacity: CapacityType
) -> None:
    """kubernetes.io/ and k8s.io/ are Kubernetes' (pulumi-gcp container node_config.labels docs);
    keys under cloud.google.com/ are GKE's: it refuses them ("Node labels with key
    "cloud.google.com/compute-class" are managed by GKE or Kubernetes and must not be manually
    specified", hashicorp/terraform-provider-google#19677) and adds the gke-queued taint of a
    queued-provisioning pool itself."""
    plan = plan_node_pool(spec(name, capacity), "proj", "c")
    assert not [t["key"] for t in plan.taints if reserved_node_key(t["key"])]
    assert reserved_node_key("cloud.google.com/gke-queued") and reserved_node_key("node.kubernetes.io/x")
    assert not reserved_node_key("nvidia.com/gpu") and not reserved_node_key("example.com/cloud.google.com")


@pytest.mark.parametrize(("name", "capacity"), OFFERED)
def test_flex_start_and_queued_pools_leave_the_upgrade_strategy_to_gke(name: str, capacity: CapacityType) -> None:
    """GKE upgrades flex-start and queued-provisioning pools with SHORT_LIVED, which the provider
    cannot set (SURGE or BLUE_GREEN only, hashicorp/terraform-provider-google
    google/services/container/resource_container_node_pool.go): any upgrade_settings there diffs on
    every preview (crossplane-contrib/provider-upjet-gcp#1028). Other pools replace nodes in place."""
    plan = plan_node_pool(spec(name, capacity), "proj", "c")
    if capacity in DWS_CAPACITY:
        assert plan.upgrade_settings is None
    else:
        assert plan.upgrade_settings == {"strategy": "SURGE", "max_surge": 0, "max_unavailable": 1}


def test_a_reservation_pool_takes_no_placement_policy() -> None:
    """cluster-toolkit's A3 Mega and A3 Ultra examples consume a specific reservation with no
    placement policy (examples/gke-a3-megagpu, examples/gke-a3-ultragpu @1047080): the reservation
    carries the placement, and no GKE document shows the two together."""
    for name in (m.name for m in MACHINE_TYPES.values() if m.accelerator_topology is None):
        assert not default_compact(CapacityType.RESERVATION, machine_type(name), 8)
        assert compact_placement_problem(CapacityType.RESERVATION, machine_type(name))
    with pytest.raises(RuleError) as error:
        plan_node_pool(spec("a3-megagpu-8g", CapacityType.RESERVATION, compact=True), "p", "c")
    assert error.value.key == "placement"


def test_the_workload_policy_name_is_the_cluster_s_and_fits_gce_s_limit() -> None:
    """Two stacks in one project and region must not both name a policy `<pool>-placement`."""
    short = plan_node_pool(spec("a3-ultragpu-8g", CapacityType.FLEX_START), "p", "nemo-dev")
    assert short.workload_policy_name == "nemo-dev-pool-placement"
    long = plan_node_pool(spec("a3-ultragpu-8g", CapacityType.FLEX_START, name="p" * 40), "p", "c" * 24)
    other = plan_node_pool(spec("a3-ultragpu-8g", CapacityType.FLEX_START, name="p" * 40), "p", "d" * 24)
    assert len(long.workload_policy_name) <= 63 and long.workload_policy_name != other.workload_policy_name
    assert resource_name_problem(long.workload_policy_name, 63) is None


A4X = "a4x-highgpu-4g"


def test_an_a4x_pool_is_one_nvlink_domain_placed_by_a_1x72_workload_policy() -> None:
    """GKE's A4X guide (https://cloud.google.com/ai-hypercomputer/docs/create/gke-ai-hypercompute-custom-a4x):
    a HIGH_THROUGHPUT workload policy of accelerator topology 1x72 passed as the pool's placement
    policy, with a specific reservation; cluster-toolkit examples/gke-a4x@1047080 does the same."""
    plan = plan_node_pool(spec(A4X, CapacityType.RESERVATION), "p", "c")
    assert plan.compact and plan.placement_policy is None
    assert plan.workload_policy == {"type": "HIGH_THROUGHPUT", "accelerator_topology": "1x72"}
    assert plan.reservation_affinity is not None
    assert plan.reservation_affinity["consume_reservation_type"] == "SPECIFIC_RESERVATION"
    # An existing workload policy is used as it is.
    named = plan_node_pool(spec(A4X, CapacityType.RESERVATION, placement_policy="mine"), "p", "c")
    assert (named.placement_policy, named.workload_policy) == ("mine", None)


@pytest.mark.parametrize("capacity", [c for c in CapacityType if c is not CapacityType.RESERVATION])
def test_a4x_is_offered_only_through_reservations(capacity: CapacityType) -> None:
    """No on-demand, Spot or flex-start A4X VMs (GKE's A4X guide: reservation-bound provisioning only)."""
    with pytest.raises(RuleError) as error:
        plan_node_pool(spec(A4X, capacity, reservation=None), "p", "c")
    assert error.value.key == "capacity.type"


def test_an_a4x_pool_holds_at_most_one_nvlink_domain() -> None:
    """GKE's A4X guide: a 1x72 pool takes one 18-instance sub-block, so NODE_COUNT is 18 or fewer."""
    plan_node_pool(spec(A4X, CapacityType.RESERVATION, node_count=18), "p", "c")
    with pytest.raises(RuleError, match="at most 18 nodes"):
        plan_node_pool(spec(A4X, CapacityType.RESERVATION, node_count=19), "p", "c")


def test_an_a4x_pool_below_a_whole_domain_is_told_what_stays_idle() -> None:
    """The guide: with fewer than 18 nodes the sub-block's other instances sit idle, and no other
    pool can use them."""
    (advice,) = node_pool_advice(spec(A4X, CapacityType.RESERVATION, zone="us-central1-a", node_count=16))
    assert "uses 16: the other 2 stay idle" in advice
    assert node_pool_advice(spec(A4X, CapacityType.RESERVATION, zone="us-central1-a")) == []
