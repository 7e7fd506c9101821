"""A run's capacity chain (planners.chains) with the real Kueue and JobSet: two a3-ultragpu pools
(the first a reservation's, placed by quota alone, the second flex-start), 2 kwok nodes each. A
run that names only the first pool waits while another run holds it; a run whose chain names both
is admitted at once on the second, and Kueue pins its pods there; once the first pool is free, the
chain's next run lands on it."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest

from facts.kubernetes import NODE_POOL_LABEL
from harness.runner import StackRun, run_stack, stack_with
from integration.controlplane import Api, Lane, has_condition, wait_for
from integration.lane import running
from integration.nodes import revive, silence
from integration.runs import (
    api_path,
    apply_objects,
    clear_runs,
    jobset_run,
    placed,
    resized,
    run_state,
    stack_objects,
)

POOLS = [
    {"name": "reserved", "machineType": "a3-ultragpu-8g", "nodeCount": 2,
     "capacity": {"type": "reservation", "reservation": "r1"}, "placeByTopology": False},
    {"name": "flex", "machineType": "a3-ultragpu-8g", "autoscaling": {"minNodes": 0, "maxNodes": 2},
     "capacity": {"type": "flexStart"}},
]  # fmt: skip
RUNS = [
    {"name": "holder", "model": "llama3-8b", "nodes": 2, "steps": 50},
    {"name": "chained", "model": "llama3-8b", "nodes": 2, "steps": 50, "fallbackPools": ["flex"]},
]
NAMESPACE = "nemo"
ADMIT_SECONDS = 60


@dataclass
class ChainLane:
    run: StackRun
    lane: Lane
    api: Api
    jobsets: dict[str, dict[str, Any]]

    def submit(self, jobset: dict[str, Any]) -> None:
        self.api.create(api_path(jobset), jobset)

    def pools_of(self, name: str, namespace: str = NAMESPACE) -> set[str]:
        """The node pools the JobSet's pods are bound to."""
        _, pods = jobset_run(self.api, namespace, name)
        pools = set()
        for pod in pods:
            _, node = self.api.request("GET", f"/api/v1/nodes/{pod['spec']['nodeName']}")
            pools.add(node["metadata"]["labels"][NODE_POOL_LABEL])
        return pools

    def admitted(self, name: str) -> bool:
        workload, _ = jobset_run(self.api, NAMESPACE, name)
        return workload is not None and has_condition(workload, "Admitted")


@pytest.fixture(scope="module")
def lane() -> Iterator[ChainLane]:
    run = run_stack("dev", values=stack_with("dev", zone="us-central1-b", gpuPools=POOLS, training={"runs": RUNS}))
    objects = stack_objects(run)
    jobsets = {m["metadata"]["name"]: m for m in objects if m["kind"] == "JobSet"}
    with running(run, pods_complete=False) as (lane, started):
        apply_objects(lane, started.api, [m for m in objects if m["kind"] != "JobSet"])
        yield ChainLane(run, lane, started.api, jobsets)


def test_a_chained_run_is_admitted_on_the_next_pool_while_a_single_pool_run_waits(lane: ChainLane) -> None:
    clear_runs(lane.lane, lane.api, [NAMESPACE])
    holder, chained = lane.jobsets["holder"], lane.jobsets["chained"]
    lane.submit(holder)
    wait_for("the holder", lambda: placed(lane.api, NAMESPACE, "holder", 2), timeout=180)
    assert lane.pools_of("holder") == {"reserved"}
    # The single-pool behaviour: the same run without a chain waits for the held pool.
    lane.submit(resized(holder, "single", 2))
    with lane.lane.phase("the chained run admitted on the second pool"):
        lane.submit(chained)
        wait_for("the chained run", lambda: placed(lane.api, NAMESPACE, "chained", 2), timeout=ADMIT_SECONDS)
    assert lane.pools_of("chained") == {"flex"}
    wait_for("the single-pool run's workload", lambda: jobset_run(lane.api, NAMESPACE, "single")[0] is not None)
    assert not lane.admitted("single")
    print("lane: chains: the chained run admitted on flex while a single-pool run waits for reserved")


