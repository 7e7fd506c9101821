"""NVIDIA's published Megatron-Bridge pretraining throughput, one record per table row: the
layouts NVIDIA chose for the catalog's models on the catalog's GPUs, and what they reached. The
catalog prices runs of the recipes' sizes with some of them (facts.models), and the layout planner
(planners.layout) is calibrated on them and checked against them.

The rows are those of the catalog's container, NeMo 26.02 (facts.versions.NEMO_2602), and of the
release before it, 25.11, which NVIDIA's page listed together; and, apart, NVIDIA's current
layouts: the newest row of each model, system and precision in the tables from 25.11 to 26.08.
Left out: B300 and GB300 rows (no catalog machine has those GPUs) and NVFP4 rows (the launcher
trains in BF16 or FP8). Rows run with Megatron-FSDP are kept, flagged: the catalog prices one,
and the planner's fit leaves them out. Every mixture-of-experts row was measured with tokens
forced evenly over the experts (the tables' note), none with checkpoints, all on NVIDIA's DGX
systems below.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from facts.machines import ACCELERATORS, Accelerator, Precision

# The page listed the 26.02 and 25.11 tables together at this commit.
SOURCE = "NVIDIA-NeMo/Megatron-Bridge:docs/performance-summary.md@21b02e0"
# Later: the 26.08 table on the page, the 26.04.01 to 26.06.01 tables in its archive.
LATEST_SOURCE = "NVIDIA-NeMo/Megatron-Bridge:docs/performance-summary.md@067f987"
ARCHIVE_SOURCE = "NVIDIA-NeMo/Megatron-Bridge:docs/performance-summary-archive.md@067f987"
# The tables' note under every release: MoE rows force-balance the tokens among the experts.
FORCED_BALANCE = "tokens forced evenly over the experts"


@dataclass(frozen=True)
class DgxSystem:
    """One of NVIDIA's DGX systems, as far as a layout's exchanges see it: its GPUs per node,
    the GPUs one NVLink domain joins, and the line rate of each GPU's scale-out NIC."""

    name: str
    accelerator: Accelerator
    gpus_per_node: int
    nvlink_domain_gpus: int
    gpu_nic_gbps: int
    # The catalog machine of the same GPU and NVLink domain: a layout meets its rules there.
    machine_type: str
    source: str


class DgxSystems(StrEnum):
    DGX_H100 = "DGX-H100"
    DGX_B200 = "DGX-B200"
    DGX_GB200 = "DGX-GB200"


DGX_SYSTEMS = {
    t.name: t
    for t in (
        DgxSystem(
            DgxSystems.DGX_H100,
            ACCELERATORS["h100"],
            8,
            8,
            400,
            "a3-megagpu-8g",
            "https://docs.nvidia.com/dgx/dgxh100-user-guide/introduction-to-dgxh100.html "
            "(8 H100, 8 single-port ConnectX-7 at 400 Gb/s for the compute fabric)",
        ),
        DgxSystem(
            DgxSystems.DGX_B200,
            ACCELERATORS["b200"],
            8,
            8,
            400,
            "a4-highgpu-8g",
            "https://docs.nvidia.com/dgx/dgxb200-user-guide/introduction-to-dgxb200.html "
            "(8 B200, 8 single-port ConnectX-7 at 400 Gb/s for the compute fabric)",
        ),
        DgxSystem(
            DgxSystems.DGX_GB200,
            ACCELERATORS["gb200"],
            4,
            72,
            400,
            "a4x-highgpu-4g",
            "https://docs.nvidia.com/dgx/dgxgb200-user-guide/ (a compute tray: 4 B200 and 4 ConnectX-7 at "
            "400 Gb/s; 18 trays in one NVLink domain of 72 GPUs)",
        ),
    )
}


