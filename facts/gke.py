"""GKE's rules for GPU node pools: capacity modes, what combines with what, and the names GKE
derives for a project. The config schema and the node pool planner both apply these."""

from __future__ import annotations

from enum import StrEnum
from types import MappingProxyType

from facts.machines import COS_CONTAINERD, MACHINE_TYPES, MachineType


class CapacityType(StrEnum):
    """How a GPU pool obtains its VMs."""

    ON_DEMAND = "onDemand"
    RESERVATION = "reservation"
    SPOT = "spot"
    FLEX_START = "flexStart"
    QUEUED_PROVISIONING = "queuedProvisioning"


# Dynamic Workload Scheduler: GKE provisions the nodes on request, so these pools scale from
# zero, without a reservation, and run on flex-start VMs (queued provisioning included).
# https://cloud.google.com/kubernetes-engine/docs/concepts/dws
DWS_CAPACITY = frozenset({CapacityType.FLEX_START, CapacityType.QUEUED_PROVISIONING})


# Image streaming: GKE reads images through the Container File System API, on Container-Optimized OS
# with containerd, from Artifact Registry only; Standard clusters from 1.18.6-gke.4801
# (https://cloud.google.com/kubernetes-engine/docs/how-to/image-streaming#requirements).
IMAGE_STREAMING_API = "containerfilesystem.googleapis.com"
IMAGE_STREAMING_MIN_GKE_VERSION = "1.18.6-gke.4801"
IMAGE_STREAMING_NODE_IMAGE = COS_CONTAINERD
# Secondary boot disks that hold container images (mode CONTAINER_IMAGE_CACHE): Container-Optimized OS
# nodes from 1.30.1-gke.1329000 (the page once gave 1.28.3-gke.1067000 for Standard clusters; it now
# names 1.30.1-gke.1329000 for Container-Optimized OS); image streaming must be on; GKE cannot change
# a pool's disk image, only create a pool with the new one (https://cloud.google.com/kubernetes-engine/docs/how-to/
# data-container-image-preloading#requirements). The Terraform provider marks node_config.
# secondary_boot_disks ForceNew (hashicorp/terraform-provider-google google/services/container/
# node_config.go@e03b762, "secondary_boot_disks"), so a change replaces the pool.
PRELOAD_MIN_GKE_VERSION = "1.30.1-gke.1329000"
PRELOAD_DISK_MODE = "CONTAINER_IMAGE_CACHE"


def compact_placement_problem(capacity: CapacityType, machine: MachineType) -> str | None:
    """Why compact placement does not go with this capacity mode and machine, or None.
    GoogleCloudPlatform/cluster-toolkit:modules/compute/gke-node-pool/main.tf@1047080 (preconditions);
    a specific reservation carries its own placement: cluster-toolkit's A3 Mega and A3 Ultra
    examples (examples/gke-a3-megagpu, examples/gke-a3-ultragpu @1047080) consume reservations
    with no placement policy, and no GKE document shows the two together."""
    if capacity is CapacityType.RESERVATION and machine.accelerator_topology is None:
        return "a specific reservation brings its own placement (dense deployment): leave placement unset"
    if capacity is CapacityType.QUEUED_PROVISIONING:
        return "queued provisioning excludes compact placement (GKE allows it only for TPUs)"
    if capacity is CapacityType.FLEX_START and not machine.compact_with_flex_start:
        allowed = ", ".join(m.name for m in MACHINE_TYPES.values() if m.compact_with_flex_start)
        return f"GKE allows compact placement with flex-start only on {allowed}"
    return None


def gke_topology_labels(capacity: CapacityType, compact: bool) -> bool:
    """GKE labels A3 and A4 nodes with their block, sub-block and host only when they come from
    compact placement or a (dense) reservation
    (https://cloud.google.com/ai-hypercomputer/docs/workloads/schedule-gke-workloads-tas)."""
    return compact or capacity is CapacityType.RESERVATION


