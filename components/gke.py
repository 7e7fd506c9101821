"""The GKE cluster with its system pool and Kubernetes access, and the A3 GPU node pools."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s

from facts.errors import require, require_no_problem
from facts.gcp import general_machine_problem, resource_name_problem
from facts.gke import PRELOAD_DISK_MODE, UNTIL_END_OF_SUPPORT, rbac_security_group_problem, workload_pool
from facts.kubernetes import SYSTEM_POOL, UPSERT_EXISTING_OBJECTS
from facts.machines import COS_CONTAINERD
from facts.registries import preload_disk_path
from facts.versions import gke_version_key
from planners.pools import NodePoolSpec, node_pool_advice, plan_node_pool

CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform"
# Webhook and extension API ports of the controllers the platform installs (Kueue, JobSet):
# a private cluster's control plane may only reach 443 and 10250 on nodes by default.
CONTROLLER_PORTS = ["8082", "9443"]


# The CPU pools' node image; a GPU pool takes its machine's (facts.machines.MachineType.node_image_type).
CPU_NODE_IMAGE_TYPE = COS_CONTAINERD


def node_identity(
    service_account: pulumi.Input[str], labels: Mapping[str, str], image_type: str = CPU_NODE_IMAGE_TYPE
) -> dict[str, Any]:
    """What every node pool of the cluster shares: a node image, the node service account with
    Workload Identity's metadata server, shielded boot, the stack's labels."""
    return {
        "image_type": image_type,
        "service_account": service_account,
        "oauth_scopes": [CLOUD_PLATFORM_SCOPE],
        "workload_metadata_config": {"mode": "GKE_METADATA"},
        "shielded_instance_config": {"enable_secure_boot": True, "enable_integrity_monitoring": True},
        "resource_labels": dict(labels),
    }


@dataclass(frozen=True)
class SystemPoolArgs:
    """The CPU pool every controller runs on (named `system`, facts.kubernetes.SYSTEM_POOL)."""

    machine_type: str
    # Nodes per zone of the cluster.
    node_count: int
    disk_size_gb: int

    def __post_init__(self) -> None:
        require(self.node_count >= 1, "system_pool.node_count", self.node_count, "must be at least 1")


@dataclass(frozen=True)
class MaintenanceWindow:
    """A recurring window (RFC 3339 start and end of the first one, RFC 5545 recurrence)."""

    start_time: str
    end_time: str
    recurrence: str


@dataclass(frozen=True)
class MaintenanceExclusion:
    """A period without some upgrades: until `end_time`, or, without one, until the cluster
    version's end of support."""

    name: str
    start_time: str
    end_time: str | None
    scope: str

    def policy(self) -> dict[str, Any]:
        options = {"scope": self.scope}
        if self.end_time is None:
            options["end_time_behavior"] = UNTIL_END_OF_SUPPORT
        return {
            "exclusion_name": self.name,
            "start_time": self.start_time,
            "end_time": self.end_time,
            "exclusion_options": options,
        }


@dataclass(frozen=True)
class AuthorizedNetwork:
    cidr: str
    display_name: str


@dataclass(frozen=True)
class ClusterArgs:
    name: str
    project: str
    # A zone (zonal cluster) or the region (regional cluster).
    location: str
    network: pulumi.Input[str]
    subnetwork: pulumi.Input[str]
    pods_range_name: str
    services_range_name: str
    control_plane_cidr: str
    release_channel: str
    # The GKE version the cluster is created at: the channel's default, checked against the pools'
    # floor before anything is registered (stacks.cluster.check_release_channel).
    version: str
    multi_networking: bool
    deletion_protection: bool
    system_pool: SystemPoolArgs
    node_service_account: pulumi.Input[str]
    maintenance_window: MaintenanceWindow
    authorized_networks: Sequence[AuthorizedNetwork] = ()
    maintenance_exclusions: Sequence[MaintenanceExclusion] = ()
    # Resource labels of the cluster and its system pool's nodes.
    labels: Mapping[str, str] = field(default_factory=dict)
    # Google Groups for RBAC (facts.gke.RBAC_SECURITY_GROUP_PREFIX); None: off.
    rbac_security_group: str | None = None

    def __post_init__(self) -> None:
        # GKE cluster names: RFC 1035, at most 40 characters.
        require_no_problem(resource_name_problem(self.name, 40), "name", self.name)
        names = [e.name for e in self.maintenance_exclusions]
        require(len(set(names)) == len(names), "maintenance_exclusions", names, "names each exclusion once")
        gke_version_key(self.version)
        if self.rbac_security_group is not None:
            problem = rbac_security_group_problem(self.rbac_security_group)
            require_no_problem(problem, "rbac_security_group", self.rbac_security_group)


