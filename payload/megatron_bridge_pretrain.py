"""Megatron-Bridge pretraining of one nemo-gke run, started by torchrun on every node.

Builds the run's ConfigContainer the way Megatron-Bridge's own Llama 3 recipe does
(megatron/bridge/recipes/llama/llama3.py `_llama3_common` at v0.3.0, the release in NeMo 26.02),
the model from its Hugging Face config.json as the recipes build it, from the file's values the
settings carry (`AutoBridge.from_hf_config`, where the recipes download the file), then
sets the run's values from the JSON file named by $NEMO_RUN_SETTINGS (written by nemo-gke) by
their typed fields, validates it, and trains with `pretrain`. Every step also goes to the run's
DLLogger file in the record format `python -m analysis` reads, and so does each checkpoint load's
time (a restart's restore, apart from the rest of its start).

    python megatron_bridge_pretrain.py            train (under torchrun)
    python megatron_bridge_pretrain.py --check    build and validate the configuration only

Runs inside the NeMo Framework container; `make runtime-check` runs `--check` against the pinned
Megatron-Bridge and Megatron Core releases.
"""

import json
import os
import sys
import time

import dllogger
import torch
from megatron.bridge import AutoBridge
from megatron.bridge.recipes.utils.optimizer_utils import distributed_fused_adam_with_cosine_annealing
from megatron.bridge.training import comm_overlap
from megatron.bridge.training.callbacks import Callback
from megatron.bridge.training.config import (
    CheckpointConfig,
    ConfigContainer,
    DistributedDataParallelConfig,
    GPTDatasetConfig,
    LoggerConfig,
    ProfilingConfig,
    RNGConfig,
    StragglerDetectionConfig,
    TokenizerConfig,
    TrainingConfig,
)
from megatron.bridge.training.mixed_precision import get_mixed_precision_config
from step_record import CHECKPOINT_LOAD, StepRecords
from transformers import AutoConfig

# The library recipe's learning-rate schedule (_llama3_common defaults).
LEARNING_RATE, MIN_LEARNING_RATE, WARMUP_STEPS = 3e-4, 3e-5, 2000


# The exit code of a configuration the library refuses (sysexits.h EX_CONFIG): launch.sh passes it
# on, and the run's Job and JobSet fail on it instead of restarting (facts.kubernetes,
# PROGRAM_ERROR_EXIT_CODE).
CONFIG_REFUSED = 78

# Megatron-Bridge's timer of a checkpoint's load (training/setup.py).
LOAD_TIMER = "load-checkpoint"


def load_settings(path):
    with open(path) as settings_file:
        return json.load(settings_file)


def decoded(value):
    """A setting's value as the library takes it: a dtype travels as its name ("torch.bfloat16")."""
    if isinstance(value, str) and value.startswith("torch."):
        return getattr(torch, value.removeprefix("torch."))
    return value


def _set(target, dotted, value):
    *path, last = dotted.split(".")
    for part in path:
        target = getattr(target, part)
    if not hasattr(target, last):
        raise AttributeError(f"override {dotted}: {type(target).__name__} has no field {last!r}")
    setattr(target, last, decoded(value))


def hugging_face_config(hugging_face):
    """transformers' configuration of the model from its repository's config.json, named after
    the repository as a download would be (the provider records it as its hf_model_id)."""
    values = dict(hugging_face["config"])
    return AutoConfig.for_model(values.pop("model_type"), name_or_path=hugging_face["repository"], **values)


def model_provider(settings):
    config = hugging_face_config(settings["huggingFace"])
    provider = AutoBridge.from_hf_config(config).to_megatron_provider(load_weights=False)
    for name, value in settings["model"].items():
        _set(provider, name, value)
    provider.pipeline_dtype = torch.bfloat16 if settings["model"]["pipeline_model_parallel_size"] > 1 else None
    provider.cross_entropy_fusion_impl = "te"
    return provider


