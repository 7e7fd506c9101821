"""The shipped A4X stack on the lane: kwok nodes shaped like its GB200 pool (Arm taint, 4 GPUs, one
sub-block per NVLink domain), NVIDIA's DRA driver as it would publish itself (integration.dra), and
the program's queues, ComputeDomain and run applied. The real Kueue admits the run with its IMEX
channel claims on the quota the program gives them, and the real scheduler and controller-manager
bind every pod inside one NVLink domain with its channel allocated on its own node."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from facts.kubernetes import IMEX_CHANNEL_RESOURCE, TOPOLOGY_LABELS, TopologyLevel
from harness.runner import StackRun, run_stack
from integration.controlplane import Api
from integration.dra import DRIVER
from integration.lane import running
from integration.runs import Admitted, admit_runs, jobset_run

SUBBLOCK = TOPOLOGY_LABELS[TopologyLevel.SUBBLOCK]


@dataclass
class A4xLane:
    run: StackRun
    api: Api
    admitted: Admitted

    def node_labels(self, name: str) -> dict[str, str]:
        _, node = self.api.request("GET", f"/api/v1/nodes/{name}")
        return dict(node["metadata"]["labels"])

    def workload_and_pods(self) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        workload, pods = jobset_run(self.api, "nemo", self.admitted.name)
        assert workload is not None
        return workload, pods


@pytest.fixture(scope="module")
def lane() -> Iterator[A4xLane]:
    run = run_stack("a4x")
    # Pods stay Running: a finished pod's claim is deallocated.
    with running(run, pods_complete=False) as (lane, started):
        (admitted,) = admit_runs(lane, started.api, run)
        yield A4xLane(run, started.api, admitted)


def test_the_run_is_placed_inside_one_nvlink_domain(lane: A4xLane) -> None:
    """The run requires one sub-block (planners.runs.topology_annotation): Kueue assigns it by
    topology, and the scheduler binds its 16 pods to 16 distinct nodes of one sub-block. Kueue 0.19
    documents DRA as unsupported with topology-aware scheduling and with a request's `config`
    (site/content/en/docs/concepts/dynamic_resource_allocation.md), and the channel claim has both;
    its code admits them, and this test fails on the Kueue bump that stops doing so."""
    assert lane.admitted.topology is not None, "admitted without a topology assignment"
    assert len(set(lane.admitted.nodes)) == len(lane.admitted.nodes) == 16
    domains = {lane.node_labels(node)[SUBBLOCK] for node in lane.admitted.nodes}
    assert len(domains) == 1, domains
    print(f"lane: {lane.admitted.name}: 16 pods in {domains.pop()}")


def test_kueue_charges_one_imex_channel_per_pod(lane: A4xLane) -> None:
    """Kueue 0.19.2 counts the channel the controller's claim template requests (opaque channel
    configuration included) against the mapped resource's quota: one per pod. Kueue's docs list a
    request's `config` and DRA under topology-aware scheduling as unsupported in 0.19
    (site/content/en/docs/concepts/dynamic_resource_allocation.md), while its code admits both: this
    run holds both, so a Kueue that starts refusing either fails this test and the one above."""
    workload, _ = lane.workload_and_pods()
    (assignment,) = workload["status"]["admission"]["podSetAssignments"]
    assert assignment["resourceUsage"][IMEX_CHANNEL_RESOURCE] == "16"


def test_every_pod_holds_its_own_node_s_channel(lane: A4xLane) -> None:
    """The controller-manager creates each pod's claim from the ComputeDomain's template, and the
    scheduler allocates it channel 0 of the node the pod runs on (the DeviceClass's selector)."""
    _, pods = lane.workload_and_pods()
    for pod in pods:
        (status,) = pod["status"]["resourceClaimStatuses"]
        namespace = pod["metadata"]["namespace"]
        _, claim = lane.api.request(
            "GET", f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims/{status['resourceClaimName']}"
        )
        (result,) = claim["status"]["allocation"]["devices"]["results"]
        assert (result["driver"], result["pool"], result["device"]) == (DRIVER, pod["spec"]["nodeName"], "channel-0")
