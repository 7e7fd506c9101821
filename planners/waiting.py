"""Why a run is waiting: the objects Kueue, JobSet and the kubelet keep about a run, read back into
one plain sentence per blocker (tools.waiting reads them through the Kubernetes API).

Kueue 0.19.2 says why a workload waits in its conditions, in words this module reads:
- QuotaReserved False (reason Pending) with the flavor assigner's message, one clause per resource:
  "insufficient unused quota for R in flavor F, Q more needed" (the quota exists, others hold it),
  "insufficient quota for R in flavor F, ... > maximum capacity (X)" (the run can never fit), and
  "topology T doesn't allow to fit ..." (pkg/scheduler/flavorassigner/flavorassigner.go,
  pkg/cache/scheduler/tas_flavor_snapshot.go);
- Preempted True with "Preempted to accommodate a workload (UID: U, ...) due to <reason>"
  (pkg/scheduler/preemption/preemption.go, preemptionMessage);
- Evicted True with its reason (PodsReadyTimeout for waitForPodsReady, a stopped queue, failed
  nodes) and status.requeueState;
- a preemption under way: ". Pending the preemption of N workload(s)" or the reason
  WaitingForPreemptedWorkloads (pkg/scheduler/scheduler.go);
- status.admissionChecks, one state per check (the queued-provisioning check is facts.kueue's);
- on a MultiKueue manager, the MultiKueue check (facts.kueue.MULTIKUEUE_CHECK), status.clusterName
  (the worker that admitted the run) and status.nominatedClusterNames (the workers it was offered
  to); a worker that stopped answering for workerLostTimeout puts the check in Retry with
  "Admitting remote lost", on which Kueue evicts the workload at once: the words then live in the
  Evicted condition (reason AdmissionCheck), the check back at Pending
  (pkg/controller/admissionchecks/multikueue/workload.go, pkg/controller/core/workload_controller.go,
  pkg/workload/evict/evict.go);
- a ClusterQueue's status.flavorsReservation: per flavor and resource, what its workloads hold
  and how much of that is borrowed.

NVIDIA NVSentinel, where the cluster runs it, marks a node it quarantines with its labels and the
failing check's condition, and its preflight checks run as init containers named `preflight-*`
(facts.nvsentinel); the kubelet reports a failed init container in the pod's initContainerStatuses.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import IntEnum
from typing import Any

from facts import nvsentinel
from facts.kubernetes import FABRIC_CHECK_LABEL, GPU_RESOURCE, QUEUE_NAME_LABEL
from facts.kueue import MULTIKUEUE_CHECK, PROVISIONING_CHECK

_UNUSED = re.compile(r"insufficient unused quota for (\S+) in flavor (\S+), (\S+) more needed")
_NEVER = re.compile(r"insufficient quota for (\S+) in flavor (\S+), .*?> maximum capacity \(([^)]*)\)")
_TOPOLOGY = re.compile(r"topology \"([^\"]+)\" (?:doesn't allow to fit|allows to fit only)")
_PREEMPTING = re.compile(r"Pending the preemption of (\d+) workload")
_PREEMPTOR = re.compile(r"UID: ([0-9a-f-]+)")
_REASON = re.compile(r"due to ([^;]+)")
_LOST = "Admitting remote lost"


class Exit(IntEnum):
    """The command's exit codes, for scripts."""

    RUNNING = 0
    WAITING = 3
    FAILED = 4
    NOT_FOUND = 5
    # The server answers, but is not a Kubernetes API server serving JobSets and Kueue's Workloads.
    NOT_A_PLATFORM = 6


@dataclass(frozen=True)
class RunObjects:
    """What the cluster holds about a run (and what stands around it), as the API returns it."""

    run: str
    namespace: str
    # The run's newest JobSet (label nemo-gke/run), its Workload and pods; None/empty where absent.
    jobset: Mapping[str, Any] | None
    workload: Mapping[str, Any] | None
    pods: Sequence[Mapping[str, Any]]
    # Every Workload and ClusterQueue of the cluster: queue position, holders, preemptors.
    workloads: Sequence[Mapping[str, Any]]
    cluster_queues: Sequence[Mapping[str, Any]]
    # The namespace's fabric-check JobSets (a gated run is created only once its check passed).
    fabric_checks: Sequence[Mapping[str, Any]]
    now: datetime
    # The nodes NVSentinel holds quarantined (its cordon label); empty where none, or where the
    # reader may not list nodes.
    quarantined: Sequence[Mapping[str, Any]] = ()


