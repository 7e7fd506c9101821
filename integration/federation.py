"""A MultiKueue federation on the lane: three loopback control planes, each with its etcd, API
server, Kueue and JobSet: a manager stack of this program (an existing cluster with no GPU pool)
and two worker stacks (the shipped `existing` stack with `multiKueue.worker: true`, each with 4 kwok
nodes of its a3-ultra pool). Each worker's objects are applied and its controller-manager writes
the worker token; the manager stack is then rendered from the workers' outputs with their real
kubeconfigs, so the Secrets and the Kueue Configuration the manager's Kueue reads are the
program's own."""

from __future__ import annotations

import base64
import io
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager, redirect_stdout
from dataclasses import dataclass
from typing import Any

from components.multikueue import WORKER_TOKEN, worker_kubeconfig
from facts.kubernetes import KUEUE_API, KUEUE_NAMESPACE, MULTIKUEUE_WORKER_NAMESPACE
from facts.project import qualified_stack_name
from harness.runner import StackRun, run_stack, stack_with
from integration.controllers import lane_kueue_config
from integration.controlplane import Api, Lane, has_condition, wait_for
from integration.lane import running
from integration.runs import api_path, apply_objects, jobset_run, stack_objects
from tools import waiting

# The workers' stacks, and so their MultiKueueCluster names.
WORKERS = ("lane-a", "lane-b")
# The manager's run (tools.waiting finds a run by its label).
RUN = "dispatched"
NAMESPACE = "nemo"


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

    def offered(self, name: str) -> list[str]:
        """The workers MultiKueue nominated for the run (status.nominatedClusterNames)."""
        workload = self.workload(name)
        return list(((workload or {}).get("status") or {}).get("nominatedClusterNames") or [])

    def submit(self, api: Api, jobset: dict[str, Any]) -> None:
        api.create(api_path(jobset), jobset)


def _worker_values(name: str) -> dict[str, Any]:
    values = stack_with("existing", multiKueue={"worker": True})
    values["nemo-gke:existingCluster"] = {**values["nemo-gke:existingCluster"], "name": name}
    return values


def _manager_values(multikueue: Mapping[str, Any]) -> dict[str, Any]:
    run = stack_with("existing")["nemo-gke:training"]["runs"][0]
    return {
        "nemo-gke:layers": ["platform", "training"],
        "nemo-gke:existingCluster": {"name": "lane-manager", "kubeconfigPath": "~/.kube/config", "gpuPools": []},
        "nemo-gke:kueue": {"install": False},
        "nemo-gke:multiKueue": dict(multikueue),
        "nemo-gke:training": {"runs": [{**run, "name": RUN, "pool": "a3-ultra"}]},
    }


def _token(api: Api) -> str:
    status, secret = api.request("GET", f"/api/v1/namespaces/{MULTIKUEUE_WORKER_NAMESPACE}/secrets/{WORKER_TOKEN}")
    return str((secret.get("data") or {}).get("token", "")) if status == 200 else ""


@contextmanager
def federation(multikueue: Mapping[str, Any]) -> Iterator[Federation]:
    """The two workers and a manager whose `nemo-gke:multiKueue` is `multikueue`."""
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
        values = _manager_values(multikueue)
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


def why(federation: Federation, run: str) -> tuple[int, str]:
    """What `python -m tools.waiting` on the manager says of the run (also printed), and its exit code."""
    kubeconfig = ["--kubeconfig", str(federation.manager.lane.workdir / "admin.kubeconfig"), "--context", "lane"]
    out = io.StringIO()
    with redirect_stdout(out):
        code = waiting.main([run, "-n", NAMESPACE, *kubeconfig])
    print(out.getvalue(), end="")
    return code, out.getvalue()
