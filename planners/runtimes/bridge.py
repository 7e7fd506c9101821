"""Megatron-Bridge: a JSON settings file from which `payload/megatron_bridge_pretrain.py` builds
the run's ConfigContainer, as NVIDIA's performance scripts build theirs."""

from __future__ import annotations

import json
from types import MappingProxyType
from typing import Any

import payload
from facts.errors import RuleError
from facts.machines import MachineType
from facts.models import BRIDGE_EXECUTOR_ENV, MXFP8_MIN_COMPUTE_CAPABILITY, Fp8Scaling, Framework
from planners.monitoring import step_record
from planners.runs import RunSpec
from planners.workload import (
    LAYOUT_FIELDS,
    RUN_SETTINGS,
    SM100,
    STEP_RECORD_MODULE,
    WORKLOAD_DIR,
    RunPaths,
    Runtime,
    tokenizer_settings,
    tp_overlap,
)

SCRIPT = "megatron_bridge_pretrain.py"
# How many of the lowest-throughput ranks a straggler report lists beside the slowest.
STRAGGLER_RANKS = 8
# Its mode that builds and validates the run's configuration and exits (payload's main()).
PREFLIGHT_FLAG = "--check"
# The ConfigContainer fields `settings` sets from a run's keys (Runtime.keyed_overrides).
KEYED_OVERRIDES = MappingProxyType(
    {
        "train.train_iters": "steps",
        "train.global_batch_size": "globalBatchSize",
        "train.micro_batch_size": "microBatchSize",
        "model.seq_length": "sequenceLength",
        "dataset.seq_length": "sequenceLength",
        "checkpoint.save_interval": "checkpoint.intervalSteps",
        **{f"model.{path}": key for key, path in LAYOUT_FIELDS.items()},
    }
)


def mixed_precision(run: RunSpec, machine: MachineType) -> str:
    """The Megatron-Bridge mixed-precision recipe of the run
    (megatron.bridge.training.mixed_precision, registered by name)."""
    if not run.settings.fp8:
        return "bf16_mixed"
    scaling = run.recipe.fp8_scaling
    if scaling is Fp8Scaling.MXFP8 and machine.accelerator.compute_capability < MXFP8_MIN_COMPUTE_CAPABILITY:
        # The Blackwell recipe's scaling on an older GPU: the scaling Hopper's recipes use.
        scaling = Fp8Scaling.CURRENT
    return {
        Fp8Scaling.DELAYED: "bf16_with_fp8_delayed_scaling_mixed",
        Fp8Scaling.CURRENT: "bf16_with_fp8_current_scaling_mixed",
        Fp8Scaling.MXFP8: "bf16_with_mxfp8_mixed",
    }[scaling]


def tokenizer(run: RunSpec, paths: RunPaths) -> dict[str, Any]:
    """Megatron-Bridge's TokenizerConfig fields. Mock data needs no tokenizer files: the
    recipes use NullTokenizer with the model's vocabulary size; real data names its files."""
    vocab = run.spec.architecture.vocab_size
    if paths.dataset_prefix is None:
        return {"tokenizer_type": "NullTokenizer", "vocab_size": vocab}
    fields = tokenizer_settings(run.tokenizer, paths.data_mount, paths.gpt2_dir)
    if fields["library"] == "huggingface":
        return {"tokenizer_type": "HuggingFaceTokenizer", "tokenizer_model": fields["type"]}
    if fields["library"] == "sentencepiece":
        return {"tokenizer_type": "SentencePieceTokenizer", "tokenizer_model": fields["model"]}
    return {
        "tokenizer_type": "GPT2BPETokenizer",
        "vocab_file": fields["vocab_file"],
        "merge_file": fields["merge_file"],
    }


