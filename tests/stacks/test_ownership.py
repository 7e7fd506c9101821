"""The stack's mark on its Kubernetes objects, and what it may take over on a cluster
(planners.ownership, stacks.ownership): an interrupted `up` converges by taking what it left
behind, and nothing else is taken (issue 18, item 3.9)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from config.loader import ConfigError
from facts.kubernetes import KUEUE_API, STACK_ANNOTATION
from facts.pulumi_cli import SECRET_STAND_IN, SHOWN_ERROR_EXIT_CODE
from harness import updates
from harness.mocks import RecordedResource
from harness.runner import (
    ROOT,
    StackFailed,
    StackRun,
    load_stack_values,
    objects_reader,
    recorded_state,
    run_stack,
    stack_names,
    unmarked,
)
from harness.stackfile import to_pulumi_config
from planners.ownership import ObjectRef, installer, ownership, shown
from stacks import kubeapi
from stacks.kubeapi import ClusterUnreadable, Kubeconfig
from tests.conftest import Render

EXISTING = "existing"
IDENTITY = f"organization/nemo-gke/{EXISTING}"
QUEUE = ObjectRef(KUEUE_API, "ClusterQueue", None, "a3-queue")
NAMESPACE = ObjectRef("v1", "Namespace", None, "nemo")
HELM = "kubernetes:helm.sh/v3:Release"


def live(*, mark: str | None = None, managers: Sequence[str] = ("kubectl-client-side-apply",), **meta: Any) -> Any:
    """An object as the API server returns it: its mark, if any, and its field managers."""
    annotations = {STACK_ANNOTATION: mark} if mark else {}
    return {
        "metadata": {
            "annotations": {**annotations, **meta.get("annotations", {})},
            "labels": meta.get("labels", {}),
            "managedFields": [{"manager": m, "operation": "Apply"} for m in managers],
        }
    }


def objects(run: StackRun) -> list[RecordedResource]:
    return [r for r in run.kubernetes_objects if r.type != HELM]


# --------------------------------------------------------------------------- whose an object is


def test_an_object_is_the_stacks_when_it_carries_the_stacks_mark() -> None:
    found = ownership({QUEUE: live(mark=IDENTITY), NAMESPACE: None}, IDENTITY)
    assert found.foreign == () and found.unmarked == ()


def test_another_stacks_helms_or_kubectls_object_is_refused_with_who_wrote_it() -> None:
    other = ObjectRef(KUEUE_API, "WorkloadPriorityClass", None, "nemo-high")
    helm = ObjectRef("v1", "ServiceAccount", "nemo", "nemo-training")
    found = ownership(
        {
            QUEUE: live(),
            other: live(mark="acme/nemo-gke/team-b", managers=("pulumi-kubernetes-1a2b3c4d",)),
            helm: live(annotations={"meta.helm.sh/release-name": "llm", "meta.helm.sh/release-namespace": "nemo"}),
        },
        IDENTITY,
    )
    assert dict(found.foreign) == {
        QUEUE: "with kubectl or another tool",
        other: "by the Pulumi stack acme/nemo-gke/team-b",
        helm: "by the Helm release llm in nemo",
    }
    assert found.unmarked == ()


def test_an_unmarked_object_pulumi_wrote_is_taken_as_the_stacks_own_from_before_the_mark() -> None:
    """Stacks deployed before the mark existed: their objects were written by the provider's field
    managers (provider.go fieldManagerName: pulumi-kubernetes-<random> under server-side apply,
    pulumi-kubernetes under client-side apply), and their next `up` marks them."""
    for manager in ("pulumi-kubernetes-0f3c9a1e", "pulumi-kubernetes", "pulumi-resource-kubernetes"):
        found = ownership({QUEUE: live(managers=("kueue", manager))}, IDENTITY)
        assert found == type(found)(foreign=(), unmarked=(QUEUE,)), manager
    assert installer(live(managers=("pulumi-kubernetes-0f3c9a1e",))) == "by a Pulumi program"


def test_objects_are_named_as_kubectl_names_them_and_long_lists_are_cut() -> None:
    claim = ObjectRef("v1", "PersistentVolumeClaim", "nemo", "data")
    assert [str(QUEUE), str(claim)] == ["ClusterQueue a3-queue", "PersistentVolumeClaim nemo/data"]
    refs = [ObjectRef("v1", "ConfigMap", "nemo", f"c{i}") for i in range(5)]
    assert shown(refs) == "ConfigMap nemo/c0, ConfigMap nemo/c1, ConfigMap nemo/c2 and 2 more"


# --------------------------------------------------------------------------- the mark


@pytest.mark.parametrize("stack", [name for name in stack_names() if name != "bootstrap"])
def test_every_kubernetes_object_carries_the_stacks_fully_qualified_name(stack: str, render: Render) -> None:
    """What an interrupted `up` leaves behind must be told from anyone else's object of the same
    name. Helm releases are not marked: Helm refuses objects another release or tool wrote
    (helm/helm pkg/action/validate.go)."""
    run = render(stack)
    assert objects(run)
    for resource in objects(run):
        annotations = run.manifest(resource)["metadata"].get("annotations") or {}
        assert annotations.get(STACK_ANNOTATION) == f"organization/nemo-gke/{stack}", resource.urn


@pytest.mark.parametrize("stack", [EXISTING, "a3ultra", "manager"])
def test_marking_a_stack_deployed_before_the_mark_patches_its_objects_and_replaces_none(
    stack: str, render: Render
) -> None:
    """The first `up` after the upgrade: the mark is a new annotation, which the provider patches
    (harness.updates: no force-new field, no replaceOnChanges path): no object is replaced or
    re-created. A submitted run's objects are kept as they are (planners.submitted), unmarked."""
    after = render(stack)
    before = StackRun(
        stack=stack,
        preview=False,
        resources=[RecordedResource(**{**r.__dict__, "inputs": unmarked(r.inputs)}) for r in after.resources],
        invokes=[],
        warnings=[],
    )
    steps = updates.plan(before, after)
    assert steps
    for urn, (_, new, step) in steps.items():
        if new.type == HELM or new.replacement_trigger is not None:
            assert step.op == "same", urn
        else:
            assert step.op == "update", urn
            assert step.paths in ((f"metadata.annotations.{STACK_ANNOTATION}",), ("metadata.annotations",)), urn


