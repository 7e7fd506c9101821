"""What a training run executes: the launcher, its environment and the run's ConfigMap, around
the configuration of its runtime (planners.runtimes: NeMo 1, NeMo 2, Megatron-Bridge).
The scripts the pods run live in `payload`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import payload
from facts import resiliency
from facts.errors import RuleError
from facts.kubernetes import (
    COMPLETION_INDEX_ANNOTATION,
    JOBSET_NAME_LABEL,
    RESTART_ATTEMPT_LABEL,
    RUN_REPLICATED_JOB,
    TRAINING_CONTAINER,
)
from facts.machines import MachineType
from facts.models import StepTime
from planners import layout
from planners.checkpoints import CheckpointCost, checkpoint_advice, checkpoint_cost
from planners.gpudirect import PodNetworking, node_checks
from planners.runs import RunSpec, published_step, run_advice
from planners.runtimes import runtime_of
from planners.workload import DLLOGGER, LAUNCHER, NCCL_INIT, OFFLINE_ENV, RunPaths

PREPROCESS_SCRIPT = "/opt/NeMo/scripts/nlp_language_modeling/preprocess_data_for_megatron.py"

MASTER_PORT = 6002
# Set from the pod's own metadata (downward API), before every other variable so that those can
# refer to them as $(NAME): the JobSet's name (the run's name and a digest of its definition),
# the node rank and the restart attempt.
FIELD_ENV = {
    "JOBSET_NAME": f"metadata.labels['{JOBSET_NAME_LABEL}']",
    "JOB_COMPLETION_INDEX": f"metadata.annotations['{COMPLETION_INDEX_ANNOTATION}']",
    "JOBSET_RESTART_ATTEMPT": f"metadata.labels['{RESTART_ATTEMPT_LABEL}']",
}


def workload_files(run: RunSpec, paths: RunPaths, machine: MachineType) -> dict[str, str]:
    """The run's ConfigMap: the launcher and the configuration of its runtime."""
    files = {name: payload.text(name) for name in (LAUNCHER, NCCL_INIT, DLLOGGER)}
    return files | runtime_of(run.recipe).files(run, paths, machine)


def launcher_env(run: RunSpec, paths: RunPaths) -> dict[str, str]:
    """Environment the launcher reads (see scripts/launch.sh)."""
    runtime = runtime_of(run.recipe)
    env = {
        "RUN_NAME": run.name,
        "NEMO_ENTRYPOINT": runtime.entrypoint[0],
        "EXPERIMENT_DIR": paths.experiment_dir,
        "CHECKPOINT_DIR": paths.checkpoint_dir or "",
        "OMP_NUM_THREADS": "12",
        "GLOO_SOCKET_IFNAME": "eth0",
    }
    if runtime.settings_file:
        env["NEMO_RUN_SETTINGS"] = runtime.settings_file
    if runtime.preflight_flag:
        env["NEMO_PREFLIGHT"] = runtime.preflight_flag
    env.update(OFFLINE_ENV)
    if paths.dataset_source is not None and paths.dataset_prefix is not None:
        env.update(DATASET_SOURCE=paths.dataset_source, DATASET_TARGET=paths.dataset_prefix)
    if run.profile is not None:
        env["NSYS_START_STEP"] = str(run.profile.start_step)
    env.update(resiliency_env(run))
    return env


def perf_env(run: RunSpec, machine: MachineType) -> dict[str, str]:
    """What NVIDIA's performance scripts set for the run's model, by its runtime."""
    return runtime_of(run.recipe).perf_env(run, machine)


class Launcher:
    """How launch.sh starts the node's workers (RUN_LAUNCHER)."""

    TORCHRUN = "torchrun"
    # NVRx's ft_launcher: rank heartbeats and in-job restarts.
    FAULT_TOLERANT = "ft"
    # The resiliency recipe's launcher, reporting to the supervisor's host daemon.
    SUPERVISED = "supervisor"


