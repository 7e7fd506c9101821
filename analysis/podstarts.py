"""What a run's pods did before the launcher started, from the Kubernetes events of their starts
(`python -m analysis goodput --pod-events FILE`): when Kueue admitted the run, when each pod was
bound to a node, how long its images took to pull, how long NVSentinel's preflight checks ran.

The events are those `kubectl get events -n NAMESPACE -o json` lists (an object with `items`), or
a Cloud Logging export of them (GKE writes each event as a LogEntry whose `jsonPayload` is the
event, logName `.../logs/events`; JSON lines or a JSON array); events of objects other than pods
and Kueue's Workloads are skipped. What each one says:

    Admitted   Kueue admitted the run's Workload ("Admitted by ClusterQueue ...", kueue
               pkg/scheduler/scheduler.go, or pkg/controller/core/workload_controller.go once
               admission checks pass), on its first admission and on each after an eviction;
               Kueue 0.19 records it with the events.k8s.io recorder, one event per admission
    Scheduled  the scheduler bound the pod to a node (default-scheduler)
    Pulled     the kubelet pulled a container's image: "Successfully pulled image "X" in 1.5s
               (2.1s including waiting)", the second figure counting the wait for another pull
               (kubernetes pkg/kubelet/images/image_manager.go, EnsureImageExists); "already
               present on machine" took none
    Started    the kubelet started a container; `involvedObject.fieldPath` names it,
               `spec.initContainers{NAME}` or `spec.containers{NAME}`

An init container runs alone until it exits, and the kubelet writes no event when it does: a
preflight check (an init container named `preflight-…`, facts.nvsentinel) ran from its Started
to the first event of a container that came after it. A check after which no container came
failed, and the pod with it (or the pod was deleted during it, in a restart of the run): it is
open, and ran until its node's next pod was bound (analysis.badput). The kubelet writes at most 25
events of a pod at once (its spam filter), more than a run's pod makes.

The kubelet stamps its events to the second (`firstTimestamp`); an event with `eventTime` (the
events.k8s.io API) is read to the microsecond.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from analysis.errors import AnalysisError
from analysis.goodput import json_records
from analysis.streams import Lines
from facts.kubernetes import run_node_pod_pattern, run_workload_pattern
from facts.nvsentinel import PREFLIGHT_CHECK_PREFIX

_WHAT = "Kubernetes events (`kubectl get events -o json`, or a Cloud Logging export of them)"
# Where the kubelet's event names the container: pkg/kubelet/container/ref.go GenerateContainerRef.
_FIELD_PATH = re.compile(r"spec\.(initContainers|containers|ephemeralContainers)\{([^}]+)\}")
# The pull's duration including the wait for other pulls, else the pull alone (Go's
# time.Duration.String: "1h2m3.5s", "850ms", "0s").
_PULLED = re.compile(r" in (?P<pull>[0-9.hmsµnu]+)(?: \((?P<total>[0-9.hmsµnu]+) including waiting\))?")
_DURATION_PART = re.compile(r"([0-9.]+)(h|ms|m|s|µs|us|ns)")
_UNIT_SECONDS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "µs": 1e-6, "us": 1e-6, "ns": 1e-9}


_KINDS = ("Pod", "Workload")


@dataclass(frozen=True)
class KubeEvent:
    """An event of a pod, or of a Workload (`kind`), and the object's name."""

    time: datetime
    name: str
    reason: str
    message: str
    # The container the event is about (None: the pod's own, such as Scheduled).
    container: str | None
    init_container: bool
    kind: str = "Pod"
    # The event object's own uid, where the file has it.
    uid: str | None = None


@dataclass(frozen=True)
class PodStart:
    """One pod's start, as its events tell it."""

    pod: str
    scheduled: datetime | None
    image_pull_s: float
    preflight_s: float
    # The last event of the pod.
    last: datetime
    # The Started of a preflight check with no event after it: it failed, and the pod with it.
    open_preflight: datetime | None = None


def go_duration_seconds(text: str) -> float | None:
    """Seconds of a Go duration as time.Duration prints it; None if `text` is not one."""
    parts = _DURATION_PART.findall(text)
    if not parts or "".join(value + unit for value, unit in parts) != text:
        return None
    try:
        return sum(float(value) * _UNIT_SECONDS[unit] for value, unit in parts)
    except ValueError:
        return None


def read_pod_events(path: Path) -> list[KubeEvent]:
    """The pod and Workload events of the file, in time order (ties in file order: `kubectl get
    events` lists an object's events as they were made, and so does `gcloud logging read
    --order=asc`), each event once (a Cloud Logging export repeats an event the recorder
    counted again, under its uid); AnalysisError naming the
    entry for one without a time, and the file when it holds no pod event."""
    with Lines(path, _WHAT, lambda line: '"reason"' in line or '"items"' in line, strict_utf8=True) as lines:
        numbered = list(lines)
    found: list[KubeEvent] = []
    seen: set[str] = set()
    for number, entry in _entries(path, numbered):
        event = _kube_event(path, number, entry)
        if event is None or event.uid in seen:
            continue
        if event.uid is not None:
            seen.add(event.uid)
        found.append(event)
    if not any(e.kind == "Pod" for e in found):
        raise AnalysisError(f"{path} holds no event of a pod: not {_WHAT}")
    return sorted(found, key=lambda e: e.time)