class Cluster(pulumi.ComponentResource):
    """A private GKE cluster with Dataplane V2, Workload Identity and the storage CSI drivers,
    a system node pool for controllers, and a Kubernetes provider for everything on it."""

    TYPE = "nemo:gke:Cluster"

    name: pulumi.Output[str]
    id: pulumi.Output[str]
    endpoint: pulumi.Output[str]
    kubeconfig: pulumi.Output[str]
    provider: k8s.Provider
    system_pool: gcp.container.NodePool

    def __init__(self, name: str, args: ClusterArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(self.TYPE, name, None, opts)
        channel = args.release_channel
        maintenance_policy = {
            "recurring_window": {
                "start_time": args.maintenance_window.start_time,
                "end_time": args.maintenance_window.end_time,
                "recurrence": args.maintenance_window.recurrence,
            },
            "maintenance_exclusions": [e.policy() for e in args.maintenance_exclusions],
        }
        cluster = gcp.container.Cluster(
            f"{name}-cluster",
            name=args.name,
            project=args.project,
            location=args.location,
            network=args.network,
            subnetwork=args.subnetwork,
            networking_mode="VPC_NATIVE",
            ip_allocation_policy={
                "cluster_secondary_range_name": args.pods_range_name,
                "services_secondary_range_name": args.services_range_name,
            },
            datapath_provider="ADVANCED_DATAPATH",
            authenticator_groups_config=(
                {"security_group": args.rbac_security_group} if args.rbac_security_group else None
            ),
            enable_multi_networking=args.multi_networking,
            remove_default_node_pool=True,
            initial_node_count=1,
            release_channel={"channel": channel},
            # Only used at creation (ignore_changes): channel upgrades never show up as a diff.
            min_master_version=args.version,
            private_cluster_config={
                "enable_private_nodes": True,
                "enable_private_endpoint": False,
                "master_ipv4_cidr_block": args.control_plane_cidr,
            },
            master_authorized_networks_config=(
                {
                    "cidr_blocks": [
                        {"cidr_block": n.cidr, "display_name": n.display_name} for n in args.authorized_networks
                    ]
                }
                if args.authorized_networks
                else None
            ),
            workload_identity_config={"workload_pool": workload_pool(args.project)},
            addons_config={
                "gcp_filestore_csi_driver_config": {"enabled": True},
                "gcs_fuse_csi_driver_config": {"enabled": True},
                "gce_persistent_disk_csi_driver_config": {"enabled": True},
            },
            monitoring_config={
                "enable_components": ["SYSTEM_COMPONENTS", "DCGM"],
                "managed_prometheus": {"enabled": True},
            },
            logging_config={"enable_components": ["SYSTEM_COMPONENTS", "WORKLOADS"]},
            enable_shielded_nodes=True,
            maintenance_policy=maintenance_policy,
            deletion_protection=args.deletion_protection,
            resource_labels=dict(args.labels),
            opts=pulumi.ResourceOptions(
                parent=self,
                ignore_changes=["minMasterVersion"],
                custom_timeouts=pulumi.CustomTimeouts(create="45m", update="60m", delete="45m"),
            ),
        )
        gcp.compute.Firewall(
            f"{name}-controller-webhooks",
            name=f"{args.name}-controller-webhooks",
            network=args.network,
            direction="INGRESS",
            source_ranges=[args.control_plane_cidr],
            allows=[{"protocol": "tcp", "ports": CONTROLLER_PORTS}],
            description="The control plane calls the Kueue and JobSet webhooks on the nodes.",
            opts=pulumi.ResourceOptions(parent=cluster),
        )
        self.system_pool = gcp.container.NodePool(
            f"{name}-system",
            name=SYSTEM_POOL,
            project=args.project,
            cluster=cluster.id,
            location=args.location,
            node_count=args.system_pool.node_count,
            management={"auto_repair": True, "auto_upgrade": True},
            node_config={
                "machine_type": args.system_pool.machine_type,
                "boot_disk": {"disk_type": "pd-balanced", "size_gb": args.system_pool.disk_size_gb},
                **node_identity(args.node_service_account, args.labels),
            },
            opts=pulumi.ResourceOptions(parent=cluster, delete_before_replace=True),
        )
        context = args.name
        # Exec credentials: no token is ever stored in state, and nothing expires.
        self.kubeconfig = pulumi.Output.secret(
            pulumi.Output.json_dumps(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [
                        {
                            "name": context,
                            "cluster": {
                                "server": pulumi.Output.concat("https://", cluster.endpoint),
                                "certificate-authority-data": cluster.master_auth.cluster_ca_certificate,
                            },
                        }
                    ],
                    "users": [
                        {
                            "name": context,
                            "user": {
                                "exec": {
                                    "apiVersion": "client.authentication.k8s.io/v1beta1",
                                    "command": "gke-gcloud-auth-plugin",
                                    "installHint": "gcloud components install gke-gcloud-auth-plugin",
                                    "provideClusterInfo": True,
                                    "interactiveMode": "IfAvailable",
                                }
                            },
                        }
                    ],
                    "contexts": [{"name": context, "context": {"cluster": context, "user": context}}],
                    "current-context": context,
                }
            )
        )
        # cluster_identifier keeps the provider (and every object it manages) in place when
        # the endpoint or CA rotates; only a new cluster replaces it. It waits for the system
        # pool, where the controllers run, but never for the slow GPU pools.
        self.provider = k8s.Provider(
            f"{name}-k8s",
            kubeconfig=self.kubeconfig,
            cluster_identifier=cluster.id,
            upsert_existing_objects=UPSERT_EXISTING_OBJECTS,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.system_pool]),
        )
        self.name = cluster.name
        self.id = cluster.id
        self.endpoint = cluster.endpoint
        self.register_outputs({"name": self.name, "endpoint": self.endpoint})


