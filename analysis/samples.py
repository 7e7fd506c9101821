"""Sample logs with known answers, written by the project itself, never copied:
`python -m analysis.samples --write examples/logs`.

examples/logs/ holds exactly what `sample_files()` returns (a test keeps it so), so every
analytics command of the docs runs on a fresh clone:

- `dllogger.json`: gpt-5b (facts.models, its NeMo 1 recipe) on 2 × a3-megagpu-8g (16 H100)
  in bf16, steps 0–39; from step 5 on a step takes 19.4 s on average (19.37, 19.40, 19.43 in
  turn), so any window of whole turns, 10–30 included, averages 19.4 s;
- `diverged.json`: the same run, its loss NaN from step `DIVERGED_AT` on;
- `events.jsonl`: the run's goodput events (payload/launch.sh's format): one restart,
  checkpoints up to step 400, 9300 s from first to last event; at 19.4 s a step, 400 steps are
  7760 s of kept work, a goodput of 83.44 %;
- `all_gather.log`: a fabric check's nccl-tests output (its file name: scripts/nccl_test.sh)
  on 2 × a3-ultragpu-8g over the rdma flavour's published sizes, each message taking
  `NCCL_LATENCY_US` plus its size at `NCCL_ALGBW_GBPS`;
- `node-0.log`: rank 0's output of the run with `stragglers: true`, one Megatron Core straggler
  report per step for `STRAGGLER_REPORTS` steps: rank `STRAGGLER_RANK` (node 1) is the slowest in
  15 of the 20, by `STRAGGLER_SPREAD`; in the other 5 another rank is, by 2 %.

The writers follow the formats' own sources, not analysis/'s readers: DLLogger's
JSONStreamBackend (NVIDIA/dllogger:dllogger/logger.py@07ec82a) and nccl-tests' output
(NVIDIA/nccl-tests src/util.cu@a0b82b2: writeDeviceReport, writeResultHeader,
writeBenchmarkLinePreamble and Body, getFloatStr, writeResultFooter) and Megatron Core's
straggler report (megatron-core 0.16 megatron/core/utils.py, StragglerDetector.report and
_ValueWithRank.__str__, through Python's default logging format). The tests write their own logs
with them too.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from analysis.nccl import COLLECTIVES, TYPE_SIZES
from facts.machines import MACHINE_TYPES
from facts.models import MODELS
from facts.nccl import PUBLISHED

# ---------------------------------------------------------------------------- DLLogger


def dllogger_line(
    step: int | str, data: Mapping[str, object], timestamp: float = 1727486493.241469, elapsed: float = 32.927938
) -> str:
    """One record as JSONStreamBackend.log writes it (its datetime is the writer's local time, UTC here)."""
    record = {
        "timestamp": str(timestamp),
        "datetime": str(datetime.fromtimestamp(timestamp, UTC).replace(tzinfo=None)),
        "elapsedtime": str(elapsed),
        "type": "LOG",
        "step": step,
        "data": dict(data),
    }
    return "DLLL " + json.dumps(record)


def step_data(step: int, step_time: float, loss: float | None = None) -> dict[str, object]:
    data: dict[str, object] = {"lr": 1e-4, "global_step": float(step), "train_step_timing in s": step_time}
    if loss is not None:
        data["reduced_train_loss"] = loss
    return data


# ---------------------------------------------------------------------------- nccl-tests


def _float_str(value: float, width: int) -> str:
    """getFloatStr: %.2f, else %.1f, else %.0f, else %.1e (or %.0e below width 7), to fit `width`."""
    for text in (f"{value:{width}.2f}", f"{value:{width}.1f}", f"{value:{width}.0f}"):
        if len(text) <= width:
            return text
    return f"{value:{width}.1e}" if width >= 7 else f"{value:{width}.0e}"


@dataclass
class Half:
    """One half of a row, out-of-place or in-place."""

    time_us: float
    wrong: int | None = 0  # None prints N/A (-c 0)
    # Override the printed bandwidths (to write impossible tables).
    algbw: float | None = None
    busbw: float | None = None


@dataclass
class NcclRun:
    """One nccl-tests run: its sizes and the time of each, out-of-place and in-place."""

    collective: str
    ranks: int
    rows: Sequence[tuple[int, Half, Half]]
    hosts: Sequence[str] = ("nccl-host-1", "nccl-host-2")
    device: str = "NVIDIA H100 80GB HBM3"
    name_line: bool = True  # "# Collective test starting" (nccl-tests 2.16 and later)
    device_report: bool = True
    data_type: str = "float"
    out_of_bounds: int = 0
    average: float | None = None  # override the printed average
    extra_rows: list[str] = field(default_factory=list)

    def busbw(self) -> list[float]:
        """Every busbw of the table, unrounded, as nccl-tests averages them: out-of-place, in-place, row by row."""
        return [self.bandwidths(size, half)[1] for size, *halves in self.rows for half in halves]

    def bandwidths(self, size: int, half: Half) -> tuple[float, float]:
        algbw = half.algbw if half.algbw is not None else size / 1e9 / (half.time_us * 1e-6)
        busbw = half.busbw if half.busbw is not None else algbw * COLLECTIVES[self.collective].bus_factor(self.ranks)
        return algbw, busbw

    def lines(self) -> list[str]:
        program = f"{self.collective}_perf"
        lines = ["# nccl-tests version 2.17.6 nccl-headers=22703 nccl-library=22703"]
        if self.name_line:
            lines.append(f"# Collective test starting: {program}")
        sizes = [size for size, _, _ in self.rows]
        lines.append(
            f"# nThread 1 nGpus 1 minBytes {min(sizes)} maxBytes {max(sizes)} step: 2(factor) warmup iters: 5 "
            "iters: 20 agg iters: 1 validation: 1 graph: 0 unalign: 0"
        )
        lines.append("#")
        if self.device_report:
            lines.append("# Using devices")
            per_host = self.ranks // len(self.hosts)
            for rank in range(self.ranks):
                host, device = self.hosts[rank // per_host], rank % per_host
                lines.append(
                    f"#  Rank {rank:2d} Group {0:2d} Pid {1000 + rank:6d} on {host:>10s} device {device:2d} "
                    f"[{0:04x}:{4 + device:02x}:{0:02x}] {self.device}"
                )
        lines += [
            "#",
            f"# {'':>10s}  {'':>12s}  {'':>8s}  {'':>6s}  {'':>6s}           out-of-place"
            "                       in-place",
            f"# {'size':>10s}  {'count':>12s}  {'type':>8s}  {'redop':>6s}  {'root':>6s}  {'time':>7s}  {'algbw':>6s}  "
            f"{'busbw':>6s}  {'#wrong':>6s}  {'time':>7s}  {'algbw':>6s}  {'busbw':>6s}  {'#wrong':>6s}",
            f"# {'(B)':>10s}  {'(elements)':>12s}  {'':>8s}  {'':>6s}  {'':>6s}  {'(us)':>7s}  {'(GB/s)':>6s}  "
            f"{'(GB/s)':>6s}  {'':>6s}  {'(us)':>7s}  {'(GB/s)':>6s}  {'(GB/s)':>6s}  {'':>6s}",
        ]
        for size, oop, ip in self.rows:
            lines.append(self.row(size, oop, ip))
        lines += self.extra_rows
        busbw = self.busbw()
        average = self.average if self.average is not None else sum(busbw) / len(busbw)
        lines += [
            f"# {'Out of bounds values':<20s} : {self.out_of_bounds} {'FAILED' if self.out_of_bounds else 'OK'}",
            f"# {'Avg bus bandwidth':<20s} : {average:g} ",
            "#",
            f"# Collective test concluded: {program}",
        ]
        return lines

    def row(self, size: int, oop: Half, ip: Half) -> str:
        collective = COLLECTIVES[self.collective]
        count = size // TYPE_SIZES[self.data_type] // (self.ranks if collective.size_counts_every_rank else 1)
        redop = "sum" if collective.reduces else "none"
        text = f"{size:12d}  {count:12d}  {self.data_type:>8s}  {redop:>6s}  {-1:6d}"
        for half in (oop, ip):
            algbw, busbw = self.bandwidths(size, half)
            wrong = "   N/A" if half.wrong is None else f"{half.wrong:6g}"
            text += f"  {_float_str(half.time_us, 7)}  {_float_str(algbw, 6)}  {_float_str(busbw, 6)}  {wrong}"
        return text


def at_bandwidth(size: int, algbw_gbps: float, wrong: int | None = 0) -> Half:
    """The time that gives `algbw_gbps` at `size` bytes; 0 bytes take a latency's 10 µs at 0 GB/s."""
    return Half(size / (algbw_gbps * 1e9) * 1e6 if size else 10.0, wrong)


# ---------------------------------------------------------------------------- the samples

MODEL = MODELS["gpt-5b"]
MACHINE = MACHINE_TYPES["a3-megagpu-8g"]
NODES = 2
GPUS = NODES * MACHINE.gpus
PRECISION = "bf16"
STEPS = 40
STEP_TIME_S = 19.4
# Steps 0–4 are slower (compilation, warm-up), the first the slowest.
_WARM_UP_S = (31.6, 22.9, 20.8, 19.9, 19.6)
DIVERGED_AT = 35
# The `metrics` options for the DLLogger samples: the run's own numbers.
METRICS_OPTIONS = (
    "--gpus", str(GPUS), "--global-batch-size", str(MODEL.recipe.global_batch_size),
    "--accelerator", MACHINE.accelerator.name, "--precision", PRECISION,
)  # fmt: skip
_START = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)

# Goodput: (minutes after _START, event, attempt, step). Attempt 0 trains from step 0, saves
# 100 and 200 and dies; attempt 1 resumes from 200 and saves 300 and 400.
_EVENTS = (
    (0, "job_started", 0, None),
    (3, "checkpoint_loaded", 0, 0),
    (36, "checkpoint_saved", 0, 100),
    (69, "checkpoint_saved", 0, 200),
    (80, "job_terminated", 0, None),
    (84, "job_started", 1, None),
    (87, "checkpoint_loaded", 1, 200),
    (120, "checkpoint_saved", 1, 300),
    (153, "checkpoint_saved", 1, 400),
    (155, "job_terminated", 1, None),
)

NCCL_MACHINE = MACHINE_TYPES["a3-ultragpu-8g"]
NCCL_PUBLISHED = PUBLISHED[NCCL_MACHINE.gpudirect]
NCCL_LATENCY_US = 50.0
NCCL_ALGBW_GBPS = 360.0


def step_time(step: int) -> float:
    return _WARM_UP_S[step] if step < len(_WARM_UP_S) else round(STEP_TIME_S + 0.03 * (step % 3 - 1), 2)


def _parameters() -> dict[str, object]:
    """The run's NeMo 1 config as the DLLogger PARAMETER record carries it, from the catalog."""
    a, recipe = MODEL.architecture, MODEL.recipe
    return {
        "cfg/micro_batch_size": recipe.micro_batch_size,
        "cfg/global_batch_size": recipe.global_batch_size,
        "cfg/tensor_model_parallel_size": recipe.tensor_parallel,
        "cfg/pipeline_model_parallel_size": recipe.pipeline_parallel,
        "cfg/context_parallel_size": recipe.context_parallel,
        "cfg/encoder_seq_length": recipe.seq_length,
        "cfg/max_position_embeddings": a.max_positions,
        "cfg/num_layers": a.layers,
        "cfg/hidden_size": a.hidden,
        "cfg/ffn_hidden_size": a.ffn_hidden,
        "cfg/num_attention_heads": a.heads,
        "cfg/num_query_groups": None,
        "cfg/tokenizer/library": "megatron",
        "cfg/tokenizer/type": "GPT2BPETokenizer",
        "trainer/num_nodes": NODES,
        "trainer/devices": MACHINE.gpus,
        "trainer/precision": "bf16-mixed",
    }


def _dllogger(diverge_at: int | None) -> str:
    start = _START.timestamp()
    lines = [dllogger_line("PARAMETER", _parameters(), start, 0.0)]
    elapsed = 0.0
    for step in range(STEPS):
        elapsed = round(elapsed + step_time(step), 2)
        loss = math.nan if diverge_at is not None and step >= diverge_at else round(10.9 - 2.1 * math.log1p(step), 4)
        lines.append(dllogger_line(step, step_data(step, step_time(step), loss), start + elapsed, elapsed))
    return "\n".join(lines) + "\n"


def _events() -> str:
    lines = []
    for minutes, event, attempt, step in _EVENTS:
        time = (_START + timedelta(minutes=minutes)).isoformat(timespec="milliseconds")
        record: dict[str, object] = {"time": time, "event": event, "run": MODEL.name, "attempt": attempt}
        if step is not None:
            record["step"] = step
        lines.append(json.dumps(record))
    return "\n".join(lines) + "\n"


def nccl_time_us(size: int) -> float:
    return NCCL_LATENCY_US + size / (NCCL_ALGBW_GBPS * 1e3)


def _nccl() -> str:
    rows = [(size, Half(nccl_time_us(size)), Half(nccl_time_us(size))) for size in NCCL_PUBLISHED.sizes]
    run = NcclRun(
        NCCL_PUBLISHED.collective,
        NODES * NCCL_MACHINE.gpus,
        rows,
        hosts=("fabric-nccl-0-0", "fabric-nccl-0-1"),
        device=f"NVIDIA {NCCL_MACHINE.accelerator.name.upper()}",
    )
    return "\n".join(run.lines()) + "\n"


# ---------------------------------------------------------------------------- stragglers

STRAGGLER_RANK = 13
STRAGGLER_SPREAD = 0.12
STRAGGLER_REPORTS = 20
# Rank 0's forward and backward time per iteration, ms.
_FASTEST_MS = 18600.0


def straggler_line(when: datetime, fast: tuple[float, int], slow: tuple[float, int]) -> str:
    """One report as Megatron Core logs it (time per iteration in ms, power, temperature,
    utilisation, clock, data time and throughput, each `<value><unit>/<rank>`)."""
    fields = [
        ("MnRtt", f"{fast[0]:.2f}ms/{fast[1]}"),
        ("MxRtt", f"{slow[0]:.2f}ms/{slow[1]}"),
        # Megatron Core reports power in milliwatts (torch.cuda.power_draw) with a "W".
        ("MnPwr", "612000.00W/4"),
        ("MxPwr", "688000.00W/9"),
        ("MnTmp", "51.00C/2"),
        ("MxTmp", "63.00C/11"),
        ("MnUtl", "97.00%/6"),
        ("MxUtl", "100.00%/1"),
        ("MnClk", "1755.00MHz/7"),
        ("MxClk", "1980.00MHz/0"),
        ("MnDRtt", "0.41ms/5"),
        ("MxDRtt", "0.97ms/12"),
        ("MnEtpt", f"{387.1 * fast[0] / slow[0]:.2f}TF/{slow[1]}"),
        ("MxEtpt", f"387.10TF/{fast[1]}"),
    ]
    stamp = when.strftime("%Y-%m-%d %H:%M:%S")
    return f"INFO:megatron.core.utils:[{stamp}] | " + " | ".join(f"{name}/Rnk: {value}" for name, value in fields)


def _stragglers() -> str:
    lines = []
    for step in range(STRAGGLER_REPORTS):
        when = _START + timedelta(seconds=round(STEP_TIME_S * step))
        fast = (_FASTEST_MS, step % 8)
        if step % 4:
            slow = (round(_FASTEST_MS * (1 + STRAGGLER_SPREAD), 2), STRAGGLER_RANK)
        else:
            slow = (round(_FASTEST_MS * 1.02, 2), 8 + step % 5)
        lines.append(straggler_line(when, fast, slow))
    return "\n".join(lines) + "\n"


_README = """\
Sample logs with known answers, for the commands of the analytics docs. Generated, never
edited: `python -m analysis.samples --write examples/logs` (analysis/samples.py says what
each holds).
"""


def sample_files() -> dict[str, str]:
    """File name → text of every file in examples/logs/."""
    return {
        "README.md": _README,
        "dllogger.json": _dllogger(None),
        "diverged.json": _dllogger(DIVERGED_AT),
        "events.jsonl": _events(),
        f"{NCCL_PUBLISHED.collective}.log": _nccl(),
        "node-0.log": _stragglers(),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m analysis.samples", description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", type=Path, required=True, metavar="DIR", help="folder to write, e.g. examples/logs")
    args = parser.parse_args(argv)
    args.write.mkdir(parents=True, exist_ok=True)
    for name, text in sample_files().items():
        (args.write / name).write_text(text)
    print(f"wrote {len(sample_files())} files to {args.write}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
