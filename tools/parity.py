"""The launcher against NVIDIA's own path, field by field and variable by variable.

For every catalog model on every machine whose recipe is Megatron-Bridge's, `make runtime-check`
builds the launcher's ConfigContainer and the one Megatron-Bridge's performance entry point
builds for the same model, GPU, precision and layout (tools/nvidia_path.py), in the same library,
and compares every field of the two after `pretrain`'s first step completes them; it compares
the run's environment with what the scripts' executor and PerfEnvPlugin set (`nvidia_env`).
Every difference must be one of DIFFERENCES, each with its reason; an unlisted difference, or a
listed one no case shows any more, fails the check. docs/training.md's parity table is generated
from DIFFERENCES (tools/docs.py).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum

from config.cluster import NetworkConfig
from facts.machines import MachineType
from planners.gpudirect import pod_networking
from planners.nemo import platform_env
from planners.networks import plan_gpu_networks
from planners.runs import RunSpec
from planners.runtimes import bridge
from planners.workload import RunPaths

SOURCE = "NVIDIA-NeMo/Megatron-Bridge scripts/performance@21b02e0 (v0.3.0, NeMo 26.02)"

# Megatron-Bridge's recipe function for each Hugging Face model the catalog's runs build, and the
# family of its performance configuration (scripts/performance/configs/<family>/).
RECIPE_FUNCTIONS: Mapping[str, tuple[str, str, str]] = {
    "meta-llama/Meta-Llama-3-8B": ("llama", "megatron.bridge.recipes.llama", "llama3_8b_pretrain_config"),
    "meta-llama/Meta-Llama-3-70B": ("llama", "megatron.bridge.recipes.llama", "llama3_70b_pretrain_config"),
    "Qwen/Qwen3-30B-A3B": ("qwen", "megatron.bridge.recipes.qwen.qwen3_moe", "qwen3_30b_a3b_pretrain_config"),
    "openai/gpt-oss-120b": ("gpt_oss", "megatron.bridge.recipes.gpt_oss", "gpt_oss_120b_pretrain_config"),
    "deepseek-ai/DeepSeek-V3": (
        "deepseek",
        "megatron.bridge.recipes.deepseek.deepseek_v3",
        "deepseek_v3_pretrain_config",
    ),
}
# The scripts' --gpu for each accelerator. They have no H200 configuration: an H200 run is
# compared with Hopper's, h100 (the same SM 9.0 kernels and the same userbuffers shapes).
SCRIPT_GPUS: Mapping[str, str] = {"h100": "h100", "h200": "h100", "b200": "b200", "gb200": "gb200"}
# The scripts' --compute_dtype of each mixed-precision recipe the launcher uses.
SCRIPT_DTYPES: Mapping[str, str] = {
    "bf16_mixed": "bf16",
    "bf16_with_fp8_current_scaling_mixed": "fp8_cs",
    "bf16_with_mxfp8_mixed": "fp8_mx",
}


def reference(run: RunSpec, machine: MachineType) -> dict[str, str | None]:
    """What tools/nvidia_path.py needs besides the run's settings: the recipe function, the
    scripts' family, GPU and precision names, and the token dispatcher backend."""
    model = run.spec.hugging_face
    if model is None or model.repository not in RECIPE_FUNCTIONS:
        raise KeyError(f"{run.model}: no Megatron-Bridge recipe function is known for it: add it to RECIPE_FUNCTIONS")
    family, module, function = RECIPE_FUNCTIONS[model.repository]
    recipe = run.recipe
    dispatcher = recipe.left_out_dispatcher or recipe.config_fields.get("model.moe_flex_dispatcher_backend")
    return {
        "family": family,
        "module": module,
        "function": function,
        "gpu": SCRIPT_GPUS[machine.accelerator.name],
        "dtype": SCRIPT_DTYPES[bridge.mixed_precision(run, machine)],
        # NVIDIA's configuration's token dispatcher, where the recipe leaves it out too.
        "dispatcher": str(dispatcher) if dispatcher else None,
    }


class Why(Enum):
    """What a difference from NVIDIA's configuration comes from."""

    RUN = "the run's own setting"
    PLATFORM = "a GKE or platform fact"
    CATALOG = "a catalog choice"
    BENCHMARK = "benchmark-only in NVIDIA's scripts"
    INERT = "read by nothing in either configuration"