@dataclass(frozen=True)
class PublishedRun:
    """One row of NVIDIA's pretraining tables: a model, a system and GPU count, the layout, and
    the measured throughput."""

    model: str
    release: str
    system: DgxSystem
    gpus: int
    # The table's precision: BF16, FP8 (current scaling), FP8-CS or MXFP8 (FP8-MX).
    precision_label: str
    global_batch_size: int
    micro_batch_size: int
    sequence_length: int
    tensor_parallel: int
    pipeline_parallel: int
    context_parallel: int
    # None: the table's "n/a", or 1 (no interleaving).
    virtual_pipeline: int | None
    expert_parallel: int
    tokens_per_second_per_gpu: float
    # Megatron-FSDP in place of the distributed optimizer: not a layout the launcher builds.
    fsdp: bool = False
    # DeepSeek-V3 "w/o MTP": the model without its multi-token prediction layer.
    without_mtp: bool = False

    @property
    def precision(self) -> Precision:
        return Precision.BF16 if self.precision_label == "BF16" else Precision.FP8

    @property
    def step_seconds(self) -> float:
        """The step time the row's throughput implies."""
        return self.global_batch_size * self.sequence_length / (self.gpus * self.tokens_per_second_per_gpu)

    @property
    def citation(self) -> str:
        """The row, as the table names it."""
        fsdp = " (Megatron FSDP)" if self.fsdp else ""
        name = _TABLE_NAMES[self.model] + (" (w/o MTP)" if self.without_mtp else "")
        return (
            f"{self.release}, {self.system.name}, {name}, {self.gpus} GPUs, {self.precision_label}, "
            f"GBS {self.global_batch_size}{fsdp}"
        )

    @property
    def source(self) -> str:
        return f"{_SOURCES[self.release]} ({self.citation})"

    @property
    def current_key(self) -> tuple[str, str, str]:
        """What one current row stands for: a model on a system at a precision (the 25.11 table's
        FP8-CS and FP8-MX are the later tables' FP8 and MXFP8)."""
        return self.model, self.system.name, _SAME_PRECISION.get(self.precision_label, self.precision_label)


# The tables' names of the catalog's models.
_TABLE_NAMES = {
    "llama3-8b": "LLAMA3_8B",
    "llama3-70b": "LLAMA3_70B",
    "llama3.1-405b": "LLAMA3.1_405B",
    "deepseek-v3": "DeepSeekV3",
    "gpt-oss-120b": "GPT OSS 120B",
    "qwen3-30b-a3b": "Qwen3_30B_a3B",
}

_H100, _B200, _GB200 = (DGX_SYSTEMS[t] for t in DgxSystems)


def _rows(release: str, *rows: tuple) -> tuple[PublishedRun, ...]:  # type: ignore[type-arg]
    """Rows of one release: (model, system, GPUs, precision, GBS, MBS, sequence, TP, PP, CP, VP,
    EP, tokens/s/GPU[, FSDP, without MTP]) with None for the table's n/a."""
    return tuple(
        PublishedRun(m, release, t, n, p, gbs, mbs, seq, tp, pp, cp, vp if vp != 1 else None, ep or 1, tok, *flags)
        for m, t, n, p, gbs, mbs, seq, tp, pp, cp, vp, ep, tok, *flags in rows
    )


