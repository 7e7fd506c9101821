"""MultiKueue on the lane: three loopback control planes, each with its etcd, API server, Kueue and
JobSet: a manager stack of this program (an existing cluster with no GPU pool) and two worker stacks
(the shipped `existing` stack with `multiKueue.worker: true`, each with 4 kwok nodes of its a3-ultra
pool). Each worker's objects are applied and its controller-manager writes the worker token; the
manager stack is then rendered from the workers' outputs with their real kubeconfigs, so the Secrets
the manager's Kueue reads are the program's own.

The scenarios run in order on the same three clusters:
1. worker A full (a 4-node run of its own): a 2-node run submitted to the manager goes to B;
2. a 4-node run fits no worker: it waits, offered to both; once A is freed it goes to A;
3. B stops answering (its processes stopped): after Kueue's workerLostTimeout the run that was on B
   is dispatched again, to A, and bound there.
`python -m tools.waiting` on the manager says each state. Kueue v0.19.2's dispatcher, loss handling
and messages: pkg/controller/admissionchecks/multikueue/workload.go."""

from __future__ import annotations

import base64
import time
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

import pytest

from components.multikueue import WORKER_TOKEN, worker_kubeconfig
from facts.kubernetes import KUEUE_API, KUEUE_NAMESPACE, MULTIKUEUE_WORKER_NAMESPACE, RUN_LABEL
from facts.project import qualified_stack_name
from harness.runner import StackRun, run_stack, stack_with
from integration.controllers import lane_kueue_config
from integration.controlplane import Api, Lane, has_condition, wait_for
from integration.lane import running
from integration.runs import api_path, apply_objects, delete_jobset, jobset_run, placed, resized, stack_objects
from tools import waiting

WORKERS = ("lane-a", "lane-b")
# The manager's run (tools.waiting finds a run by its label).
RUN = "dispatched"
NAMESPACE = "nemo"
# Kueue's multiKueue.workerLostTimeout on the lane (the program's lowest allowed is 10 s).
LOST_SECONDS = 15
# From a worker's loss until its run is bound on the other worker: the timeout, then Kueue's
# requeue and dispatch, seconds on the lane.
REDISPATCH_SECONDS = LOST_SECONDS + 60


@dataclass
class Cluster:
    lane: Lane
    api: Api


@dataclass
class Federation:
    manager: Cluster
    workers: dict[str, Cluster]
    # The manager's run (2 nodes) and the workers' own run, as rendered.
    run: dict[str, Any]
    local_run: dict[str, Any]

    def workload(self, name: str) -> dict[str, Any] | None:
        workload, _ = jobset_run(self.manager.api, NAMESPACE, name)
        return workload

    def dispatched_to(self, name: str) -> str | None:
        workload = self.workload(name)
        if workload is None or not has_condition(workload, "Admitted"):
            return None
        return (workload.get("status") or {}).get("clusterName")


def _worker_values(name: str) -> dict[str, Any]:
    values = stack_with("existing", multiKueue={"worker": True})
    values["nemo-gke:existingCluster"] = {**values["nemo-gke:existingCluster"], "name": name}
    return values


def _manager_values() -> dict[str, Any]:
    run = stack_with("existing")["nemo-gke:training"]["runs"][0]
    return {
        "nemo-gke:layers": ["platform", "training"],
        "nemo-gke:existingCluster": {"name": "lane-manager", "kubeconfigPath": "~/.kube/config", "gpuPools": []},
        "nemo-gke:kueue": {"install": False},
        "nemo-gke:multiKueue": {"workers": list(WORKERS), "workerLostTimeoutSeconds": LOST_SECONDS},
        "nemo-gke:training": {"runs": [{**run, "name": RUN, "pool": "a3-ultra"}]},
    }


def _token(api: Api) -> str:
    status, secret = api.request("GET", f"/api/v1/namespaces/{MULTIKUEUE_WORKER_NAMESPACE}/secrets/{WORKER_TOKEN}")
    return str((secret.get("data") or {}).get("token", "")) if status == 200 else ""


@pytest.fixture(scope="module")
def federation() -> Iterator[Federation]:
    with ExitStack() as stack:
        workers: dict[str, Cluster] = {}
        outputs: dict[str, dict[str, Any]] = {}
        local_run: dict[str, Any] = {}
        for name in WORKERS:
            run = run_stack("existing", values=_worker_values(name))
            # Pods stay Running: a run holds its nodes until it is deleted.
            lane, started = stack.enter_context(running(run, pods_complete=False))
            objects = stack_objects(run)
            apply_objects(lane, started.api, [m for m in objects if m["kind"] != "JobSet"])
            local_run = next(m for m in objects if m["kind"] == "JobSet")
            with lane.phase(f"{name}: the worker token"):
                wait_for("the worker token", lambda api=started.api, lane=lane: lane.alive() and bool(_token(api)))
            ca = base64.b64encode((started.api.pki / "ca.crt").read_bytes()).decode()
            kubeconfig = worker_kubeconfig(started.api.server, ca, _token(started.api), name)
            outputs[qualified_stack_name(name)] = {**run.exports, "multiKueueKubeconfig": kubeconfig}
            workers[name] = Cluster(lane, started.api)
        values = _manager_values()
        manager_run: StackRun = run_stack("lane-manager", values=values, upstream=outputs)
        lane, started = stack.enter_context(running(manager_run, kueue_config=lane_kueue_config(manager_run, values)))
        objects = stack_objects(manager_run)
        # The namespace of the cluster's own Kueue (kueue.install: false), where it reads the Secrets.
        namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": KUEUE_NAMESPACE}}
        started.api.create(api_path(namespace), namespace)
        apply_objects(lane, started.api, [m for m in objects if m["kind"] != "JobSet"])
        manager = Cluster(lane, started.api)

        def active(plural: str) -> bool:
            _, listing = manager.api.request("GET", f"/apis/{KUEUE_API}/{plural}")
            return bool(listing["items"]) and all(has_condition(o, "Active") for o in listing["items"])

        with lane.phase("the workers connected and the manager's queue active"):
            wait_for(
                "MultiKueue",
                lambda: lane.alive() and active("multikueueclusters") and active("clusterqueues"),
                timeout=120,
            )
        yield Federation(manager, workers, next(m for m in objects if m["kind"] == "JobSet"), local_run)