def test_the_chain_s_first_pool_is_taken_when_it_has_room(lane: ChainLane) -> None:
    clear_runs(lane.lane, lane.api, [NAMESPACE])
    lane.submit(resized(lane.jobsets["chained"], "chained-again", 2))
    wait_for("the chained run", lambda: placed(lane.api, NAMESPACE, "chained-again", 2), timeout=ADMIT_SECONDS)
    assert lane.pools_of("chained-again") == {"reserved"}


TEAM_POOLS = [
    {"name": "a3-ultra", "machineType": "a3-ultragpu-8g", "nodeCount": 2,
     "capacity": {"type": "reservation", "reservation": "r1"}},
    {"name": "spot", "machineType": "a3-ultragpu-8g", "nodeCount": 2, "capacity": {"type": "spot"}},
]  # fmt: skip
TEAMS = [
    {"name": "pretraining", "quota": [{"pool": "a3-ultra", "nodes": 1}, {"pool": "spot", "nodes": 2}]},
    {"name": "alignment", "quota": [{"pool": "a3-ultra", "nodes": 1}]},
]
TEAM_RUNS = [
    {"name": "holder", "team": "alignment", "model": "llama3-8b", "nodes": 2, "steps": 50},
    {"name": "chained", "team": "pretraining", "model": "llama3-8b", "nodes": 2, "steps": 50,
     "fallbackPools": ["spot"]},
]  # fmt: skip


def test_a_team_s_chained_run_lands_on_its_next_pool_when_the_first_is_taken() -> None:
    """alignment borrows pretraining's idle node of a3-ultra and holds the whole pool; pretraining's
    chained run cannot fit there, even by borrowing, and is admitted on its share of spot."""
    values = stack_with("teams", gpuPools=TEAM_POOLS, teams=TEAMS, training={"runs": TEAM_RUNS})
    run = run_stack("teams", values=values)
    objects = stack_objects(run)
    jobsets = {m["metadata"]["namespace"]: m for m in objects if m["kind"] == "JobSet"}
    with running(run, pods_complete=False) as (lane, started):
        apply_objects(lane, started.api, [m for m in objects if m["kind"] != "JobSet"])
        chain = ChainLane(run, lane, started.api, jobsets)
        holder, chained = jobsets["alignment"], jobsets["pretraining"]
        chain.submit(holder)
        wait_for("alignment's run", lambda: placed(started.api, "alignment", _name(holder), 2), timeout=180)
        chain.submit(chained)
        wait_for("pretraining's run", lambda: placed(started.api, "pretraining", _name(chained), 2), timeout=180)
        assert chain.pools_of(_name(chained), "pretraining") == {"spot"}
        print("lane: chains: a team's chained run admitted on its share of spot while a3-ultra is taken")


BOOKED_POOLS = [
    {"name": "booked", "machineType": "a4-highgpu-8g", "autoscaling": {"minNodes": 0, "maxNodes": 2},
     "capacity": {"type": "reservation", "booking": {"start": "2026-12-14T00:00:00Z", "days": 7}}},
    {"name": "meanwhile", "machineType": "a4-highgpu-8g", "nodeCount": 2, "placement": "none"},
]  # fmt: skip
BOOKED_RUNS = [
    {"name": "early", "model": "llama3-8b", "nodes": 2, "steps": 50, "pool": "booked", "fallbackPools": ["meanwhile"]},
]
# An `up` within the booking (harness.runner.RUN_AT is before it).
WITHIN_BOOKING = datetime(2026, 12, 14, 9, tzinfo=UTC)


