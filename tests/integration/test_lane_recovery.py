"""Recovery on the lane: a Megatron-Bridge run of the `existing` stack (2 of its pool's 4 kwok nodes;
the other 2 are spares) admitted by the real Kueue, its JobSet run by the real JobSet and Job
controllers, and one of its pods failed in each of these ways:

1. a program error (the launcher's exit code PROGRAM_ERROR_EXIT_CODE): the Job's pod failure policy
   fails the Job, the JobSet's ProgramError rule fails the JobSet, no restart;
2. an infrastructure error (any other exit code): the JobSet restarts, its pods are created again
   and bound, within RECOVERY_SECONDS;
3. NVSentinel quarantines the node of a pod (facts.nvsentinel: the health event's condition, the
   cordon and its labels and annotations, as NVSentinel writes them; NVSentinel itself cannot run
   on the lane): the run keeps the node while its pods run there, and once its drainer evicts the
   pod (and the kubelet stops it), the JobSet restarts and Kueue replaces the node with a spare; a
   run that needs the quarantined node waits, with no pod bound there, until NVSentinel releases it;
4. the node of a pod is deleted (after 3, which needs all four nodes): the pod is failed and
   removed by the pod garbage collector (after its quarantine, PODGC_SECONDS at most), the JobSet
   restarts, and Kueue's topology-aware scheduling replaces the lost node in the run's placement
   with a spare (TASFailedNodeReplacement, beta and on from Kueue 0.14:
   pkg/features/kube_features.go at v0.19.2): the pods are bound again, none on the lost node,
   within half a minute of the collector's;
5. the node of a pod stops answering (its kubelet, here kwok, no longer renews its lease): the node
   lifecycle controller marks it NotReady within its grace period (NODE_GRACE_SECONDS) of the last
   heartbeat and taints it unreachable, but the pods' default toleration of that taint lasts
   DEFAULT_TOLERATION_SECONDS, so for that long nothing restarts the run; it recovers once the node
   is deleted (GKE's auto-repair recreates a NotReady node), as in 4;
6. the pods of an admitted run never become ready (as when an image never pulls): Kueue's
   waitForPodsReady, as the platform configures it at its floor (PODS_READY_TIMEOUT_SECONDS), evicts
   the run at the timeout and requeues it after the backoff's base (REQUEUE_BACKOFF_SECONDS), and
   while it is not ready admits no other run (blockAdmission); the run behind it is admitted once
   it is evicted;
7. NVSentinel's preflight (nvsentinel.preflight, on in this stack: the namespace opted in, the checks
   named on the run's pods; its webhook, which cannot run on the lane, is stood in for by the checks
   appended to the pods as init containers) fails a check on one pod: NVSentinel cordons the node
   on the check's health event, sent before the check exits 1; the pod fails, the JobSet restarts
   once, and Kueue places the run on a spare, not on that node: the run is not failed for good.
`python -m tools.waiting` names the quarantined node in 3, and the failed check in 7.
The pods are failed as the kubelet would report them: phase Failed, each container terminated with
the exit code. Times are control-plane times, from the failure until the run's pods are bound."""

from __future__ import annotations

import dataclasses
import io
import json
import time
from collections.abc import Iterator, Mapping
from contextlib import redirect_stdout
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from analysis.badput import split_waiting
from analysis.podstarts import admissions, node_pod_starts, read_pod_events
from facts import nvsentinel
from facts.kubernetes import JOBSET_API, PROGRAM_ERROR_EXIT_CODE, RUN_LABEL
from harness.runner import run_stack, stack_with
from integration import nodes
from integration.controllers import lane_kueue_config
from integration.controlplane import Api, Lane, has_condition, wait_for
from integration.lane import running
from integration.nodes import NEVER_READY_LABEL, silence
from integration.runs import api_path, apply_objects, clear_runs, jobset_run, placed, resized, stack_objects
from planners.waiting import Exit, diagnose
from tools import waiting

