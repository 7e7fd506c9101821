"""Time to the first training step, per attempt of a run: what each start and each restart cost
before the run trained again.

Two records meet here. The goodput events give each attempt's start: its `job_started` (node 0
writes one per attempt, payload/launch.sh; consecutive ones count once, as the calculator counts
them). The DLLogger
log gives each step's end: every record carries `timestamp`, the wall-clock time in seconds since
the epoch at which DLLogger wrote it (NVIDIA/dllogger, `JSONStreamBackend`; the published GPT-3
175B A3 Mega log has it on every line). A step belongs to the attempt during which it was logged.

Per attempt:

    first step       = the attempt's first step record
    to first step    = its timestamp − the attempt's start: pull, pod start, NCCL and the library's
                       initialisation, checkpoint loading, and the first step itself
    steady step      = the first record that begins STEADY_RUN consecutive intervals each within
                       STEADY_TOLERANCE of the attempt's median interval: warm-up (compilation,
                       allocator growth, the first data loads) is over
    to steady state  = its timestamp − the attempt's start

Intervals between records measure steps by the wall clock; the logged `train_step_timing in s` of
NeMo is smoothed over steps and cannot (the published log's first steps read 107, 66, 53 s while
its records are 25.6 s apart). An attempt with no step record trained nothing: its figures are
None, and so are the steady ones of an attempt with fewer than STEADY_RUN intervals.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol, TypeVar

from analysis.errors import AnalysisError
from analysis.goodput import Event, GoodputEvent
from analysis.logs import DLLOGGER_PREFIX, decode_dllogger
from analysis.streams import Lines

# The DLLogger `step` of the Megatron-Bridge and NeMo 2 launchers' record of a checkpoint load,
# whose data is {"started": <epoch s>, "seconds": <s>} (payload/step_record.py, CHECKPOINT_LOAD).
CHECKPOINT_LOAD = "CHECKPOINT_LOAD"
STEADY_TOLERANCE = 0.10
# Consecutive intervals within the tolerance that make warm-up over (one alone may be a lull).
STEADY_RUN = 3


@dataclass(frozen=True)
class StepRecord:
    step: int
    time: datetime


@dataclass(frozen=True)
class CheckpointLoad:
    # When its record was logged (as training started, on the clock of the rank that logs the
    # steps), and how long the load took.
    time: datetime
    seconds: float


@dataclass(frozen=True)
class AttemptStartup:
    attempt: int
    started: datetime
    first_step: int | None
    to_first_step_s: float | None
    steady_step: int | None
    to_steady_s: float | None
    steps: int

    def as_json(self) -> dict[str, object]:
        return {
            "attempt": self.attempt,
            "started": self.started.isoformat(),
            "first_step": self.first_step,
            "to_first_step_s": self.to_first_step_s,
            "steady_step": self.steady_step,
            "to_steady_s": self.to_steady_s,
            "steps": self.steps,
        }


def read_step_records(path: Path) -> list[StepRecord]:
    """Every training step's DLLogger record with its time, in file order; AnalysisError naming the
    line where a record has no usable timestamp."""
    return read_startup_records(path)[0]


def read_checkpoint_loads(path: Path) -> list[CheckpointLoad]:
    """The launchers' checkpoint-load records, in file order (none in a log whose launcher does not
    write them: NeMo 1's), each at the time it was logged: the attempt it belongs to is the one
    during which it was logged, as for a step record, whatever the clock of the node that timed
    the load. AnalysisError naming the line of one without its seconds or a usable timestamp."""
    return _read_records(path)[1]


def read_startup_records(path: Path) -> tuple[list[StepRecord], list[CheckpointLoad]]:
    """read_step_records and read_checkpoint_loads in one reading of the log."""
    steps, loads = _read_records(path)
    if not steps:
        raise AnalysisError(f"{path} has no DLLogger step records")
    return steps, loads


def _read_records(path: Path) -> tuple[list[StepRecord], list[CheckpointLoad]]:
    steps, loads = [], []
    with Lines(path, "a DLLogger log (DLLL {...} lines)", lambda line: line.startswith(DLLOGGER_PREFIX)) as lines:
        for number, line in lines:
            if not line.startswith(DLLOGGER_PREFIX):
                continue
            record = decode_dllogger(path, number, line)
            step = record.get("step")
            if step == CHECKPOINT_LOAD:
                loads.append(_checkpoint_load(path, number, record))
            elif isinstance(step, int) and not isinstance(step, bool):
                steps.append(StepRecord(step, _timestamp(path, number, record.get("timestamp"))))
            # PARAMETER, METADATA and summary records carry no training step
    return steps, loads


def _checkpoint_load(path: Path, number: int, record: dict[str, Any]) -> CheckpointLoad:
    data = record.get("data")
    seconds = data.get("seconds") if isinstance(data, dict) else None
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not 0 <= seconds < math.inf:
        raise AnalysisError(
            f"{path}:{number}: checkpoint load record whose 'seconds' is not a number of seconds ({seconds!r})"
        )
    return CheckpointLoad(_timestamp(path, number, record.get("timestamp")), float(seconds))


def _timestamp(path: Path, number: int, value: object) -> datetime:
    try:
        seconds = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise AnalysisError(f"{path}:{number}: DLLogger record without a numeric 'timestamp' ({value!r})") from None
    if not math.isfinite(seconds) or seconds < 0:
        raise AnalysisError(f"{path}:{number}: DLLogger timestamp {value!r} is not a time")
    try:
        return datetime.fromtimestamp(seconds, tz=UTC)
    except (OverflowError, OSError, ValueError):  # past the year 9999 (a time in milliseconds)
        raise AnalysisError(f"{path}:{number}: DLLogger timestamp {value!r} is not a time in seconds") from None


def attempt_starts(events: Sequence[GoodputEvent], run: str) -> list[datetime]:
    """The start of each attempt: the first `job_started` after anything but a `job_started`, and
    not of the attempt (its `attempt` number) that started last: several pods write one each,
    and another event may come between them."""
    ordered = sorted((e for e in events if e.run == run), key=lambda e: e.time)
    starts = []
    previous: Event | None = None
    started: int | None = None
    for event in ordered:
        same = event.attempt is not None and event.attempt == started
        if event.event is Event.JOB_STARTED and previous is not Event.JOB_STARTED and not same:
            starts.append(event.time)
            started = event.attempt
        previous = event.event
    return starts


class _Timed(Protocol):
    @property
    def time(self) -> datetime: ...


_T = TypeVar("_T", bound=_Timed)


def by_attempt(starts: Sequence[datetime], records: Sequence[_T]) -> list[list[_T]]:
    """Each attempt's records (step records or events), in time order: those from its start until
    the next attempt's."""
    ordered = sorted(records, key=lambda r: r.time)
    ends = [*starts[1:], None]
    return [
        [r for r in ordered if r.time >= start and (end is None or r.time < end)]
        for start, end in zip(starts, ends, strict=True)
    ]