# The 26.02 and 25.11 tables' rows of the catalog's models on H100, B200 and GB200, but NVFP4; a
# 25.11 "FP8-CS (FP8-MX)" row's FP8-CS figure.
PUBLISHED_RUNS: tuple[PublishedRun, ...] = _rows(
    "26.02",
    ("llama3-70b", _GB200, 64, "MXFP8", 256, 1, 8192, 2, 4, 1, 5, None, 3613),
    ("llama3-70b", _GB200, 64, "FP8", 256, 2, 8192, 1, 1, 1, None, None, 4040, True),
    ("llama3-70b", _H100, 64, "FP8", 256, 1, 8192, 4, 8, 1, 5, None, 1621),
    ("llama3.1-405b", _GB200, 256, "FP8", 1536, 1, 8192, 4, 16, 1, 4, None, 793),
    ("llama3.1-405b", _GB200, 256, "MXFP8", 1536, 1, 8192, 4, 16, 1, 8, None, 786),
    ("llama3.1-405b", _H100, 1024, "FP8", 1536, 1, 8192, 8, 8, 2, 8, None, 311),
    ("deepseek-v3", _GB200, 256, "MXFP8", 4096, 1, 4096, 1, 4, 1, 4, 64, 3955),
    ("deepseek-v3", _B200, 256, "MXFP8", 4096, 1, 4096, 1, 16, 1, None, 8, 2689),
    ("gpt-oss-120b", _GB200, 64, "BF16", 1280, 4, 4096, 1, 1, 1, None, 64, 15784),
    ("gpt-oss-120b", _B200, 64, "BF16", 1280, 4, 4096, 1, 1, 1, None, 64, 8047),
    ("gpt-oss-120b", _H100, 64, "BF16", 1280, 1, 4096, 1, 4, 1, None, 8, 5993),
    ("qwen3-30b-a3b", _GB200, 8, "MXFP8", 512, 4, 4096, 1, 1, 1, None, 8, 26084),
    ("qwen3-30b-a3b", _B200, 8, "MXFP8", 512, 1, 4096, 1, 1, 1, None, 8, 9691),
    ("qwen3-30b-a3b", _H100, 16, "FP8", 1024, 1, 4096, 1, 2, 1, 12, 8, 5113),
) + _rows(
    "25.11",
    ("llama3-8b", _GB200, 8, "FP8-CS", 128, 2, 8192, 1, 1, 1, None, 1, 31508),
    ("llama3-8b", _B200, 8, "FP8-CS", 128, 2, 8192, 1, 1, 1, None, 1, 30624),
    ("llama3-8b", _H100, 8, "FP8-CS", 128, 1, 8192, 1, 1, 1, None, 1, 14451, True),
    ("llama3-70b", _GB200, 64, "FP8-CS", 256, 2, 8192, 1, 1, 1, 1, 1, 4312, True),
    ("llama3-70b", _H100, 64, "FP8-CS", 128, 1, 8192, 4, 8, 1, 5, 1, 1602),
    ("llama3.1-405b", _GB200, 256, "FP8-CS", 1536, 1, 8192, 4, 16, 1, 4, 1, 813),
    ("llama3.1-405b", _B200, 128, "FP8-CS", 64, 1, 8192, 4, 8, 2, 8, 1, 661),
    ("llama3.1-405b", _H100, 1024, "FP8-CS", 512, 1, 8192, 8, 8, 2, 8, 1, 292),
    ("deepseek-v3", _GB200, 256, "BF16", 4096, 1, 4096, 1, 4, 1, 4, 64, 3139, False, True),
    ("deepseek-v3", _GB200, 256, "FP8-MX", 4096, 1, 4096, 1, 8, 1, 4, 32, 4018, False, True),
    ("deepseek-v3", _B200, 256, "FP8-MX", 2048, 1, 4096, 1, 16, 1, 1, 8, 2139),
    ("gpt-oss-120b", _GB200, 64, "BF16", 1280, 1, 8192, 1, 1, 1, 1, 64, 15876),
    ("gpt-oss-120b", _B200, 64, "BF16", 512, 4, 4096, 1, 1, 1, 1, 8, 8213),
    ("gpt-oss-120b", _H100, 64, "BF16", 512, 4, 4096, 1, 4, 1, 1, 8, 5630),
    ("qwen3-30b-a3b", _GB200, 8, "FP8-MX", 512, 4, 4096, 1, 1, 1, 1, 8, 23766),
    ("qwen3-30b-a3b", _B200, 8, "FP8-MX", 512, 1, 4096, 1, 1, 1, 1, 8, 9299),
    ("qwen3-30b-a3b", _H100, 16, "FP8-CS", 512, 2, 4096, 1, 2, 1, 24, 8, 5275),
)


