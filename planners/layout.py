"""The layout planner: what a layout of a model needs per GPU and how long its step takes on a
machine, and the search for the best layout of a model on a number of nodes.

Memory, per GPU of the fuller end of the pipeline, from the architecture alone (no fitting):
- weights, gradients and optimizer state: Megatron Core's distributed optimizer, BF16 weights and
  gradient buffers (the launcher and NVIDIA's configurations reduce gradients in BF16), 4 + 16/d
  bytes a parameter, or 4 + 10/d through the precision-aware optimizer of Megatron-Bridge's BF16
  runs (REPLICATED_BYTES_PER_PARAMETER and the sharded constants, sourced there), d the data ×
  context-parallel GPUs; a mixture of experts' weights over the expert-parallel GPUs, their state
  over the expert data-parallel ones;
- activations: per layer and micro-batch, the tensors the backward pass reads, split by tensor
  (sequence) and context parallelism, with flash attention (no s × s scores), as Korthikanti et
  al. count them ("Reducing Activation Recomputation in Large Transformer Models",
  arXiv:2205.05198, §4: 34·s·b·h/t for a GPT layer) for grouped-query attention, gated MLPs and
  experts, in BF16 but a linear layer's FP8 input; a fully recomputed layer keeps its input only
  (ibid. §5);
- the micro-batches each end of the pipeline holds: under 1F1B the pipeline size on the first
  stage and one on the last, under the interleaved schedule its warm-up chunks (megatron-core
  pipeline_parallel/schedules.py), and on the last stage the logits.

Step time: the model FLOPs per GPU (as NVIDIA counts them, causal attention) at the precision's
dense peak, in and outside the experts, stretched by the pipeline bubble ((p - 1) / (v × m) of the
step, Narayanan et al. 2021, arXiv:2104.04473 §2.2) and by recomputation (one more forward pass of
a recomputed layer); a term for experts whose share of the tokens is small; a cost per sample and
layer that tensor and context parallelism do not divide; and the experts' token exchange
(dispatch and combine, forward and backward) at the NVLink or scale-out bandwidth, not overlapped.
The four coefficients are fitted, non-negative least squares on relative error, on NVIDIA's
published rows (facts.published): `calibration()` says which; `leave_one_out` checks each row
against a fit without it. Tensor, context and data-parallel exchanges are overlapped in NVIDIA's
configurations and the rows cannot tell their cost apart from zero: the model leaves them out.
`agreements()` holds the search's first choices to NVIDIA's current layouts (facts.published
CURRENT_RUNS).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from facts.errors import RuleError
from facts.machines import MACHINE_TYPES, Accelerator, MachineType, Precision
from facts.models import Architecture, Framework, ModelSpec, RunSettings, StepTime, model_spec
from facts.published import CURRENT_RUNS, PUBLISHED_RUNS, DgxSystem, PublishedRun
from planners.runs import RunSpec, Tokenizer, check_layout, published_step

GB = 1e9
# Megatron Core's distributed optimizer with BF16 weights and gradient buffers: 2 + 2 bytes a
# parameter on every GPU of its shard, and spread over the data × context-parallel GPUs an FP32
# gradient, master weight and two Adam moments (4 + 16/d: NVIDIA/Megatron-LM
# docs/source/api-guide/dist_optimizer.md, "fp16/bf16 param, fp16/bf16 grads"; megatron-core 0.16
# optimizer/distrib_optimizer.py copies the gradient shard to FP32). The precision-aware optimizer
# (Megatron-Bridge's BF16 runs: planners.runtimes.bridge) reads the BF16 gradient as it is and keeps
# the master weight as its 16-bit remainder beside the BF16 one (store_param_remainders, on by
# default): 2 + 4 + 4.
REPLICATED_BYTES_PER_PARAMETER = 4
SHARDED_BYTES_PER_PARAMETER = 16
SHARDED_BYTES_PRECISION_AWARE = 10
# Of the sharded bytes, the FP32 gradient.
FP32_GRADIENT_BYTES = 4
# Activations are kept in BF16, a linear layer's FP8 input in one byte; the loss reads BF16 logits
# and an FP32 copy of them.
ACTIVATION_BYTES = 2
FP8_ACTIVATION_BYTES = 1
LOSS_BYTES_PER_LOGIT = 2 + 4
# Micro-batch sizes the search tries: NVIDIA's rows use 1 to 8.
MICRO_BATCH_SIZES = (1, 2, 4, 8)
CONTEXT_PARALLEL_SIZES = (1, 2, 4, 8)
# Proposals the planner returns by default.
TOP = 5


@dataclass(frozen=True)
class Fabric:
    """Where a layout runs, as far as the model sees it."""

    accelerator: Accelerator
    gpus_per_node: int
    nvlink_domain_gpus: int
    # Scale-out bandwidth of one GPU, GB/s, one direction.
    scale_out_gbytes_per_s: float

    @classmethod
    def of_machine(cls, machine: MachineType) -> Fabric:
        return cls(
            machine.accelerator,
            machine.gpus,
            machine.nvlink_domain_gpus,
            machine.gpu_nics * machine.gpu_nic_gbps / machine.gpus / 8,
        )

    @classmethod
    def of_system(cls, system: DgxSystem) -> Fabric:
        return cls(system.accelerator, system.gpus_per_node, system.nvlink_domain_gpus, system.gpu_nic_gbps / 8)

    @property
    def hbm_bytes(self) -> float:
        return self.accelerator.memory_gb * GB

    def nvlink_block(self, gpus: int) -> int:
        """GPUs of a run placed in one NVLink domain as one block of consecutive ranks: a node on
        an HGX board; on GB200 NVL72 the most nodes up to a domain's 18 that divide the run's, as
        NVIDIA's GB200 runs are segmented (Megatron-Bridge scripts/performance/utils/executors.py
        @v0.3.0, --segment) and A4X recipes sliced (16-node slices per sub-block)."""
        per_domain = max(self.nvlink_domain_gpus // self.gpus_per_node, 1)
        nodes = max(gpus // self.gpus_per_node, 1)
        block = max(k for k in range(1, min(per_domain, nodes) + 1) if nodes % k == 0)
        return block * self.gpus_per_node

    def experts_on_nvlink(self, expert_parallel: int, gpus: int) -> bool:
        """An expert-parallel group is e consecutive ranks (expert tensor parallelism 1, rank
        order tp-cp-ep-dp-pp: megatron-core parallel_state.py): on NVLink where e divides the
        run's NVLink block."""
        return self.nvlink_block(gpus) % expert_parallel == 0

    def carries_experts(self, expert_parallel: int, gpus: int) -> bool:
        """Whether the model knows the bandwidth of an expert-parallel group of this size: on
        NVLink, or across nodes with GPU NICs (a machine without them reaches other nodes over its
        gVNIC, whose share per GPU no source gives)."""
        return self.experts_on_nvlink(expert_parallel, gpus) or self.scale_out_gbytes_per_s > 0