@pytest.mark.parametrize("stack", [EXISTING, "a3ultra", "run-llama8b"])
def test_every_kubernetes_provider_creates_over_what_an_interrupted_up_left(stack: str, render: Render) -> None:
    """pulumi-kubernetes v4.29+ fails a create with AlreadyExists where the object exists
    (pulumi/pulumi-kubernetes#4278), so after an interrupted `up` every later `up` failed (issue 18,
    3.9). `upsertExistingObjects` applies over it instead; added to a deployed provider it is an
    update, not a replacement (provider.go DiffConfig replaces only for another cluster)."""
    providers = render(stack).of_type("pulumi:providers:kubernetes")
    assert providers
    for provider in providers:
        assert provider.inputs.get("upsertExistingObjects") in (True, "true"), provider.urn


# --------------------------------------------------------------------------- the existing cluster's names


def refusal(live_objects: Mapping[ObjectRef, Any]) -> StackFailed:
    with pytest.raises(StackFailed) as failed:
        run_stack(EXISTING, read_objects=objects_reader(live_objects))
    assert isinstance(failed.value.error, ConfigError), failed.value.error
    return failed.value


def test_an_object_of_the_stacks_name_that_another_wrote_is_refused_by_name() -> None:
    failed = refusal({QUEUE: live(), NAMESPACE: live(mark="acme/nemo-gke/team-b")})
    lines = str(failed.error).splitlines()[1:]
    assert lines == [
        '  nemo-gke:existingCluster.name = "team-a3ultra": ClusterQueue a3-queue is already on the cluster, written '
        "with kubectl or another tool: this stack would take it over, and delete it on destroy; remove it, or give "
        "this stack's objects other names (its namespace, its pools' names)",
        '  nemo-gke:namespace = "nemo": Namespace nemo is already on the cluster, written by the Pulumi stack '
        "acme/nemo-gke/team-b: this stack would take it over, and delete it on destroy; to use it as it is, set "
        "existingCluster.namespaceExists: true; or choose another namespace",
    ]


