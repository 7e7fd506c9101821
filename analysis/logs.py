"""Read NeMo training logs: DLLogger JSON lines and NeMo's text progress lines.

Both become one `TrainingLog`: per step, the numeric metrics logged for it, plus the
DLLogger PARAMETER record (the model configuration) when the file has one.

DLLogger (`DLLL {...}` per line): `"step"` is an int for training records and the string
"PARAMETER" for the hyperparameter record. A 100 000-step log is mostly JSON nobody asked
for, so when a window is given, records outside it are only located (by their step), not
decoded; see `read_log`.

Text logs: every line (or carriage-return separated update inside a line, as tqdm writes
them) that carries `train_step_timing in s` is one record. NeMo 1.x prints tqdm postfixes
(`..., global_step=5.000, train_step_timing in s=49.50]`); NeMo 2.x's ProgressPrinter prints
`Training epoch 0, iteration 9/29 | global_step: 9 | train_step_timing in s: 12.41`.

Repeated steps: a restarted run logs the steps after its last checkpoint again (in the same
DLLogger file, or in the same `kubectl logs`). A step with more than one record carrying
`train_step_timing in s` is a repeated step and its last such record wins: the earlier
attempt's metrics for it are dropped, and `TrainingLog.repeated_steps` lists it. Records
without a step time (NeMo logs validation metrics in a record of their own) still merge into
their step. A progress bar redrawing a step with the same values is not a repeat.

A failed run: the first step whose loss (its last attempt's) is NaN or infinite is
`TrainingLog.loss_failure`, found in every record, inside the window or not.
"""

from __future__ import annotations

import itertools
import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, NamedTuple

from analysis.errors import AnalysisError
from analysis.streams import Lines

STEP_TIME = "train_step_timing in s"
LOSS = "reduced_train_loss"
GLOBAL_STEP = "global_step"
DLLOGGER_PREFIX = "DLLL "
# How a step time appears in a DLLogger line, to spot repeated steps in lines left undecoded.
_STEP_TIME_KEY = f'"{STEP_TIME}"'
# And the loss: json.dumps writes a non-finite one as NaN, Infinity or -Infinity; a number
# beyond a float (1e400) decodes to infinity too.
_LOSS_VALUE = re.compile(rf'"{LOSS}": (-?(?:NaN|Infinity|\d[\d.eE+-]*))')

# A DLLogger LOG record as dllogger writes it: string fields, then the step, then the data.
# Only keys with string values may precede the step, so a match is the top-level step. Longer
# step numbers are left to the JSON decoder, which checks them.
_DLLOGGER_STEP = re.compile(r'DLLL \{(?:"[a-z]+": "[^"]*", )*"step": (-?\d{1,18}), "data": ')

_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?i:nan|inf(?:inity)?)"
# One `key=value` (tqdm postfix) or `key: value` (ProgressPrinter) between separators.
_TEXT_METRIC = re.compile(rf"\s*([A-Za-z_][\w ./-]*?)\s*[=:]\s*({_NUMBER})\s*\]?\s*")
_TEXT_SEPARATORS = re.compile(r"[,|]")
_ITERATION = re.compile(r"iteration (\d+)/\d+")  # NeMo 2 ProgressPrinter, 0-based
_TQDM_COUNTER = re.compile(r"(\d+)/\d+\s*\[")  # tqdm n/total: n steps done, so step n - 1


class LogFormat(StrEnum):
    DLLOGGER = "dllogger"
    NEMO_TEXT = "nemo-text"


@dataclass(frozen=True)
class StepRange:
    """Inclusive range of training steps."""

    start: int
    end: int

    def __post_init__(self) -> None:
        if self.start > self.end:
            raise AnalysisError(f"the window's start step {self.start} is after its end step {self.end}")

    def __contains__(self, step: object) -> bool:
        return isinstance(step, int) and self.start <= step <= self.end

    def __str__(self) -> str:
        return f"{self.start}–{self.end}"