NAMESPACE = "nemo"
NODES = 2
# The target of issue 21: a run back on its nodes within a minute when a spare is at hand.
RECOVERY_SECONDS = 60
# A deleted node's pods are failed by the pod garbage collector once the node has been gone for its
# quarantine, checked every period (kubernetes pkg/controller/podgc/gc_controller.go at v1.36.3:
# quarantineTime 40 s, gcCheckPeriod 20 s): up to a minute before the restart can begin.
PODGC_SECONDS = 40 + 20
# kubernetes pkg/controller/nodelifecycle/config/v1alpha1/defaults.go at v1.36.3: NodeMonitorGracePeriod
# 50 s; the DefaultTolerationSeconds admission plugin gives every pod 300 s on the not-ready and
# unreachable NoExecute taints (plugin/pkg/admission/defaulttolerationseconds).
NODE_GRACE_SECONDS = 50
DEFAULT_TOLERATION_SECONDS = 300
# How long the scenario watches the NotReady node's run before the node is deleted.
WATCH_SECONDS = 60
# kueue.waitForPodsReadyTimeoutSeconds at its floor (config.platform.KueueConfig), and the requeue
# backoff's base (components.scheduling.kueue_configuration: backoffBaseSeconds).
PODS_READY_TIMEOUT_SECONDS = 300
REQUEUE_BACKOFF_SECONDS = 60


@dataclass
class RecoveryLane:
    lane: Lane
    api: Api
    jobset: dict[str, Any]

    def submit(self, name: str) -> dict[str, Any]:
        """The run under another name, once the runs before it are gone and their nodes free."""
        clear_runs(self.lane, self.api, [NAMESPACE])
        jobset = resized(self.jobset, name, NODES)
        self.api.create(api_path(jobset), jobset)
        with self.lane.phase(f"{name} admitted and bound"):
            wait_for(name, lambda: self.lane.alive() and placed(self.api, NAMESPACE, name, NODES), timeout=180)
        return jobset

    def pods(self, name: str) -> list[dict[str, Any]]:
        return jobset_run(self.api, NAMESPACE, name)[1]

    def status(self, name: str) -> dict[str, Any]:
        _, jobset = self.api.request("GET", f"/apis/{JOBSET_API}/namespaces/{NAMESPACE}/jobsets/{name}")
        return dict(jobset.get("status") or {})

    def fail(self, pod: dict[str, Any], exit_code: int) -> None:
        """The pod ends as the kubelet reports a failed one: every container terminated with the code."""
        statuses = [
            {
                "name": c["name"], "image": c["image"], "imageID": "", "ready": False, "restartCount": 0,
                "state": {"terminated": {"exitCode": exit_code, "reason": "Error"}},
            }
            for c in pod["spec"]["containers"]
        ]  # fmt: skip
        path = f"/api/v1/namespaces/{NAMESPACE}/pods/{pod['metadata']['name']}/status"
        code, answer = self.api.request("PATCH", path, {"status": {"phase": "Failed", "containerStatuses": statuses}})
        assert code == 200, answer

    def fail_init(self, pod: dict[str, Any], check: str, exit_code: int) -> dict[str, Any]:
        """The pod ends as the kubelet reports a failed init container under restartPolicy Never:
        the check terminated with the code, the containers after it never started. The pod as the
        API server answers."""
        statuses, failed = [], False
        for container in pod["spec"].get("initContainers", []):
            ended = container["name"] == check
            if ended:
                state: dict[str, Any] = {"terminated": {"exitCode": exit_code, "reason": "Error"}}
            elif failed:
                state = {"waiting": {"reason": "PodInitializing"}}
            else:
                state = {"terminated": {"exitCode": 0, "reason": "Completed"}}
            failed = failed or ended
            statuses.append(
                {"name": container["name"], "image": container["image"], "imageID": "", "ready": False,
                 "restartCount": 0, "state": state}
            )  # fmt: skip
        waiting_ = {"waiting": {"reason": "PodInitializing"}}
        containers = [
            {
                "name": c["name"],
                "image": c["image"],
                "imageID": "",
                "ready": False,
                "restartCount": 0,
                "state": waiting_,
            }
            for c in pod["spec"]["containers"]
        ]
        path = f"/api/v1/namespaces/{NAMESPACE}/pods/{pod['metadata']['name']}/status"
        status = {"phase": "Failed", "initContainerStatuses": statuses, "containerStatuses": containers}
        code, answer = self.api.request("PATCH", path, {"status": status})
        assert code == 200, answer.get("message")
        return dict(answer)

    @property
    def run(self) -> str:
        """The stack's run, whose label every copy of its JobSet carries: tools.waiting reads the
        newest."""
        return str(self.jobset["metadata"]["labels"][RUN_LABEL])

    def why(self) -> tuple[int, str]:
        """What `python -m tools.waiting` says of the run (also printed), and its exit code."""
        out = io.StringIO()
        kubeconfig = ["--kubeconfig", str(self.lane.workdir / "admin.kubeconfig"), "--context", "lane"]
        with redirect_stdout(out):
            code = waiting.main([self.run, "-n", NAMESPACE, *kubeconfig])
        print(out.getvalue(), end="")
        return code, out.getvalue()

    def delete_node(self, name: str, node: str, before: set[str]) -> tuple[float, list[str]]:
        """Delete `node`; the seconds until the run's pods are new ones, all bound, and their nodes."""
        deleted = time.monotonic()
        code, answer = self.api.request("DELETE", f"/api/v1/nodes/{node}")
        assert code == 200, answer
        wait_for("the run bound again", lambda: self.rebound(name, before), timeout=PODGC_SECONDS + 120)
        nodes = [p["spec"]["nodeName"] for p in self.pods(name)]
        assert node not in nodes and len(set(nodes)) == NODES, nodes
        return time.monotonic() - deleted, nodes

    def rebound(self, name: str, before: set[str]) -> bool:
        """The run's pods are new ones (none of `before`), all bound."""
        pods = self.pods(name)
        return (
            len(pods) == NODES
            and not {p["metadata"]["uid"] for p in pods} & before
            and all(p["spec"].get("nodeName") for p in pods)
        )


