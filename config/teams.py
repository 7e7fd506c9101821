"""`teams`: research groups sharing the GPU pools, each with a guaranteed share it lends while idle.

Each team gets a namespace, its own service accounts and claims, a LocalQueue and a ClusterQueue in
the stack's Kueue cohort (planners.teams); the platform's single queue is then not created.
"""

from __future__ import annotations

import re

from pydantic import Field, model_validator

from config.base import Model
from facts.errors import RuleError
from facts.kubernetes import Priority, dns_label_problem

# A Google group's address (GKE's Google Groups for RBAC binds a group by its email).
_GROUP = re.compile(r"^[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}$")


class TeamQuotaConfig(Model):
    """A team's guaranteed share of one GPU pool, in nodes or GPUs (whole nodes: a run takes all of
    a node's GPUs). Limits are in the same unit as the share."""

    pool: str = Field(description="A GPU pool of the stack (gpuPools[].name or existingCluster.gpuPools[].name).")
    nodes: int | None = Field(None, ge=0, le=100_000, description="Guaranteed nodes of the pool (0: borrow only).")
    gpus: int | None = Field(None, ge=0, le=1_000_000, description="Guaranteed GPUs: a whole number of nodes.")
    borrowing_limit: int | None = Field(
        None,
        ge=0,
        le=1_000_000,
        description="Most the team may borrow beyond its share from the cohort, in the share's unit: nodes where "
        "the share is `nodes`, GPUs where it is `gpus`. Unset: no limit.",
    )
    lending_limit: int | None = Field(
        None,
        ge=0,
        le=1_000_000,
        description="Most of its idle share the team lends to the cohort, in the share's unit (nodes or GPUs); the "
        "rest waits for it alone. Unset: all.",
    )

    @model_validator(mode="after")
    def _check(self) -> TeamQuotaConfig:
        if (self.nodes is None) == (self.gpus is None):
            raise RuleError("nodes", self.nodes, "set exactly one of nodes and gpus")
        share = self.share
        if self.lending_limit is not None and self.lending_limit > share:
            unit = "nodes" if self.unit == "nodes" else "GPUs"
            why = f"is in {unit}, as the share is, and must not exceed the team's share ({share} {unit})"
            raise RuleError("lendingLimit", self.lending_limit, why)
        return self

    @property
    def share(self) -> int:
        return self.nodes if self.nodes is not None else (self.gpus or 0)

    @property
    def unit(self) -> str:
        return "nodes" if self.nodes is not None else "gpus"


class TeamConfig(Model):
    """A research group: a namespace of its own, a guaranteed share of the pools it lends while idle
    and takes back (Kueue reclaims it within the cohort), and a weight for what is left over."""

    name: str = Field(description="Team name, a DNS label: names its ClusterQueue and its checkpoint folder.")
    namespace: str | None = Field(None, description="Namespace of the team's runs. Default: the team's name.")
    quota: tuple[TeamQuotaConfig, ...] = Field(
        min_length=1, description="Guaranteed share per GPU pool; the team runs only on the pools listed here."
    )
    weight: float = Field(
        1.0,
        ge=0.01,
        le=1000,
        description="Fair-sharing weight: idle capacity is shared between borrowing teams in proportion to it.",
    )
    priorities: tuple[Priority, ...] = Field(
        tuple(Priority), min_length=1, description="Priority classes the team's runs may use. Default: all."
    )
    groups: tuple[str, ...] = Field(
        (),
        description="Google groups whose members may submit and follow runs in the team's namespace (a RoleBinding "
        "of the group; on GKE the cluster needs Google Groups for RBAC, cluster.rbacSecurityGroup).",
    )

    @model_validator(mode="after")
    def _check(self) -> TeamConfig:
        problem = dns_label_problem(self.name)
        if problem:
            raise RuleError("name", self.name, problem)
        if self.namespace is not None:
            problem = dns_label_problem(self.namespace)
            if problem:
                raise RuleError("namespace", self.namespace, problem)
        pools = [q.pool for q in self.quota]
        for i, pool in enumerate(pools):
            if pools.index(pool) != i:
                raise RuleError(f"quota[{i}].pool", pool, "is listed twice; give each pool once")
        if len(set(self.priorities)) != len(self.priorities):
            raise RuleError("priorities", [p.value for p in self.priorities], "must not repeat a priority")
        for i, group in enumerate(self.groups):
            if not _GROUP.match(group):
                raise RuleError(f"groups[{i}]", group, "must be a Google group's email address")
        return self

    @property
    def namespace_name(self) -> str:
        return self.namespace or self.name
