"""Teams as Kueue sees them: one ClusterQueue per team in one cohort, each with its guaranteed share
of the pools' flavors as nominal quota, and the capacity no team is guaranteed held by the cohort
itself, so every team may borrow it and none owns it.

A team gets its share back: a run that fits within its ClusterQueue's nominal quota preempts
borrowers of any priority (`reclaimWithinCohort: Any` under fair sharing, with Kueue's
FairSharingPreemptWithinNominal, beta and on by default from 0.17: pkg/features/kube_features.go,
pkg/scheduler/preemption/preemption.go at the pinned version). Beyond its share, a team competes
by weighted share: idle capacity goes to the borrowing team of the lowest share, and a team above
its fair share may be preempted for one below it (the Configuration's `fairSharing`).
`borrowWithinCohort` stays Never, the only value Kueue allows with fair sharing
(apis/kueue/v1beta2/clusterqueue_types.go, BorrowWithinCohort).

Shares are in whole nodes: a run takes every GPU of its nodes, so a share of part of a node could
admit nothing; CPU, memory and IMEX channels follow the GPUs node by node.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from facts.errors import RuleError
from facts.kubernetes import GPU_RESOURCE, IMEX_CHANNEL_RESOURCE, cpu_quantity, mib_quantity
from planners.queues import Flavor


@dataclass(frozen=True)
class ShareRequest:
    """A share of a pool as the config states it (config.teams.TeamQuotaConfig)."""

    pool: str
    # "nodes" or "gpus": the unit of the amount and of both limits.
    unit: str
    amount: int
    borrowing_limit: int | None = None
    lending_limit: int | None = None


@dataclass(frozen=True)
class TeamRequest:
    """A team as the config states it (config.teams.TeamConfig)."""

    name: str
    namespace: str
    shares: tuple[ShareRequest, ...]
    weight: float
    priorities: tuple[str, ...]
    groups: tuple[str, ...] = ()


@dataclass(frozen=True)
class TeamQuota:
    """A team's share of one flavor, in nodes; None: no limit."""

    flavor: str
    pool: str
    nodes: int
    borrowing_nodes: int | None = None
    lending_nodes: int | None = None


@dataclass(frozen=True)
class Team:
    """A team as the platform creates it and a run stack reads it back (stacks.contract)."""

    name: str
    namespace: str
    cluster_queue: str
    local_queue: str
    quotas: tuple[TeamQuota, ...]
    # Kueue's fairSharing.weight, a Quantity.
    weight: str
    priorities: tuple[str, ...]
    groups: tuple[str, ...] = ()

    @property
    def pools(self) -> tuple[str, ...]:
        return tuple(q.pool for q in self.quotas)


@dataclass(frozen=True)
class TeamsPlan:
    cohort: str
    teams: tuple[Team, ...]
    # Nodes of each flavor no team is guaranteed: the cohort's own quota, borrowable by all.
    unassigned: tuple[tuple[str, int], ...]


def _per_node(flavor: Flavor) -> dict[str, int]:
    nodes = max(flavor.nodes, 1)
    return {
        GPU_RESOURCE: flavor.gpus // nodes,
        "cpu": flavor.cpu_millicores // nodes,
        "memory": flavor.memory_mib // nodes,
        IMEX_CHANNEL_RESOURCE: flavor.imex_channels // nodes,
    }


def _quantity(resource: str, amount: int) -> str:
    if resource == "cpu":
        return cpu_quantity(amount)
    if resource == "memory":
        return mib_quantity(amount)
    return str(amount)


def covered_resources(flavors: Sequence[Flavor]) -> list[str]:
    """What the queues cover: GPUs, CPU and memory, and IMEX channels where a pool's NVLink spans
    nodes (components.scheduling.cluster_queue_spec)."""
    channels = any(f.imex_channels for f in flavors)
    return [GPU_RESOURCE, "cpu", "memory", *([IMEX_CHANNEL_RESOURCE] if channels else [])]


