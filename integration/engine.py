"""The integration lane's scenarios under the real Pulumi engine: the Pulumi CLI and the
kubernetes provider drive the `existing` stack (platform and training), a run-only stack on top
of it, and the same stack in a namespace and on claims the cluster has, against the lane's
cluster, through the Automation API, with a local file backend and a passphrase secrets provider.

tests/integration/test_engine.py runs each scenario as a test (`make integration`, or
`make integration-engine` alone). The `pulumi` CLI and `pulumi-resource-kubernetes` are taken
from $PULUMI_BIN_DIR, else ~/.cache/nemo-gke/integration/pulumi, where `make integration-tools`
builds them (integration/versions.sh); without them the scenarios are skipped, saying why.

Every scenario is an assertion on what the engine did and what the real Kueue, JobSet and
scheduler then did on the cluster; each returns what it saw, in one line.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

from pulumi import automation as auto

from facts.controller_api import CONTROLLER_KINDS
from facts.kubernetes import JOBSET_API, KUEUE_API, STACK_ANNOTATION, TOPOLOGY_LABELS, TopologyLevel, stack_identity
from facts.project import PROJECT, SELF_MANAGED_ORGANIZATION
from harness.runner import StackRun, load_stack_values, run_stack
from harness.stackfile import to_pulumi_config
from integration.controlplane import CACHE, Api, Lane, has_condition, wait_for
from integration.lane import start
from integration.runs import api_path, claim_volumes, jobset_run, placed, stack_objects
from planners import nemo, workload
from planners.ownership import mark_of
from stacks import program

BIN_DIR = CACHE / "integration" / "pulumi"
BINARIES = ("pulumi", "pulumi-resource-kubernetes")
FIRST, RUN_ONLY, OWN_CLAIMS = "existing", "run-only", "own-claims"
# `pulumi destroy` of the platform and its run, with no manual step: measured at 7 to 8 s here.
DESTROY_BOUND_S = 120.0
# The interrupted `up` is killed as soon as the first of the stack's claims exists: the provider
# then awaits its binding (0.6 s here), so its create, at least, is in flight.
KILL_POLL_S = 0.02
# What the program creates at cluster scope; the rest lives in its namespaces.
CLUSTER_KINDS = {
    k.kind: f"/apis/{k.api}/{k.plural}"
    for k in CONTROLLER_KINDS
    if k.kind in ("ClusterQueue", "ResourceFlavor", "Topology", "WorkloadPriorityClass")
}


class ScenarioFailed(AssertionError):
    """A scenario's assertion did not hold: what was expected and what was found."""


def expect(condition: bool, message: str) -> None:
    if not condition:
        raise ScenarioFailed(message)


def binaries_dir(given: Path | None) -> Path | None:
    """The directory holding both binaries, or None."""
    folder = given or Path(os.environ.get("PULUMI_BIN_DIR", BIN_DIR))
    return folder if all((folder / name).is_file() for name in BINARIES) else None


def lane_values(kubeconfig: Path) -> dict[str, Any]:
    """The shipped `existing` stack pointed at the lane: its kubeconfig, Kueue and JobSet
    running as the lane's processes (install: false), no TensorBoard server."""
    values = load_stack_values(FIRST)
    values[f"{PROJECT}:existingCluster"] = {
        **values[f"{PROJECT}:existingCluster"],
        "kubeconfigPath": str(kubeconfig),
        "context": "lane",
    }
    values[f"{PROJECT}:kueue"] = {"install": False}
    values[f"{PROJECT}:tensorboard"] = {"enabled": False}
    return values


def run_only_values(first: Mapping[str, Any]) -> dict[str, Any]:
    """A run-only stack above the first, its run on NeMo 2 (the first's, as the `existing` example
    ships it, is on Megatron-Bridge): the lane drives both runtimes."""
    return {
        f"{PROJECT}:layers": ["training"],
        f"{PROJECT}:upstreamStack": FIRST,
        f"{PROJECT}:training": {"runs": [{"name": "second", "model": "llama3.1-8b", "nodes": 2, "steps": 10}]},
    }


def with_run(values: Mapping[str, Any], **keys: Any) -> dict[str, Any]:
    """`values` with the first run's `keys` set."""
    changed: dict[str, Any] = json.loads(json.dumps(values))
    changed[f"{PROJECT}:training"]["runs"][0].update(keys)
    return changed


@contextlib.contextmanager
def upgraded_program() -> Iterator[None]:
    """The program as a later nemo-gke renders a run: another launcher text, and one more variable
    in every training pod's environment. The inline program runs in this process, so it runs so."""
    workload_files, platform_env = nemo.workload_files, nemo.platform_env

    def files(*args: Any) -> dict[str, str]:
        found = workload_files(*args)
        return {**found, workload.LAUNCHER: found[workload.LAUNCHER] + "# a later nemo-gke\n"}

    def env(*args: Any) -> dict[str, str]:
        return {**platform_env(*args), "NEMO_GKE_UPGRADED": "1"}

    with mock.patch.object(nemo, "workload_files", files), mock.patch.object(nemo, "platform_env", env):
        yield


def record_step(steps: list[tuple[str, str, str]], event: auto.EngineEvent) -> None:
    """Each step of an update as the engine reports it: ("start" or "done", its op, the type)."""
    for when, found in (("start", event.resource_pre_event), ("done", event.res_outputs_event)):
        if found is not None:
            steps.append((when, str(found.metadata.op.value), found.metadata.type))


def line_with(text: str, output: str) -> str:
    """The line of `output` that holds `text`, stripped ("" for none)."""
    return next((line.strip() for line in output.splitlines() if text in line), "")