@dataclass(frozen=True)
class Verdict:
    exit: Exit
    sentences: tuple[str, ...] = field(default_factory=tuple)


def _condition(obj: Mapping[str, Any] | None, kind: str, status: str = "True") -> Mapping[str, Any] | None:
    for condition in ((obj or {}).get("status") or {}).get("conditions") or ():
        if condition.get("type") == kind and condition.get("status") == status:
            return dict(condition)
    return None


def _false_condition(obj: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    return _condition(obj, kind, "False")


def _time(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def _minutes(since: str, now: datetime) -> int:
    return max(int((now - _time(since)).total_seconds() // 60), 0)


def _name(obj: Mapping[str, Any]) -> str:
    meta = obj["metadata"]
    return f"{meta.get('namespace')}/{meta['name']}" if meta.get("namespace") else str(meta["name"])


def _queue_of(workload: Mapping[str, Any]) -> str | None:
    admission = (workload.get("status") or {}).get("admission") or {}
    return admission.get("clusterQueue")


def _cluster_queue(objects: RunObjects) -> str | None:
    """The run's ClusterQueue."""
    workload = objects.workload or {"metadata": {"namespace": objects.namespace}}
    return _local_queue_cq(objects, workload)


def _holders(objects: RunObjects, flavor: str, resource: str) -> str:
    """Who holds the flavor's resource: each ClusterQueue's reservation and how much of it is
    borrowed (its status.flavorsReservation)."""
    own = _cluster_queue(objects)
    parts = []
    for cq in objects.cluster_queues:
        for usage in (cq.get("status") or {}).get("flavorsReservation") or ():
            if usage.get("name") != flavor:
                continue
            for entry in usage.get("resources") or ():
                if entry.get("name") != resource or entry.get("total") in (None, "0"):
                    continue
                who = "its own queue" if cq["metadata"]["name"] == own else _queue_name(cq)
                borrowed = entry.get("borrowed", "0")
                extra = f", {borrowed} of them borrowed from the cohort" if borrowed not in ("0", None) else ""
                parts.append(f"{who} holds {entry['total']}{extra}")
    return "; ".join(parts)


def _queue_name(cq: Mapping[str, Any]) -> str:
    """A ClusterQueue in a cohort is a team's (planners.teams)."""
    name = cq["metadata"]["name"]
    return f"team {name}" if (cq.get("spec") or {}).get("cohortName") else f"ClusterQueue {name}"


def _owner(workload: Mapping[str, Any]) -> str:
    """The JobSet (or Job) a Workload belongs to, else the Workload itself."""
    for owner in workload["metadata"].get("ownerReferences") or ():
        return f"{owner.get('kind')} {workload['metadata'].get('namespace')}/{owner.get('name')}"
    return f"Workload {_name(workload)}"


def _unit(resource: str) -> str:
    return "GPUs" if resource == GPU_RESOURCE else resource


def _pending_reasons(objects: RunObjects, workload: Mapping[str, Any]) -> list[str]:
    condition = _false_condition(workload, "QuotaReserved")
    message = str((condition or {}).get("message") or "")
    sentences = []
    unused = _UNUSED.findall(message)
    never = _NEVER.findall(message)
    # One sentence per flavor, on its GPUs where they are short (CPU and memory follow them).
    for clauses, words in ((never, "never"), (unused, "unused")):
        by_flavor: dict[str, tuple[str, str]] = {}
        for resource, flavor, amount in clauses:
            if flavor not in by_flavor or resource == GPU_RESOURCE:
                by_flavor[flavor] = (resource, amount)
        for flavor, (resource, amount) in by_flavor.items():
            if words == "never":
                sentences.append(
                    f"it asks for more {_unit(resource)} of flavor {flavor} than its queue can ever have "
                    f"(at most {amount}, its share and what it may borrow): it will not be admitted as it is"
                )
                continue
            holders = _holders(objects, flavor, resource)
            sentences.append(
                f"no quota of flavor {flavor}: {amount} more {_unit(resource)} needed"
                + (f" ({holders})" if holders else "")
            )
    topology = _TOPOLOGY.search(message)
    if topology:
        nodes = sum(p.get("count", 0) for p in workload.get("spec", {}).get("podSets") or ())
        sentences.append(
            f"no topology domain of {topology.group(1)} fits its {nodes} nodes with its placement rule: it waits "
            "until one has that many free nodes"
        )
    preempting = _PREEMPTING.search(message)
    if preempting or (condition or {}).get("reason") == "WaitingForPreemptedWorkloads":
        count = preempting.group(1) if preempting else "the"
        sentences.append(f"preempting {count} workload(s) to make room: it is admitted once they are gone")
    if message and not sentences:
        sentences.append(f"Kueue has not reserved quota: {message}")
    return sentences


def _queue_position(objects: RunObjects, workload: Mapping[str, Any]) -> str | None:
    queue = _cluster_queue(objects)
    priority = int(workload.get("spec", {}).get("priority") or 0)
    created = str(workload["metadata"].get("creationTimestamp", ""))
    higher = earlier = 0
    for other in objects.workloads:
        if other["metadata"].get("uid") == workload["metadata"].get("uid") or _condition(other, "QuotaReserved"):
            continue
        if _condition(other, "Finished") or other.get("spec", {}).get("active") is False:
            continue
        if _local_queue_cq(objects, other) != queue:
            continue
        other_priority = int(other.get("spec", {}).get("priority") or 0)
        if other_priority > priority:
            higher += 1
        elif other_priority == priority and str(other["metadata"].get("creationTimestamp", "")) < created:
            earlier += 1
    if not higher and not earlier:
        return None
    parts = []
    if higher:
        parts.append(f"{higher} workload{'s' if higher > 1 else ''} of higher priority")
    if earlier:
        parts.append(f"{earlier} of its priority submitted earlier")
    return f"queued behind {' and '.join(parts)} in ClusterQueue {queue}"


def _local_queue_cq(objects: RunObjects, workload: Mapping[str, Any]) -> str | None:
    """A workload's ClusterQueue: from its admission, or the one whose namespace selector takes
    its namespace (each of this platform's queues selects one namespace by name)."""
    queue = _queue_of(workload)
    if queue:
        return queue
    namespace = workload["metadata"].get("namespace")
    for cq in objects.cluster_queues:
        selector = (cq.get("spec", {}).get("namespaceSelector") or {}).get("matchLabels") or {}
        if selector.get("kubernetes.io/metadata.name") == namespace:
            return str(cq["metadata"]["name"])
    return None


def _preempted(objects: RunObjects, workload: Mapping[str, Any]) -> str | None:
    condition = _condition(workload, "Preempted")
    if condition is None:
        return None
    message = str(condition.get("message") or "")
    uid = _PREEMPTOR.search(message)
    reason = _REASON.search(message)
    by = next(
        (_owner(w) for w in objects.workloads if uid and w["metadata"].get("uid") == uid.group(1)),
        "a workload that is gone",
    )
    why = f" ({reason.group(1)})" if reason else ""
    return f"preempted by {by}{why} at {condition.get('lastTransitionTime')}; requeued"


def _evicted(workload: Mapping[str, Any]) -> str | None:
    """An eviction other than a preemption (said by _preempted): waitForPodsReady, a stopped
    queue, an admission check, failed nodes (workload_types.go's Evicted reasons)."""
    condition = _condition(workload, "Evicted")
    if condition is None or condition.get("reason") == "Preempted":
        return None
    state = (workload.get("status") or {}).get("requeueState") or {}
    again = f"; requeued {state['count']} times, next at {state.get('requeueAt')}" if state.get("count") else ""
    if condition.get("reason") == "PodsReadyTimeout":
        return f"evicted because its pods were not all ready within Kueue's waitForPodsReady timeout{again}"
    if _LOST in str(condition.get("message")):
        return (
            "its worker stopped answering for Kueue's workerLostTimeout: MultiKueue dispatches it again to another "
            f"active worker{again}"
        )
    return f"evicted ({condition.get('reason')}): {condition.get('message')}{again}"


def _admission_checks(workload: Mapping[str, Any]) -> list[str]:
    sentences = []
    for check in (workload.get("status") or {}).get("admissionChecks") or ():
        if check.get("state") in ("Ready", None):
            continue
        message = f": {check['message']}" if check.get("message") else ""
        if check.get("name") == PROVISIONING_CHECK:
            sentences.append(
                f"waiting for queued-provisioning capacity (ProvisioningRequest {check['state']}){message}"
            )
        elif check.get("name") == MULTIKUEUE_CHECK:
            # MultiKueue acts once the manager reserved quota; before, the quota sentences say why.
            if _condition(workload, "QuotaReserved"):
                sentences.append(_not_dispatched(workload, check))
        else:
            sentences.append(f"waiting for admission check {check.get('name')} ({check['state']}){message}")
    return sentences


def _not_dispatched(workload: Mapping[str, Any], check: Mapping[str, Any]) -> str:
    status = workload.get("status") or {}
    offered = status.get("nominatedClusterNames") or ()
    if offered:
        return (
            f"offered by MultiKueue to workers {', '.join(offered)}, none of which has admitted it yet "
            "(`python -m tools.waiting` on a worker says why)"
        )
    return f"waiting for MultiKueue to dispatch it ({check.get('state')}): {check.get('message') or 'no worker yet'}"


def _quarantine(node: Mapping[str, Any]) -> str:
    """Why and since when NVSentinel holds the node: its failing checks' conditions, else the
    reason it labelled."""
    labels = node["metadata"].get("labels") or {}
    failing = [
        c
        for c in (node.get("status") or {}).get("conditions") or ()
        if c.get("status") == "True" and str(c.get("reason", "")).endswith("IsNotHealthy")
    ]
    what = "; ".join(f"{c['type']}: {c.get('message', '').strip()}".rstrip(": ") for c in failing)
    since = min((str(c["lastTransitionTime"]) for c in failing if c.get("lastTransitionTime")), default=None)
    return (
        f"quarantined by NVSentinel{f' since {since}' if since else ''} "
        f"({what or labels.get(nvsentinel.CORDON_REASON_LABEL, 'no reason given')})"
    )


def _selects(spec: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    """Whether a pod spec's node selector and required node affinity admit the node, as the
    scheduler reads them (k8s.io/component-helpers/scheduling/corev1/nodeaffinity: the terms are
    ORed, a term's requirements ANDed, an empty term matches nothing)."""
    labels = node["metadata"].get("labels") or {}
    if any(labels.get(key) != value for key, value in (spec.get("nodeSelector") or {}).items()):
        return False
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    terms = required.get("nodeSelectorTerms")
    if not terms:
        return True

    def holds(requirement: Mapping[str, Any], values: Mapping[str, str]) -> bool:
        value, wanted = values.get(requirement.get("key", "")), list(requirement.get("values") or ())
        match requirement.get("operator"):
            case "In":
                return value in wanted
            case "NotIn":
                return value not in wanted
            case "Exists":
                return value is not None
            case "DoesNotExist":
                return value is None
            case "Gt" | "Lt" as operator:
                try:
                    number, bound = int(value or ""), int(wanted[0])
                except (ValueError, IndexError):
                    return False
                return number > bound if operator == "Gt" else number < bound
        return False

    fields = {"metadata.name": node["metadata"]["name"]}
    return any(
        (term.get("matchExpressions") or term.get("matchFields"))
        and all(holds(r, labels) for r in term.get("matchExpressions") or ())
        and all(holds(r, fields) for r in term.get("matchFields") or ())
        for term in terms
    )


def _live(pod: Mapping[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Pending", "Running") and not pod["metadata"].get(
        "deletionTimestamp"
    )


def _quarantine_sentences(objects: RunObjects, waiting: bool) -> list[str]:
    """A live pod of the run on a quarantined node; and, while the run waits for nodes, the
    quarantined nodes its pods could be placed on. A node NVSentinel marks but no longer cordons
    holds nothing."""
    held = {n["metadata"]["name"]: n for n in objects.quarantined if (n.get("spec") or {}).get("unschedulable")}
    sentences = [
        f"pod {pod['metadata']['name']} runs on node {node}, {_quarantine(held[node])}: the run restarts without "
        "it once NVSentinel's drainer evicts the pod (in its Immediate mode: docs/recovery.md)"
        for pod in objects.pods
        if _live(pod) and (node := (pod.get("spec") or {}).get("nodeName")) in held
    ]
    if waiting:
        specs = [
            (p.get("template") or {}).get("spec") or {}
            for p in ((objects.workload or {}).get("spec") or {}).get("podSets") or ()
        ] or [{}]
        placed = {(p.get("spec") or {}).get("nodeName") for p in objects.pods if _live(p)}
        for name, node in sorted(held.items()):
            if name not in placed and any(_selects(spec, node) for spec in specs):
                sentences.append(
                    f"node {name} is {_quarantine(node)}: no pod of the run is placed there until NVSentinel "
                    "releases it"
                )
    return sentences


def _init_failures(pod: Mapping[str, Any]) -> list[str]:
    """The pod's init containers that exited with an error. A native sidecar (restartPolicy
    Always) counts while the pod lives, by its last exit before a restart; one stopped with its
    ended pod does not."""
    found = []
    spec = pod.get("spec") or {}
    sidecars = {c.get("name") for c in spec.get("initContainers") or () if c.get("restartPolicy") == "Always"}
    ended_pod = (pod.get("status") or {}).get("phase") in ("Failed", "Succeeded")
    where = f" on node {spec['nodeName']}" if spec.get("nodeName") else ""
    for status in (pod.get("status") or {}).get("initContainerStatuses") or ():
        if status.get("name") in sidecars:
            if ended_pod:
                continue
            ended = (status.get("lastState") or {}).get("terminated")
        else:
            ended = (status.get("state") or {}).get("terminated")
        if not ended or not ended.get("exitCode"):
            continue
        name, code = status.get("name", "?"), ended["exitCode"]
        detail = f": {ended['message'].strip()}" if ended.get("message") else ""
        if str(name).startswith(nvsentinel.PREFLIGHT_CHECK_PREFIX):
            found.append(
                f"pod {pod['metadata']['name']}: NVSentinel's preflight check {name} failed{where} "
                f"(exit code {code}){detail}; NVSentinel cordons the node, and the JobSet restarts the run without "
                "it (a restart of its budget)"
            )
        else:
            found.append(
                f"pod {pod['metadata']['name']}: init container {name} failed{where} (exit code {code}){detail}"
            )
    return found


def _pod_sentences(objects: RunObjects, wanted: int) -> list[str]:
    failed_init = {p["metadata"]["name"]: _init_failures(p) for p in objects.pods}
    unscheduled = [p for p in objects.pods if _false_condition(p, "PodScheduled")]
    creating: dict[str, list[Mapping[str, Any]]] = {}
    for pod in objects.pods:
        if _condition(pod, "Ready") or pod in unscheduled or failed_init[pod["metadata"]["name"]]:
            continue
        statuses = (pod.get("status") or {}).get("containerStatuses") or ()
        reasons = [s.get("state", {}).get("waiting", {}).get("reason") for s in statuses]
        reason = next((r for r in reasons if r), "ContainerCreating")
        creating.setdefault(reason, []).append(pod)
    sentences = [sentence for found in failed_init.values() for sentence in found]
    if unscheduled:
        why = _false_condition(unscheduled[0], "PodScheduled") or {}
        capacity = "scale-up" in str(why.get("message", "")) or why.get("reason") == "Unschedulable"
        hint = " (waiting for nodes: flex-start or autoscaling capacity)" if capacity else ""
        sentences.append(
            f"{len(unscheduled)} of {wanted} pods not scheduled{hint}: {why.get('message', '')}".rstrip(": ")
        )
    for reason, pods in sorted(creating.items()):
        scheduled = [
            c.get("lastTransitionTime")
            for p in pods
            for c in (p.get("status") or {}).get("conditions") or ()
            if c.get("type") == "PodScheduled" and c.get("lastTransitionTime")
        ]
        since = f" for {_minutes(min(scheduled), objects.now)} minutes" if scheduled else ""
        what = {
            "ContainerCreating": "pulling the image or mounting volumes",
            "PodInitializing": "running init containers",
            "ErrImagePull": "failing to pull the image",
            "ImagePullBackOff": "failing to pull the image",
        }.get(reason, reason)
        sentences.append(f"pods not ready: {len(pods)} of {wanted} {what}{since}")
    missing = wanted - len(objects.pods)
    if missing > 0:
        sentences.append(f"{missing} of {wanted} pods not created yet by the JobSet controller")
    return sentences


def diagnose(objects: RunObjects) -> Verdict:
    """One sentence per blocker, and the exit code for scripts."""
    if objects.jobset is None:
        checks = [c for c in objects.fabric_checks if not _condition(c, "Completed")]
        if checks:
            names = ", ".join(str(c["metadata"].get("labels", {}).get(FABRIC_CHECK_LABEL, _name(c))) for c in checks)
            return Verdict(
                Exit.WAITING,
                (f"no JobSet of run {objects.run} in {objects.namespace} yet: waiting for the fabric check {names}, "
                 "after which `pulumi up` creates the run",),
            )  # fmt: skip
        return Verdict(Exit.NOT_FOUND, (f"no JobSet of run {objects.run} in namespace {objects.namespace}",))
    if _condition(objects.jobset, "Completed"):
        return Verdict(Exit.RUNNING, ("finished: the run completed",))
    failed = _condition(objects.jobset, "Failed")
    if failed:
        return Verdict(Exit.FAILED, (f"failed: {failed.get('message') or failed.get('reason')}",))
    workload = objects.workload
    if workload is None:
        queue = objects.jobset["metadata"].get("labels", {}).get(QUEUE_NAME_LABEL)
        return Verdict(
            Exit.WAITING,
            (f"Kueue has no Workload for JobSet {_name(objects.jobset)}: is LocalQueue {queue} in "
             f"{objects.namespace}, and is Kueue running (kubectl -n kueue-system get pods)?",),
        )  # fmt: skip
    if workload.get("spec", {}).get("active") is False:
        evicted = _condition(workload, "Evicted") or {}
        return Verdict(Exit.FAILED, (f"deactivated by Kueue: {evicted.get('message', 'spec.active is false')}",))
    wanted = sum(p.get("count", 0) for p in workload.get("spec", {}).get("podSets") or ())
    worker = (workload.get("status") or {}).get("clusterName")
    if _condition(workload, "Admitted") and worker:
        return Verdict(
            Exit.RUNNING,
            (f"dispatched by MultiKueue to worker {worker}, which admitted it: its pods run there "
             f"(`python -m tools.waiting {objects.run} -n {objects.namespace}` on that cluster says how they are)",),
        )  # fmt: skip
    if _condition(workload, "Admitted"):
        sentences = _pod_sentences(objects, wanted)
        held = _quarantine_sentences(objects, waiting=bool(sentences))
        if not sentences:
            running = f"running: admitted in ClusterQueue {_queue_of(workload)}, {wanted} pods ready"
            return Verdict(Exit.RUNNING, (running, *held))
        return Verdict(Exit.WAITING, (*sentences, *held))
    sentences = [s for s in (_preempted(objects, workload), _evicted(workload), *_admission_checks(workload)) if s]
    sentences += _pending_reasons(objects, workload)
    sentences += _quarantine_sentences(objects, waiting=True)
    position = _queue_position(objects, workload)
    if position:
        sentences.append(position)
    if not sentences:
        sentences.append("pending: Kueue has not considered it yet")
    never = any("will not be admitted" in s for s in sentences)
    return Verdict(Exit.FAILED if never else Exit.WAITING, tuple(sentences))
