"""What a training run executes: the launcher, and its NeMo configuration.

NeMo 1.x runs get a complete Hydra config for `megatron_gpt_pretraining.py`; NeMo 2.0 runs
get a JSON settings file read by `scripts/nemo2_pretrain.py`, which applies it to the
model's NeMo recipe and calls `llm pretrain`. Both are pure data built here and shipped to
the pods in a ConfigMap next to `scripts/launch.sh` (the scripts the pods run live beside
this module).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import payload
from facts import resiliency, versions
from facts.errors import RuleError
from facts.gke import GCSFUSE_CSI_DRIVER, GCSFUSE_HOST_NETWORK_KSA
from facts.kubernetes import (
    COMPLETION_INDEX_ANNOTATION,
    JOBSET_NAME_LABEL,
    RESTART_ATTEMPT_LABEL,
    RUN_REPLICATED_JOB,
    TRAINING_CONTAINER,
)
from facts.machines import MachineType
from facts.models import MXFP8_MIN_COMPUTE_CAPABILITY, Fp8Scaling, Framework, Recipe
from planners.gpudirect import PodNetworking
from planners.runs import RunSpec, Tokenizer

# Where the run's ConfigMap is mounted.
WORKLOAD_DIR = "/workload"
LAUNCHER = "launch.sh"
# Sourced by the launcher and the fabric check: the GPUDirect init script, the platform's NCCL
# settings kept over it.
NCCL_INIT = "nccl_init.sh"
# A stand-in for NVIDIA's dllogger package (absent from the NeMo images): the launcher puts it on
# PYTHONPATH, so NeMo's DLLogger writes the metrics file without installing anything at start.
DLLOGGER = "dllogger.py"
PYTHON_DIR = "python"
NEMO1_CONFIG = "nemo-config.yaml"
NEMO2_SCRIPT = "nemo2_pretrain.py"
NEMO2_SETTINGS = "run.json"
# Megatron-Bridge's launcher; it reads its settings from NEMO2_SETTINGS too.
BRIDGE_SCRIPT = "megatron_bridge_pretrain.py"
# Its mode that builds and validates the run's configuration and exits (payload's main()).
PREFLIGHT_FLAG = "--check"
NEMO1_ENTRYPOINT = "/opt/NeMo/examples/nlp/language_modeling/megatron_gpt_pretraining.py"
PREPROCESS_SCRIPT = "/opt/NeMo/scripts/nlp_language_modeling/preprocess_data_for_megatron.py"
# Node-local scratch on the local NVMe SSDs (ephemeral storage).
LOCAL_SSD = "/ssd"
# The public GPT-2 BPE files, mounted read-only (facts.versions).
GPT2_TOKENIZER_DIR = "/tokenizers/gpt2"
# Off GKE (no Cloud Storage FUSE), the same two files are expected in the data claim, here.
GPT2_IN_DATA = "tokenizers/gpt2"


def gpt2_dir(data_mount: str, gke: bool) -> str:
    return GPT2_TOKENIZER_DIR if gke else f"{data_mount}/{GPT2_IN_DATA}"


MASTER_PORT = 6002
# Set from the pod's own metadata (downward API), before every other variable so that those can
# refer to them as $(NAME): the JobSet's name (the run's name and a digest of its definition),
# the node rank and the restart attempt.
FIELD_ENV = {
    "JOBSET_NAME": f"metadata.labels['{JOBSET_NAME_LABEL}']",
    "JOB_COMPLETION_INDEX": f"metadata.annotations['{COMPLETION_INDEX_ANNOTATION}']",
    "JOBSET_RESTART_ATTEMPT": f"metadata.labels['{RESTART_ATTEMPT_LABEL}']",
}


@dataclass(frozen=True)
class RunPaths:
    """Where a run reads and writes, inside its pods."""

    experiment_dir: str
    checkpoint_dir: str | None
    # Megatron .bin/.idx prefix the trainer reads; None for mock data.
    dataset_prefix: str | None
    # Prefix on the data bucket to copy to local SSD first, when the run asks for a copy.
    dataset_source: str | None
    data_mount: str
    # Local checkpoints on the node's SSD (facts.resiliency); None: off.
    local_checkpoint_dir: str | None = None
    # Where the GPT-2 BPE files are (gpt2_dir).
    gpt2_dir: str = GPT2_TOKENIZER_DIR

    @property
    def dllogger_file(self) -> str:
        return f"{self.experiment_dir}/dllogger.json"


def run_paths(run: RunSpec, experiments_dir: str, checkpoint_mount: str, data_mount: str, gke: bool = True) -> RunPaths:
    prefix = run.dataset_prefix
    on_bucket = f"{data_mount}/{prefix}" if prefix else None
    local = f"{LOCAL_SSD}/data/{Path(prefix).name}" if prefix and run.copy_dataset_to_local_ssd else None
    return RunPaths(
        experiment_dir=f"{experiments_dir}/{run.name}",
        checkpoint_dir=f"{checkpoint_mount}/{run.name}" if run.checkpoint else None,
        dataset_prefix=local or on_bucket,
        dataset_source=on_bucket if local else None,
        data_mount=data_mount,
        local_checkpoint_dir=(
            f"{resiliency.LOCAL_CHECKPOINT_MOUNT}/{run.name}"
            if run.resiliency.local_checkpoint_interval_steps
            else None
        ),
        gpt2_dir=gpt2_dir(data_mount, gke),
    )


# Nothing a pod needs comes from the internet at start: Hugging Face libraries stay offline.
OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def tokenizer_settings(tokenizer: Tokenizer, data_mount: str, gpt2: str = GPT2_TOKENIZER_DIR) -> dict[str, Any]:
    """NeMo's tokenizer fields. Every file is local: the GPT-2 BPE files on their read-only
    volume, a sentencepiece model or a Hugging Face tokenizer folder in the data bucket."""
    files = tokenizer.uses_gpt2_files
    in_bucket = f"{data_mount}/{tokenizer.model}" if tokenizer.model else None
    return {
        "library": tokenizer.library,
        # A Hugging Face tokenizer is loaded from its folder, never by model ID from the Hub.
        "type": in_bucket if tokenizer.library == "huggingface" else tokenizer.type,
        "model": in_bucket if tokenizer.library == "sentencepiece" else None,
        "vocab_file": f"{gpt2}/{versions.GPT2_VOCAB_FILE}" if files else None,
        "merge_file": f"{gpt2}/{versions.GPT2_MERGES_FILE}" if files else None,
        "delimiter": None,
    }


def tokenizer_volumes(tokenizer: Tokenizer) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The read-only GPT-2 files volume and its mount, when the tokenizer uses them."""
    if not tokenizer.uses_gpt2_files:
        return [], []
    volume = {
        "name": "gpt2-tokenizer",
        "csi": {
            "driver": GCSFUSE_CSI_DRIVER,
            "readOnly": True,
            "volumeAttributes": {
                "bucketName": versions.GPT2_TOKENIZER_BUCKET,
                "mountOptions": f"implicit-dirs,only-dir={versions.GPT2_TOKENIZER_FOLDER}",
                **GCSFUSE_HOST_NETWORK_KSA,
            },
        },
    }
    return [volume], [{"name": "gpt2-tokenizer", "mountPath": GPT2_TOKENIZER_DIR, "readOnly": True}]


