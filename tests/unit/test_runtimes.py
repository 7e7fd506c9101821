"""The Megatron-Bridge runtime: the catalog's recipes per machine and model (values as the cited
recipes publish them), the precision each runs in, and the settings the launcher builds its
ConfigContainer from."""

from __future__ import annotations

import dataclasses
import json
import re
import types

import pytest

from facts import versions
from facts.errors import RuleError
from facts.machines import MACHINE_TYPES
from facts.models import BRIDGE_EXECUTOR_ENV, MODELS, Fp8Scaling, Framework, model_spec
from planners import nemo, runtimes, workload
from planners.runs import RunSpec, Tokenizer, run_advice
from planners.runtimes import RUNTIMES, bridge, runtime_of

HOPPER = ("a3-highgpu-8g", "a3-megagpu-8g", "a3-ultragpu-8g")


def run_on(machine: str, model: str, nodes: int = 8, **fields: object) -> RunSpec:
    recipe = model_spec(model).recipe_on(machine)
    settings = recipe.settings(**{k: v for k, v in fields.items() if k in ("fp8", "steps")})  # type: ignore[arg-type]
    tokenizer = Tokenizer("huggingface", "meta-llama/Meta-Llama-3-70B", "tokenizers/llama3")
    return RunSpec("r", model, "gpu", nodes, settings, tokenizer, "normal", machine_type=machine)


# (model, machine): layout, precision, steps and the recipe folder, as the cited recipe sets them
# (gpu-recipes@2e1fd5e launcher.sh arguments; Megatron-Bridge@21b02e0 workload base configs).
PUBLISHED = {
    ("llama3-70b", "a3-ultragpu-8g"): (
        (4, 8, 5, 1, 256, 1),
        (False, None),
        50,
        "a3ultra/llama3_70b/megatron-bridge-gke/nemo2602/64gpus-bf16",
    ),
    ("llama3-70b", "a4-highgpu-8g"): (
        (4, 8, 5, 1, 256, 1),
        (True, Fp8Scaling.MXFP8),
        30,
        "a4/llama3_70b/nemo-gke/nemo2602/64gpus-fp8mx-gbs256",
    ),
    ("llama3-8b", "a4-highgpu-8g"): (
        (1, 1, None, 1, 128, 2),
        (True, Fp8Scaling.CURRENT),
        30,
        "a4/llama3-8b/megatron-bridge-gke/nemo2602/8gpus-fp8cs",
    ),
    ("llama3-8b", "a3-ultragpu-8g"): (
        (1, 1, None, 1, 128, 1),
        (True, Fp8Scaling.CURRENT),
        50,
        "LLAMA3_8B_PRETRAIN_CONFIG_H100_FP8_CS_V1",
    ),
    # launcher.sh: --seq_length 4096 -gb 1024 -mb 4 -tp 1 -pp 2 -vp 12 -cp 1 -ep 8 --moe_a2a_overlap True
    ("qwen3-30b-a3b", "a3-ultragpu-8g"): (
        (1, 2, 12, 1, 1024, 4, 4096, 8),
        (True, Fp8Scaling.CURRENT),
        30,
        "a3ultra/qwen3_30b_a3b/nemo-gke/nemo2602/16gpus-fp8cs-gbs1024",
    ),
    # launcher.sh: -tp 4 -pp 1 -gb 512 -mb 8 --compute_dtype fp8_mx; EP 8 from BASE_QWEN3_30B_A3B_CONFIG
    ("qwen3-30b-a3b", "a4-highgpu-8g"): (
        (4, 1, None, 1, 512, 8, 4096, 8),
        (True, Fp8Scaling.MXFP8),
        30,
        "a4/qwen3_30b_a3b/nemo-gke/nemo2602/8gpus-fp8mx-seq4096-gbs512",
    ),
    # launcher.sh (NeMo 25.11, run on 26.02 here): --gpu gb200 -gb 1024 -mb 4 -tp 1 -pp 1 -ep 8 --max_steps 50
    ("qwen3-30b-a3b", "a4x-highgpu-4g"): (
        (1, 1, None, 1, 1024, 4, 4096, 8),
        (True, Fp8Scaling.MXFP8),
        50,
        "a4x/qwen3_30b_a3b/megatron-bridge-gke/nemo2511/8gpus-fp8mx-seq4096-gbs1024",
    ),
    # launcher.sh: --config_variant v2 -gb 1280 -mb 1 -tp 1 -pp 4 -cp 1 -ep 8 --recompute_modules layernorm,moe_act
    ("gpt-oss-120b", "a3-ultragpu-8g"): (
        (1, 4, None, 1, 1280, 1, 4096, 8),
        (False, None),
        30,
        "a3ultra/gpt_oss_120b/nemo-gke/nemo2602/64gpus-bf16-gbs1280",
    ),
    # launcher.sh: -gb 1280 -mb 4 -tp 1 -pp 1 -cp 1 -ep 64 --compute_dtype bf16
    ("gpt-oss-120b", "a4-highgpu-8g"): (
        (1, 1, None, 1, 1280, 4, 4096, 64),
        (False, None),
        30,
        "a4/gpt_oss_120b/megatron-bridge-gke/nemo2602/64gpus-bf16-seq4096-gbs1280",
    ),
    # launcher.sh: --compute_dtype fp8_cs -gb 2048 -mb 1 -tp 1 -pp 16 -vp None -ep 8 --recompute_modules mla_up_proj
    ("deepseek-v3", "a3-ultragpu-8g"): (
        (1, 16, None, 1, 2048, 1, 4096, 8),
        (True, Fp8Scaling.CURRENT),
        30,
        "a3ultra/deepseek_v3/megatron-bridge-gke/nemo2602/256gpus-fp8cs-seq4096-gbs2048",
    ),
    # launcher.sh: --compute_dtype fp8_mx -gb 4096 -mb 1 -tp 1 -pp 16 -ep 8
    ("deepseek-v3", "a4-highgpu-8g"): (
        (1, 16, None, 1, 4096, 1, 4096, 8),
        (True, Fp8Scaling.MXFP8),
        30,
        "a4/deepseek_v3/megatron-bridge-gke/nemo2602/256gpus-fp8mx-seq4096-gbs4096",
    ),
}


