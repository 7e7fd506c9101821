"""analysis.badput and `python -m analysis goodput --log`: the run's badput split by cause, per
attempt, against a run worked by hand."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from analysis.__main__ import main
from analysis.logs import read_log

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
        {"attempt": 0, "waiting_s": None, "to_first_step_s": 100.0, "lost_steps": 10, "lost_s": 100.0}
        | {"waiting_by_cause_s": None, "restore_s": None},
        {"attempt": 1, "waiting_s": 120.0, "to_first_step_s": 60.0, "lost_steps": 0, "lost_s": 0.0}
        | {"waiting_by_cause_s": None, "restore_s": None},
    ]
    assert main(["goodput", "--events", str(events), "--reference-step-time", str(STEP_S), "--log", str(log)]) == 0
    table = capsys.readouterr().out
    assert "badput       400 s" in table and "  lost progress              100 s   25.0%" in table


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


# ---------------------------------------------------------------- the start, split by the checkpoint loads


def _load(started: float, seconds: object, logged: float | None = None) -> str:
    """A launcher's record of a checkpoint load (payload/megatron_bridge_pretrain.py and
    payload/lightning_step_log.py, at on_train_start), logged once training starts: by default
    40 s after the load started."""
    data = {"started": _at(started).timestamp(), "seconds": seconds}
    stamp = _at(started + 40 if logged is None else logged).timestamp()
    record = {"timestamp": str(stamp), "type": "LOG", "step": "CHECKPOINT_LOAD", "data": data}
    return "DLLL " + json.dumps(record)


def _goodput_with_loads(run: tuple[Path, Path], loads: list[str], capsys: pytest.CaptureFixture[str]) -> dict:
    events, log = run
    log.write_text("\n".join([*loads, log.read_text()]))
    argv = ["goodput", "--events", str(events), "--reference-step-time", str(STEP_S), "--log", str(log)]
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)["badput"]


def test_a_restarts_checkpoint_load_is_told_from_the_rest_of_its_start(
    run: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """Attempt 1 (start 520 s, 60 s to its first step) loaded its checkpoint from 530 s for 25 s;
    attempt 0 loaded none: of the 160 s to first steps, 25 s restore and 135 s initialisation."""
    found = _goodput_with_loads(run, [_load(530, 25.0)], capsys)
    assert [a["restore_s"] for a in found["attempts"]] == [0, 25.0]
    assert found["to_first_step_by_cause_s"] == pytest.approx({"checkpoint restore": 25, "initialisation": 135})
    assert found["by_cause_s"]["to first step"] == pytest.approx(160)
    events, log = run
    argv = ["goodput", "--events", str(events), "--reference-step-time", str(STEP_S), "--log", str(log)]
    assert main(argv) == 0
    table = capsys.readouterr().out
    assert "    checkpoint restore        25 s    6.2%" in table
    assert "    initialisation           135 s   33.8%" in table
    assert "1                120                 60           25" in table
    # The step metrics read past the record: it is no step, nor the run's configuration.
    read = read_log(log)
    assert (len(read.records), read.parameters) == (50, None)


def test_a_load_longer_than_its_start_is_held_to_it(run: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    """A load said to take 90 s of a 60 s start (node 0's clock apart from the writer's) counts 60 s."""
    found = _goodput_with_loads(run, [_load(525, 90.0)], capsys)
    assert found["attempts"][1]["restore_s"] == pytest.approx(60)
    assert found["to_first_step_by_cause_s"]["initialisation"] == pytest.approx(100)


def test_a_load_belongs_to_the_attempt_that_logged_it_whatever_its_node_s_clock(
    run: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """The node that timed the load runs 10 s behind node 0: its load "started" at 515 s, before
    attempt 1's job_started (520 s), but was logged at 575 s, during attempt 1."""
    found = _goodput_with_loads(run, [_load(515, 25.0, logged=575)], capsys)
    assert [a["restore_s"] for a in found["attempts"]] == [0, 25.0]