def settings(run: RunSpec, paths: RunPaths, machine: MachineType) -> dict[str, Any]:
    """The settings `payload/megatron_bridge_pretrain.py` builds the run's ConfigContainer from,
    by Megatron-Bridge's field names (megatron/bridge/training/config.py@21b02e0)."""
    spec, s, recipe = run.spec, run.settings, run.recipe
    if recipe.framework is not Framework.MEGATRON_BRIDGE or spec.hugging_face is None:
        raise ValueError(f"{spec.name} has no Megatron-Bridge recipe with a Hugging Face model on {machine.name}")
    return {
        "runName": run.name,
        # The model's config.json, which the launcher builds the model from as the library's recipes do.
        "huggingFace": {"repository": spec.hugging_face.repository, "config": spec.hugging_face_config()},
        "worldSize": run.nodes * machine.gpus,
        "model": {
            "tensor_model_parallel_size": s.tensor_parallel,
            "pipeline_model_parallel_size": s.pipeline_parallel,
            "virtual_pipeline_model_parallel_size": s.virtual_pipeline,
            "context_parallel_size": s.context_parallel,
            "sequence_parallel": s.tensor_parallel > 1,
            "seq_length": s.sequence_length,
            # Each expert whole on one GPU, as every cited MoE recipe passes (ETP 1).
            **(
                {"expert_model_parallel_size": s.expert_parallel, "expert_tensor_parallel_size": 1}
                if spec.architecture.experts
                else {}
            ),
            **({"mtp_num_layers": spec.architecture.mtp_layers} if spec.architecture.mtp_layers else {}),
        },
        "recipeFields": recipe_fields(run, machine),
        "moeA2aOverlap": moe_a2a_overlap(run),
        "commOverlapSetup": recipe.comm_overlap_setup,
        "train": {
            "train_iters": s.steps,
            "global_batch_size": s.global_batch_size,
            "micro_batch_size": s.micro_batch_size,
        },
        "mixedPrecision": mixed_precision(run, machine),
        "tpOverlapConfig": tp_overlap(run, machine),
        # On with the tuned configuration, or with Transformer Engine's where the recipe says so.
        "tpOverlap": tp_overlap(run, machine) is not None or recipe.tp_comm_overlap,
        "recomputeLayers": s.recompute_layers,
        "recomputeModules": list(recipe.recompute_modules),
        "cudaGraphs": (
            {"impl": recipe.cuda_graphs.impl, "scope": list(recipe.cuda_graphs.scope)} if recipe.cuda_graphs else None
        ),
        "dataset": {
            "seq_length": s.sequence_length,
            # Megatron's blend: prefixes of .bin/.idx pairs, equal weights; none trains on mock data.
            "blend": [[paths.dataset_prefix], None] if paths.dataset_prefix else None,
            "path_to_cache": f"{paths.experiment_dir}/index_mapping",
        },
        "tokenizer": tokenizer(run, paths),
        "checkpoint": {
            "save": paths.checkpoint_dir,
            "load": paths.checkpoint_dir if run.resume else None,
            "save_interval": in_loop_interval(run) if paths.checkpoint_dir else None,
            "async_save": paths.checkpoint_dir is not None,
        },
        "logger": {"log_interval": 1, "tensorboard_dir": f"{paths.experiment_dir}/tensorboard"},
        "profiling": (
            {
                "use_nsys_profiler": True,
                "profile_step_start": run.profile.start_step,
                "profile_step_end": run.profile.end_step,
                "profile_ranks": [0],
            }
            if run.profile
            else None
        ),
        "dlloggerFile": paths.dllogger_file,
        "stepRecord": step_record(run, machine),
        # Megatron Core's StragglerDetector through Megatron-Bridge's StragglerDetectionConfig
        # (training/config.py@v0.3.0): rank 0 logs the fastest and slowest rank at every log
        # interval (one step), and the STRAGGLER_RANKS of lowest throughput.
        "straggler": (
            {"log_straggler": True, "straggler_minmax_count": min(STRAGGLER_RANKS, run.nodes * machine.gpus)}
            if run.stragglers
            else None
        ),
        "overrides": dict(run.overrides),
    }


