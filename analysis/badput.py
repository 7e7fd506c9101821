"""Badput by cause: where the time of a run went that produced no kept progress
(`python -m analysis goodput --events ... --log ...`).

The goodput events give each attempt's start (its first `job_started`), the checkpoint it resumed
from (`checkpoint_loaded`), the checkpoints it saved and its last event; the DLLogger log gives
the steps it trained and when each ended (analysis.startup). Per attempt:

    waiting        its start − the previous attempt's last event (none for the first): Kueue's
                   re-admission, a lost node's replacement, the image pull and the pod start,
                   all before the launcher writes `job_started`. With the pods' Kubernetes
                   events (analysis.podstarts), split by what Kueue and node 0's pods did:
        queue          until Kueue admitted the run again, after an eviction (a Spot reclaim, a
                       lost node without a spare, a preemption); none where it stayed admitted
        nodes          from then until node 0's pod was bound: the JobSet's restart, the
                       scheduler, new nodes (each from the previous attempt's end, or the last
                       event of the node 0 pod before it, one whose preflight failed)
        image pull     their pulls, the wait for other pulls included
        preflight      NVSentinel's preflight checks; one that failed, until node 0's next pod
                       was bound (the check and the restart its failure caused)
        pod start      the rest: volumes, the GPUDirect sidecars, the launcher until
                       `job_started`
                   in this order, each at most what the ones before it leave of the waiting
    to first step  its first step record − its start − one reference step; where the log has the
                   launchers' checkpoint-load records (analysis.startup), split:
        checkpoint restore   the loads whose records the attempt logged
        initialisation       the rest: NCCL, the model's and the optimizer's construction, the
                             data loaders, compilation in the first step
    lost           the steps it trained past the checkpoint the next attempt resumed from (the
                   last attempt: past the run's newest save, or its own start without one), at
                   the reference step time
    other          the run's badput (goodput's runtime − effective time) less the three causes of
                   every attempt: checkpoint saves, steps slower than the reference, warm-up;
                   negative where the kept steps ran faster than the reference step time

A step record carries the step's index, from 0, before Megatron-Bridge counts it
(`train_state.step`, which the launcher's step log reads in `on_train_step_end`,
megatron/bridge/training/train.py@v0.3.0), and a checkpoint the steps done (saved after the
count): a record of step k means k + 1 steps done.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from analysis.goodput import Event, GoodputEvent, GoodputReport
from analysis.podstarts import PodStart
from analysis.startup import CheckpointLoad, StepRecord, attempt_starts, by_attempt

WAITING_CAUSES = ("queue", "nodes", "image pull", "preflight", "pod start")
START_CAUSES = ("checkpoint restore", "initialisation")


@dataclass(frozen=True)
class AttemptBadput:
    attempt: int
    waiting_s: float | None
    to_first_step_s: float | None
    lost_steps: int | None
    lost_s: float | None
    # The waiting by WAITING_CAUSES, where the pods' events were given and show node 0's start.
    waiting_by_cause_s: dict[str, float] | None = None
    # The part of to_first_step_s its checkpoint loads took, where the log records loads.
    restore_s: float | None = None


@dataclass(frozen=True)
class Badput:
    attempts: tuple[AttemptBadput, ...]
    total_s: float

    def by_cause(self) -> dict[str, float]:
        """Seconds by cause; `other` is what the attempts' causes leave of the total."""

        def total(values: Sequence[float | None]) -> float:
            return sum(v for v in values if v is not None)

        causes = {
            "waiting": total([a.waiting_s for a in self.attempts]),
            "to first step": total([a.to_first_step_s for a in self.attempts]),
            "lost progress": total([a.lost_s for a in self.attempts]),
        }
        return {**causes, "other": self.total_s - sum(causes.values())}

    def waiting_by_cause(self) -> dict[str, float] | None:
        """The waiting of the attempts the pods' events split, by cause; None where none did."""
        split = [a.waiting_by_cause_s for a in self.attempts if a.waiting_by_cause_s is not None]
        if not split:
            return None
        return {cause: sum(s[cause] for s in split) for cause in WAITING_CAUSES}

    def to_first_step_by_cause(self) -> dict[str, float] | None:
        """The time to the first step of the attempts whose loads the log records, by START_CAUSES;
        None where it records none."""
        split = [a for a in self.attempts if a.restore_s is not None and a.to_first_step_s is not None]
        if not split:
            return None
        restore = sum(a.restore_s or 0.0 for a in split)
        return {"checkpoint restore": restore, "initialisation": sum(a.to_first_step_s or 0.0 for a in split) - restore}

    def as_json(self) -> dict[str, object]:
        return {
            "total_s": self.total_s,
            "by_cause_s": self.by_cause(),
            "waiting_by_cause_s": self.waiting_by_cause(),
            "to_first_step_by_cause_s": self.to_first_step_by_cause(),
            "attempts": [dataclasses.asdict(a) for a in self.attempts],
        }


