"""Goodput of a resilient run: how much of the wall-clock time produced training progress that was kept.

The figures and their formulas are those of the public gpu-recipes resiliency-metrics
calculator (AI-Hypercomputer/gpu-recipes:src/utils/resiliency_metrics/calculator.py@2e1fd5e,
the tool the a3ultra llama3.1-405B and a3mega llama3-70B resiliency recipes run), so a run's
report here can be checked against the calculator's.

Event log (the contract with the training pods): JSON lines, one event per line, appended by
node 0 to `<experiments dir>/<run>/goodput/events.jsonl` on the shared Filestore volume
(payload/launch.sh, `event()`):

    {"time": "2026-11-22T10:00:00+00:00", "event": "job_started", "run": "gpt3-175b", "attempt": 0}
    {"time": "2026-11-22T10:03:10+00:00", "event": "checkpoint_loaded", "run": "gpt3-175b", "attempt": 0, "step": 0}
    {"time": "2026-11-22T10:40:00+00:00", "event": "checkpoint_saved", "run": "gpt3-175b", "attempt": 0, "step": 100}
    {"time": "2026-11-22T10:52:00+00:00", "event": "job_terminated", "run": "gpt3-175b", "attempt": 0}

- `time`: RFC 3339 with a UTC offset; a time without one cannot be ordered and is refused.
- `event`: `job_started`, `checkpoint_loaded`, `checkpoint_saved` or `job_terminated`.
- `run`: the run name; `attempt` (optional): the restart count.
- `step` (required on `checkpoint_*`): the training step of the checkpoint; an attempt that
  starts without a checkpoint writes `checkpoint_loaded` with step 0.

The public gpu-recipes tracker's records are accepted too (`timestamp`, `event_type`,
`job_name`, and its `user_scheduled` / `user_terminated` events;
src/utils/resiliency_metrics/tracker.py@2e1fd5e), once their times carry an offset: the
tracker writes `datetime.now().isoformat()`, the pod's local time without one.

Cloud Logging exports of the same events are read as well: the JSON array that
`gcloud logging read --format=json` prints, or the JSON lines a log sink writes to Cloud
Storage, one LogEntry each. The event is the entry's `jsonPayload` (the tracker's
`log_struct`, or a single-line JSON event a container printed, which GKE's agent parses into
`jsonPayload`) or a JSON object inside its `textPayload`. An event without a time of its own
takes the entry's `timestamp` (the agent may lift a `time` field into it). Entries carrying no
event (other log lines, audit logs) are skipped and counted; an entry exported twice (the same
`logName` and `insertId`) counts once.

The calculator's procedure (`preprocess_events`, `calculate_goodput`):

1. the run's events in time order (ties: user_scheduled, job_started, checkpoint_loaded,
   checkpoint_saved, user_terminated, job_terminated);
2. a proxy `user_scheduled` at the first event's time when the first event is not one;
3. consecutive `job_started` (one per pod) count once, consecutive `job_terminated` too;

    Total Events        = events after steps 2 and 3
    Job Started Count   = `job_started` events after step 3
    Checkpoints Loaded  = `checkpoint_loaded` events at a step above 0
    Checkpoints Saved   = `checkpoint_saved` events
    Total Runtime       = last event time − first event time
    Min Loaded Step     = lowest step of any `checkpoint_loaded`
    Max Saved Step      = highest step of any `checkpoint_saved`
    Step Difference     = Max Saved Step − Min Loaded Step (when both exist, Max Saved Step > 0)
    Effective Computation Time = Step Difference × reference step time (0 unless Step Difference > 0)
    Goodput Percentage  = Effective Computation Time / Total Runtime × 100

Where the calculator and this module part ways, it is to refuse rather than print a figure:
zero runtime, a goodput above 100 %, saves all below the lowest load (events of two runs), and
event times that tell an impossible story (below) are errors; the calculator prints 0 % or the
figure. The calculator sorts the timestamps as strings; this module compares them as times.

Lines may come in any order (several writers append to one file); the events' *times* must
tell a possible story, else the times are wrong and so would be the goodput (AnalysisError
naming the line):

- an attempt's events lie between its first `job_started` and its last `job_terminated`;
- attempt n + 1 begins after every event of attempt n (the lower attempt numbers come first);
- between two restarts (`job_started`, `checkpoint_loaded`), checkpoints are saved at rising
  steps: a save stamped later than another but at a lower step is out of order.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from pathlib import Path
from typing import Any

from analysis.errors import AnalysisError
from analysis.streams import Lines


class Event(StrEnum):
    """Event types, in the order that breaks ties between events with the same time
    (the calculator's EVENT_TYPE_ORDER, src/utils/resiliency_metrics/constant.py@2e1fd5e)."""

    USER_SCHEDULED = "user_scheduled"
    JOB_STARTED = "job_started"
    CHECKPOINT_LOADED = "checkpoint_loaded"
    CHECKPOINT_SAVED = "checkpoint_saved"
    USER_TERMINATED = "user_terminated"
    JOB_TERMINATED = "job_terminated"


_ORDER = {event: index for index, event in enumerate(Event)}
_CHECKPOINTS = (Event.CHECKPOINT_LOADED, Event.CHECKPOINT_SAVED)
# Keys that make a record a Cloud Logging LogEntry rather than an event.
_PAYLOADS = ("jsonPayload", "textPayload", "protoPayload")
_EVENT_KEYS = ("event", "event_type")


@dataclass(frozen=True)
class GoodputEvent:
    time: datetime
    event: Event
    run: str
    step: int | None
    attempt: int | None
    line: int
    path: Path | None = None
    # "line" for JSON lines, "entry" for the entries of a JSON array.
    unit: str = "line"

    def where(self) -> str:
        """`file:line` or `file entry n`, for messages."""
        if self.unit == "line":
            return f"{self.path}:{self.line}" if self.path is not None else f"line {self.line}"
        return f"{self.path} entry {self.line}" if self.path is not None else f"entry {self.line}"

    def describe(self) -> str:
        step = "" if self.step is None else f" (step {self.step})"
        attempt = "" if self.attempt is None else f" of attempt {self.attempt}"
        return f"{self.event.value}{step}{attempt} at {self.time.isoformat()}"


@dataclass(frozen=True)
class EventLog:
    """The events of a file, and what reading it passed over."""

    path: Path
    events: list[GoodputEvent]
    # Cloud Logging entries without a goodput event (other log lines, audit logs).
    skipped_entries: int = 0
    # Entries exported more than once (same logName and insertId), counted once.
    duplicate_entries: int = 0
    cloud_logging: bool = False


@dataclass(frozen=True)
class GoodputReport:
    run: str
    # Event records of the run in the file, before the calculator's proxy and de-duplication.
    events: int
    first_event: datetime
    last_event: datetime
    reference_step_time_s: float
    # The calculator's figures.
    total_events: int
    job_starts: int
    checkpoints_loaded: int
    checkpoints_saved: int
    total_runtime_s: float
    min_loaded_step: int | None
    max_saved_step: int | None
    step_difference: int | None
    effective_time_s: float
    goodput_percent: float

    @property
    def restarts(self) -> int:
        return max(0, self.job_starts - 1)

    @property
    def step_progress(self) -> int:
        """Steps whose time counts as effective: the step difference when it is positive."""
        return self.step_difference if self.step_difference is not None and self.step_difference > 0 else 0

    def resiliency_metrics(self) -> dict[str, Any]:
        """The calculator's ten figures under its display names, snake-cased, in its order."""
        return {
            "total_events": self.total_events,
            "job_started_count": self.job_starts,
            "checkpoints_loaded": self.checkpoints_loaded,
            "checkpoints_saved": self.checkpoints_saved,
            "total_runtime_hours": self.total_runtime_s / 3600,
            "min_loaded_step": self.min_loaded_step,
            "max_saved_step": self.max_saved_step,
            "step_difference": self.step_difference,
            "effective_computation_time_hours": self.effective_time_s / 3600,
            "goodput_percentage": self.goodput_percent,
        }

    def as_json(self) -> dict[str, Any]:
        return {
            "run": self.run,
            "goodput_percent": self.goodput_percent,
            "total_runtime_s": self.total_runtime_s,
            "effective_time_s": self.effective_time_s,
            "reference_step_time_s": self.reference_step_time_s,
            "step_progress": self.step_progress,
            "start_step": self.min_loaded_step,
            "max_saved_step": self.max_saved_step,
            "job_starts": self.job_starts,
            "restarts": self.restarts,
            "checkpoints_saved": self.checkpoints_saved,
            "checkpoints_loaded": self.checkpoints_loaded,
            "events": self.events,
            "first_event": self.first_event.isoformat(),
            "last_event": self.last_event.isoformat(),
            "resiliency_metrics": self.resiliency_metrics(),
        }


def read_events(path: Path) -> list[GoodputEvent]:
    return read_event_log(path).events


def read_event_log(path: Path) -> EventLog:
    """Events from JSON lines (events or LogEntries) or a JSON array of LogEntries, read
    within the limits of `analysis.streams`."""
    with Lines(path, _WHAT, _is_record, strict_utf8=True) as lines:
        return _event_log(path, lines)


_WHAT = "a goodput event log (JSON lines, or a Cloud Logging export of the events)"


def _is_record(line: str) -> bool:
    """A line with an `event` or `event_type` key, JSON-escaped or not."""
    return '"event' in line


def _event_log(path: Path, lines: Iterable[tuple[int, str]]) -> EventLog:
    events: list[GoodputEvent] = []
    skipped = duplicates = 0
    cloud_logging = False
    seen: set[tuple[str, str]] = set()
    for number, record, unit in json_records(path, lines):
        where = f"{path}:{number}" if unit == "line" else f"{path} entry {number}"
        if not isinstance(record, dict):
            raise AnalysisError(f"{where}: an event must be a JSON object")
        fallback_time = None
        payload = None
        if any(key in record for key in _PAYLOADS):
            cloud_logging = True
            payload = _payload(record)
            if payload is None:
                skipped += 1
                continue
            key = (str(record.get("logName")), str(record.get("insertId")))
            if "insertId" in record:
                if key in seen:
                    duplicates += 1
                    continue
                seen.add(key)
            fallback_time = record.get("timestamp")
        fields = record if payload is None else payload
        events.append(
            _parse_event(fields, path=path, number=number, unit=unit, where=where, fallback_time=fallback_time)
        )
    if not events:
        skipped_text = f" ({skipped} log entries without one)" if skipped else ""
        raise AnalysisError(f"{path} has no goodput events{skipped_text}")
    return EventLog(path, events, skipped, duplicates, cloud_logging)


def json_records(path: Path, lines: Iterable[tuple[int, str]]) -> Iterator[tuple[int, object, str]]:
    """(number, decoded JSON, "line" or "entry") for every record of the file."""
    lines = iter(lines)
    first = next(((number, line) for number, line in lines if line.strip()), None)
    if first is None:
        return
    lines = itertools.chain([first], lines)
    if first[1].lstrip().startswith("["):
        text = _text(lines)
        try:
            entries = json.loads(text)
        except json.JSONDecodeError as e:
            raise AnalysisError(f"{path}: malformed JSON array: {e.msg} (line {e.lineno}, column {e.colno})") from None
        except RecursionError:
            raise AnalysisError(f"{path}: JSON nested too deeply to be a log export") from None
        if not isinstance(entries, list):
            raise AnalysisError(f"{path}: a JSON document must be an array of log entries")
        for number, entry in enumerate(entries, start=1):
            yield number, entry, "entry"
        return
    for number, line in lines:
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as e:
            raise AnalysisError(f"{path}:{number}: malformed JSON: {e.msg} (column {e.colno})") from None
        except RecursionError:
            raise AnalysisError(f"{path}:{number}: JSON nested too deeply to be an event") from None
        yield number, record, "line"


def _text(lines: Iterable[tuple[int, str]]) -> str:
    """The document the numbered lines (cut at carriage returns too) were read from, so that
    the JSON decoder's line numbers are the file's."""
    parts: list[str] = []
    last = 1
    for number, line in lines:
        parts.append("\r" if parts and number == last else "\n" * (number - last))
        parts.append(line)
        last = number
    return "".join(parts)


def _payload(entry: Mapping[str, Any]) -> dict[str, Any] | None:
    """The goodput event a LogEntry carries, or None when it carries none."""
    payload = entry.get("jsonPayload")
    if isinstance(payload, dict):
        return payload if any(key in payload for key in _EVENT_KEYS) else None
    text = entry.get("textPayload")
    if isinstance(text, str) and "{" in text:
        try:
            decoded, _ = json.JSONDecoder().raw_decode(text, text.index("{"))
        except (json.JSONDecodeError, RecursionError):
            return None
        if isinstance(decoded, dict) and any(key in decoded for key in _EVENT_KEYS):
            return decoded
    return None


def _parse_event(
    record: Mapping[str, Any], *, path: Path, number: int, unit: str, where: str, fallback_time: object
) -> GoodputEvent:
    key = next((key for key in ("time", "timestamp") if key in record), None)
    time_text = record[key] if key is not None else fallback_time
    try:
        time = datetime.fromisoformat(time_text) if isinstance(time_text, str) else None
    except ValueError:
        time = None
    if time is None:
        raise AnalysisError(f"{where}: 'time' must be an RFC 3339 timestamp such as 2026-11-22T10:00:00+00:00")
    if time.tzinfo is None:
        # Without an offset a time cannot be ordered against others (the gpu-recipes tracker
        # writes the pod's local time so): refused, as the contract says.
        named = f"'{key}'" if key is not None else "the entry's 'timestamp'"
        example = time.isoformat()
        raise AnalysisError(
            f"{where}: {named} {time_text!r} has no UTC offset; an RFC 3339 time needs one, such as "
            f"{example}+00:00 or {example}Z"
        )
    name = record.get("event", record.get("event_type"))
    try:
        event = Event(str(name))
    except ValueError:
        raise AnalysisError(f"{where}: unknown event {name!r}; known: {', '.join(Event)}") from None
    run = record.get("run", record.get("job_name"))
    if not isinstance(run, str) or not run:
        raise AnalysisError(f"{where}: 'run' must name the run")
    step = _as_count(record.get("step"))
    if event in _CHECKPOINTS and step is None:
        raise AnalysisError(f"{where}: {event.value} needs 'step', a non-negative integer; got {record.get('step')!r}")
    attempt = _as_count(record.get("attempt"))
    if record.get("attempt") is not None and attempt is None:
        raise AnalysisError(f"{where}: 'attempt' must be a non-negative integer; got {record.get('attempt')!r}")
    return GoodputEvent(time, event, run, step if event in _CHECKPOINTS else None, attempt, number, path, unit)


def _as_count(value: object) -> int | None:
    """A non-negative whole number, or None. Cloud Logging keeps a jsonPayload's numbers as
    doubles (google.protobuf.Struct), so an export may say 200.0 for step 200."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)
    return value if isinstance(value, int) and value >= 0 else None


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
    timeline = calculator_timeline([e.event for e in ordered])
    saved = [e.step for e in ordered if e.event is Event.CHECKPOINT_SAVED and e.step is not None]
    loaded = [e.step for e in ordered if e.event is Event.CHECKPOINT_LOADED and e.step is not None]
    min_loaded = min(loaded) if loaded else None
    max_saved = max(saved) if saved else None
    if max_saved is not None and min_loaded is not None and max_saved < min_loaded:
        raise AnalysisError(
            f"run {run!r} saved no checkpoint past step {max_saved} but loaded step {min_loaded}; "
            "are these events from one run?"
        )
    # The calculator computes the difference only with a load and a save past step 0.
    difference = None if min_loaded is None or max_saved is None or max_saved <= 0 else max_saved - min_loaded
    progress = difference if difference is not None and difference > 0 else 0
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
        reference_step_time_s=reference_step_time_s,
        total_events=len(timeline),
        job_starts=sum(1 for event in timeline if event is Event.JOB_STARTED),
        checkpoints_loaded=sum(1 for step in loaded if step > 0),
        checkpoints_saved=len(saved),
        total_runtime_s=total,
        min_loaded_step=min_loaded,
        max_saved_step=max_saved,
        step_difference=difference,
        effective_time_s=effective,
        goodput_percent=effective / total * 100,
    )


def calculator_timeline(ordered: Sequence[Event]) -> list[Event]:
    """The calculator's `preprocess_events` on events already in time order: a proxy
    `user_scheduled` first unless one leads, then each run of consecutive `job_started` (or
    `job_terminated`) events as one."""
    timeline: list[Event] = []
    leading = [] if ordered and ordered[0] is Event.USER_SCHEDULED else [Event.USER_SCHEDULED]
    for event in [*leading, *ordered]:
        if event in (Event.JOB_STARTED, Event.JOB_TERMINATED) and timeline and timeline[-1] is event:
            timeline.pop()
        timeline.append(event)
    return timeline


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
        f"{event.where()}: {event.describe()} is {problem} ({other.describe()}, {other.unit} {other.line}): "
        "the event times are out of order"
    )
