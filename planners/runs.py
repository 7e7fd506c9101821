"""Training runs and data-preparation jobs as the platform runs them, and the checks that they
fit the pool and queue they target: its GPUs, its quota, its topology, the model's shape.

The checks run against the platform's flavors, whether those come from this stack or from an
upstream one, before anything is registered. Their errors name keys relative to the run, as
the user wrote them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from facts import resiliency, versions
from facts.errors import RuleError
from facts.kubernetes import FIRST_REVISION, TOPOLOGY_LABELS, TopologyLevel
from facts.machines import MachineType, Precision, training_pod_requests
from facts.models import MODELS, Framework, ModelSpec, Recipe, RunSettings, StepTime, model_spec
from planners.queues import Flavor


@dataclass(frozen=True)
class Tokenizer:
    library: str
    type: str
    # sentencepiece: the model file, inside the data bucket.
    model: str | None = None

    @property
    def uses_gpt2_files(self) -> bool:
        """Megatron's GPT-2 BPE tokenizer: its vocabulary and merges files (facts.versions)."""
        return self.library == "megatron" and self.type.startswith("GPT2")


@dataclass(frozen=True)
class ProfileWindow:
    start_step: int
    end_step: int


@dataclass(frozen=True)
class Resiliency:
    """The run-side resiliency of the A3 Ultra resiliency recipe (facts.resiliency); the
    defaults are a plain torchrun run."""

    supervisor: bool = False
    fault_tolerance: bool = False
    in_job_restarts: int = 0
    workload_restarts: int = 0
    initial_heartbeat_timeout_seconds: int = resiliency.INITIAL_HEARTBEAT_TIMEOUT_SECONDS
    heartbeat_timeout_seconds: int = resiliency.RANK_HEARTBEAT_TIMEOUT_SECONDS
    # None keeps the NeMo recipe's setting.
    async_checkpoint: bool | None = None
    local_checkpoint_interval_steps: int | None = None

    @property
    def heartbeats(self) -> bool:
        """Ranks send heartbeats: NVRx fault tolerance, on its own or under the supervisor."""
        return self.fault_tolerance or self.supervisor

    @property
    def enabled(self) -> bool:
        return self != Resiliency()


@dataclass(frozen=True)
class RunSpec:
    """One pretraining run with every default resolved but the placement: `topology_mode` None
    means "preferred where the pool has topology labels"."""

    name: str
    model: str
    pool: str
    nodes: int
    settings: RunSettings
    tokenizer: Tokenizer
    priority: str
    # Megatron .bin/.idx prefix inside the data bucket; None trains on mock data.
    dataset_prefix: str | None = None
    copy_dataset_to_local_ssd: bool = True
    checkpoint: bool = True
    checkpoint_interval_steps: int = 100
    resume: bool = True
    profile: ProfileWindow | None = None
    # Megatron Core's straggler reports (Megatron-Bridge runs only).
    stragglers: bool = False
    max_restarts: int = 0
    resiliency: Resiliency = Resiliency()
    topology_mode: str | None = None
    # None: the pool's default (`topology_annotation`).
    topology_level: TopologyLevel | None = None
    image: str | None = None
    overrides: Mapping[str, str | int | float | bool] = field(default_factory=lambda: MappingProxyType({}))
    env: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    # Variables of `env` that may replace what the platform sets.
    allow_env_overrides: frozenset[str] = frozenset()
    # The run's keys its config sets (the others are the model's): a rule between several names
    # the one the user wrote.
    given: frozenset[str] = frozenset()
    # What a submitted run keeps (planners.submitted): its revision, and its keys as the stack file
    # wrote them, as JSON.
    revision: int = FIRST_REVISION
    definition: str = "{}"

    # The pool's machine type: the recipe published for it, if any, is the run's.
    machine_type: str | None = None
    # Pools the run may run on when `pool` has no room, in the order Kueue tries them (planners.chains).
    fallback_pools: tuple[str, ...] = ()
    # The layout planner chose `settings`' layout (`layout: auto`: planners.layout).
    planned_layout: bool = False

    @property
    def chain(self) -> tuple[str, ...]:
        return (self.pool, *self.fallback_pools)

    @property
    def spec(self) -> ModelSpec:
        return model_spec(self.model)

    @property
    def recipe(self) -> Recipe:
        """The recipe the run starts from: its model's on its machine."""
        return self.spec.recipe_on(self.machine_type)

    @property
    def image_ref(self) -> str:
        """The image the run's pods run, as published: its own, else its recipe's."""
        return self.image or self.recipe.image.ref


