"""Cluster layer: node identity, the primary and GPU networks, the GKE cluster and its pools.

Hands the platform layer `ClusterOutputs`: the plain facts (names, pools, networks) and the
Kubernetes provider. A stack that starts at a later layer rebuilds the same record from this
layer's stack outputs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s

from components.gke import (
    AuthorizedNetwork,
    Cluster,
    ClusterArgs,
    CpuNodePool,
    CpuNodePoolArgs,
    GpuNodePool,
    GpuNodePoolArgs,
    MaintenanceExclusion,
    MaintenanceWindow,
    SystemPoolArgs,
)
from components.iam import NodeServiceAccount, NodeServiceAccountArgs
from components.network import GpuNetworks, GpuNetworksArgs, PrimaryNetwork, PrimaryNetworkArgs
from components.project import ProjectServices, ProjectServicesArgs
from components.registry import ImageMirror, ImageMirrorArgs
from config.cluster import ClusterConfig, GpuPoolConfig
from config.loader import ConfigError
from config.stack import StackConfig
from facts import resiliency, versions
from facts.errors import RuleError
from facts.gcp import default_bucket, scoped_name
from facts.gke import (
    DWS_CAPACITY,
    IMAGE_STREAMING_API,
    IMAGE_STREAMING_MIN_GKE_VERSION,
    IMAGE_STREAMING_NODE_IMAGE,
    NODE_UPGRADE_EXCLUSION_NAME,
    NODE_UPGRADE_EXCLUSION_SCOPE,
    NODE_UPGRADE_EXCLUSION_START,
    PRELOAD_MIN_GKE_VERSION,
    workload_pool,
)
from facts.kubernetes import SYSTEM_POOL, UPSERT_EXISTING_OBJECTS
from facts.project import project_advice
from facts.registries import RegistryMirror, preload_build_command, preload_disk_image, resolve
from planners.networks import network_machine, network_mtu, plan_gpu_networks
from planners.pools import Autoscaling, Booking, NodePoolSpec
from stacks.contract import ClusterExports


def image_mirror(cfg: StackConfig) -> RegistryMirror | None:
    """The cluster's remote repositories, where the stack has them."""
    return RegistryMirror(cfg.gcp_project, cfg.region, cfg.cluster_name) if cfg.image_mirror else None


def image_streaming(cfg: StackConfig, pool: GpuPoolConfig) -> bool | None:
    """Image streaming on the pool: as set, else on with the mirror (through which the NeMo image
    streams) or a preloaded image (read through it) on nodes whose image has it; None leaves the
    pool's setting unset, as this program left it before it had the key."""
    if pool.image_streaming is not None:
        return pool.image_streaming
    wanted = cfg.image_mirror or pool.preloaded_image is not None
    return True if wanted and pool.machine.node_image_type == IMAGE_STREAMING_NODE_IMAGE else None


def preload_disk(cfg: StackConfig, pool: GpuPoolConfig) -> str | None:
    """The disk image of the pool's preloaded image, named by the reference its pods pull."""
    if pool.preloaded_image is None:
        return None
    return preload_disk_image(cfg.cluster_name, resolve(pool.preloaded_image, image_mirror(cfg)))


def node_pool_spec(cfg: StackConfig, pool: GpuPoolConfig) -> NodePoolSpec:
    capacity = pool.capacity
    return NodePoolSpec(
        name=pool.name,
        machine_type=pool.machine_type,
        zone=cfg.pool_zone(pool),
        capacity_type=capacity.type,
        node_count=pool.node_count if pool.autoscaling is None else None,
        autoscaling=Autoscaling(pool.autoscaling.min_nodes, pool.autoscaling.max_nodes) if pool.autoscaling else None,
        compact=pool.compact,
        reservation=capacity.reservation or (scoped_name(cfg.cluster_name, pool.name) if capacity.booking else None),
        booking=(
            Booking(capacity.booking.start_time, capacity.booking.days, capacity.booking.draft)
            if capacity.booking
            else None
        ),
        reservation_block=capacity.reservation_block,
        reservation_project=capacity.reservation_project,
        placement_policy=pool.placement_policy,
        auto_repair=pool.auto_repair,
        gpu_driver_version=pool.gpu_driver_version,
        disk_type=pool.disk_type,
        disk_size_gb=pool.disk_size_gb,
        max_pods_per_node=pool.max_pods_per_node,
        max_run_duration_seconds=capacity.max_run_duration_seconds,
        image_streaming=image_streaming(cfg, pool),
        preloaded_image=pool.preloaded_image,
        preload_disk_image=preload_disk(cfg, pool),
        place_by_topology=pool.place_by_topology is not False,
    )