def topology_placement_problem(labelled: bool, min_nodes: int, queued: bool) -> str | None:
    """Why Kueue cannot place runs on a pool by topology, or None.

    Topology-aware scheduling counts only Ready nodes that carry the topology labels, and
    reaches nodes that do not exist yet only through a ProvisioningRequest admission check
    (kubernetes-sigs/kueue site/content/en/docs/concepts/topology_aware_scheduling.md@v0.19.2,
    "ClusterAutoscaler support"; pkg/scheduler/flavorassigner/tas_flavorassigner.go). A pool
    that can be at zero nodes without one would keep its runs suspended forever."""
    if not labelled:
        return "has no topology labels (they come with compact placement or a reservation)"
    if min_nodes == 0 and not queued:
        return "can scale to zero nodes, and Kueue places by topology only on nodes that exist"
    return None


def default_compact(capacity: CapacityType, machine: MachineType, max_nodes: int) -> bool:
    """The platform's default placement: compact for multi-node 8-GPU pools where GKE allows it,
    so their nodes share a block and carry GKE's topology labels; always for a machine placed by
    its accelerator topology (an A4X pool is one NVLink domain)."""
    if machine.accelerator_topology is not None:
        return True
    return machine.gpus == 8 and max_nodes > 1 and compact_placement_problem(capacity, machine) is None


# Calendar-mode future reservations: GPU capacity booked ahead for a period of 1 to 90 days, 1 to
# 80 VMs a request (https://cloud.google.com/compute/docs/instances/create-future-reservations-calendar-mode),
# offered for A4 and A3 Ultra (https://cloud.google.com/ai-hypercomputer/docs/consumption-models:
# calendar mode, "A4 or A3 Ultra", reservation-bound, no quota charged). Compute Engine creates the
# named reservation at approval, inactive until the start; at the end it deletes the reservation and
# the VMs on it (API FutureReservation.ReservationMode CALENDAR). The whole period is billed, used or
# not, at Dynamic Workload Scheduler prices
# (https://cloud.google.com/ai-hypercomputer/docs/consumption-models#calendar-mode). A submitted
# request can be cancelled only while its start is more than 30 days away, or within 24 hours of
# approval with the start at least 4 days away
# (https://cloud.google.com/compute/docs/instances/delete-future-reservations-calendar-mode).
BOOKING_MIN_DAYS, BOOKING_MAX_DAYS = 1, 90
BOOKING_MAX_NODES = 80
BOOKING_MACHINES = frozenset({"a4-highgpu-8g", "a3-ultragpu-8g"})


def booking_problem(machine: MachineType, max_nodes: int) -> str | None:
    """Why a pool of this machine and size cannot be booked in calendar mode, or None."""
    if machine.name not in BOOKING_MACHINES:
        return f"calendar-mode bookings are offered for {' and '.join(sorted(BOOKING_MACHINES))}, not {machine.name}"
    if not 1 <= max_nodes <= BOOKING_MAX_NODES:
        return f"a calendar-mode booking holds 1 to {BOOKING_MAX_NODES} VMs, not {max_nodes}"
    return None


def capacity_problem(capacity: CapacityType, machine: MachineType) -> str | None:
    """Why the machine cannot be had in this capacity mode, or None."""
    if machine.reservation_only and capacity is not CapacityType.RESERVATION:
        return f"{machine.name} is offered only through reservations: use capacity.type 'reservation'"
    return None


def pool_size_problem(machine: MachineType, max_nodes: int) -> str | None:
    """Why a pool of this size cannot be placed as the machine is, or None: a pool placed by an
    accelerator topology takes one NVLink domain, and holds at most its nodes (GKE's A4X guide,
    https://cloud.google.com/ai-hypercomputer/docs/create/gke-ai-hypercompute-custom-a4x)."""
    if machine.accelerator_topology is not None and max_nodes > machine.nvlink_domain_nodes:
        return (
            f"each {machine.name} pool is one {machine.accelerator_topology} NVLink domain of at most "
            f"{machine.nvlink_domain_nodes} nodes: add another pool for more"
        )
    return None


# Node label and taint key prefixes a node pool may not set: Kubernetes reserves kubernetes.io/
# and k8s.io/ (pulumi-gcp container.ClusterNodeConfigArgs.labels: "reserved by Kubernetes Core
# components and cannot be specified"); GKE manages the keys under cloud.google.com/ ("Node labels
# with key "cloud.google.com/compute-class" are managed by GKE or Kubernetes and must not be
# manually specified", hashicorp/terraform-provider-google#19677) and adds what it needs itself,
# e.g. the cloud.google.com/gke-queued taint of queued-provisioning pools.
RESERVED_NODE_KEY_PREFIXES = ("kubernetes.io/", "k8s.io/", "cloud.google.com/")


