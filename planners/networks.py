"""The GPU networks a machine type needs: one subnet per GPU NIC, carved from one address block,
under the names the workloads refer to."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from facts.errors import RuleError
from facts.gcp import gpu_subnet_prefix
from facts.machines import GpuDirect, MachineType


@dataclass(frozen=True)
class GpuNetworkPlan:
    """One additional node network: a subnet of a GPU VPC, and the GKE `Network` object (same
    name as its `GKENetworkParamSet`) through which pods attach to it."""

    kubernetes_name: str
    # Short, stable key of the VPC within the cluster ("gpu-1", "gvnic-1", "rdma").
    network_key: str
    vpc: str
    subnet: str
    cidr: str
    device_mode: Literal["NetDevice", "RDMA"]
    # Interface name inside a pod attached to this network.
    interface: str


def gpu_subnets(gpu_cidr: str) -> list[str]:
    """The GPU block cut into facts.gcp.GPU_SUBNETS equal ranges, in address order."""
    return [str(s) for s in ipaddress.IPv4Network(gpu_cidr).subnets(new_prefix=gpu_subnet_prefix(gpu_cidr))]


def network_machine(machines: Iterable[MachineType]) -> MachineType | None:
    """The machine whose NIC layout the cluster's GPU networks follow: every multi-NIC machine of
    one cluster shares them, so their layouts must agree."""
    layouts = {m.nic_layout: m for m in machines if m.is_multi_nic}
    if len(layouts) > 1:
        names = sorted(m.name for m in layouts.values())
        raise RuleError("gpuPools", names, "multi-NIC machine types with different GPU network layouts")
    return next(iter(layouts.values()), None)


def network_mtu(machines: Iterable[MachineType]) -> int | None:
    """The MTU every VPC of the cluster uses: the largest the machines want (None: the default)."""
    mtus = [m.mtu for m in machines if m.mtu is not None]
    return max(mtus) if mtus else None


def plan_gpu_networks(cluster_name: str, machine: MachineType | None, gpu_cidr: str) -> tuple[GpuNetworkPlan, ...]:
    """The additional networks a machine type needs, with stable names.

    The Kubernetes names follow the public recipes (vpc1..N for TCPX/TCPXO; gvnic-1 and
    rdma-0..7 for RDMA) because workloads refer to them; subnets are taken from the GPU block in
    order, one per NIC.
    """
    if machine is None:
        return ()
    subnets = gpu_subnets(gpu_cidr)
    if machine.gpudirect in (GpuDirect.TCPX, GpuDirect.TCPXO):
        return tuple(
            GpuNetworkPlan(
                kubernetes_name=f"vpc{i}",
                network_key=f"gpu-{i}",
                vpc=f"{cluster_name}-gpu-{i}",
                subnet=f"{cluster_name}-gpu-{i}",
                cidr=subnets[i - 1],
                device_mode="NetDevice",
                interface=f"eth{i}",
            )
            for i in range(1, machine.gpu_nics + 1)
        )
    if machine.gpudirect is GpuDirect.RDMA:
        gvnics = tuple(
            GpuNetworkPlan(
                kubernetes_name=f"gvnic-{i}",
                network_key=f"gvnic-{i}",
                vpc=f"{cluster_name}-gvnic-{i}",
                subnet=f"{cluster_name}-gvnic-{i}",
                cidr=subnets[i - 1],
                device_mode="NetDevice",
                interface=f"eth{i}",
            )
            for i in range(1, machine.extra_gvnics + 1)
        )
        rdma = tuple(
            GpuNetworkPlan(
                kubernetes_name=f"rdma-{i}",
                network_key="rdma",
                vpc=f"{cluster_name}-rdma",
                subnet=f"{cluster_name}-rdma-{i}",
                cidr=subnets[machine.extra_gvnics + i],
                device_mode="RDMA",
                interface=f"eth{machine.extra_gvnics + 1 + i}",
            )
            for i in range(machine.gpu_nics)
        )
        return gvnics + rdma
    return ()