@pytest.mark.parametrize(("model", "machine"), list(PUBLISHED))
def test_each_megatron_bridge_recipe_is_the_published_one(model: str, machine: str) -> None:
    layout, precision, steps, folder = PUBLISHED[(model, machine)]
    seq, experts = layout[6:] or (8192, 1)
    spec = model_spec(model)
    r = spec.recipe_on(machine)
    assert (r.tensor_parallel, r.pipeline_parallel, r.virtual_pipeline, r.context_parallel) == layout[:4]
    assert (r.global_batch_size, r.micro_batch_size, r.seq_length, r.max_steps) == (*layout[4:6], seq, steps)
    assert r.expert_parallel == experts
    assert (r.fp8, r.fp8_scaling if r.fp8 else None) == precision
    assert (r.framework, r.image) == (Framework.MEGATRON_BRIDGE, versions.NEMO_2602)
    own = machine in spec.machine_recipes
    assert folder in spec.sources[f"recipe on {machine}" if own else "recipe"]


@pytest.mark.parametrize("machine", list(MACHINE_TYPES))
def test_a_machine_without_a_published_recipe_takes_the_models_own(machine: str) -> None:
    for spec in MODELS.values():
        if machine not in spec.machine_recipes:
            assert spec.recipe_on(machine) is spec.recipe
        else:
            assert f"recipe on {machine}" in spec.sources, f"{spec.name} on {machine} cites no source"


@pytest.mark.parametrize(
    ("machine", "model", "fp8", "expected"),
    [
        ("a4-highgpu-8g", "llama3-70b", None, "bf16_with_mxfp8_mixed"),
        ("a4-highgpu-8g", "llama3-70b", False, "bf16_mixed"),
        ("a3-ultragpu-8g", "llama3-70b", None, "bf16_mixed"),
        ("a3-ultragpu-8g", "llama3-70b", True, "bf16_with_fp8_current_scaling_mixed"),
        ("a3-ultragpu-8g", "llama3-8b", None, "bf16_with_fp8_current_scaling_mixed"),
    ],
)
def test_precision_follows_the_recipe_and_the_gpu(machine: str, model: str, fp8: bool | None, expected: str) -> None:
    run = run_on(machine, model, fp8=fp8)
    assert bridge.mixed_precision(run, MACHINE_TYPES[machine]) == expected


def test_mxfp8_is_never_asked_of_a_hopper_gpu() -> None:
    """MXFP8 needs Blackwell's block-scaled tensor cores: a Blackwell recipe's FP8 run on an H100
    or H200 uses current scaling instead."""
    blackwell = model_spec("llama3-70b").recipe_on("a4-highgpu-8g")
    for machine in HOPPER:
        run = dataclasses.replace(run_on(machine, "llama3-70b"), settings=blackwell.settings())
        run = dataclasses.replace(run, machine_type="a4-highgpu-8g")
        assert bridge.mixed_precision(run, MACHINE_TYPES[machine]) == "bf16_with_fp8_current_scaling_mixed"


def test_the_launcher_settings_carry_the_runs_layout_by_megatron_bridge_field_names() -> None:
    run = run_on("a3-ultragpu-8g", "llama3-70b", steps=20)
    paths = workload.run_paths(run, "/nfs/exp", "/checkpoints", "/data")
    files = nemo.workload_files(run, paths, MACHINE_TYPES["a3-ultragpu-8g"])
    settings = json.loads(files[workload.RUN_SETTINGS])
    assert settings["huggingFace"]["repository"] == "meta-llama/Meta-Llama-3-70B" and settings["worldSize"] == 64
    assert settings["model"] == {
        "tensor_model_parallel_size": 4,
        "pipeline_model_parallel_size": 8,
        "virtual_pipeline_model_parallel_size": 5,
        "context_parallel_size": 1,
        "sequence_parallel": True,
        "seq_length": 8192,
    }
    assert settings["train"] == {"train_iters": 20, "global_batch_size": 256, "micro_batch_size": 1}
    assert settings["tpOverlapConfig"] == "userbuffers_bf16_h100_h8192_tp4_mbs1_seqlen8192"
    assert settings["checkpoint"] == {
        "save": "/checkpoints/r",
        "load": "/checkpoints/r",
        # 100 steps reach past the run's 20: only the library's save after its loop.
        "save_interval": None,
        "async_save": True,
    }
    assert settings["dlloggerFile"] == "/nfs/exp/r/dllogger.json"
    assert runtime_of(run.recipe).entrypoint == (f"{workload.WORKLOAD_DIR}/{bridge.SCRIPT}", ())
    assert files[bridge.SCRIPT].startswith('"""Megatron-Bridge pretraining')