@dataclass(frozen=True)
class GpuNodePoolArgs:
    spec: NodePoolSpec
    project: str
    # The cluster's name (prefix of project-wide names) and its id.
    cluster_name: str
    cluster: pulumi.Input[str]
    # Location of the cluster; the pool's nodes live in `spec.zone`.
    location: str
    node_service_account: pulumi.Input[str]
    # NodePool.network_config.additional_node_network_configs, in NIC order.
    node_networks: Sequence[Mapping[str, pulumi.Input[str]]]
    labels: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # The node pool planner checks the pool's own settings before anything is created.
        networks = len(self.node_networks)
        wanted = self.spec.facts.machine.additional_networks
        require(networks in (0, wanted), "node_networks", networks, f"attach all {wanted} GPU NICs or none")


class GpuNodePool(pulumi.ComponentResource):
    """An A3/A4 node pool: managed GPU drivers, gVNIC, local NVMe SSDs, the GPU NICs, compact
    placement and the pool's capacity mode, as `planners.pools.plan_node_pool` decides them."""

    TYPE = "nemo:gke:GpuNodePool"

    name: pulumi.Output[str]

    def __init__(self, name: str, args: GpuNodePoolArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(self.TYPE, name, None, opts)
        spec = args.spec
        plan = plan_node_pool(spec, args.project, args.cluster_name)
        machine = spec.facts.machine
        for advice in node_pool_advice(spec):
            pulumi.log.warn(f"gpuPools {spec.name}: {advice}", resource=self)

        placement_policy = None
        if plan.compact:
            policy_name: pulumi.Input[str] | None = plan.placement_policy
            if plan.workload_policy is not None:
                policy_name = gcp.compute.ResourcePolicy(
                    f"{name}-placement",
                    name=plan.workload_policy_name,
                    project=args.project,
                    region=plan.region,
                    workload_policy=plan.workload_policy,
                    opts=pulumi.ResourceOptions(parent=self),
                ).name
            placement_policy = {"type": "COMPACT", "policy_name": policy_name}

        booked = []
        if plan.booking is not None:
            booking = gcp.compute.FutureReservation(
                f"{name}-booking",
                project=args.project,
                **plan.booking,
                opts=pulumi.ResourceOptions(parent=self),
            )
            booked = [booking]
            if plan.booking["planning_status"] == "SUBMITTED":
                window = plan.booking["time_window"]
                pulumi.log.warn(
                    f"gpuPools {spec.name}: books {plan.booking['specific_sku_properties']['total_count']} "
                    f"{machine.name} VMs from {window['start_time']} to {window['end_time']} in calendar mode: the "
                    "whole period is billed, used or not; once submitted the request can be cancelled only while "
                    "its start is more than 30 days away, and `pulumi destroy` leaves it (set booking.draft to review "
                    "it first)",
                    resource=self,
                )

        node_pool = gcp.container.NodePool(
            f"{name}-pool",
            name=spec.name,
            project=args.project,
            cluster=args.cluster,
            location=args.location,
            node_locations=[spec.zone],
            node_count=plan.node_count,
            initial_node_count=plan.initial_node_count,
            autoscaling=plan.autoscaling,
            max_pods_per_node=spec.max_pods_per_node,
            placement_policy=placement_policy,
            queued_provisioning={"enabled": True} if plan.queued_provisioning else None,
            management={"auto_repair": plan.auto_repair, "auto_upgrade": True},
            upgrade_settings=plan.upgrade_settings,
            network_config=(
                {"additional_node_network_configs": [dict(n) for n in args.node_networks]}
                if args.node_networks
                else None
            ),
            node_config={
                "machine_type": machine.name,
                **node_identity(args.node_service_account, args.labels, machine.node_image_type),
                "boot_disk": {"disk_type": plan.boot_disk_type, "size_gb": spec.disk_size_gb},
                "guest_accelerators": [
                    {
                        "type": machine.gke_accelerator,
                        "count": machine.gpus,
                        "gpu_driver_installation_config": {"gpu_driver_version": spec.gpu_driver_version},
                    }
                ],
                "gvnic": {"enabled": True},
                "ephemeral_storage_local_ssd_config": (
                    None if machine.local_ssds_automatic else {"local_ssd_count": machine.local_ssds}
                ),
                # GKE taints GPU nodes itself; declaring the same taint keeps the plan clean.
                "taints": list(plan.taints),
                "spot": True if plan.spot else None,
                "flex_start": True if plan.flex_start else None,
                "max_run_duration": plan.max_run_duration,
                "reservation_affinity": plan.reservation_affinity,
                "gcfs_config": None if spec.image_streaming is None else {"enabled": spec.image_streaming},
                "secondary_boot_disks": (
                    [
                        {
                            "disk_image": preload_disk_path(args.project, spec.preload_disk_image),
                            "mode": PRELOAD_DISK_MODE,
                        }
                    ]
                    if spec.preload_disk_image
                    else None
                ),
            },
            opts=pulumi.ResourceOptions(
                parent=self,
                depends_on=booked,
                # The pool has a fixed name: a replacement must delete the old pool first.
                delete_before_replace=True,
                custom_timeouts=pulumi.CustomTimeouts(create="90m", update="90m", delete="60m"),
            ),
        )
        self.name = node_pool.name
        self.register_outputs({"name": self.name})


@dataclass(frozen=True)
class CpuNodePoolArgs:
    """A CPU pool beside the system pool, for a service that must not share it (the
    resiliency supervisor keeps running while the system pool's controllers are upgraded)."""

    name: str
    project: str
    cluster: pulumi.Input[str]
    # Location of the cluster; the pool's nodes live in `zone`.
    location: str
    zone: str
    machine_type: str
    node_count: int
    node_service_account: pulumi.Input[str]
    labels: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        require_no_problem(resource_name_problem(self.name, 40), "name", self.name)
        require_no_problem(general_machine_problem(self.machine_type), "machine_type", self.machine_type)
        require(self.node_count >= 1, "node_count", self.node_count, "must be at least 1")


class CpuNodePool(pulumi.ComponentResource):
    TYPE = "nemo:gke:CpuNodePool"

    name: pulumi.Output[str]

    def __init__(self, name: str, args: CpuNodePoolArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(self.TYPE, name, None, opts)
        node_pool = gcp.container.NodePool(
            f"{name}-pool",
            name=args.name,
            project=args.project,
            cluster=args.cluster,
            location=args.location,
            node_locations=[args.zone],
            node_count=args.node_count,
            management={"auto_repair": True, "auto_upgrade": True},
            node_config={
                "machine_type": args.machine_type,
                "boot_disk": {"disk_type": "pd-balanced", "size_gb": 100},
                **node_identity(args.node_service_account, args.labels),
            },
            opts=pulumi.ResourceOptions(parent=self, delete_before_replace=True),
        )
        self.name = node_pool.name
        self.register_outputs({"name": self.name})
