"""`make bench`: how long `make render` takes for every shipped stack, and the log analytics on a
100 000-step log, each against its goal. A report for this machine, not a test.

Each stack is rendered once to warm the caches (bytecode, CRD schemas), then timed `--repeats`
times in a fresh process, as a user runs it; the median counts.

A missed goal is reported, with the machine's load, and the exit status stays 0: a timing on a
shared, loaded machine says little about the code. A render that fails is a failure (exit 1).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence

from analysis import benchmark
from harness.runner import ROOT, stack_names

RENDER_GOAL_S = 3.0


class RenderFailed(Exception):
    """`python -m tools.render` exited non-zero: its last line of output says why."""


def time_render(stack: str, out: str, repeats: int) -> list[float]:
    command = [sys.executable, "-m", "tools.render", "--stack", stack, "--out", out]
    timings = []
    for _ in range(repeats):
        began = time.perf_counter()
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            last = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
            raise RenderFailed(f"render {stack} exited {done.returncode}: {last[0]}")
        timings.append(time.perf_counter() - began)
    return timings


def load_note() -> str:
    """The machine's 1-minute load average against its cores, where the OS tells it."""
    cores = os.cpu_count() or 1
    try:
        load = os.getloadavg()[0]
    except OSError:
        return f"{cores} cores"
    return f"load average {load:.1f} on {cores} cores"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.bench", description=__doc__)
    parser.add_argument("--repeats", type=int, default=3, help="timed renders per stack (default 3)")
    parser.add_argument("--stack", action="append", help="only these stacks (default: every shipped one)")
    args = parser.parse_args(argv)
    missed = 0
    stacks = args.stack or stack_names()
    try:
        with tempfile.TemporaryDirectory(prefix="render-bench-") as out:
            time_render("dev", out, 1)
            for stack in stacks:
                timings = time_render(stack, out, max(1, args.repeats))
                median = statistics.median(timings)
                verdict = "meets" if median < RENDER_GOAL_S else "MISSES"
                missed += verdict == "MISSES"
                runs = ", ".join(f"{t:.2f}" for t in timings)
                print(f"render {stack:<14} median {median:.2f} s ({runs}): {verdict} the {RENDER_GOAL_S:g} s goal")
    except RenderFailed as failure:
        print(f"error: {failure}", file=sys.stderr)
        return 1
    benchmark.main(["--steps", "100000"])
    if missed:
        print(f"{missed} of {len(stacks)} renders missed the goal ({load_note()}): a report, not a failure")
    return 0


if __name__ == "__main__":
    sys.exit(main())