def test_a_chain_starts_on_the_next_pool_and_moves_to_the_booked_pool_once_an_up_opens_it() -> None:
    """The chain's first pool is booked from 2026-12-14. An `up` before then gives its flavor no
    quota: the run is admitted on the next pool at once. The platform's `up` within the booking
    opens the quota (the ClusterQueue updated as Pulumi would); the chain's next run lands on the
    booked pool, and the first run stays where it is. (With the booked pool's quota open before its
    start, as the program gave it before, the first run was bound on the booked pool's nodes.)"""
    values = stack_with("a4", gpuPools=BOOKED_POOLS, training={"runs": BOOKED_RUNS})
    before, within = run_stack("a4", values=values), run_stack("a4", values=values, now=WITHIN_BOOKING)
    objects = stack_objects(before)
    (early,) = [m for m in objects if m["kind"] == "JobSet"]
    (queue,) = [m for m in stack_objects(within) if m["kind"] == "ClusterQueue"]
    with running(before, pods_complete=False) as (lane, started):
        apply_objects(lane, started.api, [m for m in objects if m["kind"] != "JobSet"])
        chain = ChainLane(before, lane, started.api, {})
        chain.submit(early)
        wait_for("the run before the booking", lambda: placed(started.api, NAMESPACE, _name(early), 2), timeout=180)
        assert chain.pools_of(_name(early)) == {"meanwhile"}
        code, answer = started.api.request(
            "PATCH", f"{api_path(queue)}/{queue['metadata']['name']}", {"spec": queue["spec"]}
        )
        assert code == 200, answer
        late = resized(early, "late", 2)
        with lane.phase("the next run admitted on the booked pool"):
            chain.submit(late)
            wait_for(
                "the run within the booking", lambda: placed(started.api, NAMESPACE, "late", 2), timeout=ADMIT_SECONDS
            )
        assert chain.pools_of("late") == {"booked"}
        assert chain.pools_of(_name(early)) == {"meanwhile"}
        print(
            "lane: chains: before the booking a run went to meanwhile; after an up within it, the next went to booked"
        )


def _name(jobset: dict[str, Any]) -> str:
    return str(jobset["metadata"]["name"])


# Both pools placed by topology (compact placement gives A3 nodes GKE's topology labels), Spot first:
# Kueue knows which nodes a topology-placed run holds, and evicts it when they fail.
SPOT_FIRST = [
    {"name": "spot", "machineType": "a3-highgpu-8g", "nodeCount": 2, "capacity": {"type": "spot"},
     "placement": "compact"},
    {"name": "on-demand", "machineType": "a3-highgpu-8g", "nodeCount": 2, "placement": "compact"},
]  # fmt: skip
SPOT_RUNS = [
    {"name": "spot-chained", "model": "gpt-5b", "nodes": 2, "steps": 50, "fallbackPools": ["on-demand"],
     "checkpoint": {"enabled": True, "intervalSteps": 25}},
]  # fmt: skip
# From the deletion of the Spot nodes until the run's pods are bound on the next pool.
PREEMPTED_RECOVERY_SECONDS = 30
# The pod garbage collector fails a deleted node's pods after its 40 s quarantine, checked every
# 20 s (kubernetes pkg/controller/podgc/gc_controller.go at v1.36.3).
PODGC_SECONDS = 40 + 20


@contextmanager
def _admitted_on_spot() -> Iterator[tuple[ChainLane, dict[str, Any], list[str]]]:
    """The chained run of SPOT_RUNS admitted on the Spot pool: the lane, its JobSet and its nodes."""
    values = stack_with("dev", gpuPools=SPOT_FIRST, training={"runs": SPOT_RUNS})
    run = run_stack("dev", values=values)
    objects = stack_objects(run)
    (jobset,) = [m for m in objects if m["kind"] == "JobSet"]
    name = _name(jobset)
    with running(run, pods_complete=False) as (lane, started):
        chain = ChainLane(run, lane, started.api, {name: jobset})
        apply_objects(lane, started.api, [m for m in objects if m["kind"] != "JobSet"])
        chain.submit(jobset)
        wait_for("the chained run", lambda: placed(started.api, NAMESPACE, name, 2), timeout=180)
        assert chain.pools_of(name) == {"spot"}
        _, pods = jobset_run(started.api, NAMESPACE, name)
        yield chain, jobset, sorted(p["spec"]["nodeName"] for p in pods)