def test_mock_data_needs_no_tokenizer_files_and_real_data_reads_them_from_the_bucket() -> None:
    run = run_on("a4-highgpu-8g", "llama3-8b", nodes=1)
    mock = workload.run_paths(run, "/nfs/exp", "/checkpoints", "/data")
    assert bridge.tokenizer(run, mock) == {"tokenizer_type": "NullTokenizer", "vocab_size": 128256}
    real = workload.run_paths(dataclasses.replace(run, dataset_prefix="wiki/wiki_text_document"), "/e", "/c", "/data")
    assert bridge.tokenizer(run, real) == {
        "tokenizer_type": "HuggingFaceTokenizer",
        "tokenizer_model": "/data/tokenizers/llama3",
    }


def test_a_run_on_a_deprecated_runtime_is_told_where_the_recipes_went() -> None:
    """NVIDIA deprecated NeMo 2's LLM collection for Megatron-Bridge: a Llama 3.1 run still works,
    with advice naming the catalog model the current recipes train and their runtime and image."""

    old = dataclasses.replace(run_on("a4-highgpu-8g", "llama3-70b"), model="llama3.1-70b", machine_type=None)
    (line,) = [a for a in run_advice(old, MACHINE_TYPES["a4-highgpu-8g"]) if "deprecated" in a]
    assert "llama3.1-70b runs on NeMo 2's LLM collection (nvcr.io/nvidia/nemo:25.07)" in line
    assert "train model llama3-70b on Megatron-Bridge (nvcr.io/nvidia/nemo:26.02)" in line
    current = run_advice(run_on("a4-highgpu-8g", "llama3-70b"), MACHINE_TYPES["a4-highgpu-8g"])
    assert not [a for a in current if "deprecated" in a]


def test_a_successor_is_the_same_model_size_on_megatron_bridge() -> None:
    for spec in MODELS.values():
        if spec.successor:
            after = model_spec(spec.successor)
            assert after.recipe.framework is Framework.MEGATRON_BRIDGE
            a, b = spec.architecture, after.architecture
            assert (a.layers, a.hidden, a.heads, a.kv_heads, a.ffn_hidden) == (
                b.layers,
                b.hidden,
                b.heads,
                b.kv_heads,
                b.ffn_hidden,
            )


@pytest.mark.parametrize(
    ("model", "machine", "graphs"),
    [
        # a4/llama3_70b/nemo-gke/nemo2602/64gpus-fp8mx-gbs256 launcher.sh: --cuda_graph_impl transformer_engine
        # --cuda_graph_scope mlp,attn; a4/llama3-8b takes LLAMA3_8B_PRETRAIN_CONFIG_B200_FP8_CS_V1's local capture.
        ("llama3-70b", "a4-highgpu-8g", {"impl": "transformer_engine", "scope": ["mlp", "attn"]}),
        ("llama3-8b", "a4-highgpu-8g", {"impl": "local", "scope": ["full_iteration"]}),
        ("llama3-70b", "a3-ultragpu-8g", None),
        # a4/qwen3_30b_a3b launcher.sh: --cuda_graph_scope moe_router,moe_preprocess,attn; the A3 Ultra
        # FP8 recipe passes none and QWEN3_30B_A3B_PRETRAIN_CONFIG_H100_FP8_CS_V1 sets none.
        (
            "qwen3-30b-a3b",
            "a4-highgpu-8g",
            {"impl": "transformer_engine", "scope": ["moe_router", "moe_preprocess", "attn"]},
        ),
        ("qwen3-30b-a3b", "a3-ultragpu-8g", None),
        # QWEN3_30B_A3B_PRETRAIN_CONFIG_GB200_FP8_MX(_V1): transformer_engine on moe_router, moe_preprocess.
        ("qwen3-30b-a3b", "a4x-highgpu-4g", {"impl": "transformer_engine", "scope": ["moe_router", "moe_preprocess"]}),
        # a4/gpt_oss_120b launcher.sh: --cuda_graph_scope moe_router,moe_preprocess,attn; A3 Ultra's passes none.
        (
            "gpt-oss-120b",
            "a4-highgpu-8g",
            {"impl": "transformer_engine", "scope": ["moe_router", "moe_preprocess", "attn"]},
        ),
        ("gpt-oss-120b", "a3-ultragpu-8g", None),
        # a4/deepseek_v3 fp8mx launcher.sh: --cuda_graph_scope moe_router,moe_preprocess,attn; A3 Ultra's passes none.
        (
            "deepseek-v3",
            "a4-highgpu-8g",
            {"impl": "transformer_engine", "scope": ["moe_router", "moe_preprocess", "attn"]},
        ),
        ("deepseek-v3", "a3-ultragpu-8g", None),
    ],
)
def test_cuda_graphs_are_the_recipes(model: str, machine: str, graphs: dict[str, object] | None) -> None:
    run = run_on(machine, model)
    settings = bridge.settings(run, workload.run_paths(run, "/e", "/c", "/d"), MACHINE_TYPES[machine])
    assert settings["cudaGraphs"] == graphs


