"""Kueue's view of the GPU pools: one ResourceFlavor per pool, and its quota in the ClusterQueue.

Quotas are computed here, once, from the pools' allocatable capacity: the ClusterQueue is
built from them and runs are checked against them, in this stack or in a later one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from facts.kubernetes import ACCELERATOR_LABEL, GPU_TAINT, QUEUED_TAINT, node_pool_selector
from facts.machines import MachineType, allocatable_memory_mib, allocatable_millicores, machine_type
from planners.pools import PoolFacts


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
    # Why a run asking for topology cannot have it on this pool (planners.pools.PoolFacts).
    topology_problem: str | None
    # Nodes come from queued provisioning: admission waits for a ProvisioningRequest.
    queued: bool

    @property
    def machine(self) -> MachineType:
        return machine_type(self.machine_type)

    @property
    def node_labels(self) -> dict[str, str]:
        return {ACCELERATOR_LABEL: self.machine.gke_accelerator, **node_pool_selector(self.pool)}

    @property
    def tolerations(self) -> list[dict[str, str]]:
        taints = [GPU_TAINT, QUEUED_TAINT] if self.queued else [GPU_TAINT]
        return [taint.toleration() for taint in taints]


def plan_flavor(pool: PoolFacts) -> Flavor:
    machine = pool.machine
    return Flavor(
        name=pool.name,
        pool=pool.name,
        machine_type=pool.machine_type,
        nodes=pool.max_nodes,
        gpus=machine.gpus * pool.max_nodes,
        cpu_millicores=allocatable_millicores(machine.vcpus) * pool.max_nodes,
        memory_mib=allocatable_memory_mib(machine.memory_gib) * pool.max_nodes,
        topology=pool.topology_problem is None,
        topology_problem=pool.topology_problem,
        queued=pool.queued,
    )


def plan_flavors(pools: Sequence[PoolFacts]) -> tuple[Flavor, ...]:
    return tuple(plan_flavor(pool) for pool in pools)