def _bound_off(api: Api, name: str, nodes: list[str]) -> bool:
    """Whether the run's pods are all bound, none on `nodes`."""
    _, now = jobset_run(api, NAMESPACE, name)
    bound = [p["spec"].get("nodeName") for p in now if p["spec"].get("nodeName") not in nodes]
    return len(bound) == 2 and all(bound)


def _moved_for_node_failures(chain: ChainLane, name: str, spot_nodes: list[str], since: float) -> float:
    """Seconds from `since` until the run's pods are all bound off the Spot nodes, which Kueue
    requeued it for (NodeFailures)."""
    wait_for(
        "the run on the next pool",
        lambda: _bound_off(chain.api, name, spot_nodes),
        timeout=PREEMPTED_RECOVERY_SECONDS + 60,
        describe=lambda: run_state(chain.api, NAMESPACE, name, spot_nodes),
    )
    took = time.monotonic() - since
    workload, _ = jobset_run(chain.api, NAMESPACE, name)
    assert workload is not None
    requeued = [c for c in workload["status"]["conditions"] if c["type"] == "Requeued"]
    assert [(c["status"], c["reason"]) for c in requeued] == [("True", "NodeFailures")], requeued
    return took


def _restarts(chain: ChainLane, jobset: dict[str, Any]) -> int:
    _, found = chain.api.request("GET", f"{api_path(jobset)}/{_name(jobset)}")
    return int((found.get("status") or {}).get("restarts", 0))


