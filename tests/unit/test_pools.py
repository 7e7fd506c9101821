"""The node pool planner: GKE's capacity rules and the platform's defaults, for every machine
type and capacity mode, without Pulumi."""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest

from facts.errors import RuleError
from facts.gcp import resource_name_problem
from facts.gke import DWS_CAPACITY, CapacityType, compact_placement_problem, default_compact, reserved_node_key
from facts.machines import MACHINE_TYPES, machine_type
from planners.pools import Autoscaling, NodePoolSpec, node_pool_advice, plan_node_pool


def spec(machine: str, capacity: CapacityType, **changes: object) -> NodePoolSpec:
    autoscaled = capacity in DWS_CAPACITY
    base = NodePoolSpec(
        name="pool",
        machine_type=machine,
        zone="us-central1-b",
        capacity_type=capacity,
        node_count=None if autoscaled else 4,
        autoscaling=Autoscaling(0, 4) if autoscaled else None,
        compact=default_compact(capacity, machine_type(machine), 4),
        reservation="res" if capacity is CapacityType.RESERVATION else None,
    )
    return replace(base, **changes)  # type: ignore[arg-type]


@pytest.mark.parametrize(("name", "capacity"), list(itertools.product(MACHINE_TYPES, CapacityType)))
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
        assert plan.node_count == 4 and plan.autoscaling is None and plan.auto_repair is True
    # Compact placement only where GKE allows it for the mode and machine.
    assert not plan.compact or compact_placement_problem(capacity, machine) is None
    assert (plan.workload_policy is not None) == (plan.compact and capacity is CapacityType.FLEX_START)
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


@pytest.mark.parametrize(("name", "capacity"), list(itertools.product(MACHINE_TYPES, CapacityType)))
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


@pytest.mark.parametrize(("name", "capacity"), list(itertools.product(MACHINE_TYPES, CapacityType)))
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
    for name in MACHINE_TYPES:
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