def dataset(settings):
    fields = settings["dataset"]
    blend = fields["blend"]
    return GPTDatasetConfig(
        seq_length=fields["seq_length"],
        random_seed=1234,
        reset_attention_mask=False,
        reset_position_ids=False,
        eod_mask_loss=False,
        num_dataset_builder_threads=1,
        blend=(blend[0], blend[1]) if blend else None,
        split="9999,8,2",
        path_to_cache=fields["path_to_cache"],
        data_sharding=True,
        dataloader_type="single",
        skip_getting_attention_mask_from_dataset=True,
    )


def config(settings):
    """The run's ConfigContainer (`pretrain` completes and validates it)."""
    train = settings["train"]
    steps = train["train_iters"]
    optimizer, scheduler = distributed_fused_adam_with_cosine_annealing(
        lr_warmup_iters=min(WARMUP_STEPS, max(1, steps // 10)),
        lr_decay_iters=steps,
        max_lr=LEARNING_RATE,
        min_lr=MIN_LEARNING_RATE,
        adam_eps=1e-5,
    )
    checkpoint = settings["checkpoint"]
    profiling = settings["profiling"]
    overlap = settings["tpOverlapConfig"]
    cfg = ConfigContainer(
        model=model_provider(settings),
        train=TrainingConfig(
            train_iters=steps,
            eval_interval=steps,
            eval_iters=0,
            global_batch_size=train["global_batch_size"],
            micro_batch_size=train["micro_batch_size"],
            manual_gc=True,
            manual_gc_interval=100,
            manual_gc_eval=100,
        ),
        optimizer=optimizer,
        scheduler=scheduler,
        ddp=DistributedDataParallelConfig(
            check_for_nan_in_grad=True,
            grad_reduce_in_fp32=True,
            overlap_grad_reduce=True,
            overlap_param_gather=True,
            average_in_collective=True,
            use_distributed_optimizer=True,
        ),
        dataset=dataset(settings),
        logger=LoggerConfig(
            log_interval=settings["logger"]["log_interval"],
            tensorboard_dir=settings["logger"]["tensorboard_dir"],
            log_timers_to_tensorboard=True,
        ),
        tokenizer=TokenizerConfig(**settings["tokenizer"]),
        checkpoint=CheckpointConfig(
            save=checkpoint["save"],
            load=checkpoint["load"],
            save_interval=checkpoint["save_interval"],
            ckpt_format="torch_dist",
            fully_parallel_save=True,
            # Written by a background worker while training goes on (use_persistent_ckpt_worker).
            async_save=checkpoint["async_save"],
        ),
        rng=RNGConfig(seed=1234),
        profiling=ProfilingConfig(**profiling) if profiling else ProfilingConfig(),
        # Megatron Core's straggler reports in rank 0's output (`stragglers: true`).
        straggler=StragglerDetectionConfig(**settings["straggler"]) if settings.get("straggler") else None,
        # Where the recipe carries one (all but GPT-OSS's): its setup (in runtime_config_update)
        # derives the pipeline's P2P overlap, the gradient buckets and the aligned parameter gather
        # from the layout (training/comm_overlap.py); the tensor-parallel overlap where the catalog
        # has NVIDIA's userbuffers configuration for this GPU, precision and size, or where the
        # recipe turns it on with Transformer Engine's default one.
        comm_overlap=(
            comm_overlap.CommOverlapConfig(
                tp_comm_overlap=settings["tpOverlap"],
                tp_comm_overlap_cfg=getattr(comm_overlap, overlap) if overlap else None,
            )
            if settings["commOverlapSetup"] or settings["tpOverlap"]
            else None
        ),
        mixed_precision=get_mixed_precision_config(settings["mixedPrecision"]),
    )
    performance_settings(cfg, settings)
    # The recipe's own fields, then the run's overrides over them.
    for key, value in {**settings["recipeFields"], **settings["overrides"]}.items():
        _set(cfg, key, value)
        # `pretrain` copies the mixed-precision recipe's fields (MixedPrecisionConfig.setup) and
        # the communication overlap's (CommOverlapConfig.setup) onto the model, optimizer and DDP
        # configurations: a field of one of them goes there too, or it would be replaced without
        # a word.
        section, _, field = key.partition(".")
        if section in ("model", "optimizer", "ddp") and "." not in field:
            for copied_from in (cfg.mixed_precision, cfg.comm_overlap):
                if copied_from is not None and hasattr(copied_from, field):
                    _set(copied_from, field, value)
    return cfg


def performance_settings(cfg, settings):
    """What the recipes' entry point (scripts/performance/run_script.py at v0.3.0) sets on top of
    the library recipe for throughput: no NaN or large-gradient checks, fused RoPE and Transformer
    Engine's cross entropy, gradients reduced in BF16
    (utils/overrides.py _set_common_perf_overrides, configs/llama/llama3_llm_pretrain.py
    set_llama3_common_configs), the recipe's CUDA graphs (_set_cuda_graph_overrides), its recomputed layers
    (_set_recompute_overrides) and its expert all-to-all overlap (_set_moe_a2a_overlap_overrides).
    The learning-rate schedule stays the library recipe's: runs here train, they do not benchmark."""
    cuda_graphs, recompute_layers = settings["cudaGraphs"], settings["recomputeLayers"]
    cfg.ddp.check_for_nan_in_grad = False
    cfg.ddp.check_for_large_grads = False
    cfg.rerun_state_machine.check_for_nan_in_loss = False
    cfg.ddp.grad_reduce_in_fp32 = False
    cfg.mixed_precision.grad_reduce_in_fp32 = False
    cfg.model.apply_rope_fusion = True
    cfg.model.cross_entropy_fusion_impl = "te"
    if settings["moeA2aOverlap"]:
        if cfg.comm_overlap is None:
            cfg.comm_overlap = comm_overlap.CommOverlapConfig(tp_comm_overlap=False)
        cfg.comm_overlap.overlap_moe_expert_parallel_comm = True
        cfg.comm_overlap.delay_wgrad_compute = True
        cfg.model.moe_shared_expert_overlap = False
    if recompute_layers:
        cfg.model.recompute_granularity = "full"
        cfg.model.recompute_method = "block"
        cfg.model.recompute_num_layers = recompute_layers
    if settings["recomputeModules"]:
        cfg.model.recompute_granularity = "selective"
        cfg.model.recompute_modules = settings["recomputeModules"]
    if cuda_graphs:
        cfg.model.cuda_graph_impl = cuda_graphs["impl"]
        cfg.rng.te_rng_tracker = cfg.model.use_te_rng_tracker = True
        cfg.model.cuda_graph_scope = cuda_graphs["scope"]


class StepLog(Callback):
    """Each training step's time and loss as DLLogger records (`train_step_timing in s`,
    `reduced_train_loss`), written by the last rank, which holds the loss; and, with a step
    record (settings `stepRecord`), the step's time on stdout once this process has run its
    warm-up steps."""

    def __init__(self, path, record=None):
        self.path = path
        self.records = StepRecords(record)
        self.started = None
        # (epoch seconds at its start, seconds) of each checkpoint load before training started.
        self.loads = []

    def on_train_start(self, context):
        if torch.distributed.get_rank() == torch.distributed.get_world_size() - 1:
            dllogger.init(backends=[dllogger.JSONStreamBackend(dllogger.Verbosity.VERBOSE, self.path)])
            for started, seconds in self.loads:
                dllogger.log(step=CHECKPOINT_LOAD, data={"started": started, "seconds": round(seconds, 3)})
            dllogger.flush()
        # Written once: a training restarted in this process logs only its own loads.
        self.loads.clear()

    def on_train_step_start(self, context):
        self.started = time.monotonic()

    def on_train_step_end(self, context):
        if torch.distributed.get_rank() != torch.distributed.get_world_size() - 1 or self.started is None:
            return
        # The step's GPU work done before the clock is read, so a step is timed whole.
        loss = (context.loss_dict or {}).get("lm loss")
        loss = float(loss) if loss is not None else None
        torch.cuda.synchronize()
        seconds = time.monotonic() - self.started
        data = {"train_step_timing in s": seconds}
        data["global_step"] = float(context.state.train_state.step)
        if loss is not None:
            data["reduced_train_loss"] = loss
        dllogger.log(step=context.state.train_state.step, data=data)
        dllogger.flush()
        line = self.records.after(context.state.train_state.step, seconds)
        if line is not None:
            print(line, flush=True)


def time_checkpoint_loads(step_log, timers_class):
    """Each checkpoint load's time, as the library's own `load-checkpoint` timer took it, into
    `step_log.loads`. Megatron-Bridge's setup() starts that timer with a barrier before the load,
    stops it with one after (so every rank's time is the slowest rank's) and logs it at once
    (training/setup.py at v0.3.0 and v0.6.2): read as it is logged, before the log resets it."""
    log = timers_class.log

    def logged(timers, names, *args, **kwargs):
        if LOAD_TIMER in names:
            seconds = timers(LOAD_TIMER).elapsed(reset=False)
            step_log.loads.append((time.time() - seconds, seconds))
        return log(timers, names, *args, **kwargs)

    timers_class.log = logged


def first_steps_of_pretrain(cfg):
    """What `pretrain` does first, before it needs a GPU: the mixed-precision and overlap setups
    applied and the library's validate() (runtime_config_update, which reads the run's world
    size), then the micro-batches sized from the batch and the data-parallel size
    (training/initialize.py, Megatron Core's calculator, which refuses a global batch the
    micro-batches of the replicas do not divide)."""
    from megatron.bridge.training.config import runtime_config_update  # noqa: PLC0415
    from megatron.core.num_microbatches_calculator import (  # noqa: PLC0415
        init_num_microbatches_calculator,
        unset_num_microbatches_calculator,
    )

    runtime_config_update(cfg)
    if cfg.straggler is not None and cfg.straggler.log_straggler:
        # The straggler detector reads each GPU's temperature, power, use and clock through
        # torch.cuda, which needs NVML's Python bindings (nvidia-ml-py); without them every rank
        # fails at its first report.
        import pynvml  # noqa: F401, PLC0415
    train = cfg.train
    init_num_microbatches_calculator(
        0,
        train.rampup_batch_size,
        train.global_batch_size,
        train.micro_batch_size,
        cfg.data_parallel_size,
        train.decrease_batch_size_if_needed,
    )
    unset_num_microbatches_calculator()


def main(argv):
    settings = load_settings(os.environ["NEMO_RUN_SETTINGS"])
    if "--check" in argv:
        # Only a refusal of the configuration (or a library without what it names) is
        # CONFIG_REFUSED; any other failure is raised, so the run restarts.
        os.environ.setdefault("WORLD_SIZE", str(settings["worldSize"]))
        try:
            first_steps_of_pretrain(config(settings))
        except (AssertionError, AttributeError, ImportError, KeyError, TypeError, ValueError) as error:
            print(
                f"{settings['runName']}: the configuration is refused: {type(error).__name__}: {error}", file=sys.stderr
            )
            return CONFIG_REFUSED
        print(f"{settings['runName']}: the configuration builds and validates")
        return 0
    from megatron.bridge.training.gpt_step import forward_step  # noqa: PLC0415 - needs the GPU stack
    from megatron.bridge.training.pretrain import pretrain  # noqa: PLC0415
    from megatron.core.timers import Timers  # noqa: PLC0415

    step_log = StepLog(settings["dlloggerFile"], settings.get("stepRecord"))
    time_checkpoint_loads(step_log, Timers)
    pretrain(config=config(settings), forward_step_func=forward_step, callbacks=[step_log])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