def test_the_stacks_own_objects_and_the_unmarked_ones_pulumi_wrote_are_taken() -> None:
    mine = {QUEUE: live(mark=IDENTITY, managers=("pulumi-kubernetes-0f3c9a1e",))}
    assert not [w for w in run_stack(EXISTING, read_objects=objects_reader(mine)).warnings if "mark" in w.message]
    older = {QUEUE: live(managers=("pulumi-kubernetes-0f3c9a1e",)), NAMESPACE: live(managers=("pulumi-kubernetes",))}
    (warning,) = [w for w in run_stack(EXISTING, read_objects=objects_reader(older)).warnings if "mark" in w.message]
    assert warning.message.startswith(
        "2 objects of this stack's names on the cluster were written by Pulumi without the stack's mark "
        "(ClusterQueue a3-queue, Namespace nemo): taken as this stack's own"
    )


def test_a_run_an_interrupted_up_left_is_taken_with_its_definition_and_refused_with_another() -> None:
    """A run's JobSet of this stack that its state does not hold (an `up` killed after the API
    server created it): the next `up` applies over it, which takes it as it is; changed meanwhile,
    the JobSet webhook would refuse that apply, so the program refuses first, naming the JobSet."""
    run = run_stack(EXISTING)
    (jobset,) = [run.manifest(r) for r in run.of_type("kubernetes:jobset.x-k8s.io/v1alpha2:JobSet")]
    ref = ObjectRef(jobset["apiVersion"], "JobSet", "nemo", jobset["metadata"]["name"])
    run_stack(EXISTING, read_objects=objects_reader({ref: jobset}))
    values = load_stack_values(EXISTING)
    values["nemo-gke:training"]["runs"][0]["steps"] = 30
    with pytest.raises(StackFailed) as failed:
        run_stack(EXISTING, values=values, read_objects=objects_reader({ref: jobset}))
    assert isinstance(failed.value.error, ConfigError) and not failed.value.resources
    assert str(failed.value.error).splitlines()[1:] == [
        "  nemo-gke:training.runs[0].steps = 30: run llama3-8b's JobSet nemo/llama3-8b is on the cluster, marked "
        "with this stack, and its state does not hold it (an interrupted `pulumi up` submitted it); it runs another "
        "definition (steps 20 → 30): put those values back to take it over, or delete it first (kubectl -n nemo "
        "delete jobset llama3-8b)"
    ]
    # Killed after the state recorded the run's TrainingRun, before its JobSet: a raised revision
    # would submit a second JobSet beside the first.
    state = {urn: entry for urn, entry in recorded_state(run).items() if not urn.endswith("-jobset")}
    raised = load_stack_values(EXISTING)
    raised["nemo-gke:training"]["runs"][0]["revision"] = 2
    with pytest.raises(StackFailed) as failed:
        run_stack(EXISTING, values=raised, read_objects=objects_reader({ref: jobset}), recorded=state)
    (line,) = str(failed.value.error).splitlines()[1:]
    assert line.startswith("  nemo-gke:training.runs[0].revision = 2: run llama3-8b's JobSet nemo/llama3-8b is on")
    assert "submitted it at revision 1): this `up` would submit llama3-8b-r2 beside it; put revision 1 back" in line
    # Another stack's JobSet of the name is refused as any object of the stack's names is.
    theirs = {**jobset, "metadata": {**jobset["metadata"], "annotations": {STACK_ANNOTATION: "acme/nemo-gke/b"}}}
    with pytest.raises(StackFailed) as failed:
        run_stack(EXISTING, values=values, read_objects=objects_reader({ref: theirs}))
    assert "JobSet nemo/llama3-8b is already on the cluster, written by the Pulumi stack acme/nemo-gke/b" in str(
        failed.value.error
    )


def test_every_object_of_a_plain_name_is_looked_for_and_the_rest_sit_in_the_stacks_namespace() -> None:
    """Objects named by their namespace's output are the stack's once their namespace is: that
    namespace, created by the stack, is looked for itself."""
    asked: list[ObjectRef] = []

    def reader(kubeconfig: Kubeconfig, refs: Sequence[ObjectRef]) -> dict[ObjectRef, Any]:
        asked.extend(refs)
        return dict.fromkeys(refs)

    run = run_stack(EXISTING, read_objects=reader)
    written = {
        ObjectRef(m["apiVersion"], m["kind"], m["metadata"].get("namespace"), m["metadata"]["name"])
        for m in map(run.manifest, objects(run))
    }
    assert set(asked) <= written and NAMESPACE in asked and QUEUE in asked
    assert {ref.namespace for ref in written - set(asked)} == {"nemo"}