def test_a_run_whose_spot_nodes_are_reclaimed_moves_to_the_next_pool_of_its_chain() -> None:
    """GKE reclaims a Spot pool's VMs and their nodes go (here deleted with the run's pods still
    running): Kueue's topology-aware scheduling sees the nodes of the run's placement fail (both at
    once), evicts the run (NodeFailures) and requeues it, and the requeued run is admitted on the
    chain's next flavor, bound there within seconds; the eviction suspends and resumes the JobSet,
    whose restart count stays 0. A run on the Spot pool alone waits for nodes that are gone."""
    with _admitted_on_spot() as (chain, jobset, spot_nodes):
        name = _name(jobset)
        reclaimed = time.monotonic()
        for node in spot_nodes:
            code, answer = chain.api.request("DELETE", f"/api/v1/nodes/{node}")
            assert code == 200, answer

        took = _moved_for_node_failures(chain, name, spot_nodes, since=reclaimed)

        # The old pods stay on the deleted nodes until the pod garbage collector fails them: the
        # JobSet's restarts and the Jobs' failures are read once they are gone.
        def collected() -> bool:
            _, now = jobset_run(chain.api, NAMESPACE, name)
            return len(now) == 2 and not [p for p in now if p["spec"].get("nodeName") in spot_nodes]

        wait_for("the old pods collected", collected, timeout=PODGC_SECONDS + 60)
        time.sleep(5)
        restarts = _restarts(chain, jobset)
        print(
            f"lane: chains: Spot nodes {spot_nodes} deleted: the run admitted on on-demand and bound in "
            f"{took:.1f} s (Requeued: NodeFailures); once the old pods were collected, JobSet restarts {restarts}"
        )
        assert chain.pools_of(name) == {"on-demand"}
        assert restarts == 0
        assert took < PREEMPTED_RECOVERY_SECONDS, took
        # The single-pool behaviour: the same run on the Spot pool alone waits for nodes that are gone.
        single = resized(jobset, "spot-only", 2)
        template = single["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
        template.pop("affinity", None)
        template.setdefault("nodeSelector", {})[NODE_POOL_LABEL] = "spot"
        chain.submit(single)

        def pending() -> dict[str, Any] | None:
            found, _ = jobset_run(chain.api, NAMESPACE, "spot-only")
            return next(
                (c for c in (found or {}).get("status", {}).get("conditions", []) if c["type"] == "QuotaReserved"), None
            )

        wait_for("the Spot-only run considered", lambda: pending() is not None, timeout=60)
        time.sleep(5)
        condition = pending()
        assert condition is not None and (condition["status"], condition["reason"]) == ("False", "Pending"), condition


# The kubelet's graceful node shutdown, as it ends each pod of a node GKE stops (a Spot VM's
# preemption notice): phase Failed with this reason and message (kubernetes
# pkg/kubelet/nodeshutdown/nodeshutdown_manager.go) and the condition DisruptionTarget, reason
# TerminationByKubelet (pkg/apis/core/types.go, PodReasonTerminationByKubelet), the pod no longer
# ready (pkg/kubelet/status/status_manager.go, mergePodStatus: a terminal phase sets the ready
# conditions false); the containers stopped by SIGTERM (exit 128 + 15), or by SIGKILL (128 + 9)
# once the grace period is over.
SHUTDOWN_REASON = "Terminated"
SHUTDOWN_MESSAGE = "Pod was terminated in response to imminent node shutdown."
SIGTERM_EXIT_CODE = 143
SIGKILL_EXIT_CODE = 137
_NOT_READY = ("Ready", "ContainersReady")


def _shut_down(api: Api, pod: dict[str, Any], exit_code: int) -> None:
    containers = [
        {"name": c["name"], "image": c["image"], "imageID": "", "ready": False, "restartCount": 0,
         "state": {"terminated": {"exitCode": exit_code, "reason": "Error"}}}
        for c in pod["spec"]["containers"]
    ]  # fmt: skip
    condition = {"type": "DisruptionTarget", "status": "True", "reason": "TerminationByKubelet",
                 "message": SHUTDOWN_MESSAGE}  # fmt: skip
    conditions = [
        {**c, "status": "False"} if c["type"] in _NOT_READY else c
        for c in pod["status"].get("conditions", [])
        if c["type"] != "DisruptionTarget"
    ] + [condition]
    status = {"phase": "Failed", "reason": SHUTDOWN_REASON, "message": SHUTDOWN_MESSAGE,
              "conditions": conditions, "containerStatuses": containers}  # fmt: skip
    code, answer = api.request("PATCH", f"{_pod_path(pod)}/status", {"status": status})
    if code == 404:
        # The JobSet's restart deleted it first: a sibling ended before it failed the run's Job
        # (its backoff limit is 0), and a pod that is gone has nothing left for the kubelet to end.
        return
    assert code == 200, answer.get("message")
    if answer["metadata"].get("deletionTimestamp"):
        # The restart deleted it while it still ran, with a grace period, so the API server waits
        # for the kubelet, which is still up until the VM stops: once the containers have stopped,
        # it removes the pod (grace period 0, the pod's uid as precondition: kubernetes
        # pkg/kubelet/status/status_manager.go, syncPod and canBeDeleted). Without this step the
        # pod stayed, and with it the Job the restart deletes in the foreground: no new pods (1 lane in 20).
        delete = {"gracePeriodSeconds": 0, "preconditions": {"uid": answer["metadata"]["uid"]}}
        code, answer = api.request("DELETE", _pod_path(pod), delete)
        assert code in (200, 404), answer


def _pod_path(pod: dict[str, Any]) -> str:
    return f"/api/v1/namespaces/{NAMESPACE}/pods/{pod['metadata']['name']}"


def _deleting(api: Api, pod: dict[str, Any]) -> bool:
    code, found = api.request("GET", _pod_path(pod))
    return code == 200 and bool(found["metadata"].get("deletionTimestamp"))


def _shutting_down(api: Api, node: str) -> None:
    """The node as its kubelet reports it once the shutdown begins (Ready False, "node is shutting
    down": kubernetes pkg/kubelet/nodestatus/setters.go, the shutdown manager's status), and no
    longer kwok's: the VM goes on to stop, and nothing renews the node's lease."""
    silence(api, node)
    _, current = api.request("GET", f"/api/v1/nodes/{node}")
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    conditions = [c for c in current["status"]["conditions"] if c["type"] != "Ready"]
    conditions.append({"type": "Ready", "status": "False", "reason": "KubeletNotReady",
                       "message": "node is shutting down", "lastHeartbeatTime": now,
                       "lastTransitionTime": now})  # fmt: skip
    code, answer = api.request("PATCH", f"/api/v1/nodes/{node}/status", {"status": {"conditions": conditions}})
    assert code == 200, answer


# GKE's Spot VMs stop 30 s after the preemption notice; the kubelet gives the pods up to 15 s of
# it (https://cloud.google.com/kubernetes-engine/docs/concepts/spot-vms, "Termination and graceful
# shutdown of Spot VMs").
SPOT_POD_GRACE_SECONDS = 15


@pytest.mark.parametrize("pods_end_after", [0, SPOT_POD_GRACE_SECONDS])
def test_a_spot_reclaim_as_gke_does_it_costs_one_restart_and_moves_the_run(pods_end_after: int) -> None:
    """GKE reclaims a Spot VM as a shutdown: its kubelet reports the node NotReady ("node is
    shutting down"), stops the pods (one after the other at once, the JobSet's restart deleting
    the later ones as they end; or all killed at the end of its grace period, which shows Kueue
    waiting for them), and the VM stops. Kueue counts a NotReady node failed once the run's pods
    on it have ended (TASReplaceNodeOnPodTermination, beta and on from Kueue 0.14:
    pkg/controller/tas/node_controller.go at v0.19.2), so the run stays admitted on Spot until
    then; both nodes failing at once, it evicts the run (NodeFailures), which is admitted on the
    next pool of its chain. The failed pods fail the run's Job too: the JobSet restarts once. A
    node that comes back takes the chain's next run."""
    with _admitted_on_spot() as (chain, jobset, spot_nodes):
        name = _name(jobset)
        _, pods = jobset_run(chain.api, NAMESPACE, name)
        for node in spot_nodes:
            _shutting_down(chain.api, node)
        time.sleep(pods_end_after)
        workload, _ = jobset_run(chain.api, NAMESPACE, name)
        assert workload is not None and has_condition(workload, "Admitted"), workload
        assert not [c for c in workload["status"]["conditions"] if c["type"] == "Requeued"], workload
        ended = time.monotonic()
        exit_code = SIGKILL_EXIT_CODE if pods_end_after else SIGTERM_EXIT_CODE
        first, *others = pods
        _shut_down(chain.api, first, exit_code)
        if not pods_end_after:
            # Ended one after the other, the first pod's failure restarts the JobSet, which deletes
            # the others while the kubelet still ends them (what failed 1 lane in 20, made certain).
            wait_for("the other pods deleted", lambda: all(_deleting(chain.api, p) for p in others), timeout=60)
        for pod in others:
            _shut_down(chain.api, pod, exit_code)
        took = _moved_for_node_failures(chain, name, spot_nodes, since=ended)
        time.sleep(5)
        restarts = _restarts(chain, jobset)
        print(
            f"lane: chains: Spot nodes {spot_nodes} shut down, the pods ended {pods_end_after} s later: the run "
            f"bound on on-demand {took:.1f} s after they ended (Requeued: NodeFailures), JobSet restarts {restarts}"
        )
        assert chain.pools_of(name) == {"on-demand"}
        assert restarts == 1
        assert took < PREEMPTED_RECOVERY_SECONDS, took
        # The VMs come back (Compute Engine recreates them in the pool): the chain's next run takes them.
        for node in spot_nodes:
            revive(chain.api, node)
        wait_for(
            "the Spot nodes Ready",
            lambda: all(has_condition(chain.api.request("GET", f"/api/v1/nodes/{n}")[1], "Ready") for n in spot_nodes),
            timeout=60,
        )
        chain.submit(resized(jobset, "after-reclaim", 2))
        wait_for("the next run", lambda: placed(chain.api, NAMESPACE, "after-reclaim", 2), timeout=ADMIT_SECONDS)
        assert chain.pools_of("after-reclaim") == {"spot"}