def resiliency_env(run: RunSpec) -> dict[str, str]:
    """What launch.sh needs to start the run's launcher (the resiliency recipe's launcher
    variables: gpu-recipes src/launchers/grl-nemo-20-launcher-a3u.sh). Workload scaling stays off: the NeMo script keeps
    its data-parallel size, so every replica of the run is always needed."""
    r = run.resiliency
    if not r.heartbeats:
        return {}
    env = {
        "RUN_LAUNCHER": Launcher.SUPERVISED if r.supervisor else Launcher.FAULT_TOLERANT,
        "FT_PARAM_INITIAL_RANK_HEARTBEAT_TIMEOUT": str(r.initial_heartbeat_timeout_seconds),
        "FT_PARAM_RANK_HEARTBEAT_TIMEOUT": str(r.heartbeat_timeout_seconds),
        "MAX_IN_JOB_RESTARTS": str(r.in_job_restarts),
    }
    if r.supervisor:
        env.update(
            RESILIENCY_LAUNCHER=resiliency.RESILIENCY_LAUNCHER,
            HOST_DAEMON_PORT=str(resiliency.HOST_DAEMON_PORT),
            MAX_WORKLOAD_RESTARTS=str(r.workload_restarts),
            CONTAINER_TERMINATION_THRESHOLD_S=str(resiliency.CONTAINER_TERMINATION_THRESHOLD_SECONDS),
            WORKLOAD_DOWNTIME_THRESHOLD_S=str(resiliency.WORKLOAD_DOWNTIME_THRESHOLD_SECONDS),
            REPLICATED_JOB_NAME=RUN_REPLICATED_JOB,
            WORKLOAD_CONTAINER_NAME=TRAINING_CONTAINER,
        )
    return env


def preprocess_command(
    input_path: str, output_prefix: str, json_key: str, tokenizer: dict[str, Any], workers: int
) -> list[str]:
    """NeMo's Megatron preprocessing: JSONL to <prefix>_<key>_document.bin/.idx."""
    command = [
        "python3",
        PREPROCESS_SCRIPT,
        f"--input={input_path}",
        f"--json-keys={json_key}",
        f"--tokenizer-library={tokenizer['library']}",
        f"--output-prefix={output_prefix}",
        "--dataset-impl=mmap",
        "--append-eod",
        f"--workers={workers}",
    ]
    if tokenizer["library"] == "sentencepiece":
        command.append(f"--tokenizer-model={tokenizer['model']}")
    else:
        command.append(f"--tokenizer-type={tokenizer['type']}")
    if tokenizer["vocab_file"]:
        command += [f"--vocab-file={tokenizer['vocab_file']}", f"--merge-file={tokenizer['merge_file']}"]
    return command


def with_nccl_init(
    env: Mapping[str, str], machine: MachineType, networking: PodNetworking, own: Iterable[str] = ()
) -> dict[str, str]:
    """`env` with the pod's GPUDirect environment. Where the stack brings an NCCL init script,
    the machine's own NCCL settings join in, and every NCCL variable set here or named in `own`
    (a run's own env) is named to keep its value over what the script sets
    (NCCL_KEEP_AFTER_INIT, read by payload/nccl_init.sh), as the recipes export theirs after
    sourcing it."""
    if not networking.nccl_init_script:
        return {**env, **networking.env}
    merged = {**env, **networking.env, **machine.nccl_env}
    kept = sorted({name for name in (*merged, *own) if name.startswith("NCCL_")})
    return {**merged, "NCCL_INIT_SCRIPT": networking.nccl_init_script, "NCCL_KEEP_AFTER_INIT": " ".join(kept)}


def platform_env(run: RunSpec, machine: MachineType, networking: PodNetworking, paths: RunPaths) -> dict[str, str]:
    """Every variable the platform sets in the training container (FIELD_ENV aside): the
    launcher's, what the flavour's reference recipe tunes (which the model's performance settings
    replace), the model's performance settings, then the machine's NCCL environment (which wins
    where both tune NCCL, with_nccl_init), and torchrun's rendezvous."""
    numa = {"GPUS_PER_NUMA_NODE": str(machine.gpus_per_numa_node)} if machine.gpus_per_numa_node else {}
    return {
        **with_nccl_init(
            {**launcher_env(run, paths), **networking.recipe_env, **perf_env(run, machine), **numa},
            machine,
            networking,
            own=run.env,
        ),
        "NNODES": str(run.nodes),
        "GPUS_PER_NODE": str(machine.gpus),
        # The first pod, by the stable hostname JobSet gives it; Kubernetes expands $(JOBSET_NAME).
        "MASTER_ADDR": f"$(JOBSET_NAME)-{RUN_REPLICATED_JOB}-0-0.$(JOBSET_NAME)",
        "MASTER_PORT": str(MASTER_PORT),
    }


def check_env(run: RunSpec, platform: Mapping[str, str]) -> None:
    """A run's `env` may replace what the platform sets only where `allowEnvOverrides` says so:
    a stray NNODES or NCCL_* variable would silently break the rendezvous or the tuned network."""
    for key in run.env:
        if (key in platform or key in FIELD_ENV) and key not in run.allow_env_overrides:
            set_to = platform.get(key, "from the pod's metadata")
            raise RuleError(
                f"env.{key}", key, f"is set by the platform ({set_to}); list it in allowEnvOverrides to replace it"
            )


