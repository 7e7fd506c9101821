"""Goodput of a resilient run: how much of the wall-clock time produced training progress that was kept.

Event log (the contract with the training pods): JSON lines, one event per line, appended by
the pods to `<experiments dir>/<run>/goodput/events.jsonl` on the shared Filestore volume:

    {"time": "2026-11-22T10:00:00+00:00", "event": "job_started", "run": "gpt3-175b", "attempt": 0}
    {"time": "2026-11-22T10:03:10+00:00", "event": "checkpoint_loaded", "run": "gpt3-175b", "attempt": 0, "step": 0}
    {"time": "2026-11-22T10:40:00+00:00", "event": "checkpoint_saved", "run": "gpt3-175b", "attempt": 0, "step": 100}
    {"time": "2026-11-22T10:52:00+00:00", "event": "job_terminated", "run": "gpt3-175b", "attempt": 0}

- `time`: RFC 3339 with a UTC offset.
- `event`: `job_started`, `checkpoint_loaded`, `checkpoint_saved` or `job_terminated`.
- `run`: the run name; `attempt` (optional): the restart count.
- `step` (required on `checkpoint_*`): the training step of the checkpoint; an attempt that
  starts without a checkpoint writes `checkpoint_loaded` with step 0.

The public gpu-recipes tracker's records are accepted too (`timestamp`, `event_type`,
`job_name`, and its `user_scheduled` / `user_terminated` events).

    total runtime  = last event time − first event time
    step progress  = highest saved step − lowest loaded step
    effective time = step progress × reference step time
    goodput        = effective time / total runtime

When no `checkpoint_loaded` comes before the first save, the run started from scratch and
the lowest loaded step is 0: progress made before the first restart still counts.

Lines may come in any order (several writers append to one file); the events' *times* must
tell a possible story, else the times are wrong and so would be the goodput (AnalysisError
naming the line):

- an attempt's events lie between its first `job_started` and its last `job_terminated`;
- attempt n + 1 begins after every event of attempt n (the lower attempt numbers come first);
- between two restarts (`job_started`, `checkpoint_loaded`), checkpoints are saved at rising
  steps: a save stamped later than another but at a lower step is out of order.

A goodput above 100 % (more kept work than wall-clock time, e.g. a reference step time too
long) or one that overflows is refused, not printed.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from pathlib import Path
from typing import Any

from analysis.errors import AnalysisError


class Event(StrEnum):
    """Event types, in the order that breaks ties between events with the same time."""

    USER_SCHEDULED = "user_scheduled"
    JOB_STARTED = "job_started"
    CHECKPOINT_LOADED = "checkpoint_loaded"
    CHECKPOINT_SAVED = "checkpoint_saved"
    USER_TERMINATED = "user_terminated"
    JOB_TERMINATED = "job_terminated"


_ORDER = {event: index for index, event in enumerate(Event)}
_CHECKPOINTS = (Event.CHECKPOINT_LOADED, Event.CHECKPOINT_SAVED)


@dataclass(frozen=True)
class GoodputEvent:
    time: datetime
    event: Event
    run: str
    step: int | None
    attempt: int | None
    line: int
    path: Path | None = None

    def where(self) -> str:
        """`file:line`, for messages."""
        return f"{self.path}:{self.line}" if self.path is not None else f"line {self.line}"

    def describe(self) -> str:
        step = "" if self.step is None else f" (step {self.step})"
        attempt = "" if self.attempt is None else f" of attempt {self.attempt}"
        return f"{self.event.value}{step}{attempt} at {self.time.isoformat()}"


@dataclass(frozen=True)
class GoodputReport:
    run: str
    events: int
    first_event: datetime
    last_event: datetime
    total_runtime_s: float
    reference_step_time_s: float
    start_step: int
    max_saved_step: int | None
    step_progress: int
    effective_time_s: float
    goodput_percent: float
    job_starts: int
    checkpoints_saved: int
    checkpoints_loaded: int

    @property
    def restarts(self) -> int:
        return max(0, self.job_starts - 1)

    def as_json(self) -> dict[str, Any]:
        return {
            "run": self.run,
            "goodput_percent": self.goodput_percent,
            "total_runtime_s": self.total_runtime_s,
            "effective_time_s": self.effective_time_s,
            "reference_step_time_s": self.reference_step_time_s,
            "step_progress": self.step_progress,
            "start_step": self.start_step,
            "max_saved_step": self.max_saved_step,
            "job_starts": self.job_starts,
            "restarts": self.restarts,
            "checkpoints_saved": self.checkpoints_saved,
            "checkpoints_loaded": self.checkpoints_loaded,
            "events": self.events,
            "first_event": self.first_event.isoformat(),
            "last_event": self.last_event.isoformat(),
        }


def read_events(path: Path) -> list[GoodputEvent]:
    try:
        lines = path.read_text(encoding="utf-8").split("\n")
    except FileNotFoundError:
        raise AnalysisError(f"{path} does not exist") from None
    except (OSError, UnicodeDecodeError) as e:
        raise AnalysisError(f"cannot read {path}: {e}") from None
    events = [_parse_event(path, number, line) for number, line in enumerate(lines, start=1) if line.strip()]
    if not events:
        raise AnalysisError(f"{path} has no goodput events")
    if len({event.time.tzinfo is None for event in events}) > 1:
        raise AnalysisError(f"{path} mixes times with and without a UTC offset; they cannot be ordered")
    return events


def _parse_event(path: Path, number: int, line: str) -> GoodputEvent:
    where = f"{path}:{number}"
    try:
        record = json.loads(line)
    except json.JSONDecodeError as e:
        raise AnalysisError(f"{where}: malformed JSON: {e.msg} (column {e.colno})") from None
    if not isinstance(record, dict):
        raise AnalysisError(f"{where}: an event must be a JSON object")
    time_text = record.get("time", record.get("timestamp"))
    try:
        time = datetime.fromisoformat(time_text) if isinstance(time_text, str) else None
    except ValueError:
        time = None
    if time is None:
        raise AnalysisError(f"{where}: 'time' must be an RFC 3339 timestamp such as 2026-11-22T10:00:00+00:00")
    name = record.get("event", record.get("event_type"))
    try:
        event = Event(str(name))
    except ValueError:
        raise AnalysisError(f"{where}: unknown event {name!r}; known: {', '.join(Event)}") from None
    run = record.get("run", record.get("job_name"))
    if not isinstance(run, str) or not run:
        raise AnalysisError(f"{where}: 'run' must name the run")
    step = record.get("step")
    if event in _CHECKPOINTS and not _is_count(step):
        raise AnalysisError(f"{where}: {event.value} needs 'step', a non-negative integer; got {step!r}")
    attempt = record.get("attempt")
    if attempt is not None and not _is_count(attempt):
        raise AnalysisError(f"{where}: 'attempt' must be a non-negative integer; got {attempt!r}")
    return GoodputEvent(time, event, run, step if event in _CHECKPOINTS else None, attempt, number, path)


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def compute_goodput(
    events: Sequence[GoodputEvent], reference_step_time_s: float, run: str | None = None
) -> GoodputReport:
    if not math.isfinite(reference_step_time_s) or reference_step_time_s <= 0:
        raise AnalysisError(
            f"the reference step time must be a positive number of seconds, got {reference_step_time_s}"
        )
    runs = sorted({event.run for event in events})
    if run is None:
        if len(runs) > 1:
            raise AnalysisError(f"the events belong to several runs ({', '.join(runs)}); pick one with --run")
        run = runs[0]
    ordered = sorted((e for e in events if e.run == run), key=lambda e: (e.time, _ORDER[e.event]))
    if not ordered:
        raise AnalysisError(f"no events for run {run!r}; runs in the file: {', '.join(runs)}")
    total = (ordered[-1].time - ordered[0].time).total_seconds()
    if total <= 0:
        raise AnalysisError(f"run {run!r} has zero runtime: its events all share one time ({ordered[0].time})")
    _check_time_order(ordered)
    saved = [e.step for e in ordered if e.event is Event.CHECKPOINT_SAVED and e.step is not None]
    loaded = [e.step for e in ordered if e.event is Event.CHECKPOINT_LOADED and e.step is not None]
    start_step = _start_step(ordered, loaded)
    max_saved = max(saved) if saved else None
    if max_saved is not None and max_saved < start_step:
        raise AnalysisError(
            f"run {run!r} saved no checkpoint past step {max_saved} but loaded step {start_step}; "
            "are these events from one run?"
        )
    progress = 0 if max_saved is None else max_saved - start_step
    effective = progress * reference_step_time_s
    if not math.isfinite(effective):
        raise AnalysisError(
            f"the effective time of run {run!r} overflows: {progress} steps × {reference_step_time_s:g} s; "
            "is the reference step time in seconds?"
        )
    # A relative tolerance of 1e-9 keeps a goodput of exactly 100 % from failing on rounding.
    if effective > total * (1 + 1e-9):
        raise AnalysisError(
            f"goodput of run {run!r} comes out at {effective / total * 100:,.1f} %, above 100 %: {progress} steps × "
            f"{reference_step_time_s:g} s = {_seconds(effective)} s of kept work in {_seconds(total)} s of runtime; "
            "is the reference step time that of an undisturbed run of this model?"
        )
    return GoodputReport(
        run=run,
        events=len(ordered),
        first_event=ordered[0].time,
        last_event=ordered[-1].time,
        total_runtime_s=total,
        reference_step_time_s=reference_step_time_s,
        start_step=start_step,
        max_saved_step=max_saved,
        step_progress=progress,
        effective_time_s=effective,
        goodput_percent=effective / total * 100,
        job_starts=_starts(ordered),
        checkpoints_saved=len(saved),
        checkpoints_loaded=sum(1 for step in loaded if step > 0),
    )


def _seconds(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def _check_time_order(ordered: Sequence[GoodputEvent]) -> None:
    """Refuse event times that cannot be true (see the module docstring), naming the line."""
    attempts: dict[int, list[GoodputEvent]] = {}
    for e in ordered:
        if e.attempt is not None and e.event not in (Event.USER_SCHEDULED, Event.USER_TERMINATED):
            attempts.setdefault(e.attempt, []).append(e)
    for number, events in attempts.items():
        start = next((e for e in events if e.event is Event.JOB_STARTED), None)
        early = None if start is None else next((e for e in events if e.time < start.time), None)
        if start is not None and early is not None:
            raise _out_of_order(early, f"before attempt {number}'s job_started", start)
        end = next((e for e in reversed(events) if e.event is Event.JOB_TERMINATED), None)
        late = None if end is None else next((e for e in events if e.time > end.time), None)
        if end is not None and late is not None:
            raise _out_of_order(late, f"after attempt {number}'s job_terminated", end)
    numbers = sorted(attempts)
    for lower, higher in itertools.pairwise(numbers):
        last, first = attempts[lower][-1], attempts[higher][0]
        if first.time < last.time:
            raise _out_of_order(first, f"before attempt {lower} ended", last)
    highest: GoodputEvent | None = None  # the save at the highest step since the last restart
    for e in ordered:
        if e.event in (Event.JOB_STARTED, Event.CHECKPOINT_LOADED):
            highest = None
        elif e.event is Event.CHECKPOINT_SAVED and e.step is not None:
            if highest is None or highest.step is None or e.step >= highest.step:
                highest = e
            elif e.time > highest.time:
                raise _out_of_order(e, "later than a save of a higher step, with no restart between", highest)


def _out_of_order(event: GoodputEvent, problem: str, other: GoodputEvent) -> AnalysisError:
    return AnalysisError(
        f"{event.where()}: {event.describe()} is {problem} ({other.describe()}, line {other.line}): "
        "the event times are out of order"
    )


def _start_step(ordered: Sequence[GoodputEvent], loaded: Sequence[int]) -> int:
    """The lowest loaded step, or 0 when the run saved before it ever loaded (it began from scratch)."""
    first_checkpoint = next((e for e in ordered if e.event in _CHECKPOINTS), None)
    if first_checkpoint is None or first_checkpoint.event is Event.CHECKPOINT_SAVED:
        return 0
    return min(loaded)


def _starts(ordered: Sequence[GoodputEvent]) -> int:
    """Job starts, counting a burst of consecutive `job_started` events (one per pod) once."""
    starts, previous = 0, None
    for event in ordered:
        if event.event is Event.JOB_STARTED and previous is not Event.JOB_STARTED:
            starts += 1
        previous = event.event
    return starts