def test_the_h100_configuration_recomputes_five_layers_of_llama3_8b() -> None:
    """LLAMA3_8B_PRETRAIN_CONFIG_H100_FP8_CS_V1 (Megatron-Bridge@21b02e0 workload base configs):
    recompute_num_layers=5, set as full recomputation in blocks (utils/overrides.py
    _set_recompute_overrides); the A4 recipe recomputes nothing."""
    for machine, layers in (("a3-ultragpu-8g", 5), ("a4-highgpu-8g", None)):
        run = run_on(machine, "llama3-8b", nodes=1)
        settings = bridge.settings(run, workload.run_paths(run, "/e", "/c", "/d"), MACHINE_TYPES[machine])
        assert settings["recomputeLayers"] == layers


def test_a_mixture_of_experts_run_carries_its_experts_layout_and_the_familys_fields() -> None:
    """Megatron-Bridge field names (TransformerConfig expert_model_parallel_size and
    expert_tensor_parallel_size; set_qwen3_common_configs' bias_activation_fusion and
    moe_router_fusion; _set_moe_a2a_overlap_overrides for moe_a2a_overlap); a dense model's
    settings name no expert field."""
    run = dataclasses.replace(run_on("a3-ultragpu-8g", "qwen3-30b-a3b", nodes=2), checkpoint=False)
    settings = bridge.settings(run, workload.run_paths(run, "/e", "/c", "/d"), MACHINE_TYPES["a3-ultragpu-8g"])
    assert (settings["model"]["expert_model_parallel_size"], settings["model"]["expert_tensor_parallel_size"]) == (8, 1)
    assert settings["recipeFields"] == {
        "model.bias_activation_fusion": True,
        "model.moe_router_fusion": True,
        # set_post_overrides: data-parallel 8, PP2, VP12, not MXFP8; get_precision_config for FP8 CS.
        "optimizer.overlap_param_gather_with_optimizer_step": True,
        "mixed_precision.first_last_layers_bf16": False,
    }
    assert settings["moeA2aOverlap"] is True
    assert settings["mixedPrecision"] == "bf16_with_fp8_current_scaling_mixed"
    dense = dataclasses.replace(run_on("a3-ultragpu-8g", "llama3-70b"), checkpoint=False)
    dense_settings = bridge.settings(
        dense, workload.run_paths(dense, "/e", "/c", "/d"), MACHINE_TYPES["a3-ultragpu-8g"]
    )
    assert not any(key.startswith("expert_") for key in dense_settings["model"])
    assert dense_settings["moeA2aOverlap"] is False
    # BF16 at 8 nodes of TP4 × PP8 × VP5 (data-parallel 2): set_post_overrides' two settings, and
    # set_llama3_common_configs' padded vocabulary.
    assert dense_settings["recipeFields"] == {
        "optimizer.use_precision_aware_optimizer": True,
        "optimizer.overlap_param_gather_with_optimizer_step": True,
        "model.should_pad_vocab": True,
    }
    # A run that saves checkpoints keeps the library's default: the overlap has "an issue with
    # checkpointing" (training/comm_overlap.py@21b02e0).
    saving = run_on("a3-ultragpu-8g", "llama3-70b")
    saved = bridge.settings(saving, workload.run_paths(saving, "/e", "/c", "/d"), MACHINE_TYPES["a3-ultragpu-8g"])
    assert "optimizer.overlap_param_gather_with_optimizer_step" not in saved["recipeFields"]


def test_the_expert_all_to_all_overlap_is_left_out_where_the_runs_layout_refuses_it() -> None:
    """Megatron-Bridge training/comm_overlap.py@21b02e0 and Megatron Core 0.16 transformer_config.py:
    the overlap needs expert parallelism above 1 and, with pipeline parallelism, a virtual pipeline.
    A run that changes its pipeline (and so drops the recipe's virtual pipeline) or its experts'
    parallel size keeps its layout without it."""
    machine = MACHINE_TYPES["a3-ultragpu-8g"]
    run = run_on("a3-ultragpu-8g", "qwen3-30b-a3b", nodes=4)
    assert bridge.moe_a2a_overlap(run)
    for changed in (
        dataclasses.replace(run.settings, pipeline_parallel=4, virtual_pipeline=None),
        dataclasses.replace(run.settings, expert_parallel=1),
    ):
        other = dataclasses.replace(run, settings=changed)
        assert not bridge.moe_a2a_overlap(other)
        assert bridge.settings(other, workload.run_paths(other, "/e", "/c", "/d"), machine)["moeA2aOverlap"] is False
    pipeline_only = dataclasses.replace(
        run, settings=dataclasses.replace(run.settings, pipeline_parallel=1, virtual_pipeline=None)
    )
    assert bridge.moe_a2a_overlap(pipeline_only)


def test_gpt_oss_with_context_parallelism_takes_the_all_to_all_its_sink_attention_needs() -> None:
    """recipes/gpt_oss/gpt_oss.py@21b02e0: with context_parallel_size > 1, calculate_per_token_loss
    and cp_comm_type "a2a" ("only a2a cp is supported for sink attention"); not without."""
    machine = MACHINE_TYPES["a3-ultragpu-8g"]
    run = run_on("a3-ultragpu-8g", "gpt-oss-120b", nodes=8)
    fields = bridge.settings(run, workload.run_paths(run, "/e", "/c", "/d"), machine)["recipeFields"]
    assert "model.cp_comm_type" not in fields
    with_cp = dataclasses.replace(run, nodes=16, settings=dataclasses.replace(run.settings, context_parallel=2))
    fields = bridge.settings(with_cp, workload.run_paths(with_cp, "/e", "/c", "/d"), machine)["recipeFields"]
    assert (fields["model.cp_comm_type"], fields["model.calculate_per_token_loss"]) == ("a2a", True)


