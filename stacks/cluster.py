"""Cluster layer: node identity, the primary and GPU networks, the GKE cluster and its pools.

Hands the platform layer `ClusterOutputs`: plain facts (names, pools, networks) and the
Kubernetes provider. A stack that starts at a later layer rebuilds the same record from
this layer's stack outputs.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components import versions
from components.gke import Cluster, ClusterArgs, GpuNodePool, GpuNodePoolArgs
from components.iam import NodeServiceAccount, NodeServiceAccountArgs
from components.network import (
    GpuNetworkPlan,
    GpuNetworks,
    GpuNetworksArgs,
    PrimaryNetwork,
    PrimaryNetworkArgs,
    plan_gpu_networks,
)
from stacks.config import DWS_CAPACITY, CapacityType, Model, StackConfig


class PoolFacts(Model):
    """What later layers need to know about a GPU pool."""

    name: str
    machine_type: str
    zone: str
    max_nodes: int
    capacity_type: CapacityType
    compact: bool

    @property
    def has_topology_labels(self) -> bool:
        """GKE labels A3 nodes with block/subblock/host only when they come from compact
        placement or a (dense) reservation."""
        return self.compact or self.capacity_type == "reservation"


class ClusterFacts(Model):
    """The cluster layer's plain outputs (stack output `cluster`)."""

    project: str
    region: str
    zone: str
    name: str
    location: str
    production: bool
    primary_network: str
    node_cidr: str
    gpu_networks: tuple[GpuNetworkPlan, ...]
    gpu_pools: tuple[PoolFacts, ...]
    system_pool: str
    workload_pool: str


@dataclass(frozen=True)
class ClusterOutputs:
    facts: ClusterFacts
    kubeconfig: pulumi.Output[str]
    provider: k8s.Provider
    # The primary VPC's name; an Output of the network in a one-stack environment, so that
    # what lives on it (Filestore) is deleted before it.
    primary_network: pulumi.Input[str]


def gpu_network_plan(cfg: StackConfig) -> tuple[GpuNetworkPlan, ...]:
    """The GPU networks of the stack's multi-NIC machine type (the config allows only one layout)."""
    multi_nic = [m for m in cfg.gpu_machines if m.is_multi_nic]
    if not multi_nic:
        return ()
    gpu = ipaddress.IPv4Network(cfg.network.gpu_cidr)
    subnets = [str(s) for s in gpu.subnets(prefixlen_diff=4)]
    return plan_gpu_networks(cfg.cluster_name, multi_nic[0], subnets)


def cluster_facts(cfg: StackConfig) -> ClusterFacts:
    location = cfg.region if cfg.cluster.regional else cfg.zone
    return ClusterFacts(
        project=cfg.project,
        region=cfg.region,
        zone=cfg.zone,
        name=cfg.cluster_name,
        location=location,
        production=cfg.production,
        primary_network=cfg.cluster_name,
        node_cidr=cfg.network.node_cidr,
        gpu_networks=gpu_network_plan(cfg),
        gpu_pools=tuple(
            PoolFacts(
                name=p.name,
                machine_type=p.machine_type,
                zone=cfg.pool_zone(p),
                max_nodes=p.max_nodes,
                capacity_type=p.capacity.type,
                compact=p.compact,
            )
            for p in cfg.gpu_pools
        ),
        system_pool="system",
        workload_pool=f"{cfg.project}.svc.id.goog",
    )


def minimum_gke_version(cfg: StackConfig) -> str:
    """The newest of the platform's, the machines' and the capacity modes' version floors."""
    floors = [versions.PLATFORM_MIN_GKE_VERSION, *(m.min_gke_version for m in cfg.gpu_machines)]
    if any(p.capacity.type in DWS_CAPACITY for p in cfg.gpu_pools):
        floors.append(versions.FLEX_START_MIN_GKE_VERSION)
    return max(floors, key=versions.gke_version_key)


