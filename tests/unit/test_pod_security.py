"""What a pod needs of its namespace's Pod Security level (facts.podsecurity), and what the pods of
each machine's pools need (planners.gpudirect.machine_needs), from the Baseline policy's controls
(https://kubernetes.io/docs/concepts/security/pod-security-standards/)."""

from __future__ import annotations

import pytest

from facts.machines import machine_type
from facts.podsecurity import PodAllowance, PodSecurityLevel, needs_of, pod_specs
from planners.gpudirect import HOST_NVIDIA_DIR, machine_needs


def test_a_plain_pod_needs_only_the_baseline_level() -> None:
    spec = {"containers": [{"name": "c", "image": "i", "securityContext": {"capabilities": {"add": ["CHOWN"]}}}]}
    assert needs_of(spec) == PodAllowance()
    assert needs_of(spec).level is PodSecurityLevel.BASELINE


@pytest.mark.parametrize(
    ("spec", "excess"),
    [
        ({"hostNetwork": True, "containers": []}, ["the host network"]),
        ({"containers": [{"securityContext": {"privileged": True}}]}, ["a privileged container"]),
        ({"initContainers": [{"securityContext": {"privileged": True}}], "containers": []}, ["a privileged container"]),
        ({"volumes": [{"name": "v", "hostPath": {"path": "/"}}], "containers": []}, ["the host path /"]),
        (
            {"containers": [{"securityContext": {"capabilities": {"add": ["NET_ADMIN", "CHOWN"]}}}]},
            ["the capability NET_ADMIN"],
        ),
        ({"hostPID": True, "containers": []}, ["hostPID"]),
        ({"hostIPC": True, "containers": []}, ["hostIPC"]),
        ({"containers": [{"ports": [{"containerPort": 1, "hostPort": 1}]}]}, ["hostPort"]),
        ({"securityContext": {"sysctls": [{"name": "a", "value": "1"}]}, "containers": []}, ["sysctls"]),
    ],
)
def test_each_baseline_control_a_pod_breaks_makes_it_privileged(spec: dict[str, object], excess: list[str]) -> None:
    needs = needs_of(spec)
    assert needs.level is PodSecurityLevel.PRIVILEGED
    assert PodAllowance().excess(needs) == excess
    assert needs.excess(needs) == []


def test_pod_specs_are_read_from_every_workload_kind() -> None:
    pod = {"containers": [{"name": "c"}]}
    template = {"template": {"spec": pod}}
    assert pod_specs({"kind": "Pod", "spec": pod}) == [pod]
    assert pod_specs({"kind": "Job", "spec": template}) == [pod]
    assert pod_specs({"kind": "DaemonSet", "spec": template}) == [pod]
    jobset = {"kind": "JobSet", "spec": {"replicatedJobs": [{"template": {"spec": template}}] * 2}}
    assert pod_specs(jobset) == [pod, pod]
    assert pod_specs({"kind": "ConfigMap"}) == []


def test_each_machine_s_pods_need_what_its_recipe_s_pattern_needs() -> None:
    """A3 Mega's TCPXO pods run on the node's network with a privileged receive daemon; A3 High's
    TCPX daemon adds NET_ADMIN; A3 Ultra and A4 only mount the host's NCCL plugin, until a run is
    supervised (the host network, privileged); off GKE no GPUDirect wiring needs anything."""
    mega = machine_needs(machine_type("a3-megagpu-8g"), gke=True, plan=(), supervised=False)
    assert mega.host_network and mega.privileged and "NET_ADMIN" in mega.capabilities
    assert HOST_NVIDIA_DIR in mega.host_paths
    high = machine_needs(machine_type("a3-highgpu-8g"), gke=True, plan=(), supervised=False)
    assert not high.host_network and not high.privileged and high.capabilities == {"NET_ADMIN"}
    for name in ("a3-ultragpu-8g", "a4-highgpu-8g"):
        rdma = machine_needs(machine_type(name), gke=True, plan=(), supervised=False)
        assert rdma == PodAllowance(host_paths=frozenset({HOST_NVIDIA_DIR})), name
        assert PodAllowance().excess(mega) and rdma.excess(mega), "A3 Mega needs more than A3 Ultra"
    supervised = machine_needs(machine_type("a3-ultragpu-8g"), gke=True, plan=(), supervised=True)
    assert supervised.host_network and supervised.privileged
    for name in ("a3-megagpu-8g", "a3-ultragpu-8g"):
        assert (
            machine_needs(machine_type(name), gke=False, plan=(), supervised=False).level is PodSecurityLevel.BASELINE
        )