@dataclass(frozen=True)
class TrainingLog:
    path: Path
    format: LogFormat
    # Step → numeric metrics, in ascending step order. With a window, only steps inside it.
    records: Mapping[int, Mapping[str, float]]
    # The DLLogger PARAMETER record's data; None for text logs and files without one.
    parameters: Mapping[str, Any] | None
    # Every step the file has a record for, decoded or not.
    steps_in_file: StepRange | None
    # Steps logged more than once with a step time (a restarted run): the last record won.
    repeated_steps: tuple[int, ...] = ()
    # Records outside the window that `read_log(..., beyond_window=True)` could not decode.
    unreadable_lines: tuple[int, ...] = ()
    # The first step whose loss (its last attempt's) is NaN or infinite, and that loss: where
    # the run failed. Every record counts, inside the window or not.
    loss_failure: tuple[int, float] | None = None
    # Whether any record logs a loss at all.
    loss_logged: bool = False

    def series(self, metric: str) -> tuple[list[int], list[float]]:
        """Steps and values of one metric, for the steps that logged it."""
        steps = [step for step, data in self.records.items() if metric in data]
        return steps, [self.records[step][metric] for step in steps]


def read_log(path: Path, window: StepRange | None = None, *, beyond_window: bool = False) -> TrainingLog:
    """Parse a DLLogger or NeMo text log. With `window`, keep only records inside it.

    Every DLLogger line is checked for the `DLLL ` prefix and a readable step; lines whose
    step lies outside `window` are not JSON-decoded, which keeps a 100 000-step log fast.

    `beyond_window` (what `plot` uses) keeps the records outside the window too, decoding
    them where they decode: one that does not (a writer killed mid-line) is listed in
    `unreadable_lines` instead of failing, so a log is refused exactly when it would be
    without `beyond_window`.

    The input is read within the limits of `analysis.streams`: a file, a pipe or a FIFO.
    """
    with Lines(path, _WHAT, _is_record) as numbered:
        lines = iter(numbered)
        first = next(((number, line) for number, line in lines if line.strip()), None)
        if first is None:
            raise AnalysisError(f"{path} is empty")
        lines = itertools.chain([first], lines)
        if first[1].startswith(DLLOGGER_PREFIX):
            read = _read_dllogger(path, lines, window, beyond_window)
            log_format = LogFormat.DLLOGGER
        else:
            read = _read_text_log(path, lines, window, beyond_window)
            log_format = LogFormat.NEMO_TEXT
    if read.steps is None:
        raise AnalysisError(
            f"{path} has no training steps: expected DLLogger records (DLLL {{...}}) "
            f"or NeMo progress lines carrying '{STEP_TIME}'"
        )
    ordered = {step: read.records[step] for step in sorted(read.records)}
    return TrainingLog(
        path,
        log_format,
        ordered,
        read.parameters,
        read.steps,
        tuple(sorted(read.repeated)),
        tuple(read.unreadable),
        read.losses.first_failure(),
        read.losses.logged,
    )


_WHAT = f"a training log (DLLogger JSON lines, or NeMo progress lines carrying '{STEP_TIME}')"


def _is_record(line: str) -> bool:
    return line.startswith(DLLOGGER_PREFIX) or STEP_TIME in line


class _Read(NamedTuple):
    records: dict[int, dict[str, float]]
    parameters: dict[str, Any] | None
    steps: StepRange | None
    repeated: set[int]
    unreadable: list[int]
    losses: _Losses


def _numeric(data: Mapping[str, Any]) -> dict[str, float]:
    return {k: _float(v) for k, v in data.items() if isinstance(v, int | float) and not isinstance(v, bool)}


def _float(value: float) -> float:
    """JSON integers beyond a float's range become ±inf (which the checks then refuse) instead of failing."""
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


