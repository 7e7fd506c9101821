"""Training layer: the stack's pretraining runs (one JobSet each) and data-preparation Jobs.

Runs are checked against the platform's facts (pools, quotas, topology) before anything is
created, whether those facts come from this stack's config or from an upstream stack.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi

from components import nemo
from components.catalog import machine_type
from components.gpudirect import pod_networking
from components.training import DataPreparation, DataPreparationArgs, TrainingRun, TrainingRunArgs, Volumes
from stacks.cluster import ClusterOutputs
from stacks.config import ConfigError, ConfigIssue, RunTarget, StackConfig, training_errors
from stacks.platform import PlatformFacts, PlatformOutputs


def run_targets(platform: PlatformFacts) -> dict[str, RunTarget]:
    """The GPU pools as runs see them, from the platform's flavors and quotas."""
    return {
        f.pool: RunTarget(
            pool=f.pool,
            machine=machine_type(f.machine_type),
            max_nodes=f.nodes,
            topology=f.topology,
            gpu_quota=f.gpus,
            cpu_quota_millicores=f.cpu_millicores,
            memory_quota_mib=f.memory_mib,
        )
        for f in platform.flavors
    }


def check_runs(cfg: StackConfig, platform: PlatformFacts) -> None:
    """Every run and data-prep job against the environment it targets; called before
    anything is registered."""
    errors = training_errors(cfg.training, run_targets(platform), platform.flavors[0].pool)
    if errors:
        raise ConfigError([ConfigIssue(key=e.key, value=e.value, message=str(e)) for e in errors])


@dataclass(frozen=True)
class TrainingLayerArgs:
    config: StackConfig
    cluster: ClusterOutputs
    platform: PlatformOutputs


class TrainingLayer(pulumi.ComponentResource):
    runs: list[TrainingRun]

    def __init__(self, name: str, args: TrainingLayerArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("nemo:training:TrainingLayer", name, None, opts)
        cfg, cluster, platform = args.config, args.cluster, args.platform.facts
        child = pulumi.ResourceOptions(parent=self)
        targets = run_targets(platform)
        default_pool = platform.flavors[0].pool
        volumes = Volumes(
            shared_claim=platform.shared_claim,
            shared_mount=platform.shared_mount,
            data_claim=platform.data_claim,
            data_mount=platform.data_mount,
            checkpoint_claim=platform.checkpoint_claim,
            checkpoint_mount=platform.checkpoint_mount,
        )
        after = args.platform.run_dependencies
        self.runs = []
        for run in cfg.training.runs:
            target = targets[run.pool or default_pool]
            machine = target.machine
            self.runs.append(
                TrainingRun(
                    f"{name}-{run.name}",
                    TrainingRunArgs(
                        run=run,
                        machine=machine,
                        namespace=platform.namespace,
                        local_queue=platform.local_queue,
                        service_account=platform.service_account,
                        networking=pod_networking(machine.gpudirect, cluster.facts.gpu_networks, machine.gpus),
                        paths=nemo.run_paths(
                            run, platform.experiments_dir, platform.checkpoint_mount, platform.data_mount
                        ),
                        volumes=volumes,
                        pool_topology=target.topology,
                        after=after,
                    ),
                    opts=child,
                )
            )
        for job in cfg.training.data_prep:
            DataPreparation(
                f"{name}-{job.name}",
                DataPreparationArgs(
                    job=job,
                    machine=targets[job.pool or default_pool].machine,
                    namespace=platform.namespace,
                    local_queue=platform.local_queue,
                    service_account=platform.data_prep_service_account,
                    volumes=volumes,
                    after=after,
                ),
                opts=child,
            )
        self.register_outputs({})


def build(
    cfg: StackConfig, cluster: ClusterOutputs, platform: PlatformOutputs, opts: pulumi.ResourceOptions
) -> dict[str, Any]:
    layer = TrainingLayer(
        "training",
        TrainingLayerArgs(config=cfg, cluster=cluster, platform=platform),
        opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(providers={"kubernetes": cluster.provider})),
    )
    namespace = platform.facts.namespace
    return {
        "training": {
            "runs": {
                run.jobset_name: {
                    "logDir": run.log_dir,
                    "follow": f"kubectl -n {namespace} logs -f -l nemo-gke/run={run.jobset_name} "
                    "-c nemo --max-log-requests 64",
                }
                for run in layer.runs
            },
            "queue": f"kubectl -n {namespace} get jobsets,workloads",
        }
    }
