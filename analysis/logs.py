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
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from analysis.errors import AnalysisError

STEP_TIME = "train_step_timing in s"
LOSS = "reduced_train_loss"
GLOBAL_STEP = "global_step"
_DLLOGGER_PREFIX = "DLLL "

# A DLLogger LOG record as dllogger writes it: string fields, then the step, then the data.
# Only keys with string values may precede the step, so a match is the top-level step.
_DLLOGGER_STEP = re.compile(r'DLLL \{(?:"[a-z]+": "[^"]*", )*"step": (-?\d+), "data": ')

_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|nan|inf"
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

    def series(self, metric: str) -> tuple[list[int], list[float]]:
        """Steps and values of one metric, for the steps that logged it."""
        steps = [step for step, data in self.records.items() if metric in data]
        return steps, [self.records[step][metric] for step in steps]


def read_log(path: Path, window: StepRange | None = None) -> TrainingLog:
    """Parse a DLLogger or NeMo text log. With `window`, keep only records inside it.

    Every DLLogger line is checked for the `DLLL ` prefix and a readable step; lines whose
    step lies outside `window` are not JSON-decoded, which keeps a 100 000-step log fast.
    """
    # Newlines only: splitlines would also split at tqdm's carriage returns and put error
    # line numbers out of step with the file.
    lines = _read_text(path).split("\n")
    first = next((line for line in lines if line.strip()), None)
    if first is None:
        raise AnalysisError(f"{path} is empty")
    if first.startswith(_DLLOGGER_PREFIX):
        records, parameters, steps = _read_dllogger(path, lines, window)
        log_format = LogFormat.DLLOGGER
    else:
        records, steps = _read_text_log(path, lines, window)
        parameters, log_format = None, LogFormat.NEMO_TEXT
    if steps is None:
        raise AnalysisError(
            f"{path} has no training steps: expected DLLogger records (DLLL {{...}}) "
            f"or NeMo progress lines carrying '{STEP_TIME}'"
        )
    ordered = {step: records[step] for step in sorted(records)}
    return TrainingLog(path, log_format, ordered, parameters, steps)


def _read_text(path: Path) -> str:
    try:
        # Bytes, not read_text: text mode would turn tqdm's carriage returns into newlines.
        return path.read_bytes().decode("utf-8", errors="replace")
    except FileNotFoundError:
        raise AnalysisError(f"{path} does not exist") from None
    except OSError as e:
        raise AnalysisError(f"cannot read {path}: {e.strerror or e}") from None


def _numeric(data: Mapping[str, Any]) -> dict[str, float]:
    return {k: float(v) for k, v in data.items() if isinstance(v, int | float) and not isinstance(v, bool)}


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


def _read_dllogger(
    path: Path, lines: list[str], window: StepRange | None
) -> tuple[dict[int, dict[str, float]], dict[str, Any] | None, StepRange | None]:
    records: dict[int, dict[str, float]] = {}
    parameters: dict[str, Any] | None = None
    span = _Span()
    for number, line in enumerate(lines, start=1):
        fast = _DLLOGGER_STEP.match(line)
        if fast:
            step = int(fast.group(1))
            span.add(step)
            if window is not None and step not in window:
                continue
        elif not line.strip():
            continue
        record = _decode_dllogger(path, number, line)
        if record.get("type") == "METADATA":
            continue
        if "step" not in record:
            raise AnalysisError(f"{path}:{number}: DLLogger record has no 'step'")
        step_value, data = record["step"], record.get("data")
        if not isinstance(data, dict):
            raise AnalysisError(f"{path}:{number}: DLLogger record has no 'data' object")
        if step_value == "PARAMETER":
            parameters = {**(parameters or {}), **data}
            continue
        if not isinstance(step_value, int) or isinstance(step_value, bool):
            continue  # dllogger summary records (`"step": []`) carry no training step
        if not fast:
            span.add(step_value)
        if window is None or step_value in window:
            records.setdefault(step_value, {}).update(_numeric(data))
    return records, parameters, span.range()


def _decode_dllogger(path: Path, number: int, line: str) -> dict[str, Any]:
    if not line.startswith(_DLLOGGER_PREFIX):
        raise AnalysisError(f"{path}:{number}: not a DLLogger record (expected a line starting with 'DLLL {{')")
    try:
        record = json.loads(line[len(_DLLOGGER_PREFIX) :])
    except json.JSONDecodeError as e:
        raise AnalysisError(f"{path}:{number}: malformed DLLogger JSON: {e.msg} (column {e.colno + 5})") from None
    if not isinstance(record, dict):
        raise AnalysisError(f"{path}:{number}: DLLogger record is not a JSON object")
    return record


def _read_text_log(
    path: Path, lines: list[str], window: StepRange | None
) -> tuple[dict[int, dict[str, float]], StepRange | None]:
    records: dict[int, dict[str, float]] = {}
    span = _Span()
    for number, line in enumerate(lines, start=1):
        if STEP_TIME not in line:
            continue
        # tqdm redraws with carriage returns, so one physical line can hold many updates.
        for update in line.split("\r"):
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
            if window is None or step in window:
                records.setdefault(step, {}).update(metrics)
    return records, span.range()


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
