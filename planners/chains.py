"""A run's capacity chain: the pools it may run on, in order (its `pool`, then its
`fallbackPools`), as Kueue's flavors.

Kueue tries a ClusterQueue's flavors in the order the queue lists them and admits a workload on
the first whose quota it fits; it assigns a podset only flavors whose node labels match the pods'
node selector and affinity, and then adds the chosen flavor's labels to the pods' selector
(kubernetes-sigs/kueue apis/kueue/v1beta2 ResourceFlavorSpec.nodeLabels, ClusterQueueSpec.
flavorFungibility at v0.19.2). Where a flavor has no room and admitting would mean preempting,
`whenCanPreempt: TryNextFlavor` (the default) tries the next flavor first. So a run's pods that
allow every pool of its chain (node affinity over the pools' names) are admitted on the first
pool of the chain with room, in the queue's order, which is the order of `gpuPools` (the platform
layer's flavors): a chain follows it.

The same pod spec must be valid on every pool of the chain: one machine type (one GPUDirect stack,
one image, the same GPU networks) and one kind of placement.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from facts.errors import RuleError
from facts.gke import CapacityType
from facts.kubernetes import NODE_POOL_LABEL
from planners.pools import GpuPoolExport
from planners.queues import Flavor
from planners.runs import RunSpec


def check_chain(
    run: RunSpec,
    flavors: Mapping[str, Flavor],
    queue_order: Sequence[str],
    capacity: Mapping[str, CapacityType],
    *,
    team: str | None = None,
    dispatched: bool = False,
) -> None:
    """Raise RuleError (key relative to the run) where the run's chain cannot work: an unknown or
    repeated pool (for a team's run, one outside its share), another machine or placement, an
    order its queue (`queue_order`: the platform's flavors, or its team's) does not try, Spot
    without checkpoints, or a dispatched run (its workers' pools are its chain)."""
    chain = run.chain
    if len(chain) == 1:
        return
    if dispatched:
        raise RuleError(
            "fallbackPools", list(run.fallback_pools), "not on a MultiKueue manager: its workers' pools are its chain"
        )
    first = flavors[run.pool]
    for i, pool in enumerate(run.fallback_pools):
        key = f"fallbackPools[{i}]"
        if pool not in flavors:
            raise RuleError(key, pool, f"is not a GPU pool of the platform; known: {', '.join(flavors)}")
        if team is not None and pool not in queue_order:
            share = ", ".join(queue_order)
            raise RuleError(key, pool, f"is not a pool of team {team}'s quota ({share}): a team runs on those only")
        if pool in chain[: i + 1]:
            raise RuleError(key, pool, "is already in the run's chain")
        flavor = flavors[pool]
        if flavor.selector != {NODE_POOL_LABEL: pool} or first.selector != {NODE_POOL_LABEL: run.pool}:
            raise RuleError(
                key, pool, "is an existing cluster's pool, selected by its own labels: chains join GKE pools"
            )
        if flavor.machine != first.machine:
            why = f"is {flavor.machine.name}, and {run.pool} is {first.machine.name}: a chain keeps one machine type"
            raise RuleError(key, pool, why)
        if flavor.topology != first.topology:
            placed = run.pool if first.topology else pool
            raise RuleError(
                key,
                pool,
                f"is placed {_by(flavor)}, and {run.pool} {_by(first)}: a chain keeps one (Kueue admits a run that "
                f"asks for a topology only on a pool placed by one, and one that asks for none only on a pool "
                f"without); set placeByTopology: false on pool {placed} to place its runs by quota alone",
            )
        if first.machine.nvlink_across_nodes:
            raise RuleError(key, pool, f"a {first.machine.name} run is one NVLink domain, on one pool")
        if capacity.get(pool) is CapacityType.SPOT and not run.checkpoint:
            raise RuleError("checkpoint.enabled", False, f"must be true with a Spot pool ({pool}) in the chain")
    position = {pool: i for i, pool in enumerate(queue_order)}
    if [position[p] for p in chain] != sorted(position[p] for p in chain):
        order = ", ".join(p for p in queue_order if p in chain)
        where = f"team {team}'s quota" if team is not None else "gpuPools"
        raise RuleError(
            "fallbackPools",
            list(run.fallback_pools),
            f"Kueue tries the pools in the order of {where} ({order}): list them so, with `pool` first",
        )


def chain_advice(run: RunSpec, pools: Mapping[str, GpuPoolExport], flavors: Mapping[str, Flavor]) -> tuple[str, ...]:
    """A Spot pool before the end of a chain not placed by topology: Kueue sees a reclaim's lost
    nodes only in a topology placement (it then evicts the run, which is admitted on the next
    pool: tests/integration/test_lane_chains.py), so such a run waits on the Spot pool instead. A
    booked pool whose quota is closed as of the platform's `up` (planners.queues.booking_closed):
    Kueue skips it, and it takes runs from the first `up` within its booking."""
    reclaimed = tuple(
        f"run {run.name}: when GKE reclaims pool {name}'s Spot VMs the run does not move to "
        f"{', '.join(run.chain[i + 1 :])}: Kueue sees a run's lost nodes only where its pools are placed by "
        f"topology, and {name} {pools[name].topology_problem}; the run waits on {name} for new VMs, evicted "
        "and admitted there again by Kueue's waitForPodsReady until its requeueLimit deactivates it"
        for i, name in enumerate(run.chain[:-1])
        if name in pools and pools[name].capacity_type is CapacityType.SPOT and pools[name].topology_problem is not None
    )
    closed = []
    for name in run.chain:
        flavor = flavors.get(name)
        if flavor is None or flavor.closed is None:
            continue
        others = [p for p in run.chain if p != name and (p not in flavors or flavors[p].closed is None)]
        meanwhile = f"Kueue admits the run on {', '.join(others)}" if others else "no pool of the run's chain takes it"
        closed.append(
            f"run {run.name}: pool {name} takes no run as of the platform's `up`, {flavor.closed}; {meanwhile}"
        )
    return reclaimed + tuple(closed)


def _by(flavor: Flavor) -> str:
    return "by topology" if flavor.topology else "without topology"


def pool_affinity(pools: Sequence[str]) -> dict[str, object]:
    """Node affinity that allows the pools' nodes only, for a chain of more than one pool."""
    expression = {"key": NODE_POOL_LABEL, "operator": "In", "values": list(pools)}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [expression]}
    ]}}}  # fmt: skip
