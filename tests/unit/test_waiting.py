"""planners.waiting and `python -m tools.waiting`: one sentence per blocker, read from the objects
Kueue 0.19.2, JobSet and the kubelet keep. The messages below are those the lane's real Kueue wrote
for the shipped teams stack (tests/integration/test_lane_teams.py checks the command there too);
their formats are Kueue's own (planners.waiting's docstring names the source files)."""

from __future__ import annotations

import contextlib
import dataclasses
import http.server
import json
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from facts import nvsentinel
from facts.kubernetes import JOBSET_API, KUEUE_API
from facts.kueue import MULTIKUEUE_CHECK, PROVISIONING_CHECK
from planners import waiting as waiting_planner
from planners.waiting import Exit, RunObjects, diagnose
from tools import waiting

NOW = datetime(2026, 11, 27, 8, 0, tzinfo=UTC)
FLAVOR = "a3-ultra-a0424c"
PREEMPTOR_UID = "6b19b16e-3450-4b5e-9e9c-56cabd4cf1ca"
SHORT = (
    f"couldn't assign flavors to pod set workers: insufficient unused quota for cpu in flavor {FLAVOR}, 363040m more "
    f"needed, insufficient unused quota for memory in flavor {FLAVOR}, 5254336Mi more needed, insufficient unused "
    f"quota for nvidia.com/gpu in flavor {FLAVOR}, 16 more needed"
)
NEVER = (
    f"couldn't assign flavors to pod set workers: insufficient quota for cpu in flavor {FLAVOR}, previously "
    "considered podsets requests (0) + current podset request (1505) > maximum capacity (1340220m), insufficient "
    f"quota for nvidia.com/gpu in flavor {FLAVOR}, previously considered podsets requests (0) + current podset "
    "request (56) > maximum capacity (48)"
)
PREEMPTED = (
    f"Preempted to accommodate a workload (UID: {PREEMPTOR_UID}, JobUID: 1be2f5ed) due to reclamation within the "
    "cohort; preemptor path: /nemo/alignment; preemptee path: /nemo/pretraining"
)


def _condition(kind: str, status: str, reason: str = "", message: str = "", at: str = "2026-11-27T07:15:17Z") -> Any:
    return {"type": kind, "status": status, "reason": reason, "message": message, "lastTransitionTime": at}


def _workload(
    namespace: str, name: str, *conditions: Any, nodes: int = 8, priority: int = 500, **status: Any
) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"uid-{name}",
            "creationTimestamp": "2026-11-27T07:10:00Z",
            "ownerReferences": [{"kind": "JobSet", "name": name.removeprefix("jobset-"), "uid": f"js-{name}"}],
        },
        "spec": {"priority": priority, "active": True, "podSets": [{"name": "workers", "count": nodes}]},
        "status": {"conditions": list(conditions), **status},
    }


def _queue(name: str, total: str, borrowed: str = "0", cohort: bool = True) -> dict[str, Any]:
    usage = [{"name": "nvidia.com/gpu", "total": total, "borrowed": borrowed}]
    return {
        "metadata": {"name": name},
        "spec": {
            **({"cohortName": "nemo"} if cohort else {}),
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": name}},
        },
        "status": {"flavorsReservation": [{"name": FLAVOR, "resources": usage}]},
    }


def _objects(
    workload: dict[str, Any] | None,
    *,
    namespace: str = "pretraining",
    pods: tuple[Any, ...] = (),
    others: tuple[Any, ...] = (),
    queues: tuple[Any, ...] = (),
    jobset: bool = True,
    checks: tuple[Any, ...] = (),
) -> RunObjects:
    return RunObjects(
        run="llama3-8b-pretrain",
        namespace=namespace,
        jobset={"metadata": {"name": "llama3-8b-pretrain-7164ee", "namespace": namespace, "labels": {}}, "status": {}}
        if jobset
        else None,
        workload=workload,
        pods=pods,
        workloads=[*([workload] if workload else []), *others],
        cluster_queues=queues,
        fabric_checks=checks,
        now=NOW,
    )


def _preemptor() -> dict[str, Any]:
    owner = _workload("alignment", "jobset-llama3-8b-ablation-96309d", _condition("Admitted", "True"), nodes=2)
    owner["metadata"]["uid"] = PREEMPTOR_UID
    return owner


