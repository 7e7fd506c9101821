"""Shipped existing-cluster stacks on the lane: the program's own check of the cluster's Kueue and
JobSet, then its objects applied and its runs admitted by the real Kueue and bound by the real
scheduler to kwok nodes shaped like the stack's pools: `existing` (a catalog machine whose nodes
carry GKE's topology labels, so Kueue places the run by topology) and `existing-oke` (a machine
outside the catalog, no topology)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from facts.controller_api import CONTROLLER_KINDS
from facts.kubernetes import TOPOLOGY_LABELS, TopologyLevel
from facts.podsecurity import ENFORCE_LABEL, PodSecurityLevel
from harness.runner import StackRun, run_stack
from integration.controlplane import Lane
from integration.lane import Started, running
from integration.runs import Admitted, admit_runs, stack_objects
from stacks.contract import PlatformExports


@dataclass
class LaneRun:
    run: StackRun
    lane: Lane
    started: Started
    admitted: list[Admitted]

    def node_labels(self, name: str) -> dict[str, str]:
        _, node = self.started.api.request("GET", f"/api/v1/nodes/{name}")
        return dict(node["metadata"]["labels"])


@pytest.fixture(scope="module", params=["existing", "existing-oke"])
def lane(request: pytest.FixtureRequest) -> Iterator[LaneRun]:
    """One lane per stack: started, the stack's objects applied, its runs admitted and placed."""
    run = run_stack(request.param)
    with running(run) as (lane, started):
        yield LaneRun(run, lane, started, admit_runs(lane, started.api, run))


def test_the_programs_check_refuses_each_kind_until_the_crds_are_installed(lane: LaneRun) -> None:
    """kueue.install: false reads the cluster's CRDs first (stacks/existing.py): on a cluster
    without them every kind is refused, with them nothing is."""
    assert len(lane.started.refused_before_crds) == len(CONTROLLER_KINDS), lane.started.refused_before_crds
    assert lane.started.refused_after_crds == []


def test_every_run_is_admitted_and_all_its_pods_are_bound(lane: LaneRun) -> None:
    jobsets = {m["metadata"]["name"]: m for m in stack_objects(lane.run) if m["kind"] == "JobSet"}
    assert sorted(a.name for a in lane.admitted) == sorted(jobsets) and jobsets
    for admitted in lane.admitted:
        pods = jobsets[admitted.name]["spec"]["replicatedJobs"][0]["template"]["spec"]["parallelism"]
        assert len(admitted.nodes) == pods and len(set(admitted.nodes)) == pods, admitted
        print(f"lane: {admitted.name}: admitted on {admitted.flavors}, {pods} pods bound")


def test_a_pool_with_topology_labels_gets_its_run_placed_in_one_block(lane: LaneRun) -> None:
    """Kueue's topology-aware scheduling places the run when the pool's nodes carry GKE's
    topology labels (existingCluster.gpuPools[].topologyLabels), and not otherwise."""
    block = TOPOLOGY_LABELS[TopologyLevel.BLOCK]
    if lane.run.stack == "existing":
        # Its pool says topologyLabels: true, so its nodes carry them and the first branch runs.
        assert all(block in lane.node_labels(node) for a in lane.admitted for node in a.nodes)
    for admitted in lane.admitted:
        labels = [lane.node_labels(node) for node in admitted.nodes]
        if all(block in node for node in labels):
            assert admitted.topology is not None, f"{admitted.name}: admitted without a topology assignment"
            assert len({node[block] for node in labels}) == 1, f"{admitted.name}: pods spread over blocks"
        else:
            assert admitted.topology is None, f"{admitted.name}: a topology assignment without topology labels"


def test_the_lane_starts_within_its_budget(lane: LaneRun) -> None:
    """About 20 s on two cores; a lane that takes minutes hides a wait that should not be there."""
    print(f"lane: {lane.run.stack} ready in {lane.started.seconds:.1f} s")
    assert lane.started.seconds < 120


def test_the_runs_namespace_refuses_a_pod_above_its_pod_security_level(lane: LaneRun) -> None:
    """The stack's namespace enforces Baseline (no pod of an existing cluster's run needs the node):
    its runs' pods were created above; the API server's PodSecurity admission refuses a pod that
    mounts the node's `/` and admits a plain one (server-side dry runs, so nothing is left behind).
    A privileged container is no test here: the lane's API server, as any without
    --allow-privileged, refuses one in every namespace."""
    namespace = PlatformExports.from_plain(lane.run.exports["platform"]).namespace
    _, found = lane.started.api.request("GET", f"/api/v1/namespaces/{namespace}")
    assert found["metadata"]["labels"][ENFORCE_LABEL] == PodSecurityLevel.BASELINE
    container = {"name": "c", "image": "busybox"}
    plain = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "plain"}, "spec": {"containers": [container]}}
    root = {**plain, "metadata": {"name": "host-root"}}
    root["spec"] = {"containers": [container], "volumes": [{"name": "root", "hostPath": {"path": "/"}}]}
    path = f"/api/v1/namespaces/{namespace}/pods?dryRun=All"
    status, answer = lane.started.api.request("POST", path, plain)
    assert status == 201, (status, answer)
    status, answer = lane.started.api.request("POST", path, root)
    assert status == 403 and 'violates PodSecurity "baseline' in answer["message"], (status, answer)
    print(f"lane: {lane.run.stack}: namespace {namespace} enforces baseline: {answer['message']}")
