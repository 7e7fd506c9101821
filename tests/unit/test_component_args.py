"""Every component validates its Args before it creates anything: a bad value is refused with
the field named, whoever builds the Args (the layers in stacks/, or another program)."""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from components.backend import StateBackendArgs
from components.gke import ClusterArgs, GpuNodePoolArgs, MaintenanceWindow, SystemPoolArgs
from components.iam import NodeServiceAccountArgs
from components.network import GpuNetworksArgs, PrimaryNetworkArgs
from components.project import ProjectServicesArgs
from components.scheduling import KueueControllerArgs, KueueQueuesArgs
from components.storage import BucketVolumeArgs, SharedFilesystemArgs
from components.workspace import TrainingWorkspaceArgs
from facts.errors import RuleError
from facts.gke import CapacityType
from facts.kueue import WithinClusterQueue
from facts.machines import machine_type
from facts.podsecurity import PodSecurityLevel
from planners.networks import plan_gpu_networks
from planners.pools import GpuPoolExport, NodePoolSpec
from planners.queues import plan_flavor
from tests.conftest import parse_source

ROOT = Path(__file__).resolve().parents[2]


def args_classes() -> list[tuple[str, ast.ClassDef]]:
    return [
        (path.name, node)
        for path in sorted((ROOT / "components").glob("*.py"))
        for node in parse_source(path.read_text()).body
        if isinstance(node, ast.ClassDef) and node.name.endswith("Args")
    ]


@pytest.mark.parametrize(("module", "cls"), args_classes(), ids=lambda v: getattr(v, "name", v))
def test_every_component_args_class_is_frozen_and_checks_itself(module: str, cls: ast.ClassDef) -> None:
    decorators = [ast.unparse(d) for d in cls.decorator_list]
    assert "dataclass(frozen=True)" in decorators, (module, cls.name)
    assert any(isinstance(n, ast.FunctionDef) and n.name == "__post_init__" for n in cls.body), (module, cls.name)


POOL = NodePoolSpec("pool", "a3-highgpu-8g", "us-central1-c", CapacityType.ON_DEMAND, 2, None, True)
WINDOW = MaintenanceWindow("2025-01-04T03:00:00Z", "2025-01-04T11:00:00Z", "FREQ=WEEKLY;BYDAY=SA")
CLUSTER = ClusterArgs(
    "nemo-dev", "p", "us-central1-c", "net", "subnet", "pods", "services", "172.16.0.0/28", "REGULAR",
    "1.32.0-gke.1", True, False, SystemPoolArgs("e2-standard-4", 1, 100), "sa", WINDOW,
)  # fmt: skip
NETWORKS = GpuNetworksArgs("p", "us-central1", "us-central1-c", plan_gpu_networks(
    "c", machine_type("a3-highgpu-8g"), "192.168.0.0/16"), 8244, "192.168.0.0/16")  # fmt: skip
FLAVOR = plan_flavor(GpuPoolExport("pool", "a3-highgpu-8g", "us-central1-c", 2, CapacityType.ON_DEMAND, True, 2))


def _with(args: Any, **changes: Any) -> Callable[[], Any]:
    return lambda: dataclasses.replace(args, **changes)


PRIMARY = ("r", "10.0.0.0/20", "10.4.0.0/14", "10.0.32.0/20")


def filestore(capacity_gib: int) -> SharedFilesystemArgs:
    return SharedFilesystemArgs("p", "fs", "z", "ZONAL", capacity_gib, "nemo", "n", "ns", "shared", False, {})


def bucket(name: str, grants: list[tuple[str, Any]]) -> BucketVolumeArgs:
    return BucketVolumeArgs("p", "r", name, True, False, "ns", "data", [], grants, False, {})


BAD: dict[str, tuple[Callable[[], Any], str]] = {
    "cluster name": (_with(CLUSTER, name="Nemo_Dev"), "name"),
    "cluster version": (_with(CLUSTER, version="latest"), ""),
    "system pool": (lambda: SystemPoolArgs("e2-standard-4", 0, 100), "system_pool.node_count"),
    "some GPU NICs": (
        lambda: GpuNodePoolArgs(POOL, "p", "c", "c-id", "us-central1-c", "sa", [{"network": "n"}]),
        "node_networks",
    ),
    "network name": (lambda: PrimaryNetworkArgs("Net", *PRIMARY, None, False), "name"),
    "mtu": (lambda: PrimaryNetworkArgs("net", *PRIMARY, 9000, False), "mtu"),
    "gpu subnets outside the block": (_with(NETWORKS, gpu_cidr="10.200.0.0/16"), "plan"),
    "account id": (lambda: NodeServiceAccountArgs("p", "nodes", "GKE nodes"), "account_id"),
    "service": (lambda: ProjectServicesArgs("p", ["compute"]), "services"),
    "state bucket": (lambda: StateBackendArgs("p", "r", "goog-state", "ring", "key", 90, [], False), "bucket"),
    "filestore capacity": (lambda: filestore(1100), "capacity_gib"),
    "bucket volume": (lambda: bucket("Data", []), "bucket_name"),
    "bucket role": (lambda: bucket("data-1", [("storage.admin", "m")]), "grants"),
    "kueue timeout": (lambda: KueueControllerArgs({"pool": "system"}, 30, 5, 2), "wait_for_pods_ready_timeout_seconds"),
    "queue name": (
        lambda: KueueQueuesArgs([FLAVOR], "A3_Queue", "q", "ns", WithinClusterQueue.NEVER, []),
        "cluster_queue",
    ),
    "no flavors": (lambda: KueueQueuesArgs([], "q", "q", "ns", WithinClusterQueue.NEVER, []), "flavors"),
    "namespace": (
        lambda: TrainingWorkspaceArgs("p", "p.svc.id.goog", "Nemo", ["sa"], PodSecurityLevel.BASELINE),
        "namespace",
    ),
}


@pytest.mark.parametrize("case", BAD)
def test_a_bad_value_is_refused_with_its_field_named(case: str) -> None:
    build, key = BAD[case]
    with pytest.raises(ValueError) as error:
        build()
    if key:
        assert isinstance(error.value, RuleError) and error.value.key == key, error.value