def _submit(api: Api, jobset: dict[str, Any]) -> None:
    api.create(api_path(jobset), jobset)


def _why(federation: Federation, run: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    kubeconfig = ["--kubeconfig", str(federation.manager.lane.workdir / "admin.kubeconfig"), "--context", "lane"]
    code = waiting.main([run, "-n", NAMESPACE, *kubeconfig])
    out = capsys.readouterr().out
    print(out, end="")
    return code, out


def test_with_worker_a_full_a_run_goes_to_worker_b(federation: Federation, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = (federation.workers[w] for w in WORKERS)
    filler = resized(federation.local_run, "filler", 4)
    _submit(a.api, filler)
    with a.lane.phase("worker A filled by a 4-node run of its own"):
        wait_for("the filler", lambda: placed(a.api, NAMESPACE, "filler", 4), timeout=180)

    run = federation.run
    name, nodes = run["metadata"]["name"], 2
    assert run["spec"]["managedBy"] == "kueue.x-k8s.io/multikueue"
    started = time.monotonic()
    _submit(federation.manager.api, run)
    with federation.manager.lane.phase("the run dispatched to B and bound there"):
        wait_for(
            "the run on B",
            lambda: federation.dispatched_to(name) == "lane-b" and placed(b.api, NAMESPACE, name, nodes),
            timeout=180,
        )
    print(f"lane: multikueue: submitted to the manager, bound on worker B in {time.monotonic() - started:.1f} s")
    # The copy offered to A is gone once B admitted it; the manager runs no pod.
    wait_for("A's copy removed", lambda: jobset_run(a.api, NAMESPACE, name) == (None, []), timeout=60)
    _, pods = federation.manager.api.request("GET", f"/api/v1/namespaces/{NAMESPACE}/pods")
    assert pods["items"] == []
    code, out = _why(federation, RUN, capsys)
    assert code == 0 and "dispatched by MultiKueue to worker lane-b, which admitted it" in out


def test_a_run_no_worker_has_room_for_waits_then_goes_to_the_freed_worker(
    federation: Federation, capsys: pytest.CaptureFixture[str]
) -> None:
    a = federation.workers["lane-a"]
    big = resized(federation.run, "big", 4)
    big["metadata"]["labels"][RUN_LABEL] = "big"
    _submit(federation.manager.api, big)
    wait_for("the big run offered", lambda: bool(_offered(federation, "big")), timeout=60)
    time.sleep(3)
    assert federation.dispatched_to("big") is None
    code, out = _why(federation, "big", capsys)
    assert code == 3 and "offered by MultiKueue to workers" in out and "none of which has admitted it yet" in out

    delete_jobset(a.api, NAMESPACE, "filler")
    with federation.manager.lane.phase("the big run dispatched to the freed worker A"):
        wait_for(
            "the big run on A",
            lambda: federation.dispatched_to("big") == "lane-a" and placed(a.api, NAMESPACE, "big", 4),
            timeout=180,
        )
    delete_jobset(federation.manager.api, NAMESPACE, "big")
    wait_for("A free again", lambda: jobset_run(a.api, NAMESPACE, "big") == (None, []), timeout=120)


def _offered(federation: Federation, name: str) -> list[str]:
    workload = federation.workload(name)
    return list(((workload or {}).get("status") or {}).get("nominatedClusterNames") or [])


def test_a_lost_worker_s_run_is_dispatched_again_after_the_timeout(federation: Federation) -> None:
    a, b = (federation.workers[w] for w in WORKERS)
    name = federation.run["metadata"]["name"]
    assert federation.dispatched_to(name) == "lane-b"
    lost = time.monotonic()
    b.lane.stop()
    with federation.manager.lane.phase("the lost worker's run dispatched again to A"):
        wait_for(
            "the run on A",
            lambda: federation.dispatched_to(name) == "lane-a" and placed(a.api, NAMESPACE, name, 2),
            timeout=REDISPATCH_SECONDS + 60,
        )
    took = time.monotonic() - lost
    print(
        f"lane: multikueue: worker B lost, its run bound on A {took:.1f} s later (workerLostTimeout {LOST_SECONDS} s)"
    )
    assert LOST_SECONDS <= took <= REDISPATCH_SECONDS, took