def cluster_facts(cfg: StackConfig) -> ClusterExports:
    location = cfg.region if cfg.cluster.regional else cfg.zone
    return ClusterExports(
        project=cfg.gcp_project,
        region=cfg.region,
        zone=cfg.zone,
        name=cfg.cluster_name,
        location=location,
        production=cfg.production,
        primary_network=cfg.cluster_name,
        workload_pool=workload_pool(cfg.gcp_project),
        system_pool=SYSTEM_POOL,
        gpu_networks=plan_gpu_networks(cfg.cluster_name, network_machine(cfg.gpu_machines), cfg.network.gpu_cidr),
        gpu_pools=tuple(node_pool_spec(cfg, p).facts for p in cfg.gpu_pools),
        supervisor_pool=resiliency.SUPERVISOR_POOL if cfg.resiliency.enabled else None,
        rbac_security_group=cfg.cluster.rbac_security_group,
        image_mirror=image_mirror(cfg),
    )


def supervisor_zone(cfg: StackConfig) -> str:
    """The recipe puts the supervisor's pool in the zone of the GPU pool it watches."""
    return cfg.resiliency.pool.zone or cfg.pool_zone(cfg.gpu_pools[0])


def maintenance_exclusions(cfg: ClusterConfig) -> list[MaintenanceExclusion]:
    """The stack's exclusions, and the standing one that keeps GKE from upgrading nodes."""
    exclusions = [MaintenanceExclusion(e.name, e.start_time, e.end_time, e.scope) for e in cfg.maintenance_exclusions]
    if cfg.pause_node_upgrades:
        exclusions.append(
            MaintenanceExclusion(
                NODE_UPGRADE_EXCLUSION_NAME, NODE_UPGRADE_EXCLUSION_START, None, NODE_UPGRADE_EXCLUSION_SCOPE
            )
        )
    return exclusions


def minimum_gke_version(cfg: StackConfig) -> str:
    """The newest of the platform's, the machines', the capacity modes' and the image features' floors."""
    floors = [versions.PLATFORM_MIN_GKE_VERSION, *(m.min_gke_version for m in cfg.gpu_machines)]
    if any(p.capacity.type in DWS_CAPACITY for p in cfg.gpu_pools):
        floors.append(versions.FLEX_START_MIN_GKE_VERSION)
    if any(image_streaming(cfg, p) for p in cfg.gpu_pools):
        floors.append(IMAGE_STREAMING_MIN_GKE_VERSION)
    if any(p.preloaded_image for p in cfg.gpu_pools):
        floors.append(PRELOAD_MIN_GKE_VERSION)
    return max(floors, key=versions.gke_version_key)


def preload_commands(cfg: StackConfig) -> dict[str, str]:
    """Per disk image of a preloaded pool, the one command that builds it (in the first zone that
    uses it) on the cluster's network, pulling the image as the pods do; its logs go to the stack's
    data bucket (the builder needs both: a first deployment adds preloadedImage once they exist)."""
    commands: dict[str, str] = {}
    for pool in cfg.gpu_pools:
        disk = preload_disk(cfg, pool)
        if pool.preloaded_image is None or disk is None or disk in commands:
            continue
        commands[disk] = preload_build_command(
            cfg.gcp_project,
            cfg.pool_zone(pool),
            network=cfg.cluster_name,
            disk_image=disk,
            pulled_as=resolve(pool.preloaded_image, image_mirror(cfg)),
            logs_bucket=cfg.storage.data_bucket.name or default_bucket(cfg.gcp_project, cfg.cluster_name, "data"),
        )
    return commands


def check_release_channel(cfg: StackConfig, facts: ClusterExports) -> str:
    """The release channel's default GKE version, read before anything is registered, which must
    meet the newest floor of the stack's pools and features (minimum_gke_version): GKE creates the
    cluster at that version, and a pool needing a newer one fails after the cluster's ten minutes."""
    channel = cfg.cluster.release_channel
    defaults = (
        gcp.container.get_engine_versions(
            location=facts.location, project=cfg.gcp_project
        ).release_channel_default_version
        or {}
    )
    minimum = minimum_gke_version(cfg)
    version = defaults.get(channel)
    if version and versions.gke_version_key(version) >= versions.gke_version_key(minimum):
        return str(version)
    faster = [c for c, v in defaults.items() if versions.gke_version_key(v) >= versions.gke_version_key(minimum)]
    found = f"defaults to GKE {version}" if version else "has no default version GKE reports"
    choose = f"choose {' or '.join(sorted(faster))}" if faster else "no channel defaults to it yet"
    why = f"{found} in {facts.location}, older than {minimum}, which the stack's GPU pools need: {choose}"
    raise ConfigError.of([RuleError("cluster.releaseChannel", channel, why)])