def max_restarts(given: int | None, checkpoint: bool, resume: bool, supervisor: bool) -> int:
    """The JobSet restarts a run gets after a failure other than a program error: its own
    `maxRestarts`, else the resiliency recipe's for a run that resumes from its checkpoints (a
    restart loses the steps since the newest one) or that the supervisor runs, else none: a run
    that cannot resume would start again from step 0."""
    if given is not None:
        return given
    return resiliency.RECIPE_MAX_RESTARTS if (checkpoint and resume) or supervisor else 0


@dataclass(frozen=True)
class DataPrepSpec:
    """A tokenization Job: JSONL in the data bucket to Megatron .bin/.idx files beside it."""

    name: str
    input: str
    output_prefix: str
    json_key: str
    tokenizer: Tokenizer
    workers: int
    pool: str


def _flavor(pool: str, flavors: Mapping[str, Flavor]) -> Flavor:
    if pool not in flavors:
        raise RuleError("pool", pool, f"is not a GPU pool of the environment; pools: {', '.join(flavors)}")
    return flavors[pool]


def check_sequence_split(s: RunSettings) -> None:
    """The sequence divides as the layout splits it: context parallelism cuts each sequence into
    2 × CP chunks, two per rank, to balance the causal mask (megatron-core
    utils.get_batch_on_this_cp_rank); sequence parallelism (on with TP above 1) then cuts each
    rank's part across the tensor-parallel ranks (tensor_parallel.scatter_to_sequence_parallel_region).
    Either would fail in the pods, at the first batch."""
    chunks = 2 * s.context_parallel
    if s.context_parallel > 1 and s.sequence_length % chunks:
        why = f"must be a multiple of 2 × contextParallel = {chunks}: context parallelism cuts it into {chunks} chunks"
        raise RuleError("sequenceLength", s.sequence_length, why)
    per_rank = s.sequence_length // s.context_parallel
    if s.tensor_parallel > 1 and per_rank % s.tensor_parallel:
        why = (
            f"leaves {per_rank} tokens per context-parallel rank, which sequence parallelism cannot split over "
            f"tensorParallel = {s.tensor_parallel}: use a multiple of {s.context_parallel * s.tensor_parallel}"
        )
        raise RuleError("sequenceLength", s.sequence_length, why)


def check_run(
    run: RunSpec, flavors: Mapping[str, Flavor], priorities: Sequence[str], supervisor: bool = False, gke: bool = True
) -> None:
    """Raise RuleError (key relative to the run) if the run cannot work on its pool. `supervisor`:
    whether the platform runs the resiliency supervisor; `gke`: whether the cluster is GKE."""
    flavor, s = _flavor(run.pool, flavors), run.settings
    machine, pool = flavor.machine, run.pool
    gpus = run.nodes * machine.gpus
    if run.nodes > flavor.nodes:
        raise RuleError("nodes", run.nodes, f"pool {pool} holds at most {flavor.nodes} nodes")
    if gpus > flavor.gpus:
        raise RuleError("nodes", run.nodes, f"{gpus} GPUs exceed the queue's quota of {flavor.gpus} on {pool}")
    tokenizer = run.tokenizer
    if (
        run.recipe.framework is Framework.MEGATRON_BRIDGE
        and run.dataset_prefix
        and tokenizer.library == "megatron"
        and not tokenizer.uses_gpt2_files
    ):
        # Megatron-Bridge's TokenizerConfig takes GPT-2 BPE files, a Hugging Face folder or a
        # sentencepiece model here (planners.runtimes.bridge.tokenizer); another Megatron type would
        # fail only when the pods build it.
        raise RuleError(
            "tokenizer.type",
            tokenizer.type,
            f"is not a Megatron tokenizer {run.model}'s runtime (Megatron-Bridge) reads: use GPT2BPETokenizer, or "
            "library huggingface or sentencepiece with its files in the data bucket",
        )
    cpu, memory = training_pod_requests(machine)
    if run.nodes * cpu > flavor.cpu_millicores or run.nodes * memory > flavor.memory_mib:
        raise RuleError("nodes", run.nodes, f"the run's CPU and memory requests exceed the queue's quota on {pool}")
    check_layout(run, machine)
    if run.stragglers and run.recipe.framework is not Framework.MEGATRON_BRIDGE:
        raise RuleError(
            "stragglers",
            True,
            f"reports come from Megatron-Bridge's straggler detector; {run.model}'s runtime is "
            f"{run.recipe.framework.label}",
        )
    if run.profile is not None and run.profile.end_step > s.steps:
        raise RuleError("profile.endStep", run.profile.end_step, f"is after the last step ({s.steps})")
    if run.topology_mode in ("preferred", "required") and not flavor.topology:
        raise RuleError("topology.mode", run.topology_mode, f"pool {pool} {flavor.topology_problem}; use 'none'")
    if run.priority not in priorities:
        raise RuleError("priority", run.priority, f"is not a priority class of the platform: {', '.join(priorities)}")
    check_resiliency(run, machine, supervisor, gke)
    problem = untested_image(run, machine)
    if problem and run.image is None:
        tested = [
            name for name, spec in MODELS.items() if spec.recipe_on(machine.name).image.ref in _validated(machine)
        ]
        raise RuleError(
            "model", run.model, f"{problem}: run {', '.join(tested)} there, or set `image` to take the risk"
        )