def _set_dotted(config: dict[str, Any], dotted: str, value: Any) -> None:
    *path, last = dotted.split(".")
    for part in path:
        config = config.setdefault(part, {})
    config[last] = value


def nemo1_config(run: RunSpec, paths: RunPaths, machine: MachineType) -> dict[str, Any]:
    """A complete NeMo 1.x Hydra config for a GPT model (layout of the public recipes)."""
    spec, s = run.spec, run.settings
    arch, recipe = spec.architecture, run.recipe
    if recipe.framework is not Framework.NEMO1 or recipe.learning_rate is None:
        raise ValueError(f"{spec.name} is not a NeMo 1 model with an optimizer in the catalog")
    checkpoint = paths.checkpoint_dir is not None
    config: dict[str, Any] = {
        "run": {"name": run.name},
        "trainer": {
            "devices": machine.gpus,
            "num_nodes": run.nodes,
            "accelerator": "gpu",
            "precision": "bf16",
            "logger": False,  # exp_manager owns the loggers
            "enable_checkpointing": False,  # exp_manager owns the checkpoint callback
            "use_distributed_sampler": False,
            "max_epochs": None,
            "max_steps": s.steps,
            "max_time": "29:23:59:59",
            "log_every_n_steps": 1,
            "val_check_interval": s.steps,
            "limit_val_batches": 0.0,
            "limit_test_batches": 0,
            "accumulate_grad_batches": 1,
            "gradient_clip_val": 1.0,
        },
        "exp_manager": {
            "explicit_log_dir": paths.experiment_dir,
            "exp_dir": None,
            "name": "megatron_gpt",
            "create_wandb_logger": False,
            "create_tensorboard_logger": True,
            "create_dllogger_logger": True,
            "dllogger_logger_kwargs": {"verbose": True, "stdout": True, "json_file": paths.dllogger_file},
            "resume_if_exists": checkpoint and run.resume,
            "resume_ignore_no_checkpoint": True,
            "create_checkpoint_callback": checkpoint,
            "checkpoint_callback_params": {
                "dirpath": paths.checkpoint_dir,
                "monitor": "step",
                "mode": "max",
                "save_top_k": 3,
                "save_last": True,
                "every_n_train_steps": run.checkpoint_interval_steps,
                "always_save_nemo": False,
                "save_nemo_on_train_end": False,
                "filename": "megatron_gpt--{step}-{consumed_samples}",
                "model_parallel_size": s.tensor_parallel * s.pipeline_parallel,
            },
            "log_step_timing": True,
            "step_timing_kwargs": {"sync_cuda": True, "buffer_size": 5},
        },
        "model": {
            "micro_batch_size": s.micro_batch_size,
            "global_batch_size": s.global_batch_size,
            "rampup_batch_size": None,
            "tensor_model_parallel_size": s.tensor_parallel,
            "pipeline_model_parallel_size": s.pipeline_parallel,
            "virtual_pipeline_model_parallel_size": s.virtual_pipeline,
            "context_parallel_size": s.context_parallel,
            "sequence_parallel": s.tensor_parallel > 1,
            "encoder_seq_length": s.sequence_length,
            "max_position_embeddings": s.sequence_length,
            "num_layers": arch.layers,
            "hidden_size": arch.hidden,
            "ffn_hidden_size": arch.ffn_hidden,
            "num_attention_heads": arch.heads,
            "num_query_groups": None if arch.kv_heads == arch.heads else arch.kv_heads,
            "init_method_std": recipe.init_std,
            "hidden_dropout": recipe.dropout,
            "attention_dropout": recipe.dropout,
            "kv_channels": None,
            "apply_query_key_layer_scaling": True,
            "layernorm_epsilon": 1.0e-5,
            "make_vocab_size_divisible_by": 128,
            "pre_process": True,
            "post_process": True,
            "persist_layer_norm": True,
            "gradient_as_bucket_view": True,
            "grad_div_ar_fusion": True,
            "gradient_accumulation_fusion": True,
            "bias_activation_fusion": True,
            "bias_dropout_add_fusion": True,
            "masked_softmax_fusion": True,
            "tokenizer": tokenizer_settings(run.tokenizer, paths.data_mount, paths.gpt2_dir),
            "native_amp_init_scale": 4294967296,
            "native_amp_growth_interval": 1000,
            "hysteresis": 2,
            "fp32_residual_connection": False,
            "fp16_lm_cross_entropy": False,
            "megatron_amp_O2": True,
            "grad_allreduce_chunk_size_mb": 125,
            "mcore_gpt": True,
            "transformer_engine": True,
            "fp8": s.fp8,
            "fp8_e4m3": False,
            "fp8_hybrid": True,
            "fp8_margin": 0,
            "fp8_interval": 1,
            "fp8_amax_history_len": 1024,
            "fp8_amax_compute_algo": "max",
            "fp8_wgrad": True,
            "ub_tp_comm_overlap": False,
            "seed": 1234,
            "sync_batch_comm": False,
            "use_cpu_initialization": False,
            "onnx_safe": False,
            "apex_transformer_log_level": 30,
            "overlap_p2p_comm": s.pipeline_parallel > 1,
            "batch_p2p_comm": s.pipeline_parallel == 1,
            "nsys_profile": {
                "enabled": run.profile is not None,
                "trace": ["nvtx", "cuda"],
                "start_step": run.profile.start_step if run.profile else 0,
                "end_step": run.profile.end_step if run.profile else 0,
                "ranks": [0],
                "gen_shape": False,
            },
            "optim": {
                "name": "distributed_fused_adam",
                "lr": recipe.learning_rate,
                "weight_decay": 0.1,
                "betas": [0.9, 0.95],
                "bucket_cap_mb": 220,
                "overlap_grad_sync": True,
                "overlap_param_sync": True,
                "contiguous_grad_buffer": True,
                "grad_sync_dtype": "bf16",
                "sched": {
                    "name": "CosineAnnealing",
                    "warmup_steps": 115,
                    "constant_steps": 12500,
                    "min_lr": recipe.learning_rate / 10,
                },
            },
            "data": {
                "data_impl": "mmap" if paths.dataset_prefix else "mock",
                "data_prefix": [1.0, paths.dataset_prefix] if paths.dataset_prefix else [],
                "splits_string": "99990,8,2",
                "seq_length": s.sequence_length,
                "skip_warmup": True,
                "num_workers": 2,
                "dataloader_type": "single",
                "reset_position_ids": False,
                "reset_attention_mask": False,
                "eod_mask_loss": False,
                "exchange_indices_distributed": True,
                "index_mapping_dir": f"{paths.experiment_dir}/index_mapping",
            },
        },
    }
    for key, value in run.overrides.items():
        _set_dotted(config, key, value)
    return config