def check_preloaded_images(cfg: StackConfig) -> None:
    """Every preloaded image's disk image exists before a pool names it: GKE would fail the pool's
    creation after the cluster's ten minutes, and its message would not say how to build it. A list
    (getImages), since the lookup (getImage) answers a missing image with a provider error; it names
    the project, so the default provider's ambient project never applies."""
    commands = preload_commands(cfg)
    for i, pool in enumerate(cfg.gpu_pools):
        disk = preload_disk(cfg, pool)
        if disk is None:
            continue
        found = gcp.compute.get_images(filter=f'name = "{disk}"', project=cfg.gcp_project).images
        if not any(image.name == disk for image in found):
            why = f"needs disk image {disk} in project {cfg.gcp_project}; build it once with: {commands[disk]}"
            raise ConfigError.of([RuleError(f"gpuPools[{i}].preloadedImage", pool.preloaded_image, why)])


@dataclass(frozen=True)
class ClusterOutputs:
    facts: ClusterExports
    kubeconfig: pulumi.Output[str]
    provider: k8s.Provider
    # The primary VPC's name; an Output of the network in a one-stack environment, so that
    # what lives on it (Filestore) is deleted before it.
    primary_network: pulumi.Input[str]
    # What the supervisor's pods wait for (and are deleted before), in a one-stack environment.
    supervisor_pool: pulumi.Resource | None = None


@dataclass(frozen=True)
class ClusterLayerArgs:
    config: StackConfig
    facts: ClusterExports
    # Labels of every labelled GCP resource.
    labels: Mapping[str, str]
    # The GKE version the cluster is created at (check_release_channel).
    gke_version: str