def check_layout(run: RunSpec, machine: MachineType) -> None:
    """Raise RuleError (key relative to the run) if Megatron Core would refuse the run's layout on
    `run.nodes` nodes of `machine`, or the machine could not run it: the rules every layout the
    config names, or the layout planner proposes, must meet."""
    spec, s, arch = run.spec, run.settings, run.spec.architecture
    gpus = run.nodes * machine.gpus
    if machine.nvlink_domain_gpus % s.tensor_parallel:
        raise RuleError(
            "tensorParallel",
            s.tensor_parallel,
            f"must divide the {machine.nvlink_domain_gpus} GPUs of a {machine.name} NVLink domain"
            + (" (a node)" if machine.nvlink_domain_gpus == machine.gpus else ""),
        )
    if gpus % s.model_parallel:
        raise RuleError(
            "nodes",
            run.nodes,
            f"{gpus} GPUs are not a multiple of tensor × pipeline × context parallel = "
            f"{s.tensor_parallel} × {s.pipeline_parallel} × {s.context_parallel} = {s.model_parallel}",
        )
    data_parallel = gpus // s.model_parallel
    if s.global_batch_size % (s.micro_batch_size * data_parallel):
        raise RuleError(
            *_batch_key(run),
            f"the global batch size {s.global_batch_size} must be a multiple of micro batch × data-parallel size = "
            f"{s.micro_batch_size} × {data_parallel} ({gpus} GPUs / model parallel {s.model_parallel})",
        )
    micro_batches = s.global_batch_size // (s.micro_batch_size * data_parallel)
    if s.virtual_pipeline is not None and s.pipeline_parallel > 1 and micro_batches % s.pipeline_parallel:
        # Megatron Core's interleaved schedule runs the micro-batches in groups of the pipeline
        # size and refuses a step with fewer or a remainder (pipeline_parallel/schedules.py,
        # microbatch_group_size_per_vp_stage; megatron-core 0.16.0).
        raise RuleError(
            *_batch_key(run),
            f"with a virtual pipeline, the micro-batches of a step (global {s.global_batch_size} / (micro "
            f"{s.micro_batch_size} × data-parallel {data_parallel}) = {micro_batches}) must be a multiple of the "
            f"pipeline size {s.pipeline_parallel}",
        )
    check_experts(run, gpus)
    if s.sequence_length > arch.max_positions:
        raise RuleError("sequenceLength", s.sequence_length, f"{spec.name} has {arch.max_positions} positions")
    check_sequence_split(s)
    if arch.heads % s.tensor_parallel or arch.kv_heads % s.tensor_parallel:
        raise RuleError(
            "tensorParallel",
            s.tensor_parallel,
            f"must divide the {arch.heads} attention heads and {arch.kv_heads} key/value heads of {spec.name}",
        )
    if s.virtual_pipeline is not None and s.pipeline_parallel == 1 and "virtualPipeline" in run.given:
        raise RuleError("virtualPipeline", s.virtual_pipeline, "needs pipelineParallel above 1")
    stages = s.pipeline_parallel * (s.virtual_pipeline or 1)
    recipe = run.recipe
    # With the embedding and the loss each counted as a layer of the split, Megatron divides
    # two more "layers" among the stages.
    if recipe.counts_embedding_and_loss(arch.layers, s.pipeline_parallel, s.virtual_pipeline, run.image_ref) is None:
        ways = recipe.pipeline_splits(run.image_ref)
        if len(ways) > 1:
            split = (
                f"the {arch.layers} layers of {spec.name}, or the {arch.layers + 2} its launcher splits with the "
                "embedding and the loss counted as a layer each"
            )
        elif ways[0]:
            split = (
                f"the {arch.layers + 2} layers of {spec.name} (with the embedding and the loss, as its recipe "
                "splits them)"
            )
        elif recipe.pipeline_split_counts_embedding_and_loss:
            split = (
                f"the {arch.layers} layers of {spec.name} (its image {run.image_ref} cannot count the embedding "
                "and the loss, as its recipe does)"
            )
        else:
            split = f"the {arch.layers} layers of {spec.name}"
        layouts = recipe.pipeline_layouts
        uneven = (
            f", or be one of its recipe's uneven splits (pipeline × virtual): "
            f"{', '.join(f'{pp} × {vp}' for pp, vp in layouts)}"
            if layouts
            else ""
        )
        # The key the user wrote: the virtual pipeline where only it was set.
        virtual = "virtualPipeline" in run.given and "pipelineParallel" not in run.given
        raise RuleError(
            "virtualPipeline" if virtual else "pipelineParallel",
            s.virtual_pipeline if virtual else s.pipeline_parallel,
            f"pipeline × virtual stages ({stages}) must divide {split}{uneven}",
        )
    if s.fp8 and Precision.FP8 not in machine.accelerator.peak_dense_tflops:
        raise RuleError("fp8", True, f"{machine.accelerator.name} GPUs have no FP8")