def tp_overlap(run: RunSpec, machine: MachineType) -> str | None:
    """The userbuffers configuration NeMo's performance scripts tuned for this model on this GPU,
    precision and tensor-parallel size, if any."""
    s = run.settings
    for overlap in run.recipe.tp_overlaps:
        if (overlap.compute_capability, overlap.fp8, overlap.tensor_parallel) == (
            machine.accelerator.compute_capability,
            s.fp8,
            s.tensor_parallel,
        ):
            return overlap.config
    return None


def nemo2_settings(run: RunSpec, paths: RunPaths, machine: MachineType) -> dict[str, Any]:
    """The settings `scripts/nemo2_pretrain.py` applies to the model's NeMo 2 recipe."""
    spec, s, recipe = run.spec, run.settings, run.recipe
    if recipe.framework is not Framework.NEMO2 or recipe.factory is None:
        raise ValueError(f"{spec.name} is not a NeMo 2 model with a recipe factory in the catalog")
    tokenizer = tokenizer_settings(run.tokenizer, paths.data_mount, paths.gpt2_dir)
    return {
        "runName": run.name,
        "factory": recipe.factory,
        "nodes": run.nodes,
        "gpusPerNode": machine.gpus,
        "steps": s.steps,
        "tensorParallel": s.tensor_parallel,
        "pipelineParallel": s.pipeline_parallel,
        "virtualPipeline": s.virtual_pipeline,
        "contextParallel": s.context_parallel,
        "sequenceLength": s.sequence_length,
        "globalBatchSize": s.global_batch_size,
        "microBatchSize": s.micro_batch_size,
        "fp8": s.fp8,
        "fp8Scaling": recipe.fp8_scaling.value,
        "pipelineSplitCountsEmbeddingAndLoss": recipe.pipeline_split_counts_embedding_and_loss,
        "tpOverlapConfig": tp_overlap(run, machine),
        "datasetPrefix": paths.dataset_prefix,
        "tokenizer": {
            "library": tokenizer["library"],
            "type": tokenizer["type"],
            "model": tokenizer["model"],
            "vocabFile": tokenizer["vocab_file"],
            "mergesFile": tokenizer["merge_file"],
        },
        "logDir": paths.experiment_dir,
        "dlloggerFile": paths.dllogger_file,
        "checkpointDir": paths.checkpoint_dir,
        "checkpointInterval": run.checkpoint_interval_steps,
        "resume": run.resume,
        "profile": {"startStep": run.profile.start_step, "endStep": run.profile.end_step} if run.profile else None,
        "resiliency": {
            "faultTolerance": run.resiliency.heartbeats,
            "asyncCheckpoint": run.resiliency.async_checkpoint,
            "localCheckpointDir": paths.local_checkpoint_dir,
            "localCheckpointInterval": run.resiliency.local_checkpoint_interval_steps,
        },
        "overrides": dict(run.overrides),
    }


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


