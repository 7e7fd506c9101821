"""`python -m analysis goodput` on generated event logs with known answers, and on bad ones."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from analysis.__main__ import main
from analysis.errors import AnalysisError
from analysis.goodput import compute_goodput, read_events


def event(time: str, name: str, step: int | None = None, run: str = "gpt3", attempt: int | None = None) -> str:
    record: dict[str, object] = {"time": time, "event": name, "run": run}
    if attempt is not None:
        record["attempt"] = attempt
    if step is not None:
        record["step"] = step
    return json.dumps(record)


# Two attempts: the first saves 100 and 200 and dies, the second resumes from 200 and saves 350.
# 10:00 → 12:05 is 7500 s; 350 steps × 18 s = 6300 s of kept work: goodput 84 %.
RUN = [
    event("2026-11-22T10:00:00+00:00", "job_started", attempt=0),
    event("2026-11-22T10:02:00+00:00", "checkpoint_loaded", 0, attempt=0),
    event("2026-11-22T10:30:00+00:00", "checkpoint_saved", 100, attempt=0),
    event("2026-11-22T11:00:00+00:00", "checkpoint_saved", 200, attempt=0),
    event("2026-11-22T11:10:00+00:00", "job_terminated", attempt=0),
    event("2026-11-22T11:15:00+00:00", "job_started", attempt=1),
    event("2026-11-22T11:17:00Z", "checkpoint_loaded", 200, attempt=1),
    event("2026-11-22T14:00:00+02:00", "checkpoint_saved", 350, attempt=1),  # 12:00 UTC
    event("2026-11-22T12:05:00+00:00", "job_terminated", attempt=1),
]


def _retimed(index: int, time: str) -> list[str]:
    """RUN with the event at `index` (line index + 1) stamped `time` instead."""
    record = json.loads(RUN[index])
    record["time"] = time
    return [*RUN[:index], json.dumps(record), *RUN[index + 1 :]]


def write_events(tmp_path: Path, lines: list[str], name: str = "events.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return path


def test_known_answer_in_any_line_order(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shuffled = RUN.copy()
    random.Random(7).shuffle(shuffled)
    path = write_events(tmp_path, shuffled)
    assert main(["goodput", "--events", str(path), "--reference-step-time", "18", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["total_runtime_s"] == 7500
    assert report["step_progress"] == 350
    assert report["effective_time_s"] == 6300
    assert report["goodput_percent"] == pytest.approx(84.0)
    assert (report["job_starts"], report["restarts"]) == (2, 1)
    assert (report["checkpoints_saved"], report["checkpoints_loaded"]) == (3, 1)
    assert (report["start_step"], report["max_saved_step"]) == (0, 350)
    assert report["first_event"] == "2026-11-22T10:00:00+00:00"


def test_table_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["goodput", "--events", str(write_events(tmp_path, RUN)), "--reference-step-time", "18"]) == 0
    out = capsys.readouterr().out
    assert "84.0 %" in out
    assert "2 (1 restart)" in out


def test_a_fresh_start_without_a_load_event_counts_from_step_0(tmp_path: Path) -> None:
    lines = [line for line in RUN if '"step": 0' not in line]
    report = compute_goodput(read_events(write_events(tmp_path, lines)), 18)
    assert (report.start_step, report.step_progress) == (0, 350)


def test_a_run_resumed_from_an_older_checkpoint_counts_from_there(tmp_path: Path) -> None:
    lines = [
        event("2026-11-22T10:00:00+00:00", "job_started"),
        event("2026-11-22T10:05:00+00:00", "checkpoint_loaded", 1000),
        event("2026-11-22T10:35:00+00:00", "checkpoint_saved", 1050),
        event("2026-11-22T10:40:00+00:00", "job_terminated"),
    ]
    report = compute_goodput(read_events(write_events(tmp_path, lines)), 30)
    assert (report.start_step, report.step_progress) == (1000, 50)
    assert report.goodput_percent == pytest.approx(50 * 30 / 2400 * 100)


def test_public_tracker_records_and_pod_bursts(tmp_path: Path) -> None:
    """gpu-recipes' tracker names (`timestamp`, `event_type`, `job_name`), naive local times,
    and one `job_started` per pod counted as one start."""
    records = [
        {"timestamp": "2026-11-22T10:00:00", "event_type": "user_scheduled", "job_name": "llama"},
        *({"timestamp": "2026-11-22T10:01:00", "event_type": "job_started", "job_name": "llama"} for _ in range(4)),
        {"timestamp": "2026-11-22T10:40:00", "event_type": "checkpoint_saved", "job_name": "llama", "step": 200},
        {"timestamp": "2026-11-22T10:50:00", "event_type": "job_terminated", "job_name": "llama"},
    ]
    report = compute_goodput(read_events(write_events(tmp_path, [json.dumps(r) for r in records])), 9)
    assert report.total_runtime_s == 3000
    assert report.job_starts == 1
    assert report.goodput_percent == pytest.approx(200 * 9 / 3000 * 100)


def test_run_selection(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    other = [
        event("2026-11-22T09:00:00+00:00", "job_started", run="other"),
        event("2026-11-22T09:30:00+00:00", "job_terminated", run="other"),
    ]
    path = write_events(tmp_path, [*RUN, *other])
    assert main(["goodput", "--events", str(path), "--reference-step-time", "18"]) == 2
    assert "several runs (gpt3, other); pick one with --run" in capsys.readouterr().err
    assert main(["goodput", "--events", str(path), "--reference-step-time", "18", "--run", "gpt3", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["goodput_percent"] == pytest.approx(84.0)
    assert main(["goodput", "--events", str(path), "--reference-step-time", "18", "--run", "nope"]) == 2
    assert "no events for run 'nope'; runs in the file: gpt3, other" in capsys.readouterr().err


BAD_EVENTS: dict[str, tuple[list[str], str]] = {
    "empty": ([], "has no goodput events"),
    "malformed": ([RUN[0], '{"time": "2026-11-22T10:00:00+00:00", "event": '], r":2: malformed JSON"),
    "not an object": (["[1, 2]"], ":1: an event must be a JSON object"),
    "bad time": ([event("yesterday", "job_started")], ":1: 'time' must be an RFC 3339 timestamp"),
    "no time": (['{"event": "job_started", "run": "r"}'], ":1: 'time' must be"),
    "unknown event": (
        [event("2026-11-22T10:00:00+00:00", "job_exploded")],
        ":1: unknown event 'job_exploded'; known: user_scheduled, job_started, checkpoint_loaded",
    ),
    "no step": ([RUN[0], event("2026-11-22T10:30:00+00:00", "checkpoint_saved")], ":2: checkpoint_saved needs 'step'"),
    "negative step": ([event("2026-11-22T10:30:00+00:00", "checkpoint_loaded", -5)], "needs 'step', a non-negative"),
    "no run": (['{"time": "2026-11-22T10:00:00+00:00", "event": "job_started"}'], ":1: 'run' must name the run"),
    "mixed offsets": (
        [RUN[0], event("2026-11-22T10:30:00", "job_terminated")],
        "mixes times with and without a UTC offset",
    ),
    "zero runtime": ([RUN[0], event("2026-11-22T10:00:00+00:00", "job_terminated")], "zero runtime"),
    "saves below the load": (
        [
            event("2026-11-22T10:00:00+00:00", "checkpoint_loaded", 500),
            event("2026-11-22T10:30:00+00:00", "checkpoint_saved", 400),
        ],
        "saved no checkpoint past step 400 but loaded step 500",
    ),
    # Times that tell an impossible story: each names the offending line.
    "a save stamped before its attempt started": (
        _retimed(7, "2026-11-22T11:12:00+00:00"),
        "events.jsonl:8: checkpoint_saved (step 350) of attempt 1 at 2026-11-22T11:12:00+00:00 is before "
        "attempt 1's job_started (job_started of attempt 1 at 2026-11-22T11:15:00+00:00, line 6)",
    ),
    "a save stamped after its attempt ended": (
        _retimed(3, "2026-11-22T11:12:00+00:00"),
        "events.jsonl:4: checkpoint_saved (step 200) of attempt 0 at 2026-11-22T11:12:00+00:00 is after "
        "attempt 0's job_terminated",
    ),
    "an attempt that starts before the previous one ended": (
        _retimed(5, "2026-11-22T11:05:00+00:00"),
        "events.jsonl:6: job_started of attempt 1 at 2026-11-22T11:05:00+00:00 is before attempt 0 ended "
        "(job_terminated of attempt 0 at 2026-11-22T11:10:00+00:00, line 5)",
    ),
    "a save at a lower step, later, with no restart between": (
        [
            *RUN[:2],
            RUN[2].replace('"step": 100', '"step": 200'),
            RUN[3].replace('"step": 200', '"step": 100'),
            *RUN[4:],
        ],
        "events.jsonl:4: checkpoint_saved (step 100) of attempt 0 at 2026-11-22T11:00:00+00:00 is later than a "
        "save of a higher step, with no restart between (checkpoint_saved (step 200) of attempt 0",
    ),
}


@pytest.mark.parametrize("case", BAD_EVENTS)
def test_bad_events_exit_2_with_a_message(tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str) -> None:
    lines, message = BAD_EVENTS[case]
    path = tmp_path / "events.jsonl"
    path.write_text("\n".join(lines))
    assert main(["goodput", "--events", str(path), "--reference-step-time", "18"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("error: ") and captured.err.count("\n") == 1
    assert message in captured.err


@pytest.mark.parametrize("reference", ["0", "-3", "nan", "inf"])
def test_reference_step_time_must_be_positive(tmp_path: Path, reference: str) -> None:
    with pytest.raises(AnalysisError, match="reference step time must be a positive number"):
        compute_goodput(read_events(write_events(tmp_path, RUN)), float(reference))


def test_missing_events_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["goodput", "--events", str(tmp_path / "none.jsonl"), "--reference-step-time", "18"]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_out_of_order_times_are_found_whatever_the_line_order(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Lines may come in any order; times may not. The message names the line wherever it lies."""
    lines = _retimed(7, "2026-11-22T11:12:00+00:00")
    bad = lines.pop(7)
    path = write_events(tmp_path, [bad, *lines])
    assert main(["goodput", "--events", str(path), "--reference-step-time", "18"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1
    assert "events.jsonl:1: checkpoint_saved (step 350) of attempt 1" in captured.err
    assert "the event times are out of order" in captured.err


@pytest.mark.parametrize("output", [[], ["--json"]], ids=["table", "json"])
@pytest.mark.parametrize(
    ("reference", "message"),
    [
        ("30", "comes out at 140.0 %, above 100 %: 350 steps × 30 s = 10,500 s of kept work in 7,500 s of runtime"),
        ("1e308", "the effective time of run 'gpt3' overflows: 350 steps × 1e+308 s"),
    ],
)
def test_goodput_above_100_percent_or_infinite_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], reference: str, message: str, output: list[str]
) -> None:
    path = write_events(tmp_path, RUN)
    assert main(["goodput", "--events", str(path), "--reference-step-time", reference, *output]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("error: ") and captured.err.count("\n") == 1
    assert message in captured.err


def test_a_goodput_of_exactly_100_percent_is_accepted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    reference = str(7500 / 350)  # rounding may put 350 × this a hair above 7500 s
    path = write_events(tmp_path, RUN)
    assert main(["goodput", "--events", str(path), "--reference-step-time", reference, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["goodput_percent"] == pytest.approx(100.0)