def test_deepseek_v3_trains_with_its_recipes_optimizer_and_auxiliary_loss() -> None:
    """recipes/deepseek/deepseek_v3.py@21b02e0: the precision-aware optimizer with BF16 moments and
    gradients and FP32 weights; the auxiliary loss its bridge gives a config.json without
    aux_loss_alpha, as the released one is (models/deepseek/deepseek_v3_bridge.py: 1e-4), so the
    catalog sets none; the H100 configuration alone turns the gradient-reduction overlap off."""
    for machine, overlap_off in (("a3-ultragpu-8g", True), ("a4-highgpu-8g", False)):
        run = run_on(machine, "deepseek-v3", nodes=32)
        settings = bridge.settings(run, workload.run_paths(run, "/e", "/c", "/d"), MACHINE_TYPES[machine])
        fields = settings["recipeFields"]
        assert fields["optimizer.use_precision_aware_optimizer"] is True
        assert (fields["optimizer.exp_avg_dtype"], fields["optimizer.exp_avg_sq_dtype"]) == ("torch.bfloat16",) * 2
        assert (fields["optimizer.main_grads_dtype"], fields["optimizer.main_params_dtype"]) == (
            "torch.bfloat16",
            "torch.float32",
        )
        assert "aux_loss_alpha" not in settings["huggingFace"]["config"] and "model.moe_aux_loss_coeff" not in fields
        assert (fields.get("ddp.overlap_grad_reduce") is False) is overlap_off


def test_qwen3_30b_a3b_has_the_published_size_and_flops() -> None:
    """30.5 B parameters in all (Qwen/Qwen3-30B-A3B model card); per token, the FLOPs NVIDIA's
    published throughput implies (Megatron-Bridge docs/performance-summary.md@21b02e0, 26.02:
    118 TFLOP/s/GPU at 5113 tokens/s/GPU on H100, 223 at 9691 on B200), which Megatron-Bridge counts
    with causal attention (half the score and weighted-sum products) where the catalog counts full
    attention."""
    a = model_spec("qwen3-30b-a3b").architecture
    assert round(a.parameters / 1e9, 1) == 30.5
    seq = 4096
    causal = a.flops_per_sample(seq) - 3 * a.layers * 2 * seq * seq * a.heads * a.head_dim
    for tflops, tokens in ((118, 5113), (223, 9691)):
        assert causal / seq == pytest.approx(tflops * 1e12 / tokens, rel=0.01)


# Megatron-Bridge@21b02e0 workload base configs: GPT_OSS_120B_PRETRAIN_CONFIG_{H100,B200}_BF16_V1/V2
# recompute_modules ["layernorm", "moe_act"]; DEEPSEEK_V3_PRETRAIN_CONFIG_{H100,B200}_V1 ["mla_up_proj"]
# (and the gpu-recipes launchers' --recompute_modules); no other recipe recomputes modules.
RECOMPUTED = {"gpt-oss-120b": ["layernorm", "moe_act"], "deepseek-v3": ["mla_up_proj"]}


@pytest.mark.parametrize("machine", ["a3-ultragpu-8g", "a4-highgpu-8g"])
@pytest.mark.parametrize("model", list(MODELS))
def test_the_recomputed_modules_are_the_recipes(machine: str, model: str) -> None:
    """Selective recomputation as _set_recompute_overrides sets it (the launcher's recomputeModules)."""
    run = run_on(machine, model)
    if model_spec(model).recipe_on(machine).framework is not Framework.MEGATRON_BRIDGE:
        assert not run.recipe.recompute_modules
        return
    settings = bridge.settings(run, workload.run_paths(run, "/e", "/c", "/d"), MACHINE_TYPES[machine])
    assert settings["recomputeModules"] == RECOMPUTED.get(model, [])


def test_gpt_oss_120b_has_the_published_size_and_flops() -> None:
    """116.8 B parameters in all (openai/gpt-oss-120b model card: 116.83 B); per token, the FLOPs
    NVIDIA's published throughput implies (performance-summary.md@21b02e0, 26.02: 163 TFLOP/s/GPU at
    5993 tokens/s/GPU on H100, 219 at 8047 on B200). Megatron-Bridge counts causal attention and
    counts a GLU's gate only for SiLU (training/utils/flop_utils.py), and GPT-OSS's GLU is of
    quick-GELU: the catalog counts both whole, so it is above by exactly those two terms."""
    a = model_spec("gpt-oss-120b").architecture
    assert a.experts is not None
    assert round(a.parameters / 1e9, 1) == 116.8
    seq = 4096
    causal_half = 3 * a.layers * 2 * seq * seq * a.heads * a.head_dim
    gate = 3 * a.moe_layers * 2 * seq * a.hidden * a.experts.top_k * a.experts.ffn_hidden
    for tflops, tokens in ((163, 5993), (219, 8047)):
        assert (a.flops_per_sample(seq) - causal_half - gate) / seq == pytest.approx(tflops * 1e12 / tokens, rel=0.01)


