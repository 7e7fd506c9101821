"""How long `python -m analysis metrics` takes on a long log: `python -m analysis.benchmark`.

Writes a DLLogger log of 100 000 steps (the shape NeMo writes, GPT-3 175B settings) to a
temporary directory, runs the `metrics` command in-process a few times and prints the best
wall time against the 2 s goal. A report, not a test: timings depend on the machine.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import random
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from analysis.__main__ import main as analysis_main
from analysis.samples import dllogger_line

GOAL_S = 2.0
_PARAMETERS = {
    "cfg/num_layers": 96,
    "cfg/hidden_size": 12288,
    "cfg/ffn_hidden_size": 49152,
    "cfg/num_attention_heads": 96,
    "cfg/num_query_groups": None,
    "cfg/encoder_seq_length": 2048,
    "cfg/max_position_embeddings": 2048,
    "cfg/global_batch_size": 2048,
    "cfg/tokenizer/type": "GPT2BPETokenizer",
}


def write_log(path: Path, steps: int, seed: int = 0) -> None:
    """A DLLogger file with a PARAMETER record and `steps` training records with noisy timings."""
    rng = random.Random(seed)
    start = 1_727_486_493.0
    with path.open("w", encoding="utf-8") as out:
        out.write(dllogger_line("PARAMETER", _PARAMETERS, start, 0.0) + "\n")
        elapsed = 0.0
        for step in range(steps):
            step_time = 25.4 + rng.gauss(0, 0.2)
            elapsed += step_time
            data = {
                "reduced_train_loss": 11.0 / (1 + step / 1000) + rng.random() * 0.1,
                "lr": 6e-5 * min(1.0, step / 2000),
                "global_step": float(step),
                "consumed_samples": float((step + 1) * 2048),
                "train_backward_timing in s": 5.9e-05,
                "grad_norm": 1.0 + rng.random(),
                "train_step_timing in s": step_time,
                "epoch": 0,
            }
            out.write(dllogger_line(step, data, start + elapsed, elapsed) + "\n")


def time_metrics(log: Path, repeats: int) -> list[float]:
    """Wall time of each in-process `metrics --json` run; the printed JSON is discarded."""
    argv = [
        "metrics", "--log", str(log), "--gpus", "256", "--global-batch-size", "2048",
        "--accelerator", "h100", "--precision", "fp8", "--json",
    ]  # fmt: skip
    timings = []
    for _ in range(repeats):
        began = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()):
            code = analysis_main(argv)
        timings.append(time.perf_counter() - began)
        if code != 0:
            raise RuntimeError(f"metrics exited with {code} on the generated log")
    return timings


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m analysis.benchmark", description=__doc__)
    parser.add_argument("--steps", type=int, default=100_000, help="steps in the generated log (default 100000)")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs; the best counts (default 3)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="analysis-benchmark-") as tmp:
        log = Path(tmp) / "dllogger.json"
        write_log(log, args.steps)
        size_mb = log.stat().st_size / 1e6
        timings = time_metrics(log, max(1, args.repeats))
    best = min(timings)
    verdict = "meets" if best < GOAL_S else "MISSES"
    print(f"metrics on a {args.steps:,}-step DLLogger log ({size_mb:.1f} MB): best {best:.3f} s of {len(timings)} runs")
    print(f"runs: {', '.join(f'{t:.3f} s' for t in timings)}; {verdict} the {GOAL_S:g} s goal")
    return 0


if __name__ == "__main__":
    sys.exit(main())
