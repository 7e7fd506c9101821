"""NeMo 1.x: a complete Hydra config for `megatron_gpt_pretraining.py`, shipped as is."""

from __future__ import annotations

import json
from types import MappingProxyType
from typing import Any

from facts.machines import MachineType
from facts.models import Framework
from planners.runs import RunSpec
from planners.workload import (
    LAYOUT_FIELDS,
    WORKLOAD_DIR,
    RunPaths,
    Runtime,
    nemo_perf_env,
    set_dotted,
    tokenizer_settings,
)

CONFIG = "nemo-config.yaml"
ENTRYPOINT = "/opt/NeMo/examples/nlp/language_modeling/megatron_gpt_pretraining.py"
# The Hydra paths `config` sets from a run's keys (Runtime.keyed_overrides).
KEYED_OVERRIDES = MappingProxyType(
    {
        "trainer.max_steps": "steps",
        "trainer.num_nodes": "nodes",
        "trainer.devices": "nodes",
        "model.global_batch_size": "globalBatchSize",
        "model.micro_batch_size": "microBatchSize",
        "model.encoder_seq_length": "sequenceLength",
        "model.data.seq_length": "sequenceLength",
        "exp_manager.checkpoint_callback_params.every_n_train_steps": "checkpoint.intervalSteps",
        # No expert parallelism: the NeMo 1 models here are dense.
        **{f"model.{path}": key for key, path in LAYOUT_FIELDS.items() if key != "expertParallel"},
    }
)


def config(run: RunSpec, paths: RunPaths, machine: MachineType) -> dict[str, Any]:
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
        set_dotted(config, key, value)
    return config


def files(run: RunSpec, paths: RunPaths, machine: MachineType) -> dict[str, str]:
    # JSON is YAML: Hydra reads it as is.
    return {CONFIG: json.dumps(config(run, paths, machine), indent=2)}


RUNTIME = Runtime(
    framework=Framework.NEMO1,
    files=files,
    entrypoint=(ENTRYPOINT, (f"--config-path={WORKLOAD_DIR}", f"--config-name={CONFIG}")),
    perf_env=nemo_perf_env,
    keyed_overrides=KEYED_OVERRIDES,
    # Lightning's ModelCheckpoint under exp_manager saves every `every_n_train_steps` steps, and
    # exp_manager's checkpoint_callback_params.async_save is False unless set (NeMo Framework
    # user guide, "Migrate Checkpointing Configurations from NeMo 1.0 to NeMo 2.0").
    checkpoint_saves=lambda steps, interval: steps // interval,
    async_checkpoint=lambda run: False,
)
