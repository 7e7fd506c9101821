"""`nvsentinel.preflight`: the platform opts its training namespaces into NVIDIA NVSentinel's
preflight (the namespace label its webhook selects) and names the checks on every GPU pod it
creates (the annotation the webhook reads: it injects only those, and refuses a pod that names an
unknown one), and the go/no-go counts the checks in each start (facts.nvsentinel's sources)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from facts import nvsentinel
from facts.project import qualified_stack_name
from harness.runner import StackRun, load_stack_values, run_stack, stack_with
from tests.conftest import Render, issue_for, rejected

JOBSET = "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"
NAMESPACE = "kubernetes:core/v1:Namespace"
ON = {"preflight": {"enabled": True}}


def namespace_labels(run: StackRun) -> dict[str, dict[str, str]]:
    return {
        (m := run.manifest(r))["metadata"]["name"]: m["metadata"].get("labels", {})
        for r in run.custom_resources
        if r.type == NAMESPACE
    }


def pod_annotations(run: StackRun) -> dict[str, dict[str, str]]:
    """Each JobSet's pod template annotations, by JobSet resource name."""
    found = {}
    for resource in run.of_type(JOBSET):
        (replicated,) = run.manifest(resource)["spec"]["replicatedJobs"]
        found[resource.name] = replicated["template"]["spec"]["template"]["metadata"].get("annotations", {})
    return found


def with_fabric_check(stack: str, **keys: Any) -> dict[str, Any]:
    values = load_stack_values(stack)
    training = copy.deepcopy(values["nemo-gke:training"])
    pool = values["nemo-gke:gpuPools"][0]["name"]
    training["ncclTests"] = [{"name": "fabric", "pool": pool, "nodes": 2}]
    for run in training["runs"]:
        run.pop("resiliency", None)
    return stack_with(stack, training=training, **keys)


def test_the_training_namespaces_are_opted_in_and_every_gpu_pod_names_its_checks() -> None:
    run = run_stack("teams", values=stack_with("teams", nvsentinel=ON))
    labels = namespace_labels(run)
    teams = [t["namespace"] if "namespace" in t else t["name"] for t in load_stack_values("teams")["nemo-gke:teams"]]
    for namespace in ["nemo", *teams]:
        assert labels[namespace][nvsentinel.PREFLIGHT_NAMESPACE_LABEL] == nvsentinel.PREFLIGHT_ENABLED, namespace
        # The webhook mounts the node's platform-connector socket from the host into each check.
        assert labels[namespace]["pod-security.kubernetes.io/enforce"] == "privileged", namespace
    # The controllers' namespaces run no training pod.
    assert nvsentinel.PREFLIGHT_NAMESPACE_LABEL not in labels["kueue-system"]
    annotations = pod_annotations(run)
    assert annotations
    # A3 Ultra's pods mount gIB as `gib`, which the webhook does not copy into the checks, and set
    # NCCL_NET=gIB, which it does: NCCL's loopback there would not find its plugin.
    for name, found in annotations.items():
        assert found[nvsentinel.PREFLIGHT_CHECKS_ANNOTATION] == nvsentinel.PREFLIGHT_DCGM_DIAG, name
    plans = run.exports["training"]["runs"]
    assert plans and all(p["plan"]["nodeChecksAtStart"] == [nvsentinel.PREFLIGHT_DCGM_DIAG] for p in plans.values())
    left_out = [w.message for w in run.warnings if "preflight-nccl-loopback left out" in w.message]
    assert left_out and all("GPUDirect mounts gib are not" in w for w in left_out), left_out


def test_the_loopback_check_runs_where_the_webhook_copies_the_pod_s_nccl_wiring() -> None:
    """An existing cluster's pods use the pod network (no GPUDirect mount); dev's A3 High pods
    reach GPUDirect-TCPX's receive daemon through a `tcpx-socket` mount the webhook leaves behind."""
    run = run_stack("existing", values=stack_with("existing", nvsentinel=ON))
    (found,) = pod_annotations(run).values()
    assert found[nvsentinel.PREFLIGHT_CHECKS_ANNOTATION] == "preflight-dcgm-diag,preflight-nccl-loopback"
    assert not [w for w in run.warnings if "left out" in w.message]
    dev = run_stack("dev", values=stack_with("dev", nvsentinel=ON))
    assert [a[nvsentinel.PREFLIGHT_CHECKS_ANNOTATION] for a in pod_annotations(dev).values()] == ["preflight-dcgm-diag"]
    assert [w for w in dev.warnings if "GPUDirect mounts tcpx-socket are not" in w.message]


