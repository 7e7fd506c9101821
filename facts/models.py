"""The models the training layer knows: architecture, how NeMo runs them, and their defaults.

The architecture drives both the training configuration and the analytics (model FLOPs per
sample), so it lives here once. Every entry names its sources.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Any

from facts import versions
from facts.machines import MACHINE_TYPES, Precision
from facts.published import FORCED_BALANCE, DgxSystems, PublishedRun, published_run
from facts.versions import Image


class Framework(StrEnum):
    # NeMo 1.x: Hydra YAML + examples/nlp/language_modeling/megatron_gpt_pretraining.py
    NEMO1 = "nemo1"
    # NeMo 2.0: NeMo-Run recipes through `nemo llm pretrain --factory <recipe>`
    NEMO2 = "nemo2"
    # Megatron-Bridge's training loop (`megatron.bridge.training.pretrain`) in the NeMo Framework
    # containers from 25.11 on: NVIDIA's LLM pretraining path after NeMo 2's LLM collection.
    MEGATRON_BRIDGE = "megatron-bridge"

    @property
    def label(self) -> str:
        return {"nemo1": "NeMo 1", "nemo2": "NeMo 2", "megatron-bridge": "Megatron-Bridge"}[self.value]


class Fp8Scaling(StrEnum):
    """How FP8 training scales its tensors, when a run trains in FP8."""

    # One scale per tensor from a history of maxima: NeMo 2's `bf16_with_fp8_mixed`.
    DELAYED = "delayed"
    # One scale per tensor from its current maximum: Megatron-Bridge's
    # `bf16_with_fp8_current_scaling_mixed`, the "fp8_cs" of the recipes.
    CURRENT = "current"
    # Microscaling, one scale per 32 values: `bf16_with_mxfp8_mixed` ("fp8_mx"), Blackwell only.
    MXFP8 = "mxfp8"


# Compute capability from which the GPU's tensor cores take MXFP8 (Blackwell, sm_100).
# https://docs.nvidia.com/cuda/cuda-c-programming-guide/ (block-scaled MMA, sm_100a)
MXFP8_MIN_COMPUTE_CAPABILITY = (10, 0)


@dataclass(frozen=True)
class Experts:
    """A mixture-of-experts MLP: a router sends each token to `top_k` of `count` experts, each
    an MLP of `ffn_hidden`, beside a shared expert every token goes through (`shared_ffn_hidden`,
    0 without one)."""

    count: int
    top_k: int
    ffn_hidden: int
    shared_ffn_hidden: int = 0
    # The first layers keep a dense MLP of the model's `ffn_hidden` (DeepSeek's first_k_dense).
    dense_layers: int = 0


@dataclass(frozen=True)
class LatentAttention:
    """Multi-head latent attention (DeepSeek-V2/V3): queries and keys/values through low-rank
    projections, each head's query and key a content part and a rotary part."""

    q_lora_rank: int
    kv_lora_rank: int
    qk_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int


@dataclass(frozen=True)
class Architecture:
    """A decoder-only transformer, enough to count its FLOPs."""

    layers: int
    hidden: int
    heads: int
    # Key/value heads (query groups); equal to `heads` without grouped-query attention.
    kv_heads: int
    ffn_hidden: int
    vocab_size: int
    max_positions: int
    # SwiGLU-style MLP with three weight matrices instead of two.
    gated_mlp: bool
    # Channels per attention head where they are not hidden / heads (Qwen3's kv_channels).
    kv_channels: int | None = None
    # A mixture of experts in place of the dense MLP (in every layer but `experts.dense_layers`).
    experts: Experts | None = None
    # Latent attention in place of grouped-query attention (heads, kv_heads and kv_channels unused).
    latent_attention: LatentAttention | None = None
    # Multi-token prediction: layers after the last that predict further tokens, each a transformer
    # layer like the last with a projection of its input (DeepSeek-V3's MTP module).
    mtp_layers: int = 0

    @property
    def head_dim(self) -> int:
        return self.kv_channels or self.hidden // self.heads

    @property
    def moe_layers(self) -> int:
        return self.layers - self.experts.dense_layers if self.experts else 0

    @property
    def parameters(self) -> int:
        """Weights: untied input and output embeddings, and per layer the attention projections,
        the MLP (every expert, the router and the shared expert in a mixture-of-experts layer)
        and two norms (the Llama and GPT layouts of the sources cited per model)."""
        h = self.hidden
        matrices = 3 if self.gated_mlp else 2
        dense = matrices * h * self.ffn_hidden
        moe = 0
        if self.experts:
            e = self.experts
            moe = matrices * h * (e.count * e.ffn_hidden + e.shared_ffn_hidden) + h * e.count
        layer = self._attention_weights + 2 * h
        mlps = (self.layers - self.moe_layers) * dense + self.moe_layers * moe
        # Each prediction layer: a layer like the last, and the projection of [embedding, state].
        mtp = self.mtp_layers * (layer + (moe if self.experts else dense) + 2 * h * h)
        return 2 * self.vocab_size * h + self.layers * layer + mlps + mtp

    @property
    def _attention_weights(self) -> int:
        h, n = self.hidden, self.heads
        if a := self.latent_attention:
            return (
                h * a.q_lora_rank
                + a.q_lora_rank * n * (a.qk_head_dim + a.qk_rope_head_dim)
                + h * (a.kv_lora_rank + a.qk_rope_head_dim)
                + a.kv_lora_rank * n * (a.qk_head_dim + a.v_head_dim)
                + n * a.v_head_dim * h
            )
        query, kv = n * self.head_dim, self.kv_heads * self.head_dim
        return h * (query + 2 * kv) + query * h

    def _attention_flops(self, s: int, causal: bool = False) -> float:
        """Forward FLOPs of one layer's attention on a sequence of `s` tokens: its projections
        (2 per weight per token), and scores and weighted sums over all `s` positions, or over
        the causal half of them."""
        n = self.heads
        if a := self.latent_attention:
            scores = 2 * s * s * n * (a.qk_head_dim + a.qk_rope_head_dim) + 2 * s * s * n * a.v_head_dim
        else:
            scores = 4 * s * s * n * self.head_dim
        return 2 * s * self._attention_weights + (scores / 2 if causal else scores)

    def flops_per_sample(self, seq_length: int, causal: bool = False) -> float:
        """Model FLOPs to train on one sequence (forward + backward = 3 × forward), counting
        matrix multiplications only, full (unmasked) attention (sliding windows too), every
        matrix of a gated MLP whatever its activation, no recomputation. `causal`: attention's
        scores over the causal half of the positions only, as NVIDIA's published TFLOPS count
        them (Megatron-Bridge training/utils/flop_utils.py).

        For a GPT with ffn = 4h and no GQA this is Megatron's 72·L·s·h²·(1 + s/6h + V/12Lh)
        (Narayanan et al., 2021); with GQA and a gated MLP it is the Llama form the public
        recipes use (AI-Hypercomputer/gpu-recipes:src/utils/training_metrics). A token of a
        mixture-of-experts layer goes through its `top_k` experts and the shared one, as
        Megatron-Bridge counts it (training/utils/flop_utils.py@21b02e0, router ignored).
        """
        s, h = seq_length, self.hidden
        per_ffn = (6 if self.gated_mlp else 4) * s * h
        dense = per_ffn * self.ffn_hidden
        moe = (
            per_ffn * (self.experts.top_k * self.experts.ffn_hidden + self.experts.shared_ffn_hidden)
            if self.experts
            else 0
        )
        mlps = (self.layers - self.moe_layers) * dense + self.moe_layers * moe
        logits = 2 * s * h * self.vocab_size
        attention = self._attention_flops(s, causal)
        mtp = self.mtp_layers * (attention + (moe or dense) + 2 * s * 2 * h * h + logits)
        return 3.0 * (self.layers * attention + mlps + logits + mtp)


@dataclass(frozen=True)
class RunSettings:
    """A run's effective training layout: its own values on top of its model's recipe."""

    steps: int
    global_batch_size: int
    micro_batch_size: int
    tensor_parallel: int
    pipeline_parallel: int
    virtual_pipeline: int | None
    context_parallel: int
    sequence_length: int
    fp8: bool
    # Expert-parallel size: the GPUs a mixture-of-experts layer's experts are spread over (each
    # expert whole on one GPU: the recipes' expert tensor-parallel size is 1).
    expert_parallel: int = 1
    # Layers of each model chunk recomputed in full (Megatron-Bridge runs only; None: none).
    recompute_layers: int | None = None

    @property
    def model_parallel(self) -> int:
        """GPUs one model replica spans: tensor × pipeline × context parallel."""
        return self.tensor_parallel * self.pipeline_parallel * self.context_parallel

    @property
    def gpu_multiple(self) -> int:
        """What the run's GPU count must be a multiple of: whole model replicas and, in every
        pipeline stage, whole expert-parallel groups (planners.runs.check_experts)."""
        return math.lcm(self.model_parallel, self.expert_parallel * self.pipeline_parallel)