def startup(starts: Sequence[datetime], records: Sequence[StepRecord]) -> list[AttemptStartup]:
    if not starts:
        raise AnalysisError("the events hold no job_started: no attempt to measure from")
    return [
        _attempt(index, started, mine)
        for index, (started, mine) in enumerate(zip(starts, by_attempt(starts, records), strict=True))
    ]


def _attempt(index: int, started: datetime, records: Sequence[StepRecord]) -> AttemptStartup:
    if not records:
        return AttemptStartup(index, started, None, None, None, None, 0)
    first = records[0]
    since = (first.time - started).total_seconds()
    steady: StepRecord | None = None
    intervals = [(b.time - a.time).total_seconds() for a, b in itertools.pairwise(records)]
    if len(intervals) >= STEADY_RUN:
        median = statistics.median(intervals)
        within = [abs(dt - median) <= STEADY_TOLERANCE * median for dt in intervals]
        start = next((i for i in range(len(within) - STEADY_RUN + 1) if all(within[i : i + STEADY_RUN])), None)
        steady = records[start + 1] if start is not None else None
    return AttemptStartup(
        attempt=index,
        started=started,
        first_step=first.step,
        to_first_step_s=since,
        steady_step=steady.step if steady else None,
        to_steady_s=(steady.time - started).total_seconds() if steady else None,
        steps=len(records),
    )