# NVIDIA's rows after 26.02 that are still the newest of their model, system and precision (none
# of Llama 3 8B: the 25.11 rows are its newest).
_LATER_RUNS: tuple[PublishedRun, ...] = (
    _rows(
        "26.04.01",
        ("llama3-70b", _GB200, 64, "MXFP8", 256, 1, 8192, 2, 4, 1, 5, None, 3712),
        ("llama3-70b", _GB200, 64, "FP8", 256, 2, 8192, 1, 1, 1, None, None, 4224, True),
        ("llama3-70b", _H100, 64, "FP8", 256, 1, 8192, 4, 8, 1, 5, None, 1664),
        ("deepseek-v3", _B200, 256, "MXFP8", 4096, 1, 4096, 1, 8, 1, 2, 32, 3328),
        ("gpt-oss-120b", _GB200, 64, "BF16", 1280, 4, 4096, 1, 1, 1, None, 64, 16640),
        ("gpt-oss-120b", _B200, 64, "BF16", 1280, 4, 4096, 1, 1, 1, None, 8, 13568),
        ("gpt-oss-120b", _H100, 64, "BF16", 1280, 1, 4096, 1, 4, 1, None, 8, 5824),
        ("qwen3-30b-a3b", _B200, 8, "MXFP8", 512, 4, 4096, 1, 1, 1, None, 8, 27136),
    )
    + _rows(
        "26.06",
        ("llama3.1-405b", _GB200, 256, "FP8", 1536, 1, 8192, 4, 16, 1, 4, None, 843),
        ("llama3.1-405b", _GB200, 256, "MXFP8", 1536, 1, 8192, 4, 16, 1, 8, None, 783),
        ("llama3.1-405b", _H100, 1024, "FP8", 1536, 1, 8192, 8, 8, 2, 8, None, 326),
        ("qwen3-30b-a3b", _H100, 16, "FP8", 1024, 1, 4096, 1, 1, 1, None, 16, 8826),
    )
    + _rows(
        "26.08",
        ("deepseek-v3", _GB200, 256, "MXFP8", 4096, 1, 4096, 1, 4, 1, 4, 64, 4912),
        ("gpt-oss-120b", _GB200, 64, "MXFP8", 1280, 4, 4096, 1, 1, 1, None, 64, 28672),
        ("qwen3-30b-a3b", _GB200, 8, "MXFP8", 512, 4, 4096, 1, 1, 1, None, 8, 39936),
    )
)

# The 25.11 table's FP8-MX figures, in parentheses beside its FP8-CS ones ("FP8-CS (FP8-MX)", the
# same layout): PUBLISHED_RUNS keeps the FP8-CS figure of each such row.
_FP8_MX_FIGURES: tuple[PublishedRun, ...] = _rows(
    "25.11",
    ("llama3-8b", _GB200, 8, "FP8-MX", 128, 2, 8192, 1, 1, 1, None, 1, 29789),
    ("llama3-8b", _B200, 8, "FP8-MX", 128, 2, 8192, 1, 1, 1, None, 1, 29521),
    ("llama3.1-405b", _B200, 128, "FP8-MX", 64, 1, 8192, 4, 8, 2, 8, 1, 624),
)

_SOURCES = {
    "25.11": SOURCE,
    "26.02": SOURCE,
    "26.04.01": ARCHIVE_SOURCE,
    "26.06": ARCHIVE_SOURCE,
    "26.08": LATEST_SOURCE,
}
_SAME_PRECISION = {"FP8-CS": "FP8", "FP8-MX": "MXFP8"}


def _release_order(release: str) -> tuple[int, ...]:
    return tuple(int(part) for part in release.split("."))


def _newest(rows: tuple[PublishedRun, ...]) -> tuple[PublishedRun, ...]:
    newest: dict[tuple[str, str, str], PublishedRun] = {}
    for row in rows:
        held = newest.get(row.current_key)
        if held is None or _release_order(row.release) > _release_order(held.release):
            newest[row.current_key] = row
    return tuple(newest.values())


# NVIDIA's current layout of each catalog model on each system at each precision: the newest
# row of the tables from 25.11 to 26.08 (the 25.09 table and older name no precision; the later
# tables' figures come with newer containers than the catalog's, so only the layouts are
# compared; facts.models prices with PUBLISHED_RUNS).
CURRENT_RUNS = _newest(PUBLISHED_RUNS + _FP8_MX_FIGURES + _LATER_RUNS)


def published_run(model: str, release: str, system: DgxSystems, precision_label: str | None = None) -> PublishedRun:
    """The one row of a model on a system in a release (of that precision, where it has two)."""
    found = [
        r
        for r in PUBLISHED_RUNS
        if (r.model, r.release, r.system.name) == (model, release, system)
        and precision_label in (None, r.precision_label)
    ]
    if len(found) != 1:
        raise LookupError(f"{len(found)} published rows of {model} on {system} in {release}")
    return found[0]