def test_a_preempted_borrower_names_its_preemptor_and_who_holds_the_quota() -> None:
    workload = _workload(
        "pretraining",
        "jobset-llama3-8b-pretrain-7164ee",
        _condition("QuotaReserved", "False", "Pending", SHORT),
        _condition("Preempted", "True", "InCohortReclamation", PREEMPTED),
    )
    verdict = diagnose(
        _objects(workload, others=(_preemptor(),), queues=(_queue("pretraining", "0"), _queue("alignment", "16")))
    )
    assert verdict.exit is Exit.WAITING
    assert verdict.sentences == (
        "preempted by JobSet alignment/llama3-8b-ablation-96309d (reclamation within the cohort) at "
        "2026-11-27T07:15:17Z; requeued",
        f"no quota of flavor {FLAVOR}: 16 more GPUs needed (team alignment holds 16)",
    )


def test_a_borrower_holding_the_quota_is_named_with_what_it_borrowed() -> None:
    workload = _workload("alignment", "jobset-x", _condition("QuotaReserved", "False", "Pending", SHORT), nodes=2)
    queues = (_queue("alignment", "0"), _queue("pretraining", "64", "48"))
    (sentence,) = diagnose(_objects(workload, namespace="alignment", queues=queues)).sentences
    assert sentence.endswith("(team pretraining holds 64, 48 of them borrowed from the cohort)")


def test_a_run_larger_than_its_queue_can_ever_hold_fails() -> None:
    workload = _workload("alignment", "jobset-big", _condition("QuotaReserved", "False", "Pending", NEVER), nodes=7)
    verdict = diagnose(_objects(workload, namespace="alignment"))
    assert verdict.exit is Exit.FAILED
    assert verdict.sentences == (
        f"it asks for more GPUs of flavor {FLAVOR} than its queue can ever have (at most 48, its share and what it "
        "may borrow): it will not be admitted as it is",
    )


def test_no_topology_domain_fits() -> None:
    message = (
        "couldn't assign flavors to pod set workers: topology \"gke-default-ebc01f\" doesn't allow to fit any of 16 "
        "pod(s)"
    )
    workload = _workload("nemo", "jobset-x", _condition("QuotaReserved", "False", "Pending", message), nodes=16)
    (sentence,) = diagnose(_objects(workload, namespace="nemo")).sentences
    assert sentence.startswith("no topology domain of gke-default-ebc01f fits its 16 nodes")


def test_queued_behind_higher_priority_and_earlier_work() -> None:
    workload = _workload("nemo", "jobset-x", _condition("QuotaReserved", "False", "Pending", SHORT))
    higher = _workload("nemo", "jobset-h", priority=1000)
    earlier = _workload("nemo", "jobset-e")
    earlier["metadata"]["creationTimestamp"] = "2026-11-27T07:00:00Z"
    admitted = _workload("nemo", "jobset-a", _condition("QuotaReserved", "True"), priority=1000)
    queues = (_queue("nemo", "64", cohort=False),)
    verdict = diagnose(_objects(workload, namespace="nemo", others=(higher, earlier, admitted), queues=queues))
    assert verdict.sentences[-1] == (
        "queued behind 1 workload of higher priority and 1 of its priority submitted earlier in ClusterQueue nemo"
    )
    assert "(its own queue holds 64)" in verdict.sentences[0]


def test_waiting_for_queued_provisioning_capacity() -> None:
    checks = [{"name": PROVISIONING_CHECK, "state": "Pending", "message": "Waiting for resources"}]
    workload = _workload("nemo", "jobset-x", admissionChecks=checks)
    (sentence,) = diagnose(_objects(workload, namespace="nemo")).sentences
    assert sentence == "waiting for queued-provisioning capacity (ProvisioningRequest Pending): Waiting for resources"


def test_a_run_on_a_manager_says_which_worker_took_it() -> None:
    """On a MultiKueue manager the run's pods are on its worker: the Workload names the worker that
    admitted it (status.clusterName), so the command says where to look instead of counting pods."""
    checks = [{"name": MULTIKUEUE_CHECK, "state": "Ready", "message": 'The workload was admitted on "worker-eu"'}]
    workload = _workload(
        "nemo", "jobset-x", _condition("Admitted", "True"), clusterName="worker-eu", admissionChecks=checks
    )
    verdict = diagnose(_objects(workload, namespace="nemo"))
    assert verdict.exit is Exit.RUNNING
    (sentence,) = verdict.sentences
    assert sentence.startswith("dispatched by MultiKueue to worker worker-eu, which admitted it")