@dataclass(frozen=True)
class Difference:
    """Fields (dotted ConfigContainer paths, or `env:NAME`; globs, separated by spaces) that may
    differ from NVIDIA's configuration, and why. `platform_only`: only where NVIDIA's sets no
    such field or variable (the platform's own), never where it sets another value; `where`: only
    in the cases it names."""

    fields: str
    why: Why
    reason: str
    platform_only: bool = False
    # The cases it concerns, by globs of "<model> on <machine>" separated by "|".
    where: str = "*"

    def matches(self, field: str, nvidia: object = None, case: str = "") -> bool:
        if self.platform_only and nvidia is not None:
            return False
        if not any(fnmatch.fnmatchcase(case, pattern.strip()) for pattern in self.where.split("|")):
            return False
        return any(fnmatch.fnmatchcase(field, pattern) for pattern in self.fields.split())


DIFFERENCES: tuple[Difference, ...] = (
    # What a run trains, not a 50-step benchmark.
    Difference("train.train_iters", Why.RUN, "the run's `steps`; the scripts run 50 (_set_common_perf_overrides)"),
    Difference("train.eval_interval", Why.RUN, "the run's `steps` (no evaluation during training); the recipe's 2000"),
    Difference(
        "scheduler.*",
        Why.RUN,
        "the recipe's learning-rate schedule over the run's `steps` (warm-up a tenth of them, at most the "
        "recipe's 2000); the scripts warm up 10 of 50 steps",
    ),
    Difference(
        "checkpoint.*",
        Why.RUN,
        "the run's `checkpoint` (its folder on the run's bucket, `intervalSteps`, resume, saved in the background); "
        "the scripts save none",
    ),
    Difference(
        "*.overlap_param_gather_with_optimizer_step",
        Why.RUN,
        "off in a run that saves checkpoints, which the library leaves it off for "
        "(training/comm_overlap.py _get_optimizer_overlap_cfgs); the scripts save none and turn it on",
    ),
    Difference(
        "logger.tensorboard_dir", Why.PLATFORM, "the run's folder on the shared filesystem; the scripts log none"
    ),
    Difference(
        "logger.save_config_filepath",
        Why.PLATFORM,
        "none: the run's plan (stack output) and its ConfigMap hold its settings; the scripts write "
        "/nemo_run/configs/ConfigContainer.yaml",
    ),
    Difference(
        "dataset.__type__",
        Why.RUN,
        "GPTDatasetConfig, which reads the run's `dataset` or generates mock data; the scripts' "
        "MockGPTDatasetConfig generates only (the fields both set are equal)",
    ),
    Difference("dataset.path_to_cache", Why.PLATFORM, "the index cache in the run's folder on the shared filesystem"),
    Difference(
        "tokenizer.*",
        Why.CATALOG,
        "mock data: NullTokenizer with the model's vocabulary, so generated tokens span the embedding it "
        "trains (the recipes give GPT-OSS and DeepSeek-V3 32,000, Qwen3 its Hugging Face tokenizer, a "
        "download); real data: the run's `tokenizer`",
        where="qwen3-* | gpt-oss-* | deepseek-*",
    ),
    Difference(
        "model.moe_router_force_load_balancing",
        Why.BENCHMARK,
        "the scripts force an even spread of tokens over the experts (set_qwen3_common_configs and "
        "siblings); a training run routes as its router learns. NVIDIA's MoE rows were measured so",
        where="qwen3-* | gpt-oss-* | deepseek-*",
    ),
    Difference(
        "model.moe_token_dispatcher_type model.moe_flex_dispatcher_backend model.moe_shared_expert_overlap "
        "env:CUDA_DEVICE_MAX_CONNECTIONS env:NVTE_*_LAYERNORM_SM_MARGIN",
        Why.CATALOG,
        "the all-to-all dispatcher where NVIDIA's H100 configuration uses DeepEP, which the NeMo 26.02 "
        "container does not support (Megatron-Bridge docs/releases/known-issues.md@21b02e0); with it go "
        "PerfEnvPlugin's 32 CUDA connections and SM margins of 20, here 8 and 16",
        where="qwen3-30b-a3b on a3-*",
    ),
    Difference(
        "ddp.data_parallel_sharding_strategy",
        Why.INERT,
        "Qwen3's recipe names Megatron FSDP's sharding; neither configuration uses Megatron FSDP",
        where="qwen3-30b-a3b *",
    ),
    Difference(
        "train.manual_gc_eval",
        Why.INERT,
        "DeepSeek-V3's recipe collects garbage every 5 evaluation steps, the launcher every 100; "
        "neither evaluates (eval_iters 0)",
        where="deepseek-v3 *",
    ),
    Difference(
        "comm_overlap.overlap_grad_reduce",
        Why.INERT,
        "NVIDIA's Blackwell DeepSeek-V3 functions set it on the overlap configuration, which copies it to "
        "ddp.overlap_grad_reduce, already on in both",
        where="deepseek-v3 on a4*",
    ),
    # The environment.
    Difference(
        "env:HF_HUB_OFFLINE",
        Why.PLATFORM,
        "1: a run's pods download nothing at run time (planners.workload.OFFLINE_ENV); the scripts' 0",
    ),
    Difference(
        "env:NVTE_*_LAYERNORM_SM_MARGIN",
        Why.PLATFORM,
        "8: A3 Mega's TCPXO flavour's value (gpu-recipes a3mega values), which wins over PerfEnvPlugin's",
        where="* on a3-megagpu-8g*",
    ),
    Difference(
        "env:NCCL_P2P_NET_CHUNKSIZE",
        Why.PLATFORM,
        "GPUDirect-TCPX's tuned 524288 (its nccl-config.yaml), which wins over PerfEnvPlugin's 2 MiB",
        where="* on a3-highgpu-8g*",
    ),
    Difference(
        "env:NCCL_NET_GDR_LEVEL env:NCCL_NET_GDR_C2C",
        Why.PLATFORM,
        "A4X's NCCL settings are its gIB plugin's (set_nccl_env.sh); the scripts' GB200 executor sets "
        "these two for DGX GB200's own fabric",
        where="* on a4x-highgpu-4g*",
    ),
    Difference(
        "env:NCCL_*",
        Why.PLATFORM,
        "the machine's GPUDirect stack: its NCCL plugin, network and tuning (docs/networking.md)",
        platform_only=True,
    ),
    Difference(
        "env:LD_LIBRARY_PATH env:NVTE_UB_SOCKET_IFNAME env:GPUS_PER_NUMA_NODE",
        Why.PLATFORM,
        "the node's NVIDIA libraries and the NCCL plugin; the RDMA flavour's interface for userbuffers' "
        "bootstrap; the GPUs per NUMA node, which the launcher binds each rank's CPUs by",
        platform_only=True,
    ),
    Difference(
        "env:RUN_NAME env:NEMO_* env:EXPERIMENT_DIR env:CHECKPOINT_DIR env:NNODES env:GPUS_PER_NODE "
        "env:MASTER_ADDR env:MASTER_PORT env:OMP_NUM_THREADS env:GLOO_SOCKET_IFNAME",
        Why.PLATFORM,
        "what the launcher and torchrun read: the run's name, folders and settings file, the rendezvous, "
        "the CPU threads per rank, Gloo's interface",
        platform_only=True,
    ),
)


