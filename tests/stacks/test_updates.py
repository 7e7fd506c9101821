"""What a second `pulumi up` does to the Kubernetes objects the first one created: after Kueue
admitted the runs and `pulumi refresh` read them back, and after the stack file changed.

harness/updates.py models the engine and the Kubernetes provider (each rule cited there); the
API server's CEL rules come from the pinned CRDs (harness/cel.py). What no model here covers, a
real engine and API server do: see the integration lane.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from facts.kubernetes import KUEUE_API
from harness import cel, updates
from harness.mocks import RecordedResource
from harness.runner import StackRun, load_stack_values, run_stack, stack_with
from tests.conftest import Render

JOBSET = "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"
JOB = "kubernetes:batch/v1:Job"
CONFIG_MAP = "kubernetes:core/v1:ConfigMap"
# Kinds Kueue keeps with its `resource-in-use` finalizer while anything refers to them
# (kueue@v0.19.2 pkg/controller/core/resourceflavor_controller.go, clusterqueue_controller.go):
# deleting one before its replacement exists waits until the update times out.
IN_USE_KINDS = {f"kubernetes:{KUEUE_API}:{kind}" for kind in ("ResourceFlavor", "ClusterQueue", "Topology")}


def _pod_templates(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    if manifest["kind"] == "JobSet":
        return [rj["template"]["spec"]["template"] for rj in manifest["spec"]["replicatedJobs"]]
    return [manifest["spec"]["template"]]


def admitted(manifest: dict[str, Any]) -> dict[str, Any]:
    """The object as it is live once Kueue admitted it and the controllers defaulted it: what
    kueue@v0.19.2 podset.Merge and RunWithPodSetsInfo write (pkg/podset/podset.go,
    pkg/controller/jobs/jobset/jobset_controller.go, job_controller.go), the JobSet webhook's
    defaults (sigs.k8s.io/jobset api/jobset/v1alpha2/default.go) and a status."""
    live = copy.deepcopy(manifest)
    live["spec"]["suspend"] = False
    live["metadata"].setdefault("annotations", {})["kueue.x-k8s.io/workload"] = "jobset-x-12345"
    for template in _pod_templates(live):
        spec, metadata = template["spec"], template.setdefault("metadata", {})
        spec.setdefault("nodeSelector", {})["autoscaling.gke.io/provisioning-request"] = "prov-1"
        spec.setdefault("tolerations", []).append({"key": "extra", "operator": "Exists", "effect": "NoSchedule"})
        spec["schedulingGates"] = [{"name": "kueue.x-k8s.io/topology"}]
        metadata.setdefault("labels", {})["kueue.x-k8s.io/podset"] = "workers"
        metadata.setdefault("annotations", {})["kueue.x-k8s.io/workload"] = "jobset-x-12345"
    if manifest["kind"] == "JobSet":
        live["spec"]["successPolicy"] = {"operator": "All"}
        live["spec"]["startupPolicy"] = {"startupPolicyOrder": "AnyOrder"}
        live["spec"]["network"]["subdomain"] = manifest["metadata"]["name"]
    else:
        live["spec"]["selector"] = {"matchLabels": {"batch.kubernetes.io/controller-uid": "uid"}}
    live["status"] = {"active": 1}
    return live


@pytest.fixture(scope="module")
def jobs(render: Render) -> list[tuple[str, RecordedResource, RecordedResource]]:
    """(stack, registered before, registered by a second run) for every run and data-preparation job."""
    found = []
    for stack in ("dev", "a3mega", "a3ultra", "a3high-small"):
        again = {r.urn: r for r in render(stack, values=load_stack_values(stack)).of_type(JOBSET, JOB)}
        found += [(stack, old, again[old.urn]) for old in render(stack).of_type(JOBSET, JOB)]
    return found


def test_refresh_and_up_leave_an_admitted_job_alone(jobs: list[tuple[str, RecordedResource, RecordedResource]]) -> None:
    """Kueue unsuspends an admitted job and merges its flavor into the pod template; `pulumi
    refresh` stores the live values as the inputs. The next `up` must neither suspend the job
    again (Kueue would evict it) nor replace it (a running run would restart from scratch):
    `spec.suspend` is ignored, and the provider never sees the fields Kueue added."""
    assert {StackRun.manifest(new)["kind"] for _, _, new in jobs} == {"JobSet", "Job"}
    for stack, old, new in jobs:
        live = admitted(StackRun.manifest(old))
        assert updates.step(old, new, live) == updates.Step("same"), (stack, old.urn)
        assert updates.step(updates.refreshed(old, live), new, live) == updates.Step("same"), (stack, old.urn)


def test_without_ignoring_suspend_a_refresh_would_replace_a_running_job(
    jobs: list[tuple[str, RecordedResource, RecordedResource]],
) -> None:
    """The rule above can fail: with `spec.suspend` no longer ignored, the refreshed input
    (false) differs from the program's (true)."""
    _, old, new = next(j for j in jobs if StackRun.manifest(j[1])["kind"] == "JobSet")
    live = admitted(StackRun.manifest(old))
    unguarded = RecordedResource(**{**new.__dict__, "ignore_changes": []})
    step = updates.step(updates.refreshed(old, live), unguarded, live)
    assert step.op != "same" and "spec.suspend" in step.paths


