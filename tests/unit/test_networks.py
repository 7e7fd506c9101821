"""GPU network carving, tested directly for every machine type of the catalog."""

from __future__ import annotations

import ipaddress

import pytest

from facts.errors import RuleError
from facts.gcp import GPU_SUBNETS
from facts.machines import MACHINE_TYPES, GpuDirect, machine_type
from planners.networks import gpu_subnets, network_machine, network_mtu, plan_gpu_networks

GPU_CIDR = "192.168.0.0/16"


@pytest.mark.parametrize("name", list(MACHINE_TYPES))
def test_one_network_per_additional_nic_with_disjoint_ranges_inside_the_gpu_block(name: str) -> None:
    machine = machine_type(name)
    plan = plan_gpu_networks("c", machine, GPU_CIDR)
    assert len(plan) == machine.additional_networks
    ranges = [ipaddress.ip_network(nic.cidr) for nic in plan]
    assert all(r.subnet_of(ipaddress.ip_network(GPU_CIDR)) for r in ranges)
    assert len(set(ranges)) == len(ranges)
    # Pods see eth0 on the pod network, then eth1.. on the GPU networks, in plan order.
    assert [nic.interface for nic in plan] == [f"eth{i}" for i in range(1, len(plan) + 1)]
    assert len({nic.kubernetes_name for nic in plan}) == len(plan)
    assert all(nic.vpc.startswith("c-") and nic.subnet.startswith("c-") for nic in plan)


@pytest.mark.parametrize(
    "name", [n for n, m in MACHINE_TYPES.items() if m.gpudirect in (GpuDirect.TCPX, GpuDirect.TCPXO)]
)
def test_tcpx_and_tcpxo_get_one_vpc_per_gpu_nic_named_as_the_recipes_name_them(name: str) -> None:
    plan = plan_gpu_networks("c", machine_type(name), GPU_CIDR)
    n = machine_type(name).gpu_nics
    assert [nic.kubernetes_name for nic in plan] == [f"vpc{i}" for i in range(1, n + 1)]
    assert len({nic.vpc for nic in plan}) == n
    assert {nic.device_mode for nic in plan} == {"NetDevice"}


@pytest.mark.parametrize("name", [n for n, m in MACHINE_TYPES.items() if m.gpudirect is GpuDirect.RDMA])
def test_rdma_machines_get_a_gvnic_vpc_and_one_rdma_vpc_with_a_subnet_per_nic(name: str) -> None:
    machine = machine_type(name)
    plan = plan_gpu_networks("c", machine, GPU_CIDR)
    nics = machine.gpu_nics
    assert [nic.kubernetes_name for nic in plan] == ["gvnic-1", *(f"rdma-{i}" for i in range(nics))]
    rdma = [nic for nic in plan if nic.device_mode == "RDMA"]
    assert {nic.vpc for nic in rdma} == {"c-rdma"} and len({nic.subnet for nic in rdma}) == nics


def test_the_gpu_block_is_cut_into_sixteen_equal_subnets() -> None:
    subnets = gpu_subnets(GPU_CIDR)
    assert len(subnets) == GPU_SUBNETS and subnets[0] == "192.168.0.0/20" and subnets[-1] == "192.168.240.0/20"
    assert max(m.additional_networks for m in MACHINE_TYPES.values()) <= GPU_SUBNETS


def test_machines_without_gpu_nics_get_no_networks_and_the_default_mtu() -> None:
    small = [machine_type("a3-highgpu-1g"), machine_type("a3-highgpu-4g")]
    assert network_machine(small) is None and plan_gpu_networks("c", None, GPU_CIDR) == ()
    assert network_mtu(small) is None
    assert network_mtu([*small, machine_type("a3-highgpu-8g")]) == 8244


def test_machines_with_different_nic_layouts_cannot_share_the_gpu_networks() -> None:
    with pytest.raises(RuleError, match="different GPU network layouts"):
        network_machine([machine_type("a3-highgpu-8g"), machine_type("a3-megagpu-8g")])
    assert network_machine([machine_type("a3-ultragpu-8g"), machine_type("a4-highgpu-8g")]) is not None
