"""NeMo 2.0: a JSON settings file that `payload/nemo2_pretrain.py` applies to the model's NeMo
recipe before it calls `llm pretrain`."""

from __future__ import annotations

import json
from types import MappingProxyType
from typing import Any

import payload
from facts.machines import MachineType
from facts.models import Framework
from planners.monitoring import step_record
from planners.runs import RunSpec
from planners.workload import (
    LAYOUT_FIELDS,
    LIGHTNING_STEP_LOG,
    RUN_SETTINGS,
    STEP_RECORD_MODULE,
    WORKLOAD_DIR,
    RunPaths,
    Runtime,
    nemo_perf_env,
    tokenizer_settings,
    tp_overlap,
)

SCRIPT = "nemo2_pretrain.py"
# The recipe paths `payload/nemo2_pretrain.py` sets from a run's keys (Runtime.keyed_overrides).
KEYED_OVERRIDES = MappingProxyType(
    {
        "trainer.max_steps": "steps",
        "trainer.num_nodes": "nodes",
        "trainer.devices": "nodes",
        "data.global_batch_size": "globalBatchSize",
        "data.micro_batch_size": "microBatchSize",
        "data.seq_length": "sequenceLength",
        "model.config.seq_length": "sequenceLength",
        "log.ckpt.every_n_train_steps": "checkpoint.intervalSteps",
        **{f"trainer.strategy.{path}": key for key, path in LAYOUT_FIELDS.items()},
    }
)


def settings(run: RunSpec, paths: RunPaths, machine: MachineType) -> dict[str, Any]:
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
        "pipelineSplitCountsEmbeddingAndLoss": recipe.counts_embedding_and_loss(
            spec.architecture.layers, s.pipeline_parallel, s.virtual_pipeline, run.image_ref
        ),
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
        "stepRecord": step_record(run, machine),
        "resiliency": {
            "faultTolerance": run.resiliency.heartbeats,
            "asyncCheckpoint": run.resiliency.async_checkpoint,
            "localCheckpointDir": paths.local_checkpoint_dir,
            "localCheckpointInterval": run.resiliency.local_checkpoint_interval_steps,
        },
        "overrides": dict(run.overrides),
    }


def async_checkpoint(run: RunSpec) -> bool:
    """The run's `resiliency.asyncCheckpoint`, else the recipe's: NeMo 2's recipes build their
    MegatronStrategy with ckpt_async_save=True (NVIDIA/NeMo nemo/collections/llm/recipes/
    gpt3_175b.py trainer(), as the other llm recipes)."""
    given = run.resiliency.async_checkpoint
    return True if given is None else given


def files(run: RunSpec, paths: RunPaths, machine: MachineType) -> dict[str, str]:
    return {
        SCRIPT: payload.text(SCRIPT),
        STEP_RECORD_MODULE: payload.text(STEP_RECORD_MODULE),
        LIGHTNING_STEP_LOG: payload.text(LIGHTNING_STEP_LOG),
        RUN_SETTINGS: json.dumps(settings(run, paths, machine), indent=2),
    }


RUNTIME = Runtime(
    framework=Framework.NEMO2,
    files=files,
    entrypoint=(f"{WORKLOAD_DIR}/{SCRIPT}", ("--yes",)),
    perf_env=nemo_perf_env,
    keyed_overrides=KEYED_OVERRIDES,
    # Lightning's ModelCheckpoint saves every `every_n_train_steps` steps.
    checkpoint_saves=lambda steps, interval: steps // interval,
    async_checkpoint=async_checkpoint,
    settings_file=f"{WORKLOAD_DIR}/{RUN_SETTINGS}",
)
