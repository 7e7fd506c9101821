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

from components.training import TrainingRun
from config.loader import ConfigError
from facts.kubernetes import KUEUE_API, QUEUE_NAME_LABEL
from harness import cel, updates
from harness.mocks import RecordedResource
from harness.runner import (
    StackFailed,
    StackRun,
    load_stack_values,
    recorded_state,
    run_stack,
    stack_names,
    stack_with,
)
from planners import nemo, workload
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
    `spec.suspend` is Kueue's alone, and the provider never sees the fields Kueue added."""
    assert {StackRun.manifest(new)["kind"] for _, _, new in jobs} == {"JobSet", "Job"}
    for stack, old, new in jobs:
        live = admitted(StackRun.manifest(old))
        assert updates.step(old, new, live) == updates.Step("same"), (stack, old.urn)
        assert updates.step(updates.refreshed(old, live), new, live) == updates.Step("same"), (stack, old.urn)


def test_what_the_program_queues_leaves_suspend_to_kueue(
    jobs: list[tuple[str, RecordedResource, RecordedResource]],
) -> None:
    """Kueue's webhook suspends a job that names a queue as it is created (components.training.
    REPLACE_JOB), so no JobSet or Job the program queues writes `spec.suspend`. The rule can fail: a
    job that wrote it, without an ignoreChanges path to hide it, would read back from a refresh of
    the admitted job (false) unlike the program's (true), and the next `up` would patch or replace it."""
    queued = [
        (old, new) for _, old, new in jobs if QUEUE_NAME_LABEL in StackRun.manifest(old)["metadata"].get("labels", {})
    ]
    assert queued and all("suspend" not in StackRun.manifest(old)["spec"] for old, _ in queued)
    old, new = queued[0]
    live = admitted(StackRun.manifest(old))

    def written(resource: RecordedResource) -> RecordedResource:
        manifest = StackRun.manifest(resource)
        inputs = {**manifest, "spec": {**manifest["spec"], "suspend": True}}
        return RecordedResource(**{**resource.__dict__, "inputs": inputs, "ignore_changes": []})

    step = updates.step(updates.refreshed(written(old), live), written(new), live)
    assert step.op != "same" and "spec.suspend" in step.paths


def test_an_unchanged_stack_changes_nothing(render: Render) -> None:
    """Every name derived from a digest is the same on every run of the program."""
    for stack in ("dev", "a3high-small"):
        plan = updates.plan(render(stack), render(stack, values=load_stack_values(stack)))
        assert plan and {step.op for _, _, step in plan.values()} == {"same"}, stack


def _changed(render: Render, stack: str, values: dict[str, Any]) -> dict[str, tuple[Any, Any, updates.Step]]:
    return {urn: v for urn, v in updates.plan(render(stack), render(stack, values=values)).items() if v[2].op != "same"}


def _runs_with(values: dict[str, Any], **keys: Any) -> dict[str, Any]:
    """The stack's values with the first run's `keys` set."""
    runs = copy.deepcopy(values["nemo-gke:training"]["runs"])
    runs[0].update(keys)
    return {**values, "nemo-gke:training": {**values["nemo-gke:training"], "runs": runs}}