def own_claims_values(first: Mapping[str, Any], namespace: str, claims: Mapping[str, str]) -> dict[str, Any]:
    """The first stack in a namespace the cluster has, with the cluster's own claims."""
    values = json.loads(json.dumps(first))
    values[f"{PROJECT}:namespace"] = namespace
    cluster = values[f"{PROJECT}:existingCluster"]
    del cluster["storageClass"]
    cluster.update(namespaceExists=True, claims=dict(claims))
    return dict(values)


# --------------------------------------------------------------------------- the engine


@dataclass
class Engine:
    """Stacks of the program on a file backend under `workdir`, run by the binaries in `bin_dir`."""

    workdir: Path
    bin_dir: Path

    def env(self) -> dict[str, str]:
        return {
            "PULUMI_BACKEND_URL": (self.workdir / "state").as_uri(),
            "PULUMI_CONFIG_PASSPHRASE": "lane",
            "PULUMI_HOME": str(self.workdir / "home"),
            "PULUMI_SKIP_UPDATE_CHECK": "true",
            "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
            "PATH": f"{self.bin_dir}{os.pathsep}{os.environ['PATH']}",
        }

    def stack(self, name: str, values: Mapping[str, Any], *, as_cli: bool = False) -> auto.Stack:
        """The stack, with `values` as its config: handed to the program the way the Python
        language host hands them (PULUMI_CONFIG), which an inline program does not get.
        `as_cli`: the program ends as under the CLI's language host (stacks.program.main), which
        ends this process on a refusal: only for a stack run in a process of its own (`in_child`)."""
        (self.workdir / "state").mkdir(parents=True, exist_ok=True)
        config = json.dumps(to_pulumi_config(values))

        def body() -> None:
            os.environ["PULUMI_CONFIG"] = config
            os.environ["PULUMI_CONFIG_SECRET_KEYS"] = "[]"
            if as_cli:
                program.main()
            else:
                program.inline()

        return auto.create_or_select_stack(
            stack_name=name,
            project_name=PROJECT,
            program=body,
            opts=auto.LocalWorkspaceOptions(
                work_dir=str(self.workdir), env_vars=self.env(), pulumi_command=self.command()
            ),
        )

    def command(self) -> auto.PulumiCommand:
        # PulumiCommand takes an install root and runs <root>/bin/pulumi.
        root = self.workdir / "cli"
        if not (root / "bin" / "pulumi").exists():
            (root / "bin").mkdir(parents=True, exist_ok=True)
            (root / "bin" / "pulumi").symlink_to(self.bin_dir / "pulumi")
        return auto.PulumiCommand(root=str(root), skip_version_check=True)

    def in_child(self, name: str, values: Mapping[str, Any]) -> subprocess.Popen[str]:
        """`pulumi up` of the stack in a process group of its own, the program ending as under
        the CLI (`as_cli`): what a scenario can kill, or let refuse, as a user's `pulumi up`."""
        arguments = self.workdir / f"{name}-up.json"
        arguments.write_text(json.dumps({"workdir": str(self.workdir), "bin_dir": str(self.bin_dir), "values": values}))
        with (self.workdir / f"{name}-up.log").open("w") as log:
            return subprocess.Popen(
                [sys.executable, "-m", "integration.engine", "up", name, str(arguments)],
                cwd=Path(__file__).resolve().parents[1],
                start_new_session=True,
                stdout=log,
                stderr=subprocess.STDOUT,
                text=True,
            )

    def log(self, name: str) -> str:
        """What the last `in_child` of the stack printed."""
        return (self.workdir / f"{name}-up.log").read_text()

    def ended(self, child: subprocess.Popen[str], timeout: float = 180.0) -> int:
        """Wait for the child and every process of its group (the CLI, its provider) to end."""
        code = child.wait(timeout=timeout)

        def group_gone() -> bool:
            try:
                os.killpg(child.pid, 0)
            except ProcessLookupError:
                return True
            return False

        wait_for("the child's Pulumi CLI ended", group_gone, timeout=timeout)
        return code

    def processes(self) -> list[int]:
        """Every process run for this engine's stacks: the CLIs and the plugins they start, which
        the CLI puts in process groups of their own, found by the PULUMI_HOME they inherit."""
        marker = f"PULUMI_HOME={self.workdir / 'home'}".encode()
        found = []
        for entry in Path("/proc").glob("[0-9]*"):
            with contextlib.suppress(OSError):
                if marker in (entry / "environ").read_bytes().split(b"\0"):
                    found.append(int(entry.name))
        return found

    def stop_leftovers(self) -> list[int]:
        """SIGKILL what a killed `up` left running (its provider survives the CLI's group);
        returns their process ids."""
        left = [pid for pid in self.processes() if pid != os.getpid()]
        for pid in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        return left

    def cli_version(self) -> str:
        cli = subprocess.run(
            [str(self.bin_dir / "pulumi"), "version"], check=True, capture_output=True, text=True
        ).stdout
        return f"pulumi {cli.strip()}"


# The engine's own entries in a stack's state: its root, and the provider of the engine's builtin
# invokes. The program reads the state through such an invoke before it registers anything
# (stacks.recorded), and a refused update of a stack with no state records both.
ENGINE_TYPES = ("pulumi:pulumi:Stack", "pulumi:providers:pulumi")


def resource_count(stack: auto.Stack) -> int:
    """The resources the stack's state holds, but the engine's own."""
    deployment = stack.export_stack().deployment or {}
    return len([r for r in deployment.get("resources") or [] if r.get("type") not in ENGINE_TYPES])