def unlisted(differences: Mapping[str, tuple[object, object]], case: str) -> list[str]:
    """The fields of `differences` (field → (the run's, NVIDIA's)) of the case named `case`
    ("<model> on <machine>...") that DIFFERENCES does not list."""
    return [
        field
        for field, (_, nvidia) in differences.items()
        if not any(d.matches(field, nvidia, case) for d in DIFFERENCES)
    ]


def unused(differences: Mapping[str, Mapping[str, tuple[object, object]]]) -> list[Difference]:
    """The entries of DIFFERENCES that no case's differences (by case name) need any more."""
    seen = [(field, nvidia, case) for case, found in differences.items() for field, (_, nvidia) in found.items()]
    return [d for d in DIFFERENCES if not any(d.matches(field, nvidia, case) for field, nvidia, case in seen)]


# The environment of every run the scripts launch (utils/executors.py PERF_ENV_VARS).
_EXECUTOR_ENV: Mapping[str, str] = {
    "TORCH_NCCL_AVOID_RECORD_STREAMS": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "False",
    "NCCL_NVLS_ENABLE": "0",
    "NVTE_NORM_FWD_USE_CUDNN": "1",
    "NVTE_NORM_BWD_USE_CUDNN": "1",
    "TORCH_NCCL_HIGH_PRIORITY": "1",
    "HF_HUB_OFFLINE": "0",
}
_FLEX_BACKENDS = ("deepep", "hybridep")


