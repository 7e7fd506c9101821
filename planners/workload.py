"""What every runtime of a training run shares: the files of its ConfigMap and where it is
mounted, where the run reads and writes inside its pods, its tokenizer's files, and what a
runtime is (planners.runtimes holds one module per framework, planners.nemo the launcher and
environment around them)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from facts import resiliency, versions
from facts.gke import GCSFUSE_CSI_DRIVER, GCSFUSE_HOST_NETWORK_KSA
from facts.machines import MachineType
from facts.models import Framework
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
# Beside the Megatron-Bridge and NeMo 2 launchers (their folder is on their module path): the step
# record both print (planners.monitoring.step_record), and the Lightning callback that prints it
# for NeMo 2.
STEP_RECORD_MODULE = "step_record.py"
LIGHTNING_STEP_LOG = "lightning_step_log.py"
# The settings file the NeMo 2 and Megatron-Bridge launchers read (NEMO_RUN_SETTINGS).
RUN_SETTINGS = "run.json"
# Node-local scratch on the local NVMe SSDs (ephemeral storage).
LOCAL_SSD = "/ssd"
# The public GPT-2 BPE files, mounted read-only (facts.versions).
GPT2_TOKENIZER_DIR = "/tokenizers/gpt2"
# Off GKE (no Cloud Storage FUSE), the same two files are expected in the data claim, here.
GPT2_IN_DATA = "tokenizers/gpt2"


def gpt2_dir(data_mount: str, gke: bool) -> str:
    return GPT2_TOKENIZER_DIR if gke else f"{data_mount}/{GPT2_IN_DATA}"


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


def set_dotted(config: dict[str, Any], dotted: str, value: Any) -> None:
    *path, last = dotted.split(".")
    for part in path:
        config = config.setdefault(part, {})
    config[last] = value


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


def file_path(name: str) -> str:
    """Where a file of the run's ConfigMap appears under WORKLOAD_DIR."""
    return f"{PYTHON_DIR}/{name}" if name == DLLOGGER else name


# Blackwell and later: NeMo's PerfEnvPlugin `gpu_sm100_or_newer`, compute capability 10.0 and up.
SM100 = (10, 0)
# PerfEnvPlugin's P2P chunk for pipeline-parallel runs (helpers.build_perf_env_plugin).
PP_COMM_CHUNKSIZE = 2097152


def nemo_perf_env(run: RunSpec, machine: MachineType) -> dict[str, str]:
    """What NeMo's performance scripts set for a NeMo 1 or NeMo 2 run's model (Megatron-Bridge's:
    planners.runtimes.bridge.perf_env):
    the recipe's constant part, and what PerfEnvPlugin derives from the GPU and the layout (NVIDIA/NeMo
    nemo/lightning/run/plugins.py@8cfedd7, PerfEnvPlugin.setup). Its layernorm SM margin is left
    to the machine's recipe (facts.machines), which the public GKE recipes tune to 8."""
    recipe, s = run.recipe, run.settings
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


# Megatron Core's field of each of a run's layout keys, as every runtime's configuration names it.
LAYOUT_FIELDS = MappingProxyType(
    {
        "tensorParallel": "tensor_model_parallel_size",
        "pipelineParallel": "pipeline_model_parallel_size",
        "virtualPipeline": "virtual_pipeline_model_parallel_size",
        "contextParallel": "context_parallel_size",
        "expertParallel": "expert_model_parallel_size",
    }
)


@dataclass(frozen=True)
class Runtime:
    """How one framework runs a training run: the files of the run's ConfigMap beside the
    launcher's, the script torchrun starts on every node and its arguments, the settings file
    the launcher hands it (None: its files say everything), the flag by which the launcher has it
    build and validate its configuration before training (None: it cannot), and the
    performance environment of its recipes. `keyed_overrides`: the configuration paths its
    launcher sets from a run's own keys, by the key that sets them; an override of one would
    train what the key does not say while the summary prices the key, so it is refused naming
    the key (planners.runtimes.check_overrides). `checkpoint_saves`: how many checkpoints a run of
    so many steps saves at an interval; `async_checkpoint`: whether the run's steps go on while a
    save is written (planners.checkpoints prices both)."""

    framework: Framework
    files: Callable[[RunSpec, RunPaths, MachineType], dict[str, str]]
    entrypoint: tuple[str, tuple[str, ...]]
    perf_env: Callable[[RunSpec, MachineType], dict[str, str]]
    keyed_overrides: Mapping[str, str]
    checkpoint_saves: Callable[[int, int], int]
    async_checkpoint: Callable[[RunSpec], bool]
    settings_file: str | None = None
    preflight_flag: str | None = None
