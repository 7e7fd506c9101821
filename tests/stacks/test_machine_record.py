"""The machine record carries every decision: a machine the catalog never heard of, added as data
only, renders a whole stack, and the rules that read the record read its fields, not names."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest

from facts import machines
from facts.machines import (
    ACCELERATORS,
    MACHINE_TYPES,
    RDMA_ARM64_STACK,
    RDMA_STACK,
    TCPX_STACK,
    TCPXO_STACK,
    Accelerator,
    CpuArch,
    MachineType,
    Precision,
)
from facts.versions import Image
from harness.runner import run_stack, stack_with
from planners import gpudirect
from planners.workload import SM100
from tests.conftest import NODE_POOL, Render, assert_valid, gpu_pools, issue_for, rejected

ARM_PLUGIN = Image("example.invalid/gib-arm64", "v9.9.9", source="a test")
X1 = Accelerator(
    "x1",
    "Example",
    (11, 0),
    256,
    {Precision.BF16: 4000.0, Precision.FP8: 8000.0},
    {"peak_dense_tflops": "a test", "memory_gb": "a test", "compute_capability": "a test"},
)
# Arm hosts, 4 GPUs each, RDMA with its own arm64 plugin, on 4 RDMA NICs and one extra gVNIC.
X9 = MachineType(
    name="x9-examplegpu-4g",
    accelerator=X1,
    gpus=4,
    gke_accelerator="nvidia-x1",
    vcpus=144,
    memory_gib=960,
    local_ssds=4,
    cpu_arch=CpuArch.ARM64,
    nvlink_domain_gpus=4,
    gpudirect_stack=dataclasses.replace(RDMA_STACK, node_plugin=ARM_PLUGIN),
    gpu_nics=4,
    extra_gvnics=1,
    mtu=8896,
    boot_disk_types=("hyperdisk-balanced",),
    node_image_type="COS_CONTAINERD_ARM",
    min_gke_version="1.33.4-gke.1036000",
    compact_with_flex_start=True,
    zones=frozenset({"us-central1-b"}),
    sources={},
)


@pytest.fixture
def x9(monkeypatch: pytest.MonkeyPatch) -> Iterator[MachineType]:
    """The fictional machine in the catalog for one test: two table rows, nothing else."""
    monkeypatch.setitem(ACCELERATORS, X1.name, X1)  # type: ignore[index]
    monkeypatch.setitem(MACHINE_TYPES, X9.name, X9)  # type: ignore[index]
    yield X9


def x9_stack(**run: Any) -> dict[str, Any]:
    return stack_with(
        "dev",
        zone="us-central1-b",
        gpuPools=[{"name": "x9", "machineType": X9.name, "nodeCount": 4}],
        training={"runs": [{"name": "llama-x9", "model": "llama3.1-8b", "nodes": 2, "steps": 10, **run}]},
    )


def test_a_machine_added_as_data_renders_a_whole_stack(x9: MachineType, render: Render) -> None:
    run = render("dev", values=x9_stack())
    assert_valid(run)
    (pool,) = gpu_pools(run)
    node = pool.inputs["nodeConfig"]
    assert node["machineType"] == x9.name
    assert node["imageType"] == "COS_CONTAINERD_ARM"
    assert node["guestAccelerators"][0]["type"] == "nvidia-x1"
    assert node["guestAccelerators"][0]["count"] == 4
    # The GPU NICs: one RDMA subnet per GPU NIC plus the extra gVNIC, beside the primary network.
    assert len(pool.inputs["networkConfig"]["additionalNodeNetworkConfigs"]) == 5

    # The node plugin for Arm RDMA hosts is its own installer with the machine's own image.
    (installer,) = (
        run.manifest(r)
        for r in run.of_type("kubernetes:apps/v1:DaemonSet")
        if r.name == "platform-nccl-rdma-arm64-plugin"
    )
    assert installer["metadata"]["name"] == "nccl-rdma-arm64-installer"
    images = [c["image"] for c in installer["spec"]["template"]["spec"]["initContainers"]]
    assert ARM_PLUGIN.ref in images

    (jobset,) = map(run.manifest, run.of_type("kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"))
    pod = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    (trainer,) = pod["containers"]
    assert trainer["resources"]["limits"]["nvidia.com/gpu"] == "4"
    assert pod["nodeSelector"] == {"cloud.google.com/gke-nodepool": "x9"}


def test_a_machine_added_as_data_is_priced_only_where_a_price_is_known(x9: MachineType) -> None:
    summary = run_stack("dev", values=x9_stack()).exports["summary"]
    (pool,) = summary["pools"]
    assert (pool["machineType"], pool["gpus"], pool["usdPerHour"]) == (x9.name, 16, None)
    assert f"pool x9: no price for {x9.name} in us-central1 in the table" in summary["notPriced"]
    (run,) = summary["runs"]
    # Its step is predicted (the record is in the catalog), its cost not priced.
    assert (run["gpus"], run["stepTimePredicted"], run["usd"]) == (8, True, None)


def test_tensor_parallelism_is_bounded_by_the_nvlink_domain_not_a_name(x9: MachineType) -> None:
    error = rejected(x9_stack(tensorParallel=8))
    message = issue_for(error, "training.runs[0].tensorParallel")
    assert "must divide the 4 GPUs of a x9-examplegpu-4g NVLink domain (a node)" in message


def test_an_nvlink_domain_across_nodes_allows_tensor_parallelism_across_them(
    x9: MachineType, monkeypatch: pytest.MonkeyPatch, render: Render
) -> None:
    """GB200 NVL72's NVLink joins 72 GPUs over 18 nodes: tensor parallelism may span nodes there."""
    monkeypatch.setitem(MACHINE_TYPES, X9.name, dataclasses.replace(X9, nvlink_domain_gpus=72))  # type: ignore[index]
    render("dev", values=x9_stack(nodes=4, tensorParallel=8))


