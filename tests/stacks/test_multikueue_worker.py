"""A MultiKueue worker (components.multikueue): an account a manager's Kueue reaches this cluster
with, bound to Kueue's least-privilege worker role for the kinds this platform queues, its token,
and the outputs a manager stack reads (kubernetes-sigs/kueue site/static/examples/multikueue/
create-multikueue-kubeconfig.sh@v0.19.2)."""

from __future__ import annotations

import base64
import json
from typing import Any

from components.multikueue import (
    WORKER_ACCOUNT,
    WORKER_ROLE,
    WORKER_RULES,
    WORKER_WRITE_ROLE,
    WORKER_WRITE_RULES,
    worker_kubeconfig,
)
from facts.kubernetes import MULTIKUEUE_WORKER_NAMESPACE
from harness.runner import StackRun, stack_with, unmarked
from stacks.kubeapi import kubeconfig_endpoint
from tests.conftest import Render

CLUSTER_ROLE = "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole"


def _worker(render: Render, stack: str) -> StackRun:
    return render(stack, values=stack_with(stack, multiKueue={"worker": True}))


def test_only_a_worker_stack_has_the_account(render: Render) -> None:
    assert not [r for r in render("dev").resources if r.type == "nemo:multikueue:WorkerAccess"]
    assert "multiKueueKubeconfig" not in render("dev").exports


def test_the_worker_role_is_kueue_s_for_jobs_and_jobsets_and_nothing_more(render: Render) -> None:
    """Kueue's script grants the manager what it needs per framework; the platform queues batch
    Jobs and JobSets only, so the roles hold those, their Workloads and read access to the queues:
    no Secret, no pod, no wildcard. Cluster-wide the account only reads (the manager watches its
    copies by label in every namespace); it writes through the write role alone."""
    run = _worker(render, "dev")
    roles = {m["metadata"]["name"]: m for m in map(run.manifest, run.of_type(CLUSTER_ROLE))}
    rules, writes = roles[WORKER_ROLE]["rules"], roles[WORKER_WRITE_ROLE]["rules"]
    assert rules == [dict(r) for r in WORKER_RULES] and writes == [dict(r) for r in WORKER_WRITE_RULES]
    assert {verb for r in rules for verb in r["verbs"]} == {"get", "list", "watch"}
    granted = {(group, resource) for r in [*rules, *writes] for group in r["apiGroups"] for resource in r["resources"]}
    assert granted == {
        ("batch", "jobs"), ("batch", "jobs/status"), ("jobset.x-k8s.io", "jobsets"),
        ("jobset.x-k8s.io", "jobsets/status"), ("kueue.x-k8s.io", "workloads"),
        ("kueue.x-k8s.io", "workloads/status"), ("kueue.x-k8s.io", "clusterqueues"),
        ("kueue.x-k8s.io", "localqueues"),
    }  # fmt: skip
    assert all("*" not in r["verbs"] for r in [*rules, *writes])
    (binding,) = [
        run.manifest(b)
        for b in run.of_type("kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding")
        if run.manifest(b)["metadata"]["name"] == WORKER_ROLE
    ]
    account = {"kind": "ServiceAccount", "name": WORKER_ACCOUNT, "namespace": MULTIKUEUE_WORKER_NAMESPACE}
    assert binding["subjects"] == [account]
    assert not [
        b
        for b in map(run.manifest, run.of_type("kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding"))
        if b["roleRef"]["name"] == WORKER_WRITE_ROLE
    ], "the write role is bound in no namespace but those runs land in"


def test_the_account_writes_only_where_runs_land(render: Render) -> None:
    """A RoleBinding of the write role in each namespace a run lands in (the platform's, or each
    team's) and nowhere else."""
    for stack, namespaces in (("dev", {"nemo"}), ("teams", None)):
        run = _worker(render, stack)
        bindings = [
            run.manifest(b)
            for b in run.of_type("kubernetes:rbac.authorization.k8s.io/v1:RoleBinding")
            if run.manifest(b)["roleRef"]["name"] == WORKER_WRITE_ROLE
        ]
        expected = namespaces or set(run.exports["multiKueueWorker"]["namespaces"])
        assert {b["metadata"]["namespace"] for b in bindings} == expected and len(bindings) == len(expected)
        assert all(b["roleRef"]["kind"] == "ClusterRole" for b in bindings)
        assert all(b["subjects"][0]["name"] == WORKER_ACCOUNT for b in bindings)


def test_the_token_secret_is_the_controllers_to_fill(render: Render) -> None:
    run = _worker(render, "dev")
    (secret,) = [run.manifest(s) for s in run.of_type("kubernetes:core/v1:Secret") if "multikueue" in s.name]
    assert secret["type"] == "kubernetes.io/service-account-token"
    assert unmarked(secret)["metadata"]["annotations"] == {"kubernetes.io/service-account.name": WORKER_ACCOUNT}
    assert "data" not in secret


def test_the_manager_gets_a_kubeconfig_with_the_token_and_no_program(render: Render) -> None:
    """Kueue refuses kubeconfigs that run programs (exec plugins): the manager's names the worker's
    server and CA, as the stack's kubeconfig does, and the account's token."""
    run = _worker(render, "dev")
    config = json.loads(run.exports["multiKueueKubeconfig"])
    (cluster,) = config["clusters"]
    assert cluster["cluster"]["server"].startswith("https://")
    assert [u["user"] for u in config["users"]] == [{"token": ""}]  # the mocks fill no token
    facts = run.exports["multiKueueWorker"]
    assert facts["kueueVersion"] and facts["jobsetVersion"] and facts["namespaces"] == ["nemo"]
    existing = _worker(render, "existing").exports["multiKueueWorker"]
    assert existing.get("kueueVersion") is None  # the cluster's own Kueue: not known to the program


def test_worker_kubeconfig_names_server_ca_and_token_only() -> None:
    text = worker_kubeconfig("https://10.0.0.1", "Q0E=", base64.b64encode(b"t0ken").decode(), "east")
    config: dict[str, Any] = json.loads(text)
    assert config["users"] == [{"name": WORKER_ACCOUNT, "user": {"token": "t0ken"}}]
    assert config["clusters"] == [
        {"name": "east", "cluster": {"server": "https://10.0.0.1", "certificate-authority-data": "Q0E="}}
    ]
    assert kubeconfig_endpoint(text) == ("https://10.0.0.1", "Q0E=")