@dataclass(frozen=True)
class TpOverlap:
    """A tensor-parallel communication overlap configuration of NeMo's userbuffers module
    (`nemo.collections.llm.recipes.tp_overlap_configs.userbuffers`), tuned for one GPU
    generation (its CUDA compute capability), precision and tensor-parallel size."""

    config: str
    compute_capability: tuple[int, int]
    fp8: bool
    tensor_parallel: int


@dataclass(frozen=True)
class CudaGraphs:
    """Megatron-Bridge's CUDA graph capture: `local` (Megatron Core's, `full_iteration` scope) or
    `transformer_engine` (per module: attn, mlp, moe, moe_router, moe_preprocess, mamba)."""

    impl: str
    scope: tuple[str, ...]


# Images on which the NeMo 2 launcher may split a run's layers either way: their MegatronStrategy
# takes account_for_embedding_in_pipeline_split and account_for_loss_in_pipeline_split for every
# recipe (nemo/lightning/pytorch/strategies/megatron_strategy.py, nemo_toolkit 2.4.0, the NeMo
# 25.07 container), and payload/nemo2_pretrain.py sets both.
EITHER_SPLIT_IMAGES = frozenset({versions.NEMO_2.ref})
# Images whose NeMo 2 has neither field, so that every run on them splits its layers alone:
# nemo_toolkit 2.1.0, the resiliency recipe's NeMo 24.12 (its strategy and recipes name neither).
LAYERS_ALONE_IMAGES = frozenset({versions.RESILIENCY.ref})


@dataclass(frozen=True)
class Recipe:
    """How a model runs by default; every field can be overridden per run."""

    framework: Framework
    image: Image
    seq_length: int
    micro_batch_size: int
    global_batch_size: int
    tensor_parallel: int
    pipeline_parallel: int
    virtual_pipeline: int | None
    context_parallel: int
    fp8: bool
    max_steps: int
    # NeMo 2 recipe factory (`llm.<factory>.pretrain_recipe`).
    factory: str | None = None
    # How an FP8 run of the recipe scales (NeMo 2 knows delayed scaling only).
    fp8_scaling: Fp8Scaling = Fp8Scaling.DELAYED
    # CUDA graphs the recipe captures (Megatron-Bridge `cuda_graph_impl` and its scopes).
    cuda_graphs: CudaGraphs | None = None
    # Layers whose activations are recomputed in the backward pass, in blocks (Megatron's full
    # recomputation, `recompute_method: block`): the recipe's memory headroom.
    recompute_layers: int | None = None
    # Modules whose activations are recomputed instead (Megatron's selective recomputation).
    recompute_modules: tuple[str, ...] = ()
    # Whether the pipeline split counts the embedding and the loss as a layer each
    # (account_for_embedding_in_pipeline_split and account_for_loss_in_pipeline_split).
    pipeline_split_counts_embedding_and_loss: bool = False
    # NeMo 1 optimizer and initialisation (NeMo 2 recipes carry their own).
    learning_rate: float | None = None
    init_std: float | None = None
    # NeMo 1 hidden and attention dropout.
    dropout: float = 0.0
    # Environment NeMo's performance scripts set for the model on every GPU.
    env: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    # TP overlap configurations those scripts apply, by GPU, precision and TP size.
    tp_overlaps: tuple[TpOverlap, ...] = ()
    # Mixture-of-experts models: the experts' parallel size, and whether the expert all-to-all
    # is overlapped with computation (Megatron-Bridge's moe_a2a_overlap).
    expert_parallel: int = 1
    moe_a2a_overlap: bool = False
    # ConfigContainer fields the recipe sets on top of the provider and the launcher's common
    # settings (the library recipe's own, and Megatron-Bridge scripts/performance
    # set_<family>_common_configs), by dotted name: `model.moe_router_fusion`.
    config_fields: Mapping[str, bool | int | float | str] = field(default_factory=lambda: MappingProxyType({}))
    # Fields a run with context parallelism needs on top (GPT-OSS's sink attention: a2a only).
    context_parallel_fields: Mapping[str, bool | int | float | str] = field(
        default_factory=lambda: MappingProxyType({})
    )
    # Whether the recipe turns Transformer Engine's tensor-parallel communication overlap on where
    # `tp_overlaps` tunes no userbuffers configuration for the GPU, precision and size: with
    # Transformer Engine's default one (Megatron-Bridge's Qwen3 MoE recipes, CommOverlapConfig(
    # tp_comm_overlap=True) without a configuration; training/comm_overlap.py leaves it off without
    # tensor parallelism).
    tp_comm_overlap: bool = False
    # Whether the recipe carries a CommOverlapConfig, whose setup derives the gradient buckets, the
    # P2P overlap and the aligned parameter gather from the layout (training/comm_overlap.py); every
    # Megatron-Bridge recipe here does but GPT-OSS's (recipes/gpt_oss/gpt_oss.py@21b02e0).
    comm_overlap_setup: bool = True
    # The token dispatcher backend of NVIDIA's configuration where the recipe leaves it out (the
    # recipe's own, if any, is in `config_fields`): tools/parity.py compares with NVIDIA's as it is.
    left_out_dispatcher: str | None = None
    # Uneven pipeline splits by (pipeline, virtual pipeline) size, as Megatron Core's layout strings
    # (E embedding, t layer, m prediction layer, L loss, | between stages): a run at another
    # split divides its layers evenly.
    pipeline_layouts: Mapping[tuple[int, int], str] = field(default_factory=lambda: MappingProxyType({}))

    def counts_embedding_and_loss(self, layers: int, pipeline: int, virtual: int | None, image: str) -> bool | None:
        """Whether a run of the recipe at `pipeline` × `virtual` stages on `image` counts the
        embedding and the loss as a layer each in its pipeline split: the first of the ways it can
        split there (pipeline_splits) whose stages divide the layers so, or the first way where one
        of its uneven splits is the run's. None: the stages divide none."""
        ways = self.pipeline_splits(image)
        if (pipeline, virtual or 1) in self.pipeline_layouts:
            return ways[0]
        stages = pipeline * (virtual or 1)
        return next((counted for counted in ways if (layers + 2 * counted) % stages == 0), None)

    def pipeline_splits(self, image: str) -> tuple[bool, ...]:
        """Whether a run of the recipe on `image` can count the embedding and the loss in its
        pipeline split, each way it can, the recipe's own first: either way on a NeMo 2 image
        whose MegatronStrategy takes both fields (EITHER_SPLIT_IMAGES), the layers alone on one
        whose strategy has neither (LAYERS_ALONE_IMAGES), else the recipe's way."""
        own = self.pipeline_split_counts_embedding_and_loss
        if self.framework is not Framework.NEMO2:
            return (own,)
        if image in EITHER_SPLIT_IMAGES:
            return (own, not own)
        if image in LAYERS_ALONE_IMAGES:
            return (False,)
        return (own,)

    def settings(
        self,
        *,
        steps: int | None = None,
        global_batch_size: int | None = None,
        micro_batch_size: int | None = None,
        tensor_parallel: int | None = None,
        pipeline_parallel: int | None = None,
        virtual_pipeline: int | None = None,
        context_parallel: int | None = None,
        sequence_length: int | None = None,
        fp8: bool | None = None,
        expert_parallel: int | None = None,
        recompute_layers: int | None = None,
    ) -> RunSettings:
        """The recipe with a run's own values (None: keep the recipe's) on top. The recipe's
        virtual pipeline stays only while the run keeps the recipe's pipeline layout."""
        if virtual_pipeline is None and pipeline_parallel in (None, self.pipeline_parallel):
            virtual_pipeline = self.virtual_pipeline
        return RunSettings(
            steps=steps or self.max_steps,
            global_batch_size=global_batch_size or self.global_batch_size,
            micro_batch_size=micro_batch_size or self.micro_batch_size,
            tensor_parallel=tensor_parallel or self.tensor_parallel,
            pipeline_parallel=pipeline_parallel or self.pipeline_parallel,
            virtual_pipeline=virtual_pipeline,
            context_parallel=context_parallel or self.context_parallel,
            sequence_length=sequence_length or self.seq_length,
            fp8=self.fp8 if fp8 is None else fp8,
            expert_parallel=expert_parallel or self.expert_parallel,
            recompute_layers=self.recompute_layers if recompute_layers is None else recompute_layers or None,
        )


