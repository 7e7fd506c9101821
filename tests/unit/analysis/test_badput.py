"""analysis.badput and `python -m analysis goodput --log`: the run's badput split by cause, per
attempt, against a run worked by hand."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from analysis.__main__ import main

T0 = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)
STEP_S = 10.0


def _at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def _event(seconds: float, event: str, attempt: int, step: int | None = None) -> str:
    record: dict[str, object] = {"time": _at(seconds).isoformat(), "event": event, "run": "r", "attempt": attempt}
    if step is not None:
        record["step"] = step
    return json.dumps(record)


def _record(step: int, seconds: float) -> str:
    data = {"train_step_timing in s": STEP_S}
    return "DLLL " + json.dumps({"timestamp": str(_at(seconds).timestamp()), "type": "LOG", "step": step, "data": data})


@pytest.fixture
def run(tmp_path: Path) -> tuple[Path, Path]:
    """Megatron-Bridge's numbering: records of steps 0-29 (30 steps done), a checkpoint of 20 steps
    after the record of step 19. Attempt 0 starts at 0 s from step 0, ends its first step at 110 s
    (100 s to get there, then one 10 s step), logs steps 0-29 until 400 s, saves 20 at 310 s and
    stops at 400 s. Attempt 1 starts at 520 s (120 s waiting) from 20, ends its first step at
    590 s (60 s to get there), logs steps 20-49 until 880 s, saves 50 and stops at 900 s."""
    events = [
        _event(0, "job_started", 0), _event(0, "checkpoint_loaded", 0, 0),
        _event(310, "checkpoint_saved", 0, 20), _event(400, "job_terminated", 0),
        _event(520, "job_started", 1), _event(520, "checkpoint_loaded", 1, 20),
        _event(880, "checkpoint_saved", 1, 50), _event(900, "job_terminated", 1),
    ]  # fmt: skip
    log = [_record(step, 110 + step * STEP_S) for step in range(30)]
    log += [_record(step, 590 + (step - 20) * STEP_S) for step in range(20, 50)]
    (tmp_path / "events.jsonl").write_text("\n".join(events) + "\n")
    (tmp_path / "dllogger.json").write_text("\n".join(log) + "\n")
    return tmp_path / "events.jsonl", tmp_path / "dllogger.json"


def test_the_badput_by_cause_worked_by_hand(run: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    """Runtime 900 s, effective (50 − 0) × 10 = 500 s: 400 s of badput. Waiting 120 s (400 → 520);
    to first step 100 + 60 s; lost: attempt 0 had done 30 steps (its last record, step 29) and
    attempt 1 resumed from 20, 10 steps, 100 s; other: the 20 s after attempt 1's last step."""
    events, log = run
    assert (
        main(["goodput", "--events", str(events), "--reference-step-time", str(STEP_S), "--log", str(log), "--json"])
        == 0
    )
    found = json.loads(capsys.readouterr().out)["badput"]
    assert found["total_s"] == pytest.approx(400)
    assert found["by_cause_s"] == pytest.approx(
        {"waiting": 120, "to first step": 160, "lost progress": 100, "other": 20}
    )
    assert found["attempts"] == [
        {"attempt": 0, "waiting_s": None, "to_first_step_s": 100.0, "lost_steps": 10, "lost_s": 100.0},
        {"attempt": 1, "waiting_s": 120.0, "to_first_step_s": 60.0, "lost_steps": 0, "lost_s": 0.0},
    ]
    assert main(["goodput", "--events", str(events), "--reference-step-time", str(STEP_S), "--log", str(log)]) == 0
    table = capsys.readouterr().out
    assert "badput       400 s" in table and "lost progress        100 s   25.0%" in table


def test_faster_steps_than_the_reference_leave_a_negative_remainder(
    run: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """At a reference of 12 s the kept steps beat it: the effective time (600 s) grows, the badput
    shrinks to 300 s, and what the causes do not explain is negative, not hidden."""
    events, log = run
    assert main(["goodput", "--events", str(events), "--reference-step-time", "12", "--log", str(log), "--json"]) == 0
    found = json.loads(capsys.readouterr().out)["badput"]
    assert found["total_s"] == pytest.approx(300)
    causes = found["by_cause_s"]
    assert causes["other"] == pytest.approx(300 - causes["waiting"] - causes["to first step"] - causes["lost progress"])
    assert causes["other"] < 0


def test_a_node_0_that_died_without_a_word_waits_from_its_last_step(
    run: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """Without attempt 0's job_terminated its last sign of life is its last step record (400 s),
    not its save at 310 s: waiting stays 120 s."""
    events, log = run
    events.write_text(
        "\n".join(
            line for line in events.read_text().splitlines() if 'job_terminated", "run": "r", "attempt": 0' not in line
        )
        + "\n"
    )
    assert (
        main(["goodput", "--events", str(events), "--reference-step-time", str(STEP_S), "--log", str(log), "--json"])
        == 0
    )
    assert json.loads(capsys.readouterr().out)["badput"]["attempts"][1]["waiting_s"] == pytest.approx(120)


def test_a_run_that_never_saved_lost_everything_it_trained(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """One attempt from step 0, 10 steps logged, no save: the 10 steps are lost progress, not other."""
    events = tmp_path / "events.jsonl"
    events.write_text(
        "\n".join([_event(0, "job_started", 0), _event(0, "checkpoint_loaded", 0, 0), _event(200, "job_terminated", 0)])
        + "\n"
    )
    log = tmp_path / "dllogger.json"
    log.write_text("\n".join(_record(step, 100 + step * STEP_S) for step in range(10)) + "\n")
    assert (
        main(["goodput", "--events", str(events), "--reference-step-time", str(STEP_S), "--log", str(log), "--json"])
        == 0
    )
    (attempt,) = json.loads(capsys.readouterr().out)["badput"]["attempts"]
    assert (attempt["lost_steps"], attempt["lost_s"]) == (10, 100.0)


def test_two_pods_starting_one_attempt_around_its_load_are_one_attempt(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two pods write job_started for attempt 0 with checkpoint_loaded between them: one attempt."""
    events = tmp_path / "events.jsonl"
    lines = [
        _event(0, "job_started", 0), _event(0, "checkpoint_loaded", 0, 0), _event(1, "job_started", 0),
        _event(150, "checkpoint_saved", 0, 5), _event(200, "job_terminated", 0),
    ]  # fmt: skip
    events.write_text("\n".join(lines) + "\n")
    log = tmp_path / "dllogger.json"
    log.write_text("\n".join(_record(step, 100 + step * STEP_S) for step in range(5)) + "\n")
    assert (
        main(["goodput", "--events", str(events), "--reference-step-time", str(STEP_S), "--log", str(log), "--json"])
        == 0
    )
    found = json.loads(capsys.readouterr().out)
    assert len(found["badput"]["attempts"]) == len(found["startup"]) == 1