def _batch_key(run: RunSpec) -> tuple[str, int]:
    """The key a batch rule blames, with its value: what the user set, the global batch, else the
    micro batch, else the nodes (the data-parallel size); each other value is the model's."""
    s = run.settings
    key = next((k for k in ("globalBatchSize", "microBatchSize") if k in run.given), "nodes")
    return key, {"globalBatchSize": s.global_batch_size, "microBatchSize": s.micro_batch_size}.get(key, run.nodes)


def check_experts(run: RunSpec, gpus: int) -> None:
    """A mixture-of-experts layout as Megatron Core builds it: the experts split evenly over the
    expert-parallel GPUs (transformer/moe/moe_layer.py: num_moe_experts % ep_size), and the GPUs
    of every pipeline stage made of whole expert groups of expert tensor × expert parallel (1 × EP:
    parallel_state.py initialize_model_parallel, "world_size is not divisible by
    expert_tensor_model_pipeline_parallel size"; megatron-core 0.16.0)."""
    s, spec = run.settings, run.spec
    experts = spec.architecture.experts
    given = "expertParallel" in run.given
    if experts is None:
        if s.expert_parallel > 1:
            raise RuleError("expertParallel", s.expert_parallel, f"{spec.name} is a dense model: it has no experts")
        return
    if experts.count % s.expert_parallel:
        raise RuleError("expertParallel", s.expert_parallel, f"must divide the {experts.count} experts of {spec.name}")
    if gpus % (s.expert_parallel * s.pipeline_parallel):
        raise RuleError(
            "expertParallel" if given else "nodes",
            s.expert_parallel if given else run.nodes,
            f"{gpus} GPUs are not a multiple of expert × pipeline parallel = "
            f"{s.expert_parallel} × {s.pipeline_parallel}",
        )


def published_step(run: RunSpec, machine_type: str) -> StepTime | None:
    """The model's published step time at exactly the run's layout on this machine type; it holds
    for the model's own image only."""
    if run.image is not None:
        return None
    s = run.settings
    return run.spec.step_time(machine_type, run.nodes, s.global_batch_size, s.fp8)


