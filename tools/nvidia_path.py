"""NVIDIA's own ConfigContainer for a run: what Megatron-Bridge's performance entry point
(scripts/performance/run_script.py@21b02e0, the path NVIDIA's published tables and gpu-recipes
run) builds for the same model, GPU, precision and layout, in the same library.

Runs in the runtime environment (tools/runtime_check.py's check process), beside the launcher.
The recipe is the library's own function (megatron.bridge.recipes); the performance scripts'
steps around it are not in the megatron-bridge distribution (PyPI's wheel and sdist carry
src/ only), so each is restated here from its source, in the order run_script.main applies them:
get_perf_optimized_recipe (the family's common settings, the workload's base configuration, the
family's per-GPU tail), set_user_overrides with the parser's defaults but the run's global batch
given (`-gb`, so set_post_overrides does not scale the row's batch to the run's GPUs),
set_post_overrides, and PerfEnvPlugin's CLI overrides (set by run_script.py before the user
overrides; nothing later sets them). The workload's base configuration (layout, batch, CUDA
graphs, recomputation, the expert all-to-all overlap) is the catalog's published row, which the
run's settings carry, and the token dispatcher is NVIDIA's (`reference["dispatcher"]`, where the
catalog leaves it out too); everything else comes from the library and the scripts.

The model's Hugging Face config.json comes from the run's settings instead of a download (as in
the launcher): `AutoBridge.from_hf_pretrained(...)` returns `AutoBridge.from_hf_config` of it.
"""

import dataclasses
import enum
import functools
import importlib

from megatron.bridge import AutoBridge
from megatron.bridge.training import comm_overlap, mixed_precision
from megatron.bridge.training.config import MockGPTDatasetConfig
from megatron.core.transformer.pipeline_parallel_layer_layout import PipelineParallelLayerLayout
from transformers import AutoConfig


def _offline(hugging_face):
    """The recipe's download of the model's config.json, answered from the run's settings."""
    values = dict(hugging_face["config"])
    repository = hugging_face["repository"]
    config = AutoConfig.for_model(values.pop("model_type"), name_or_path=repository, **values)

    def from_hf_pretrained(cls, path, *args, **kwargs):
        if path != repository:
            raise ValueError(f"the recipe reads {path}, the run's settings carry {repository}")
        return cls.from_hf_config(config)

    AutoBridge.from_hf_pretrained = classmethod(from_hf_pretrained)


def precision_config(dtype):
    """utils/precision.py get_precision_config."""
    if dtype == "fp8_cs":
        config = mixed_precision.bf16_with_fp8_current_scaling_mixed()
        config.first_last_layers_bf16 = False
        return config
    return {"fp8_mx": mixed_precision.bf16_with_mxfp8_mixed, "bf16": mixed_precision.bf16_mixed}[dtype]()


def _recipe(settings, reference):
    """The family's config function up to its recipe call (configs/<family>/*_llm_pretrain.py)."""
    family, gpu = reference["family"], reference["gpu"]
    model, recipe_fields = settings["model"], settings["recipeFields"]
    kwargs = {"mock": True, "precision_config": precision_config(reference["dtype"])}
    backend = reference["dispatcher"]
    if family == "qwen":
        kwargs |= {
            "comm_overlap_config": comm_overlap.CommOverlapConfig(tp_comm_overlap=True),
            "moe_flex_dispatcher_backend": backend,
        }
    if family == "deepseek":
        kwargs |= {
            "pipeline_model_parallel_size": model["pipeline_model_parallel_size"],
            "virtual_pipeline_model_parallel_size": model["virtual_pipeline_model_parallel_size"],
            "moe_flex_dispatcher_backend": backend,
            # The B200 and B300 functions pass layout=None; the others the base config's pp_layout.
            "layout": None if gpu in ("b200", "b300") else recipe_fields.get("model.pipeline_model_parallel_layout"),
        }
    module = importlib.import_module(reference["module"])
    return getattr(module, reference["function"])(**kwargs)