def _stages(layout: str) -> list[str]:
    """Megatron Core's layout string unrolled into its stages ("(ab|)*2" and "t*3" repeat;
    megatron/core/transformer/pipeline_parallel_layer_layout.py parse_str_to_list, 0.16.0)."""
    for pattern in (r"\(([^)]+)\)\*(\d+)", r"(.)\*(\d+)"):
        layout = re.sub(pattern, lambda m: m.group(1) * int(m.group(2)), layout)
    return layout.split("|")


def test_each_uneven_pipeline_split_holds_every_layer_once_over_its_stages() -> None:
    """DeepSeek V3's splits (recipes/deepseek/deepseek_v3.py@21b02e0 layout_map): the embedding
    first, the 61 layers, then the prediction layer and the loss last, over pipeline × virtual
    stages. make runtime-check has the library validate the same strings (a layer too many fails)."""
    spec = model_spec("deepseek-v3")
    for (pp, vp), layout in spec.recipe.pipeline_layouts.items():
        stages = _stages(layout)
        assert len(stages) == pp * vp, layout
        joined = "".join(stages)
        assert joined.count("t") == spec.architecture.layers
        assert joined.count("m") == spec.architecture.mtp_layers
        assert (joined[0], joined[-1], joined.count("E"), joined.count("L")) == ("E", "L", 1, 1)


# recipes/deepseek/deepseek_v3.py@21b02e0 set_deepseek_v3_pipeline_model_parallel_layout's
# layout_map, transcribed ("last" = the prediction layer, then the loss).
_LAST = ["mtp", "loss"]
_UPSTREAM_LAYOUTS = {
    (4, 1): [["embedding"] + ["decoder"] * 16, ["decoder"] * 16, ["decoder"] * 16, ["decoder"] * 13 + _LAST],
    (8, 1): [["embedding"] + ["decoder"] * 8] + [["decoder"] * 8] * 6 + [["decoder"] * 5 + _LAST],
    (4, 2): [["embedding"] + ["decoder"] * 8] + [["decoder"] * 8] * 6 + [["decoder"] * 5 + _LAST],
    (16, 1): [["embedding"] + ["decoder"] * 4] + [["decoder"] * 4] * 14 + [["decoder", *_LAST]],
    (8, 2): [["embedding"] + ["decoder"] * 4] + [["decoder"] * 4] * 14 + [["decoder", *_LAST]],
    (4, 4): [["embedding"] + ["decoder"] * 4] + [["decoder"] * 4] * 14 + [["decoder", *_LAST]],
}


def test_each_uneven_split_is_the_library_recipes_stage_by_stage() -> None:
    names = {"E": "embedding", "t": "decoder", "m": "mtp", "L": "loss"}
    layouts = model_spec("deepseek-v3").recipe.pipeline_layouts
    assert set(layouts) == set(_UPSTREAM_LAYOUTS)
    for key, layout in layouts.items():
        assert [[names[c] for c in stage] for stage in _stages(layout)] == _UPSTREAM_LAYOUTS[key], key


def test_a_deepseek_run_takes_the_split_of_its_pipeline_and_refuses_one_the_recipe_lacks() -> None:
    machine = MACHINE_TYPES["a3-ultragpu-8g"]
    run = run_on("a3-ultragpu-8g", "deepseek-v3", nodes=32)
    settings = bridge.settings(run, workload.run_paths(run, "/e", "/c", "/d"), machine)
    assert settings["recipeFields"]["model.pipeline_model_parallel_layout"] == "Et*4|(t*4|)*14tmL"
    assert settings["model"]["mtp_num_layers"] == 1
    eight = dataclasses.replace(run, settings=dataclasses.replace(run.settings, pipeline_parallel=8))
    eight_settings = bridge.settings(eight, workload.run_paths(eight, "/e", "/c", "/d"), machine)
    assert eight_settings["recipeFields"]["model.pipeline_model_parallel_layout"] == "Et*8|(t*8|)*6t*5mL"


@pytest.mark.parametrize(
    ("machine", "expected"),
    [
        # perf_plugins.py@21b02e0: NVL8 on H100 and B200, NVL72 with multi-node NVLink on GB200.
        (
            "a3-ultragpu-8g",
            {"NVLINK_DOMAIN_SIZE": "8", "USE_MNNVL": "0", "NUM_OF_HYBRID_EP_RANKS_PER_NVLINK_DOMAIN": "8"},
        ),
        (
            "a4-highgpu-8g",
            {"NVLINK_DOMAIN_SIZE": "8", "USE_MNNVL": "0", "NUM_OF_HYBRID_EP_RANKS_PER_NVLINK_DOMAIN": "8"},
        ),
        (
            "a4x-highgpu-4g",
            {"NVLINK_DOMAIN_SIZE": "72", "USE_MNNVL": "1", "NUM_OF_HYBRID_EP_RANKS_PER_NVLINK_DOMAIN": "8"},
        ),
    ],
)
def test_the_hybridep_dispatcher_is_told_its_nvlink_domain(machine: str, expected: dict[str, str]) -> None:
    run = run_on(machine, "deepseek-v3", nodes=32)
    env = nemo.perf_env(run, MACHINE_TYPES[machine])
    assert {key: env[key] for key in expected} == expected
    # PerfEnvPlugin with a flexible dispatcher: 32 connections and SM margins of 20.
    assert (env["CUDA_DEVICE_MAX_CONNECTIONS"], env["NVTE_FWD_LAYERNORM_SM_MARGIN"]) == ("32", "20")
    # Only the H100 configuration sets expandable segments (PerfEnvPlugin, H100 only): A4 has the
    # B200 one; A4X runs A3 Ultra's layout without what that sets for Hopper alone.
    assert ("PYTORCH_CUDA_ALLOC_CONF" in env) is MACHINE_TYPES[machine].accelerator.name.startswith("h")
    # Experts over more GPUs than the domain: at most the domain's ranks (8 on NVL8).
    wide = dataclasses.replace(run, settings=dataclasses.replace(run.settings, expert_parallel=16))
    assert nemo.perf_env(wide, MACHINE_TYPES[machine])["NUM_OF_HYBRID_EP_RANKS_PER_NVLINK_DOMAIN"] == (
        "16" if machine == "a4x-highgpu-4g" else "8"
    )