def local_checkpoint_bytes(run: RunSpec, machine: MachineType) -> int:
    """Local SSD one node needs for local checkpoints at their peak: every GPU's own state (its
    weight shard and its share of the distributed optimizer), replicated to peers, the newer
    checkpoint beside the older one until it is complete (facts.resiliency)."""
    s, params = run.settings, run.spec.architecture.parameters
    gpus = run.nodes * machine.gpus
    per_gpu = (
        resiliency.WEIGHT_BYTES * params / (s.tensor_parallel * s.pipeline_parallel)
        + resiliency.OPTIMIZER_BYTES * params / gpus
    )
    replication = resiliency.LOCAL_CHECKPOINT_REPLICATION if run.nodes > 1 else 1
    return int(per_gpu * machine.gpus * replication * resiliency.LOCAL_CHECKPOINTS_AT_PEAK)


def local_ssd_bytes(machine: MachineType) -> int:
    return machine.local_ssds * machine.local_ssd_gib * 2**30


def check_resiliency(run: RunSpec, machine: MachineType, supervisor: bool, gke: bool = True) -> None:
    """The run's resiliency settings against its model, its checkpoints and the node's SSD."""
    r, steps = run.resiliency, run.settings.steps
    if not r.enabled:
        return
    if run.recipe.framework is not Framework.NEMO2:
        # Megatron-Bridge 0.3.0 marks its fault-tolerance package "for Nvidia internal use only"
        # (training/config.py FaultToleranceConfig), and no public recipe runs it on GKE.
        successors = [m.name for m in MODELS.values() if m.successor == run.spec.name]
        hint = f" (such as {', '.join(successors)})" if successors else ""
        why = (
            ": Megatron-Bridge 0.3.0 keeps its fault tolerance for NVIDIA's internal use"
            if run.recipe.framework is Framework.MEGATRON_BRIDGE
            else ""
        )
        raise RuleError(
            "resiliency",
            None,
            f"{run.spec.name} runs on {run.recipe.framework.label}; resiliency settings need a NeMo 2 model{hint}{why}",
        )
    if r.supervisor and not supervisor:
        raise RuleError("resiliency.supervisor", True, "needs the platform's supervisor: set resiliency.enabled: true")
    if r.supervisor and not machine.pods_on_host_network:
        raise RuleError(
            "resiliency.supervisor",
            True,
            f"the supervisor reaches each worker on a node port beside its host daemon, so training pods use the host "
            f"network, and {machine.name}'s {machine.gpudirect.value} pattern runs them off it",
        )
    if r.heartbeats and run.profile is not None:
        raise RuleError("profile", None, "Nsight Systems cannot wrap the fault-tolerant launcher (NeMo refuses both)")
    if r.heartbeats and run.checkpoint and run.checkpoint_interval_steps > steps:
        raise RuleError(
            "checkpoint.intervalSteps",
            run.checkpoint_interval_steps,
            f"exceeds the run's {steps} steps: a restarted run would start from step 0",
        )
    local = r.local_checkpoint_interval_steps
    if local is None:
        return
    if not gke:
        raise RuleError(
            "resiliency.localCheckpointIntervalSteps",
            local,
            "needs GKE's ephemeral local SSD path on the nodes; the target is an existing cluster",
        )
    if r.supervisor:
        raise RuleError(
            "resiliency.localCheckpointIntervalSteps",
            local,
            "cannot go with supervisor: the supervisor's image has NeMo 24.12, and NeMo's local checkpoints "
            "(nemo/lightning/pytorch/local_ckpt.py) arrived in NeMo 2.3; the recipe does them with its own script",
        )
    if not run.checkpoint:
        raise RuleError(
            "resiliency.localCheckpointIntervalSteps", local, "needs checkpoint.enabled: restarts compare both kinds"
        )
    if local > steps:
        raise RuleError("resiliency.localCheckpointIntervalSteps", local, f"exceeds the run's {steps} steps")
    if local >= run.checkpoint_interval_steps:
        raise RuleError(
            "resiliency.localCheckpointIntervalSteps",
            local,
            f"must be below checkpoint.intervalSteps ({run.checkpoint_interval_steps}): local checkpoints are the "
            "frequent, cheap ones",
        )
    need, have = local_checkpoint_bytes(run, machine), local_ssd_bytes(machine)
    allowed = int(have * resiliency.LOCAL_CHECKPOINT_SSD_SHARE)
    if need > allowed:
        raise RuleError(
            "resiliency.localCheckpointIntervalSteps",
            local,
            f"local checkpoints need {need / 1e9:.0f} GB per node, more than half of a {machine.name}'s "
            f"{have / 1e9:.0f} GB local SSD ({allowed / 1e9:.0f} GB); use more nodes or leave them off",
        )


