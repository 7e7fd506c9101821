"""The integration lane's tool pins agree with the program's: the Kueue and JobSet managers it
builds are the releases whose charts and CRDs the program installs, and each wrapper module
requires the version the build script names."""

from __future__ import annotations

import re
from pathlib import Path

from facts import versions
from tools.lane import api_path, node_manifests
from tools.runner import run_stack

INTEGRATION = Path(__file__).parent.parent / "integration"


def pins() -> dict[str, str]:
    text = (INTEGRATION / "versions.sh").read_text()
    return dict(re.findall(r"^([A-Z_]+)=(\S+)$", text, re.MULTILINE))


def test_the_lane_builds_the_controllers_the_program_installs() -> None:
    assert pins()["KUEUE_VERSION"] == f"v{versions.KUEUE.version.lstrip('v')}"
    assert pins()["JOBSET_VERSION"] == f"v{versions.JOBSET.version.lstrip('v')}"


def test_each_wrapper_requires_the_pinned_release() -> None:
    wrappers = {
        "etcd": ("go.etcd.io/etcd/server/v3", "ETCD_VERSION"),
        "kubernetes": ("k8s.io/kubernetes", "KUBERNETES_VERSION"),
    }
    for wrapper, (module, pin) in wrappers.items():
        go_mod = (INTEGRATION / "wrappers" / wrapper / "go.mod").read_text()
        assert re.search(rf"^\s*(require )?{re.escape(module)} {re.escape(pins()[pin])}$", go_mod, re.MULTILINE)
        assert (INTEGRATION / "wrappers" / wrapper / "go.sum").exists()
    staging = (INTEGRATION / "wrappers" / "kubernetes" / "go.mod").read_text()
    minor = pins()["KUBERNETES_VERSION"].replace("v1.", "v0.")
    replaced = re.findall(r"^\s+(k8s\.io/\S+) => \1 (\S+)$", staging, re.MULTILINE)
    assert replaced and all(version == minor for _, version in replaced)


def test_objects_go_to_their_collections() -> None:
    assert api_path({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n"}}) == "/api/v1/namespaces"
    topology = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology", "metadata": {"name": "t"}}
    assert api_path(topology) == "/apis/kueue.x-k8s.io/v1beta2/topologies"
    priority = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass", "metadata": {"name": "p"}}
    assert api_path(priority) == "/apis/kueue.x-k8s.io/v1beta2/workloadpriorityclasses"
    jobset = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "j", "namespace": "nemo"},
    }
    assert api_path(jobset) == "/apis/jobset.x-k8s.io/v1alpha2/namespaces/nemo/jobsets"


def test_the_simulated_nodes_are_the_stack_s_pools() -> None:
    """kwok's nodes carry what the flavors select and what the runs request: the existing
    stack's 4 a3-ultra nodes with its labels, the GPU taint and 8 GPUs, and one system node."""
    nodes = node_manifests(run_stack("existing"))
    gpu = [n for n in nodes if "nvidia.com/gpu" in n["status"]["allocatable"]]
    assert len(gpu) == 4 and len(nodes) == 5
    for node in gpu:
        assert node["metadata"]["labels"]["cloud.google.com/gke-nodepool"] == "a3-ultra-pool"
        assert node["status"]["allocatable"]["nvidia.com/gpu"] == "8"
        assert node["spec"]["taints"][0]["key"] == "nvidia.com/gpu"
        assert "cloud.google.com/gce-topology-block" in node["metadata"]["labels"]