@dataclass(frozen=True)
class RunPlan:
    """A run decided once, before anything is registered: the machine it runs on, its pods'
    networking, where it reads and writes, the files of its ConfigMap, the environment the
    platform gives its training container, what torchrun starts, whether its launcher checks its
    configuration first, and the advice it gets. The config check, the summary, the training
    layer and the component read it; none decides again."""

    run: RunSpec
    machine: MachineType
    networking: PodNetworking
    paths: RunPaths
    files: Mapping[str, str]
    env: Mapping[str, str]
    entrypoint: tuple[str, tuple[str, ...]]
    # The launcher builds and validates the configuration first (its runtime's preflight flag),
    # so a refused one fails the run instead of restarting it (facts.kubernetes.PROGRAM_ERROR_EXIT_CODE).
    preflight: bool
    # What the run is predicted to take: the model's published step time at the run's exact
    # layout on its machine (None: none published, or the run names its own image), and what its
    # checkpoints cost (None: it saves none).
    step: StepTime | None
    checkpoints: CheckpointCost | None
    advice: tuple[str, ...]
    # The layout planner's step time for the run's layout (planners.layout; None: a machine
    # outside the catalog): what `python -m analysis metrics --plan` holds the run to.
    predicted_step_seconds: float | None = None
    # NVSentinel's preflight checks of the node at every start of the run's pods (the platform's
    # nvsentinel.preflight, less those its networking cannot pass: planners.gpudirect.node_checks);
    # None: the platform asks for none.
    node_checks: tuple[str, ...] | None = None

    @property
    def expected_step_seconds(self) -> float | None:
        """What the go/no-go prices a step at and the slow-run alert holds it to."""
        return layout.held_to(self.step, self.predicted_step_seconds)

    def to_plain(self) -> dict[str, Any]:
        """What a user reads of the plan (the stack output `training.runs.<run>.plan`)."""
        run, s, saving = self.run, self.run.settings, self.checkpoints
        return {
            "model": run.model,
            "runtime": run.recipe.framework.label,
            # As published; pods of a cluster with an image mirror pull it through the mirror.
            "publishedImage": run.image_ref,
            "pool": run.pool,
            "machine": self.machine.name,
            "nodes": run.nodes,
            "gpus": run.nodes * self.machine.gpus,
            "layout": {
                "tensorParallel": s.tensor_parallel,
                "pipelineParallel": s.pipeline_parallel,
                "virtualPipeline": s.virtual_pipeline,
                "contextParallel": s.context_parallel,
                "expertParallel": s.expert_parallel,
                "recomputeLayers": s.recompute_layers,
            },
            "microBatchSize": s.micro_batch_size,
            "globalBatchSize": s.global_batch_size,
            "sequenceLength": s.sequence_length,
            "precision": f"fp8 ({run.recipe.fp8_scaling.value} scaling)" if s.fp8 else "bf16",
            "steps": s.steps,
            "publishedStepTimeS": self.step.seconds if self.step else None,
            "predictedStepTimeS": (
                round(self.predicted_step_seconds, 3) if self.predicted_step_seconds is not None else None
            ),
            "checkpoint": (
                {
                    "intervalSteps": run.checkpoint_interval_steps,
                    "resume": run.resume,
                    "dir": self.paths.checkpoint_dir,
                    "saves": saving.saves,
                    "inBackground": saving.asynchronous,
                }
                if saving
                else None
            ),
            "maxRestarts": run.max_restarts,
            "entrypoint": " ".join((self.entrypoint[0], *self.entrypoint[1])),
            "checksConfigurationFirst": self.preflight,
            "nodeChecksAtStart": list(self.node_checks or ()),
        }


def plan_run(
    run: RunSpec,
    machine: MachineType,
    networking: PodNetworking,
    paths: RunPaths,
    preflight_checks: tuple[str, ...] = (),
) -> RunPlan:
    """The run's plan; RuleError (key relative to the run) where its `env` replaces what the
    platform sets without leave (check_env). `preflight_checks`: the platform's (none: no preflight)."""
    env = platform_env(run, machine, networking, paths)
    check_env(run, env)
    runtime = runtime_of(run.recipe)
    step, saving = published_step(run, machine.name), checkpoint_cost(run)
    checks, left_out = node_checks(preflight_checks, networking)
    return RunPlan(
        run=run,
        machine=machine,
        networking=networking,
        paths=paths,
        files=MappingProxyType(workload_files(run, paths, machine)),
        env=MappingProxyType(env),
        entrypoint=runtime.entrypoint,
        preflight=runtime.preflight_flag is not None,
        step=step,
        checkpoints=saving,
        advice=(
            *run_advice(run, machine),
            *checkpoint_advice(run, saving, step.seconds if step else None),
            *((f"run {run.name} on {machine.name}: {left_out}",) if left_out else ()),
        ),
        predicted_step_seconds=layout.predicted_step_seconds(run, machine),
        node_checks=checks,
    )