@dataclass(frozen=True)
class StepTime:
    """A published training step time of a model at one layout: what the go/no-go summary
    turns into a run's expected duration when the run matches it."""

    machine_type: str
    nodes: int
    global_batch_size: int
    fp8: bool
    seconds: float
    source: str
    # A benchmark-only setting the measurement used and a training run does not (tools/parity.py
    # DIFFERENCES, Why.BENCHMARK): the run's own steps may be slower.
    measured_with: str | None = None


@dataclass(frozen=True)
class HuggingFaceModel:
    """The model's Hugging Face repository, whose config.json Megatron-Bridge's recipes build the
    model from (`AutoBridge.from_hf_pretrained(repository).to_megatron_provider()`, every recipe
    from 0.3.0 on), and what that file says beyond the architecture's shape, by its own keys. The
    launcher hands the whole file to `AutoBridge.from_hf_config` instead: no download, the same
    mapping, and the one way to build the model once the size-named provider classes are gone
    (Megatron-Bridge 0.4 removed them)."""

    repository: str
    model_type: str
    values: Mapping[str, Any]


# Each model type's config.json keys for a mixture of experts: the experts, those per token, an
# expert's MLP width (transformers' Qwen3MoeConfig, GptOssConfig, DeepseekV3Config).
_EXPERT_KEYS = {
    "qwen3_moe": ("num_experts", "num_experts_per_tok", "moe_intermediate_size"),
    "gpt_oss": ("num_local_experts", "num_experts_per_tok", "intermediate_size"),
    "deepseek_v3": ("n_routed_experts", "num_experts_per_tok", "moe_intermediate_size"),
}


def hugging_face_config(architecture: Architecture, model: HuggingFaceModel) -> dict[str, Any]:
    """The model's config.json: its shape from the catalog's architecture, the rest as stated."""
    a = architecture
    config: dict[str, Any] = {
        "model_type": model.model_type,
        "num_hidden_layers": a.layers,
        "hidden_size": a.hidden,
        "num_attention_heads": a.heads,
        "num_key_value_heads": a.kv_heads,
        "intermediate_size": a.ffn_hidden,
        "vocab_size": a.vocab_size,
        "max_position_embeddings": a.max_positions,
    }
    if a.kv_channels is not None:
        config["head_dim"] = a.kv_channels
    if a.experts:
        count, per_token, width = _EXPERT_KEYS[model.model_type]
        config |= {count: a.experts.count, per_token: a.experts.top_k, width: a.experts.ffn_hidden}
        if a.experts.shared_ffn_hidden:
            config["n_shared_experts"] = a.experts.shared_ffn_hidden // a.experts.ffn_hidden
        if a.experts.dense_layers:
            config["first_k_dense_replace"] = a.experts.dense_layers
    if m := a.latent_attention:
        config |= {
            "q_lora_rank": m.q_lora_rank,
            "kv_lora_rank": m.kv_lora_rank,
            "qk_nope_head_dim": m.qk_head_dim,
            "qk_rope_head_dim": m.qk_rope_head_dim,
            "v_head_dim": m.v_head_dim,
        }
    if a.mtp_layers:
        config["num_nextn_predict_layers"] = a.mtp_layers
    return config | {key: _plain(value) for key, value in model.values.items()}


def _plain(value: Any) -> Any:
    """A fact's value as JSON has it (the settings file carries it)."""
    if isinstance(value, Mapping):
        return {key: _plain(v) for key, v in value.items()}
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value


@dataclass(frozen=True)
class ModelSpec:
    name: str
    architecture: Architecture
    # The recipe of every machine `machine_recipes` does not name.
    recipe: Recipe
    sources: Mapping[str, str]
    step_times: tuple[StepTime, ...] = ()
    # Recipes published for one machine type, with their sources ("recipe on <machine>" in
    # `sources`): a run on that machine starts from them.
    machine_recipes: Mapping[str, Recipe] = field(default_factory=lambda: MappingProxyType({}))
    # The catalog's model of the same family and size on today's runtime, for a model whose
    # runtime NVIDIA has deprecated: its runs still work, and are told where the recipes went.
    successor: str | None = None
    # Where Megatron-Bridge's recipes read the model from (its runs only).
    hugging_face: HuggingFaceModel | None = None

    def hugging_face_config(self) -> dict[str, Any] | None:
        """The model's Hugging Face config.json, as Megatron-Bridge's recipes read it."""
        return hugging_face_config(self.architecture, self.hugging_face) if self.hugging_face else None

    def recipe_on(self, machine_type: str | None) -> Recipe:
        """The recipe a run of the model on `machine_type` starts from (None: the model's own)."""
        return self.machine_recipes.get(machine_type, self.recipe) if machine_type else self.recipe

    def step_time(self, machine_type: str, nodes: int, global_batch_size: int, fp8: bool) -> StepTime | None:
        """The published step time at exactly this layout, if there is one."""
        return next(
            (
                t
                for t in self.step_times
                if (t.machine_type, t.nodes, t.global_batch_size, t.fp8)
                == (machine_type, nodes, global_batch_size, fp8)
            ),
            None,
        )


_GPT2_VOCAB = 50257
_LLAMA3_VOCAB = 128256
_LLAMA31_POSITIONS = 131072
_LLAMA3_POSITIONS = 8192
_MB = "NVIDIA-NeMo/Megatron-Bridge"
_LLAMA3_PROVIDERS = f"{_MB}:src/megatron/bridge/models/llama/llama_provider.py@21b02e0 (Llama3ModelProvider8B, 70B)"
_BRIDGE_LLAMA3_RECIPE = f"{_MB}:src/megatron/bridge/recipes/llama/llama3.py@21b02e0"
_BRIDGE_CONFIGS = f"{_MB}:scripts/performance/configs/llama/llama3_workload_base_configs.py@21b02e0"


# The Hugging Face configurations Megatron-Bridge's recipes read, beyond the architecture's shape:
# every key of each repository's config.json that a bridge of the four model types reads, at the
# file's value, and the rest of the file but transformers_version, the weights' quantization_config,
# DeepSeek-V3's auto_map and GPT-OSS's experts_per_token and layer_types (read by no bridge from
# 0.3.0 to 0.6.0; the last is GptOssConfig's default anyway). DeepSeek-V3's file has no
# aux_loss_alpha, so its bridges give the auxiliary loss their default, 1e-4
# (models/deepseek/deepseek_v3_bridge.py: `hasattr` at 0.3.0, "The released V3 configs omit this
# training-only hyperparameter" at 0.6.0). Through the library, Megatron-Bridge 0.3.0's bridges
# map these files to its size-named provider classes field for field, but where a class differs
# from its file: Llama 3's initializer_range 0.02, the classes 0.01 and 0.0089; DeepSeek-V3's 0.02,
# the class 0.006, which its recipe sets again. The recipes read the files.
_HF = "huggingface.co"
_LLAMA3_HF_VALUES = MappingProxyType(
    {
        "architectures": ("LlamaForCausalLM",),
        "attention_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": 128000,
        "eos_token_id": 128001,
        "hidden_act": "silu",
        "initializer_range": 0.02,
        "pretraining_tp": 1,
        "rms_norm_eps": 1e-05,
        "rope_scaling": None,
        "rope_theta": 500000.0,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        "use_cache": True,
    }
)
_LLAMA3_8B_HF = HuggingFaceModel("meta-llama/Meta-Llama-3-8B", "llama", _LLAMA3_HF_VALUES)
_LLAMA3_70B_HF = HuggingFaceModel("meta-llama/Meta-Llama-3-70B", "llama", _LLAMA3_HF_VALUES)
_QWEN3_30B_HF = HuggingFaceModel(
    "Qwen/Qwen3-30B-A3B",
    "qwen3_moe",
    MappingProxyType(
        {
            "architectures": ("Qwen3MoeForCausalLM",),
            "attention_bias": False,
            "attention_dropout": 0.0,
            "bos_token_id": 151643,
            "eos_token_id": 151645,
            "decoder_sparse_step": 1,
            "hidden_act": "silu",
            "initializer_range": 0.02,
            "max_window_layers": 48,
            "mlp_only_layers": (),
            "norm_topk_prob": True,
            "output_router_logits": False,
            "rms_norm_eps": 1e-06,
            "rope_scaling": None,
            "rope_theta": 1000000.0,
            "router_aux_loss_coef": 0.001,
            "sliding_window": None,
            "tie_word_embeddings": False,
            "torch_dtype": "bfloat16",
            "use_cache": True,
            "use_sliding_window": False,
        }
    ),
)
# Its layer_types (sliding, then full attention, alternating) is also GptOssConfig's default.
_GPT_OSS_120B_HF = HuggingFaceModel(
    "openai/gpt-oss-120b",
    "gpt_oss",
    MappingProxyType(
        {
            "architectures": ("GptOssForCausalLM",),
            "attention_bias": True,
            "attention_dropout": 0.0,
            "eos_token_id": 200002,
            "hidden_act": "silu",
            "initial_context_length": 4096,
            "initializer_range": 0.02,
            "output_router_logits": False,
            "pad_token_id": 199999,
            "rms_norm_eps": 1e-05,
            "rope_scaling": MappingProxyType(
                {
                    "beta_fast": 32.0,
                    "beta_slow": 1.0,
                    "factor": 32.0,
                    "original_max_position_embeddings": 4096,
                    "rope_type": "yarn",
                    "truncate": False,
                }
            ),
            "rope_theta": 150000,
            "router_aux_loss_coef": 0.9,
            "sliding_window": 128,
            "swiglu_limit": 7.0,
            "tie_word_embeddings": False,
            "use_cache": True,
        }
    ),
)
_DEEPSEEK_V3_HF = HuggingFaceModel(
    "deepseek-ai/DeepSeek-V3",
    "deepseek_v3",
    MappingProxyType(
        {
            "architectures": ("DeepseekV3ForCausalLM",),
            "attention_bias": False,
            "attention_dropout": 0.0,
            "bos_token_id": 0,
            "eos_token_id": 1,
            "ep_size": 1,
            "hidden_act": "silu",
            "initializer_range": 0.02,
            "moe_layer_freq": 1,
            "n_group": 8,
            "norm_topk_prob": True,
            "rms_norm_eps": 1e-06,
            "rope_scaling": MappingProxyType(
                {
                    "beta_fast": 32,
                    "beta_slow": 1,
                    "factor": 40,
                    "mscale": 1.0,
                    "mscale_all_dim": 1.0,
                    "original_max_position_embeddings": 4096,
                    "type": "yarn",
                }
            ),
            "rope_theta": 10000,
            "routed_scaling_factor": 2.5,
            "scoring_func": "sigmoid",
            "tie_word_embeddings": False,
            "topk_group": 4,
            "topk_method": "noaux_tc",
            "torch_dtype": "bfloat16",
            "use_cache": True,
        }
    ),
)