def _family_common(cfg, family):
    """set_llama3_common_configs, set_qwen3_common_configs, set_gpt_oss_common_configs,
    set_deepseek_v3_common_configs."""
    cfg.mixed_precision.grad_reduce_in_fp32 = False
    cfg.ddp.grad_reduce_in_fp32 = False
    if family == "llama":
        cfg.model.seq_length = 8192
        cfg.tokenizer.vocab_size = 128256
        cfg.model.should_pad_vocab = True
        return
    cfg.model.moe_router_fusion = True
    cfg.model.moe_router_force_load_balancing = True
    if family == "qwen":
        cfg.model.bias_activation_fusion = True
        cfg.model.recompute_granularity = cfg.model.recompute_method = cfg.model.recompute_num_layers = None
        cfg.model.seq_length = 4096
    if family == "deepseek":
        cfg.model.seq_length = 4096
        cfg.model.recompute_granularity = "selective"
        cfg.dist.enable_megatron_core_experimental = True


def _workload_base(cfg, settings):
    """utils/overrides.py set_workload_base_configs: the layout and batch, CUDA graphs, the
    expert all-to-all overlap, recomputation, then _set_common_perf_overrides."""
    model, train = settings["model"], settings["train"]
    for field in (
        "tensor_model_parallel_size",
        "pipeline_model_parallel_size",
        "context_parallel_size",
        "virtual_pipeline_model_parallel_size",
    ):
        setattr(cfg.model, field, model[field])
    cfg.model.expert_model_parallel_size = model.get("expert_model_parallel_size", 1)
    cfg.model.expert_tensor_parallel_size = model.get("expert_tensor_parallel_size")
    cfg.model.sequence_parallel = model["tensor_model_parallel_size"] > 1
    cfg.train.global_batch_size = train["global_batch_size"]
    cfg.train.micro_batch_size = train["micro_batch_size"]
    graphs = settings["cudaGraphs"]
    if graphs:
        cfg.model.cuda_graph_impl = graphs["impl"]
        cfg.rng.te_rng_tracker = cfg.model.use_te_rng_tracker = graphs["impl"] != "none"
        cfg.model.cuda_graph_scope = graphs["scope"]
    if settings["moeA2aOverlap"]:
        cfg.comm_overlap.overlap_moe_expert_parallel_comm = True
        cfg.comm_overlap.delay_wgrad_compute = True
        cfg.model.moe_shared_expert_overlap = False
    if settings["recomputeLayers"] is not None:
        cfg.model.recompute_granularity = "full"
        cfg.model.recompute_method = "block"
        cfg.model.recompute_num_layers = settings["recomputeLayers"]
    if settings["recomputeModules"]:
        cfg.model.recompute_modules = settings["recomputeModules"]
        cfg.model.recompute_granularity = "selective"
    # _set_common_perf_overrides
    cfg.train.train_iters = 50
    cfg.train.eval_iters = 0
    cfg.checkpoint.save = None
    cfg.logger.log_interval = 1
    cfg.logger.tensorboard_dir = None
    cfg.ddp.check_for_nan_in_grad = False
    cfg.ddp.check_for_large_grads = False
    cfg.rerun_state_machine.check_for_nan_in_loss = False
    cfg.scheduler.lr_decay_iters = cfg.train.train_iters
    cfg.scheduler.lr_warmup_iters = 10
    if getattr(cfg.model, "use_transformer_engine_op_fuser", False):
        cfg.model.use_transformer_engine_op_fuser = False
    cfg.model.apply_rope_fusion = True
    cfg.model.cross_entropy_fusion_impl = "te"
    if cfg.model.moe_flex_dispatcher_backend == "hybridep":
        cfg.model.moe_hybridep_num_sms = 32


def _family_tail(cfg, reference):
    """What each family's per-GPU function sets after the base configuration."""
    family, gpu, dtype = reference["family"], reference["gpu"], reference["dtype"]
    if reference["function"] == "llama3_70b_pretrain_config":
        shape = "h100_h8192_tp4" if gpu == "h100" else "b200_h8192_tp2"
        width = "bf16" if dtype == "bf16" else "fp8"
        cfg.comm_overlap.tp_comm_overlap_cfg = getattr(comm_overlap, f"userbuffers_{width}_{shape}_mbs1_seqlen8192")
    elif family == "llama":
        cfg.comm_overlap = comm_overlap.CommOverlapConfig(tp_comm_overlap=cfg.model.tensor_model_parallel_size > 1)
    if family == "deepseek":
        # "Disabling to avoid functional errors" on H100; on for the other GPUs.
        cfg.comm_overlap.overlap_grad_reduce = gpu != "h100"