@pytest.fixture(scope="module")
def lane() -> Iterator[RecoveryLane]:
    values = stack_with("existing")
    run = values["nemo-gke:training"]["runs"][0]
    # The run's restart budget is its default: it checkpoints and resumes (planners.runs.max_restarts).
    bridge = {**run, "name": "bridge", "model": "llama3-8b", "nodes": NODES}
    assert "maxRestarts" not in bridge
    values["nemo-gke:training"] = {"runs": [bridge]}
    values["nemo-gke:kueue"] = {
        **values.get("nemo-gke:kueue", {}),
        "waitForPodsReadyTimeoutSeconds": PODS_READY_TIMEOUT_SECONDS,
    }
    values["nemo-gke:nvsentinel"] = {"preflight": {"enabled": True}}
    stack = run_stack("existing", values=values)
    objects = stack_objects(stack)
    (jobset,) = [m for m in objects if m["kind"] == "JobSet"]
    # Pods stay Running: a run holds its nodes until it fails or is deleted.
    # The Kueue the program would install for these values (waitForPodsReady's timeout included).
    kueue_config = lane_kueue_config(stack, values)
    with running(stack, pods_complete=False, kueue_config=kueue_config) as (lane, started):
        apply_objects(lane, started.api, [m for m in objects if m["kind"] != "JobSet"])
        yield RecoveryLane(lane, started.api, jobset)


def test_a_program_error_fails_the_run_without_a_restart(lane: RecoveryLane) -> None:
    lane.submit("program-error")
    failed = time.monotonic()
    lane.fail(lane.pods("program-error")[0], PROGRAM_ERROR_EXIT_CODE)
    wait_for("the JobSet failed", lambda: has_condition({"status": lane.status("program-error")}, "Failed"), timeout=60)
    took = time.monotonic() - failed
    status = lane.status("program-error")
    print(f"lane: recovery: a program error failed the JobSet in {took:.1f} s, restarts {status.get('restarts', 0)}")
    assert status.get("restarts", 0) == 0
    failure = next(c for c in status["conditions"] if c["type"] == "Failed")
    # Without the rule the JobSet restarts (RestartJobSet), and fails only once maxRestarts is spent.
    assert failure["reason"] == "FailJobSetFailurePolicyAction", failure