def test_an_unreadable_cluster_stops_the_stack_and_an_encrypted_kubeconfig_is_not_read_by_the_render() -> None:
    def unreachable(kubeconfig: Kubeconfig, refs: Sequence[ObjectRef]) -> dict[ObjectRef, Any]:
        raise ClusterUnreadable("cannot reach https://10.0.0.2: timed out")

    with pytest.raises(StackFailed) as failed:
        run_stack(EXISTING, read_objects=unreachable)
    assert "could not be read to check that the stack's names are free: cannot reach" in str(failed.value.error)
    values = load_stack_values(EXISTING)
    cluster = {k: v for k, v in values["nemo-gke:existingCluster"].items() if k != "kubeconfigPath"}
    values["nemo-gke:existingCluster"] = {**cluster, "kubeconfig": SECRET_STAND_IN}
    run_stack(EXISTING, values=values, read_objects=unreachable)


def test_anything_that_goes_wrong_reading_the_cluster_refuses() -> None:
    """The objects are built when the check runs: only a refusal keeps them from the engine
    (stacks.program.main), so an unexpected answer refuses as an unreachable cluster does."""

    def garbled(kubeconfig: Kubeconfig, refs: Sequence[ObjectRef]) -> dict[ObjectRef, Any]:
        raise ValueError("Expecting value: line 1 column 1 (char 0)")

    with pytest.raises(StackFailed) as failed:
        run_stack(EXISTING, read_objects=garbled)
    assert isinstance(failed.value.error, ConfigError)
    assert "could not be read to check that the stack's names are free: Expecting value" in str(failed.value.error)


def test_in_a_namespace_the_stack_reads_its_objects_are_looked_for_there() -> None:
    """`existingCluster.namespaceExists`: the namespace is the cluster's (read, not written, not
    marked), and the objects named by its output are looked for in it."""
    values = load_stack_values(EXISTING)
    cluster = {k: v for k, v in values["nemo-gke:existingCluster"].items() if k != "storageClass"}
    claims = {"shared": "team-shared", "data": "team-data", "checkpoints": "team-data"}
    values["nemo-gke:existingCluster"] = {**cluster, "namespaceExists": True, "claims": claims}
    values["nemo-gke:namespace"] = "llm-team"
    account = ObjectRef("v1", "ServiceAccount", "llm-team", "nemo-training")
    with pytest.raises(StackFailed) as failed:
        run_stack(EXISTING, values=values, read_objects=objects_reader({account: live()}))
    assert "ServiceAccount llm-team/nemo-training is already on the cluster" in str(failed.value.error)
    asked: list[ObjectRef] = []

    def reader(kubeconfig: Kubeconfig, refs: Sequence[ObjectRef]) -> dict[ObjectRef, Any]:
        asked.extend(refs)
        return dict.fromkeys(refs)

    run = run_stack(EXISTING, values=values, read_objects=reader)
    assert {ref.namespace for ref in asked} == {None, "llm-team"}
    assert ObjectRef("v1", "ServiceAccount", "llm-team", "nemo-training") in asked
    assert not [ref for ref in asked if ref.kind == "Namespace"]
    (namespace,) = [r for r in run.resources if r.read and r.type.endswith(":Namespace")]
    assert STACK_ANNOTATION not in json.dumps(namespace.inputs)


