"""The training layer's keys: `training.runs` and `training.dataPrep`."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, model_validator

from config.base import Model, check_name, to_snake
from facts import resiliency
from facts.errors import RuleError
from facts.kubernetes import (
    FIRST_REVISION,
    MAX_ENV_STRING_BYTES,
    MAX_REVISION,
    MAX_RUN_NAME,
    MAX_RUN_NODES,
    Priority,
    TopologyLevel,
    env_string_bytes,
)
from facts.kueue import MAX_FLAVORS_PER_GROUP
from facts.models import MODELS, ModelSpec, RunSettings, model_spec

_OVERRIDE_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_IMAGE = re.compile(r"^[a-z0-9.-]+(:[0-9]+)?/[a-z0-9._/-]+(:[A-Za-z0-9._-]+|@sha256:[0-9a-f]{64})$")


def _check_relative(key: str, value: str) -> None:
    if value.startswith("/") or ".." in value.split("/"):
        raise RuleError(key, value, "must be a relative path inside the data bucket")


class ProfileWindow(Model):
    """Nsight Systems capture between two steps (rank 0 of each node)."""

    start_step: int = Field(ge=0, description="First profiled step.")
    end_step: int = Field(ge=1, description="Last profiled step.")

    @model_validator(mode="after")
    def _check(self) -> ProfileWindow:
        if self.end_step <= self.start_step:
            raise RuleError("endStep", self.end_step, f"must be after startStep ({self.start_step})")
        return self


class DatasetConfig(Model):
    source: Literal["mock", "gcs"] = Field("mock", description="NeMo's mock data, or Megatron .bin/.idx files.")
    prefix: str | None = Field(
        None,
        description="`gcs`: path inside the data bucket of the files, without .bin/.idx "
        "(e.g. datasets/wiki/wiki_text_document).",
    )
    copy_to_local_ssd: bool = Field(
        True, description="`gcs`: copy the files to local SSD before training instead of reading through FUSE."
    )

    @model_validator(mode="after")
    def _check(self) -> DatasetConfig:
        if self.source == "gcs" and not self.prefix:
            raise RuleError("prefix", None, "is required when source is 'gcs'")
        if self.source == "mock" and self.prefix is not None:
            raise RuleError("prefix", self.prefix, "applies only to source 'gcs'")
        if self.prefix is not None:
            _check_relative("prefix", self.prefix)
        return self


# Steps between checkpoints where a run names none.
DEFAULT_CHECKPOINT_INTERVAL = 100


class CheckpointConfig(Model):
    enabled: bool = Field(True, description="Save checkpoints to the checkpoint bucket under the run's name.")
    interval_steps: int | None = Field(
        None,
        ge=1,
        le=1_000_000,
        description=f"Steps between checkpoints. Default: {DEFAULT_CHECKPOINT_INTERVAL}, or the run's steps where it "
        "has fewer (one checkpoint, at its end).",
    )

    def interval_for(self, steps: int) -> int:
        """The interval a run of `steps` steps saves at: the one given, else the default within the run."""
        return self.interval_steps or min(DEFAULT_CHECKPOINT_INTERVAL, steps)

    resume: bool = Field(True, description="Resume from the newest checkpoint of the run, if any.")


class RunResiliencyConfig(Model):
    """What the A3 Ultra resiliency recipe's launcher and training script enable, per run.
    Defaults keep a run as plain torchrun; the recipe's values are given at each field."""

    supervisor: bool = Field(
        False,
        description="Start under the resiliency launcher with the platform's supervisor (needs resiliency.enabled): "
        "node replacement and workload restarts on failed heartbeats or GPU errors. The run's image defaults to "
        "the recipe's image, which holds the launcher.",
    )
    fault_tolerance: bool = Field(
        False,
        description="NVIDIA Resiliency Extension rank heartbeats: a hung or dead rank stops the node's workers "
        "(the recipe: on). Implied by supervisor.",
    )
    in_job_restarts: int = Field(
        0,
        ge=0,
        le=100,
        description="Restarts of the workers inside the running pods before the pod fails (the recipe: 0).",
    )
    workload_restarts: int = Field(
        0, ge=0, le=100, description="Supervisor: restarts of the whole run before replacing nodes (the recipe: 0)."
    )
    initial_heartbeat_timeout_seconds: int = Field(
        resiliency.INITIAL_HEARTBEAT_TIMEOUT_SECONDS,
        ge=60,
        le=86400,
        description="Longest silence before a rank's first heartbeat (model build, checkpoint load).",
    )
    heartbeat_timeout_seconds: int = Field(
        resiliency.RANK_HEARTBEAT_TIMEOUT_SECONDS,
        ge=30,
        le=86400,
        description="Longest silence between two heartbeats of a rank (a step and a checkpoint save must fit).",
    )
    async_checkpoint: bool | None = Field(
        None, description="Save checkpoints in the background (the recipe: on). Default: the NeMo recipe's."
    )
    local_checkpoint_interval_steps: int | None = Field(
        None,
        ge=1,
        le=1_000_000,
        description=f"Steps between checkpoints to the nodes' local SSD, replicated across nodes (the recipe: "
        f"{resiliency.LOCAL_CHECKPOINT_INTERVAL}); restarts resume from the newest local or persistent one. Unset: "
        "off.",
    )

    @property
    def heartbeats(self) -> bool:
        return self.fault_tolerance or self.supervisor

    @model_validator(mode="after")
    def _check(self) -> RunResiliencyConfig:
        if self.workload_restarts and not self.supervisor:
            raise RuleError("workloadRestarts", self.workload_restarts, "applies only with supervisor: true")
        if self.in_job_restarts and not self.heartbeats:
            raise RuleError(
                "inJobRestarts", self.in_job_restarts, "needs faultTolerance: true (the restarting launcher)"
            )
        if self.heartbeat_timeout_seconds > self.initial_heartbeat_timeout_seconds:
            raise RuleError(
                "heartbeatTimeoutSeconds",
                self.heartbeat_timeout_seconds,
                f"must not exceed initialHeartbeatTimeoutSeconds ({self.initial_heartbeat_timeout_seconds})",
            )
        return self