def test_a_load_logged_before_the_run_started_is_named_and_not_counted(
    run: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    events, log = run
    log.write_text("\n".join([_load(-100, 25.0), log.read_text()]))
    argv = ["goodput", "--events", str(events), "--reference-step-time", str(STEP_S), "--log", str(log), "--json"]
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert [a["restore_s"] for a in json.loads(captured.out)["badput"]["attempts"]] == [0, 0]
    assert f"note: {log}: 1 checkpoint load record logged before the run's first job_started" in captured.err


def test_a_log_without_load_records_does_not_split_the_start(
    run: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    events, log = run
    argv = ["goodput", "--events", str(events), "--reference-step-time", str(STEP_S), "--log", str(log)]
    assert main(argv) == 0
    assert "checkpoint restore" not in capsys.readouterr().out


@pytest.mark.parametrize("seconds", ["25", -1.0, None, True])
def test_a_load_record_without_its_seconds_is_refused_by_line(
    run: tuple[Path, Path], capsys: pytest.CaptureFixture[str], seconds: object
) -> None:
    events, log = run
    log.write_text("\n".join([_load(530, seconds), log.read_text()]))
    argv = ["goodput", "--events", str(events), "--reference-step-time", str(STEP_S), "--log", str(log)]
    assert main(argv) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert f"{log}:1: checkpoint load record whose 'seconds' is not a number of seconds" in line


# ---------------------------------------------------------------- the waiting, split by the pods' events


def _pod_event(seconds: float, pod: str, reason: str, message: str = "", container: str | None = None) -> dict:
    """One event as `kubectl get events -o json` lists it: the kubelet's stamped to the second."""
    involved: dict[str, str] = {"kind": "Pod", "name": pod, "namespace": "team-a"}
    if container is not None:
        kind = "initContainers" if container.startswith(("preflight-", "gib")) else "containers"
        involved["fieldPath"] = f"spec.{kind}{{{container}}}"
    stamp = _at(seconds).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"involvedObject": involved, "reason": reason, "message": message, "firstTimestamp": stamp}


NODE_0 = "r-workers-0-0-k2x9q"


def _node_0_start(pod: str, scheduled: float, checks_s: float = 60) -> list[dict]:
    """A node 0 pod bound at `scheduled`: the GPUDirect sidecar's image present, the DCGM check's
    image pulled in 8 s with the wait, the check for `checks_s`, then the training image pulled in
    12.5 s with the wait (in 10.5 s alone), its container started 1 s later."""
    t = scheduled
    pulled = 'Successfully pulled image "{}" in {} ({} including waiting). Image size: 123 bytes.'
    check_end = t + 11 + checks_s
    return [
        _pod_event(t, pod, "Scheduled", f"Successfully assigned team-a/{pod} to gke-a3u-0"),
        _pod_event(t + 1, pod, "Pulled", 'Container image "gib" already present on machine', "gib"),
        _pod_event(t + 2, pod, "Started", "Started container gib", "gib"),
        _pod_event(t + 2, pod, "Pulling", 'Pulling image "dcgm"', "preflight-dcgm-diag"),
        _pod_event(t + 10, pod, "Pulled", pulled.format("dcgm", "5s", "8s"), "preflight-dcgm-diag"),
        _pod_event(t + 11, pod, "Started", "Started container preflight-dcgm-diag", "preflight-dcgm-diag"),
        _pod_event(check_end, pod, "Pulling", 'Pulling image "nemo"', "megatron"),
        _pod_event(check_end + 12, pod, "Pulled", pulled.format("nemo", "10.5s", "12.5s"), "megatron"),
        _pod_event(check_end + 13, pod, "Started", "Started container megatron", "megatron"),
    ]


def _goodput_with_pods(run: tuple[Path, Path], items: list[dict], capsys: pytest.CaptureFixture[str]) -> dict:
    events, log = run
    pods = events.parent / "k8s-events.json"
    pods.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}, indent=2))
    argv = ["goodput", "--events", str(events), "--reference-step-time", str(STEP_S), "--log", str(log)]
    assert main([*argv, "--pod-events", str(pods), "--json"]) == 0
    return json.loads(capsys.readouterr().out)["badput"]


def _admitted(seconds: float, workload: str) -> dict:
    """Kueue's event of an admission (kueue pkg/scheduler/scheduler.go) as Kueue 0.19's
    events.k8s.io recorder writes it and the core API lists it: `eventTime` to the microsecond,
    no `firstTimestamp`."""
    return {
        "involvedObject": {"kind": "Workload", "name": workload, "namespace": "team-a"},
        "reason": "Admitted",
        "message": "Admitted by ClusterQueue nemo, wait time since reservation was 0s",
        "eventTime": _at(seconds).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "firstTimestamp": None,
        "reportingComponent": "kueue-admission",
    }