def split_waiting(
    since: datetime, until: datetime, node_pods: Sequence[PodStart], admitted: Sequence[datetime] = ()
) -> dict[str, float] | None:
    """The waiting from `since` to `until` by WAITING_CAUSES, from the starts of node 0's pods
    bound in it (analysis.podstarts.node_pod_starts) and the run's admissions by Kueue
    (analysis.podstarts.admissions); None where no pod was bound in it."""
    bound = [(p.scheduled, p) for p in node_pods if p.scheduled is not None and since < p.scheduled <= until]
    if not bound:
        return None
    left = (until - since).total_seconds()
    queue = nodes = failed_checks = 0.0
    last = since
    for index, (scheduled, pod) in enumerate(bound):
        admission = max((a for a in admitted if last < a <= scheduled), default=last)
        queue += (admission - last).total_seconds()
        nodes += max(0.0, (scheduled - admission).total_seconds())
        last = max(last, pod.last)
        if pod.open_preflight is not None and index + 1 < len(bound):
            following = bound[index + 1][0]
            failed_checks += max(0.0, (following - pod.open_preflight).total_seconds())
            last = max(last, following)
    pods = [pod for _, pod in bound]
    pulls = sum(p.image_pull_s for p in pods)
    checks = sum(p.preflight_s for p in pods) + failed_checks
    split = {}
    for cause, seconds in zip(WAITING_CAUSES[:-1], (queue, nodes, pulls, checks), strict=True):
        split[cause] = min(seconds, left)
        left -= split[cause]
    split[WAITING_CAUSES[-1]] = left
    return split


def badput(
    events: Sequence[GoodputEvent],
    records: Sequence[StepRecord],
    report: GoodputReport,
    *,
    node_pods: Sequence[PodStart] = (),
    admitted: Sequence[datetime] = (),
    loads: Sequence[CheckpointLoad] = (),
) -> Badput:
    """The badput by cause; `node_pods`, the starts of node 0's pods, and `admitted`, the run's
    admissions, split each waiting; `loads`, the log's checkpoint loads, each time to the first
    step (an attempt without one restored nothing)."""
    ordered = sorted((e for e in events if e.run == report.run), key=lambda e: e.time)
    starts = attempt_starts(ordered, report.run)
    step_s = report.reference_step_time_s
    # The step each attempt resumed from: its first checkpoint_loaded.
    loaded = [
        next((e.step for e in mine if e.event is Event.CHECKPOINT_LOADED), None) for mine in by_attempt(starts, ordered)
    ]
    newest_save = max(
        (e.step for e in ordered if e.event is Event.CHECKPOINT_SAVED and e.step is not None), default=None
    )
    attempts = []
    attempt_loads = by_attempt(starts, loads)
    for index, (start, mine) in enumerate(zip(starts, by_attempt(starts, records), strict=True)):
        # The previous attempt's last sign of life: an event, or a step it logged (a node 0 that
        # died writes no job_terminated).
        before = [e.time for e in ordered if e.time < start] + [r.time for r in records if r.time < start]
        since = max(before) if index > 0 and before else None
        waiting = (start - since).total_seconds() if since is not None else None
        first = max((mine[0].time - start).total_seconds() - step_s, 0.0) if mine else None
        # A load cannot outlast the start it is part of (a clock apart from node 0's would say so).
        restore = (
            min(sum((load.seconds for load in attempt_loads[index]), 0.0), first)
            if loads and first is not None
            else None
        )
        if index + 1 < len(starts):
            kept = loaded[index + 1]
        else:
            kept = newest_save if newest_save is not None else loaded[index]
        done = max(r.step for r in mine) + 1 if mine else None
        lost = max(0, done - kept) if done is not None and kept is not None else None
        attempts.append(
            AttemptBadput(
                attempt=index,
                waiting_s=waiting,
                to_first_step_s=first,
                lost_steps=lost,
                lost_s=lost * step_s if lost is not None else None,
                waiting_by_cause_s=split_waiting(since, start, node_pods, admitted) if since is not None else None,
                restore_s=restore,
            )
        )
    return Badput(tuple(attempts), report.total_runtime_s - report.effective_time_s)


def badput_table(found: Badput) -> str:
    def share(seconds: float) -> str:
        return f"{seconds / found.total_s:.1%}" if found.total_s > 0 else "-"

    lines = [f"badput       {found.total_s:.0f} s: runtime less the effective computation time"]
    parts = {"waiting": found.waiting_by_cause(), "to first step": found.to_first_step_by_cause()}
    for cause, seconds in found.by_cause().items():
        lines.append(f"  {cause:<20} {seconds:>9.0f} s  {share(seconds):>6}")
        split = parts.get(cause)
        if split is not None:
            lines += [f"    {part:<18} {part_s:>9.0f} s  {share(part_s):>6}" for part, part_s in split.items()]
    lines.append("attempt  waiting (s)  to first step (s)  restore (s)  lost steps  lost (s)")

    def cell(value: float | int | None, width: int) -> str:
        return f"{value:>{width}.0f}" if value is not None else f"{'-':>{width}}"

    for a in found.attempts:
        lines.append(
            f"{a.attempt:<8} {cell(a.waiting_s, 11)}  {cell(a.to_first_step_s, 17)}  {cell(a.restore_s, 11)}  "
            f"{cell(a.lost_steps, 10)}  {cell(a.lost_s, 8)}"
        )
    return "\n".join(lines)