@dataclass(frozen=True)
class Layout:
    """How a run splits its model and batch over its GPUs."""

    tensor_parallel: int
    pipeline_parallel: int
    virtual_pipeline: int | None
    context_parallel: int
    expert_parallel: int
    micro_batch_size: int
    global_batch_size: int
    sequence_length: int
    precision: Precision
    # Layers of each model chunk whose activations are recomputed in full (Megatron's
    # recompute_method block, recompute_num_layers).
    recompute_layers: int = 0

    @property
    def model_parallel(self) -> int:
        return self.tensor_parallel * self.pipeline_parallel * self.context_parallel

    @property
    def chunks(self) -> int:
        """Model chunks per pipeline stage."""
        return self.virtual_pipeline or 1

    def data_parallel(self, gpus: int) -> int:
        return gpus // self.model_parallel

    def micro_batches(self, gpus: int) -> int:
        """Micro-batches each model replica runs per step."""
        return self.global_batch_size // (self.micro_batch_size * self.data_parallel(gpus))

    @property
    def describe(self) -> str:
        parts = [f"TP{self.tensor_parallel}", f"PP{self.pipeline_parallel}"]
        if self.virtual_pipeline:
            parts.append(f"VP{self.virtual_pipeline}")
        if self.context_parallel > 1:
            parts.append(f"CP{self.context_parallel}")
        if self.expert_parallel > 1:
            parts.append(f"EP{self.expert_parallel}")
        parts.append(f"MBS{self.micro_batch_size}")
        if self.recompute_layers:
            parts.append(f"recompute {self.recompute_layers}")
        return " ".join(parts)

    @classmethod
    def of_settings(cls, s: RunSettings) -> Layout:
        """A run's layout (its RunSettings)."""
        return cls(
            s.tensor_parallel,
            s.pipeline_parallel,
            s.virtual_pipeline,
            s.context_parallel,
            s.expert_parallel,
            s.micro_batch_size,
            s.global_batch_size,
            s.sequence_length,
            Precision.FP8 if s.fp8 else Precision.BF16,
            s.recompute_layers or 0,
        )

    def onto(self, settings: RunSettings) -> RunSettings:
        """`settings` with this layout's parallel sizes, micro-batch and recomputation (the
        inverse of of_settings for what a layout decides)."""
        return dataclasses.replace(
            settings,
            tensor_parallel=self.tensor_parallel,
            pipeline_parallel=self.pipeline_parallel,
            virtual_pipeline=self.virtual_pipeline,
            context_parallel=self.context_parallel,
            expert_parallel=self.expert_parallel,
            micro_batch_size=self.micro_batch_size,
            recompute_layers=self.recompute_layers or None,
        )

    @classmethod
    def of_published(cls, row: PublishedRun) -> Layout:
        return cls(
            row.tensor_parallel,
            row.pipeline_parallel,
            row.virtual_pipeline,
            row.context_parallel,
            row.expert_parallel,
            row.micro_batch_size,
            row.global_batch_size,
            row.sequence_length,
            row.precision,
        )


def _matrices(arch: Architecture) -> int:
    return 3 if arch.gated_mlp else 2


def _expert_parameters(arch: Architecture) -> int:
    """Weights of every routed expert of every layer (without the router and shared experts)."""
    if arch.experts is None:
        return 0
    return arch.moe_layers * _matrices(arch) * arch.hidden * arch.experts.count * arch.experts.ffn_hidden