class TopologyConfig(Model):
    mode: Literal["preferred", "required", "none"] | None = Field(
        None, description="Kueue topology-aware placement. Default: preferred where the pool has topology labels."
    )
    level: TopologyLevel | None = Field(
        None,
        description="Topology level to keep the run's nodes within. Default: block; on a machine whose NVLink "
        "spans nodes (A4X), its NVLink domain (subblock), required where the run fits in one.",
    )


class TokenizerConfig(Model):
    library: Literal["megatron", "huggingface", "sentencepiece"] = Field("megatron", description="Tokenizer library.")
    type: str = Field("GPT2BPETokenizer", description="Megatron tokenizer type (megatron only).")
    model: str | None = Field(
        None,
        description="Inside the data bucket: the model file (sentencepiece) or the tokenizer's folder "
        "(huggingface; pods never download from the Hugging Face Hub).",
    )

    @model_validator(mode="after")
    def _check(self) -> TokenizerConfig:
        if self.library in ("sentencepiece", "huggingface") and not self.model:
            raise RuleError("model", None, f"is required for library '{self.library}': a path in the data bucket")
        if self.model is not None:
            if self.library == "megatron":
                raise RuleError("model", self.model, "applies only to libraries sentencepiece and huggingface")
            _check_relative("model", self.model)
        return self


# The keys `layout: auto` leaves to the layout planner.
PLANNED_LAYOUT_KEYS = (
    "tensor_parallel",
    "pipeline_parallel",
    "virtual_pipeline",
    "context_parallel",
    "expert_parallel",
    "micro_batch_size",
)


