"""GKE's rules for GPU node pools: capacity modes, what combines with what, and the names GKE
derives for a project. The config schema and the node pool planner both apply these."""

from __future__ import annotations

from enum import StrEnum

from facts.machines import MACHINE_TYPES, MachineType


class CapacityType(StrEnum):
    """How a GPU pool obtains its VMs."""

    ON_DEMAND = "onDemand"
    RESERVATION = "reservation"
    SPOT = "spot"
    FLEX_START = "flexStart"
    QUEUED_PROVISIONING = "queuedProvisioning"


# Dynamic Workload Scheduler: GKE provisions the nodes on request, so these pools scale from
# zero, without a reservation, and run on flex-start VMs (queued provisioning included).
# https://cloud.google.com/kubernetes-engine/docs/concepts/dws
DWS_CAPACITY = frozenset({CapacityType.FLEX_START, CapacityType.QUEUED_PROVISIONING})


def compact_placement_problem(capacity: CapacityType, machine: MachineType) -> str | None:
    """Why GKE refuses compact placement for this capacity mode and machine, or None.
    GoogleCloudPlatform/cluster-toolkit:modules/compute/gke-node-pool/main.tf@1047080 (preconditions)."""
    if capacity is CapacityType.QUEUED_PROVISIONING:
        return "queued provisioning excludes compact placement (GKE allows it only for TPUs)"
    if capacity is CapacityType.FLEX_START and not machine.compact_with_flex_start:
        allowed = ", ".join(m.name for m in MACHINE_TYPES.values() if m.compact_with_flex_start)
        return f"GKE allows compact placement with flex-start only on {allowed}"
    return None


def default_compact(capacity: CapacityType, machine: MachineType, max_nodes: int) -> bool:
    """The platform's default placement: compact for multi-node 8-GPU pools where GKE allows it,
    so their nodes share a block and carry GKE's topology labels."""
    return machine.gpus == 8 and max_nodes > 1 and compact_placement_problem(capacity, machine) is None


def workload_pool(project: str) -> str:
    """The Workload Identity pool of a project's GKE clusters.
    https://cloud.google.com/kubernetes-engine/docs/how-to/workload-identity"""
    return f"{project}.svc.id.goog"