@dataclass(frozen=True)
class Memory:
    """Bytes one GPU of the fuller end of the pipeline holds, by kind: weights, gradients and
    optimizer state, of which the FP32 gradients exist only from the optimizer's step to the next
    step's start (`fp32_gradients`); buffers held for the whole run; the activations at the end
    of the forward passes; and then either the loss's logits or, in the backward pass that
    follows, a transient no kernel of the fused path has (the local attention's score gradients)."""

    states: float
    activations: float
    logits: float
    fp32_gradients: float = 0.0
    buffers: float = 0.0
    backward_transient: float = 0.0

    @property
    def forward_backward(self) -> float:
        """The peak of the forward and backward passes, before the optimizer's step."""
        return (
            self.states
            - self.fp32_gradients
            + self.buffers
            + self.activations
            + max(self.logits, self.backward_transient)
        )

    @property
    def peak(self) -> float:
        """What the GPU holds at its fullest: the forward and backward passes, or the optimizer's
        step, whose FP32 gradients come when the activations have gone. NVIDIA runs Llama 3.1
        405B on 256 GB200 at TP4 PP16 VP4 without recomputation (Megatron-Bridge
        scripts/performance/configs/llama/llama31_workload_base_configs.py,
        LLAMA31_405B_PRETRAIN_CONFIG_GB200_FP8_CS_V2), which fits by this peak (181 of 186 GB)
        and not with the FP32 gradients counted beside the activations (188 GB)."""
        return max(self.forward_backward, self.held)

    @property
    def held(self) -> float:
        """What stays allocated after a step."""
        return self.states + self.buffers


def _activation_bytes(
    arch: Architecture, layout: Layout, recomputed_modules: Collection[str], fused_kernels: bool = True
) -> tuple[float, float]:
    """(a layer's activations, a fully recomputed layer's input) for one micro-batch, bytes, on
    one GPU, averaged over dense and expert layers. `recomputed_modules`: the recipe's selective
    recomputation (Megatron Core's recompute_modules), whose outputs are not kept. In FP8 the
    input a linear layer keeps for its backward pass is the FP8 copy it multiplied with, one byte
    (Transformer Engine's Linear and LayerNormLinear save the quantized input). `fused_kernels`
    false: Megatron Core's local layers without Transformer Engine or fusions (make gpu-train;
    megatron-core 0.16 transformer/dot_product_attention.py, fusions/fused_softmax.py,
    transformer/mlp.py, transformer/utils.py), which keep each head's softmax output, s × s
    scores, as the s² term of Korthikanti et al. §4 (no dropout mask: the recipes' attention
    dropout is 0) and the layer's own s × s causal mask (get_default_causal_mask, made anew for
    each layer, one byte an element, whole on every GPU); queries and keys after the rotary
    embedding, and values repeated for every query head, or, with as many key-value heads as
    query heads, the fused projection's whole output, which the values are a view of; and a gated
    activation's output and its linear half (`x_linear + glu_linear_offset`, a new tensor) beside
    the product the second matrix keeps."""
    h, t = arch.hidden, layout.tensor_parallel
    tokens = layout.sequence_length * layout.micro_batch_size / layout.context_parallel
    half = ACTIVATION_BYTES
    # A linear layer's input: FP8 where the layer computes in FP8.
    linear_in = FP8_ACTIVATION_BYTES if layout.precision is Precision.FP8 else ACTIVATION_BYTES
    if (a := arch.latent_attention) and "mla_up_proj" not in recomputed_modules:
        qkv = arch.heads * (2 * (a.qk_head_dim + a.qk_rope_head_dim) + a.v_head_dim)
    elif a:
        qkv = a.q_lora_rank + a.kv_lora_rank + a.qk_rope_head_dim
    elif fused_kernels:
        qkv = (arch.heads + 2 * arch.kv_heads) * arch.head_dim
    elif arch.kv_heads < arch.heads:
        qkv = 3 * arch.heads * arch.head_dim
    else:
        qkv = (2 * arch.heads + arch.heads + 2 * arch.kv_heads) * arch.head_dim
    # Each sub-layer keeps its norm's input, and its output as the next linear layer's input
    # (recomputed with "layernorm").
    norm_out = 0 if "layernorm" in recomputed_modules else linear_in
    # Queries, keys and values for flash attention, and its output as the projection's input.
    attention = h * (half + norm_out) + qkv * half + h * linear_in
    if not fused_kernels:
        attention += arch.heads * layout.sequence_length * half
    # The first matrix's output(s), and the activation's output as the second matrix's input
    # (recomputed for experts with "moe_act").
    first = 2 if arch.gated_mlp else 1
    # Unfused, a gated activation keeps its output and its linear half beside the product.
    gate = 2 * half if arch.gated_mlp and not fused_kernels else 0
    dense = h * (half + norm_out) + arch.ffn_hidden * (first * half + gate + linear_in)
    per_token: float = attention
    if e := arch.experts:
        activation = 0 if "moe_act" in recomputed_modules else linear_in
        # The router's input (BF16), each token's copy per chosen expert as its first matrix's
        # input, the experts' first matrix and activation outputs, and the shared expert's.
        moe = (
            h * (half + norm_out)
            + e.top_k * (h * linear_in + e.ffn_hidden * (first * half + gate + activation))
            + e.shared_ffn_hidden * (first * half + gate + linear_in)
        )
        per_token += (arch.moe_layers * moe + (arch.layers - arch.moe_layers) * dense) / arch.layers
    else:
        per_token += dense
    layer = tokens * per_token / t
    if not fused_kernels:
        layer += layout.sequence_length**2 * layout.micro_batch_size
    kept_input = tokens * h * ACTIVATION_BYTES / t
    return layer, kept_input


def _chunks_in_flight(layout: Layout, micro_batches: int, rank: int) -> int:
    """Model chunks (each a micro-batch through one chunk's layers) pipeline rank `rank` holds at
    its peak: p − rank under 1F1B; 2(p − rank − 1) warm-up chunks, (v − 1) groups of p more and the
    first steady one under the interleaved schedule (megatron-core 0.16
    pipeline_parallel/schedules.py, group size p)."""
    p, v = layout.pipeline_parallel, layout.chunks
    if v == 1:
        return min(p - rank, micro_batches)
    return min(micro_batches * v, 2 * (p - rank - 1) + (v - 1) * p + 1)