class RunConfig(Model):
    """One pretraining run: a suspended JobSet that Kueue admits when the whole run fits."""

    name: str = Field(
        description="Run name: names its JobSet, its logs and its checkpoints. Changing it starts a new run."
    )
    revision: int = Field(
        FIRST_REVISION,
        ge=FIRST_REVISION,
        le=MAX_REVISION,
        description="A submitted run keeps the definition it was submitted with: what an upgrade of the platform "
        "changes reaches new runs only, and a change of the run's own keys is refused at the same revision. Raise "
        "it to replace the run with its current definition, or to submit it again unchanged; the new JobSet "
        "resumes from the run's checkpoints.",
    )
    model: str = Field(description="A model of the catalog.")
    pool: str | None = Field(None, description="GPU pool to run on. Default: the first GPU pool (of its team's).")
    fallback_pools: list[str] = Field(
        default_factory=list,
        # With `pool`, at most the flavors a ClusterQueue's resource group lists.
        max_length=MAX_FLAVORS_PER_GROUP - 1,
        description="GPU pools to run on when `pool` has no room, in the order of gpuPools: Kueue admits the run on "
        "the first with room (docs/capacity.md). Each of `pool`'s machine type; a Spot pool needs checkpoints.",
    )
    team: str | None = Field(
        None, description="The team it runs for (teams[].name): required where the platform has teams, unset otherwise."
    )
    nodes: int = Field(ge=1, le=MAX_RUN_NODES, description="Nodes (one pod each, all GPUs of the node).")
    steps: int | None = Field(None, ge=1, le=10_000_000, description="Training steps. Default: the model's.")
    global_batch_size: int | None = Field(None, ge=1, description="Sequences per step. Default: the model's.")
    micro_batch_size: int | None = Field(None, ge=1, description="Sequences per GPU per micro-step.")
    tensor_parallel: int | None = Field(None, ge=1, le=64, description="Tensor-parallel size.")
    pipeline_parallel: int | None = Field(None, ge=1, le=256, description="Pipeline-parallel size.")
    virtual_pipeline: int | None = Field(None, ge=1, le=256, description="Virtual pipeline stages per rank.")
    context_parallel: int | None = Field(None, ge=1, le=64, description="Context-parallel size.")
    expert_parallel: int | None = Field(
        None, ge=1, le=1024, description="Expert-parallel size of a mixture-of-experts model. Default: the model's."
    )
    sequence_length: int | None = Field(None, ge=128, le=1_048_576, description="Tokens per sequence.")
    fp8: bool | None = Field(None, description="FP8 (hybrid) training. Default: the model's.")
    layout: Literal["recipe", "auto"] = Field(
        "recipe",
        description="`recipe`: the model's recipe on the pool's machine, with the run's own layout keys on top. "
        "`auto`: the layout planner's fastest layout that fits the run's nodes, batch, sequence and precision "
        "(docs/training.md, Layouts), chosen when the run is submitted and kept while its revision stands; the "
        "parallel sizes and microBatchSize are then the planner's to set.",
    )
    profile: ProfileWindow | None = Field(None, description="Nsight Systems window; off when unset.")
    stragglers: bool = Field(
        False,
        description="Megatron-Bridge runs: Megatron Core's straggler detector reports the fastest and slowest rank "
        "after every step in rank 0's output (`straggler.log_straggler`), which `python -m analysis stragglers` "
        "reads (docs/analytics.md). Off by default: each report gathers every rank's timings to rank 0.",
    )
    dataset: DatasetConfig = Field(default_factory=DatasetConfig, description="Training data.")
    tokenizer: TokenizerConfig = Field(default_factory=TokenizerConfig, description="Tokenizer of the data.")
    checkpoint: CheckpointConfig = Field(default_factory=CheckpointConfig, description="Checkpointing and resume.")
    max_restarts: int | None = Field(
        None,
        ge=0,
        le=100,
        description="JobSet restarts of the whole run after a failure other than a program error (docs/recovery.md). "
        "Default: the resiliency recipe's 20 for a run that saves and resumes from checkpoints or runs under "
        "resiliency.supervisor; 0 for one that would start again from step 0.",
    )
    resiliency: RunResiliencyConfig = Field(
        default_factory=RunResiliencyConfig, description="Fault tolerance, restarts and local checkpoints."
    )
    topology: TopologyConfig = Field(default_factory=TopologyConfig, description="Topology-aware placement.")
    priority: Priority | None = Field(
        None, description="Kueue priority. Default: the platform's default priority class."
    )
    image: str | None = Field(None, description="Training image. Default: the model's pinned NeMo image.")
    overrides: dict[str, str | int | float | bool] = Field(
        {},
        description="Extra settings by dotted key, applied to the NeMo config (NeMo 1), recipe (NeMo 2) or "
        "ConfigContainer (Megatron-Bridge). A path one of the run's own keys sets (steps, nodes, the batch, the "
        "layout, sequenceLength, checkpoint.intervalSteps) is refused: set the key.",
    )
    env: dict[str, str] = Field({}, description="Extra environment variables of the training container.")
    fabric_check: str | None = Field(
        None,
        description="A training.ncclTests check that must pass before this run is submitted: `pulumi up` waits "
        "for it and submits the run only once it completed.",
    )
    allow_env_overrides: tuple[str, ...] = Field(
        (),
        description="Variables the platform sets (NNODES, MASTER_ADDR, the machine's NCCL_* …) that `env` may "
        "replace; any other such variable in `env` is refused.",
    )

    @property
    def spec(self) -> ModelSpec:
        return model_spec(self.model)

    @property
    def settings(self) -> RunSettings:
        """The run's settings on top of its model's general recipe (settings_on: its machine's)."""
        return self.settings_on(None)

    def settings_on(self, machine_type: str | None) -> RunSettings:
        """The run's effective settings: its own values on top of the recipe for its machine."""
        return self.spec.recipe_on(machine_type).settings(
            steps=self.steps,
            global_batch_size=self.global_batch_size,
            micro_batch_size=self.micro_batch_size,
            tensor_parallel=self.tensor_parallel,
            pipeline_parallel=self.pipeline_parallel,
            virtual_pipeline=self.virtual_pipeline,
            context_parallel=self.context_parallel,
            sequence_length=self.sequence_length,
            fp8=self.fp8,
            expert_parallel=self.expert_parallel,
        )

    def definition(self) -> dict[str, Any]:
        """The run as its stack file wrote it, but for its revision: what a submitted run keeps."""
        return self.model_dump(by_alias=True, exclude_unset=True, exclude={"revision"}, mode="json")

    @model_validator(mode="after")
    def _check(self) -> RunConfig:
        check_name("name", self.name, MAX_RUN_NAME)
        if self.model not in MODELS:
            raise RuleError("model", self.model, f"is not in the model catalog; known: {', '.join(MODELS)}")
        if self.image is not None and not _IMAGE.match(self.image):
            raise RuleError("image", self.image, "must be a registry/repository:tag or @sha256 reference")
        if self.virtual_pipeline is not None and self.pipeline_parallel == 1:
            raise RuleError("virtualPipeline", self.virtual_pipeline, "needs pipelineParallel above 1")
        if self.layout == "auto":
            for name in PLANNED_LAYOUT_KEYS:
                if (value := getattr(self, name)) is not None:
                    key = type(self).model_fields[name].alias or name
                    raise RuleError(
                        key,
                        value,
                        "is the layout planner's to choose with layout: auto; unset it, or set layout: recipe",
                    )
        for key in self.overrides:
            if not _OVERRIDE_KEY.match(key):
                raise RuleError(f"overrides.{key}", key, "must be a dotted key such as model.optim.lr")
        for key, value in self.env.items():
            if not _ENV_NAME.match(key):
                raise RuleError(
                    f"env.{key}", value, "the name must be an environment variable name: [A-Za-z_][A-Za-z0-9_]*"
                )
            size = env_string_bytes(key, value)
            if size > MAX_ENV_STRING_BYTES:
                raise RuleError(
                    f"env.{key}",
                    value,
                    f"is {size} bytes as NAME=value; a process's environment takes at most {MAX_ENV_STRING_BYTES} "
                    "per variable (Linux MAX_ARG_STRLEN): put large values in the data bucket",
                )
        for i, key in enumerate(self.allow_env_overrides):
            if key not in self.env:
                raise RuleError(f"allowEnvOverrides[{i}]", key, "names no variable of env")
        return self