class _Span:
    """The lowest and highest step seen so far."""

    def __init__(self) -> None:
        self.low: int | None = None
        self.high: int | None = None

    def add(self, step: int) -> None:
        if self.low is None or step < self.low:
            self.low = step
        if self.high is None or step > self.high:
            self.high = step

    def range(self) -> StepRange | None:
        return None if self.low is None or self.high is None else StepRange(self.low, self.high)


class _Losses:
    """The steps whose last logged loss is not finite, and whether any step logged one."""

    def __init__(self) -> None:
        self.failed: dict[int, float] = {}
        self.logged = False

    def add(self, step: int, loss: float) -> None:
        self.logged = True
        if math.isfinite(loss):
            self.failed.pop(step, None)  # a restarted run redid the step
        else:
            self.failed[step] = loss

    def add_from_line(self, step: int, line: str) -> None:
        """The loss of a DLLogger line left undecoded, if it has one."""
        match = _LOSS_VALUE.search(line)
        if match:
            try:
                loss = float(match.group(1))
            except ValueError:  # not a JSON number (1.2.3): nothing decodes the line, nothing reads it
                return
            self.add(step, loss)

    def first_failure(self) -> tuple[int, float] | None:
        return min(self.failed.items()) if self.failed else None


def _read_dllogger(
    path: Path, lines: Iterable[tuple[int, str]], window: StepRange | None, beyond_window: bool
) -> _Read:
    records: dict[int, dict[str, float]] = {}
    parameters: dict[str, Any] | None = None
    # The line that gave each parameter its value: a later record that says otherwise is refused.
    parameter_lines: dict[str, int] = {}
    span = _Span()
    timed: set[int] = set()  # steps seen with a step time
    repeated: set[int] = set()
    unreadable: list[int] = []
    losses = _Losses()
    # The window's bounds as plain ints: this loop runs once per line of a 100 000-step log.
    low, high = (window.start, window.end) if window is not None else (None, None)
    for number, line in lines:
        fast = _DLLOGGER_STEP.match(line)
        outside = False
        if fast:
            step = int(fast.group(1))
            span.add(step)
            outside = low is not None and high is not None and not low <= step <= high
            if outside and not beyond_window:
                if _STEP_TIME_KEY in line:
                    (repeated if step in timed else timed).add(step)
                losses.add_from_line(step, line)
                continue
        elif not line.strip():
            continue
        try:
            record = _dllogger_record(path, number, line)
        except AnalysisError:
            if not outside:
                raise
            # Outside the window, read only for drawing: `metrics` never decodes this line.
            unreadable.append(number)
            if _STEP_TIME_KEY in line:
                (repeated if step in timed else timed).add(step)
            losses.add_from_line(step, line)
            continue
        if record is None:
            continue
        step_value, data = record
        if step_value == "PARAMETER":
            for key, value in data.items():
                if parameters is not None and key in parameters and parameters[key] != value:
                    raise AnalysisError(
                        f"{path}:{number}: PARAMETER record says {key} = {value!r}, and line "
                        f"{parameter_lines[key]} said {parameters[key]!r}: the log holds two runs' configurations "
                        "(the metrics would take whichever came last); split it at the second run"
                    )
                parameter_lines.setdefault(key, number)
            parameters = {**(parameters or {}), **data}
            continue
        if not isinstance(step_value, int) or isinstance(step_value, bool):
            continue  # dllogger summary records (`"step": []`) carry no training step
        if not fast:
            span.add(step_value)
        loss = data.get(LOSS)
        if isinstance(loss, int | float) and not isinstance(loss, bool):
            losses.add(step_value, _float(loss))
        keep = window is None or beyond_window or step_value in window
        if STEP_TIME in data:
            if step_value in timed:
                repeated.add(step_value)
                if keep:  # a restarted run's record: the last attempt wins
                    records[step_value] = _numeric(data)
                continue
            timed.add(step_value)
        if keep:
            records.setdefault(step_value, {}).update(_numeric(data))
    return _Read(records, parameters, span.range(), repeated, unreadable, losses)


