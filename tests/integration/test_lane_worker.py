"""A MultiKueue worker on the lane: the shipped `existing` stack with `multiKueue.worker: true`,
its account, role, binding and token Secret applied to the real API server. The controller-manager
writes the token; the kubeconfig the program builds for a manager (components.multikueue) then
reaches the API server as that account, which may do what Kueue's manager does on a worker and
nothing else."""

from __future__ import annotations

import base64
import json
import ssl
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from components.multikueue import WORKER_ACCOUNT, WORKER_TOKEN, worker_kubeconfig
from facts.kubernetes import KUEUE_API, MULTIKUEUE_WORKER_NAMESPACE
from harness.runner import run_stack, stack_with
from integration.controlplane import Api, wait_for
from integration.lane import running
from integration.runs import apply_objects, stack_objects
from stacks.kubeapi import ClusterUnreadable, Kubeconfig, read_objects


@pytest.fixture(scope="module")
def lane() -> Iterator[tuple[Api, str]]:
    run = run_stack("existing", values=stack_with("existing", multiKueue={"worker": True}))
    with running(run) as (lane, started):
        api = started.api
        apply_objects(lane, api, [m for m in stack_objects(run) if m["kind"] != "JobSet"])
        path = f"/api/v1/namespaces/{MULTIKUEUE_WORKER_NAMESPACE}/secrets/{WORKER_TOKEN}"

        def token() -> str:
            status, secret = api.request("GET", path)
            return str((secret.get("data") or {}).get("token", "")) if status == 200 else ""

        with lane.phase("the worker token written by the controller-manager"):
            wait_for("the worker token", lambda: lane.alive() and bool(token()), timeout=60)
        ca = base64.b64encode((api.pki / "ca.crt").read_bytes()).decode()
        yield api, worker_kubeconfig(api.server, ca, token(), "lane-worker")


def _read(kubeconfig: str, path: str) -> Any:
    return read_objects(Kubeconfig(kubeconfig, None, None), [path])[path]


def post(kubeconfig: str, path: str, body: Any) -> int:
    """The API server's status for a POST as the kubeconfig's user (its token)."""
    config = json.loads(kubeconfig)
    cluster, user = config["clusters"][0]["cluster"], config["users"][0]["user"]
    context = ssl.create_default_context(cadata=base64.b64decode(cluster["certificate-authority-data"]).decode())
    request = urllib.request.Request(cluster["server"] + path, data=json.dumps(body).encode(), method="POST")
    request.add_header("Content-Type", "application/json")
    request.add_header("Authorization", f"Bearer {user['token']}")
    try:
        with urllib.request.urlopen(request, context=context, timeout=30) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return int(error.code)


def test_the_manager_s_kubeconfig_reaches_the_worker_as_its_account(lane: tuple[Api, str]) -> None:
    _, kubeconfig = lane
    assert _read(kubeconfig, f"/apis/{KUEUE_API}/workloads")["items"] == []
    assert [q["metadata"]["name"] for q in _read(kubeconfig, f"/apis/{KUEUE_API}/clusterqueues")["items"]]


def test_the_account_reads_no_secret_and_runs_no_pod(lane: tuple[Api, str]) -> None:
    api, kubeconfig = lane
    with pytest.raises(ClusterUnreadable, match="403"):
        _read(kubeconfig, f"/api/v1/namespaces/{MULTIKUEUE_WORKER_NAMESPACE}/secrets")
    user = f"system:serviceaccount:{MULTIKUEUE_WORKER_NAMESPACE}:{WORKER_ACCOUNT}"
    groups = ["system:serviceaccounts", f"system:serviceaccounts:{MULTIKUEUE_WORKER_NAMESPACE}", "system:authenticated"]

    def allowed(verb: str, resource: str, group: str) -> bool:
        return api.allowed(user, groups, verb, resource, namespace="nemo", group=group)

    assert allowed("create", "jobsets", "jobset.x-k8s.io") and allowed("patch", "workloads", "kueue.x-k8s.io")
    assert not allowed("create", "pods", "") and not allowed("get", "secrets", "")
    assert not allowed("delete", "clusterqueues", "kueue.x-k8s.io")


def test_the_account_creates_jobs_only_where_runs_land(lane: tuple[Api, str]) -> None:
    """The token cannot start a pod anywhere else: a Job it creates in `kube-system`, or in a
    namespace no run uses, is refused by the API server (403); where runs land it is not. It still
    reads across the cluster (the manager watches its copies by label in every namespace)."""
    api, kubeconfig = lane
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "escape"},
        "spec": {
            "suspend": True,
            "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}},
        },
    }
    api.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "elsewhere"}})
    answers = {
        namespace: post(kubeconfig, f"/apis/batch/v1/namespaces/{namespace}/jobs", job)
        for namespace in ("kube-system", "elsewhere", "nemo")
    }
    print(f"lane: worker token creating a Job: {answers}")
    assert answers["kube-system"] == 403 and answers["elsewhere"] == 403
    assert answers["nemo"] != 403
    assert _read(kubeconfig, "/apis/batch/v1/namespaces/kube-system/jobs")["items"] == []


def test_deleting_the_token_secret_revokes_the_token(lane: tuple[Api, str]) -> None:
    """docs/regions.md's rotation: the legacy service-account token is valid only while its Secret
    exists (kubernetes pkg/serviceaccount/legacy.go), so deleting the Secret revokes it at once.
    Last in the module: the token is gone after it."""
    api, kubeconfig = lane
    code, answer = api.request("DELETE", f"/api/v1/namespaces/{MULTIKUEUE_WORKER_NAMESPACE}/secrets/{WORKER_TOKEN}")
    assert code == 200, answer
    wait_for("the old token refused", lambda: post(kubeconfig, "/apis/batch/v1/namespaces/nemo/jobs", {}) == 401)