class DataPrepConfig(Model):
    """A Job that tokenizes JSONL from the data bucket into Megatron .bin/.idx files there."""

    name: str = Field(description="Job name.")
    input: str = Field(description="JSONL file or glob inside the data bucket, e.g. raw/wiki/*.jsonl.")
    output_prefix: str = Field(description="Output path prefix inside the data bucket, e.g. datasets/wiki/wiki.")
    json_key: str = Field("text", description="Field of each JSON line holding the text.")
    tokenizer: TokenizerConfig = Field(default_factory=TokenizerConfig, description="Tokenizer.")
    workers: int = Field(32, ge=1, le=256, description="Tokenizer processes (one CPU each).")
    pool: str | None = Field(None, description="GPU pool whose CPUs run the job. Default: the first GPU pool.")
    team: str | None = Field(
        None,
        description="The team it writes data for (teams[].name): required where the platform has teams; "
        "outputPrefix then starts with the team's folder, `<team>/`.",
    )

    @model_validator(mode="after")
    def _check(self) -> DataPrepConfig:
        check_name("name", self.name, 50)
        for key in ("input", "outputPrefix"):
            _check_relative(key, getattr(self, to_snake(key)))
        return self


class NcclTestConfig(Model):
    """A fabric check: nccl-tests across nodes of a GPU pool, queued like a run."""

    name: str = Field(description="Check name: its JobSet is `<name>-<digest>`, its logs `<experiments>/<name>/nccl/`.")
    pool: str | None = Field(None, description="GPU pool to check. Default: the first GPU pool.")
    team: str | None = Field(
        None,
        description="The team whose queue it runs in (teams[].name): required where the platform has teams, "
        "unset otherwise.",
    )
    nodes: int = Field(
        2, ge=2, le=MAX_RUN_NODES, description="Nodes to span; the published pass marks are for 2 nodes."
    )
    collectives: tuple[Literal["all_gather", "all_reduce"], ...] = Field(
        ("all_gather", "all_reduce"), min_length=1, description="nccl-tests collectives to run, in order."
    )
    timeout_minutes: int = Field(
        60, ge=10, le=1440, description="How long `pulumi up` waits for the check to pass when a run requires it."
    )

    @model_validator(mode="after")
    def _check(self) -> NcclTestConfig:
        check_name("name", self.name, MAX_RUN_NAME)
        if len(set(self.collectives)) != len(self.collectives):
            raise RuleError("collectives", list(self.collectives), "must not repeat a collective")
        return self


