"""The integration lane's tool pins agree with the program's: the Kueue and JobSet managers it
builds are the releases whose charts and CRDs the program installs, and each wrapper module
requires the version the build script names."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import yaml

from facts import versions
from facts.project import qualified_stack_name
from harness.runner import run_stack
from integration import engine
from integration.controllers import PREVIOUS, lane_kueue_config
from integration.controlplane import free_port, lane_binary_versions
from integration.nodes import node_manifests
from integration.runs import api_path

INTEGRATION = Path(__file__).resolve().parents[2] / "integration"


def pins() -> dict[str, str]:
    text = (INTEGRATION / "versions.sh").read_text()
    return dict(re.findall(r"^([A-Z_]+)=(\S+)$", text, re.MULTILINE))


def test_the_lane_builds_the_controllers_the_program_installs() -> None:
    assert pins()["KUEUE_VERSION"] == f"v{versions.KUEUE.version.lstrip('v')}"
    assert pins()["JOBSET_VERSION"] == f"v{versions.JOBSET.version.lstrip('v')}"


def test_the_upgrade_scenario_starts_from_releases_before_the_pins() -> None:
    """tests/integration/test_lane_upgrade.py moves PREVIOUS to the pins: a bump of a pin keeps
    PREVIOUS older (the old pin is the natural next PREVIOUS)."""

    def release(version: str) -> tuple[int, ...]:
        return tuple(int(part) for part in version.lstrip("v").split("."))

    for name in ("KUEUE", "JOBSET"):
        assert release(pins()[f"{name}_PREVIOUS_VERSION"]) < release(pins()[f"{name}_VERSION"]), name
    assert PREVIOUS.kueue.version == pins()["KUEUE_PREVIOUS_VERSION"]
    assert PREVIOUS.jobset.version == pins()["JOBSET_PREVIOUS_VERSION"]


def test_each_wrapper_requires_the_pinned_release() -> None:
    wrappers = {
        "etcd": ("go.etcd.io/etcd/server/v3", "ETCD_VERSION"),
        "kubernetes": ("k8s.io/kubernetes", "KUBERNETES_VERSION"),
        "pulumi-config": ("github.com/pulumi/pulumi/sdk/v3", "PULUMI_SDK_VERSION"),
        # A `tool` directive's module is required as indirect (Go 1.24 and later).
        "pulumi": ("github.com/pulumi/pulumi/pkg/v3", "PULUMI_CLI_VERSION"),
        "pulumi-kubernetes": ("github.com/pulumi/pulumi-kubernetes/provider/v4", "PULUMI_KUBERNETES_VERSION"),
    }
    for wrapper, (module, pin) in wrappers.items():
        go_mod = (INTEGRATION / "wrappers" / wrapper / "go.mod").read_text()
        required = rf"^\s*(require )?{re.escape(module)} {re.escape(pins()[pin])}( // indirect)?$"
        assert re.search(required, go_mod, re.MULTILINE), wrapper
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
        assert node["spec"]["taints"] == [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
        assert "cloud.google.com/gce-topology-block" in node["metadata"]["labels"]


def test_the_simulated_nodes_of_a_pool_outside_the_catalog_are_what_it_describes() -> None:
    """existing-oke: BM.GPU.H100.8 nodes with the described labels, GPUs and allocatable CPU and
    memory, and no GKE topology label (OKE has none; its runs are not placed by topology)."""
    gpu = [n for n in node_manifests(run_stack("existing-oke")) if "nvidia.com/gpu" in n["status"]["allocatable"]]
    assert len(gpu) == 2
    for node in gpu:
        labels = node["metadata"]["labels"]
        assert labels["node.kubernetes.io/instance-type"] == "BM.GPU.H100.8" and labels["nvidia.com/gpu"] == "true"
        assert not [key for key in labels if key.startswith("cloud.google.com/")]
        assert node["spec"]["taints"] == [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
        assert node["status"]["allocatable"] == {
            "cpu": "220000m",
            "memory": f"{1800 * 1024}Mi",
            "nvidia.com/gpu": "8",
            "pods": "110",
        }


def test_the_lane_builds_the_engine_where_the_scenarios_look() -> None:
    """build-tools.sh builds the CLI and the provider (the provider's module beside its wrapper, as
    the wrapper's go.mod replaces it) and links them under the names and in the folder
    integration/engine.py takes them from."""
    build = (INTEGRATION / "build-tools.sh").read_text()
    assert engine.BIN_DIR.relative_to(engine.CACHE) == Path("integration/pulumi")
    for name in engine.BINARIES:
        assert f'"$cache/pulumi/{name}"' in build
    provider_mod = (INTEGRATION / "wrappers" / "pulumi-kubernetes" / "go.mod").read_text()
    assert "replace github.com/pulumi/pulumi-kubernetes/provider/v4 => ./provider" in provider_mod
    assert 'cp -r "$dir" "$tmp/provider"' in build


def test_the_engine_scenarios_say_why_they_are_skipped(tmp_path: Path) -> None:
    """Without a Pulumi CLI and kubernetes provider, tests/integration/test_engine.py is skipped
    with the reason (and how to build them); with both, it runs."""
    (tmp_path / "pulumi").write_text("")
    reason = engine.missing_binaries(tmp_path)
    assert reason is not None and reason.startswith("no pulumi and pulumi-resource-kubernetes in")
    assert "`make integration-tools` builds them" in reason
    (tmp_path / "pulumi-resource-kubernetes").write_text("")
    assert engine.missing_binaries(tmp_path) is None


def test_the_engine_stacks_run_on_the_lane(tmp_path: Path) -> None:
    """The shipped `existing` stack, pointed at the lane's kubeconfig, leaves Kueue and JobSet
    to the lane's processes and still emits its run; the run-only stack reads it as upstream."""
    values = engine.lane_values(tmp_path / "admin.kubeconfig")
    first = run_stack(engine.FIRST, values=values)
    assert not first.of_type("kubernetes:helm.sh/v3:Release")
    assert [r.inputs["kind"] for r in first.of_type("kubernetes:jobset.x-k8s.io/v1alpha2:JobSet")] == ["JobSet"]
    provider = first.one("pulumi:providers:kubernetes")
    assert provider.inputs["context"] == "lane"
    second = run_stack(
        engine.RUN_ONLY,
        values=engine.run_only_values(values),
        upstream={qualified_stack_name(engine.FIRST): first.exports},
    )
    assert len(second.of_type("kubernetes:jobset.x-k8s.io/v1alpha2:JobSet")) == 1
    assert not second.of_type("kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue")
    claims = {"shared": "s", "data": "d", "checkpoints": "d"}
    own = run_stack(engine.OWN_CLAIMS, values=engine.own_claims_values(values, "team", claims))
    assert sorted(r.read_id for r in own.resources if r.read) == ["team", "team/d", "team/s"]


def test_the_lanes_kueue_is_configured_as_the_program_configures_its_own() -> None:
    """A stack that installs Kueue gives its release this configuration; a stack that takes the
    cluster's Kueue (the shipped existing examples) gets a lane Kueue configured the same way."""
    installing = run_stack("dev")
    (release,) = [r for r in installing.of_type("kubernetes:helm.sh/v3:Release") if "kueue" in r.name]
    given = yaml.safe_load(release.inputs["values"]["managerConfig"]["controllerManagerConfigYaml"])
    assert lane_kueue_config(installing) == given
    taken = run_stack("existing")
    assert not taken.of_type("kubernetes:helm.sh/v3:Release")
    assert lane_kueue_config(taken)["waitForPodsReady"] == given["waitForPodsReady"]


def test_the_lane_writes_nothing_outside_its_folders() -> None:
    """Kueue reads its metrics certificate from /etc/kueue/metrics/certs when it manages no
    certificates (kueue cmd/kueue/main.go @v0.19.2), which only root may write: the lane builds it
    to read the folder from KUEUE_METRICS_CERT_DIR instead, and names the binary after the change."""
    lane_sources = {path.name: path.read_text() for path in INTEGRATION.glob("*.py")}
    assert [name for name, text in lane_sources.items() if "/etc/" in text] == []
    build = (INTEGRATION / "build-tools.sh").read_text()
    assert 'metricsCertPath := os.Getenv("KUEUE_METRICS_CERT_DIR")' in build
    assert 'step kueue "$KUEUE_VERSION+$KUEUE_LANE_PATCH"' in build
    assert lane_binary_versions()["kueue"] == f"{pins()['KUEUE_VERSION']}+{pins()['KUEUE_LANE_PATCH']}"


def test_gpu_train_without_a_gpu_downloads_nothing(tmp_path: Path) -> None:
    """It installed the 2.2 GB runtime environment first, then found no GPU."""
    root = INTEGRATION.parent
    # A PATH without nvidia-smi (a machine with no NVIDIA driver), keeping make, python and pip.
    path = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if not (Path(p) / "nvidia-smi").exists())
    done = subprocess.run(
        ["make", "-s", "gpu-train", "RUNTIME_VENV=" + str(tmp_path / "runtime")],
        check=False,
        cwd=root,
        env={**os.environ, "PATH": path},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode != 0
    assert "needs an NVIDIA GPU: nvidia-smi -L finds none (nothing was downloaded)" in done.stderr
    assert not (tmp_path / "runtime").exists()


def test_the_lanes_ports_lie_below_the_ephemeral_range_and_are_handed_out_once() -> None:
    """A port in the kernel's ephemeral range, bound and released, may be taken by any outgoing
    connection before the process that was given it binds it."""
    first_ephemeral = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    ports = [free_port() for _ in range(50)]
    assert len(set(ports)) == len(ports)
    assert all(first_ephemeral // 2 <= port < first_ephemeral for port in ports), ports