class ClusterLayer(pulumi.ComponentResource):
    cluster: Cluster
    primary_network: pulumi.Output[str]

    def __init__(self, name: str, args: StackConfig, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("nemo:cluster:ClusterLayer", name, None, opts)
        cfg = args
        facts = cluster_facts(cfg)
        child = pulumi.ResourceOptions(parent=self)
        mtus = [m.mtu for m in cfg.gpu_machines if m.mtu is not None]
        mtu: int | None = max(mtus) if mtus else None

        nodes = NodeServiceAccount(
            f"{name}-nodes",
            NodeServiceAccountArgs(
                project=cfg.project,
                account_id=f"{cfg.cluster_name}-nodes",
                display_name=f"GKE nodes of {cfg.cluster_name}",
            ),
            opts=child,
        )
        primary = PrimaryNetwork(
            f"{name}-network",
            PrimaryNetworkArgs(
                name=facts.primary_network,
                region=cfg.region,
                node_cidr=cfg.network.node_cidr,
                pod_cidr=cfg.network.pod_cidr,
                service_cidr=cfg.network.service_cidr,
                mtu=mtu,
                iap_ssh=cfg.network.iap_ssh,
            ),
            opts=child,
        )
        self.primary_network = primary.network_name
        node_networks: list[dict[str, pulumi.Output[str]]] = []
        if facts.gpu_networks:
            assert mtu is not None
            node_networks = GpuNetworks(
                f"{name}-gpu-networks",
                GpuNetworksArgs(
                    project=cfg.project,
                    region=cfg.region,
                    zone=cfg.zone,
                    plan=facts.gpu_networks,
                    mtu=mtu,
                    gpu_cidr=cfg.network.gpu_cidr,
                ),
                opts=child,
            ).node_networks
        self.cluster = Cluster(
            f"{name}-gke",
            ClusterArgs(
                name=cfg.cluster_name,
                project=cfg.project,
                location=facts.location,
                network=primary.network_id,
                subnetwork=primary.subnet_name,
                pods_range_name=primary.pods_range_name,
                services_range_name=primary.services_range_name,
                control_plane_cidr=cfg.network.control_plane_cidr,
                release_channel=cfg.cluster.release_channel,
                min_version=minimum_gke_version(cfg),
                multi_networking=bool(facts.gpu_networks),
                deletion_protection=cfg.production,
                system_pool=cfg.system_pool,
                node_service_account=nodes.email,
                maintenance_window=cfg.cluster.maintenance_window,
                authorized_networks=cfg.cluster.master_authorized_networks,
                maintenance_exclusions=cfg.cluster.maintenance_exclusions,
            ),
            opts=child,
        )
        for pool in cfg.gpu_pools:
            GpuNodePool(
                f"{name}-{pool.name}",
                GpuNodePoolArgs(
                    project=cfg.project,
                    cluster=self.cluster.id,
                    location=facts.location,
                    zone=cfg.pool_zone(pool),
                    pool=pool,
                    node_service_account=nodes.email,
                    node_networks=node_networks if pool.machine.is_multi_nic else [],
                    labels=cfg.labels,
                ),
                opts=child,
            )
        self.register_outputs({"cluster": self.cluster.name})


def build(cfg: StackConfig, facts: ClusterFacts, opts: pulumi.ResourceOptions) -> tuple[ClusterOutputs, dict[str, Any]]:
    layer = ClusterLayer("cluster", cfg, opts)
    outputs = ClusterOutputs(
        facts=facts,
        kubeconfig=layer.cluster.kubeconfig,
        provider=layer.cluster.provider,
        primary_network=layer.primary_network,
    )
    exports = {
        "cluster": facts.to_plain(),
        "kubeconfig": layer.cluster.kubeconfig,
        "getCredentials": f"gcloud container clusters get-credentials {facts.name} "
        f"--location {facts.location} --project {facts.project}",
    }
    return outputs, exports


def from_upstream(facts: ClusterFacts, kubeconfig: pulumi.Output[str]) -> ClusterOutputs:
    """The same record for a stack that reads the cluster layer from another stack."""
    provider = k8s.Provider(
        "cluster-k8s",
        kubeconfig=kubeconfig,
        cluster_identifier=f"projects/{facts.project}/locations/{facts.location}/clusters/{facts.name}",
    )
    return ClusterOutputs(facts=facts, kubeconfig=kubeconfig, provider=provider, primary_network=facts.primary_network)