def _hf_source(model: HuggingFaceModel, recipe: str) -> str:
    return f"{_HF}/{model.repository}/blob/main/config.json, as {_MB}:{recipe}@21b02e0 reads it"


def _bridge_recipe(folder: str, variant: str) -> str:
    """A gpu-recipes Megatron-Bridge recipe on NeMo 26.02: its values and launcher."""
    recipe = f"AI-Hypercomputer/gpu-recipes:training/{folder}/nemo2602/{variant}/recipe"
    return f"{recipe}/values.yaml and launcher.sh@2e1fd5e"


def _bridge(**layout: Any) -> Recipe:
    """A Megatron-Bridge recipe of the catalog: NeMo 26.02, 8192-token sequences, and FP8 with
    current scaling where it trains in FP8 unless it says otherwise."""
    return Recipe(
        **{
            "framework": Framework.MEGATRON_BRIDGE,
            "image": versions.NEMO_2602,
            "seq_length": 8192,
            "fp8_scaling": Fp8Scaling.CURRENT,
            **layout,
        }
    )


_WALKTHROUGH = (
    "GoogleCloudPlatform/nvidia-nemo-on-gke:infra/4-training/nemo-example/nemo-configurations/gpt-5b.yaml@d685ebe"
)
_GPT3_RECIPE = "AI-Hypercomputer/gpu-recipes:src/frameworks/a3mega/nemo-configs/gpt3-175b-256gpus-fp8.yaml@2e1fd5e"
_LLAMA_RECIPES = "NVIDIA/NeMo:nemo/collections/llm/recipes/llama31_{8b,70b,405b}.py@v2.4.0"
_LLAMA_ARCH = (
    "NVIDIA/NeMo:nemo/collections/llm/gpt/model/llama.py@v2.4.0; "
    "meta-llama/llama-models:models/llama3_1/api/sku_list.py"
)
_A3U_405B = (
    "AI-Hypercomputer/gpu-recipes:src/frameworks/a3ultra/nemo-configs/llama3-1-405b-576gpus-a3ultra-fp8.yaml@2e1fd5e"
)
_A4_405B = (
    "AI-Hypercomputer/gpu-recipes:training/a4/llama31_405b/nemo-gke/nemo2507/128gpus-fp8-gbs128/recipe/recipe/"
    "llama3-1-405b-seq8192-gbs128-mbs1-gpus128.py and values.yaml@2e1fd5e"
)
# What NeMo's own Llama 3.1 405B pretraining script sets: its executor's PERF_ENV_VARS and the
# constant part of PerfEnvPlugin (the GPU- and layout-dependent part: planners.workload.nemo_perf_env).
# NVIDIA/NeMo:scripts/performance/executors.py and nemo/lightning/run/plugins.py@8cfedd7
_PERF_SCRIPT = "NVIDIA/NeMo:scripts/performance/llm/pretrain_llama31_405b.py@8cfedd7 (same at v2.4.0)"
# The environment Megatron-Bridge's performance scripts give every run (scripts/performance/utils/
# executors.py@21b02e0 PERF_ENV_VARS; PerfEnvPlugin drops its cuDNN layer norms but where a
# configuration keeps them, and Hugging Face downloads are off here: planners.workload.OFFLINE_ENV):
# no caching allocator record of NCCL buffers, no NVLink SHARP (to save memory), NCCL streams at
# high priority.
BRIDGE_EXECUTOR_ENV = MappingProxyType(
    {
        "TORCH_NCCL_AVOID_RECORD_STREAMS": "1",
        "TOKENIZERS_PARALLELISM": "False",
        "NCCL_NVLS_ENABLE": "0",
        "TORCH_NCCL_HIGH_PRIORITY": "1",
    }
)
_PERF_ENV = MappingProxyType(
    {
        "TORCH_NCCL_AVOID_RECORD_STREAMS": "1",
        "TOKENIZERS_PARALLELISM": "False",
        "NCCL_NVLS_ENABLE": "0",
        "NVTE_FLASH_ATTN": "1",
        "NVTE_FUSED_ATTN": "1",
        "NEMO_LOG_MEMORY_USAGE": "1",
        "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
        "TORCH_NCCL_HIGH_PRIORITY": "1",
    }
)
# The script's userbuffers configs for Llama 3.1 405B; it also turns `aggregate` off on
# qkv_fprop, proj_dgrad, fc1_fprop and fc2_dgrad. Its "h100" entries serve every Hopper GPU
# (compute capability 9.0), its "b200" entries the B200 (10.0).
# The userbuffers configuration Megatron-Bridge's Llama 3 70B recipe turns on for Hopper at TP4
# (recipes/llama/llama3.py), and its FP8 twin (training/comm_overlap.py@21b02e0).
_LLAMA3_70B_TP_OVERLAPS = (
    TpOverlap("userbuffers_bf16_h100_h8192_tp4_mbs1_seqlen8192", (9, 0), False, 4),
    TpOverlap("userbuffers_fp8_h100_h8192_tp4_mbs1_seqlen8192", (9, 0), True, 4),
)
# Blackwell's: NVIDIA's performance configurations of Llama 3 70B on B200 and GB200 keep the
# recipe's TP overlap on with the B200 TP2 userbuffers configuration
# (scripts/performance/configs/llama/llama3_llm_pretrain.py@21b02e0,
# llama3_70b_pretrain_config_b200/_gb200; the configurations: training/comm_overlap.py@21b02e0):
# at TP2 in NVIDIA's own layouts, and at TP4 in the A4 recipe, which runs that configuration with
# --tensor_model_parallel_size 4 (gpu-recipes training/a4/llama3_70b/nemo-gke/nemo2602/
# 64gpus-fp8mx-gbs256/recipe/launcher.sh@1f338bb). No source pairs it with TP8.
_LLAMA3_70B_BLACKWELL_TP_OVERLAPS = tuple(
    TpOverlap(f"userbuffers_{precision}_b200_h8192_tp2_mbs1_seqlen8192", (10, 0), precision == "fp8", tp)
    for precision in ("bf16", "fp8")
    for tp in (2, 4)
)
_405B_TP_OVERLAPS = (
    TpOverlap("userbuffers_fp8_h100_h16384_tp8_cp2_mbs1_seqlen8192", (9, 0), True, 8),
    TpOverlap("userbuffers_bf16_h100_h16384_tp8_cp2_mbs1_seqlen8192", (9, 0), False, 8),
    TpOverlap("userbuffers_fp8_b200_h16384_tp4_cp2_mbs1_seqlen8192", (10, 0), True, 4),
    TpOverlap("userbuffers_bf16_b200_h16384_tp4_cp2_mbs1_seqlen8192", (10, 0), False, 4),
)


