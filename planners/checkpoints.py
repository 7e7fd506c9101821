"""What a run's checkpoints cost it: how many it saves, how long one takes to write to the
bucket, and how long its steps wait for them, so that the summary prices a run with its
checkpoints and the plan advises an interval that costs a few percent (facts.resiliency)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from facts import resiliency
from planners.runs import RunSpec
from planners.runtimes import runtime_of


@dataclass(frozen=True)
class CheckpointCost:
    saves: int
    interval_steps: int
    bytes_per_save: int
    # One save, every node writing its own shards at once.
    write_s: float
    # The steps go on while a save is written (Runtime.async_checkpoint).
    asynchronous: bool

    def wait_s(self, step_s: float | None) -> float | None:
        """Seconds the run's steps wait for its checkpoints, in all; None where that depends on a
        step time nobody published. A synchronous save holds the steps for its whole write. A
        background one holds them only when it is still writing as the next save begins, and
        the run waits for its last save before it ends."""
        if not self.asynchronous:
            return self.saves * self.write_s
        if step_s is None:
            return None
        overrun = max(0.0, self.write_s - self.interval_steps * step_s)
        return (self.saves - 1) * overrun + self.write_s

    def interval_for_share(self, step_s: float) -> int:
        """The shortest interval whose checkpoints hold the steps back by at most
        CHECKPOINT_SHARE of the training time (a background save: one that ends before the next)."""
        if self.asynchronous:
            return max(1, math.ceil(self.write_s / step_s))
        return max(1, math.ceil(self.write_s / (resiliency.CHECKPOINT_SHARE * step_s)))


def checkpoint_cost(run: RunSpec) -> CheckpointCost | None:
    """None for a run that saves no checkpoints."""
    if not run.checkpoint:
        return None
    steps, interval = run.settings.steps, run.checkpoint_interval_steps
    runtime = runtime_of(run.recipe)
    size = resiliency.CHECKPOINT_BYTES_PER_PARAMETER * run.spec.architecture.parameters
    return CheckpointCost(
        saves=runtime.checkpoint_saves(steps, interval),
        interval_steps=interval,
        bytes_per_save=size,
        write_s=size / (run.nodes * resiliency.CHECKPOINT_WRITE_BYTES_PER_SECOND),
        asynchronous=runtime.async_checkpoint(run),
    )


def checkpoint_advice(run: RunSpec, saving: CheckpointCost | None, step_s: float | None) -> tuple[str, ...]:
    """Advice for a run whose checkpoints hold its steps back by more than CHECKPOINT_SHARE of its
    time at its published step time: the interval that brings them under it, or, where only the
    last background save is left to wait for, that a run this short may leave them off."""
    wait = saving.wait_s(step_s) if saving else None
    if saving is None or step_s is None or wait is None:
        return ()
    share = wait / (run.settings.steps * step_s + wait)
    if share <= resiliency.CHECKPOINT_SHARE:
        return ()
    checkpoints = "checkpoint" if saving.saves == 1 else "checkpoints"
    said = (
        f"run {run.name}: waiting for its {saving.saves} {checkpoints} of {saving.bytes_per_save / 1e12:.2f} TB "
        f"(about {saving.write_s:.0f} s each to write, "
        f"{'in the background' if saving.asynchronous else 'while its steps wait'}) takes {share:.0%} of its time "
        f"at the published {step_s:.2f} s a step"
    )
    if saving.asynchronous and wait <= saving.write_s:
        return (f"{said}, all of it for the last save: a benchmark this short may set checkpoint.enabled: false",)
    interval = saving.interval_for_share(step_s)
    if saving.asynchronous:
        return (f"{said}; checkpoint.intervalSteps {interval} or more lets each save end before the next begins",)
    share_allowed = f"{resiliency.CHECKPOINT_SHARE:.0%}"
    return (f"{said}; checkpoint.intervalSteps {interval} or more brings it to {share_allowed} or less",)