def _layers_in_flight(arch: Architecture, layout: Layout, micro_batches: int, rank: int = 0) -> float:
    """Layer activations (in layers × micro-batches) pipeline rank `rank` holds at its peak."""
    chunk_layers = arch.layers / (layout.pipeline_parallel * layout.chunks)
    return chunk_layers * _chunks_in_flight(layout, micro_batches, rank)


def memory(
    arch: Architecture,
    layout: Layout,
    gpus: int,
    recomputed_modules: Collection[str] = (),
    precision_aware: bool = False,
    *,
    fused_kernels: bool = True,
) -> Memory:
    """Bytes per GPU of the layout's fuller end of the pipeline: the first stage, which holds the
    most micro-batches, or the last, which holds fewer and the logits (module docstring).
    `precision_aware`: a BF16 run keeps its optimizer state through the precision-aware optimizer.
    `fused_kernels` false: Megatron Core's local layers, as make gpu-train trains them
    (_activation_bytes)."""
    t, p, e = layout.tensor_parallel, layout.pipeline_parallel, layout.expert_parallel
    # The optimizer shards a parameter over its data- and context-parallel replicas
    # (megatron-core distributed_data_parallel.py, the intra-distributed-optimizer group).
    d = layout.data_parallel(gpus) * layout.context_parallel
    expert_d = max(gpus // (e * p), 1)
    aware = precision_aware and layout.precision is Precision.BF16
    sharded = SHARDED_BYTES_PRECISION_AWARE if aware else SHARDED_BYTES_PER_PARAMETER
    experts = _expert_parameters(arch)
    embedding = arch.vocab_size * arch.hidden
    # Every stage's share of the layers, and one end's embedding (both ends' with one stage).
    other = (arch.parameters - experts - 2 * embedding) / p + embedding * (2 if p == 1 else 1)
    # Parameters a GPU holds, and its shard of them over their data-parallel GPUs.
    replicated = other / t + experts / (p * e)
    shard = other / t / d + experts / (p * e) / expert_d
    states = replicated * REPLICATED_BYTES_PER_PARAMETER + shard * sharded
    # The FP32 copy of a gradient shard the distributed optimizer makes for its step (none
    # through the precision-aware optimizer, which reads the BF16 gradient).
    fp32_gradients = 0.0 if aware else FP32_GRADIENT_BYTES * shard
    layer, kept = _activation_bytes(arch, layout, recomputed_modules, fused_kernels)
    chunk_layers = arch.layers / (p * layout.chunks)
    recomputed = min(layout.recompute_layers, chunk_layers) / chunk_layers
    per_layer = (1 - recomputed) * layer + recomputed * kept
    m = layout.micro_batches(gpus)
    tokens = layout.sequence_length * layout.micro_batch_size / layout.context_parallel
    logits = tokens * arch.vocab_size / t * LOSS_BYTES_PER_LOGIT
    # A micro-batch's scores, heads × s × s: Megatron Core's local attention allocates a buffer of
    # that size once (dot_product_attention.py, the global memory buffer "mpu", handed to an
    # out-of-place baddbmm), and the backward pass of a layer's softmax holds the gradients of its
    # output and of its input at once.
    scores = 0 if fused_kernels else tokens * arch.heads / t * layout.sequence_length * ACTIVATION_BYTES
    first = _layers_in_flight(arch, layout, m) * per_layer
    last = _layers_in_flight(arch, layout, m, p - 1) * per_layer
    parts = {"fp32_gradients": fp32_gradients, "buffers": scores, "backward_transient": 2 * scores}
    if p > 1 and max(logits, 2 * scores) + last < 2 * scores + first:
        return Memory(states, first, 0.0, **parts)
    return Memory(states, last, logits, **parts)


@dataclass(frozen=True)
class Terms:
    """What a step's time is made of, before the fitted coefficients (module docstring)."""

    # Seconds at the precision's dense peak: model FLOPs outside and inside the routed experts,
    # with the pipeline bubble and recomputation.
    dense_compute: float
    expert_compute: float
    # The experts' seconds again, times SMALL_EXPERT_TOKENS over the tokens one expert takes in a
    # micro-batch: an expert's matrices are as small as its share of the tokens.
    small_experts: float
    # Samples × layers each GPU takes part in per step, in thousands: what tensor and context
    # parallelism do not divide (their exchanges, norms and launches) costs this much on each GPU.
    sample_layers: float
    # Seconds of the experts' token exchange at the nominal bandwidth (not fitted).
    expert_exchange: float


# The expert tokens at which `small_experts` equals the experts' compute.
SMALL_EXPERT_TOKENS = 1000


def terms(arch: Architecture, layout: Layout, gpus: int, fabric: Fabric) -> Terms:
    t, p, v, c, e = (
        layout.tensor_parallel,
        layout.pipeline_parallel,
        layout.chunks,
        layout.context_parallel,
        layout.expert_parallel,
    )
    m = layout.micro_batches(gpus)
    s = layout.sequence_length
    bubble = 1 + (p - 1) / (v * m)
    chunk_layers = arch.layers / (p * v)
    recompute = 1 + min(layout.recompute_layers, chunk_layers) / chunk_layers / 3
    peak = fabric.accelerator.peak_tflops(layout.precision) * 1e12
    samples = layout.global_batch_size / gpus
    total = arch.flops_per_sample(s, causal=True) * samples
    expert = small = exchange = 0.0
    # Tokens of one micro-batch on one GPU of the layer (sequence parallelism splits them over TP).
    tokens = s * layout.micro_batch_size / (c * t)
    if x := arch.experts:
        expert = 3 * 2 * _matrices(arch) * arch.hidden * x.ffn_hidden * x.top_k * s * arch.moe_layers * samples
        # The expert-parallel group's tokens, each routed to top_k of the experts.
        per_expert = tokens * e * x.top_k / x.count
        small = expert * SMALL_EXPERT_TOKENS / per_expert
        if e > 1:
            bandwidth = (
                fabric.accelerator.nvlink_gbytes_per_s
                if fabric.experts_on_nvlink(e, gpus)
                else fabric.scale_out_gbytes_per_s
            )
            # Dispatch and combine, forward and backward.
            per_layer = 4 * tokens * x.top_k * arch.hidden * ACTIVATION_BYTES * (e - 1) / e / (bandwidth * GB)
            exchange = per_layer * m * arch.moe_layers / p * bubble
    stretch = bubble * recompute
    layers = arch.layers + arch.mtp_layers
    return Terms(
        dense_compute=(total - expert) / peak * stretch,
        expert_compute=expert / peak * stretch,
        small_experts=small / peak * stretch,
        sample_layers=(m + (p - 1) / v) * layout.micro_batch_size * layers / p / 1000,
        expert_exchange=exchange,
    )


@dataclass(frozen=True)
class Calibration:
    """The step-time model's fitted coefficients, and the rows they were fitted on."""

    dense: float
    expert: float
    small_experts: float
    seconds_per_thousand_sample_layers: float
    rows: tuple[PublishedRun, ...] = dataclasses.field(repr=False)

    def step_seconds(self, t: Terms) -> float:
        return (
            self.dense * t.dense_compute
            + self.expert * t.expert_compute
            + self.small_experts * t.small_experts
            + self.seconds_per_thousand_sample_layers * t.sample_layers
            + t.expert_exchange
        )


def published_architecture(row: PublishedRun) -> Architecture:
    arch = model_spec(row.model).architecture
    return dataclasses.replace(arch, mtp_layers=0) if row.without_mtp else arch


def _row_terms(row: PublishedRun) -> Terms:
    return terms(published_architecture(row), Layout.of_published(row), row.gpus, Fabric.of_system(row.system))


def _solve(a: list[list[float]], b: list[float]) -> list[float] | None:
    """Gaussian elimination with partial pivoting; None for a singular system."""
    n = len(b)
    m = [[*row, b[i]] for i, row in enumerate(a)]
    for col in range(n):
        pivot = max(range(col, n), key=lambda r: abs(m[r][col]))
        if abs(m[pivot][col]) < 1e-300:
            return None
        m[col], m[pivot] = m[pivot], m[col]
        for r in range(n):
            if r != col:
                f = m[r][col] / m[col][col]
                m[r] = [x - f * y for x, y in zip(m[r], m[col], strict=True)]
    return [m[i][n] / m[i][i] for i in range(n)]


def _dot(a: Sequence[float], b: Sequence[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def _nonnegative_least_squares(x: Sequence[Sequence[float]], y: Sequence[float]) -> list[float]:
    """argmin ‖x·c − y‖ over c ≥ 0, by trying every set of free coefficients (four here): the
    optimum is the unconstrained optimum of one such set that comes out non-negative."""
    k = len(x[0])
    best: tuple[float, list[float]] = (math.inf, [0.0] * k)
    for size in range(1, k + 1):
        for free in itertools.combinations(range(k), size):
            a = [[sum(r[i] * r[j] for r in x) for j in free] for i in free]
            b = [sum(r[i] * yi for r, yi in zip(x, y, strict=True)) for i in free]
            solved = _solve(a, b)
            if solved is None or min(solved) < 0:
                continue
            c = [0.0] * k
            for i, value in zip(free, solved, strict=True):
                c[i] = value
            residual = sum((_dot(c, r) - yi) ** 2 for r, yi in zip(x, y, strict=True))
            best = min(best, (residual, c), key=lambda pair: pair[0])
    return best[1]


def calibrate(rows: Iterable[PublishedRun]) -> Calibration:
    """Fit the coefficients on `rows`, each weighted by its step time (relative error)."""
    rows = tuple(rows)
    x, y = [], []
    for row in rows:
        t = _row_terms(row)
        measured = row.step_seconds
        x.append([v / measured for v in (t.dense_compute, t.expert_compute, t.small_experts, t.sample_layers)])
        y.append(1 - t.expert_exchange / measured)
    dense, expert, small, sample_layers = _nonnegative_least_squares(x, y)
    return Calibration(dense, expert, small, sample_layers, rows)


# The rows the model is fitted on: every published row of a layout the launcher builds.
CALIBRATION_ROWS = tuple(r for r in PUBLISHED_RUNS if not r.fsdp)


@cache
def calibration() -> Calibration:
    return calibrate(CALIBRATION_ROWS)


@dataclass(frozen=True)
class HeldOut:
    row: PublishedRun
    predicted_seconds: float

    @property
    def error(self) -> float:
        """Predicted over measured, minus one."""
        return self.predicted_seconds / self.row.step_seconds - 1


# A held-out row predicted within this counts as met.
LEAVE_ONE_OUT_BOUND = 0.15


@cache
def leave_one_out() -> tuple[HeldOut, ...]:
    """Each calibration row predicted by a fit on all the others."""
    return tuple(
        HeldOut(row, calibrate(r for r in CALIBRATION_ROWS if r is not row).step_seconds(_row_terms(row)))
        for row in CALIBRATION_ROWS
    )


@dataclass(frozen=True)
class Proposal:
    """A layout the planner would run, with what it predicts."""

    layout: Layout
    memory: Memory
    step_seconds: float
    # Model TFLOPS per GPU as NVIDIA's tables count them (causal attention).
    tflops_per_gpu: float
    # Of the GPU's dense peak at the layout's precision.
    mfu: float


@dataclass(frozen=True)
class Target:
    """What a layout is planned for: a model (its architecture and recipe on a catalog machine,
    whose rules it must meet), a number of nodes, and the fabric that carries it."""

    spec: ModelSpec
    architecture: Architecture
    machine: MachineType
    nodes: int
    fabric: Fabric
    # Megatron-Bridge runs: the launcher sets recomputed layers, and BF16 runs keep their optimizer
    # state through the precision-aware optimizer (planners.runtimes.bridge). NVIDIA's rows ran it.
    bridge: bool = True
    # The image the run's pods run (None: its recipe's): what its launcher can split
    # (facts.models Recipe.pipeline_splits).
    image_ref: str | None = None

    @classmethod
    def on_machine(cls, spec: ModelSpec, machine: MachineType, nodes: int, image: str | None = None) -> Target:
        """The model as the launcher runs it on nodes of a catalog machine, in `image` (None:
        the recipe's)."""
        bridge = spec.recipe_on(machine.name).framework is Framework.MEGATRON_BRIDGE
        return cls(spec, spec.architecture, machine, nodes, Fabric.of_machine(machine), bridge, image)

    @property
    def image(self) -> str:
        return self.image_ref or self.spec.recipe_on(self.machine.name).image.ref

    @property
    def gpus(self) -> int:
        return self.nodes * self.machine.gpus

    @property
    def recomputed_modules(self) -> tuple[str, ...]:
        return self.spec.recipe_on(self.machine.name).recompute_modules

    def predict(self, layout: Layout) -> Proposal:
        arch, gpus = self.architecture, self.gpus
        seconds = calibration().step_seconds(terms(arch, layout, gpus, self.fabric))
        flops = arch.flops_per_sample(layout.sequence_length, causal=True) * layout.global_batch_size / gpus
        tflops = flops / seconds / 1e12
        return Proposal(
            layout,
            memory(arch, layout, gpus, self.recomputed_modules, self.bridge),
            seconds,
            tflops,
            tflops / self.fabric.accelerator.peak_tflops(layout.precision),
        )

    def fitted(self, layout: Layout) -> Layout | None:
        """The layout with the fewest recomputed layers per chunk that fits the GPUs' memory."""
        chunk_layers = math.ceil(self.architecture.layers / (layout.pipeline_parallel * layout.chunks))
        for recompute in range(chunk_layers + 1 if self.bridge else 1):
            candidate = dataclasses.replace(layout, recompute_layers=recompute)
            used = memory(self.architecture, candidate, self.gpus, self.recomputed_modules, self.bridge).peak
            if used <= self.fabric.hbm_bytes:
                return candidate
        return None

    def valid(self, layout: Layout) -> bool:
        """Whether the config check would accept the layout (planners.runs.check_layout), and the
        model knows the bandwidth of its expert exchange (Fabric.carries_experts)."""
        if not self.fabric.carries_experts(layout.expert_parallel, self.gpus):
            return False
        recipe = self.spec.recipe_on(self.machine.name)
        settings = dataclasses.replace(
            recipe.settings(
                global_batch_size=layout.global_batch_size,
                micro_batch_size=layout.micro_batch_size,
                tensor_parallel=layout.tensor_parallel,
                pipeline_parallel=layout.pipeline_parallel,
                context_parallel=layout.context_parallel,
                sequence_length=layout.sequence_length,
                fp8=layout.precision is Precision.FP8,
                expert_parallel=layout.expert_parallel,
            ),
            virtual_pipeline=layout.virtual_pipeline,
        )
        run = RunSpec(
            name="layout",
            model=self.spec.name,
            pool="layout",
            nodes=self.nodes,
            settings=settings,
            tokenizer=Tokenizer("megatron", "GPT2BPETokenizer"),
            priority="layout",
            machine_type=self.machine.name,
            given=_LAYOUT_KEYS,
            image=self.image_ref,
        )
        try:
            check_layout(run, self.machine)
        except RuleError:
            return False
        return True

    def candidates(self, global_batch_size: int, sequence_length: int, precision: Precision) -> Iterator[Layout]:
        """Layouts of whole numbers of GPUs, layers and micro-batches; `valid` has the last word."""
        arch, gpus = self.architecture, self.gpus
        recipe = self.spec.recipe_on(self.machine.name)
        # The layers Megatron splits over the stages, either way where the launcher can split so
        # (check_layout), and the recipe's uneven splits.
        splits = {arch.layers + 2 * counted for counted in recipe.pipeline_splits(self.image)}
        stages = {
            (p, v)
            for split in splits
            for p in _divisors(split)
            for v in range(1, split // p + 1)
            if split % (p * v) == 0
        }
        stages |= set(recipe.pipeline_layouts)
        experts = _divisors(arch.experts.count) if arch.experts else [1]
        tensor = _divisors(self.machine.nvlink_domain_gpus)
        for t, c, (p, v) in itertools.product(tensor, CONTEXT_PARALLEL_SIZES, sorted(stages)):
            if gpus % (t * c * p) or (p == 1 and v > 1):
                continue
            d = gpus // (t * c * p)
            for e, mbs in itertools.product(experts, MICRO_BATCH_SIZES):
                if global_batch_size % (mbs * d) or gpus % (e * p):
                    continue
                yield Layout(t, p, v if v > 1 else None, c, e, mbs, global_batch_size, sequence_length, precision)

    def search(self, global_batch_size: int, sequence_length: int, precision: Precision) -> list[Proposal]:
        """Every valid layout that fits (with the fewest recomputed layers it needs), fastest first."""
        proposals = []
        for layout in self.candidates(global_batch_size, sequence_length, precision):
            if self.valid(layout) and (fitting := self.fitted(layout)) is not None:
                proposals.append(self.predict(fitting))
        return sorted(proposals, key=lambda p: (p.step_seconds, p.memory.peak, p.layout.model_parallel))


_LAYOUT_KEYS = frozenset(
    {"tensorParallel", "pipelineParallel", "virtualPipeline", "contextParallel", "expertParallel"}
    | {"globalBatchSize", "microBatchSize", "sequenceLength", "fp8"}
)


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def published_target(row: PublishedRun) -> Target:
    """A published row's model on its system, with the rules of the catalog machine of its GPU."""
    machine = MACHINE_TYPES[row.system.machine_type]
    return Target(
        model_spec(row.model),
        published_architecture(row),
        machine,
        row.gpus // machine.gpus,
        Fabric.of_system(row.system),
    )


@dataclass(frozen=True)
class Agreement:
    """The planner's first choice for a published row's model, GPUs and batch, beside NVIDIA's
    layout as the model predicts it (with the recomputation it needs to fit, if any)."""

    row: PublishedRun
    first: Proposal | None
    nvidia: Proposal

    @property
    def gap(self) -> float | None:
        """How much slower the model predicts NVIDIA's layout than its first choice."""
        return None if self.first is None else self.nvidia.step_seconds / self.first.step_seconds - 1

    @property
    def agrees(self) -> bool:
        """The first choice is NVIDIA's layout, or NVIDIA's is predicted within 5 % of it."""
        if self.first is None:
            return False
        gap = self.nvidia.step_seconds / self.first.step_seconds - 1
        return self.first.layout == self.nvidia.layout or gap <= AGREEMENT_MARGIN


AGREEMENT_MARGIN = 0.05
# The recipe's own layout, which NVIDIA tuned on the hardware, is taken over one predicted less
# than this much faster: the model's error on the published rows is larger.
RECIPE_PREFERENCE = 0.02


# The rows the planner's choices are held to: NVIDIA's current layouts that the launcher builds.
AGREEMENT_ROWS = tuple(r for r in CURRENT_RUNS if not r.fsdp)


@cache
def agreements() -> tuple[Agreement, ...]:
    """The planner against NVIDIA's current layouts."""
    return agreements_on(AGREEMENT_ROWS)


def agreements_on(rows: Iterable[PublishedRun]) -> tuple[Agreement, ...]:
    """The planner against NVIDIA's choice, for each of `rows`."""
    found = []
    for row in rows:
        target = published_target(row)
        layout = Layout.of_published(row)
        nvidia = target.predict(target.fitted(layout) or layout)
        proposals = target.search(row.global_batch_size, row.sequence_length, row.precision)
        found.append(Agreement(row, proposals[0] if proposals else None, nvidia))
    return tuple(found)


@dataclass(frozen=True)
class LayoutRequest:
    """A model on some nodes of a catalog machine, at a global batch, sequence length and precision."""

    target: Target
    global_batch_size: int
    sequence_length: int
    precision: Precision

    @classmethod
    def of(
        cls,
        model: str,
        machine_type: str,
        nodes: int,
        *,
        global_batch_size: int | None = None,
        sequence_length: int | None = None,
        precision: Precision | None = None,
        image: str | None = None,
    ) -> LayoutRequest:
        """The request, the model's recipe on the machine filling what is None. RuleError names
        the option that makes it impossible."""
        try:
            spec = model_spec(model)
        except ValueError as e:
            raise RuleError("model", model, str(e)) from None
        machine = MACHINE_TYPES.get(machine_type)
        if machine is None:
            raise RuleError("machine", machine_type, f"is not a catalog machine: {', '.join(MACHINE_TYPES)}")
        if nodes < 1:
            raise RuleError("nodes", nodes, "must be at least 1")
        recipe = spec.recipe_on(machine.name)
        batch = recipe.global_batch_size if global_batch_size is None else global_batch_size
        if batch < 1:
            raise RuleError("globalBatchSize", batch, "must be at least 1")
        seq = recipe.seq_length if sequence_length is None else sequence_length
        if not 1 <= seq <= spec.architecture.max_positions:
            raise RuleError("sequenceLength", seq, f"{spec.name} takes 1 to {spec.architecture.max_positions} tokens")
        chosen = precision or (Precision.FP8 if recipe.fp8 else Precision.BF16)
        if chosen not in machine.accelerator.peak_dense_tflops:
            raise RuleError(
                "precision", chosen.value, f"{machine.accelerator.name} GPUs have no {chosen.value.upper()}"
            )
        return cls(Target.on_machine(spec, machine, nodes, image), batch, seq, chosen)

    def search(self, global_batch_size: int | None = None) -> list[Proposal]:
        return self.target.search(global_batch_size or self.global_batch_size, self.sequence_length, self.precision)

    def plan(self) -> list[Proposal]:
        """Every layout Megatron Core accepts for the request that fits the GPUs' memory (with the
        fewest recomputed layers it needs), fastest first. RuleError where none does: for a
        batch no layout splits, with the nearest batches that some do."""
        proposals = self.search()
        if proposals:
            return proposals
        target = self.target
        gpus = f"{target.gpus} {target.machine.accelerator.name.upper()} GPUs"
        near = self.nearby_batches()
        if near:
            raise RuleError(
                "globalBatchSize",
                self.global_batch_size,
                f"no layout of {target.spec.name} splits it over {gpus} and fits; {' or '.join(map(str, near))} would",
            )
        raise RuleError("nodes", target.nodes, f"no layout of {target.spec.name} fits {gpus}")

    def choose(self) -> Proposal:
        """What `layout: auto` runs: the fastest layout that fits, or the recipe's where it fits
        and is predicted within RECIPE_PREFERENCE of it."""
        proposals = self.plan()
        recipe = self.target.fitted(self.recipe_layout) if self.target.valid(self.recipe_layout) else None
        if recipe is not None:
            own = self.target.predict(recipe)
            if own.step_seconds <= proposals[0].step_seconds * (1 + RECIPE_PREFERENCE):
                return own
        return proposals[0]

    @property
    def recipe_layout(self) -> Layout:
        """The layout of the model's recipe on the machine, at the request's batch and precision."""
        recipe = self.target.spec.recipe_on(self.target.machine.name)
        return Layout.of_settings(
            recipe.settings(
                global_batch_size=self.global_batch_size,
                sequence_length=self.sequence_length,
                fp8=self.precision is Precision.FP8,
            )
        )

    def nearby_batches(self, count: int = 2) -> list[int]:
        """The global batches nearest the request's (within half to twice it) that some layout
        of these GPUs fits, nearest first."""
        b = self.global_batch_size
        replicas = {
            self.target.gpus // layout.model_parallel
            for layout in self.target.candidates(
                self.target.gpus * max(MICRO_BATCH_SIZES), self.sequence_length, self.precision
            )
            if self.target.valid(layout)
        }
        near = sorted(
            {m * d for d in replicas for m in (b // d, b // d + 1) if b / 2 <= m * d <= 2 * b and m * d != b},
            key=lambda x: (abs(x - b), x),
        )
        return [x for x in near if self.search(x)][:count]


def planned_settings(
    model: str,
    machine: MachineType,
    nodes: int,
    settings: RunSettings,
    kept: Mapping[str, Any] | None = None,
    *,
    image: str | None = None,
) -> RunSettings:
    """A run's settings with the layout the planner chooses for it (`layout: auto`): `kept`, the
    layout its submission recorded (planners.submitted), while that stands; else the fastest
    that fits its nodes, batch, sequence and precision in its image (None: its recipe's).
    RuleError names the run's key."""
    if kept is not None:
        return dataclasses.replace(
            Layout.of_settings(settings),
            tensor_parallel=kept["tensorParallel"],
            pipeline_parallel=kept["pipelineParallel"],
            virtual_pipeline=kept.get("virtualPipeline"),
            context_parallel=kept["contextParallel"],
            expert_parallel=kept["expertParallel"],
            micro_batch_size=kept["microBatchSize"],
            recompute_layers=kept.get("recomputeLayers") or 0,
        ).onto(settings)
    if MACHINE_TYPES.get(machine.name) is not machine:
        raise RuleError("layout", "auto", f"plans the catalog's machines only, and {machine.name} is not one")
    try:
        chosen = (
            LayoutRequest.of(
                model,
                machine.name,
                nodes,
                global_batch_size=settings.global_batch_size,
                sequence_length=settings.sequence_length,
                precision=Precision.FP8 if settings.fp8 else Precision.BF16,
                image=image,
            )
            .choose()
            .layout
        )
    except RuleError as error:
        if error.key == "precision":
            raise RuleError("fp8", True, str(error)) from None
        raise
    return chosen.onto(settings)


def predicted_step_seconds(run: RunSpec, machine: MachineType) -> float | None:
    """The model's step time for a run's own layout on its machine; None on a machine outside
    the catalog, whose fabric the model does not know, or for a layout Target.valid refuses (one
    check_layout refuses, or whose expert exchange the model has no bandwidth for)."""
    if MACHINE_TYPES.get(machine.name) is not machine:
        return None
    target = Target.on_machine(run.spec, machine, run.nodes, run.image)
    layout = Layout.of_settings(run.settings)
    return target.predict(layout).step_seconds if target.valid(layout) else None


def held_to(published: StepTime | None, predicted: float | None) -> float | None:
    """The step time a run is held to (priced at, and alerted on): NVIDIA's published step at
    exactly its layout on its machine, else the planner's prediction for its layout (None:
    neither)."""
    return published.seconds if published else predicted


def expected_step_seconds(run: RunSpec, machine: MachineType) -> float | None:
    """held_to for the run on its machine."""
    return held_to(published_step(run, machine.name), predicted_step_seconds(run, machine))


def planned_layout(run: RunSpec) -> str:
    """A run's layout as the planner writes one (Layout.describe)."""
    return Layout.of_settings(run.settings).describe