def _llama(layers: int, hidden: int, heads: int, ffn: int, positions: int = _LLAMA31_POSITIONS) -> Architecture:
    return Architecture(
        layers=layers,
        hidden=hidden,
        heads=heads,
        kv_heads=8,
        ffn_hidden=ffn,
        vocab_size=_LLAMA3_VOCAB,
        max_positions=positions,
        gated_mlp=True,
    )


def _gpt(layers: int, hidden: int, heads: int) -> Architecture:
    return Architecture(
        layers=layers,
        hidden=hidden,
        heads=heads,
        kv_heads=heads,
        ffn_hidden=4 * hidden,
        vocab_size=_GPT2_VOCAB,
        max_positions=2048,
        gated_mlp=False,
    )


_LLAMA31_405B_A3U = Recipe(
    framework=Framework.NEMO2,
    image=versions.NEMO_2,
    seq_length=8192,
    micro_batch_size=1,
    global_batch_size=2016,
    tensor_parallel=8,
    pipeline_parallel=9,
    virtual_pipeline=14,
    context_parallel=1,
    fp8=True,
    max_steps=50,
    factory="llama31_405b",
    env=_PERF_ENV,
    tp_overlaps=_405B_TP_OVERLAPS,
)
# A4's own layout: 16 nodes, TP8 × PP8 × VP2, FP8 with current scaling; NeMo's llama31_405b
# recipe counts the embedding and the loss in the pipeline split, and the A4 recipe keeps that
# (126 layers + 2 over PP8 × VP2).
_LLAMA31_405B_A4 = dataclasses.replace(
    _LLAMA31_405B_A3U,
    global_batch_size=128,
    pipeline_parallel=8,
    virtual_pipeline=2,
    fp8_scaling=Fp8Scaling.CURRENT,
    pipeline_split_counts_embedding_and_loss=True,
)


# What set_llama3_common_configs sets beyond the recipe: a vocabulary padded for the tensor-parallel
# split (scripts/performance/configs/llama/llama3_llm_pretrain.py@21b02e0).
_LLAMA3_FIELDS = MappingProxyType({"model.should_pad_vocab": True})
# No A3 recipe runs Llama 3 8B on Megatron-Bridge in a GKE container (A3 Ultra's is a Slurm
# recipe on 25.11): Hopper machines take NVIDIA's H100 workload configuration.
_LLAMA3_8B_H100 = _bridge(
    global_batch_size=128,
    micro_batch_size=1,
    fp8=True,
    max_steps=50,
    tensor_parallel=1,
    pipeline_parallel=1,
    virtual_pipeline=None,
    context_parallel=1,
    recompute_layers=5,
    config_fields=_LLAMA3_FIELDS,
    # PerfEnvPlugin's model-specific settings for Llama 3 8B in FP8 current scaling on H100: NCCL's
    # CTA policy, and the executor's cuDNN layer norms kept.
    env=MappingProxyType({"NCCL_CTA_POLICY": "1", "NVTE_NORM_FWD_USE_CUDNN": "1", "NVTE_NORM_BWD_USE_CUDNN": "1"}),
)
# A4's recipe takes LLAMA3_8B_PRETRAIN_CONFIG_B200_FP8_CS_V1 (it passes no layout of its own).
_LLAMA3_8B_A4 = dataclasses.replace(
    _LLAMA3_8B_H100,
    micro_batch_size=2,
    max_steps=30,
    recompute_layers=None,
    cuda_graphs=CudaGraphs("local", ("full_iteration",)),
    env=MappingProxyType({}),
)
# A4X's recipe runs the GB200 configuration (the B200 one's layout and CUDA graphs) with micro
# batch 4 and 50 steps, on NeMo 25.11; the run keeps NeMo 26.02, whose Megatron-Bridge this
# program's launcher is checked against (make runtime-check).
_LLAMA3_8B_A4X = dataclasses.replace(_LLAMA3_8B_A4, micro_batch_size=4, max_steps=50)
# PerfEnvPlugin's pipeline chunk for Llama 3 70B pretraining (dropped without pipeline parallelism).
_LLAMA3_70B_PLUGIN_ENV = MappingProxyType({"NCCL_P2P_NET_CHUNKSIZE": "2097152"})
# A3 Ultra's recipe, on every Hopper machine: 64 GPUs, BF16, TP4 × PP8 × VP5. Its launcher starts
# run_script.py itself, without PerfEnvPlugin: the run takes the plugin's environment as NVIDIA's
# runs do (planners.runtimes.bridge.perf_env), 1 CUDA connection among it, without which the
# userbuffers overlap cannot overlap on Hopper.
_LLAMA3_70B_A3U = _bridge(
    global_batch_size=256,
    micro_batch_size=1,
    fp8=False,
    max_steps=50,
    tensor_parallel=4,
    pipeline_parallel=8,
    virtual_pipeline=5,
    context_parallel=1,
    tp_overlaps=_LLAMA3_70B_TP_OVERLAPS,
    config_fields=_LLAMA3_FIELDS,
    env=_LLAMA3_70B_PLUGIN_ENV,
)
# A4's: the same layout in MXFP8, with Transformer Engine's CUDA graphs of attention and MLP.
_LLAMA3_70B_A4 = dataclasses.replace(
    _LLAMA3_70B_A3U,
    fp8=True,
    fp8_scaling=Fp8Scaling.MXFP8,
    cuda_graphs=CudaGraphs("transformer_engine", ("mlp", "attn")),
    max_steps=30,
    tp_overlaps=_LLAMA3_70B_BLACKWELL_TP_OVERLAPS,
)

