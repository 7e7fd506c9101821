"""`make bench`: how long `make render` takes for every shipped stack, and the log analytics on a
100 000-step log, each against its goal. A report for this machine, not a test.

Each stack is rendered once to warm the caches (bytecode, CRD schemas), then timed `--repeats`
times in a fresh process, as a user runs it; the median counts.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence

from analysis import benchmark
from tools.runner import ROOT, stack_names

RENDER_GOAL_S = 3.0


def time_render(stack: str, out: str, repeats: int) -> list[float]:
    command = [sys.executable, "-m", "tools.render", "--stack", stack, "--out", out]
    timings = []
    for _ in range(repeats):
        began = time.perf_counter()
        subprocess.run(command, cwd=ROOT, capture_output=True, check=True)
        timings.append(time.perf_counter() - began)
    return timings


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.bench", description=__doc__)
    parser.add_argument("--repeats", type=int, default=3, help="timed renders per stack (default 3)")
    parser.add_argument("--stack", action="append", help="only these stacks (default: every shipped one)")
    args = parser.parse_args(argv)
    missed = 0
    with tempfile.TemporaryDirectory(prefix="render-bench-") as out:
        time_render("dev", out, 1)
        for stack in args.stack or stack_names():
            timings = time_render(stack, out, max(1, args.repeats))
            median = statistics.median(timings)
            verdict = "meets" if median < RENDER_GOAL_S else "MISSES"
            missed += verdict == "MISSES"
            runs = ", ".join(f"{t:.2f}" for t in timings)
            print(f"render {stack:<14} median {median:.2f} s ({runs}): {verdict} the {RENDER_GOAL_S:g} s goal")
    missed += benchmark.main(["--steps", "100000"]) != 0
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