@pytest.mark.parametrize(
    ("machine", "expected"),
    [
        # Hopper, TP1, no flexible dispatcher: 8 connections, margins 16 (the all-to-all overlap
        # would keep 8 with TP above 1 too).
        ("a3-ultragpu-8g", {"CUDA_DEVICE_MAX_CONNECTIONS": "8", "NVTE_FWD_LAYERNORM_SM_MARGIN": "16",
                            "NVTE_BWD_LAYERNORM_SM_MARGIN": "16"}),
        # Blackwell: 32.
        ("a4-highgpu-8g", {"CUDA_DEVICE_MAX_CONNECTIONS": "32", "NVTE_FWD_LAYERNORM_SM_MARGIN": "16",
                           "NVTE_BWD_LAYERNORM_SM_MARGIN": "16"}),
        # A4X's recipe starts run_script.py itself, and still takes the plugin's environment: 32
        # connections, HybridEP's margins of 20 and its NVLink domain.
        ("a4x-highgpu-4g", {"CUDA_DEVICE_MAX_CONNECTIONS": "32", "NVTE_FWD_LAYERNORM_SM_MARGIN": "20",
                            "NVTE_BWD_LAYERNORM_SM_MARGIN": "20", "NVLINK_DOMAIN_SIZE": "72", "USE_MNNVL": "1",
                            "NUM_OF_HYBRID_EP_RANKS_PER_NVLINK_DOMAIN": "8"}),
    ],
)  # fmt: skip
def test_perf_env_plugin_settings_follow_the_gpu_and_the_layout(machine: str, expected: dict[str, str]) -> None:
    """scripts/performance/perf_plugins.py@21b02e0 PerfEnvPlugin.setup, for Qwen3 30B-A3B's
    recipes, over the executor's environment every run takes (utils/executors.py)."""
    env = nemo.perf_env(run_on(machine, "qwen3-30b-a3b"), MACHINE_TYPES[machine])
    assert env == {**BRIDGE_EXECUTOR_ENV, **expected}


def test_a_hopper_run_with_tensor_parallelism_and_no_overlap_keeps_kernel_order() -> None:
    """PerfEnvPlugin: 1 CUDA connection on Hopper with TP or CP above 1 and no expert all-to-all
    overlap ("to enforce kernel queuing order"); the pipeline chunk only with a pipeline."""
    run = run_on("a3-ultragpu-8g", "llama3-8b", nodes=1)
    cp = dataclasses.replace(run, settings=dataclasses.replace(run.settings, context_parallel=2))
    env = nemo.perf_env(cp, MACHINE_TYPES["a3-ultragpu-8g"])
    assert (env["CUDA_DEVICE_MAX_CONNECTIONS"], env["NCCL_CTA_POLICY"]) == ("1", "1")
    a4 = run_on("a4-highgpu-8g", "llama3-70b")
    assert nemo.perf_env(a4, MACHINE_TYPES["a4-highgpu-8g"])["NCCL_P2P_NET_CHUNKSIZE"] == "2097152"
    flat = dataclasses.replace(
        a4, settings=dataclasses.replace(a4.settings, pipeline_parallel=1, virtual_pipeline=None)
    )
    assert "NCCL_P2P_NET_CHUNKSIZE" not in nemo.perf_env(flat, MACHINE_TYPES["a4-highgpu-8g"])
    # A3 Ultra's Llama 3 70B recipe starts run_script.py itself and still takes the plugin's
    # environment: TP4 on Hopper, 1 connection for the userbuffers overlap; the pipeline chunk.
    a3u = nemo.perf_env(run_on("a3-ultragpu-8g", "llama3-70b"), MACHINE_TYPES["a3-ultragpu-8g"])
    assert (a3u["CUDA_DEVICE_MAX_CONNECTIONS"], a3u["NCCL_P2P_NET_CHUNKSIZE"]) == ("1", "2097152")


def test_deepseek_v3_has_the_published_size_and_flops() -> None:
    """671 B parameters in the main model (DeepSeek-V3 technical report; 685 B with the 14 B of
    its prediction module as published, which repeats the embedding and output head this count
    shares); per token, the FLOPs NVIDIA's published throughput implies with the prediction layer
    trained (performance-summary.md@21b02e0, 26.02 DGX-B200: 699 TFLOP/s/GPU at 2689 tokens/s/GPU),
    which Megatron-Bridge counts with causal attention."""
    a = model_spec("deepseek-v3").architecture
    assert a.latent_attention is not None
    assert round(dataclasses.replace(a, mtp_layers=0).parameters / 1e9) == 671
    seq, la = 4096, a.latent_attention
    causal_half = (
        3 * (a.layers + a.mtp_layers) * seq * seq * a.heads * (la.qk_head_dim + la.qk_rope_head_dim + la.v_head_dim)
    )
    assert (a.flops_per_sample(seq) - causal_half) / seq == pytest.approx(699e12 / 2689, rel=0.01)