def changes(summary: Mapping[Any, int] | None) -> str:
    return ", ".join(f"{count} {op}" for op, count in sorted((summary or {}).items())) or "nothing"


# --------------------------------------------------------------------------- the cluster


@dataclass
class Cluster:
    api: Api
    namespace: str

    def items(self, path: str) -> list[dict[str, Any]]:
        status, listing = self.api.request("GET", path)
        expect(status == 200, f"GET {path}: {status}")
        return list(listing["items"])

    def items_or_none(self, path: str) -> list[dict[str, Any]]:
        """The collection's items; none where its namespace does not exist yet."""
        status, listing = self.api.request("GET", path)
        return list(listing["items"]) if status == 200 else []

    def jobset(self, name: str) -> dict[str, Any]:
        path = f"/apis/{JOBSET_API}/namespaces/{self.namespace}/jobsets/{name}"
        status, found = self.api.request("GET", path)
        expect(status == 200, f"JobSet {name}: {status}")
        return dict(found)

    def admitted(self, jobset: str, pods: int, timeout: float = 120.0) -> str:
        """Wait until the run's Workload is admitted and every pod bound; the assignment must
        carry a topology and the pods sit in one block, as the flavor's TAS asks."""
        is_placed = functools.partial(placed, self.api, self.namespace, jobset, pods)
        wait_for(f"run {jobset} admitted and placed", is_placed, timeout)
        workload, found = jobset_run(self.api, self.namespace, jobset)
        if workload is None:
            raise ScenarioFailed(f"run {jobset}: its Workload is gone")
        assignment = workload["status"]["admission"]["podSetAssignments"][0]
        expect(bool(assignment.get("topologyAssignment")), f"run {jobset}: admitted without a topology assignment")
        expect(self.jobset(jobset)["spec"].get("suspend") is False, f"JobSet {jobset} is still suspended")
        block = TOPOLOGY_LABELS[TopologyLevel.BLOCK]
        blocks = {self.node_labels(p["spec"]["nodeName"]).get(block) for p in found}
        expect(len(blocks) == 1, f"run {jobset}: pods spread over blocks {sorted(map(str, blocks))}")
        flavors = sorted(set(assignment["flavors"].values()))
        where = f"{pods} pods in {blocks.pop()}"
        return f"{jobset} admitted on flavor {', '.join(flavors)} with a topology assignment, {where}"

    def run_identity(self, jobset: str) -> tuple[str, tuple[str, ...]]:
        """The uid of the run's JobSet and those of its pods: the same while nothing replaced it."""
        uid = str(self.jobset(jobset)["metadata"]["uid"])
        _, pods = jobset_run(self.api, self.namespace, jobset)
        return uid, tuple(sorted(p["metadata"]["uid"] for p in pods))

    def jobsets(self) -> list[str]:
        path = f"/apis/{JOBSET_API}/namespaces/{self.namespace}/jobsets"
        return sorted(j["metadata"]["name"] for j in self.items(path))

    def node_labels(self, name: str) -> dict[str, str]:
        _, node = self.api.request("GET", f"/api/v1/nodes/{name}")
        return dict(node["metadata"]["labels"])

    def finish(self, jobset: str) -> None:
        """End the run as its workers would: every pod Succeeded; then the Job, the JobSet and
        the Workload finish through their controllers."""
        _, pods = jobset_run(self.api, self.namespace, jobset)
        for pod in pods:
            path = f"/api/v1/namespaces/{self.namespace}/pods/{pod['metadata']['name']}/status"
            status, answer = self.api.request("PATCH", path, {"status": {"phase": "Succeeded"}})
            expect(status == 200, f"PATCH {path}: {status} {answer}")

        def finished() -> bool:
            workload, _ = jobset_run(self.api, self.namespace, jobset)
            return workload is not None and has_condition(workload, "Finished")

        wait_for(f"run {jobset} finished", finished, timeout=60)

    def active_queues(self) -> list[str]:
        queues = self.items(CLUSTER_KINDS["ClusterQueue"])
        return [q["metadata"]["name"] for q in queues if has_condition(q, "Active")]

    def renew_claim_volumes(self, objects: list[dict[str, Any]]) -> None:
        """Volumes for the stack's claims again: a deleted claim leaves its volume Released,
        bound to the old claim's uid, and a new claim of that name never binds to it."""
        volumes = claim_volumes(objects)
        for volume in volumes:
            if volume["kind"] == "PersistentVolume":
                path = f"/api/v1/persistentvolumes/{volume['metadata']['name']}"
                self.api.request("DELETE", path)
                wait_for(f"{path} deleted", lambda path=path: self.api.request("GET", path)[0] == 404, timeout=60)
        for volume in volumes:
            self.api.create(api_path(volume), volume)

    def unmarked(self, objects: list[dict[str, Any]], identity: str) -> list[str]:
        """The stack's objects on the API server that do not carry `identity`."""
        found = []
        for manifest in objects:
            status, live = self.api.request("GET", f"{api_path(manifest)}/{manifest['metadata']['name']}")
            mark = mark_of(live) if status == 200 else None
            if mark != identity:
                found.append(f"{manifest['kind']}/{manifest['metadata']['name']} ({status}, {mark})")
        return found

    def leftovers(self) -> list[str]:
        """The program's objects still on the API server: cluster-scoped Kueue objects, and its
        namespace (gone only once every object in it is)."""
        found = [f"{kind}/{o['metadata']['name']}" for kind, path in CLUSTER_KINDS.items() for o in self.items(path)]
        status, _ = self.api.request("GET", f"/api/v1/namespaces/{self.namespace}")
        if status != 404:
            found.append(f"Namespace/{self.namespace}")
        return found