def test_a_run_offered_to_workers_that_have_not_admitted_it_waits() -> None:
    checks = [{"name": MULTIKUEUE_CHECK, "state": "Pending", "message": ""}]
    workload = _workload(
        "nemo", "jobset-x", _condition("QuotaReserved", "True"), admissionChecks=checks,
        nominatedClusterNames=["worker-us", "worker-eu"],
    )  # fmt: skip
    verdict = diagnose(_objects(workload, namespace="nemo"))
    assert verdict.exit is Exit.WAITING
    assert verdict.sentences[0].startswith("offered by MultiKueue to workers worker-us, worker-eu, none of which")


def test_a_run_whose_worker_was_lost_is_dispatched_again() -> None:
    """MultiKueue's Retry ("Admitting remote lost") makes Kueue evict the workload at once and put the
    check back at Pending: the Evicted condition keeps the words (workload_controller.go)."""
    message = (
        'Evicted due to AdmissionCheck in Retry state: "nemo-multikueue" (Admitting remote lost, Previously: "Ready")'
    )
    checks = [{"name": MULTIKUEUE_CHECK, "state": "Pending", "message": "Reset to Pending after eviction."}]
    workload = _workload(
        "nemo", "jobset-x", _condition("Evicted", "True", "AdmissionCheck", message), admissionChecks=checks
    )
    (sentence, *_) = diagnose(_objects(workload, namespace="nemo")).sentences
    assert sentence == (
        "its worker stopped answering for Kueue's workerLostTimeout: MultiKueue dispatches it again to another "
        "active worker"
    )


def test_a_run_short_of_the_manager_s_quota_is_not_said_to_wait_for_a_worker() -> None:
    checks = [{"name": MULTIKUEUE_CHECK, "state": "Pending", "message": ""}]
    workload = _workload(
        "nemo", "jobset-x", _condition("QuotaReserved", "False", "Pending", SHORT), admissionChecks=checks
    )
    sentences = diagnose(_objects(workload, namespace="nemo")).sentences
    assert not any("MultiKueue" in s for s in sentences) and any("more GPUs needed" in s for s in sentences)


def test_evicted_for_pods_not_ready_in_time() -> None:
    workload = _workload(
        "nemo",
        "jobset-x",
        _condition("Evicted", "True", "PodsReadyTimeout", "Exceeded the PodsReady timeout"),
        requeueState={"count": 2, "requeueAt": "2026-11-27T08:04:00Z"},
    )
    (sentence,) = diagnose(_objects(workload, namespace="nemo")).sentences
    assert sentence == (
        "evicted because its pods were not all ready within Kueue's waitForPodsReady timeout; requeued 2 times, "
        "next at 2026-11-27T08:04:00Z"
    )


def _pod(ready: bool, reason: str | None = None, scheduled: bool = True) -> dict[str, Any]:
    conditions = [
        _condition("PodScheduled", "True" if scheduled else "False", "Unschedulable", at="2026-11-27T07:48:00Z")
    ]
    conditions.append(_condition("Ready", "True" if ready else "False"))
    waiting_state = [{"state": {"waiting": {"reason": reason}}}] if reason else []
    return {"metadata": {"name": "p"}, "status": {"conditions": conditions, "containerStatuses": waiting_state}}


def test_an_admitted_run_with_pods_pulling_its_image() -> None:
    workload = _workload("nemo", "jobset-x", _condition("Admitted", "True"), nodes=3)
    pods = (_pod(True), _pod(False, "ContainerCreating"), _pod(False, "ContainerCreating"))
    verdict = diagnose(_objects(workload, namespace="nemo", pods=pods))
    assert verdict.exit is Exit.WAITING
    assert verdict.sentences == ("pods not ready: 2 of 3 pulling the image or mounting volumes for 12 minutes",)


def test_an_admitted_run_with_every_pod_ready_is_running() -> None:
    workload = _workload("nemo", "jobset-x", _condition("Admitted", "True"), nodes=2, admission={"clusterQueue": "q"})
    verdict = diagnose(_objects(workload, namespace="nemo", pods=(_pod(True), _pod(True))))
    assert (verdict.exit, verdict.sentences) == (Exit.RUNNING, ("running: admitted in ClusterQueue q, 2 pods ready",))