def test_an_unchanged_stack_changes_nothing(render: Render) -> None:
    """Every name derived from a digest is the same on every run of the program."""
    for stack in ("dev", "a3high-small"):
        plan = updates.plan(render(stack), render(stack, values=load_stack_values(stack)))
        assert plan and {step.op for _, _, step in plan.values()} == {"same"}, stack


def _changed(render: Render, stack: str, values: dict[str, Any]) -> dict[str, tuple[Any, Any, updates.Step]]:
    return {urn: v for urn, v in updates.plan(render(stack), render(stack, values=values)).items() if v[2].op != "same"}


def test_a_changed_run_is_a_new_jobset_of_a_new_name(render: Render) -> None:
    """A JobSet's replicated jobs cannot be patched once it runs (sigs.k8s.io/jobset
    pkg/webhooks/jobset_webhook.go ValidateUpdate), so a run whose definition changes is a new
    JobSet of a new name, never a patch; the old JobSet is deleted first (its nodes free for the
    new one), its ConfigMap is new too and created before the JobSet that mounts it. Nothing else
    in the stack changes."""
    values = load_stack_values("dev")
    runs = copy.deepcopy(values["nemo-gke:training"]["runs"])
    runs[0]["steps"] = 80
    changed = _changed(render, "dev", stack_with("dev", training={"runs": runs}))
    kinds = {new.type: step for _, new, step in changed.values()}
    assert set(kinds) == {JOBSET, CONFIG_MAP}, sorted(kinds)
    for old, new, step in changed.values():
        assert step.op == "replace", (new.urn, step)
        assert step.delete_before_replace is (new.type == JOBSET), (new.urn, step)
        assert StackRun.manifest(old)["metadata"]["name"] != StackRun.manifest(new)["metadata"]["name"]


def test_resubmitting_an_unchanged_run_deletes_it_first() -> None:
    """`pulumi up --replace <urn>` (the `resubmit` output) replaces a JobSet that keeps its name.
    A targeted replace carries no delete-first answer from the provider (pulumi/pulumi
    step_generator.go: "just return a replace diff that blames the id"), so without
    deleteBeforeReplace the engine creates first and the API server answers AlreadyExists
    (pulumi-kubernetes provider/pkg/await/await.go). Modelled: a replacement of the same name."""
    run = run_stack("dev")
    for resource in run.of_type(JOBSET, JOB):
        if "kueue.x-k8s.io/queue-name" not in StackRun.manifest(resource)["metadata"].get("labels", {}):
            continue
        forced = RecordedResource(**{**resource.__dict__, "replace_on_changes": ["metadata"]})
        relabelled = copy.deepcopy(StackRun.manifest(resource))
        relabelled["metadata"]["labels"]["resubmitted"] = "1"
        step = updates.step(resource, RecordedResource(**{**forced.__dict__, "inputs": relabelled}))
        assert step.op == "replace" and step.delete_before_replace, resource.urn