def test_an_infrastructure_error_restarts_the_run_within_a_minute(lane: RecoveryLane) -> None:
    lane.submit("infra-error")
    before = {p["metadata"]["uid"] for p in lane.pods("infra-error")}
    failed = time.monotonic()
    lane.fail(lane.pods("infra-error")[0], 1)
    wait_for("the run bound again", lambda: lane.rebound("infra-error", before), timeout=RECOVERY_SECONDS + 60)
    took = time.monotonic() - failed
    status = lane.status("infra-error")
    print(f"lane: recovery: an infrastructure error, the run restarted and bound again in {took:.1f} s")
    assert status.get("restarts") == 1 and not has_condition({"status": status}, "Failed")
    assert took < RECOVERY_SECONDS


# A fatal health event of NVSentinel's GPU health monitor (an XID), its check named as the
# condition type it sets (facts.nvsentinel).
CHECK = "GpuXidError"
# A process ended by SIGTERM, as the shell reports it (128 + 15).
SIGTERM_EXIT_CODE = 143
# How long the quarantined node's run is watched before the drain: with NVSentinel's default
# drain mode (AllowCompletion) nothing moves it.
CORDON_WATCH_SECONDS = 20
# From the drain's eviction until the run is bound again on a spare: its Job fails, the JobSet
# restarts, and Kueue replaces the node once no pod of the run progresses there.
DRAIN_RECOVERY_SECONDS = 30


def test_a_node_nvsentinel_quarantines_is_left_by_the_run_once_drained(lane: RecoveryLane) -> None:
    """NVSentinel cordons the node of a running run: Kueue's topology-aware scheduling keeps the
    node in the run's placement while the run's pods still progress there (pkg/controller/tas/
    node_controller.go, TASReplaceNodeOnNodeTaints and TASReplaceNodeOnPodTermination, beta and on in
    v0.19.2), so only the drain moves the run; once its pod is evicted, the JobSet restarts and
    Kueue replaces the node with a spare."""
    lane.submit("quarantined")
    pods = lane.pods("quarantined")
    before = {p["metadata"]["uid"] for p in pods}
    node, pod = pods[0]["spec"]["nodeName"], pods[0]["metadata"]["name"]
    try:
        nodes.quarantine(lane.api, node, CHECK, "ErrorCode:79 GPU:0 fell off the bus Recommended Action=RESTART_VM;")
        time.sleep(CORDON_WATCH_SECONDS)
        assert lane.status("quarantined").get("restarts", 0) == 0
        assert {p["metadata"]["uid"] for p in lane.pods("quarantined")} == before
        # Running or starting, as kwok reports the pods: either way the node is named.
        code, out = lane.why()
        assert (
            code in (Exit.RUNNING, Exit.WAITING) and f"pod {pod} runs on node {node}, quarantined by NVSentinel" in out
        )
        drained = time.monotonic()
        nodes.evict(lane.api, NAMESPACE, pod, nvsentinel.EVICTION_GRACE_SECONDS)
        # The kubelet stops the evicted pod's containers (kwok does not): the launcher ends on SIGTERM.
        lane.fail(pods[0], SIGTERM_EXIT_CODE)
        wait_for("the run bound again", lambda: lane.rebound("quarantined", before), timeout=RECOVERY_SECONDS + 60)
        took = time.monotonic() - drained
        now = [p["spec"]["nodeName"] for p in lane.pods("quarantined")]
        print(
            f"lane: recovery: node {node} quarantined (cordoned as NVSentinel does), the run untouched "
            f"{CORDON_WATCH_SECONDS} s later; its pod evicted, the run bound again on {now} in {took:.1f} s"
        )
        assert node not in now and len(set(now)) == NODES, now
        assert lane.status("quarantined").get("restarts") == 1
        assert took < DRAIN_RECOVERY_SECONDS, took
    finally:
        nodes.release(lane.api, node, CHECK)