def test_a_fabric_check_s_pods_name_the_same_checks() -> None:
    run = run_stack("a3ultra", values=with_fabric_check("a3ultra", nvsentinel=ON))
    annotations = pod_annotations(run)
    assert len(annotations) == 2, annotations
    assert {a[nvsentinel.PREFLIGHT_CHECKS_ANNOTATION] for a in annotations.values()} == {"preflight-dcgm-diag"}
    assert [w for w in run.warnings if w.message.startswith("fabric check fabric on a3-ultragpu-8g: preflight-nccl")]


def test_without_preflight_nothing_is_labelled_or_annotated(render: Render) -> None:
    run = render("teams")
    assert not [n for n, labels in namespace_labels(run).items() if nvsentinel.PREFLIGHT_NAMESPACE_LABEL in labels]
    assert not [n for n, a in pod_annotations(run).items() if nvsentinel.PREFLIGHT_CHECKS_ANNOTATION in a]


def test_the_go_no_go_counts_the_checks_in_every_start(render: Render) -> None:
    (line,) = run_stack("existing", values=stack_with("existing", nvsentinel=ON)).exports["summary"]["runs"]
    (before,) = render("existing").exports["summary"]["runs"]
    assert line["firstStepS"] == pytest.approx(before["firstStepS"] + nvsentinel.PREFLIGHT_DCGM_DIAG_SECONDS)
    (term,) = [t for t in line["firstStepTerms"] if t.startswith("preflight:")]
    assert "120 s" in term and "on every start" in term and "preflight-nccl-loopback: no public figure" in term
    assert not [t for t in before["firstStepTerms"] if t.startswith("preflight:")]


@pytest.mark.parametrize(
    ("checks", "key", "words"),
    [
        (["preflight-nccl-allreduce"], "nvsentinel.preflight.checks[0]", "fabricCheck tests the network"),
        (["preflight-gpu-burn"], "nvsentinel.preflight.checks[0]", "is not one of preflight-dcgm-diag"),
        (["preflight-dcgm-diag", "preflight-dcgm-diag"], "nvsentinel.preflight.checks[1]", "is also checks[0]"),
        ([], "nvsentinel.preflight.checks", "must include preflight-dcgm-diag"),
        # Left out of GPUDirect pods, it would leave them with no check.
        (["preflight-nccl-loopback"], "nvsentinel.preflight.checks", "must include preflight-dcgm-diag"),
    ],
)
def test_checks_the_webhook_would_refuse_or_cannot_run_are_refused_by_key(
    checks: list[str], key: str, words: str
) -> None:
    values = stack_with("dev", nvsentinel={"preflight": {"enabled": True, "checks": checks}})
    assert words in issue_for(rejected(values), key)


def test_a_manager_leaves_preflight_to_its_workers() -> None:
    values = stack_with("manager", nvsentinel=ON)
    assert "set it in the worker stacks" in issue_for(rejected(values, "manager"), "nvsentinel")


def test_a_manager_s_workers_must_name_the_same_checks() -> None:
    """A dispatched run's pods carry the first worker's checks: another worker's webhook would
    refuse a check it does not run, or run others."""
    eu = stack_with("worker-eu", nvsentinel=ON)
    outputs = {
        qualified_stack_name("worker-us"): run_stack("worker-us").exports,
        qualified_stack_name("worker-eu"): run_stack("worker-eu", values=eu).exports,
    }
    error = rejected(stack_with("manager"), "manager", upstream=outputs)
    assert "names preflightChecks" in issue_for(error, "multiKueue.workers[1]")


def test_an_existing_cluster_s_namespace_admits_what_the_webhook_adds() -> None:
    """existing's pods need only the Baseline policy, which forbids host paths."""
    before = namespace_labels(run_stack("existing"))["nemo"]["pod-security.kubernetes.io/enforce"]
    after = namespace_labels(run_stack("existing", values=stack_with("existing", nvsentinel=ON)))["nemo"]
    assert (before, after["pod-security.kubernetes.io/enforce"]) == ("baseline", "privileged")


def test_an_existing_namespace_is_left_to_its_owner_with_a_warning() -> None:
    values = load_stack_values("existing")
    cluster = {**values["nemo-gke:existingCluster"], "namespaceExists": True}
    run = run_stack("existing", values=stack_with("existing", existingCluster=cluster, nvsentinel=ON))
    (warning,) = [w.message for w in run.warnings if "nvsentinel.preflight" in w.message]
    assert f"label it {nvsentinel.PREFLIGHT_NAMESPACE_LABEL}={nvsentinel.PREFLIGHT_ENABLED}" in warning
    assert all(
        a[nvsentinel.PREFLIGHT_CHECKS_ANNOTATION] == "preflight-dcgm-diag,preflight-nccl-loopback"
        for a in pod_annotations(run).values()
    )