@pytest.mark.parametrize(
    ("capability", "sm100"),
    [((8, 0), False), ((9, 0), False), ((10, 0), True), ((10, 3), True), ((12, 0), True)],
)
def test_blackwell_settings_follow_compute_capability(capability: tuple[int, int], sm100: bool) -> None:
    assert (capability >= SM100) is sm100


def test_catalog_gpu_generations_are_told_apart_by_compute_capability() -> None:
    assert {a.name: a.compute_capability for a in ACCELERATORS.values()} == {
        "h100": (9, 0),
        "h200": (9, 0),
        "b200": (10, 0),
        "gb200": (10, 0),
        "a100": (8, 0),
    }


def test_one_installer_per_flavour_and_architecture() -> None:
    catalog = MACHINE_TYPES.values()
    installers = gpudirect.plugin_installers(catalog)
    assert {key: accelerators for key, (_, accelerators) in installers.items()} == {
        "tcpx": ["nvidia-h100-80gb"],
        "tcpxo": ["nvidia-h100-mega-80gb"],
        "rdma": ["nvidia-b200", "nvidia-h200-141gb"],
        "rdma-arm64": ["nvidia-gb200"],
    }
    assert installers["rdma-arm64"][0].node_plugin == RDMA_ARM64_STACK.node_plugin
    (installer, accelerators) = gpudirect.plugin_installers([X9])["rdma-arm64"]
    assert (installer.node_plugin, accelerators) == (ARM_PLUGIN, ["nvidia-x1"])
    assert gpudirect.plugin_installers(m for m in catalog if m.gpudirect_stack is None) == {}


def test_machines_sharing_an_installer_must_share_its_plugin() -> None:
    other = dataclasses.replace(X9, name="x9-other", gke_accelerator="nvidia-x2")
    other = dataclasses.replace(
        other, gpudirect_stack=dataclasses.replace(RDMA_STACK, node_plugin=dataclasses.replace(ARM_PLUGIN, tag="v1"))
    )
    with pytest.raises(ValueError, match=r"x9-other's rdma-arm64 node plugin .* differs"):
        gpudirect.plugin_installers([X9, other])


def test_catalog_machines_of_one_flavour_and_architecture_share_a_node_plugin() -> None:
    gpudirect.plugin_installers(MACHINE_TYPES.values())  # raises where two differ


@pytest.mark.parametrize(
    ("stack", "host_network"), [(TCPX_STACK, False), (TCPXO_STACK, True), (RDMA_STACK, True), (None, True)]
)
def test_host_network_pods_come_from_the_machines_gpudirect_stack(stack: Any, host_network: bool) -> None:
    machine = dataclasses.replace(X9, gpudirect_stack=stack)
    assert machine.pods_on_host_network is host_network


def test_the_gpudirect_stacks_are_those_of_the_catalog_each_once() -> None:
    stacks = [m.gpudirect_stack for m in MACHINE_TYPES.values() if m.gpudirect_stack]
    assert list(machines.GPUDIRECT_STACKS) == [TCPX_STACK, TCPXO_STACK, RDMA_STACK, RDMA_ARM64_STACK]
    assert set(map(id, stacks)) == set(map(id, machines.GPUDIRECT_STACKS))


def test_every_catalog_gpu_pool_gets_its_machines_node_image(render: Render) -> None:
    run = render("a3ultra")
    for pool in run.of_type(NODE_POOL):
        machine = MACHINE_TYPES.get(pool.inputs["nodeConfig"]["machineType"])
        if machine:
            assert pool.inputs["nodeConfig"]["imageType"] == machine.node_image_type