def _dllogger_record(path: Path, number: int, line: str) -> tuple[Any, dict[str, Any]] | None:
    """A record's step and data, or None for metadata; AnalysisError naming the line if it is not a record."""
    record = decode_dllogger(path, number, line)
    if record.get("type") == "METADATA":
        return None
    if "step" not in record:
        raise AnalysisError(f"{path}:{number}: DLLogger record has no 'step'")
    step_value, data = record["step"], record.get("data")
    if not isinstance(data, dict):
        raise AnalysisError(f"{path}:{number}: DLLogger record has no 'data' object")
    return step_value, data


def decode_dllogger(path: Path, number: int, line: str) -> dict[str, Any]:
    """One DLLogger line's JSON object; AnalysisError naming the line where it is not one."""
    if not line.startswith(DLLOGGER_PREFIX):
        raise AnalysisError(f"{path}:{number}: not a DLLogger record (expected a line starting with 'DLLL {{')")
    try:
        record = json.loads(line[len(DLLOGGER_PREFIX) :])
    except json.JSONDecodeError as e:
        raise AnalysisError(f"{path}:{number}: malformed DLLogger JSON: {e.msg} (column {e.colno + 5})") from None
    except (ValueError, RecursionError) as e:  # an integer too long to convert, nesting too deep
        raise AnalysisError(f"{path}:{number}: unreadable DLLogger JSON: {e}") from None
    if not isinstance(record, dict):
        raise AnalysisError(f"{path}:{number}: DLLogger record is not a JSON object")
    return record


def _read_text_log(
    path: Path, lines: Iterable[tuple[int, str]], window: StepRange | None, beyond_window: bool
) -> _Read:
    records: dict[int, dict[str, float]] = {}
    span = _Span()
    latest: dict[int, dict[str, float]] = {}  # each step's last update, to tell redraws from repeats
    repeated: set[int] = set()
    losses = _Losses()
    # Lines come cut at carriage returns too: each is one update of a tqdm bar redrawn in place.
    for number, update in lines:
        if STEP_TIME not in update:
            continue
        metrics = _text_metrics(update)
        if STEP_TIME not in metrics:
            raise AnalysisError(f"{path}:{number}: cannot read the value of '{STEP_TIME}'")
        step = _text_step(update, metrics)
        if step is None:
            raise AnalysisError(
                f"{path}:{number}: '{STEP_TIME}' without a step number (global_step, iteration or n/total counter)"
            )
        span.add(step)
        if LOSS in metrics:
            losses.add(step, metrics[LOSS])
        previous = latest.get(step)
        latest[step] = metrics
        keep = window is None or beyond_window or step in window
        if previous is not None and not _redraw(previous, metrics):
            repeated.add(step)  # a restarted run's line: the last attempt wins
            if keep:
                records[step] = dict(metrics)
        elif keep:
            records.setdefault(step, {}).update(metrics)
    return _Read(records, None, span.range(), repeated, [], losses)


def _redraw(previous: Mapping[str, float], metrics: Mapping[str, float]) -> bool:
    """True when an update shows the same values as the step's previous one (NaN equal to NaN)."""
    return previous.keys() == metrics.keys() and all(
        a == b or (math.isnan(a) and math.isnan(b)) for a, b in ((previous[k], metrics[k]) for k in metrics)
    )


def _text_metrics(update: str) -> dict[str, float]:
    metrics: dict[str, float] = {}
    for piece in _TEXT_SEPARATORS.split(update):
        match = _TEXT_METRIC.fullmatch(piece)
        if match:
            metrics[match.group(1)] = float(match.group(2))
    return metrics


def _text_step(update: str, metrics: Mapping[str, float]) -> int | None:
    if math.isfinite(metrics.get(GLOBAL_STEP, math.nan)):
        return int(metrics[GLOBAL_STEP])
    if match := _ITERATION.search(update):
        return int(match.group(1))
    if match := _TQDM_COUNTER.search(update):
        return int(match.group(1)) - 1
    return None