def _pool_to_zero(values: dict[str, Any]) -> dict[str, Any]:
    pools = copy.deepcopy(values["nemo-gke:gpuPools"])
    pools[0].pop("nodeCount", None)
    pools[0]["autoscaling"] = {"minNodes": 0, "maxNodes": 2}
    return pools


def _spot_to_queued(values: dict[str, Any]) -> dict[str, Any]:
    pools = copy.deepcopy(values["nemo-gke:gpuPools"])
    pools[1].pop("nodeCount", None)
    pools[1].update(autoscaling={"minNodes": 0, "maxNodes": 1}, capacity={"type": "queuedProvisioning"})
    return pools


CHANGES = {
    "a pool scales from zero": ("dev", lambda v: {"gpuPools": _pool_to_zero(v)}),
    "a spot pool becomes queued": ("a3high-small", lambda v: {"gpuPools": _spot_to_queued(v)}),
    "the ClusterQueue is renamed": ("dev", lambda v: {"kueue": {**v.get("nemo-gke:kueue", {}), "clusterQueue": "gpu"}}),
}


@pytest.mark.parametrize("change", list(CHANGES))
def test_every_change_is_one_the_api_server_and_kueue_accept(render: Render, change: str) -> None:
    """For each Kubernetes object a stack change touches: a patch passes the CRD's CEL
    transition rules (ResourceFlavor and Topology fields, LocalQueue.spec.clusterQueue are
    immutable: kueue@v0.19.2 apis/kueue/v1beta2/*_types.go), and an object Kueue guards with its
    in-use finalizer is never deleted before its replacement exists."""
    stack, overrides = CHANGES[change]
    values = stack_with(stack, **overrides(load_stack_values(stack)))
    changed = _changed(render, stack, values)
    assert changed, "the change touches the Kubernetes side"
    for old, new, step in changed.values():
        if step.op == "update":
            errors = cel.update_errors(StackRun.manifest(old), StackRun.manifest(new))
            assert not errors, (new.urn, errors)
            continue
        if new.type in IN_USE_KINDS:
            assert not step.delete_before_replace, (new.urn, step)
        # A replacement that keeps its name must delete first, or its create fails (AlreadyExists).
        old_meta, new_meta = StackRun.manifest(old)["metadata"], StackRun.manifest(new)["metadata"]
        if all(old_meta.get(key) == new_meta.get(key) for key in ("name", "namespace")):
            assert step.delete_before_replace, (new.urn, step)


def test_a_pool_change_moves_the_queue_to_a_new_flavor(render: Render) -> None:
    """The flavor of the changed pool is replaced under a new name, created before the
    ClusterQueue is patched to name it; the old one goes last, once no queue refers to it."""
    values = stack_with("dev", **CHANGES["a pool scales from zero"][1](load_stack_values("dev")))
    changed = _changed(render, "dev", values)
    steps = {new.type.rsplit(":", 1)[-1]: (new, step) for _, new, step in changed.values()}
    new, step = steps["ResourceFlavor"]
    assert step.op == "replace" and not step.delete_before_replace
    queue_new, queue_step = steps["ClusterQueue"]
    assert queue_step.op == "update"
    flavors = [f["name"] for f in StackRun.manifest(queue_new)["spec"]["resourceGroups"][0]["flavors"]]
    assert flavors == [StackRun.manifest(new)["metadata"]["name"]]
    assert new.urn in queue_new.all_dependencies