def test_a_quarantined_node_takes_no_run_until_nvsentinel_releases_it(lane: RecoveryLane) -> None:
    """A run that needs every node of the pool waits while one is quarantined, and none of its
    pods is bound there; once NVSentinel releases the node, the run is admitted and bound."""
    clear_runs(lane.lane, lane.api, [NAMESPACE])
    pool = [n["metadata"]["name"] for n in lane.api.request("GET", "/api/v1/nodes")[1]["items"]]
    gpu_nodes = [n for n in pool if not n.startswith("system")]
    node = gpu_nodes[0]
    whole = resized(lane.jobset, "whole-pool", len(gpu_nodes))
    try:
        nodes.quarantine(
            lane.api, node, CHECK, "ErrorCode:48 GPU:3 double-bit ECC error Recommended Action=RESTART_VM;"
        )
        lane.api.create(api_path(whole), whole)
        time.sleep(CORDON_WATCH_SECONDS)
        assert not placed(lane.api, NAMESPACE, "whole-pool", len(gpu_nodes))
        assert node not in [p["spec"].get("nodeName") for p in lane.pods("whole-pool")]
        code, out = lane.why()
        assert code == 3 and f"node {node} is quarantined by NVSentinel" in out, out
        released = time.monotonic()
    finally:
        nodes.release(lane.api, node, CHECK)
    wait_for("the run bound", lambda: placed(lane.api, NAMESPACE, "whole-pool", len(gpu_nodes)), timeout=120)
    took = time.monotonic() - released
    print(
        f"lane: recovery: a {len(gpu_nodes)}-node run waited while {node} was quarantined, none of its pods there; "
        f"bound on every node {took:.1f} s after NVSentinel released it"
    )
    assert node in [p["spec"]["nodeName"] for p in lane.pods("whole-pool")]


# What the stand-in's health event says; the condition is named after the check (NVSentinel's
# documents read do not name the check its preflight events carry).
PREFLIGHT_FAILURE = "Diagnostic test failed: memory, GPU 3"