def run_advice(run: RunSpec, machine: MachineType) -> list[str]:
    """What a run the checks let through should still hear about."""
    advice = []
    steps = run.settings.steps
    if run.checkpoint and run.checkpoint_interval_steps > steps and not run.resiliency.heartbeats:
        advice.append(
            f"run {run.name}: checkpoint.intervalSteps {run.checkpoint_interval_steps} is longer than the run's "
            f"{steps} steps, so it saves no checkpoint on the way: a restart begins again at step 0; set "
            f"checkpoint.intervalSteps to at most {steps}"
        )
    problem = untested_image(run, machine)
    if problem:
        advice.append(f"run {run.name}: {problem}; the image was chosen explicitly, so it runs")
    successor = run.spec.successor
    if successor and run.recipe.framework is Framework.NEMO2:
        after = model_spec(successor).recipe_on(machine.name)
        advice.append(
            f"run {run.name}: {run.model} runs on NeMo 2's LLM collection ({run.recipe.image.ref}), which NVIDIA has "
            f"deprecated; the current recipes train model {successor} on {after.framework.label} ({after.image.ref})"
        )
    recipe_image = run.recipe.image.ref
    if run.resiliency.supervisor and run.image == versions.RESILIENCY.ref and recipe_image != run.image:
        advice.append(
            f"run {run.name}: supervised, so it runs on the resiliency recipe's image {run.image} (NeMo 24.12) "
            f"instead of {recipe_image}, which this program's NeMo 2 script was written against"
        )
    return advice


def _validated(machine: MachineType) -> tuple[str, ...]:
    stack = machine.gpudirect_stack
    return tuple(image.ref for image in stack.validated_images) if stack else ()


def untested_image(run: RunSpec, machine: MachineType) -> str | None:
    """Why the run's image is not one the machine's GPUDirect plugin and sidecar were validated
    with (facts.machines.GpuDirectStack.validated_images), or None."""
    validated = _validated(machine)
    image = run.image_ref
    stack = machine.gpudirect_stack
    if stack is None or not validated or image in validated:
        return None
    pair = " and ".join(i.ref for i in (stack.pod_plugin, stack.rxdm_sidecar) if i is not None)
    return f"{image} was never validated with {machine.name}'s {pair}, only {', '.join(validated)}"


def check_data_prep(job: DataPrepSpec, flavors: Mapping[str, Flavor]) -> None:
    machine = _flavor(job.pool, flavors).machine
    if job.workers * 1000 > training_pod_requests(machine)[0]:
        raise RuleError("workers", job.workers, f"a {machine.name} node has fewer CPUs")


def topology_annotation(run: RunSpec, flavor: Flavor) -> dict[str, str]:
    """Kueue topology-aware scheduling: keep the run's nodes within one domain of a level. By
    default a block, preferred; on a machine whose NVLink spans nodes, one NVLink domain, required
    where the run fits in one: its pods reach each other's GPUs over NVLink only there (GKE's A4X
    guide; cluster-toolkit examples/gke-a4x/nccl-jobset-example.yaml@1047080 requires the sub-block)."""
    machine = flavor.machine
    in_one_domain = machine.nvlink_across_nodes and run.nodes <= machine.nvlink_domain_nodes
    default_mode = ("required" if in_one_domain else "preferred") if flavor.topology else "none"
    mode = run.topology_mode or default_mode
    if mode == "none":
        return {}
    level = run.topology_level or (machine.nvlink_domain_level if in_one_domain else TopologyLevel.BLOCK)
    return {f"kueue.x-k8s.io/podset-{mode}-topology": TOPOLOGY_LABELS[level]}