def flavor_quota(
    flavor: Flavor,
    resources: Sequence[str],
    nodes: int,
    borrowing_nodes: int | None = None,
    lending_nodes: int | None = None,
) -> dict[str, Any]:
    """One flavor's entry in a queue's resource group: `nodes` of it as nominal quota, limits
    likewise, every resource of a node counted; none of a closed flavor (Flavor.closed), whose
    lending limit may not exceed it."""
    per_node = _per_node(flavor)
    if flavor.closed is not None:
        nodes, lending_nodes = 0, None if lending_nodes is None else 0
    entries = []
    for resource in resources:
        entry = {"name": resource, "nominalQuota": _quantity(resource, per_node[resource] * nodes)}
        if borrowing_nodes is not None:
            entry["borrowingLimit"] = _quantity(resource, per_node[resource] * borrowing_nodes)
        if lending_nodes is not None:
            entry["lendingLimit"] = _quantity(resource, per_node[resource] * lending_nodes)
        entries.append(entry)
    return {"name": flavor.name, "resources": entries}


def _weight(value: float) -> str:
    return format(value, "g")


def _nodes(key: str, amount: int, unit: str, flavor: Flavor) -> int:
    if unit == "nodes":
        return amount
    gpus_per_node = _per_node(flavor)[GPU_RESOURCE]
    if amount % gpus_per_node:
        raise RuleError(
            key,
            amount,
            f"is not a whole number of {flavor.pool}'s nodes: a run takes all {gpus_per_node} GPUs of a node, so "
            f"use a multiple of {gpus_per_node}",
        )
    return amount // gpus_per_node


def plan_team(index: int, team: TeamRequest, flavors: dict[str, Flavor], local_queue: str) -> Team:
    quotas = []
    for j, quota in enumerate(team.shares):
        key = f"teams[{index}].quota[{j}]"
        flavor = flavors.get(quota.pool)
        if flavor is None:
            raise RuleError(f"{key}.pool", quota.pool, f"is not a GPU pool of the stack ({', '.join(flavors)})")
        quotas.append(
            TeamQuota(
                flavor=flavor.name,
                pool=flavor.pool,
                nodes=_nodes(f"{key}.{quota.unit}", quota.amount, quota.unit, flavor),
                borrowing_nodes=None
                if quota.borrowing_limit is None
                else _nodes(f"{key}.borrowingLimit", quota.borrowing_limit, quota.unit, flavor),
                lending_nodes=None
                if quota.lending_limit is None
                else _nodes(f"{key}.lendingLimit", quota.lending_limit, quota.unit, flavor),
            )
        )
    return Team(
        name=team.name,
        namespace=team.namespace,
        cluster_queue=team.name,
        local_queue=local_queue,
        quotas=tuple(quotas),
        weight=_weight(team.weight),
        priorities=team.priorities,
        groups=team.groups,
    )


def plan_teams(
    teams: Sequence[TeamRequest],
    flavors: Sequence[Flavor],
    *,
    cohort: str,
    local_queue: str,
    overcommit: bool,
) -> TeamsPlan:
    """The teams' queues, checked against the pools before anything is registered: every pool
    known, shares in whole nodes, and guarantees within each pool's nodes unless `overcommit`
    (then Kueue admits in order, and a team may find its share held by another's guarantee)."""
    by_pool = {f.pool: f for f in flavors}
    plans = [plan_team(i, team, by_pool, local_queue) for i, team in enumerate(teams)]
    unassigned = []
    for flavor in flavors:
        guaranteed = sum(q.nodes for t in plans for q in t.quotas if q.pool == flavor.pool)
        if guaranteed > flavor.nodes and not overcommit:
            shares = ", ".join(f"{t.name} {q.nodes}" for t in plans for q in t.quotas if q.pool == flavor.pool)
            raise RuleError(
                "teams",
                None,
                f"guarantee {guaranteed} nodes of pool {flavor.pool}, which holds {flavor.nodes} ({shares}): over by "
                f"{guaranteed - flavor.nodes}; lower the shares, or set kueue.overcommit: true to promise more than "
                "there is",
            )
        unassigned.append((flavor.name, max(flavor.nodes - guaranteed, 0)))
    return TeamsPlan(cohort=cohort, teams=tuple(plans), unassigned=tuple(unassigned))