def _entries(path: Path, numbered: list[tuple[int, str]]) -> Iterator[tuple[int, object]]:
    text = "\n".join(line for _, line in numbered).lstrip()
    if text.startswith("{"):
        try:
            listed = json.loads(text)
        except json.JSONDecodeError:
            listed = None  # JSON lines
        except RecursionError:
            raise AnalysisError(f"{path}: JSON nested too deeply to be a list of events") from None
        if isinstance(listed, dict):
            items = listed.get("items", [listed])
            if not isinstance(items, list):
                raise AnalysisError(f"{path}: 'items' must be a list of events")
            yield from enumerate(items, start=1)
            return
    for number, record, _unit in json_records(path, numbered):
        yield number, record


def _kube_event(path: Path, number: int, entry: object) -> KubeEvent | None:
    where = f"{path} entry {number}"
    if not isinstance(entry, dict):
        raise AnalysisError(f"{where}: an event must be a JSON object")
    event = entry.get("jsonPayload", entry)
    if not isinstance(event, dict):
        return None
    involved = event.get("involvedObject") or event.get("regarding")
    if (
        not isinstance(involved, dict)
        or involved.get("kind") not in _KINDS
        or not isinstance(involved.get("name"), str)
    ):
        return None
    time = _time(event, entry.get("timestamp") if event is not entry else None)
    if time is None:
        raise AnalysisError(
            f"{where}: an event of {involved['kind'].lower()} {involved['name']} without a time "
            "(eventTime, firstTimestamp or lastTimestamp)"
        )
    field = _FIELD_PATH.fullmatch(str(involved.get("fieldPath") or ""))
    metadata = event.get("metadata")
    uid = metadata.get("uid") if isinstance(metadata, dict) else None
    return KubeEvent(
        time=time,
        name=involved["name"],
        reason=str(event.get("reason") or ""),
        message=str(event.get("message") or event.get("note") or ""),
        container=field.group(2) if field else None,
        init_container=field is not None and field.group(1) == "initContainers",
        kind=involved["kind"],
        uid=uid if isinstance(uid, str) else None,
    )


def _time(event: Mapping[str, Any], fallback: object) -> datetime | None:
    # The first occurrence of an event the recorder counted several times.
    for value in (event.get("eventTime"), event.get("firstTimestamp"), event.get("lastTimestamp"), fallback):
        if isinstance(value, str):
            try:
                parsed = datetime.fromisoformat(value)
            except ValueError:
                continue
            if parsed.tzinfo is not None:
                return parsed
    return None


def pull_seconds(event: KubeEvent) -> float:
    """The time a Pulled event says its pull took, the wait for other pulls included; 0 for an
    image already on the node or a message of another form."""
    found = _PULLED.search(event.message)
    if found is None:
        return 0.0
    seconds = go_duration_seconds(found.group("total") or found.group("pull"))
    return seconds or 0.0


def pod_start(pod: str, events: Iterable[KubeEvent]) -> PodStart:
    mine = [e for e in events if e.name == pod and e.kind == "Pod"]
    if not mine:
        raise ValueError(f"no event of pod {pod}")
    # Each container's first event, by position: the kubelet works through them one after
    # another, and stamps its events to the second, so the order of the list decides a tie.
    first_seen: dict[str, int] = {}
    for index, e in enumerate(mine):
        if e.container is not None:
            first_seen.setdefault(e.container, index)
    preflight, open_preflight = 0.0, None
    for index, e in enumerate(mine):
        if e.reason == "Started" and e.init_container and (e.container or "").startswith(PREFLIGHT_CHECK_PREFIX):
            following = [i for name, i in first_seen.items() if name != e.container and i > index]
            if following:
                preflight += (mine[min(following)].time - e.time).total_seconds()
            else:
                # No container came after the check: it failed, and the pod with it (a sidecar
                # started before it may still write events, such as the kubelet stopping it).
                open_preflight = e.time
    return PodStart(
        pod=pod,
        scheduled=next((e.time for e in mine if e.reason == "Scheduled"), None),
        image_pull_s=sum(pull_seconds(e) for e in mine if e.reason == "Pulled"),
        preflight_s=preflight,
        last=mine[-1].time,
        open_preflight=open_preflight,
    )


def node_pod_starts(events: Iterable[KubeEvent], run: str, node: int = 0) -> list[PodStart]:
    """The starts of every pod that was node `node` of the run, in the order they were bound."""
    events = list(events)
    pattern = run_node_pod_pattern(run, node)
    pods = sorted({e.name for e in events if e.kind == "Pod" and pattern.fullmatch(e.name)})
    starts = [pod_start(p, events) for p in pods]
    return sorted(starts, key=lambda s: (s.scheduled is None, s.scheduled or s.last))


def admissions(events: Iterable[KubeEvent], run: str) -> list[datetime]:
    """When Kueue admitted the run's Workloads, in time order."""
    pattern = run_workload_pattern(run)
    return sorted(
        e.time for e in events if e.kind == "Workload" and e.reason == "Admitted" and pattern.fullmatch(e.name)
    )
