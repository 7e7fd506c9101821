"""Kueue's view of the GPU pools: one ResourceFlavor per pool, and its quota in the ClusterQueue.

Quotas are computed here, once, from the pools' allocatable capacity: the ClusterQueue is
built from them and runs are checked against them, in this stack or in a later one.

Once a ResourceFlavor names a topology, Kueue's CEL rules make its node labels, tolerations
and topology immutable, and a Topology's levels are immutable from the start
(kubernetes-sigs/kueue `apis/kueue/v1beta2/resourceflavor_types.go`, `topology_types.go`).
Both are therefore named after what they hold (facts.kubernetes.versioned_name): a changed pool
gets a new flavor, the ClusterQueue moves to it, and the old flavor, which Kueue's
`resource-in-use` finalizer keeps while a ClusterQueue names it, is deleted last.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from facts.kubernetes import (
    ACCELERATOR_LABEL,
    GPU_TAINT,
    TOPOLOGY_LABELS,
    TOPOLOGY_NAME,
    Taint,
    node_pool_selector,
    versioned_name,
)
from facts.machines import MachineType, OtherMachine, machine_type
from planners.pools import GpuPoolExport, gke_gpu_taints

# The Kueue Topology every topology-aware flavor names.
TOPOLOGY_SPEC: dict[str, Any] = {"levels": [{"nodeLabel": label} for label in TOPOLOGY_LABELS.values()]}
TOPOLOGY = versioned_name(TOPOLOGY_NAME, TOPOLOGY_SPEC)


@dataclass(frozen=True)
class Flavor:
    """A GPU pool as Kueue admits runs on it: a ResourceFlavor and the pool's whole capacity."""

    name: str
    pool: str
    machine_type: str
    nodes: int
    gpus: int
    cpu_millicores: int
    memory_mib: int
    # Runs are placed by topology: the nodes carry GKE's block/subblock/host labels and exist
    # (or are provisioned through a ProvisioningRequest) when Kueue admits.
    topology: bool
    # Nodes come from queued provisioning: admission waits for a ProvisioningRequest.
    queued: bool
    # Why a run asking for topology cannot have it on this pool (planners.pools.GpuPoolExport).
    # Defaulted: stack outputs drop null values, and a later stack must still read the flavor.
    topology_problem: str | None = None
    # An existing cluster's pool: the labels that select its nodes, and the taints they carry.
    existing_node_labels: dict[str, str] | None = None
    taints: tuple[Taint, ...] = ()
    other_machine: OtherMachine | None = None
    # Why Kueue admits nothing on the flavor as of this `up` (its quota is 0): a booked pool
    # before its booking starts or after it ends (booking_closed).
    closed: str | None = None

    @property
    def machine(self) -> MachineType:
        if self.other_machine is not None:
            return self.other_machine.machine
        return machine_type(self.machine_type)

    @property
    def imex_channels(self) -> int:
        """IMEX channels the pool's pods can claim, one per pod and node (components.nvlink)."""
        return self.nodes if self.machine.nvlink_across_nodes else 0

    @property
    def selector(self) -> dict[str, str]:
        """The node selector of the pool's pods: Kueue offers a job only the flavors whose node
        labels it allows, so the job is admitted on its own pool's quota."""
        if self.existing_node_labels is not None:
            return dict(self.existing_node_labels)
        return node_pool_selector(self.pool)

    @property
    def node_labels(self) -> dict[str, str]:
        if self.existing_node_labels is not None:
            return self.selector
        return {ACCELERATOR_LABEL: self.machine.gke_accelerator, **self.selector}

    @property
    def pool_tolerations(self) -> list[dict[str, str]]:
        """Tolerations of exactly the taints the pool's nodes carry beyond the GPU taint, whose
        toleration every GPU pod has: those an existing pool declares, or those GKE puts on a
        GKE pool's nodes for their CPU architecture."""
        gpu = [GPU_TAINT.toleration()]
        taints = self.taints if self.existing_node_labels is not None else self.machine.arch_taints
        return [taint.exact_toleration() for taint in taints if not taint.tolerated_by(gpu)]

    @property
    def tolerations(self) -> list[dict[str, str]]:
        return [taint.toleration() for taint in gke_gpu_taints(self.queued)] + self.pool_tolerations

    @property
    def spec(self) -> dict[str, Any]:
        """The ResourceFlavor's spec: exactly the fields its name is derived from."""
        spec: dict[str, Any] = {"nodeLabels": self.node_labels, "tolerations": self.tolerations}
        if self.topology:
            spec["topologyName"] = TOPOLOGY
        return spec


def plan_flavor(pool: GpuPoolExport) -> Flavor:
    machine = pool.machine
    millicores, mib = machine.allocatable
    flavor = Flavor(
        name=pool.name,
        pool=pool.name,
        machine_type=pool.machine_type,
        nodes=pool.max_nodes,
        gpus=machine.gpus * pool.max_nodes,
        cpu_millicores=millicores * pool.max_nodes,
        memory_mib=mib * pool.max_nodes,
        topology=pool.topology_problem is None,
        topology_problem=pool.topology_problem,
        queued=pool.queued,
        existing_node_labels=pool.node_labels,
        taints=pool.taints,
        other_machine=pool.other_machine,
    )
    return replace(flavor, name=versioned_name(pool.name, flavor.spec))


def booking_closed(pool: GpuPoolExport, now: datetime) -> str | None:
    """Why a booked pool takes no run at `now`: Compute Engine activates the reservation a
    calendar-mode booking delivers at its start and deletes it at its end (docs/capacity.md), and
    Kueue admits on quota, so a flavor with quota outside the booking would hold runs whose pods
    wait for nodes that cannot exist, instead of trying the next pools of their chains."""
    if pool.booked_from is None or pool.booked_until is None:
        return None
    if now < datetime.fromisoformat(pool.booked_from):
        return (
            f"booked from {pool.booked_from}: its quota opens at the first `pulumi up` of the platform on or after then"
        )
    if now >= datetime.fromisoformat(pool.booked_until):
        return f"whose booking ended at {pool.booked_until}: Compute Engine deleted its reservation"
    return None


def plan_flavors(pools: Sequence[GpuPoolExport], now: datetime) -> tuple[Flavor, ...]:
    """The pools' flavors as of `now`, the time of this `up`: a booked pool's quota is closed
    outside its booking, and opens at the first `up` within it."""
    return tuple(replace(plan_flavor(pool), closed=booking_closed(pool, now)) for pool in pools)
