"""A MultiKueue manager's workers, read from their stacks before anything is registered.

Each worker is an ordinary environment stack with `multiKueue.worker: true`: its `cluster`,
`platform` and `multiKueueWorker` outputs are read as plain values (stacks.upstream) and checked
(planners.multikueue); its secret `multiKueueKubeconfig` stays an Output, read through a
StackReference once the checks have passed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi

from config.loader import ConfigError
from config.stack import StackConfig
from facts import versions
from facts.errors import RuleError
from facts.project import qualified_stack_name
from planners.multikueue import ManagerPlan, Worker, WorkerOffer, plan_manager, worker_name
from stacks.contract import ClusterExports, MultiKueueWorkerExports, PlatformExports
from stacks.upstream import Upstream

WORKER_FACTS = "multiKueueWorker"
WORKER_KUBECONFIG = "multiKueueKubeconfig"
# What a run's pods name on a worker: alike on every worker of a manager (planners.multikueue).
RUN_SHAPE = (
    "serviceAccount", "dataPrepServiceAccount", "sharedClaim", "sharedMount", "experimentsDir", "dataClaim",
    "dataMount", "checkpointClaim", "checkpointMount", "supervisor", "gke", "cloudStorageFuse", "priorityClasses",
    "preflightChecks",
)  # fmt: skip


@dataclass(frozen=True)
class ManagedWorkers:
    plan: ManagerPlan
    # The first worker's platform: what the runs' pods name on every worker.
    platform: PlatformExports
    stacks: tuple[Upstream, ...]

    def kubeconfigs(self) -> dict[str, pulumi.Output[Any]]:
        """Each worker's kubeconfig for the manager, by worker name (registers a StackReference each)."""
        return {w.name: s.secret(WORKER_KUBECONFIG) for w, s in zip(self.plan.workers, self.stacks, strict=True)}


def manager_queues(cfg: StackConfig) -> dict[str, str]:
    """The namespaces the manager queues runs in, and the LocalQueue of each."""
    namespaces = [t.namespace_name for t in cfg.teams] or [cfg.namespace]
    return dict.fromkeys(namespaces, cfg.kueue.local_queue)


def read_workers(cfg: StackConfig) -> ManagedWorkers:
    offers: list[WorkerOffer] = []
    stacks: list[Upstream] = []
    platforms: list[PlatformExports] = []
    for i, reference in enumerate(cfg.multi_kueue.workers):
        key = f"multiKueue.workers[{i}]"
        stack = Upstream(qualified_stack_name(reference), key=key)
        if not stack.has(WORKER_FACTS):
            why = "is not a MultiKueue worker: set multiKueue.worker: true in that stack and `pulumi up` it first"
            raise ConfigError.of([RuleError(key, reference, why)])
        cluster = stack.facts("cluster", ClusterExports)
        platform = stack.facts("platform", PlatformExports)
        facts = stack.facts(WORKER_FACTS, MultiKueueWorkerExports)
        plain = platform.to_plain()
        worker = Worker(
            name=worker_name(stack.name),
            stack=stack.name,
            region=facts.region,
            gke=cluster.gke,
            gpu_networks=cluster.gpu_networks,
            pools=cluster.gpu_pools,
            flavors=platform.flavors,
            data_bucket=facts.data_bucket,
            checkpoint_bucket=facts.checkpoint_bucket,
        )
        offers.append(
            WorkerOffer(
                key=key,
                worker=worker,
                kueue_version=facts.kueue_version,
                jobset_version=facts.jobset_version,
                namespaces=facts.namespaces,
                local_queue=facts.local_queue,
                run_shape={field: plain[field] for field in RUN_SHAPE},
                control_plane_ranges=facts.control_plane_ranges,
            )
        )
        stacks.append(stack)
        platforms.append(platform)
    try:
        plan = plan_manager(
            offers,
            kueue_version=versions.KUEUE.version,
            jobset_version=versions.JOBSET.version,
            queues=manager_queues(cfg),
            egress=cfg.multi_kueue.egress_ranges,
            dispatch=cfg.multi_kueue.dispatch,
        )
    except RuleError as error:
        raise ConfigError.of([error]) from None
    return ManagedWorkers(plan, platforms[0], tuple(stacks))
