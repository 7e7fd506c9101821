"""Stragglers from Megatron Core's straggler reports (`python -m analysis stragglers`).

With Megatron-Bridge's `straggler.log_straggler` on (a run's `stragglers: true`), Megatron Core's
StragglerDetector gathers every rank's timings at each log interval and rank 0 logs one line
(megatron-core 0.16 megatron/core/utils.py, StragglerDetector.report; `_ValueWithRank` prints
`<value with two decimals><unit>/<rank>`):

    ... | MnRtt/Rnk: 1203.51ms/0 | MxRtt/Rnk: 1350.02ms/13 | ... | MnEtpt/Rnk: 301.20TF/13 | ...

the fastest and the slowest rank's time per iteration in its forward passes (Megatron-Bridge's
gpt_step.py times the model's forward call; the detector's own throughput figure scales it by
three for the backward pass), each with its rank. In synchronous training every rank waits for
the slowest at the next collective, so a report's (slowest − fastest) / slowest is the share of
the fastest rank's forward time spent waiting; taken for the whole step, it assumes the backward
pass lags by as much.

A rank is named a straggler when it is the slowest in at least STRAGGLER_SHARE of the reports and
its time then exceeds the fastest's by more than SPREAD on average. Its node is its rank over the
GPUs per node where torchrun numbers the ranks (payload/launch.sh's default launcher: static
rendezvous, each pod's completion index its node rank, so node N is pod index N and
logs/node-N.log); under the resiliency launchers' dynamic rendezvous the nodes may be numbered
otherwise. The slowest rank may also be slow by its place, not its hardware: the last pipeline
stage computes the output layer and the loss, and a mixture of experts routes unevenly.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from analysis.errors import AnalysisError
from analysis.streams import Lines

# One report's fastest and slowest rank (MnRtt/MxRtt: milliseconds per iteration / rank).
_REPORT = re.compile(
    r"MnRtt/Rnk: (?P<fast>\d{1,12}\.\d\d)ms/(?P<fast_rank>\d{1,7}) \| "
    r"MxRtt/Rnk: (?P<slow>\d{1,12}\.\d\d)ms/(?P<slow_rank>\d{1,7})"
)
# A rank that is the slowest this often, and then this much slower than the fastest, is named.
STRAGGLER_SHARE = 0.5
SPREAD = 0.05


@dataclass(frozen=True)
class Report:
    fast_ms: float
    fast_rank: int
    slow_ms: float
    slow_rank: int

    @property
    def waiting(self) -> float:
        """The share of the fastest rank's time it waits for the slowest."""
        return (self.slow_ms - self.fast_ms) / self.slow_ms


@dataclass(frozen=True)
class Straggler:
    rank: int
    node: int
    slowest_in: int
    # Its mean time over the fastest's where it is the slowest, minus one.
    spread: float
    # Its reports' waiting time over all reports: what it costs the run at most.
    cost: float


@dataclass(frozen=True)
class StragglerReport:
    reports: int
    gpus_per_node: int
    slowest: dict[int, int]
    stragglers: tuple[Straggler, ...]
    # The mean waiting share over all reports, whichever rank was the slowest.
    waiting: float

    def as_json(self) -> dict[str, Any]:
        return {
            "reports": self.reports,
            "gpusPerNode": self.gpus_per_node,
            "slowestByRank": {str(rank): count for rank, count in sorted(self.slowest.items())},
            "waiting": round(self.waiting, 4),
            "stragglers": [
                {
                    "rank": s.rank,
                    "node": s.node,
                    "slowestIn": s.slowest_in,
                    "spread": round(s.spread, 4),
                    "cost": round(s.cost, 4),
                }
                for s in self.stragglers
            ],
        }


def read_reports(path: Path) -> list[Report]:
    """Every straggler report in a log (rank 0's output, logs/node-0.log), in order."""
    reports = []
    with Lines(path, "rank 0's output with straggler reports", lambda line: "MnRtt/Rnk" in line) as lines:
        for number, line in lines:
            match = _REPORT.search(line)
            if match is None:
                continue
            report = Report(
                float(match["fast"]), int(match["fast_rank"]), float(match["slow"]), int(match["slow_rank"])
            )
            if not 0 < report.fast_ms <= report.slow_ms:
                raise AnalysisError(
                    f"{path}:{number}: a straggler report with times {report.fast_ms} and {report.slow_ms} ms"
                )
            reports.append(report)
    if not reports:
        raise AnalysisError(
            f"--log {path}: no straggler report (MnRtt/Rnk ... MxRtt/Rnk): the run needs `stragglers: true`, and "
            "rank 0's output (node 0's log) holds them"
        )
    return reports


def find_stragglers(reports: list[Report], gpus_per_node: int) -> StragglerReport:
    slowest: dict[int, list[Report]] = defaultdict(list)
    for report in reports:
        slowest[report.slow_rank].append(report)
    stragglers = []
    for rank, own in slowest.items():
        spread = sum(r.slow_ms / r.fast_ms - 1 for r in own) / len(own)
        if len(own) >= STRAGGLER_SHARE * len(reports) and spread > SPREAD:
            cost = sum(r.waiting for r in own) / len(reports)
            stragglers.append(Straggler(rank, rank // gpus_per_node, len(own), spread, cost))
    return StragglerReport(
        reports=len(reports),
        gpus_per_node=gpus_per_node,
        slowest={rank: len(own) for rank, own in slowest.items()},
        stragglers=tuple(sorted(stragglers, key=lambda s: -s.cost)),
        waiting=sum(r.waiting for r in reports) / len(reports),
    )


def report_table(found: StragglerReport) -> str:
    often = sorted(found.slowest.items(), key=lambda item: (-item[1], item[0]))[:3]
    lines = [
        f"reports      {found.reports} (Megatron Core's straggler reports, one per log interval)",
        "slowest      " + ", ".join(f"rank {rank} in {count}" for rank, count in often),
        f"waiting      {found.waiting:.1%} of the fastest rank's time, on average, for the slowest",
    ]
    if not found.stragglers:
        lines.append(
            f"stragglers   none: no rank is the slowest in {STRAGGLER_SHARE:.0%} of the reports "
            f"by more than {SPREAD:.0%}"
        )
    for s in found.stragglers:
        lines.append(
            f"straggler    rank {s.rank} on node {s.node} (pod index {s.node}, logs/node-{s.node}.log): the slowest "
            f"in {s.slowest_in} of {found.reports} reports, {s.spread:.1%} slower than the fastest then; "
            f"costs the run up to {s.cost:.1%} of its time (its forward passes', taken for the step)"
        )
    return "\n".join(lines)
