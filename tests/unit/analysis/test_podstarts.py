"""analysis.podstarts: the kubelet's and the scheduler's events of a run's pods, read as their
sources write them."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from analysis.podstarts import KubeEvent, go_duration_seconds, pod_start, pull_seconds, read_pod_events
from facts.kubernetes import run_node_pod_pattern, run_workload_pattern


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("1m2.345s", 62.345), ("850ms", 0.85), ("1h2m3s", 3723), ("0s", 0), ("1.5µs", 1.5e-6), ("2.5s", 2.5)],
)
def test_go_durations_as_time_duration_prints_them(text: str, seconds: float) -> None:
    assert go_duration_seconds(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "12", "1m2", "s", "1x", "1.2.3s"])
def test_what_is_not_a_go_duration(text: str) -> None:
    assert go_duration_seconds(text) is None


def _pulled(message: str) -> KubeEvent:
    return KubeEvent(datetime(2026, 11, 30, tzinfo=UTC), "p", "Pulled", message, "c", False)


@pytest.mark.parametrize(
    ("message", "seconds"),
    [
        # kubernetes pkg/kubelet/images/image_manager.go since 1.30, and before the image size.
        ('Successfully pulled image "nemo:26.02" in 1m2.5s (1m30s including waiting). Image size: 9 bytes.', 90),
        ('Successfully pulled image "nemo:26.02" in 850ms (850ms including waiting)', 0.85),
        # Before the wait was counted.
        ('Successfully pulled image "nemo:26.02" in 2m0s', 120),
        ('Container image "nemo:26.02" already present on machine', 0),
    ],
)
def test_a_pull_takes_what_its_event_says_the_wait_included(message: str, seconds: float) -> None:
    assert pull_seconds(_pulled(message)) == pytest.approx(seconds)


def test_a_checks_end_is_the_next_containers_first_event_not_an_earlier_sidecars() -> None:
    """The sidecar started at the check's second; the training container's pull, 30 s later, ends it."""
    t = datetime(2026, 11, 30, tzinfo=UTC)

    def at(seconds: int, reason: str, container: str | None, init: bool = True) -> KubeEvent:
        return KubeEvent(t.replace(second=seconds), "p", reason, "", container, init)

    events = [
        at(0, "Scheduled", None),
        at(1, "Started", "gib"),
        at(1, "Started", "preflight-dcgm-diag"),
        at(1, "Started", "gib"),
        at(31, "Pulling", "megatron", init=False),
        at(40, "Started", "megatron", init=False),
    ]
    start = pod_start("p", events)
    assert start.preflight_s == 30 and start.open_preflight is None
    failed = pod_start("p", [*events[:4], at(50, "Killing", "gib")])
    assert failed.preflight_s == 0 and failed.open_preflight == t.replace(second=1)


def test_a_container_in_the_checks_second_ends_it_when_the_list_puts_it_after() -> None:
    """The kubelet stamps its events to the second: the training container's first event in the
    check's second, listed after its Started, ends the check (in under a second)."""
    t = datetime(2026, 11, 30, tzinfo=UTC)
    events = [
        KubeEvent(t.replace(second=5), "p", "Started", "", "preflight-dcgm-diag", True),
        KubeEvent(t.replace(second=5), "p", "Pulling", "", "megatron", False),
        KubeEvent(t.replace(second=9), "p", "Started", "", "megatron", False),
    ]
    start = pod_start("p", events)
    assert start.preflight_s == 0 and start.open_preflight is None


@pytest.mark.parametrize(
    ("pod", "node", "matches"),
    [
        ("r-workers-0-0-k2x9q", 0, True),
        ("r-workers-0-0-k2x9", 0, False),
        ("r-r2-workers-0-0-k2x9q", 0, True),
        ("r-0a1b2c-workers-0-0-k2x9q", 0, True),
        ("r-workers-0-10-k2x9q", 1, False),
        ("r-workers-0-1-k2x9q", 1, True),
        ("r-x-workers-0-0-k2x9q", 0, False),
        ("rx-workers-0-0-k2x9q", 0, False),
    ],
)
def test_node_pods_are_told_by_name_whatever_the_runs_revision(pod: str, node: int, matches: bool) -> None:
    assert (run_node_pod_pattern("r", node).fullmatch(pod) is not None) is matches


@pytest.mark.parametrize(
    ("workload", "matches"),
    [("jobset-r-0a1b2", True), ("jobset-r-r3-0a1b2", True), ("jobset-rx-0a1b2", False), ("job-r-0a1b2", False)],
)
def test_a_runs_workloads_are_told_by_name(workload: str, matches: bool) -> None:
    assert (run_workload_pattern("r").fullmatch(workload) is not None) is matches


def test_an_event_exported_twice_under_its_uid_is_read_once(tmp_path: Path) -> None:
    """A Cloud Logging export carries an event again each time the recorder counts it once more;
    its pull is counted once. Events without a uid are each their own."""
    pulled = {
        "metadata": {"uid": "e-1"},
        "involvedObject": {"kind": "Pod", "name": "p", "fieldPath": "spec.containers{megatron}"},
        "reason": "Pulled",
        "message": 'Successfully pulled image "nemo" in 10s (12s including waiting)',
        "firstTimestamp": "2026-11-30T10:00:00Z",
    }
    again = {**pulled, "count": 2, "lastTimestamp": "2026-11-30T10:05:00Z"}
    anonymous = {key: value for key, value in pulled.items() if key != "metadata"}
    path = tmp_path / "events.jsonl"
    path.write_text("\n".join(json.dumps({"jsonPayload": e}) for e in (pulled, again, anonymous, anonymous)))
    events = read_pod_events(path)
    assert len(events) == 3
    assert pod_start("p", events).image_pull_s == pytest.approx(36)
