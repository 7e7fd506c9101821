"""The node pool planner: GKE's capacity rules and the platform's defaults, for every machine
type and capacity mode, without Pulumi."""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest

from facts.errors import RuleError
from facts.gke import DWS_CAPACITY, CapacityType, compact_placement_problem, default_compact
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
    plan = plan_node_pool(spec(name, capacity), "proj")
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
    queued = capacity is CapacityType.QUEUED_PROVISIONING
    assert plan.queued_provisioning is queued
    assert (len(plan.taints), bool(plan.labels)) == ((2, True) if queued else (1, False))
    assert plan.upgrade_settings == {"strategy": "SURGE", "max_surge": 0, "max_unavailable": 1}


def test_a_reservation_is_consumed_by_path_with_its_block_and_owner() -> None:
    plan = plan_node_pool(
        spec("a3-ultragpu-8g", CapacityType.RESERVATION, reservation_block="b1", reservation_project="shared"), "p"
    )
    assert plan.reservation_affinity == {
        "consume_reservation_type": "SPECIFIC_RESERVATION",
        "key": "compute.googleapis.com/reservation-name",
        "values": ["projects/shared/reservations/res/reservationBlocks/b1"],
    }
    assert plan_node_pool(spec("a3-highgpu-8g", CapacityType.ON_DEMAND), "p").reservation_affinity is None


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
        plan_node_pool(spec("a3-highgpu-8g", CapacityType.ON_DEMAND, **changes), "p")
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