def with_preflight(jobset: Mapping[str, Any], name: str) -> dict[str, Any]:
    """The run as NVSentinel's preflight webhook makes its pods: each check the pods name appended as
    an init container (docs/configuration/preflight.md@231a207e, "Init container placement")."""
    run = resized(jobset, name, NODES)
    template = run["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    # The pods stay in their init containers, as while the checks run (kwok's pod-ready stage
    # passes them by).
    template["metadata"].setdefault("labels", {})[NEVER_READY_LABEL] = "true"
    checks = template["metadata"]["annotations"][nvsentinel.PREFLIGHT_CHECKS_ANNOTATION].split(",")
    template["spec"]["initContainers"] = [
        *template["spec"].get("initContainers", []),
        *({"name": c, "image": f"ghcr.io/nvidia/nvsentinel/{c}:lane"} for c in checks),
    ]
    return run


def test_a_failed_preflight_check_restarts_the_run_off_its_node(lane: RecoveryLane) -> None:
    clear_runs(lane.lane, lane.api, [NAMESPACE])
    _, namespace = lane.api.request("GET", f"/api/v1/namespaces/{NAMESPACE}")
    assert namespace["metadata"]["labels"][nvsentinel.PREFLIGHT_NAMESPACE_LABEL] == nvsentinel.PREFLIGHT_ENABLED
    run = with_preflight(lane.jobset, "preflight")
    lane.api.create(api_path(run), run)
    wait_for("the run", lambda: lane.lane.alive() and placed(lane.api, NAMESPACE, "preflight", NODES), timeout=180)
    pods = lane.pods("preflight")
    before = {p["metadata"]["uid"] for p in pods}
    pod, node = pods[0], pods[0]["spec"]["nodeName"]
    assert pod["metadata"]["annotations"][nvsentinel.PREFLIGHT_CHECKS_ANNOTATION] == ",".join(
        nvsentinel.PREFLIGHT_CHECKS
    )
    objects = waiting.read_run(lambda path: lane.api.request("GET", path)[1], lane.run, NAMESPACE, datetime.now(UTC))
    try:
        nodes.quarantine(lane.api, node, nvsentinel.PREFLIGHT_DCGM_DIAG, PREFLIGHT_FAILURE)
        failed, failed_at = time.monotonic(), datetime.now(UTC)
        reported = lane.fail_init(pod, nvsentinel.PREFLIGHT_DCGM_DIAG, nvsentinel.PREFLIGHT_CHECK_FAILED)
        # What `tools.waiting` makes of the failed pod, as the API server answered it.
        sentences = diagnose(dataclasses.replace(objects, pods=[reported, *pods[1:]])).sentences
        wait_for("the run bound again", lambda: lane.rebound("preflight", before), timeout=RECOVERY_SECONDS + 60)
        took = time.monotonic() - failed
        now = [p["spec"]["nodeName"] for p in lane.pods("preflight")]
        status = lane.status("preflight")
        print(
            f"lane: recovery: preflight-dcgm-diag failed on {node} (quarantined as NVSentinel does), the run bound "
            f"again on {now} in {took:.1f} s, restarts {status.get('restarts')}"
        )
        assert node not in now and len(set(now)) == NODES, now
        assert status.get("restarts") == 1 and not has_condition({"status": status}, "Failed"), status
        assert took < DRAIN_RECOVERY_SECONDS, took
        assert any(
            f"NVSentinel's preflight check preflight-dcgm-diag failed on node {node} (exit code 1)" in s
            for s in sentences
        ), sentences
        _the_schedulers_events_show_node_0_bound_twice(lane, failed_at)
    finally:
        nodes.release(lane.api, node, nvsentinel.PREFLIGHT_DCGM_DIAG)


def _the_schedulers_events_show_node_0_bound_twice(lane: RecoveryLane, failed_at: datetime) -> None:
    """`analysis goodput --pod-events` reads the namespace's events as the API server lists them
    (the scheduler's are events.k8s.io events: `eventTime`, no `firstTimestamp`): Kueue admitted
    the run once, before the failure (a JobSet restart keeps the admission); node 0 of the run was
    bound before the failure and again after it; the wait from the failure to the second binding
    is all "nodes" (kwok's pods pull nothing and run no check, and write no event of either)."""
    _, listed = lane.api.request("GET", f"/api/v1/namespaces/{NAMESPACE}/events")
    path = lane.lane.workdir / "preflight-events.json"
    path.write_text(json.dumps(listed))
    events = read_pod_events(path)
    starts, admitted = node_pod_starts(events, "preflight"), admissions(events, "preflight")
    bound = [s.scheduled for s in starts if s.scheduled is not None]
    assert len(bound) == 2 and bound[0] < failed_at < bound[1], starts
    assert len(admitted) == 1 and admitted[0] < failed_at, admitted
    split = split_waiting(failed_at, bound[1] + timedelta(seconds=1), starts, admitted)
    assert split is not None and split["queue"] == 0, split
    assert split["nodes"] == pytest.approx((bound[1] - failed_at).total_seconds())
    print(f"lane: recovery: by the events, node 0 bound again {split['nodes']:.1f} s after the failure")


def test_a_lost_node_is_replaced_by_a_spare_and_the_run_bound_again(lane: RecoveryLane) -> None:
    lane.submit("node-lost")
    pods = lane.pods("node-lost")
    before = {p["metadata"]["uid"] for p in pods}
    lost = pods[0]["spec"]["nodeName"]
    took, nodes = lane.delete_node("node-lost", lost, before)
    print(f"lane: recovery: node {lost} deleted, the run bound again on {nodes} in {took:.1f} s")
    assert took < PODGC_SECONDS + RECOVERY_SECONDS / 2, took


def test_a_node_that_stops_answering_holds_the_run_until_it_is_deleted(lane: RecoveryLane) -> None:
    lane.submit("node-silent")
    pods = lane.pods("node-silent")
    before = {p["metadata"]["uid"] for p in pods}
    silent = pods[0]["spec"]["nodeName"]
    started = time.monotonic()
    silence(lane.api, silent)
    wait_for(
        "the node NotReady",
        lambda: not has_condition(lane.api.request("GET", f"/api/v1/nodes/{silent}")[1], "Ready"),
        timeout=NODE_GRACE_SECONDS + 60,
    )
    not_ready = time.monotonic() - started
    (toleration,) = [
        t for t in lane.pods("node-silent")[0]["spec"]["tolerations"] if t["key"] == "node.kubernetes.io/unreachable"
    ]
    assert toleration["tolerationSeconds"] == DEFAULT_TOLERATION_SECONDS
    time.sleep(WATCH_SECONDS)
    status = lane.status("node-silent")
    held = time.monotonic() - started
    assert status.get("restarts", 0) == 0 and {p["metadata"]["uid"] for p in lane.pods("node-silent")} == before
    took, nodes = lane.delete_node("node-silent", silent, before)
    print(
        f"lane: recovery: node {silent} silent, NotReady after {not_ready:.1f} s, the run untouched {held:.1f} s "
        f"later; deleted, the run bound again on {nodes} in {took:.1f} s"
    )
    assert took < PODGC_SECONDS + RECOVERY_SECONDS / 2, took


def workload_of(lane: RecoveryLane, name: str) -> dict[str, Any]:
    workload, _ = jobset_run(lane.api, NAMESPACE, name)
    assert workload is not None, name
    return workload


def condition(workload: Mapping[str, Any], kind: str) -> dict[str, Any] | None:
    return next((c for c in workload.get("status", {}).get("conditions", []) if c["type"] == kind), None)


def test_pods_that_never_become_ready_are_evicted_and_requeued_with_backoff(lane: RecoveryLane) -> None:
    clear_runs(lane.lane, lane.api, [NAMESPACE])
    stuck = resized(lane.jobset, "never-ready", NODES)
    template = stuck["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    template["metadata"].setdefault("labels", {})[NEVER_READY_LABEL] = "true"
    lane.api.create(api_path(stuck), stuck)
    wait_for("never-ready admitted", lambda: placed(lane.api, NAMESPACE, "never-ready", NODES), timeout=180)
    # Read now: the eviction sets Admitted to False, with a new transition time.
    admission = condition(workload_of(lane, "never-ready"), "Admitted")
    assert admission is not None and admission["status"] == "True", admission
    # The pool has room for a second run of the same size; Kueue holds it while the first is not ready.
    behind = resized(lane.jobset, "behind", NODES)
    lane.api.create(api_path(behind), behind)
    wait_for(
        "never-ready evicted",
        lambda: (c := condition(workload_of(lane, "never-ready"), "Evicted")) is not None and c["status"] == "True",
        timeout=PODS_READY_TIMEOUT_SECONDS + 120,
    )
    workload = workload_of(lane, "never-ready")
    eviction = condition(workload, "Evicted")
    assert eviction is not None
    # Kueue's own times (seconds): the timeout runs from the admission.
    evicted = (at(eviction["lastTransitionTime"]) - at(admission["lastTransitionTime"])).total_seconds()
    requeue = workload["status"].get("requeueState", {})
    waited = time.monotonic()
    wait_for("behind admitted", lambda: placed(lane.api, NAMESPACE, "behind", NODES), timeout=120)
    behind_admission = condition(workload_of(lane, "behind"), "Admitted")
    assert behind_admission is not None
    # blockAdmission: nothing else admitted while the run was not ready, by Kueue's own clock.
    assert at(behind_admission["lastTransitionTime"]) >= at(eviction["lastTransitionTime"]), behind_admission
    print(
        f"lane: recovery: pods never ready, Kueue evicted the run {evicted:.0f} s after admitting it "
        f"({eviction['reason']}), requeue {requeue}; the run held behind it admitted and bound "
        f"{time.monotonic() - waited:.1f} s after the eviction was seen"
    )
    assert eviction["reason"] == "PodsReadyTimeout"
    assert PODS_READY_TIMEOUT_SECONDS <= evicted <= PODS_READY_TIMEOUT_SECONDS + 30, evicted
    assert requeue.get("count") == 1, requeue
    backoff = (at(requeue["requeueAt"]) - at(eviction["lastTransitionTime"])).total_seconds()
    assert abs(backoff - REQUEUE_BACKOFF_SECONDS) <= 2, backoff


def at(timestamp: str) -> datetime:
    return datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