class ClusterLayer(pulumi.ComponentResource):
    TYPE = "nemo:cluster:ClusterLayer"

    cluster: Cluster
    primary_network: pulumi.Output[str]
    supervisor_pool: CpuNodePool | None
    # Per disk image of a preloaded pool, the command that builds it.
    preload_commands: dict[str, str]

    def __init__(self, name: str, args: ClusterLayerArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(self.TYPE, name, None, opts)
        cfg, facts = args.config, args.facts
        child = pulumi.ResourceOptions(parent=self)
        mtu = network_mtu(cfg.gpu_machines)
        streaming = any(pool.image_streaming for pool in facts.gpu_pools)
        # Checked by the program before anything is registered (stacks.program).
        self.preload_commands = preload_commands(cfg)
        for advice in (project_advice(cfg.gcp_project), cfg.cluster.control_plane_advice):
            if advice:
                pulumi.log.warn(advice, resource=self)

        nodes = NodeServiceAccount(
            f"{name}-nodes",
            NodeServiceAccountArgs(
                project=cfg.gcp_project,
                account_id=f"{cfg.cluster_name}-nodes",
                display_name=f"GKE nodes of {cfg.cluster_name}",
                image_streaming=streaming,
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
            node_networks = GpuNetworks(
                f"{name}-gpu-networks",
                GpuNetworksArgs(
                    project=cfg.gcp_project,
                    region=cfg.region,
                    zone=cfg.zone,
                    plan=facts.gpu_networks,
                    mtu=mtu,
                    gpu_cidr=cfg.network.gpu_cidr,
                ),
                opts=child,
            ).node_networks
        # What the nodes need before they start pulling: the remote repositories their pods' images
        # come through, and the Container File System API image streaming reads them with.
        before_nodes: list[pulumi.Resource] = []
        if facts.image_mirror is not None:
            before_nodes.append(
                ImageMirror(
                    f"{name}-images", ImageMirrorArgs(mirror=facts.image_mirror, labels=args.labels), opts=child
                )
            )
        if streaming:
            before_nodes.append(
                ProjectServices(
                    f"{name}-services",
                    ProjectServicesArgs(project=cfg.gcp_project, services=[IMAGE_STREAMING_API]),
                    opts=child,
                )
            )
        window = cfg.cluster.maintenance_window
        self.cluster = Cluster(
            f"{name}-gke",
            ClusterArgs(
                name=cfg.cluster_name,
                project=cfg.gcp_project,
                location=facts.location,
                network=primary.network_id,
                subnetwork=primary.subnet_name,
                pods_range_name=primary.pods_range_name,
                services_range_name=primary.services_range_name,
                control_plane_cidr=cfg.network.control_plane_cidr,
                release_channel=cfg.cluster.release_channel,
                version=args.gke_version,
                multi_networking=bool(facts.gpu_networks),
                deletion_protection=cfg.production,
                system_pool=SystemPoolArgs(
                    machine_type=cfg.system_pool.machine_type,
                    node_count=cfg.system_pool.node_count,
                    disk_size_gb=cfg.system_pool.disk_size_gb,
                ),
                node_service_account=nodes.email,
                maintenance_window=MaintenanceWindow(window.start_time, window.end_time, window.recurrence),
                authorized_networks=[
                    AuthorizedNetwork(n.cidr, n.display_name or n.cidr) for n in cfg.cluster.master_authorized_networks
                ],
                maintenance_exclusions=maintenance_exclusions(cfg.cluster),
                labels=args.labels,
                rbac_security_group=cfg.cluster.rbac_security_group,
            ),
            opts=pulumi.ResourceOptions(parent=self, depends_on=before_nodes),
        )
        for pool in cfg.gpu_pools:
            GpuNodePool(
                f"{name}-{pool.name}",
                GpuNodePoolArgs(
                    spec=node_pool_spec(cfg, pool),
                    project=cfg.gcp_project,
                    cluster_name=cfg.cluster_name,
                    cluster=self.cluster.id,
                    location=facts.location,
                    node_service_account=nodes.email,
                    node_networks=node_networks if pool.machine.is_multi_nic else [],
                    labels=args.labels,
                ),
                opts=child,
            )
        self.supervisor_pool = None
        if facts.supervisor_pool is not None:
            # Nothing of a run waits for it: the first `up` trains whether or not it is ready.
            supervisor = cfg.resiliency.pool
            self.supervisor_pool = CpuNodePool(
                f"{name}-{facts.supervisor_pool}",
                CpuNodePoolArgs(
                    name=facts.supervisor_pool,
                    project=cfg.gcp_project,
                    cluster=self.cluster.id,
                    location=facts.location,
                    zone=supervisor_zone(cfg),
                    machine_type=supervisor.machine_type,
                    node_count=supervisor.node_count,
                    node_service_account=nodes.email,
                    labels=args.labels,
                ),
                opts=child,
            )
        self.register_outputs({"cluster": self.cluster.name})


def build(
    cfg: StackConfig, facts: ClusterExports, labels: Mapping[str, str], gke_version: str, opts: pulumi.ResourceOptions
) -> tuple[ClusterOutputs, dict[str, Any]]:
    layer = ClusterLayer(
        "cluster", ClusterLayerArgs(config=cfg, facts=facts, labels=labels, gke_version=gke_version), opts
    )
    outputs = ClusterOutputs(
        facts=facts,
        kubeconfig=layer.cluster.kubeconfig,
        provider=layer.cluster.provider,
        primary_network=layer.primary_network,
        supervisor_pool=layer.supervisor_pool,
    )
    exports = {
        "cluster": facts.to_plain(),
        "kubeconfig": layer.cluster.kubeconfig,
        "getCredentials": f"gcloud container clusters get-credentials {facts.name} "
        f"--location {facts.location} --project {facts.project}",
    }
    if layer.preload_commands:
        exports["preloadCommands"] = layer.preload_commands
    return outputs, exports


def from_upstream(facts: ClusterExports, kubeconfig: pulumi.Output[str]) -> ClusterOutputs:
    """The same record for a stack that reads the cluster layer from another stack."""
    provider = k8s.Provider(
        "cluster-k8s",
        kubeconfig=kubeconfig,
        cluster_identifier=(
            f"projects/{facts.project}/locations/{facts.location}/clusters/{facts.name}" if facts.gke else facts.name
        ),
        upsert_existing_objects=UPSERT_EXISTING_OBJECTS,
    )
    return ClusterOutputs(facts=facts, kubeconfig=kubeconfig, provider=provider, primary_network=facts.primary_network)