# --------------------------------------------------------------------------- scenarios


@dataclass
class Scenarios:
    engine: Engine
    cluster: Cluster
    values: dict[str, Any]
    mock_run: StackRun

    def run_jobset(self) -> dict[str, Any]:
        """The first stack's one JobSet as the program writes it for the current values."""
        (jobset,) = [m for m in stack_objects(self.mock_run) if m["kind"] == "JobSet"]
        return jobset

    @property
    def run_name(self) -> str:
        return str(self.run_jobset()["metadata"]["name"])

    @property
    def run_pods(self) -> int:
        return int(self.run_jobset()["spec"]["replicatedJobs"][0]["template"]["spec"]["parallelism"])

    def first(self, values: Mapping[str, Any] | None = None) -> auto.Stack:
        return self.engine.stack(FIRST, values or self.values)

    def refusals(self, values: Mapping[str, Any], text: str, what: str) -> list[str]:
        """`preview` and `up` of the first stack with `values`, each of which must be refused: the
        line of each refusal that holds `text` ("" where none does)."""
        found = []
        for attempt in (self.first(values).preview, self.first(values).up):
            try:
                attempt()
            except auto.CommandError as error:
                found.append(line_with(text, str(error)))
            else:
                raise ScenarioFailed(f"{what} passed {attempt.__name__}")
        return found

    def no_changes(self, stack: auto.Stack, when: str) -> str:
        refreshed = stack.refresh()
        try:
            stack.preview(expect_no_changes=True, diff=True)
        except auto.CommandError as error:
            raise ScenarioFailed(f"{when}: preview after refresh wants changes:\n{_tail(error)}") from None
        return f"{when}: refresh ({changes(refreshed.summary.resource_changes)}), preview: no change"

    def up_admits_the_run_in_one_block(self) -> str:
        """`preview` then `up` of the existing-cluster stack; the ClusterQueue becomes active;
        the run's Workload is admitted with a topology assignment; the JobSet is unsuspended
        and its pods bound in one block."""
        stack = self.first()
        stack.preview()
        result = stack.up()
        wait_for("an active ClusterQueue", lambda: bool(self.cluster.active_queues()), timeout=60)
        placed = self.cluster.admitted(self.run_name, self.run_pods)
        queues = ", ".join(self.cluster.active_queues())
        return f"up: {changes(result.summary.resource_changes)}; ClusterQueue {queues} active; {placed}"

    def an_upgrade_leaves_the_running_run_alone(self) -> str:
        """An upgraded program (another launcher, another pod environment: what a new nemo-gke
        renders otherwise) reaches new runs only: `preview` says so of the admitted run in one line,
        and `preview` and `up` leave its ConfigMap and JobSet as they are: the same uid, the same
        pods (planners.submitted)."""
        before = self.cluster.run_identity(self.run_name)
        stack = self.first()
        with upgraded_program():
            preview = stack.preview()
            result = stack.up()
        planned, made = changes(preview.change_summary), changes(result.summary.resource_changes)
        after = self.cluster.run_identity(self.run_name)
        expect(after == before, f"the run was replaced or restarted ({made}): {before} -> {after}")
        expect(set(preview.change_summary) == {"same"}, f"the upgraded preview wants changes: {planned}")
        expect(set(result.summary.resource_changes or {}) == {"same"}, f"the upgraded up changed: {made}")
        line = line_with("is kept as submitted at revision 1", preview.stdout)
        expect(bool(line), f"the preview does not say the run is kept:\n{_tail(preview.stdout)}")
        return f"preview: {line}; preview {planned}; up {made}; JobSet and its {len(after[1])} pods kept (same uids)"

    def a_changed_run_is_refused_then_replaced_with_its_revision(self) -> str:
        """A change of the admitted run's steps is refused at its revision by `preview` and by `up`,
        naming the key, and nothing changes; raised, the revision replaces the run (`preview` names
        the JobSet it replaces, an immutable field changed with it), the old JobSet is deleted
        before the new one is created and its ConfigMap after, and the new JobSet is admitted."""
        stack = self.first()
        before, count = self.cluster.run_identity(self.run_name), resource_count(stack)
        steps = int(self.values[f"{PROJECT}:training"]["runs"][0].get("steps", 0)) + 10
        changed = with_run(self.values, steps=steps)
        refusals = self.refusals(changed, "training.runs[0].steps", "a change of the admitted run's steps")
        expect(all("raise revision to 2" in line for line in refusals), f"the refusals: {refusals}")
        expect(resource_count(stack) == count, "the refused update changed the state")
        expect(self.cluster.run_identity(self.run_name) == before, "the refused update touched the run")
        # Its failure policy too: immutable (the JobSet CRD's rule), so only a JobSet of a new name
        # can carry it; a preview's dry-run create under the old name would be refused.
        raised = with_run(changed, revision=2, maxRestarts=7)
        preview = self.first(raised).preview()
        warning = line_with("revision 1 → 2 replaces JobSet", preview.stdout)
        expect(bool(warning), f"the preview does not name the run it replaces:\n{_tail(preview.stdout)}")
        events: list[tuple[str, str, str]] = []
        result = self.first(raised).up(on_event=functools.partial(record_step, events))
        self.values, self.mock_run = raised, run_stack(FIRST, values=raised)
        placed = self.cluster.admitted(self.run_name, self.run_pods)
        expect(self.cluster.run_identity(self.run_name)[0] != before[0], "the raised revision kept the JobSet")
        policy = self.cluster.jobset(self.run_name)["spec"]["failurePolicy"]
        expect(policy["maxRestarts"] == 7, f"the new JobSet's failure policy: {policy}")
        # The old JobSet is gone before the new one is created, and its ConfigMap only after it.
        jobset, config_map = f"kubernetes:{JOBSET_API}:JobSet", "kubernetes:core/v1:ConfigMap"
        order = [
            events.index(("done", "delete-replaced", jobset)),
            events.index(("start", "create-replacement", jobset)),
            events.index(("start", "delete-replaced", config_map)),
        ]
        expect(order == sorted(order), f"the replacement's steps: {events}")
        made = changes(result.summary.resource_changes)
        return (
            f"refused: {refusals[0]}; revision 2: preview: {warning}; up: {made}, the old JobSet deleted first and "
            f"its ConfigMap last; {placed}"
        )

    def refresh_finds_nothing_to_change(self) -> str:
        """`refresh` then `preview --expect-no-changes` hold while the run is admitted and
        running, and again after it finished."""
        stack = self.first()
        running = self.no_changes(stack, "running")
        self.cluster.finish(self.run_name)
        return f"{running}; {self.no_changes(stack, 'finished')}"

    def a_finished_run_is_never_submitted_again(self) -> str:
        """Once the run finished, an upgraded program's `up` submits nothing: the same JobSet and
        pods, its Workload still finished."""
        before = self.cluster.run_identity(self.run_name)
        with upgraded_program():
            made = changes(self.first().up().summary.resource_changes)
        workload, _ = jobset_run(self.cluster.api, self.cluster.namespace, self.run_name)
        expect(workload is not None and has_condition(workload, "Finished"), "the run's Workload is not finished")
        expect(self.cluster.run_identity(self.run_name) == before, "the finished run was submitted again")
        return f"upgraded up: {made}; the finished JobSet kept (same uids), its Workload finished"

    def relabelled_pool_moves_the_queue_to_a_new_flavor(self) -> str:
        """A change of the pool's labels (a ResourceFlavor's immutable nodeLabels) applies
        with `up`: a new flavor, the queue moved to it, the old flavor gone, the run admitted."""
        before = {f["metadata"]["name"] for f in self.cluster.items(CLUSTER_KINDS["ResourceFlavor"])}
        values = json.loads(json.dumps(self.values))
        cluster = values[f"{PROJECT}:existingCluster"]
        pool = cluster["gpuPools"][0]
        pool["nodeLabels"] = {**pool["nodeLabels"], "team": "llm"}
        # The nodes get the label first, as a cluster admin relabelling the pool would.
        for node in self.cluster.items("/api/v1/nodes"):
            if node["metadata"]["name"].startswith(f"{pool['name']}-"):
                path = f"/api/v1/nodes/{node['metadata']['name']}"
                self.cluster.api.request("PATCH", path, {"metadata": {"labels": {"team": "llm"}}})
        finished = self.cluster.run_identity(self.run_name)
        result = self.first(values).up()
        expect(self.cluster.run_identity(self.run_name) == finished, "the relabelled pool replaced the finished run")
        after = {f["metadata"]["name"] for f in self.cluster.items(CLUSTER_KINDS["ResourceFlavor"])}
        expect(bool(after) and not after & before, f"flavors before {sorted(before)}, after {sorted(after)}")
        queued = {
            f["name"]
            for q in self.cluster.items(CLUSTER_KINDS["ClusterQueue"])
            for group in q["spec"]["resourceGroups"]
            for f in group["flavors"]
        }
        expect(queued == after, f"the ClusterQueues offer {sorted(queued)}, the flavors are {sorted(after)}")
        # The finished run is kept; submitted again (its revision raised), it lands on the new flavor.
        revision = int(values[f"{PROJECT}:training"]["runs"][0].get("revision", 1)) + 1
        values = with_run(values, revision=revision)
        self.first(values).up()
        self.values, self.mock_run = values, run_stack(FIRST, values=values)
        placed = self.cluster.admitted(self.run_name, self.run_pods)
        self.cluster.finish(self.run_name)
        made, moved = changes(result.summary.resource_changes), f"flavors {sorted(before)} -> {sorted(after)}"
        return f"up: {made}, the finished run kept; {moved}; revision {revision}: {placed}"

    def run_only_stack_destroys_alone(self) -> str:
        """A run-only stack reads the first through `upstreamStack` on the same backend; its
        run is admitted; destroying it leaves the first stack as it was: the same JobSet, and
        a refresh of the first finds nothing to change."""
        first_run = self.cluster.jobset(self.run_name)["metadata"]["uid"]
        stack = self.engine.stack(RUN_ONLY, run_only_values(self.values))
        result = stack.up()
        new = sorted(set(self.cluster.jobsets()) - {self.run_name})
        expect(len(new) == 1, f"run-only stack: JobSets {self.cluster.jobsets()}")
        placed = self.cluster.admitted(new[0], self.run_pods)
        nemo2 = self.no_changes(stack, "its NeMo 2 run")
        destroyed = stack.destroy()
        stack.workspace.remove_stack(RUN_ONLY)
        expect(self.cluster.jobsets() == [self.run_name], f"after destroy: JobSets {self.cluster.jobsets()}")
        expect(self.cluster.jobset(self.run_name)["metadata"]["uid"] == first_run, "the first run was re-created")
        untouched = self.no_changes(self.first(), "the first stack")
        made, removed = changes(result.summary.resource_changes), changes(destroyed.summary.resource_changes)
        return f"up: {made}; {placed}; {nemo2}; destroy: {removed}; {untouched}"

    def an_unknown_upstream_is_refused_by_key(self) -> str:
        """A run-only stack whose `upstreamStack` names a stack the backend does not hold: one
        line naming the key, no traceback, and nothing of the stack's recorded."""
        values = {**run_only_values(self.values), f"{PROJECT}:upstreamStack": "no-such-stack"}
        stack = self.engine.stack(RUN_ONLY, values)
        try:
            stack.preview()
        except auto.CommandError as error:
            message = str(error)
        else:
            raise ScenarioFailed("a preview over an unknown upstream stack passed")
        finally:
            stack.workspace.remove_stack(RUN_ONLY)
        expect("Traceback" not in message, f"the refusal is a traceback:\n{_tail(message)}")
        lines = [line.strip() for line in message.splitlines() if "upstreamStack" in line]
        named = bool(lines) and "is not a stack of this backend" in lines[0]
        expect(named, f"no line names the key:\n{_tail(message)}")
        expect(len(lines) == 1, f"the refusal is shown {len(lines)} times:\n{_tail(message)}")
        return f"refused: {lines[0]}"

    def oversized_run_is_refused_before_registration(self) -> str:
        """A run larger than the pool is refused before anything is registered: one line that
        names the key, and neither the state nor the cluster changes."""
        stack = self.first()
        before = resource_count(stack)
        values = json.loads(json.dumps(self.values))
        values[f"{PROJECT}:training"]["runs"][0]["nodes"] = 5
        try:
            self.first(values).up()
        except auto.CommandError as error:
            message = str(error)
        else:
            raise ScenarioFailed("a 5-node run on the 4-node pool was accepted")
        expect("training.runs[0].nodes" in message, f"the refusal does not name the key:\n{_tail(message)}")
        expect("Traceback" not in message, f"the refusal is a traceback:\n{_tail(message)}")
        expect(resource_count(stack) == before, "the refused update changed the state")
        line = next(line.strip() for line in message.splitlines() if "training.runs[0].nodes" in line)
        self.first().preview(expect_no_changes=True)
        return f"refused: {line}"

    def a_run_an_interrupted_up_left_is_never_run_twice(self) -> str:
        """The run's JobSet on the cluster but not in the state, its TrainingRun recorded: what an
        `up` killed after the API server created the JobSet and before the engine recorded it
        leaves (here: the JobSet taken out of the state). A change of the run is refused as always;
        raised, its revision would submit a second JobSet beside the first, which the program,
        reading the cluster first, refuses by name. Where no program could read it, the API server
        refuses the provider's apply of a changed run over it (the JobSet webhook: a JobSet's
        replicated jobs cannot change). Unchanged, `up` takes it: one JobSet, the same uid."""
        stack = self.first()
        run = self.values[f"{PROJECT}:training"]["runs"][0]
        uid = self.cluster.run_identity(self.run_name)[0]
        exported = stack.export_stack()
        deployment = exported.deployment or {}
        kept = [r for r in deployment["resources"] if not r["urn"].endswith(f"::training-{run['name']}-jobset")]
        expect(len(kept) == len(deployment["resources"]) - 1, "the run's JobSet is not in the state")
        stack.import_stack(auto.Deployment(version=exported.version, deployment={**deployment, "resources": kept}))
        changed = with_run(self.values, env={"LANE_MARK": "1"})
        raised = with_run(changed, revision=int(run.get("revision", 1)) + 1)
        refusals = self.refusals(raised, "beside it", "a second JobSet of the run")
        expect(all(refusals), f"the refusals do not name the JobSet beside which: {refusals}")
        expect(self.cluster.jobsets() == [self.run_name], f"JobSets after the refusals: {self.cluster.jobsets()}")
        live = self.cluster.jobset(self.run_name)
        manager = next(m["manager"] for m in live["metadata"]["managedFields"] if m["operation"] == "Apply")
        (jobset,) = [m for m in stack_objects(run_stack(FIRST, values=changed)) if m["kind"] == "JobSet"]
        path = f"/apis/{JOBSET_API}/namespaces/{self.cluster.namespace}/jobsets/{self.run_name}"
        status, answer = self.cluster.api.apply(path, jobset, manager)
        refused = str(answer.get("message", answer)) if isinstance(answer, dict) else str(answer)
        expect(status == 422 and "field is immutable" in refused, f"the provider's apply over it: {status} {refused}")
        made = changes(self.first().up().summary.resource_changes)
        expect(self.cluster.jobsets() == [self.run_name], f"JobSets after the up: {self.cluster.jobsets()}")
        expect(self.cluster.run_identity(self.run_name)[0] == uid, "the up replaced the JobSet it took")
        applied = f"the provider's apply of a changed run: {status}"
        return f"refused: {refusals[0]}; {applied}; unchanged: up {made}, one JobSet, the same uid"

    def destroy_leaves_nothing_behind(self) -> str:
        """`destroy` completes with no manual step within the bound, and the API server keeps
        none of the program's objects (no stuck finalizer)."""
        stack = self.first()
        started = time.monotonic()
        result = stack.destroy()
        took = time.monotonic() - started
        expect(took < DESTROY_BOUND_S, f"destroy took {took:.0f} s (bound {DESTROY_BOUND_S:.0f} s)")
        wait_for("the namespace gone", lambda: not self.cluster.leftovers(), timeout=60)
        return f"destroy: {changes(result.summary.resource_changes)} in {took:.1f} s; nothing of the program left"

    def a_taken_name_is_refused_and_left_alone(self) -> str:
        """A ClusterQueue of the stack's queue name that kubectl wrote, on a cluster where the
        stack has nothing: `preview` refuses it by name, and `up`, the program ending as under
        the CLI, applies nothing: the state stays as it was, the queue is not the stack's, and the
        stack's namespace is not created. Then the same queue as another stack's provider writes
        it (its mark, its own field manager): `preview` names that stack; and where the program
        cannot look first (a GKE cluster the stack creates), the API server refuses the stack's
        create over it: the provider's server-side apply, conflicts not forced, would change the
        mark, a field the other manager owns (Kubernetes docs, "Server-Side Apply", conflicts)."""
        stack = self.first()
        before = resource_count(stack)
        (queue,) = [m for m in stack_objects(self.mock_run) if m["kind"] == "ClusterQueue"]
        name = queue["metadata"]["name"]
        taken = {"apiVersion": KUEUE_API, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": {}}
        self.cluster.api.create(CLUSTER_KINDS["ClusterQueue"], taken)
        try:
            stack.preview()
        except auto.CommandError as error:
            line = next((x.strip() for x in str(error).splitlines() if f"ClusterQueue {name} is already" in x), "")
            expect(bool(line), f"the refusal does not name the queue:\n{_tail(error)}")
        else:
            raise ScenarioFailed(f"a preview over kubectl's ClusterQueue {name} passed")
        code = self.engine.ended(self.engine.in_child(FIRST, self.values))
        log = self.engine.log(FIRST)
        expect(code != 0, f"`up` over kubectl's ClusterQueue {name} passed:\n{_tail(log)}")
        path = f"{CLUSTER_KINDS['ClusterQueue']}/{name}"
        # Here the CLI is a child of the program's process, which ends at once: the CLI then dies
        # writing to it and leaves its lock (under `pulumi up` the program is the CLI's child).
        with contextlib.suppress(auto.CommandError):
            stack.cancel()
        expect(resource_count(stack) == before, "the refused `up` changed the state")
        _, found = self.cluster.api.request("GET", path)
        managers = [m.get("manager", "") for m in found["metadata"].get("managedFields") or ()]
        mark = mark_of(found)
        expect(mark is None and not any("pulumi" in m for m in managers), f"the queue was written: {managers}, {mark}")
        expect(self.cluster.leftovers() == [f"ClusterQueue/{name}"], f"after the refusal: {self.cluster.leftovers()}")
        self.cluster.api.request("DELETE", path)
        wait_for("kubectl's queue deleted", lambda: not self.cluster.leftovers(), timeout=60)

        other = "acme/nemo-gke/team-b"
        theirs = {**taken, "metadata": {"name": name, "annotations": {STACK_ANNOTATION: other}}}
        status, answer = self.cluster.api.apply(path, theirs, "pulumi-kubernetes-0a1b2c3d")
        expect(status in (200, 201), f"another stack's queue: {status} {answer}")
        try:
            stack.preview()
        except auto.CommandError as error:
            expect(f"written by the Pulumi stack {other}" in str(error), f"another stack's queue:\n{_tail(error)}")
        else:
            raise ScenarioFailed(f"a preview over {other}'s ClusterQueue {name} passed")
        status, answer = self.cluster.api.apply(path, queue, "pulumi-kubernetes-4e5f6a7b")
        conflict = str(answer.get("message", answer)) if isinstance(answer, dict) else str(answer)
        expect(status == 409 and STACK_ANNOTATION in conflict, f"applied over {other}'s queue: {status} {conflict}")
        self.cluster.api.request("DELETE", path)
        wait_for("the other stack's queue deleted", lambda: not self.cluster.leftovers(), timeout=60)
        return (
            f"preview refused: {line}; `up` exit {code}, the state and the queue untouched; "
            f"{other}'s queue: preview names it, the API server refuses the stack's apply ({status}: {conflict})"
        )

    def interrupted_up_converges(self) -> str:
        """`pulumi up` killed while its creates are in flight (once its first claim exists) leaves
        the stack locked, objects on the cluster the state does not know, and pending creates;
        `pulumi cancel` and `pulumi up` converge, taking what the killed `up` left (it carries the
        stack's mark); the run is admitted; `destroy` leaves nothing (no Kueue finalizer holds an orphan)."""
        objects = stack_objects(self.mock_run)
        self.cluster.renew_claim_volumes(objects)
        stack = self.first()
        claims = f"/api/v1/namespaces/{self.cluster.namespace}/persistentvolumeclaims"
        child = self.engine.in_child(FIRST, self.values)
        started = time.monotonic()
        while not self.cluster.items_or_none(claims):
            expect(child.poll() is None, f"`up` ended before it created a claim:\n{_tail(self.engine.log(FIRST))}")
            expect(time.monotonic() - started < 120, f"no claim 120 s into `up`:\n{_tail(self.engine.log(FIRST))}")
            time.sleep(KILL_POLL_S)
        os.killpg(child.pid, signal.SIGKILL)
        self.engine.ended(child)
        # The provider the CLI started runs in a process group of its own: ~120 MB left behind.
        left = self.engine.stop_leftovers()
        killed = time.monotonic() - started
        deployment = stack.export_stack().deployment or {}
        pending, known = deployment.get("pending_operations") or [], len(deployment.get("resources") or [])
        expect(bool(pending), f"killed {killed:.1f} s into `up` with no create in flight ({known} resources)")
        stack.cancel()
        converged = stack.up()
        identity = stack_identity(SELF_MANAGED_ORGANIZATION, PROJECT, FIRST)
        unmarked = self.cluster.unmarked(objects, identity)
        expect(not unmarked, f"objects of the stack without its mark: {unmarked}")
        placed = self.cluster.admitted(self.run_name, self.run_pods)
        self.cluster.finish(self.run_name)
        destroyed = stack.destroy()
        wait_for("the namespace gone", lambda: not self.cluster.leftovers(), timeout=60)
        return (
            f"killed {killed:.1f} s into `up` ({known} resources in the state, {len(pending)} creates in flight, "
            f"{len(left)} processes it left stopped); "
            f"cancel, up: {changes(converged.summary.resource_changes)}; every object marked; {placed}; "
            f"destroy: {changes(destroyed.summary.resource_changes)}, nothing left"
        )

    def cluster_namespace_and_claims_are_used_and_kept(self) -> str:
        """The cluster's own namespace and claims (existingCluster.namespaceExists, claims): a
        missing claim stops `preview`; `up` reads them and its run is admitted on them; a refresh
        finds nothing to change; `destroy` leaves the namespace and the claims where they were."""
        namespace, names = "llm-team", {"shared": "team-shared", "data": "team-data", "checkpoints": "team-data"}
        claims = [
            {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "metadata": {"name": name, "namespace": namespace},
                "spec": {
                    "accessModes": ["ReadWriteMany"],
                    "storageClassName": "team-rwx",
                    "resources": {"requests": {"storage": "1Gi"}},
                },
            }
            for name in sorted(set(names.values()))
        ]
        self.cluster.api.create(
            "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
        )
        for manifest in [*claim_volumes(claims), *claims]:
            self.cluster.api.create(api_path(manifest), manifest)
        values = own_claims_values(self.values, namespace, {**names, "data": "team-missing"})
        try:
            self.engine.stack(OWN_CLAIMS, values).preview()
        except auto.CommandError as error:
            missing = next((line.strip() for line in str(error).splitlines() if "does not exist" in line), "")
            expect(f"'{namespace}/team-missing' does not exist" in missing, f"a missing claim:\n{_tail(error)}")
        else:
            raise ScenarioFailed("a preview naming a missing claim passed")
        stack = self.engine.stack(OWN_CLAIMS, own_claims_values(self.values, namespace, names))
        made = changes(stack.up().summary.resource_changes)
        own = Cluster(self.cluster.api, namespace)
        (run,) = own.jobsets()
        placed = own.admitted(run, self.run_pods)
        unchanged = self.no_changes(stack, "running")
        own.finish(run)
        removed = changes(stack.destroy().summary.resource_changes)
        stack.workspace.remove_stack(OWN_CLAIMS)
        expect(self.cluster.api.request("GET", f"/api/v1/namespaces/{namespace}")[0] == 200, "the namespace is gone")
        left = sorted(
            c["metadata"]["name"] for c in own.items(f"/api/v1/namespaces/{namespace}/persistentvolumeclaims")
        )
        expect(left == sorted(set(names.values())), f"the claims after destroy: {left}")
        kept = "the namespace and claims kept"
        return f"missing claim: {missing}; up: {made}; {placed}; {unchanged}; destroy: {removed}; {kept}"


def _up(name: str, arguments: Path) -> None:
    """`pulumi up` of one stack, as Engine.in_child starts it."""
    given = json.loads(arguments.read_text())
    engine = Engine(Path(given["workdir"]), Path(given["bin_dir"]))
    engine.stack(name, given["values"], as_cli=True).up(on_output=lambda line: print(line, flush=True))


def _tail(error: object, lines: int = 30) -> str:
    return "\n".join(str(error).splitlines()[-lines:])


def missing_binaries(given: Path | None = None) -> str | None:
    """Why the scenarios cannot run here, or None when both binaries are at hand."""
    if binaries_dir(given) is not None:
        return None
    where = given or os.environ.get("PULUMI_BIN_DIR", BIN_DIR)
    return (
        f"no {' and '.join(BINARIES)} in {where}: `make integration-tools` builds them there (docs/integration-lane.md)"
    )


@contextlib.contextmanager
def session(bin_dir: Path) -> Iterator[Scenarios]:
    """The lane with the `existing` stack's pools and controllers (pods stay running), and the
    engine on a file backend beside it; the scenarios run in this order on one session:
    up, an upgrade, a changed run, refresh, a finished run, run-only, relabelled pool, oversized
    run, a run left by an interrupted up, destroy, a taken name, an interrupted up, the cluster's
    own claims."""
    engine_dir = Path(tempfile.mkdtemp(prefix="nemo-gke-engine-"))
    lane = Lane(engine_dir / "lane")
    lane.workdir.mkdir()
    engine = Engine(engine_dir, bin_dir)
    print(f"engine: {engine.cli_version()}, provider {bin_dir / BINARIES[1]}", flush=True)
    values = lane_values(lane.workdir / "admin.kubeconfig")
    # The program under the mocks: the shipped stack's pools shape the nodes and its Kueue
    # settings the controller; the lane's variant names the objects the scenarios look for.
    mock_run = run_stack(FIRST, values=values)
    try:
        api = start(lane, run_stack(FIRST), pods_complete=False).api
        for manifest in claim_volumes(stack_objects(mock_run)):
            api.create(api_path(manifest), manifest)
        namespace = next(m["metadata"]["name"] for m in stack_objects(mock_run) if m["kind"] == "Namespace")
        yield Scenarios(engine, Cluster(api, namespace), values, mock_run)
        lane.check_alive()
    finally:
        left = engine.stop_leftovers()
        lane.stop()
        if not os.environ.get("LANE_KEEP"):
            shutil.rmtree(engine_dir, ignore_errors=True)
        if left:
            print(f"engine: stopped {len(left)} processes the scenarios left running: {left}", flush=True)


if __name__ == "__main__" and sys.argv[1:2] == ["up"]:
    _up(sys.argv[2], Path(sys.argv[3]))
