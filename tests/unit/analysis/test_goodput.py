"""`python -m analysis goodput` on generated event logs with known answers, and on bad ones."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from analysis import goodput
from analysis.__main__ import main
from analysis.errors import AnalysisError
from analysis.goodput import calculator_timeline, compute_goodput, read_events


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
    assert report["events"] == 9
    # 9 records + the calculator's proxy user_scheduled; no consecutive starts or ends to merge.
    assert report["resiliency_metrics"] == {
        "total_events": 10,
        "job_started_count": 2,
        "checkpoints_loaded": 1,
        "checkpoints_saved": 3,
        "total_runtime_hours": pytest.approx(7500 / 3600),
        "min_loaded_step": 0,
        "max_saved_step": 350,
        "step_difference": 350,
        "effective_computation_time_hours": pytest.approx(1.75),
        "goodput_percentage": pytest.approx(84.0),
    }


# Three attempts of one run, node 0 and a second writer both logging the first attempt's start
# and end. Attempt 1 finds checkpoint 200 unusable and resumes from 100, OLDER than the newest
# saved one (200), so steps 100–200 are trained twice; attempt 2 resumes from 300.
RESTARTED = [
    event("2026-11-22T10:00:00+00:00", "job_started", attempt=0),
    event("2026-11-22T10:00:00+00:00", "job_started", attempt=0),
    event("2026-11-22T10:01:00+00:00", "checkpoint_loaded", 0, attempt=0),
    event("2026-11-22T10:31:00+00:00", "checkpoint_saved", 100, attempt=0),
    event("2026-11-22T11:01:00+00:00", "checkpoint_saved", 200, attempt=0),
    event("2026-11-22T11:10:00+00:00", "job_terminated", attempt=0),
    event("2026-11-22T11:10:00+00:00", "job_terminated", attempt=0),
    event("2026-11-22T11:15:00+00:00", "job_started", attempt=1),
    event("2026-11-22T11:17:00+00:00", "checkpoint_loaded", 100, attempt=1),
    event("2026-11-22T11:47:00+00:00", "checkpoint_saved", 200, attempt=1),
    event("2026-11-22T12:17:00+00:00", "checkpoint_saved", 300, attempt=1),
    event("2026-11-22T12:20:00+00:00", "job_terminated", attempt=1),
    event("2026-11-22T12:25:00+00:00", "job_started", attempt=2),
    event("2026-11-22T12:27:00+00:00", "checkpoint_loaded", 300, attempt=2),
    event("2026-11-22T13:00:00+00:00", "checkpoint_saved", 400, attempt=2),
    event("2026-11-22T13:05:00+00:00", "job_terminated", attempt=2),
]
# Worked by hand with the calculator's rules, at a reference step time of 18 s:
RESTARTED_FIGURES = {
    "total_events": 15,  # 16 records − 1 repeated start − 1 repeated end + 1 proxy user_scheduled
    "job_started_count": 3,
    "checkpoints_loaded": 2,  # steps 100 and 300; the load of step 0 does not count
    "checkpoints_saved": 5,  # 100, 200, 200 again, 300, 400
    "total_runtime_hours": pytest.approx(11100 / 3600),  # 10:00 → 13:05
    "min_loaded_step": 0,
    "max_saved_step": 400,
    "step_difference": 400,  # the steps trained twice count once
    "effective_computation_time_hours": pytest.approx(2.0),  # 400 × 18 s = 7200 s
    "goodput_percentage": pytest.approx(7200 / 11100 * 100),  # 64.86 %
}


def test_a_restart_from_an_older_checkpoint_than_the_newest_saved_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_events(tmp_path, RESTARTED)
    assert main(["goodput", "--events", str(path), "--reference-step-time", "18", "--json"]) == 0
    captured = capsys.readouterr()
    assert captured.err == ""
    report = json.loads(captured.out)
    assert report["resiliency_metrics"] == RESTARTED_FIGURES
    assert (report["events"], report["restarts"], report["step_progress"]) == (16, 2, 400)


def test_the_calculators_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Its labels, its order and its rounding: hours and percent to two decimals."""
    assert main(["goodput", "--events", str(write_events(tmp_path, RESTARTED)), "--reference-step-time", "18"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [" ".join(line.split()) for line in lines[:10]] == [
        "Total Events 15",
        "Job Started Count 3",
        "Checkpoints Loaded 2",
        "Checkpoints Saved 5",
        "Total Runtime (hours) 3.08",
        "Min Loaded Step 0",
        "Max Saved Step 400",
        "Step Difference 400",
        "Effective Computation Time (hours) 2.00",
        "Goodput Percentage 64.86%",
    ]
    assert "run gpt3: 16 event records" in lines[11] and "2 restarts" in lines[11]
    assert lines[12] == "runtime 11,100 s; effective 400 steps × 18 s = 7,200 s"


def test_a_rollback_below_the_first_load_lowers_the_min_loaded_step(tmp_path: Path) -> None:
    """The calculator takes the lowest load of the whole run, not the first one."""
    lines = [
        event("2026-11-22T10:00:00+00:00", "job_started"),
        event("2026-11-22T10:02:00+00:00", "checkpoint_loaded", 300),
        event("2026-11-22T10:32:00+00:00", "checkpoint_saved", 400),
        event("2026-11-22T11:02:00+00:00", "checkpoint_saved", 500),
        event("2026-11-22T11:05:00+00:00", "job_terminated"),
        event("2026-11-22T11:10:00+00:00", "job_started"),
        event("2026-11-22T11:12:00+00:00", "checkpoint_loaded", 200),
        event("2026-11-22T11:42:00+00:00", "checkpoint_saved", 300),
        event("2026-11-22T11:45:00+00:00", "job_terminated"),
    ]
    report = compute_goodput(read_events(write_events(tmp_path, lines)), 10)
    assert (report.min_loaded_step, report.max_saved_step, report.step_difference) == (200, 500, 300)
    assert (report.total_events, report.checkpoints_loaded, report.checkpoints_saved) == (10, 2, 3)
    assert report.total_runtime_s == 6300
    assert report.goodput_percent == pytest.approx(3000 / 6300 * 100)


def test_without_a_load_event_no_progress_counts_as_in_the_calculator(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The calculator needs a checkpoint_loaded for a step difference (the project's pods always
    write one); this module used to count from step 0 instead, and now follows the calculator."""
    lines = [line for line in RUN if "checkpoint_loaded" not in line]
    path = write_events(tmp_path, lines)
    assert main(["goodput", "--events", str(path), "--reference-step-time", "18", "--json"]) == 0
    captured = capsys.readouterr()
    metrics = json.loads(captured.out)["resiliency_metrics"]
    assert (metrics["min_loaded_step"], metrics["max_saved_step"], metrics["step_difference"]) == (None, 350, None)
    assert (metrics["effective_computation_time_hours"], metrics["goodput_percentage"]) == (0, 0)
    assert captured.err.startswith("warning: run 'gpt3' has no checkpoint_loaded event")
    assert captured.err.count("\n") == 1


def test_a_run_resumed_from_an_older_checkpoint_counts_from_there(tmp_path: Path) -> None:
    lines = [
        event("2026-11-22T10:00:00+00:00", "job_started"),
        event("2026-11-22T10:05:00+00:00", "checkpoint_loaded", 1000),
        event("2026-11-22T10:35:00+00:00", "checkpoint_saved", 1050),
        event("2026-11-22T10:40:00+00:00", "job_terminated"),
    ]
    report = compute_goodput(read_events(write_events(tmp_path, lines)), 30)
    assert (report.min_loaded_step, report.step_progress) == (1000, 50)
    assert report.goodput_percent == pytest.approx(50 * 30 / 2400 * 100)


@pytest.mark.parametrize(("saves", "difference"), [([], None), ([0], None), ([1000], 0)])
def test_no_save_past_the_load_is_no_progress(tmp_path: Path, saves: list[int], difference: int | None) -> None:
    lines = [
        event("2026-11-22T10:00:00+00:00", "job_started"),
        event("2026-11-22T10:05:00+00:00", "checkpoint_loaded", 0 if saves == [0] else 1000),
        *(event("2026-11-22T10:35:00+00:00", "checkpoint_saved", step) for step in saves),
        event("2026-11-22T10:40:00+00:00", "job_terminated"),
    ]
    report = compute_goodput(read_events(write_events(tmp_path, lines)), 30)
    assert (report.step_difference, report.step_progress, report.goodput_percent) == (difference, 0, 0)


def test_public_tracker_records_and_pod_bursts(tmp_path: Path) -> None:
    """gpu-recipes' tracker names (`timestamp`, `event_type`, `job_name`), with the UTC offset
    its naive local times lack added, and one `job_started` per pod counted as one start."""
    records = [
        {"timestamp": "2026-11-22T10:00:00+00:00", "event_type": "user_scheduled", "job_name": "llama"},
        *(
            {"timestamp": "2026-11-22T10:01:00+00:00", "event_type": "job_started", "job_name": "llama"}
            for _ in range(4)
        ),
        {"timestamp": "2026-11-22T10:02:00+00:00", "event_type": "checkpoint_loaded", "job_name": "llama", "step": 0},
        {"timestamp": "2026-11-22T10:40:00+00:00", "event_type": "checkpoint_saved", "job_name": "llama", "step": 200},
        {"timestamp": "2026-11-22T10:50:00+00:00", "event_type": "job_terminated", "job_name": "llama"},
    ]
    report = compute_goodput(read_events(write_events(tmp_path, [json.dumps(r) for r in records])), 9)
    assert report.total_runtime_s == 3000
    assert report.job_starts == 1
    assert report.total_events == 5  # a user_scheduled leads: no proxy; four starts count once
    assert report.goodput_percent == pytest.approx(200 * 9 / 3000 * 100)


def test_a_late_user_scheduled_still_gets_a_proxy() -> None:
    """The proxy goes in whenever the first event is not a user_scheduled; pod bursts merge
    only when consecutive."""
    Event = goodput.Event
    started, terminated, scheduled = Event.JOB_STARTED, Event.JOB_TERMINATED, Event.USER_SCHEDULED
    timeline = calculator_timeline([started, scheduled, started, started, terminated, terminated, started])
    assert timeline == [scheduled, started, scheduled, started, terminated, started]
    assert calculator_timeline([scheduled, started]) == [scheduled, started]


# ---------------------------------------------------------------------------- Cloud Logging exports


def _log_entry(number: int, line: str, how: str) -> dict[str, object]:
    """One LogEntry as `gcloud logging read --format=json` prints it, carrying the event `line`:
    - "json": the event as jsonPayload, with its own time;
    - "lifted": the event as jsonPayload, its `time` moved to the entry's timestamp (GKE's agent);
    - "text": the event inside a textPayload, after a prefix."""
    record = json.loads(line)
    entry: dict[str, object] = {
        "insertId": f"id{number:04d}",
        "logName": "projects/demo/logs/stdout",
        "receiveTimestamp": "2026-11-23T00:00:00.000000001Z",  # later than every event: must not be used
        "resource": {"type": "k8s_container", "labels": {"container_name": "nemo"}},
        "severity": "INFO",
        "timestamp": record["time"].replace("+00:00", ".000000000Z"),
    }
    if how == "text":
        entry["textPayload"] = f"[node-0] {line}\n"
    else:
        if how == "lifted":
            del record["time"]
        entry["jsonPayload"] = record
    return entry


def _cloud_export(lines: list[str]) -> list[dict[str, object]]:
    entries = [_log_entry(n, line, ("json", "lifted", "text")[n % 3]) for n, line in enumerate(lines)]
    other = {"insertId": "x1", "logName": "projects/demo/logs/stdout", "timestamp": "2026-11-22T10:30:00Z"}
    entries += [
        {**other, "textPayload": "Training epoch 0, iteration 9/29 | train_step_timing in s: 12.41"},
        {**other, "insertId": "x2", "jsonPayload": {"message": "{'lr': 0.1}"}},
        {**other, "insertId": "x3", "protoPayload": {"@type": "type.googleapis.com/google.cloud.audit.AuditLog"}},
        entries[4],  # exported twice
    ]
    return entries[::-1]  # gcloud lists the newest first


@pytest.mark.parametrize("layout", ["gcloud JSON array", "sink JSON lines"])
def test_a_cloud_logging_export_gives_the_same_figures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], layout: str
) -> None:
    entries = _cloud_export(RESTARTED)
    path = tmp_path / "export.json"
    if layout == "gcloud JSON array":
        path.write_text(json.dumps(entries, indent=2))
    else:
        path.write_text("".join(json.dumps(entry) + "\n" for entry in entries))
    assert main(["goodput", "--events", str(path), "--reference-step-time", "18", "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["resiliency_metrics"] == RESTARTED_FIGURES
    assert captured.err.splitlines() == [
        f"note: {path}: 3 log entries without a goodput event skipped",
        f"note: {path}: 1 log entry exported more than once (same logName and insertId) counted once",
    ]


def test_the_trackers_cloud_logging_entries(tmp_path: Path) -> None:
    """tracker.py's `log_struct` payloads: `timestamp` (the pod's clock; the tracker writes no
    offset, so one is added here), `job_name`, `event_type`; the payload's time wins over the entry's."""
    payloads = [
        ("2026-11-22T10:00:00Z", "user_scheduled", None),
        ("2026-11-22T10:01:00Z", "job_started", None),
        ("2026-11-22T10:02:00Z", "checkpoint_loaded", 0),
        ("2026-11-22T10:40:00Z", "checkpoint_saved", 200),
        ("2026-11-22T10:50:00Z", "job_terminated", None),
    ]
    entries = [
        {
            "insertId": str(n),
            "logName": "projects/demo/logs/llama-goodput",
            "timestamp": "2026-11-22T23:59:59Z",
            # Struct numbers are doubles: the export may print a step as 200.0.
            "jsonPayload": {"timestamp": time, "job_name": "llama", "event_type": name}
            | ({} if step is None else {"step": float(step)}),
        }
        for n, (time, name, step) in enumerate(payloads)
    ]
    path = tmp_path / "export.json"
    path.write_text(json.dumps(entries))
    report = compute_goodput(read_events(path), 9)
    assert (report.total_runtime_s, report.total_events, report.step_difference) == (3000, 5, 200)


def test_a_tracker_record_without_an_offset_is_refused_naming_its_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """tracker.py writes `datetime.now().isoformat()`: the pod's local time, which no reader can order."""
    entry = {
        "insertId": "1",
        "timestamp": "2026-11-22T10:00:00.5Z",
        "jsonPayload": {"timestamp": "2026-11-22T10:00:00.123456", "job_name": "llama", "event_type": "job_started"},
    }
    path = tmp_path / "export.json"
    path.write_text(json.dumps([entry]))
    assert main(["goodput", "--events", str(path), "--reference-step-time", "9"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith(f"error: {path} entry 1: 'timestamp' '2026-11-22T10:00:00.123456' has no UTC offset; ")


BAD_EXPORTS: dict[str, tuple[str, str]] = {
    "malformed array": ('[{"insertId": "1", ', "export.json: malformed JSON array"),
    "an entry that is not an object": ('[{"insertId": "1", "textPayload": "hi"}, 7]', "export.json entry 2: an event"),
    "no event at all": (
        '[{"textPayload": "hello"}, {"jsonPayload": {"message": "x"}}]',
        "has no goodput events (2 log entries without one)",
    ),
    "an event without any time": (
        '[{"insertId": "1", "jsonPayload": {"event": "job_started", "run": "r"}}]',
        "export.json entry 1: 'time' must be an RFC 3339 timestamp",
    ),
    "an event with a bad step": (
        '{"insertId": "1", "timestamp": "2026-11-22T10:00:00Z", '
        '"jsonPayload": {"event": "checkpoint_saved", "run": "r", "step": -1}}',
        "export.json:1: checkpoint_saved needs 'step', a non-negative integer; got -1",
    ),
    "an unknown event in a textPayload": (
        '{"textPayload": "{\\"time\\": \\"2026-11-22T10:00:00Z\\", \\"event\\": \\"exploded\\", \\"run\\": \\"r\\"}"}',
        "export.json:1: unknown event 'exploded'",
    ),
    "a truncated array": ("[1, 2", "malformed JSON array"),
    "nested too deeply": ("[" * 100_000, "export.json: JSON nested too deeply to be a log export"),
    "a line nested too deeply": ('{"a": ' + "[" * 100_000, "export.json:1: JSON nested too deeply to be an event"),
}


@pytest.mark.parametrize("case", BAD_EXPORTS)
def test_bad_exports_exit_2_with_a_message(tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str) -> None:
    text, message = BAD_EXPORTS[case]
    path = tmp_path / "export.json"
    path.write_text(text)
    assert main(["goodput", "--events", str(path), "--reference-step-time", "18"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("error: ") and captured.err.count("\n") == 1
    assert message in captured.err


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
    "not an object": (["7"], ":1: an event must be a JSON object"),
    "an array of non-objects": (["[1, 2]"], "events.jsonl entry 1: an event must be a JSON object"),
    "bad time": ([event("yesterday", "job_started")], ":1: 'time' must be an RFC 3339 timestamp"),
    "no time": (['{"event": "job_started", "run": "r"}'], ":1: 'time' must be"),
    "unknown event": (
        [event("2026-11-22T10:00:00+00:00", "job_exploded")],
        ":1: unknown event 'job_exploded'; known: user_scheduled, job_started, checkpoint_loaded",
    ),
    "no step": ([RUN[0], event("2026-11-22T10:30:00+00:00", "checkpoint_saved")], ":2: checkpoint_saved needs 'step'"),
    "negative step": ([event("2026-11-22T10:30:00+00:00", "checkpoint_loaded", -5)], "needs 'step', a non-negative"),
    "fractional step": (
        [event("2026-11-22T10:30:00+00:00", "checkpoint_loaded").replace("}", ', "step": 2.5}')],
        "checkpoint_loaded needs 'step', a non-negative integer; got 2.5",
    ),
    "boolean step": (
        [event("2026-11-22T10:30:00+00:00", "checkpoint_saved").replace("}", ', "step": true}')],
        "needs 'step', a non-negative integer; got True",
    ),
    "fractional attempt": (
        [event("2026-11-22T10:30:00+00:00", "job_started", attempt=1).replace(": 1", ": 1.5")],
        "'attempt' must be a non-negative integer; got 1.5",
    ),
    "no run": (['{"time": "2026-11-22T10:00:00+00:00", "event": "job_started"}'], ":1: 'run' must name the run"),
    # Refused as the event log's contract says, even beside times that have one.
    "a time without a UTC offset": (
        [RUN[0], event("2026-11-22T10:30:00", "job_terminated")],
        ":2: 'time' '2026-11-22T10:30:00' has no UTC offset; an RFC 3339 time needs one, such as "
        "2026-11-22T10:30:00+00:00 or 2026-11-22T10:30:00Z",
    ),
    "only times without an offset": (
        [event("2026-11-22T10:00:00", "job_started"), event("2026-11-22T10:30:00", "job_terminated")],
        ":1: 'time' '2026-11-22T10:00:00' has no UTC offset",
    ),
    "a date without a time": ([event("2026-11-22", "job_started")], ":1: 'time' '2026-11-22' has no UTC offset"),
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