# NVIDIA's published rows (Megatron-Bridge docs/performance-summary.md@21b02e0), worked by hand:
# global batch × sequence / (tokens per second per GPU × GPUs).
PUBLISHED_STEPS = {
    ("qwen3-30b-a3b", "a3-ultragpu-8g"): (2, 1024, 51.27),  # 1024 × 4096 / (5113 × 16)
    ("qwen3-30b-a3b", "a4-highgpu-8g"): (1, 512, 27.05),  # 512 × 4096 / (9691 × 8)
    ("qwen3-30b-a3b", "a4x-highgpu-4g"): (2, 512, 10.05),  # 512 × 4096 / (26084 × 8)
    ("gpt-oss-120b", "a3-ultragpu-8g"): (8, 1280, 13.67),  # 1280 × 4096 / (5993 × 64)
    ("gpt-oss-120b", "a4-highgpu-8g"): (8, 1280, 10.18),  # 1280 × 4096 / (8047 × 64)
    ("deepseek-v3", "a4-highgpu-8g"): (32, 4096, 24.37),  # 4096 × 4096 / (2689 × 256)
    ("llama3-70b", "a3-ultragpu-8g"): (8, 256, 20.21),  # 256 × 8192 / (1621 × 64)
    ("llama3-8b", "a4-highgpu-8g"): (1, 128, 4.28),  # 128 × 8192 / (30624 × 8), 25.11
    ("llama3-8b", "a3-ultragpu-8g"): (1, 128, 9.07),  # 128 × 8192 / (14451 × 8), 25.11
}


@pytest.mark.parametrize(("model", "machine"), list(PUBLISHED_STEPS))
def test_each_published_step_time_is_nvidias_row(model: str, machine: str) -> None:
    nodes, batch, seconds = PUBLISHED_STEPS[(model, machine)]
    spec = model_spec(model)
    fp8 = "BF16" not in next(t.source for t in spec.step_times if t.machine_type == machine)
    published = spec.step_time(machine, nodes, batch, fp8)
    assert published is not None and published.seconds == seconds
    assert "performance-summary.md@21b02e0" in published.source


def test_every_framework_has_one_runtime_module() -> None:
    """Each framework is run by its own module (planners/runtimes), chosen from one table."""
    assert set(RUNTIMES) == set(Framework)
    assert {runtime.framework for runtime in RUNTIMES.values()} == set(Framework)
    modules = {name for name in runtimes.__dict__ if isinstance(getattr(runtimes, name), types.ModuleType)}
    assert {"nemo1", "nemo2", "bridge"} <= modules


@pytest.mark.parametrize(("machine", "precision"), [("a4-highgpu-8g", "fp8"), ("a4x-highgpu-4g", "fp8")])
def test_llama3_70b_on_blackwell_overlaps_its_tensor_parallel_communication(machine: str, precision: str) -> None:
    """NVIDIA's B200 and GB200 configurations keep the recipe's TP overlap with the B200 TP2
    userbuffers configuration; the launcher built none there (comm overlap off on Blackwell)."""
    run = run_on(machine, "llama3-70b", nodes=16)
    assert run.settings.tensor_parallel > 1
    wanted = f"userbuffers_{precision}_b200_h8192_tp2_mbs1_seqlen8192"
    assert workload.tp_overlap(run, MACHINE_TYPES[machine]) == wanted
    assert (
        bridge.settings(run, workload.run_paths(run, "/e", "/c", "/d"), MACHINE_TYPES[machine])["tpOverlapConfig"]
        == wanted
    )


@pytest.mark.parametrize(
    ("machine", "model", "why"),
    [
        # Llama 3 8B on A4 replays whole steps as a graph (Megatron Core's local full_iteration scope).
        ("a4-highgpu-8g", "llama3-8b", "replays whole steps as a CUDA graph"),
        # Qwen3 on A3 Ultra overlaps the experts' all-to-all.
        ("a3-ultragpu-8g", "qwen3-30b-a3b", "overlaps the experts' all-to-all"),
    ],
)
def test_straggler_reports_are_refused_where_the_detector_cannot_time_a_step(
    machine: str, model: str, why: str
) -> None:
    """Megatron Core's straggler detector times the model's forward call (Megatron-Bridge
    training/gpt_step.py@v0.3.0): a replayed full-iteration graph makes no such call and the
    report divides by zero; with the all-to-all overlap the call only plans the step."""
    run = dataclasses.replace(run_on(machine, model, nodes=4), stragglers=True)
    with pytest.raises(RuleError) as refused:
        bridge.check_stragglers(run)
    assert refused.value.key == "stragglers" and why in str(refused.value)
    assert bridge.check_stragglers(dataclasses.replace(run, stragglers=False)) is None
    # Llama 3 70B on A3 Ultra does neither: its reports are taken.
    assert bridge.check_stragglers(dataclasses.replace(run_on("a3-ultragpu-8g", "llama3-70b"), stragglers=True)) is None