def test_objects_are_read_where_the_apis_discovery_puts_them(monkeypatch: pytest.MonkeyPatch) -> None:
    """kubectl's path for an object: /api/v1 or /apis/<group>/<version>, the resource's plural
    from that API's discovery document, /namespaces/<ns> for a namespaced one; a kind the cluster
    does not serve yet (a CRD the stack installs) has no objects."""
    served = {
        "/api/v1": {
            "resources": [
                {"name": "namespaces", "kind": "Namespace", "namespaced": False},
                {"name": "configmaps", "kind": "ConfigMap", "namespaced": True},
            ]
        },
        f"/apis/{KUEUE_API}": {
            "resources": [
                {"name": "topologies", "kind": "Topology", "namespaced": False},
                {"name": "topologies/status", "kind": "Topology", "namespaced": False},
            ]
        },
        f"/apis/{KUEUE_API}/topologies/gke-default": {"kind": "Topology"},
    }
    asked: list[str] = []

    class Client:
        def __enter__(self) -> Any:
            return lambda path: asked.append(path) or served.get(path)

        def __exit__(self, *exc: object) -> None:
            return None

    monkeypatch.setattr(kubeapi, "connected", lambda kubeconfig: Client())
    refs = [
        ObjectRef(KUEUE_API, "Topology", None, "gke-default"),
        ObjectRef("v1", "ConfigMap", "nemo", "files"),
        ObjectRef("jobset.x-k8s.io/v1alpha2", "JobSet", "nemo", "run"),
        ObjectRef("v1", "ConfigMap", None, "scopeless"),
    ]
    found = kubeapi.read_live(Kubeconfig(None, "/dev/null", None), refs)
    assert found == {refs[0]: {"kind": "Topology"}, refs[1]: None, refs[2]: None, refs[3]: None}
    assert asked == [
        "/apis/jobset.x-k8s.io/v1alpha2",
        f"/apis/{KUEUE_API}",
        f"/apis/{KUEUE_API}/topologies/gke-default",
        "/api/v1",
        "/api/v1/namespaces/nemo/configmaps/files",
    ]


# --------------------------------------------------------------------------- nothing registered


REFUSED_UNDER_THE_LANGUAGE_HOST = """
import asyncio, json, os, sys
sys.path.insert(0, {root!r})
import pulumi
from pulumi.runtime import settings
from pulumi.runtime.stack import run_pulumi_func
from harness.mocks import RecordingEngine, RecordingMocks, RecordingMonitor
from harness.runner import objects_reader, read_pinned_crds, stand_in_kubeconfig
from planners.ownership import ObjectRef
from stacks import program

class Monitor(RecordingMonitor):
    def _record(self, request, urn, inputs, *, read):
        with open({log!r}, "a") as sent:
            sent.write(request.type + "\\n")
        super()._record(request, urn, inputs, read=read)

class Engine(RecordingEngine):
    def Log(self, request):
        print(request.message, flush=True)

os.environ["PULUMI_CONFIG"] = {config!r}
os.environ["PULUMI_CONFIG_SECRET_KEYS"] = "[]"
mocks = RecordingMocks(project="p", preview=False, upstream={{}})
settings.ROOT.set(None)
pulumi.runtime.set_mocks(mocks, project="nemo-gke", stack="existing", preview=False, monitor=Monitor(mocks))
settings.SETTINGS.engine = Engine()
taken = {{ObjectRef("kueue.x-k8s.io/v1beta2", "ClusterQueue", None, "a3-queue"): {{"metadata": {{}}}}}}
run = program.run
program.run = lambda: run(read_pinned_crds, stand_in_kubeconfig, objects_reader(taken))
asyncio.get_event_loop().run_until_complete(run_pulumi_func(program.main))
"""


def test_a_refusal_after_the_objects_are_built_sends_none_of_them_to_the_engine(tmp_path: Path) -> None:
    """Under the language host (pulumi/runtime/stack.py `run_in_stack`, here its `run_pulumi_func`
    under the mocks), a program that ends by an exception has the SDK send every registration it
    queued first (`run_pulumi_func` waits for outstanding RPCs: 24 of this stack's, when main()
    raised SystemExit), and `pulumi up --skip-preview` would apply them. The refusal of a taken name
    comes once the objects are built; the program then ends at once with exit code 32: the error
    shown, and no registration sent."""
    log = tmp_path / "sent"
    log.touch()
    script = REFUSED_UNDER_THE_LANGUAGE_HOST.format(
        root=str(ROOT), log=str(log), config=json.dumps(to_pulumi_config(load_stack_values(EXISTING)))
    )
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert done.returncode == SHOWN_ERROR_EXIT_CODE, done.stderr[-2000:]
    assert "ClusterQueue a3-queue is already on the cluster" in done.stdout, done.stdout[-2000:]
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    assert log.read_text() == ""