def nvidia_env(run: RunSpec, machine: MachineType) -> dict[str, str]:
    """What the scripts' executor and PerfEnvPlugin.setup (perf_plugins.py) set for the run's
    model, GPU, precision and layout."""
    ref, s = reference(run, machine), run.settings
    gpu, dtype, recipe = str(ref["gpu"]), str(ref["dtype"]), str(ref["function"]).removesuffix("_pretrain_config")
    backend = ref["dispatcher"]
    env = dict(_EXECUTOR_ENV)
    if gpu == "gb200":
        # The executor's GB200 settings (utils/executors.py slurm_executor): GPUDirect RDMA
        # through the host bridge and over the chip-to-chip link.
        env |= {"NCCL_NET_GDR_LEVEL": "PHB", "NCCL_NET_GDR_C2C": "1"}
    # _set_num_cuda_device_max_connections
    connections = 32 if backend in _FLEX_BACKENDS else 8
    if gpu in ("b200", "b300", "gb200", "gb300"):
        connections = 32
    elif (s.tensor_parallel > 1 or s.context_parallel > 1) and not bridge.moe_a2a_overlap(run):
        connections = 1
    env["CUDA_DEVICE_MAX_CONNECTIONS"] = str(connections)
    margin = "20" if backend in _FLEX_BACKENDS else "16"
    env["NVTE_FWD_LAYERNORM_SM_MARGIN"] = env["NVTE_BWD_LAYERNORM_SM_MARGIN"] = margin
    if backend == "hybridep":  # _set_nvl_domain_size
        nvl8 = gpu in ("h100", "b200", "b300")
        env["NVLINK_DOMAIN_SIZE"] = "8" if nvl8 else "72"
        env["USE_MNNVL"] = "0" if nvl8 else "1"
        env["NUM_OF_HYBRID_EP_RANKS_PER_NVLINK_DOMAIN"] = str(min(s.expert_parallel, 8) if nvl8 else s.expert_parallel)
    if s.pipeline_parallel > 1 and recipe in ("llama3_70b", "llama31_405b"):
        env["NCCL_P2P_NET_CHUNKSIZE"] = "2097152"
    # _set_model_specific_environment_variables
    if recipe == "deepseek_v3" and gpu == "h100":
        env["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
    keep_cudnn_norm = (
        (gpu == "h100" and recipe == "llama3_8b" and dtype == "fp8_cs")
        or (gpu in ("gb200", "gb300") and recipe == "llama3_70b" and dtype in ("bf16", "fp8_cs"))
        or (gpu in ("gb200", "gb300") and recipe == "deepseek_v3" and dtype == "fp8_mx")
    )
    if gpu == "h100" and recipe == "llama3_8b" and dtype == "fp8_cs":
        env["NCCL_CTA_POLICY"] = "1"
    if not keep_cudnn_norm:
        del env["NVTE_NORM_FWD_USE_CUDNN"], env["NVTE_NORM_BWD_USE_CUDNN"]
    return env


def run_env(run: RunSpec, machine: MachineType, paths: RunPaths) -> dict[str, str]:
    """The environment the platform gives the run's training container on a default cluster."""
    networks = plan_gpu_networks("cluster", machine, NetworkConfig().gpu_cidr)
    networking = pod_networking(machine.gpudirect_stack, networks, machine.gpus, gib=machine.pod_gib_for(None))
    return platform_env(run, machine, networking, paths)


def env_differences(ours: Mapping[str, str], nvidia: Mapping[str, str]) -> dict[str, tuple[str | None, str | None]]:
    """`env:NAME` → (the run's value, NVIDIA's) for every variable either sets differently."""
    return {
        f"env:{name}": (ours.get(name), nvidia.get(name))
        for name in sorted(set(ours) | set(nvidia))
        if ours.get(name) != nvidia.get(name)
    }
