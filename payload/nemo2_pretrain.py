"""NeMo 2.0 pretraining of one nemo-gke run, started by torchrun on every node.

Builds the model's NeMo recipe (`llm.<factory>.pretrain_recipe`) and applies the run's
settings from the JSON file named by $NEMO_RUN_SETTINGS (written by nemo-gke), then hands it
to NeMo-Run's `llm pretrain` entry point. Each step past the warm-up is also printed as the
platform's step record, and each checkpoint load's time goes to the run's DLLogger file
(lightning_step_log.py). Runs inside the NeMo container only.
"""

import json
import os
import re

import fiddle as fdl
import fiddle._src.experimental.dataclasses as fdl_dc
import nemo_run as run
from lightning_step_log import StepLog
from nemo.collections import llm
from nemo.collections.common.tokenizers.huggingface.auto_tokenizer import AutoTokenizer
from nemo.collections.common.tokenizers.sentencepiece_tokenizer import SentencePieceTokenizer
from nemo.collections.llm.gpt.data.mock import MockDataModule
from nemo.collections.llm.gpt.data.pre_training import PreTrainingDataModule
from nemo.collections.llm.recipes.precision import mixed_precision
from nemo.collections.llm.recipes.tp_overlap_configs import userbuffers
from nemo.collections.nlp.modules.common.tokenizer_utils import get_nmt_tokenizer
from nemo.lightning.pytorch.callbacks.megatron_comm_overlap import MegatronCommOverlapCallback
from nemo.lightning.pytorch.callbacks.nsys import NsysCallback
from nemo.utils.loggers.dllogger import DLLogger

with open(os.environ["NEMO_RUN_SETTINGS"]) as settings_file:
    SETTINGS = json.load(settings_file)
RESILIENCY = SETTINGS["resiliency"]


def _set(target, dotted, value):
    *path, last = dotted.split(".")
    for part in path:
        target = getattr(target, part)
    setattr(target, last, value)


def _tokenizer():
    tokenizer = SETTINGS["tokenizer"]
    if tokenizer["library"] == "huggingface":
        return run.Config(AutoTokenizer, pretrained_model_name=tokenizer["type"])
    if tokenizer["library"] == "sentencepiece":
        return run.Config(SentencePieceTokenizer, model_path=tokenizer["model"])
    return run.Config(
        get_nmt_tokenizer,
        library="megatron",
        model_name=tokenizer["type"],
        vocab_file=tokenizer["vocabFile"],
        merges_file=tokenizer["mergesFile"],
    )


def _tp_overlap(pretrain):
    """The userbuffers configuration NeMo's performance script applies for this model and GPU
    (scripts/performance/llm/pretrain_llama31_405b.py), with aggregation off where it turns it off."""
    config = getattr(userbuffers, SETTINGS["tpOverlapConfig"])
    for layer in ("qkv_fprop", "proj_dgrad", "fc1_fprop", "fc2_dgrad"):
        getattr(config, layer).aggregate = False
    callbacks = [c for c in pretrain.trainer.callbacks or [] if c.__fn_or_cls__ == MegatronCommOverlapCallback]
    if not callbacks:
        raise RuntimeError("the recipe has no MegatronCommOverlapCallback to configure TP overlap on")
    # The userbuffers configs are dataclasses, which NeMo-Run cannot serialize: as Configs.
    callbacks[0].tp_comm_overlap_cfg = fdl.cast(run.Config, fdl_dc.convert_dataclasses_to_configs(config))


def _checkpoint_step(path):
    """The step of a persistent checkpoint, from NeMo's `...step=<n>...` directory name."""
    match = re.search(r"step=(\d+)", str(path))
    return int(match.group(1)) if match else -1


def pretrain_with_local_checkpoints(trainer, **kwargs):
    """llm.pretrain with NeMo's local checkpoint I/O on the trainer: each node keeps its own
    state on local SSD, replicated to peers; a restart resumes from the newest of the local and
    persistent checkpoints (nemo/lightning/pytorch/local_ckpt.py)."""
    # Imported only where asked for: NeMo has local checkpoints from 2.3 (25.04 images) on.
    from nemo.lightning.pytorch.local_ckpt import update_trainer_local_checkpoint_io  # noqa: PLC0415

    update_trainer_local_checkpoint_io(trainer, RESILIENCY["localCheckpointDir"], _checkpoint_step)
    return llm.pretrain(trainer=trainer, **kwargs)