def test_an_upgrade_of_the_launcher_leaves_every_submitted_run_alone(
    render: Render, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new launcher (any change of what the program renders for a run) reaches new runs only:
    each submitted run's ConfigMap and JobSet are kept as they are, and the update says so once
    per run. gpu-recipes (a `helm install` per run) and xpk (a `kubectl apply`) leave a submitted
    run alone just so."""
    before = render("dev")
    workload_files = nemo.workload_files

    def upgraded(*args: Any) -> dict[str, str]:
        files = workload_files(*args)
        return {**files, workload.LAUNCHER: files[workload.LAUNCHER] + "# upgraded\n"}

    monkeypatch.setattr(nemo, "workload_files", upgraded)
    after = run_stack("dev", recorded=recorded_state(before))
    plan = updates.plan(before, after)
    runs = {urn: step for urn, (_, new, step) in plan.items() if new.type in (JOBSET, CONFIG_MAP)}
    assert runs and set(runs.values()) == {updates.Step("same")}
    assert any(
        StackRun.manifest(new)["data"] != StackRun.manifest(old)["data"]
        for old, new, _ in plan.values()
        if new.type == CONFIG_MAP
    ), "the launcher changed"
    (notice,) = after.infos
    assert "run gpt5b-demo: JobSet nemo/gpt5b-demo is kept as submitted at revision 1" in notice.message
    # Without the frozen fields, the same upgrade replaces the running run's ConfigMap.
    old, new, _ = next(v for v in plan.values() if v[1].type == CONFIG_MAP)
    unfrozen = RecordedResource(**{**new.__dict__, "ignore_changes": []})
    assert updates.step(old, unfrozen).op == "replace"


def test_a_changed_run_is_refused_at_its_submitted_revision(render: Render) -> None:
    """A change of a submitted run's own keys would replace it (a JobSet's replicated jobs cannot
    be patched: sigs.k8s.io/jobset pkg/webhooks/jobset_webhook.go ValidateUpdate); at the revision
    it was submitted with, it is refused by key before anything is registered."""
    before = render("dev")
    with pytest.raises(StackFailed) as failed:
        run_stack("dev", values=_runs_with(load_stack_values("dev"), steps=80), recorded=recorded_state(before))
    assert isinstance(failed.value.error, ConfigError) and not failed.value.resources
    (issue,) = failed.value.error.issues
    assert issue.key == "training.runs[0].steps" and issue.value == 80
    assert issue.message == (
        "changes run gpt5b-demo, submitted at revision 1 (steps 50 → 80): raise revision to 2 to replace the run with "
        "this definition (its pods stop, and the new JobSet resumes from its checkpoints), or put the submitted values "
        "back"
    )
    # A new stack (nothing recorded) takes the same values.
    run_stack("dev", values=_runs_with(load_stack_values("dev"), steps=80))


def test_a_revision_only_rises(render: Render) -> None:
    recorded = recorded_state(render("dev", values=_runs_with(load_stack_values("dev"), revision=3)))
    with pytest.raises(StackFailed) as failed:
        run_stack("dev", values=_runs_with(load_stack_values("dev"), revision=2), recorded=recorded)
    assert isinstance(failed.value.error, ConfigError)
    assert [(i.key, i.value) for i in failed.value.error.issues] == [("training.runs[0].revision", 2)]


@pytest.mark.parametrize("change", [{"steps": 80, "revision": 2}, {"revision": 2}], ids=["changed", "unchanged"])
def test_raising_the_revision_replaces_the_run_under_new_names(render: Render, change: dict[str, Any]) -> None:
    """Raised, the revision replaces the run's objects and nothing else, under names that carry it
    (a preview's dry-run create never lands on the running JobSet, whose immutable fields it would
    be refused on). The old JobSet is deleted first (it frees its nodes, and two of one run never
    train at once); the new ConfigMap is created beside the old, which goes last, once no pod mounts
    it. Unchanged, that submits the run again; either way the update names the JobSet it replaces."""
    before = render("dev")
    after = run_stack("dev", values=_runs_with(load_stack_values("dev"), **change), recorded=recorded_state(before))
    changed = {urn: v for urn, v in updates.plan(before, after).items() if v[2].op != "same"}
    steps = {new.type: (StackRun.manifest(old), StackRun.manifest(new), step) for old, new, step in changed.values()}
    assert set(steps) == {JOBSET, CONFIG_MAP}
    for kind, first in ((JOBSET, True), (CONFIG_MAP, False)):
        old, new, step = steps[kind]
        assert step == updates.Step("replace", ("replacementTrigger",), delete_before_replace=first), kind
        assert new["metadata"]["name"] == f"{old['metadata']['name']}-r2"
    (warning,) = [w for w in after.warnings if "revision 1 → 2" in w.message]
    assert warning.message.startswith(
        "run gpt5b-demo: revision 1 → 2 replaces JobSet nemo/gpt5b-demo with gpt5b-demo-r2: its pods stop"
    )
    assert after.exports["training"]["runs"]["gpt5b-demo"]["jobset"] == "gpt5b-demo-r2"


def test_a_run_an_earlier_nemo_gke_submitted_is_kept_then_replaced_when_its_revision_rises(render: Render) -> None:
    """A run submitted before revisions were recorded (its JobSet `<run>-<digest>`, its TrainingRun's
    outputs without revision or definition) is kept as it is, whatever its definition now, and the
    stack's outputs name its JobSet. That `up` records its revision and definition, as the engine
    records its trigger (a trigger recorded by none replaces nothing), so from then on the usual
    rules hold: a raised revision replaces it, and says so."""
    before = render("dev")
    state = recorded_state(before)
    for entry in state.values():
        if entry["type"] == TrainingRun.TYPE:
            entry["outputs"] = {"jobset": "gpt5b-demo-0a1b2c", "log_dir": entry["outputs"]["log_dir"]}
    first = run_stack("dev", values=_runs_with(load_stack_values("dev"), steps=80), recorded=state)
    assert first.exports["training"]["runs"]["gpt5b-demo"]["jobset"] == "gpt5b-demo-0a1b2c"
    (notice,) = first.infos
    assert notice.message == (
        "run gpt5b-demo: JobSet gpt5b-demo-0a1b2c was submitted by an earlier nemo-gke; it is kept as it is, and "
        "raising its revision replaces it"
    )
    raised = run_stack(
        "dev", values=_runs_with(load_stack_values("dev"), steps=80, revision=2), recorded=recorded_state(first)
    )
    (warning,) = [w for w in raised.warnings if "revision 1 → 2" in w.message]
    assert warning.message.startswith(
        "run gpt5b-demo: revision 1 → 2 replaces JobSet nemo/gpt5b-demo-0a1b2c with gpt5b-demo-r2"
    )
    with pytest.raises(StackFailed):
        run_stack("dev", values=_runs_with(load_stack_values("dev"), steps=90), recorded=recorded_state(first))


def _empty_lists(value: Any, path: str = "") -> list[str]:
    if isinstance(value, dict):
        return [found for key, item in value.items() for found in _empty_lists(item, f"{path}.{key}")]
    if isinstance(value, list):
        return [path] if not value else [f for i, item in enumerate(value) for f in _empty_lists(item, f"{path}[{i}]")]
    return []


@pytest.mark.parametrize("stack", stack_names())
def test_no_object_writes_an_empty_list_the_api_server_drops(render: Render, stack: str) -> None:
    """The API server leaves an empty list out of what it stores (`omitempty`): written, it reads
    back from `pulumi refresh` as a change, and `preview --expect-no-changes` fails (every
    Megatron-Bridge run wrote `args: []`)."""
    run = render(stack)
    found = {r.name: paths for r in run.kubernetes_objects if (paths := _empty_lists(StackRun.manifest(r)))}
    assert not found


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