def bridge_tokenizer(run: RunSpec, paths: RunPaths) -> dict[str, Any]:
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


def bridge_settings(run: RunSpec, paths: RunPaths, machine: MachineType) -> dict[str, Any]:
    """The settings `payload/megatron_bridge_pretrain.py` builds the run's ConfigContainer from,
    by Megatron-Bridge's field names (megatron/bridge/training/config.py@21b02e0)."""
    spec, s, recipe = run.spec, run.settings, run.recipe
    if recipe.framework is not Framework.MEGATRON_BRIDGE or recipe.provider is None:
        raise ValueError(f"{spec.name} has no Megatron-Bridge recipe with a model provider on {machine.name}")
    return {
        "runName": run.name,
        "provider": recipe.provider,
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
        "train": {
            "train_iters": s.steps,
            "global_batch_size": s.global_batch_size,
            "micro_batch_size": s.micro_batch_size,
        },
        "mixedPrecision": mixed_precision(run, machine),
        "tpOverlapConfig": tp_overlap(run, machine),
        "recomputeLayers": recipe.recompute_layers,
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
        "tokenizer": bridge_tokenizer(run, paths),
        "checkpoint": {
            "save": paths.checkpoint_dir,
            "load": paths.checkpoint_dir if run.resume else None,
            "save_interval": run.checkpoint_interval_steps if paths.checkpoint_dir else None,
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
    if data_parallel > 1 and s.pipeline_parallel > 1 and (s.virtual_pipeline or 1) > 1 and "mxfp8" not in precision:
        fields["optimizer.overlap_param_gather_with_optimizer_step"] = True
    fields |= recipe.config_fields
    if s.context_parallel > 1:
        fields |= recipe.context_parallel_fields
    layout = recipe.pipeline_layouts.get((s.pipeline_parallel, s.virtual_pipeline or 1))
    if layout:
        fields["model.pipeline_model_parallel_layout"] = layout
    return fields


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


def workload_files(run: RunSpec, paths: RunPaths, machine: MachineType) -> dict[str, str]:
    """The run's ConfigMap: the launcher and the configuration of its framework."""
    files = {name: payload.text(name) for name in (LAUNCHER, NCCL_INIT, DLLOGGER)}
    framework = run.recipe.framework
    if framework is Framework.NEMO1:
        # JSON is YAML: Hydra reads it as is.
        files[NEMO1_CONFIG] = json.dumps(nemo1_config(run, paths, machine), indent=2)
    elif framework is Framework.NEMO2:
        files[NEMO2_SCRIPT] = payload.text(NEMO2_SCRIPT)
        files[NEMO2_SETTINGS] = json.dumps(nemo2_settings(run, paths, machine), indent=2)
    else:
        files[BRIDGE_SCRIPT] = payload.text(BRIDGE_SCRIPT)
        files[NEMO2_SETTINGS] = json.dumps(bridge_settings(run, paths, machine), indent=2)
    return files


def file_path(name: str) -> str:
    """Where a file of the run's ConfigMap appears under WORKLOAD_DIR."""
    return f"{PYTHON_DIR}/{name}" if name == DLLOGGER else name


def entrypoint(recipe: Recipe) -> tuple[str, list[str]]:
    """The script torchrun starts on every node and its arguments."""
    if recipe.framework is Framework.NEMO1:
        return NEMO1_ENTRYPOINT, [f"--config-path={WORKLOAD_DIR}", f"--config-name={NEMO1_CONFIG}"]
    if recipe.framework is Framework.NEMO2:
        return f"{WORKLOAD_DIR}/{NEMO2_SCRIPT}", ["--yes"]
    return f"{WORKLOAD_DIR}/{BRIDGE_SCRIPT}", []


def has_preflight(run: RunSpec) -> bool:
    """The run's launcher builds and validates its configuration first (PREFLIGHT_FLAG), so a refused
    one fails the run instead of restarting it (facts.kubernetes.PROGRAM_ERROR_EXIT_CODE)."""
    return run.recipe.framework is Framework.MEGATRON_BRIDGE


def launcher_env(run: RunSpec, paths: RunPaths) -> dict[str, str]:
    """Environment the launcher reads (see scripts/launch.sh)."""
    env = {
        "RUN_NAME": run.name,
        "NEMO_ENTRYPOINT": entrypoint(run.recipe)[0],
        "EXPERIMENT_DIR": paths.experiment_dir,
        "CHECKPOINT_DIR": paths.checkpoint_dir or "",
        "OMP_NUM_THREADS": "12",
        "GLOO_SOCKET_IFNAME": "eth0",
    }
    if run.recipe.framework is not Framework.NEMO1:
        env["NEMO_RUN_SETTINGS"] = f"{WORKLOAD_DIR}/{NEMO2_SETTINGS}"
    if has_preflight(run):
        env["NEMO_PREFLIGHT"] = PREFLIGHT_FLAG
    env.update(OFFLINE_ENV)
    if paths.dataset_source is not None and paths.dataset_prefix is not None:
        env.update(DATASET_SOURCE=paths.dataset_source, DATASET_TARGET=paths.dataset_prefix)
    if run.profile is not None:
        env["NSYS_START_STEP"] = str(run.profile.start_step)
    env.update(resiliency_env(run))
    return env


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


# Blackwell and later: NeMo's PerfEnvPlugin `gpu_sm100_or_newer`, compute capability 10.0 and up.
SM100 = (10, 0)
# PerfEnvPlugin's P2P chunk for pipeline-parallel runs (helpers.build_perf_env_plugin).
PP_COMM_CHUNKSIZE = 2097152


def perf_env(run: RunSpec, machine: MachineType) -> dict[str, str]:
    """What NeMo's performance scripts set for the run's model (Megatron-Bridge's: bridge_perf_env):
    the recipe's constant part, and what PerfEnvPlugin derives from the GPU and the layout (NVIDIA/NeMo
    nemo/lightning/run/plugins.py@8cfedd7, PerfEnvPlugin.setup). Its layernorm SM margin is left
    to the machine's recipe (facts.machines), which the public GKE recipes tune to 8."""
    recipe, s = run.recipe, run.settings
    if recipe.framework is Framework.MEGATRON_BRIDGE:
        return bridge_perf_env(run, machine)
    if not recipe.env:
        return {}
    env = dict(recipe.env)
    sm100_or_newer = machine.accelerator.compute_capability >= SM100
    if sm100_or_newer:
        # "causes an unexpected error" on B200 (scripts/performance/executors.py leaves it off there).
        env.pop("PYTORCH_CUDA_ALLOC_CONF", None)
    if s.tensor_parallel > 1 or s.context_parallel > 1:
        env["CUDA_DEVICE_MAX_CONNECTIONS"] = "32" if sm100_or_newer else "1"
    if s.pipeline_parallel > 1:
        env["NCCL_P2P_NET_CHUNKSIZE"] = str(PP_COMM_CHUNKSIZE)
    return env


def bridge_perf_env(run: RunSpec, machine: MachineType) -> dict[str, str]:
    """A Megatron-Bridge recipe's environment: what it carries, and what Megatron-Bridge's
    PerfEnvPlugin derives from the GPU and the layout where the recipe launches through it
    (scripts/performance/perf_plugins.py@21b02e0, PerfEnvPlugin.setup): 8 CUDA connections, 32 on
    Blackwell or with a flexible token dispatcher, but 1 on Hopper with tensor or context
    parallelism and no expert all-to-all overlap; layer-norm SM margins of 16, 20 with a flexible dispatcher;
    the recipe's pipeline chunk only with pipeline parallelism. The HybridEP dispatcher is always
    told its NVLink domain (_set_nvl_domain_size: NVL8 on H100 and B200, NVL72 with multi-node
    NVLink on GB200), which no other variable describes. Where the machine's recipe tunes the same
    variable (A3 Mega's SM margins), the machine's value wins (platform_env)."""
    recipe, s = run.recipe, run.settings
    env = dict(recipe.env)
    if s.pipeline_parallel == 1:
        env.pop("NCCL_P2P_NET_CHUNKSIZE", None)
    backend = recipe.config_fields.get("model.moe_flex_dispatcher_backend")
    if recipe.perf_env_plugin:
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
    launcher's, the model's performance settings, then the machine's NCCL environment (which
    wins where both tune NCCL, with_nccl_init), and torchrun's rendezvous."""
    numa = {"GPUS_PER_NUMA_NODE": str(machine.gpus_per_numa_node)} if machine.gpus_per_numa_node else {}
    return {
        **with_nccl_init(
            {**launcher_env(run, paths), **perf_env(run, machine), **numa}, machine, networking, own=run.env
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