def recipe_fields(run: RunSpec, machine: MachineType) -> dict[str, Any]:
    """The ConfigContainer fields of the run's recipe: the recipe's own; what its entry point
    derives from the layout and precision (scripts/performance/utils/overrides.py@21b02e0
    set_post_overrides: BF16 runs keep their optimizer state through the precision-aware
    optimizer, and with data, pipeline and virtual pipeline parallelism all above 1 the parameter
    gather overlaps the optimizer step, except in MXFP8 where it "causes NaN grad norm"; FP8 with
    current scaling in the first and last layers too, as its get_precision_config sets it); the
    fields the model needs with context parallelism; and the uneven pipeline split the recipe
    names for the run's layout (Megatron Core derives the virtual pipeline size from it)."""
    s, recipe = run.settings, run.recipe
    fields: dict[str, Any] = {}
    precision = mixed_precision(run, machine)
    if precision == "bf16_mixed":
        fields["optimizer.use_precision_aware_optimizer"] = True
    if precision == "bf16_with_fp8_current_scaling_mixed":
        # FP8 in every layer, the first and last included (utils/precision.py get_precision_config).
        fields["mixed_precision.first_last_layers_bf16"] = False
    data_parallel = run.nodes * machine.gpus // s.model_parallel
    interleaved = s.pipeline_parallel > 1 and (s.virtual_pipeline or 1) > 1
    # Only in a run that saves no checkpoint: the library leaves it off "due to an issue with
    # checkpointing" (training/comm_overlap.py@21b02e0 _get_optimizer_overlap_cfgs), and NVIDIA's
    # scripts, which turn it on, save none (utils/overrides.py: checkpoint.save None).
    if data_parallel > 1 and interleaved and "mxfp8" not in precision and not run.checkpoint:
        fields["optimizer.overlap_param_gather_with_optimizer_step"] = True
    fields |= recipe.config_fields
    if s.context_parallel > 1:
        fields |= recipe.context_parallel_fields
    layout = recipe.pipeline_layouts.get((s.pipeline_parallel, s.virtual_pipeline or 1))
    if layout:
        fields["model.pipeline_model_parallel_layout"] = layout
    return fields


def check_stragglers(run: RunSpec) -> None:
    """RuleError (key relative to the run) where Megatron Core's straggler detector cannot time
    the run's steps. It times the model's forward call (Megatron-Bridge training/gpt_step.py@v0.3.0):
    a step that replays a full-iteration CUDA graph never makes that call, and the detector's
    report then divides by the zero it timed (megatron-core 0.16 utils.py, StragglerDetector.report),
    on every rank; with the experts' all-to-all overlapped, the call only builds the schedule's
    plan, so its times say nothing of the ranks' speed."""
    if not run.stragglers:
        return
    graphs = run.recipe.cuda_graphs
    if graphs is not None and "full_iteration" in graphs.scope:
        why = (
            f"{run.model}'s recipe on this machine replays whole steps as a CUDA graph, which the detector cannot time"
        )
        raise RuleError("stragglers", True, why)
    if moe_a2a_overlap(run):
        why = (
            f"{run.model}'s recipe overlaps the experts' all-to-all, where the detector times only the step's planning"
        )
        raise RuleError("stragglers", True, why)


def moe_a2a_overlap(run: RunSpec) -> bool:
    """The recipe's expert all-to-all overlap, where the run's layout allows it: experts spread
    over GPUs and, with pipeline parallelism, a virtual pipeline (Megatron-Bridge
    training/comm_overlap.py@21b02e0 and Megatron Core transformer_config.py refuse it otherwise).
    A run that changes its pipeline keeps its layout without the overlap, as it does without the
    recipe's virtual pipeline."""
    s = run.settings
    return (
        run.recipe.moe_a2a_overlap
        and s.expert_parallel > 1
        and (s.pipeline_parallel == 1 or s.virtual_pipeline is not None)
    )