# The most runs, data-preparation jobs or fabric checks one stack holds. Each is a JobSet or Job
# with its ConfigMap in the stack's state, and every `pulumi up` reads them all back: more belong in
# more stacks (a stack per run is the pattern; docs/user-guide.md).
MAX_JOBS_PER_STACK = 100


class TrainingConfig(Model):
    runs: tuple[RunConfig, ...] = Field(
        (), max_length=MAX_JOBS_PER_STACK, description="Pretraining runs of this stack."
    )
    data_prep: tuple[DataPrepConfig, ...] = Field(
        (), max_length=MAX_JOBS_PER_STACK, description="Tokenization jobs of this stack."
    )
    nccl_tests: tuple[NcclTestConfig, ...] = Field(
        (),
        max_length=MAX_JOBS_PER_STACK,
        description="Fabric checks (nccl-tests JobSets) of this stack; a run may require one to pass first.",
    )

    @model_validator(mode="after")
    def _check(self) -> TrainingConfig:
        for label, names in (
            ("runs", [run.name for run in self.runs]),
            ("dataPrep", [job.name for job in self.data_prep]),
            ("ncclTests", [test.name for test in self.nccl_tests]),
        ):
            first: dict[str, int] = {}
            for i, name in enumerate(names):
                if first.setdefault(name, i) != i:
                    raise RuleError(f"{label}[{i}].name", name, "must be unique")
        runs = {run.name for run in self.runs}
        checks = {test.name for test in self.nccl_tests}
        for i, test in enumerate(self.nccl_tests):
            if test.name in runs:
                raise RuleError(f"ncclTests[{i}].name", test.name, "is the name of a run: JobSets share a namespace")
        for i, run in enumerate(self.runs):
            if run.fabric_check is not None and run.fabric_check not in checks:
                known = ", ".join(sorted(checks)) or "none"
                raise RuleError(
                    f"runs[{i}].fabricCheck", run.fabric_check, f"names no ncclTests entry; checks: {known}"
                )
        return self