# A4X's: MXFP8 on TP2 × PP4 × VP5 (an NVLink domain joins 72 GPUs), no CUDA graphs, as the A4X
# recipe passes none; the TP overlap of NVIDIA's GB200 configuration (userbuffers for B200 at TP2).
_LLAMA3_70B_A4X = dataclasses.replace(
    _LLAMA3_70B_A4, tensor_parallel=2, pipeline_parallel=4, virtual_pipeline=5, cuda_graphs=None
)
# NVIDIA's measurement of that configuration on DGX GB200 (NeMo 26.02): 3,613 tokens/s/GPU on 64
# GPUs, so 256 × 8192 tokens per step take 9.07 s. No A4X recipe publishes its own.
# Qwen3 30B-A3B: 48 layers of 128 experts, 8 per token (Megatron-Bridge's provider of the model).
_QWEN3_PROVIDER = f"{_MB}:src/megatron/bridge/models/qwen/qwen_provider.py@21b02e0 (Qwen3MoEModelProvider30B_A3B)"
_QWEN3_CONFIGS = (
    f"{_MB}:scripts/performance/configs/qwen/qwen3_llm_pretrain.py and qwen3_workload_base_configs.py@21b02e0"
)
# What set_qwen3_common_configs sets on the model for throughput. It also forces the router to
# balance tokens evenly (moe_router_force_load_balancing, "required for token dropless"), which
# measures throughput but ignores what the router learns: a training run keeps its router.
_QWEN3_FIELDS = MappingProxyType({"model.bias_activation_fusion": True, "model.moe_router_fusion": True})
# A3 Ultra's recipe (the H100 configuration): 16 GPUs, FP8 current scaling, PP2 × VP12, EP8, the
# expert all-to-all overlapped. The configuration's DeepEP dispatcher is left out: DeepEP "is not
# supported in the current NeMo framework 26.02 container"
# (NVIDIA-NeMo/Megatron-Bridge:docs/releases/known-issues.md@21b02e0), so the provider's
# all-to-all dispatcher runs.
_QWEN3_30B_A3U = _bridge(
    seq_length=4096,
    global_batch_size=1024,
    micro_batch_size=4,
    fp8=True,
    max_steps=30,
    tensor_parallel=1,
    pipeline_parallel=2,
    virtual_pipeline=12,
    context_parallel=1,
    expert_parallel=8,
    moe_a2a_overlap=True,
    config_fields=_QWEN3_FIELDS,
    tp_comm_overlap=True,
    left_out_dispatcher="deepep",
)
# A4's: one node, MXFP8, TP4 with the configuration's EP8, Transformer Engine's CUDA graphs of
# the router, the dispatch preprocessing and attention.
_QWEN3_30B_A4 = dataclasses.replace(
    _QWEN3_30B_A3U,
    global_batch_size=512,
    micro_batch_size=8,
    tensor_parallel=4,
    pipeline_parallel=1,
    virtual_pipeline=None,
    fp8_scaling=Fp8Scaling.MXFP8,
    moe_a2a_overlap=False,
    cuda_graphs=CudaGraphs("transformer_engine", ("moe_router", "moe_preprocess", "attn")),
    left_out_dispatcher=None,
)
# The HybridEP token dispatcher as Megatron-Bridge turns it on (training/flex_dispatcher_backend.py
# apply_flex_dispatcher_backend, and the SMs scripts/performance/utils/overrides.py gives it);
# its NVLink domain comes from the machine (planners.runtimes.bridge.perf_env).
_HYBRIDEP: dict[str, bool | int | float | str] = {
    "model.moe_token_dispatcher_type": "flex",
    "model.moe_flex_dispatcher_backend": "hybridep",
    "model.moe_shared_expert_overlap": False,
    "model.moe_hybridep_num_sms": 32,
}
# A4X's Qwen3 recipe: 2 nodes, MXFP8, EP8, micro batch 4, global 1024, 50 steps, with the GB200
# configuration's HybridEP dispatcher and CUDA graphs of the router and the dispatch
# preprocessing; on NeMo 26.02 rather than the recipe's 25.11, as for Llama 3 8B there.
_QWEN3_30B_A4X = dataclasses.replace(
    _QWEN3_30B_A4,
    global_batch_size=1024,
    micro_batch_size=4,
    tensor_parallel=1,
    max_steps=50,
    cuda_graphs=CudaGraphs("transformer_engine", ("moe_router", "moe_preprocess")),
    config_fields=MappingProxyType({**_QWEN3_FIELDS, **_HYBRIDEP}),
)
# DeepSeek V3: 61 layers with latent attention, the first 3 dense, then 256 routed experts (8 per
# token) beside a shared one, and one multi-token prediction layer, as the library recipe trains
# it (recipes/deepseek/deepseek_v3.py@21b02e0: mtp_num_layers 1).
_DEEPSEEK_PROVIDER = (
    f"{_MB}:src/megatron/bridge/models/deepseek/deepseek_provider.py@21b02e0 (DeepSeekV3ModelProvider); "
    "deepseek-ai/DeepSeek-V3 config.json (max_position_embeddings 163840, num_nextn_predict_layers 1)"
)
_DEEPSEEK_RECIPE = f"{_MB}:src/megatron/bridge/recipes/deepseek/deepseek_v3.py@21b02e0"
_DEEPSEEK_CONFIGS = (
    f"{_MB}:scripts/performance/configs/deepseek/deepseek_llm_pretrain.py and deepseek_workload_base_configs.py@21b02e0"
)
# The library recipe's uneven splits of 61 layers, the embedding, the prediction layer and the
# loss (set_deepseek_v3_pipeline_model_parallel_layout), as Megatron Core layout strings.
_EIGHT_STAGES = "Et*8|(t*8|)*6t*5mL"
_SIXTEEN_STAGES = "Et*4|(t*4|)*14tmL"
_DEEPSEEK_LAYOUTS = MappingProxyType(
    {
        (4, 1): "Et*16|t*16|t*16|t*13mL",
        (8, 1): _EIGHT_STAGES,
        (4, 2): _EIGHT_STAGES,
        (16, 1): _SIXTEEN_STAGES,
        (8, 2): _SIXTEEN_STAGES,
        (4, 4): _SIXTEEN_STAGES,
    }
)
# What the library recipe and set_deepseek_v3_common_configs set beyond the provider, and the
# configuration's HybridEP dispatcher (DEEPSEEK_V3_PRETRAIN_CONFIG_{H100,B200}_V1/V2).
_DEEPSEEK_FIELDS: dict[str, bool | int | float | str] = {
    "model.mtp_loss_scaling_factor": 0.1,
    "model.init_method_std": 0.006,
    # The recipe's rotary settings, which it writes over the config.json's (10000 and 40.0) as a
    # float and an int.
    "model.rotary_base": 10000.0,
    "model.rotary_scaling_factor": 40,
    "model.moe_permute_fusion": True,
    "model.moe_router_fusion": True,
    **_HYBRIDEP,
    "dist.enable_megatron_core_experimental": True,
    # The library recipe's optimizer: precision-aware, BF16 moments and gradients, FP32 weights.
    "optimizer.use_precision_aware_optimizer": True,
    "optimizer.main_params_dtype": "torch.float32",
    "optimizer.main_grads_dtype": "torch.bfloat16",
    "optimizer.exp_avg_dtype": "torch.bfloat16",
    "optimizer.exp_avg_sq_dtype": "torch.bfloat16",
}
# A3 Ultra's recipe (the H100 configuration): 32 nodes, FP8 current scaling, PP16 × EP8 on the
# 16-stage split, the latent attention's up-projections recomputed; on Hopper the configuration
# turns gradient-reduction overlap off ("to avoid functional errors") and expandable segments on.
_DEEPSEEK_V3_A3U = _bridge(
    seq_length=4096,
    global_batch_size=2048,
    micro_batch_size=1,
    fp8=True,
    max_steps=30,
    tensor_parallel=1,
    pipeline_parallel=16,
    virtual_pipeline=None,
    context_parallel=1,
    expert_parallel=8,
    recompute_modules=("mla_up_proj",),
    pipeline_layouts=_DEEPSEEK_LAYOUTS,
    config_fields=MappingProxyType({**_DEEPSEEK_FIELDS, "ddp.overlap_grad_reduce": False}),
    env=MappingProxyType({"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}),
)
# A4's: the same layout in MXFP8 at global batch 4096, with Transformer Engine's CUDA graphs of
# the router, the dispatch preprocessing and attention.
_DEEPSEEK_V3_A4 = dataclasses.replace(
    _DEEPSEEK_V3_A3U,
    global_batch_size=4096,
    fp8_scaling=Fp8Scaling.MXFP8,
    cuda_graphs=CudaGraphs("transformer_engine", ("moe_router", "moe_preprocess", "attn")),
    config_fields=MappingProxyType(_DEEPSEEK_FIELDS),
    env=MappingProxyType({}),
)
# A4X has no recipe of its own: the H100 configuration's layout and precision, without what it sets
# for Hopper alone (gradient-reduction overlap off, expandable segments), as NVIDIA's GB200
# configuration leaves them (deepseek_llm_pretrain.py: overlap_grad_reduce on; perf_plugins.py:
# expandable segments on H100 only).
_DEEPSEEK_V3_A4X = dataclasses.replace(
    _DEEPSEEK_V3_A3U, config_fields=MappingProxyType(_DEEPSEEK_FIELDS), env=MappingProxyType({})
)
# GPT-OSS 120B: 36 layers of 128 experts, 4 per token, a GLU of quick-GELU, sliding-window
# attention on every other layer (Megatron-Bridge's provider of the model).
_GPT_OSS_PROVIDER = f"{_MB}:src/megatron/bridge/models/gpt_oss/gpt_oss_provider.py@21b02e0 (GPTOSSProvider120B)"
_GPT_OSS_CONFIGS = (
    f"{_MB}:scripts/performance/configs/gpt_oss/gpt_oss_llm_pretrain.py and gpt_oss_workload_base_configs.py@21b02e0"
)
# A3 Ultra's recipe (the H100 configuration, v2): 8 nodes, BF16 (no FP8 configuration is
# published for the model), PP4 × EP8, layer norms and expert activations recomputed. Its
# launcher drops `--max_steps 30` (no line continuation before it), so it runs the script's 50;
# the catalog keeps the 30 every sibling recipe runs.
_GPT_OSS_120B_A3U = _bridge(
    seq_length=4096,
    global_batch_size=1280,
    micro_batch_size=1,
    fp8=False,
    max_steps=30,
    tensor_parallel=1,
    pipeline_parallel=4,
    virtual_pipeline=None,
    context_parallel=1,
    expert_parallel=8,
    recompute_modules=("layernorm", "moe_act"),
    # set_gpt_oss_common_configs: the router's fused kernel (its forced balancing: see Qwen3).
    config_fields=MappingProxyType({"model.moe_router_fusion": True}),
    # "only a2a cp is supported for sink attention" (recipes/gpt_oss/gpt_oss.py@21b02e0).
    context_parallel_fields=MappingProxyType({"model.calculate_per_token_loss": True, "model.cp_comm_type": "a2a"}),
    # Its recipe's comm_overlap_config defaults to None, and NVIDIA's configuration passes none.
    comm_overlap_setup=False,
)
# A4's: 8 nodes, micro batch 4, every expert on its own GPU (EP64), Transformer Engine's CUDA
# graphs of the router, the dispatch preprocessing and attention.
_GPT_OSS_120B_A4 = dataclasses.replace(
    _GPT_OSS_120B_A3U,
    micro_batch_size=4,
    pipeline_parallel=1,
    expert_parallel=64,
    cuda_graphs=CudaGraphs("transformer_engine", ("moe_router", "moe_preprocess", "attn")),
)


# NVIDIA's published rows of the recipes' sizes (facts.published), by model, with the catalog
# machine of the row's GPU that prices them. No A3 Ultra figure is published for any model: A3
# Ultra's recipes run the H100 configurations, and an H200 has the H100's compute.
_H100, _B200, _GB200 = DgxSystems.DGX_H100, DgxSystems.DGX_B200, DgxSystems.DGX_GB200
_PRICED_ROWS: Mapping[str, tuple[tuple[str, PublishedRun], ...]] = {
    # No 26.02 figure for the model: the 25.11 ones.
    "llama3-8b": (
        ("a4-highgpu-8g", published_run("llama3-8b", "25.11", _B200)),
        ("a3-ultragpu-8g", published_run("llama3-8b", "25.11", _H100)),
    ),
    # The A3 Ultra layout (TP4 × PP8 × VP5) in FP8, as NVIDIA measured it on H100.
    "llama3-70b": (
        ("a4x-highgpu-4g", published_run("llama3-70b", "26.02", _GB200, "MXFP8")),
        ("a3-ultragpu-8g", published_run("llama3-70b", "26.02", _H100)),
    ),
    # A4X's at half its recipe's global batch.
    "qwen3-30b-a3b": (
        ("a3-ultragpu-8g", published_run("qwen3-30b-a3b", "26.02", _H100)),
        ("a4-highgpu-8g", published_run("qwen3-30b-a3b", "26.02", _B200)),
        ("a4x-highgpu-4g", published_run("qwen3-30b-a3b", "26.02", _GB200)),
    ),
    "gpt-oss-120b": (
        ("a3-ultragpu-8g", published_run("gpt-oss-120b", "26.02", _H100)),
        ("a4-highgpu-8g", published_run("gpt-oss-120b", "26.02", _B200)),
    ),
    # No H100 figure for the model on NeMo 26.02 (nor 25.11).
    "deepseek-v3": (("a4-highgpu-8g", published_run("deepseek-v3", "26.02", _B200)),),
}


def _published_steps(model: str, experts: bool = False) -> tuple[StepTime, ...]:
    """The model's step times from NVIDIA's rows: batch × sequence / (rate × GPUs). NVIDIA
    measures a mixture of experts with the router forced to spread tokens evenly
    (set_qwen3_common_configs and siblings: moe_router_force_load_balancing), which a training
    run, routing as its router learns, does not."""
    return tuple(
        StepTime(
            machine,
            nodes=row.gpus // MACHINE_TYPES[machine].gpus,
            global_batch_size=row.global_batch_size,
            fp8=row.precision is Precision.FP8,
            seconds=round(row.step_seconds, 2),
            source=row.source,
            measured_with=FORCED_BALANCE if experts else None,
        )
        for machine, row in _PRICED_ROWS[model]
    )


MODELS: Mapping[str, ModelSpec] = {
    m.name: m
    for m in (
        ModelSpec(
            "gpt-5b",
            _gpt(layers=24, hidden=4096, heads=32),
            Recipe(
                framework=Framework.NEMO1,
                image=versions.NEMO_1,
                seq_length=2048,
                micro_batch_size=4,
                global_batch_size=2048,
                tensor_parallel=1,
                pipeline_parallel=1,
                virtual_pipeline=None,
                context_parallel=1,
                fp8=False,
                max_steps=50,
                learning_rate=1.6e-4,
                init_std=0.01,
            ),
            {"architecture": _WALKTHROUGH, "recipe": _WALKTHROUGH},
        ),
        ModelSpec(
            "gpt3-175b",
            _gpt(layers=96, hidden=12288, heads=96),
            Recipe(
                framework=Framework.NEMO1,
                image=versions.NEMO_1,
                seq_length=2048,
                micro_batch_size=1,
                global_batch_size=2048,
                tensor_parallel=4,
                pipeline_parallel=8,
                virtual_pipeline=2,
                context_parallel=1,
                fp8=True,
                max_steps=50,
                learning_rate=0.9e-4,
                init_std=0.006,
                dropout=0.1,
            ),
            {"architecture": _GPT3_RECIPE, "recipe": _GPT3_RECIPE},
            (
                # The recipe's own method on its published log: the mean step time of steps 10-30
                # ("Average step time is computed by default using the steps 10 to 30", README),
                # as process_training_results.py computes it; 32 nodes, FP8.
                StepTime(
                    "a3-megagpu-8g",
                    32,
                    2048,
                    True,
                    25.397,
                    "AI-Hypercomputer/gpu-recipes:src/utils/training_metrics/examples/dllogger.json, steps 10-30 "
                    "(training/a3mega/gpt3_175b/nemo-gke/nemo2507/recipe/README.md)@2e1fd5e",
                ),
            ),
        ),
        ModelSpec(
            "llama3.1-8b",
            _llama(layers=32, hidden=4096, heads=32, ffn=14336),
            Recipe(
                framework=Framework.NEMO2,
                image=versions.NEMO_2,
                seq_length=8192,
                micro_batch_size=1,
                global_batch_size=512,
                tensor_parallel=1,
                pipeline_parallel=1,
                virtual_pipeline=None,
                context_parallel=2,
                fp8=False,
                max_steps=50,
                factory="llama31_8b",
            ),
            {"architecture": _LLAMA_ARCH, "recipe": _LLAMA_RECIPES},
            successor="llama3-8b",
        ),
        ModelSpec(
            "llama3.1-70b",
            _llama(layers=80, hidden=8192, heads=64, ffn=28672),
            Recipe(
                framework=Framework.NEMO2,
                image=versions.NEMO_2,
                seq_length=8192,
                micro_batch_size=1,
                global_batch_size=512,
                tensor_parallel=4,
                pipeline_parallel=4,
                virtual_pipeline=5,
                context_parallel=2,
                fp8=False,
                max_steps=50,
                factory="llama31_70b",
            ),
            {"architecture": _LLAMA_ARCH, "recipe": _LLAMA_RECIPES},
            successor="llama3-70b",
        ),
        ModelSpec(
            "llama3.1-405b",
            _llama(layers=126, hidden=16384, heads=128, ffn=53248),
            # The A3 Ultra recipe's layout: 72 nodes, TP8 × PP9 × VP14, FP8: its 126 layers split
            # evenly, so the launcher turns off the embedding and loss accounting NeMo's
            # llama31_405b recipe has on (NVIDIA/NeMo tests/collections/llm/recipes/test_llama31_405b.py@edc0cbf).
            _LLAMA31_405B_A3U,
            {
                "architecture": _LLAMA_ARCH,
                "recipe": _A3U_405B,
                "env": _PERF_SCRIPT,
                "tp_overlaps": _PERF_SCRIPT,
                "recipe on a4-highgpu-8g": _A4_405B,
            },
            # A4's own layout (the A3 Ultra layout's pipeline of 9 does not divide 16- or 32-node A4 runs).
            machine_recipes=MappingProxyType(
                {
                    "a4-highgpu-8g": _LLAMA31_405B_A4,
                }
            ),
        ),
        ModelSpec(
            "llama3-8b",
            _llama(layers=32, hidden=4096, heads=32, ffn=14336, positions=_LLAMA3_POSITIONS),
            _LLAMA3_8B_H100,
            {
                "architecture": _LLAMA3_PROVIDERS,
                "hugging_face": _hf_source(_LLAMA3_8B_HF, "src/megatron/bridge/recipes/llama/llama3.py"),
                "recipe": f"{_BRIDGE_CONFIGS} (LLAMA3_8B_PRETRAIN_CONFIG_H100_FP8_CS_V1: no GKE recipe for A3)",
                "recipe on a4-highgpu-8g": _bridge_recipe(
                    "a4/llama3-8b/megatron-bridge-gke", "8gpus-fp8cs-seq8192-gbs128"
                ),
                "recipe on a4x-highgpu-4g": "AI-Hypercomputer/gpu-recipes:training/a4x/llama3_8b/megatron-bridge-gke/"
                "nemo2511/8gpus-fp8cs-seq8192-gbs128/recipe/values.yaml and launcher.sh@2e1fd5e",
            },
            step_times=_published_steps("llama3-8b"),
            hugging_face=_LLAMA3_8B_HF,
            machine_recipes=MappingProxyType({"a4-highgpu-8g": _LLAMA3_8B_A4, "a4x-highgpu-4g": _LLAMA3_8B_A4X}),
        ),
        ModelSpec(
            "llama3-70b",
            _llama(layers=80, hidden=8192, heads=64, ffn=28672, positions=_LLAMA3_POSITIONS),
            _LLAMA3_70B_A3U,
            {
                "architecture": _LLAMA3_PROVIDERS,
                "hugging_face": _hf_source(_LLAMA3_70B_HF, "src/megatron/bridge/recipes/llama/llama3.py"),
                "recipe": _bridge_recipe("a3ultra/llama3_70b/megatron-bridge-gke", "64gpus-bf16-seq8192-gbs256"),
                "recipe on a4-highgpu-8g": _bridge_recipe("a4/llama3_70b/nemo-gke", "64gpus-fp8mx-gbs256"),
                "recipe on a4x-highgpu-4g": _bridge_recipe("a4x/llama3_70b/nemo-gke", "64gpus-fp8mx-gbs256")
                + f"; {_MB}:scripts/performance/configs/llama/llama3_workload_base_configs.py@21b02e0 "
                "(LLAMA3_70B_PRETRAIN_CONFIG_GB200_FP8_MX_V2)",
                "tp_overlaps": f"{_BRIDGE_LLAMA3_RECIPE}; on Blackwell {_MB}:scripts/performance/configs/llama/"
                "llama3_llm_pretrain.py@21b02e0 (llama3_70b_pretrain_config_b200, _gb200) and, at TP4, "
                "AI-Hypercomputer/gpu-recipes:training/a4/llama3_70b/nemo-gke/nemo2602/64gpus-fp8mx-gbs256/recipe/"
                "launcher.sh@1f338bb",
            },
            step_times=_published_steps("llama3-70b"),
            hugging_face=_LLAMA3_70B_HF,
            machine_recipes=MappingProxyType({"a4-highgpu-8g": _LLAMA3_70B_A4, "a4x-highgpu-4g": _LLAMA3_70B_A4X}),
        ),
        ModelSpec(
            "qwen3-30b-a3b",
            Architecture(
                layers=48,
                hidden=2048,
                heads=32,
                kv_heads=4,
                kv_channels=128,
                ffn_hidden=6144,
                vocab_size=151936,
                max_positions=40960,
                gated_mlp=True,
                experts=Experts(count=128, top_k=8, ffn_hidden=768),
            ),
            _QWEN3_30B_A3U,
            {
                "architecture": _QWEN3_PROVIDER,
                "hugging_face": _hf_source(_QWEN3_30B_HF, "src/megatron/bridge/recipes/qwen/qwen3_moe.py"),
                "recipe": _bridge_recipe("a3ultra/qwen3_30b_a3b/nemo-gke", "16gpus-fp8cs-gbs1024")
                + f"; {_QWEN3_CONFIGS} (QWEN3_30B_A3B_PRETRAIN_CONFIG_H100_FP8_CS_V1)",
                "recipe on a4-highgpu-8g": _bridge_recipe("a4/qwen3_30b_a3b/nemo-gke", "8gpus-fp8mx-seq4096-gbs512")
                + f"; {_QWEN3_CONFIGS} (QWEN3_30B_A3B_PRETRAIN_CONFIG_B200_FP8_MX_V1)",
                "recipe on a4x-highgpu-4g": "AI-Hypercomputer/gpu-recipes:training/a4x/qwen3_30b_a3b/"
                "megatron-bridge-gke/nemo2511/8gpus-fp8mx-seq4096-gbs1024/recipe/values.yaml and launcher.sh@2e1fd5e; "
                f"{_QWEN3_CONFIGS} (QWEN3_30B_A3B_PRETRAIN_CONFIG_GB200_FP8_MX_V1)",
            },
            step_times=_published_steps("qwen3-30b-a3b", experts=True),
            hugging_face=_QWEN3_30B_HF,
            machine_recipes=MappingProxyType({"a4-highgpu-8g": _QWEN3_30B_A4, "a4x-highgpu-4g": _QWEN3_30B_A4X}),
        ),
        ModelSpec(
            "gpt-oss-120b",
            Architecture(
                layers=36,
                hidden=2880,
                heads=64,
                kv_heads=8,
                kv_channels=64,
                ffn_hidden=2880,
                vocab_size=201088,
                max_positions=131072,
                gated_mlp=True,
                experts=Experts(count=128, top_k=4, ffn_hidden=2880),
            ),
            _GPT_OSS_120B_A3U,
            {
                "architecture": _GPT_OSS_PROVIDER,
                "hugging_face": _hf_source(_GPT_OSS_120B_HF, "src/megatron/bridge/recipes/gpt_oss/gpt_oss.py"),
                "recipe": _bridge_recipe("a3ultra/gpt_oss_120b/nemo-gke", "64gpus-bf16-gbs1280")
                + f"; {_GPT_OSS_CONFIGS} (GPT_OSS_120B_PRETRAIN_CONFIG_H100_BF16_V2)",
                "recipe on a4-highgpu-8g": _bridge_recipe(
                    "a4/gpt_oss_120b/megatron-bridge-gke", "64gpus-bf16-seq4096-gbs1280"
                )
                + f"; {_GPT_OSS_CONFIGS} (GPT_OSS_120B_PRETRAIN_CONFIG_B200_BF16_V2)",
            },
            step_times=_published_steps("gpt-oss-120b", experts=True),
            hugging_face=_GPT_OSS_120B_HF,
            machine_recipes=MappingProxyType({"a4-highgpu-8g": _GPT_OSS_120B_A4}),
        ),
        ModelSpec(
            "deepseek-v3",
            Architecture(
                layers=61,
                hidden=7168,
                heads=128,
                kv_heads=128,
                ffn_hidden=18432,
                vocab_size=129280,
                max_positions=163840,
                gated_mlp=True,
                experts=Experts(count=256, top_k=8, ffn_hidden=2048, shared_ffn_hidden=2048, dense_layers=3),
                latent_attention=LatentAttention(
                    q_lora_rank=1536, kv_lora_rank=512, qk_head_dim=128, qk_rope_head_dim=64, v_head_dim=128
                ),
                mtp_layers=1,
            ),
            _DEEPSEEK_V3_A3U,
            {
                "architecture": _DEEPSEEK_PROVIDER,
                "hugging_face": _hf_source(_DEEPSEEK_V3_HF, "src/megatron/bridge/recipes/deepseek/deepseek_v3.py"),
                "recipe": _bridge_recipe("a3ultra/deepseek_v3/megatron-bridge-gke", "256gpus-fp8cs-seq4096-gbs2048")
                + f"; {_DEEPSEEK_CONFIGS} (DEEPSEEK_V3_PRETRAIN_CONFIG_H100_FP8_CS_V2); {_DEEPSEEK_RECIPE}",
                "recipe on a4-highgpu-8g": _bridge_recipe(
                    "a4/deepseek_v3/megatron-bridge-gke", "256gpus-fp8mx-seq4096-gbs4096"
                )
                + f"; {_DEEPSEEK_CONFIGS} (DEEPSEEK_V3_PRETRAIN_CONFIG_B200_FP8_MX_V2); {_DEEPSEEK_RECIPE}",
                "recipe on a4x-highgpu-4g": f"A3 Ultra's; {_DEEPSEEK_CONFIGS} (deepseek_v3_pretrain_config_gb200) "
                f"and {_MB}:scripts/performance/perf_plugins.py@21b02e0 (PerfEnvPlugin)",
                "env": f"{_MB}:scripts/performance/perf_plugins.py@21b02e0 (PerfEnvPlugin)",
            },
            step_times=_published_steps("deepseek-v3", experts=True),
            hugging_face=_DEEPSEEK_V3_HF,
            machine_recipes=MappingProxyType({"a4-highgpu-8g": _DEEPSEEK_V3_A4, "a4x-highgpu-4g": _DEEPSEEK_V3_A4X}),
        ),
    )
}


def model_spec(name: str) -> ModelSpec:
    """The catalog entry for `name`; an unknown name lists the known ones."""
    try:
        return MODELS[name]
    except KeyError:
        raise ValueError(f"unknown model {name!r}; known: {', '.join(MODELS)}") from None
