"""analysis.startup and `python -m analysis goodput --log`: each attempt's time to its first step and
to steady state, from the goodput events and the DLLogger log, against a hand-computed case."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from analysis.__main__ import main
from analysis.errors import AnalysisError
from analysis.startup import StepRecord, read_step_records, startup

T0 = datetime(2026, 11, 27, 10, 0, tzinfo=UTC)
T1 = T0 + timedelta(minutes=10)
T2 = T0 + timedelta(minutes=20)
# Seconds after each attempt's start at which a step's record is written, by step.
ATTEMPT_0 = {0: 300, 1: 330, 2: 355, 3: 380, 4: 405}
ATTEMPT_1 = {3: 120, 4: 160, 5: 185, 6: 210, 7: 235}


def _event(time: datetime, event: str, attempt: int, step: int | None = None) -> str:
    record: dict[str, object] = {"time": time.isoformat(), "event": event, "run": "r", "attempt": attempt}
    if step is not None:
        record["step"] = step
    return json.dumps(record)


def _record(step: object, at: datetime) -> str:
    data = {"train_step_timing in s": 99.0}  # smoothed by NeMo: not what is measured
    return "DLLL " + json.dumps({"timestamp": str(at.timestamp()), "type": "LOG", "step": step, "data": data})


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    events = [
        # Two pods write job_started at each start: one attempt.
        _event(T0, "job_started", 0), _event(T0 + timedelta(seconds=1), "job_started", 0),
        _event(T0 + timedelta(seconds=2), "checkpoint_loaded", 0, 0),
        _event(T0 + timedelta(seconds=500), "checkpoint_saved", 0, 3),
        _event(T0 + timedelta(seconds=590), "job_terminated", 0),
        _event(T1, "job_started", 1), _event(T1 + timedelta(seconds=2), "checkpoint_loaded", 1, 3),
        _event(T1 + timedelta(seconds=590), "job_terminated", 1),
        _event(T2, "job_started", 2), _event(T2 + timedelta(seconds=30), "job_terminated", 2),
    ]  # fmt: skip
    log = [_record("PARAMETER", T0)]
    log += [_record(step, T0 + timedelta(seconds=s)) for step, s in ATTEMPT_0.items()]
    log += [_record(step, T1 + timedelta(seconds=s)) for step, s in ATTEMPT_1.items()]
    (tmp_path / "events.jsonl").write_text("\n".join(events) + "\n")
    (tmp_path / "dllogger.json").write_text("\n".join(log) + "\n")
    return tmp_path / "events.jsonl", tmp_path / "dllogger.json"


def test_each_attempt_s_first_step_and_steady_state_by_hand(
    files: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """Attempt 0: step 0 at 300 s; intervals 30, 25, 25, 25, median 25: three in a row within 10 %
    begin at step 2, steady at 355 s. Attempt 1 (restarted from step 3): step 3 at 120 s; intervals
    40, 25, 25, 25, steady from step 5 at 185 s. Attempt 2 logged no step."""
    events, log = files
    args = ["goodput", "--events", str(events), "--reference-step-time", "25", "--log", str(log)]
    assert main([*args, "--json"]) == 0
    attempts = json.loads(capsys.readouterr().out)["startup"]
    got = [(a["first_step"], a["to_first_step_s"], a["steady_step"], a["to_steady_s"], a["steps"]) for a in attempts]
    assert got == [(0, 300.0, 2, 355.0, 5), (3, 120.0, 5, 185.0, 5), (None, None, None, None, 0)]
    assert [a["started"] for a in attempts] == [t.isoformat() for t in (T0, T1, T2)]
    assert main(args) == 0
    table = capsys.readouterr().out
    assert "To first step" in table and "300 s" in table and "185 s" in table


def test_a_record_without_a_time_is_named(tmp_path: Path) -> None:
    path = tmp_path / "dllogger.json"
    path.write_text('DLLL {"type": "LOG", "step": 4, "data": {}}\n')
    with pytest.raises(AnalysisError, match=r"dllogger.json:1: DLLogger record without a numeric 'timestamp'"):
        read_step_records(path)


def test_without_a_log_the_report_is_the_calculator_s_alone(
    files: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    events, _ = files
    assert main(["goodput", "--events", str(events), "--reference-step-time", "25", "--json"]) == 0
    assert "startup" not in json.loads(capsys.readouterr().out)


def test_one_interval_in_tolerance_amid_warm_up_is_not_steady_state(tmp_path: Path) -> None:
    """Intervals 100, 27, 60, 40, then 25.6 four times (median 26.3): a lone 27 amid warm-up is not
    steady state; the first of three in a row within 10 % is (the step after the 40 s one)."""
    times = [0.0]
    for dt in (100, 27, 60, 40, 25.6, 25.6, 25.6, 25.6):
        times.append(times[-1] + dt)
    records = [StepRecord(step, T0 + timedelta(seconds=50 + t)) for step, t in enumerate(times)]
    (attempt,) = startup([T0], records)
    assert attempt.steady_step == 5 and attempt.to_steady_s == pytest.approx(50 + times[5])