def reserved_node_key(key: str) -> bool:
    """Whether a label or taint key falls under a prefix Kubernetes or GKE keeps for itself
    (any subdomain too: node.kubernetes.io/)."""
    domain = key.split("/", 1)[0] + "/" if "/" in key else ""
    return any(domain == prefix or domain.endswith("." + prefix) for prefix in RESERVED_NODE_KEY_PREFIXES)


def workload_pool(project: str) -> str:
    """The Workload Identity pool of a project's GKE clusters.
    https://cloud.google.com/kubernetes-engine/docs/how-to/workload-identity"""
    return f"{project}.svc.id.goog"


# The Cloud Storage FUSE CSI driver (a GKE add-on) and the pod annotation its webhook injects
# the FUSE sidecar for. The sidecar takes no resource limits: it shares the node with one pod.
# https://cloud.google.com/kubernetes-engine/docs/how-to/cloud-storage-fuse-csi-driver-sidecar
GCSFUSE_CSI_DRIVER = "gcsfuse.csi.storage.gke.io"
GCSFUSE_POD_ANNOTATIONS = MappingProxyType(
    {
        "gke-gcsfuse/volumes": "true",
        "gke-gcsfuse/cpu-limit": "0",
        "gke-gcsfuse/memory-limit": "0",
        "gke-gcsfuse/ephemeral-storage-limit": "0",
    }
)
# A pod on the host network reaches no GKE metadata server for its Workload Identity token: its
# bucket mounts authenticate as its Kubernetes service account only with this volume attribute,
# else as the node's service account (GoogleCloudPlatform/gcs-fuse-csi-driver docs/authentication.md:
# sidecar v1.17.2+, GKE 1.29+; pkg/csi_driver/node.go shouldPopulateIdentityProvider). The driver
# reads it only for host-network pods, so every bucket volume carries it: a volume's attributes
# cannot change once created, and any pool may later run host-network pods.
GCSFUSE_HOST_NETWORK_KSA = MappingProxyType({"hostNetworkPodKSA": "true"})


# The maintenance exclusion cluster-toolkit's A3 Ultra, A4 and A3 High GKE examples set: no minor
# and no node upgrades until the cluster version's end of support, so GKE never drains a
# training node to upgrade it (control-plane patches still happen). Its start lies in the past.
# GoogleCloudPlatform/cluster-toolkit:examples/gke-a3-ultragpu/gke-a3-ultragpu.yaml@1047080
# (maintenance_exclusions); the Terraform provider allows only UNTIL_END_OF_SUPPORT as the end
# behaviour (hashicorp/terraform-provider-google resource_container_cluster.go end_time_behavior).
NODE_UPGRADE_EXCLUSION_NAME = "no-minor-or-node-upgrades-indefinite"
NODE_UPGRADE_EXCLUSION_START = "2025-12-01T00:00:00Z"
NODE_UPGRADE_EXCLUSION_SCOPE = "NO_MINOR_OR_NODE_UPGRADES"
UNTIL_END_OF_SUPPORT = "UNTIL_END_OF_SUPPORT"


# Google Groups for RBAC: the cluster names one group, `gke-security-groups@<domain>`, whose nested
# groups RBAC bindings may then name; GKE refuses any other name
# (https://cloud.google.com/kubernetes-engine/docs/how-to/google-groups-rbac). Changed in place
# (ClusterUpdate.desiredAuthenticatorGroupsConfig, `gcloud container clusters update --security-group`).
RBAC_SECURITY_GROUP_PREFIX = "gke-security-groups@"


def rbac_security_group_problem(value: str) -> str | None:
    domain = value.removeprefix(RBAC_SECURITY_GROUP_PREFIX)
    if not value.startswith(RBAC_SECURITY_GROUP_PREFIX) or "." not in domain or "@" in domain:
        return f"must be {RBAC_SECURITY_GROUP_PREFIX}<your domain>, the only group GKE takes"
    return None