def _user_and_post(cfg, settings, reference):
    """set_user_overrides with argument_parser.py's defaults (the mock dataset at the model's
    sequence length, the saved configuration's path), set_post_overrides, and PerfEnvPlugin's
    manual garbage collection (train.manual_gc, every 100 steps)."""
    cfg.logger.save_config_filepath = "/nemo_run/configs/ConfigContainer.yaml"
    cfg.dataset = MockGPTDatasetConfig(
        seq_length=cfg.model.seq_length,
        random_seed=1234,
        reset_attention_mask=False,
        reset_position_ids=False,
        eod_mask_loss=False,
        num_dataset_builder_threads=1,
        split="99990,8,2",
        data_sharding=True,
        dataloader_type="single",
        num_workers=8,
    )
    dtype = reference["dtype"]
    if dtype == "bf16":
        cfg.optimizer.use_precision_aware_optimizer = True
    m = cfg.model
    dp = settings["worldSize"] // (
        m.tensor_model_parallel_size * m.pipeline_model_parallel_size * m.context_parallel_size
    )
    vp = m.virtual_pipeline_model_parallel_size or 1
    if dp > 1 and m.pipeline_model_parallel_size > 1 and vp > 1 and dtype not in ("fp8_mx", "nvfp4"):
        cfg.optimizer.overlap_param_gather_with_optimizer_step = True
        if isinstance(cfg.comm_overlap, comm_overlap.CommOverlapConfig):
            cfg.comm_overlap.overlap_param_gather_with_optimizer_step = True
    cfg.train.manual_gc = True
    cfg.train.manual_gc_interval = 100


def config(settings, reference):
    """NVIDIA's ConfigContainer for the run's model, GPU (`reference["gpu"]`, the scripts' name),
    precision (`reference["dtype"]`) and layout; `pretrain` completes and validates it."""
    _offline(settings["huggingFace"])
    cfg = _recipe(settings, reference)
    _family_common(cfg, reference["family"])
    _workload_base(cfg, settings)
    _family_tail(cfg, reference)
    _user_and_post(cfg, settings, reference)
    return cfg


def fields(value, prefix="", seen=None):
    """A configuration as {dotted field: comparable text}, every dataclass field down to its
    leaves (a function or class by its qualified name, a dtype or enum by its name)."""
    seen = set() if seen is None else seen
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        if id(value) in seen:
            return {prefix: f"<{type(value).__name__} again>"}
        seen = seen | {id(value)}
        found = {f"{prefix}.__type__" if prefix else "__type__": type(value).__name__}
        for field in dataclasses.fields(value):
            if field.name.startswith("_"):
                continue
            path = f"{prefix}.{field.name}" if prefix else field.name
            found |= fields(getattr(value, field.name, None), path, seen)
        return found
    if prefix.endswith("pipeline_model_parallel_layout") and value is not None:
        return {prefix: repr(_stages(value))}
    if isinstance(value, (list, tuple)):
        return {prefix: repr([_leaf(item) for item in value])}
    if isinstance(value, dict):
        return {prefix: repr({key: _leaf(item) for key, item in sorted(value.items(), key=lambda kv: str(kv[0]))})}
    return {prefix: _leaf(value)}


def _stages(layout):
    """A pipeline layout as its stages' layer names, whether written as Megatron Core's string
    ("Et*4|...|tmL") or as the recipes' lists."""
    if not isinstance(layout, (str, list)):
        layout = layout.input_data
    if isinstance(layout, str):
        layout = PipelineParallelLayerLayout.parse_str_to_list(layout)
    return [[getattr(layer, "name", layer) for layer in stage] for stage in layout]


def _leaf(value):
    if isinstance(value, enum.Enum):
        return f"{type(value).__name__}.{value.name}"
    if isinstance(value, functools.partial):
        return f"partial({_leaf(value.func)}, {sorted(value.keywords.items())})"
    if isinstance(value, type) or (callable(value) and hasattr(value, "__qualname__")):
        return f"{getattr(value, '__module__', '')}.{value.__qualname__}"
    if value is None or isinstance(value, (bool, int, float, str)):
        return repr(value)
    return repr(value) if "object at 0x" not in repr(value) else type(value).__name__