def test_a_run_gated_on_its_fabric_check_has_no_jobset_yet() -> None:
    check = {"metadata": {"name": "fabric-1a2b3c", "labels": {"nemo-gke/fabric-check": "fabric"}}, "status": {}}
    verdict = diagnose(_objects(None, jobset=False, checks=(check,)))
    assert verdict.exit is Exit.WAITING and "waiting for the fabric check fabric" in verdict.sentences[0]
    assert diagnose(_objects(None, jobset=False)).exit is Exit.NOT_FOUND


@pytest.mark.parametrize(
    ("argv", "words"),
    [(["x", "-n", "Not_A_Namespace"], "--namespace 'Not_A_Namespace'"), ([], "the following arguments are required")],
)
def test_bad_arguments_exit_2_with_one_line(argv: list[str], words: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        waiting.main(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert words in err and "Traceback" not in err


def test_an_unreadable_cluster_exits_1_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert waiting.main(["run", "--kubeconfig", str(tmp_path / "missing")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("cannot read the cluster:") and err.count("\n") == 1


def test_a_submitter_who_may_read_only_the_namespace_still_gets_the_runs_blockers() -> None:
    """A team's submitter Role covers its namespace (components.teams): the cluster-wide lists are
    refused, and the command reads the namespace's Workloads instead."""
    workload = _workload("alignment", "jobset-big", _condition("QuotaReserved", "False", "Pending", NEVER), nodes=7)
    jobset = {"metadata": {"name": "big", "uid": "js-jobset-big", "creationTimestamp": "2026-11-27T07:10:00Z"}}
    answers = {
        "/apis/kueue.x-k8s.io/v1beta2/namespaces/alignment/workloads": {"items": [workload]},
        "/api/v1/namespaces/alignment/pods": {"items": []},
    }

    def get(path: str) -> Any:
        if path.startswith("/apis/kueue.x-k8s.io/v1beta2/") and "/namespaces/" not in path:
            raise waiting.ClusterUnreadable("GET https://cluster/apis/kueue.x-k8s.io/v1beta2/workloads: 403 Forbidden")
        return (
            {"items": [jobset]}
            if "nemo-gke%2Frun" in path
            else answers.get(path.split("?", maxsplit=1)[0], {"items": []})
        )

    objects = waiting.read_run(get, "big", "alignment", NOW)
    assert objects.workload == workload and objects.cluster_queues == []
    assert diagnose(objects).exit is Exit.FAILED


def test_a_preemption_under_way_and_other_evictions_are_said() -> None:
    pending = SHORT.split(": ", 1)[0] + ": insufficient unused quota for nvidia.com/gpu in flavor F, 16 more needed"
    workload = _workload(
        "nemo",
        "jobset-x",
        _condition("QuotaReserved", "False", "Pending", pending + ". Pending the preemption of 2 workload(s)"),
        _condition("Evicted", "True", "ClusterQueueStopped", "The ClusterQueue is stopped"),
    )
    sentences = diagnose(_objects(workload, namespace="nemo")).sentences
    assert "evicted (ClusterQueueStopped): The ClusterQueue is stopped" in sentences
    assert "preempting 2 workload(s) to make room: it is admitted once they are gone" in sentences


def _kubeconfig(tmp_path: Path, server: str) -> str:
    path = tmp_path / "kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "clusters": [{"name": "c", "cluster": {"server": server}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    return str(path)


@contextlib.contextmanager
def _server(answers: dict[str, tuple[int, str]]) -> Iterator[str]:
    """An HTTP server answering each path with (status, body); any other path 404."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            status, body = answers.get(self.path.split("?", 1)[0], (404, "404 page not found"))
            self.send_response(status)
            self.end_headers()
            self.wfile.write(body.encode())

        def log_message(self, *_: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()


API = (200, json.dumps({"kind": "APIVersions", "versions": ["v1"]}))


@pytest.mark.parametrize(
    ("answers", "code", "words"),
    [
        # A web server: HTML where JSON was asked for.
        ({"/api": (200, "<html>hello</html>")}, 1, "the answer is not JSON, so not a Kubernetes API"),
        # JSON of another shape: not an API server, where each 404 read as "no such run".
        ({"/api": (200, json.dumps({"hello": "world"}))}, 6, "is not a Kubernetes API server"),
        ({}, 6, "is not a Kubernetes API server"),
        # Kubernetes without JobSet: "no such run" would be a guess.
        ({"/api": API}, 6, "serves no jobset.x-k8s.io/v1alpha2: JobSet is not installed"),
        # Lists of another shape from the APIs it serves.
        (
            {
                "/api": API,
                f"/apis/{JOBSET_API}": (200, "{}"),
                f"/apis/{KUEUE_API}": (200, "{}"),
                f"/apis/{JOBSET_API}/namespaces/nemo/jobsets": (200, json.dumps({"items": "none"})),
            },
            1,
            "a list was asked for",
        ),
    ],
)
def test_a_server_that_is_not_the_platform_s_cluster_gets_its_own_answer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], answers: dict[str, tuple[int, str]], code: int, words: str
) -> None:
    with _server(answers) as url:
        assert waiting.main(["run", "--kubeconfig", _kubeconfig(tmp_path, url)]) == code
    err = capsys.readouterr().err
    assert words in err and err.count("\n") == 1 and "Traceback" not in err, err


def test_a_kubeconfig_server_that_is_not_a_url_exits_1_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert waiting.main(["run", "--kubeconfig", _kubeconfig(tmp_path, "cluster.example.com:443")]) == 1
    err = capsys.readouterr().err
    assert "is not an https:// URL" in err and err.count("\n") == 1, err


# NVSentinel's marks on a node it quarantined (facts.nvsentinel), as tests/integration/
# test_lane_recovery.py writes them, with the message of its GPU health monitor's XID check.
XID = "ErrorCode:79 GPU:0 fell off the bus Recommended Action=RESTART_VM;"


def _quarantined(name: str, pool: str, check: str = "GpuXidError", message: str = XID) -> dict[str, Any]:
    labels = {
        nvsentinel.CORDON_BY_LABEL: nvsentinel.CORDON_BY,
        nvsentinel.CORDON_REASON_LABEL: check,
        nvsentinel.STATE_LABEL: nvsentinel.QUARANTINED,
        "cloud.google.com/gke-nodepool": pool,
    }
    condition = {**nvsentinel.fault_condition(check, message), "lastTransitionTime": "2026-11-27T07:40:00Z"}
    return {"metadata": {"name": name, "labels": labels}, "spec": {"unschedulable": True}, "status": {
        "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}, condition]
    }}  # fmt: skip


def _on(pod: dict[str, Any], node: str, name: str) -> dict[str, Any]:
    return {
        **pod,
        "metadata": {"name": name},
        "spec": {"nodeName": node},
        "status": {**pod["status"], "phase": "Running"},
    }


def _pooled(workload: dict[str, Any], pool: str) -> dict[str, Any]:
    """The workload's pod set as Kueue copies it from the JobSet: the pods select the run's pool."""
    pod_set = {**workload["spec"]["podSets"][0], "template": {"spec": {"nodeSelector": {
        "cloud.google.com/gke-nodepool": pool
    }}}}  # fmt: skip
    return {**workload, "spec": {**workload["spec"], "podSets": [pod_set]}}


def test_a_running_run_on_a_quarantined_node_says_so_and_what_moves_it() -> None:
    workload = _workload("nemo", "jobset-x", _condition("Admitted", "True"), nodes=2, admission={"clusterQueue": "q"})
    pods = (_on(_pod(True), "gpu-1", "x-workers-0-0"), _on(_pod(True), "gpu-2", "x-workers-0-1"))
    objects = dataclasses.replace(
        _objects(workload, namespace="nemo", pods=pods), quarantined=(_quarantined("gpu-1", "a3-ultra"),)
    )
    verdict = diagnose(objects)
    assert verdict.exit is Exit.RUNNING
    assert verdict.sentences == (
        "running: admitted in ClusterQueue q, 2 pods ready",
        "pod x-workers-0-0 runs on node gpu-1, quarantined by NVSentinel since 2026-11-27T07:40:00Z (GpuXidError: "
        f"{XID}): the run restarts without it once NVSentinel's drainer evicts the pod (in its Immediate mode: "
        "docs/recovery.md)",
    )


def test_a_waiting_run_names_the_quarantined_nodes_of_its_pool_only() -> None:
    message = (
        "couldn't assign flavors to pod set workers: topology \"gke-default\" doesn't allow to fit any of 1 pod(s)"
    )
    workload = _pooled(
        _workload("nemo", "jobset-x", _condition("QuotaReserved", "False", "Pending", message), nodes=4), "a3-ultra"
    )
    objects = dataclasses.replace(
        _objects(workload, namespace="nemo"),
        quarantined=(_quarantined("gpu-1", "a3-ultra"), _quarantined("other-7", "spot", "SysLogsXIDError")),
    )
    verdict = diagnose(objects)
    assert verdict.exit is Exit.WAITING
    assert verdict.sentences[-1] == (
        f"node gpu-1 is quarantined by NVSentinel since 2026-11-27T07:40:00Z (GpuXidError: {XID}): no pod of the run "
        "is placed there until NVSentinel releases it"
    )
    assert not [s for s in verdict.sentences if "other-7" in s]
    # Without a pool in the pods' spec, every quarantined node may be the one it waits for.
    unpooled = dataclasses.replace(objects, workload=_workload("nemo", "jobset-x", nodes=4))
    assert len([s for s in diagnose(unpooled).sentences if "quarantined" in s]) == 2
    # A node NVSentinel has uncordoned holds nothing, whatever labels remain.
    uncordoned = {**_quarantined("gpu-1", "a3-ultra"), "spec": {}}
    assert not [s for s in diagnose(dataclasses.replace(objects, quarantined=(uncordoned,))).sentences if "gpu-1" in s]


def test_an_existing_cluster_s_run_is_matched_to_nodes_by_its_own_selector() -> None:
    """existing-oke's pods select nodes by instance type, not by a GKE pool: a quarantined CPU node
    is not the run's."""
    message = "couldn't assign flavors to pod set workers: topology \"t\" doesn't allow to fit any of 1 pod(s)"
    workload = _workload("nemo", "jobset-x", _condition("QuotaReserved", "False", "Pending", message), nodes=2)
    selector = {"node.kubernetes.io/instance-type": "BM.GPU.H100.8"}
    workload["spec"]["podSets"][0]["template"] = {"spec": {"nodeSelector": selector}}
    gpu = _quarantined("gpu-1", "none")
    gpu["metadata"]["labels"].update(selector)
    cpu = _quarantined("cpu-1", "none")
    cpu["metadata"]["labels"]["node.kubernetes.io/instance-type"] = "VM.Standard.E5"
    sentences = diagnose(dataclasses.replace(_objects(workload, namespace="nemo"), quarantined=(gpu, cpu))).sentences
    assert [s.split(" is ")[0] for s in sentences if "quarantined" in s] == ["node gpu-1"]


def _failed_init(name: str, node: str, container: str, code: int, message: str = "") -> dict[str, Any]:
    """A pod whose init container failed, as the kubelet reports it under restartPolicy Never."""
    terminated = {"exitCode": code, "reason": "Error", **({"message": message} if message else {})}
    return {
        "metadata": {"name": name},
        "spec": {
            **({"nodeName": node} if node else {}),
            "initContainers": [{"name": "tcpxo-daemon", "restartPolicy": "Always"}, {"name": container}],
        },
        "status": {
            "phase": "Failed",
            "conditions": [_condition("PodScheduled", "True"), _condition("Ready", "False", "PodFailed")],
            # The native sidecar is stopped with the pod: SIGTERM's code, not a failure of its own.
            "initContainerStatuses": [
                {"name": "tcpxo-daemon", "state": {"terminated": {"exitCode": 143, "reason": "Error"}}},
                {"name": container, "state": {"terminated": terminated}, "restartCount": 0},
            ],
            "containerStatuses": [{"name": "nemo", "state": {"waiting": {"reason": "PodInitializing"}}}],
        },
    }


def test_a_failed_preflight_check_is_named_with_its_node_and_what_follows() -> None:
    workload = _workload("nemo", "jobset-x", _condition("Admitted", "True"), nodes=2)
    pods = (
        _on(_pod(True), "gpu-2", "x-workers-0-1"),
        _failed_init("x-workers-0-0", "gpu-1", nvsentinel.PREFLIGHT_DCGM_DIAG, nvsentinel.PREFLIGHT_CHECK_FAILED,
                     "Diagnostic test failed: GPU 3 memory"),
    )  # fmt: skip
    verdict = diagnose(_objects(workload, namespace="nemo", pods=pods))
    assert verdict.exit is Exit.WAITING
    assert verdict.sentences == (
        "pod x-workers-0-0: NVSentinel's preflight check preflight-dcgm-diag failed on node gpu-1 (exit code 1): "
        "Diagnostic test failed: GPU 3 memory; NVSentinel cordons the node, and the JobSet restarts the run without "
        "it (a restart of its budget)",
    )
    # The failed pod is not said to run on its node once NVSentinel quarantined it.
    held = dataclasses.replace(
        _objects(workload, namespace="nemo", pods=pods), quarantined=(_quarantined("gpu-1", "a3-ultra"),)
    )
    assert not [s for s in diagnose(held).sentences if "runs on node" in s]
    other = _failed_init("x-workers-0-0", "", "fetch-data", 3)
    (sentence,) = diagnose(_objects(workload, namespace="nemo", pods=(pods[0], other))).sentences
    assert sentence == "pod x-workers-0-0: init container fetch-data failed (exit code 3)"


def test_the_command_reads_the_nodes_nvsentinel_holds_and_does_without_them_where_refused() -> None:
    node = _quarantined("gpu-1", "a3-ultra")
    asked: list[str] = []

    def get(path: str, refused: bool = False) -> Any:
        asked.append(path)
        if path.startswith("/api/v1/nodes"):
            if refused:
                raise waiting.ClusterUnreadable("GET https://cluster/api/v1/nodes: 403 Forbidden")
            return {"items": [node]}
        return {"items": []}

    assert waiting.read_run(get, "x", "nemo", NOW).quarantined == [node]
    assert "/api/v1/nodes?labelSelector=k8saas.nvidia.com%2Fcordon-by%3DNVSentinel" in asked
    assert waiting.read_run(lambda p: get(p, refused=True), "x", "nemo", NOW).quarantined == []


@pytest.mark.parametrize(
    ("requirement", "selected"),
    [
        ({"key": "pool", "operator": "In", "values": ["a"]}, True),
        ({"key": "pool", "operator": "NotIn", "values": ["a"]}, False),
        ({"key": "pool", "operator": "Exists"}, True),
        ({"key": "pool", "operator": "DoesNotExist"}, False),
        ({"key": "gpus", "operator": "Gt", "values": ["4"]}, True),
        ({"key": "gpus", "operator": "Lt", "values": ["4"]}, False),
        ({"key": "absent", "operator": "Gt", "values": ["4"]}, False),
    ],
)
def test_nodes_are_matched_to_a_run_as_the_scheduler_reads_its_affinity(
    requirement: dict[str, Any], selected: bool
) -> None:
    node = {"metadata": {"name": "n1", "labels": {"pool": "a", "gpus": "8"}}}
    spec = {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [requirement]}]
    }}}}  # fmt: skip
    assert waiting_planner._selects(spec, node) is selected
    # An empty term matches no node; matchFields reads the node's name.
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    terms[:] = [{}]
    assert not waiting_planner._selects(spec, node)
    terms[:] = [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]
    assert waiting_planner._selects(spec, node)


def test_a_crash_looping_sidecar_of_a_live_pod_is_named() -> None:
    """The GPUDirect receive daemon restarting (its last exit 1) holds the pod in its init phase."""
    pod = _failed_init("x-workers-0-0", "gpu-1", nvsentinel.PREFLIGHT_DCGM_DIAG, 0)
    pod["status"]["phase"] = "Pending"
    pod["status"]["initContainerStatuses"] = [{
        "name": "tcpxo-daemon", "restartCount": 3, "state": {"waiting": {"reason": "CrashLoopBackOff"}},
        "lastState": {"terminated": {"exitCode": 1, "reason": "Error"}},
    }]  # fmt: skip
    workload = _workload("nemo", "jobset-x", _condition("Admitted", "True"), nodes=1)
    (sentence,) = diagnose(_objects(workload, namespace="nemo", pods=(pod,))).sentences
    assert sentence == "pod x-workers-0-0: init container tcpxo-daemon failed on node gpu-1 (exit code 1)"