def perf_env(run: RunSpec, machine: MachineType) -> dict[str, str]:
    """A Megatron-Bridge run's environment, as NVIDIA's performance scripts launch the recipe: the
    executor's (facts.models.BRIDGE_EXECUTOR_ENV), what the recipe carries, and what PerfEnvPlugin
    derives from the GPU and the layout (scripts/performance/perf_plugins.py@21b02e0,
    PerfEnvPlugin.setup): 8 CUDA connections, 32 on Blackwell or with a flexible token
    dispatcher, but 1 on Hopper with tensor or context parallelism and no expert all-to-all
    overlap; layer-norm SM margins of 16, 20 with a flexible dispatcher; the recipe's pipeline
    chunk only with pipeline parallelism; the HybridEP dispatcher's NVLink domain
    (_set_nvl_domain_size: NVL8 on H100 and B200, NVL72 with multi-node NVLink on GB200). Every
    run takes it, whether or not the recipe's own launcher goes through the plugin: it is the
    environment NVIDIA's published rows were measured in (tools/parity.py compares the two).
    Where the machine's GPUDirect flavour needs the same variable (A3 Mega's SM margins), its
    value wins; a flavour's reference-recipe tuning (the RDMA flavour's margins of 8) yields to
    these (planners.nemo.platform_env)."""
    recipe, s = run.recipe, run.settings
    env = {**BRIDGE_EXECUTOR_ENV, **recipe.env}
    if s.pipeline_parallel == 1:
        env.pop("NCCL_P2P_NET_CHUNKSIZE", None)
    backend = recipe.config_fields.get("model.moe_flex_dispatcher_backend")
    connections = 32 if backend else 8
    if machine.accelerator.compute_capability >= SM100:
        connections = 32
    elif (s.tensor_parallel > 1 or s.context_parallel > 1) and not moe_a2a_overlap(run):
        connections = 1
    margin = "20" if backend else "16"
    env |= {
        "CUDA_DEVICE_MAX_CONNECTIONS": str(connections),
        "NVTE_FWD_LAYERNORM_SM_MARGIN": margin,
        "NVTE_BWD_LAYERNORM_SM_MARGIN": margin,
    }
    if backend == "hybridep":
        domain = machine.nvlink_domain_gpus
        env |= {
            "NVLINK_DOMAIN_SIZE": str(domain),
            "USE_MNNVL": "1" if domain > machine.gpus else "0",
            "NUM_OF_HYBRID_EP_RANKS_PER_NVLINK_DOMAIN": str(min(s.expert_parallel, domain)),
        }
    return env


def in_loop_interval(run: RunSpec) -> int | None:
    """The library saves every `save_interval` steps in its training loop (training/train.py,
    step % save_interval == 0) and once more after the loop, whatever the step (training/
    pretrain.py: save, step != 0 and save_interval != 0; Megatron-Bridge 0.3.0). An interval
    that reaches the run's end would save its last step twice: None leaves only the save after
    the loop."""
    return run.checkpoint_interval_steps if run.checkpoint_interval_steps < run.settings.steps else None


def checkpoint_saves(steps: int, interval: int) -> int:
    return (steps // interval if interval < steps else 0) + 1


def files(run: RunSpec, paths: RunPaths, machine: MachineType) -> dict[str, str]:
    return {
        SCRIPT: payload.text(SCRIPT),
        STEP_RECORD_MODULE: payload.text(STEP_RECORD_MODULE),
        RUN_SETTINGS: json.dumps(settings(run, paths, machine), indent=2),
    }


RUNTIME = Runtime(
    framework=Framework.MEGATRON_BRIDGE,
    files=files,
    entrypoint=(f"{WORKLOAD_DIR}/{SCRIPT}", ()),
    perf_env=perf_env,
    keyed_overrides=KEYED_OVERRIDES,
    checkpoint_saves=checkpoint_saves,
    # The launcher saves in the background (CheckpointConfig.async_save, torch_dist format).
    async_checkpoint=lambda run: True,
    settings_file=f"{WORKLOAD_DIR}/{RUN_SETTINGS}",
    preflight_flag=PREFLIGHT_FLAG,
)