def test_the_waiting_is_split_by_what_kueue_and_node_0s_pod_did(
    run: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """Attempt 1 waits 120 s (400 → 520). Kueue admits the run again at 425 (25 s in the queue)
    and its node 0 pod is bound at 430 (5 s for nodes); its pulls take 8 + 12.5 s with their
    waits, its DCGM check 60 s (441 → 501); the other 9.5 s are the pod's start. Attempt 0's
    pod and admission (before the run's start), node 1's pod, another run's pod and Workload are
    not counted."""
    items = [
        _admitted(-60, "jobset-r-0a1b2"),
        *_node_0_start("r-workers-0-0-aaaaa", -50),
        _admitted(425, "jobset-r-0a1b2"),
        *_node_0_start(NODE_0, 430),
        *_node_0_start("r-workers-0-1-bbbbb", 420, checks_s=70),
        _admitted(410, "jobset-rx-3c4d5"),
        *_node_0_start("rx-workers-0-0-ccccc", 420),
    ]
    found = _goodput_with_pods(run, items, capsys)
    split = {"queue": 25, "nodes": 5, "image pull": 20.5, "preflight": 60, "pod start": 9.5}
    assert found["attempts"][1]["waiting_by_cause_s"] == pytest.approx(split)
    assert found["attempts"][0]["waiting_by_cause_s"] is None
    assert found["waiting_by_cause_s"] == pytest.approx(split)
    assert found["by_cause_s"]["waiting"] == pytest.approx(120)


def test_a_failed_check_counts_until_node_0s_next_pod_is_bound(
    run: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """Node 0's first pod of attempt 1, bound at 405, fails its DCGM check (started at 416, no
    container after it, its sidecar stopped at 430); the restarted pod is bound at 450 and runs as
    above (check 461 → 481). The run stayed admitted: nodes 5 s (400 → 405); pulls 8 s + (8 +
    12.5) s; checks 34 s (416 → 450, the failure and the restart) + 20 s; pod start the 120 s
    left: 120 − 5 − 28.5 − 54 = 32.5 s."""
    # The check fails: the kubelet stops the pod's GPUDirect sidecar, started before it.
    stopped = _pod_event(430, "r-workers-0-0-fail1", "Killing", "Stopping container gib", "gib")
    failed = [*_node_0_start("r-workers-0-0-fail1", 405)[:6], stopped]
    found = _goodput_with_pods(run, [*failed, *_node_0_start(NODE_0, 450, checks_s=20)], capsys)
    assert found["attempts"][1]["waiting_by_cause_s"] == pytest.approx(
        {"queue": 0, "nodes": 5, "image pull": 28.5, "preflight": 54, "pod start": 32.5}
    )


def test_the_table_shows_the_waitings_parts(run: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    events, log = run
    pods = events.parent / "k8s-events.jsonl"
    # A Cloud Logging export: one LogEntry a line, the event as its jsonPayload.
    entries = [{"jsonPayload": e, "logName": "projects/p/logs/events"} for e in _node_0_start(NODE_0, 430)]
    pods.write_text("\n".join(map(json.dumps, entries)))
    argv = ["goodput", "--events", str(events), "--reference-step-time", str(STEP_S), "--log", str(log)]
    assert main([*argv, "--pod-events", str(pods)]) == 0
    table = capsys.readouterr().out
    assert "  waiting                    120 s   30.0%" in table
    assert "    preflight                 60 s   15.0%" in table
    assert "    pod start                 10 s    2.4%" in table


def test_pod_events_without_the_log_are_refused(run: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    events, _ = run
    argv = ["goodput", "--events", str(events), "--reference-step-time", "10", "--pod-events", str(events)]
    assert main(argv) == 2
    assert "--pod-events: needs --log" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"items": [{"involvedObject": {"kind": "Pod", "name": "p"}, "reason": "Started"}]}', "without a time"),
        ('{"items": {"a": 1}}', "'items' must be a list"),
        ('{"items": [{"involvedObject": {"kind": "Node", "name": "n"}, "reason": "x"}]}', "holds no event of a pod"),
        ("[1, 2]", "an event must be a JSON object"),
        ('{"reason": ', "malformed JSON"),
    ],
)
def test_unusable_pod_events_are_one_line_naming_the_file(
    run: tuple[Path, Path], capsys: pytest.CaptureFixture[str], content: str, message: str
) -> None:
    events, log = run
    pods = events.parent / "bad.json"
    pods.write_text(content)
    argv = ["goodput", "--events", str(events), "--reference-step-time", "10", "--log", str(log)]
    assert main([*argv, "--pod-events", str(pods)]) == 2
    err = capsys.readouterr().err
    assert message in err and str(pods) in err and "Traceback" not in err


@pytest.mark.parametrize("record", ["load", "step"])
def test_a_timestamp_in_milliseconds_is_refused_by_line(
    run: tuple[Path, Path], capsys: pytest.CaptureFixture[str], record: str
) -> None:
    """DLLogger stamps seconds; a millisecond epoch (year 58883) is no time `datetime` can hold."""
    events, log = run
    data = {"seconds": 25.0} if record == "load" else {"train_step_timing in s": STEP_S}
    step = "CHECKPOINT_LOAD" if record == "load" else 0
    line = "DLLL " + json.dumps({"timestamp": "1796030464000", "type": "LOG", "step": step, "data": data})
    log.write_text("\n".join([line, log.read_text()]))
    argv = ["goodput", "--events", str(events), "--reference-step-time", str(STEP_S), "--log", str(log)]
    assert main(argv) == 2
    (message,) = capsys.readouterr().err.strip().splitlines()
    assert message.endswith(f"{log}:1: DLLogger timestamp '1796030464000' is not a time in seconds")