def recipe():
    factory = getattr(llm, SETTINGS["factory"])
    pretrain = factory.pretrain_recipe(
        name=SETTINGS["runName"],
        num_nodes=SETTINGS["nodes"],
        num_gpus_per_node=SETTINGS["gpusPerNode"],
        performance_mode=True,
    )
    trainer, strategy = pretrain.trainer, pretrain.trainer.strategy
    trainer.max_steps = SETTINGS["steps"]
    trainer.log_every_n_steps = 1
    trainer.val_check_interval = SETTINGS["steps"]
    trainer.limit_val_batches = 0.0
    strategy.tensor_model_parallel_size = SETTINGS["tensorParallel"]
    strategy.pipeline_model_parallel_size = SETTINGS["pipelineParallel"]
    strategy.virtual_pipeline_model_parallel_size = SETTINGS["virtualPipeline"]
    strategy.context_parallel_size = SETTINGS["contextParallel"]
    strategy.sequence_parallel = SETTINGS["tensorParallel"] > 1
    # The plan's pipeline split, whatever the recipe's own (llama31_405b counts both by default).
    # Images whose strategy predates the fields split the layers alone, and the plan asks no
    # other split of them (facts.models EITHER_SPLIT_IMAGES).
    if hasattr(strategy, "account_for_embedding_in_pipeline_split"):
        strategy.account_for_embedding_in_pipeline_split = SETTINGS["pipelineSplitCountsEmbeddingAndLoss"]
        strategy.account_for_loss_in_pipeline_split = SETTINGS["pipelineSplitCountsEmbeddingAndLoss"]

    seq_length = SETTINGS["sequenceLength"]
    pretrain.model.config.seq_length = seq_length
    batches = {
        "seq_length": seq_length,
        "global_batch_size": SETTINGS["globalBatchSize"],
        "micro_batch_size": SETTINGS["microBatchSize"],
    }
    if SETTINGS["datasetPrefix"]:
        pretrain.data = run.Config(
            PreTrainingDataModule, paths=[SETTINGS["datasetPrefix"]], tokenizer=_tokenizer(), **batches
        )
    else:
        pretrain.data = run.Config(MockDataModule, tokenizer=_tokenizer(), **batches)

    if SETTINGS["fp8"]:
        # Delayed scaling (bf16_with_fp8_mixed), or what the machine's recipe uses: current
        # scaling ("cs" in gpu-recipes' A4 recipes) or MXFP8 on Blackwell.
        plugin = {
            "delayed": "bf16_with_fp8_mixed",  # the only one NeMo 24.x images have
            "current": "bf16_with_fp8_current_scaling_mixed",
            "mxfp8": "bf16_with_mxfp8_mixed",
        }[SETTINGS["fp8Scaling"]]
        pretrain.trainer.plugins = getattr(mixed_precision, plugin)()
    if SETTINGS["tpOverlapConfig"]:
        _tp_overlap(pretrain)

    pretrain.log.explicit_log_dir = SETTINGS["logDir"]
    pretrain.log.extra_loggers = [run.Config(DLLogger, verbose=True, stdout=True, json_file=SETTINGS["dlloggerFile"])]
    if SETTINGS["checkpointDir"]:
        pretrain.log.ckpt.dirpath = SETTINGS["checkpointDir"]
        pretrain.log.ckpt.every_n_train_steps = SETTINGS["checkpointInterval"]
        pretrain.log.ckpt.train_time_interval = None
        pretrain.resume.resume_if_exists = SETTINGS["resume"]
        pretrain.resume.resume_ignore_no_checkpoint = True
        pretrain.resume.resume_from_directory = SETTINGS["checkpointDir"]
    else:
        pretrain.log.ckpt = None
        trainer.enable_checkpointing = False
        pretrain.resume = None

    if RESILIENCY["asyncCheckpoint"] is not None:
        strategy.ckpt_async_save = RESILIENCY["asyncCheckpoint"]
    if RESILIENCY["faultTolerance"]:
        # What NeMo's FaultTolerancePlugin adds (nemo/lightning/run/plugins.py); restarts are
        # the launcher's, so no autoresume.
        from nvidia_resiliency_ext.ptl_resiliency import FaultToleranceCallback  # noqa: PLC0415

        trainer.callbacks.append(
            run.Config(FaultToleranceCallback, autoresume=False, calculate_timeouts=True, exp_dir=SETTINGS["logDir"])
        )
    if RESILIENCY["localCheckpointDir"]:
        from nvidia_resiliency_ext.ptl_resiliency.local_checkpoint_callback import (  # noqa: PLC0415
            LocalCheckpointCallback,
        )

        trainer.callbacks.append(
            run.Config(LocalCheckpointCallback, every_n_train_steps=RESILIENCY["localCheckpointInterval"])
        )
        fdl.update_callable(pretrain, pretrain_with_local_checkpoints)

    if SETTINGS["stepRecord"]:
        trainer.callbacks.append(run.Config(StepLog, record=SETTINGS["stepRecord"]))
    if SETTINGS["profile"]:
        trainer.callbacks.append(
            run.Config(
                NsysCallback,
                start_step=SETTINGS["profile"]["startStep"],
                end_step=SETTINGS["profile"]["endStep"],
                ranks=[0],
                gen_shape=False,
            )
        )
    for key, value in SETTINGS["overrides"].items():
        _set(pretrain, key, value)
    return pretrain


if __name__ == "__main__":
    run.cli.main(
        pretrain_with_local_checkpoints if RESILIENCY["localCheckpointDir"] else llm.pretrain, default_factory=recipe
    )
