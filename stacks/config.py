"""The stack configuration: one frozen pydantic model, read and validated once.

Keys are the camelCase names users write in `Pulumi.<stack>.yaml` under the `nemo-gke:`
namespace. Every value is checked here (types, ranges, enums, cross-field rules) before
any resource is registered; an error names the key, the bad value and what is allowed.
Components never see raw config: they receive these typed objects.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated, Any, Literal, Self, Union, get_args, get_origin

import pulumi
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic.alias_generators import to_camel

from components.catalog import (
    MACHINE_TYPES,
    MachineType,
    Precision,
    machine_type,
    training_pod_requests,
)
from components.models import MODELS, ModelSpec, model_spec

NAMESPACE = "nemo-gke"


class Layer(StrEnum):
    BOOTSTRAP = "bootstrap"
    CLUSTER = "cluster"
    PLATFORM = "platform"
    TRAINING = "training"


# The environment layers in the order they build on each other.
ENVIRONMENT_LAYERS = (Layer.CLUSTER, Layer.PLATFORM, Layer.TRAINING)


class RuleError(ValueError):
    """A cross-field rule failed. `key` is relative to the model that raised it."""

    def __init__(self, key: str, value: Any, message: str) -> None:
        super().__init__(message)
        self.key = key
        self.value = value


class Model(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        strict=True,
        alias_generator=to_camel,
        populate_by_name=True,
    )

    @classmethod
    def from_plain(cls, data: Any) -> Self:
        """Validate JSON-shaped data (config or stack outputs): strict types, arrays for tuples."""
        return cls.model_validate_json(json.dumps(data))

    def to_plain(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True, mode="json")


_NAME = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_PROJECT_ID = re.compile(r"^[a-z][a-z0-9-]{4,28}[a-z0-9]$")
_REGION = re.compile(r"^[a-z]+-[a-z]+[0-9]+$")
_ZONE = re.compile(r"^([a-z]+-[a-z]+[0-9]+)-[a-z]$")
_GENERAL_MACHINE = re.compile(r"^(e2|n1|n2|n2d|n4|c2|c2d|c3|c3d|c4|t2d)-(standard|highmem|highcpu)-[0-9]+$")
_LABEL_KEY = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")
_LABEL_VALUE = re.compile(r"^[a-z0-9_-]{0,63}$")
_RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$")


def to_snake(key: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", key).lower()


def check_name(key: str, value: str, max_length: int) -> None:
    if len(value) > max_length or not _NAME.match(value):
        raise RuleError(
            key,
            value,
            f"must be 1-{max_length} characters of lower-case letters, digits and '-', "
            "starting with a letter and not ending with '-'",
        )


def _network(key: str, value: str) -> ipaddress.IPv4Network:
    try:
        return ipaddress.IPv4Network(value, strict=True)
    except ValueError as exc:
        raise RuleError(key, value, f"must be an IPv4 CIDR range such as 10.0.0.0/20 ({exc})") from None


# --------------------------------------------------------------------------- bootstrap


class BootstrapConfig(Model):
    """The bootstrap stack: APIs, the state backend and the image registry."""

    state_bucket: str | None = Field(
        None,
        description="Bucket for the self-managed Pulumi backend. Default: `<project>-pulumi-state`.",
    )
    key_ring: str = Field("pulumi", description="KMS key ring holding the secrets-provider key.")
    crypto_key: str = Field("pulumi-secrets", description="KMS key used by the `gcpkms://` secrets provider.")
    key_rotation_days: int = Field(90, ge=1, le=3650, description="Rotation period of the KMS key, in days.")
    artifact_repository: str = Field(
        "nemo-images", description="Artifact Registry Docker repository for custom training images."
    )
    extra_services: tuple[str, ...] = Field(
        (), description="APIs to enable beyond the ones the platform needs, e.g. `aiplatform.googleapis.com`."
    )
    operators: tuple[str, ...] = Field(
        (),
        description="IAM members (`user:`, `group:`, `serviceAccount:`) who run `pulumi`: object access to the "
        "state bucket and encrypt/decrypt on the secrets key, nothing more.",
    )

    @model_validator(mode="after")
    def _check(self) -> BootstrapConfig:
        check_name("keyRing", self.key_ring, 63)
        check_name("cryptoKey", self.crypto_key, 63)
        check_name("artifactRepository", self.artifact_repository, 63)
        if self.state_bucket is not None and not re.match(r"^[a-z0-9][a-z0-9._-]{1,61}[a-z0-9]$", self.state_bucket):
            raise RuleError(
                "stateBucket", self.state_bucket, "must be a valid bucket name (3-63 of a-z, 0-9, '.', '_', '-')"
            )
        for i, member in enumerate(self.operators):
            if not re.match(r"^(user|group|serviceAccount|domain):[^\s]+$", member):
                raise RuleError(f"operators[{i}]", member, "must be an IAM member such as user:alice@example.com")
        for i, service in enumerate(self.extra_services):
            if not service.endswith(".googleapis.com"):
                raise RuleError(f"extraServices[{i}]", service, "must be a service name ending in .googleapis.com")
        return self


# --------------------------------------------------------------------------- network


class NetworkConfig(Model):
    """Address plan. Every range must be disjoint from every other one."""

    node_cidr: str = Field("10.0.0.0/20", description="Primary subnet (node addresses).")
    pod_cidr: str = Field("10.4.0.0/14", description="Secondary range for pods.")
    service_cidr: str = Field("10.0.32.0/20", description="Secondary range for services.")
    gpu_cidr: str = Field(
        "192.168.0.0/16",
        description="Range carved into 16 equal subnets, one per GPU network (a /16 gives /20 subnets).",
    )
    control_plane_cidr: str = Field("172.16.0.0/28", description="A /28 for the private control plane endpoint.")
    iap_ssh: bool = Field(False, description="Allow SSH to nodes from Identity-Aware Proxy (35.235.240.0/20).")

    @model_validator(mode="after")
    def _check(self) -> NetworkConfig:
        ranges = {key: _network(key, getattr(self, field)) for key, field in self.cidr_fields().items()}
        if ranges["controlPlaneCidr"].prefixlen != 28:
            raise RuleError("controlPlaneCidr", self.control_plane_cidr, "must be a /28")
        if ranges["gpuCidr"].prefixlen > 25:
            raise RuleError("gpuCidr", self.gpu_cidr, "must be /25 or larger so each of its 16 subnets holds nodes")
        keys = list(ranges)
        for i, a in enumerate(keys):
            for b in keys[i + 1 :]:
                if ranges[a].overlaps(ranges[b]):
                    raise RuleError(
                        b,
                        str(ranges[b]),
                        f"overlaps {a} ({ranges[a]}); "
                        "node, pod, service, GPU and control-plane ranges must be disjoint",
                    )
        return self

    @staticmethod
    def cidr_fields() -> dict[str, str]:
        return {
            "nodeCidr": "node_cidr",
            "podCidr": "pod_cidr",
            "serviceCidr": "service_cidr",
            "gpuCidr": "gpu_cidr",
            "controlPlaneCidr": "control_plane_cidr",
        }


# --------------------------------------------------------------------------- cluster


class AuthorizedNetwork(Model):
    cidr: str = Field(description="CIDR allowed to reach the control plane, e.g. your office egress range.")
    display_name: str = Field(description="Label shown in the console.")

    @model_validator(mode="after")
    def _check(self) -> AuthorizedNetwork:
        _network("cidr", self.cidr)
        return self


class MaintenanceWindow(Model):
    start_time: str = Field("2025-01-04T03:00:00Z", description="RFC 3339 start of the first window.")
    end_time: str = Field("2025-01-04T11:00:00Z", description="RFC 3339 end of the first window.")
    recurrence: str = Field("FREQ=WEEKLY;BYDAY=SA,SU", description="RFC 5545 RRULE repeating the window.")

    @model_validator(mode="after")
    def _check(self) -> MaintenanceWindow:
        for key in ("startTime", "endTime"):
            value = getattr(self, to_snake(key))
            if not _RFC3339.match(value):
                raise RuleError(key, value, "must be an RFC 3339 timestamp such as 2025-01-04T03:00:00Z")
        if not self.recurrence.startswith("FREQ="):
            raise RuleError("recurrence", self.recurrence, "must be an RFC 5545 RRULE such as FREQ=WEEKLY;BYDAY=SA")
        return self


class MaintenanceExclusion(Model):
    name: str = Field(description="Name of the exclusion.")
    start_time: str = Field(description="RFC 3339 start.")
    end_time: str = Field(description="RFC 3339 end.")
    scope: Literal["NO_UPGRADES", "NO_MINOR_UPGRADES", "NO_MINOR_OR_NODE_UPGRADES"] = Field(
        "NO_MINOR_OR_NODE_UPGRADES", description="What the exclusion blocks."
    )

    @model_validator(mode="after")
    def _check(self) -> MaintenanceExclusion:
        for key in ("startTime", "endTime"):
            value = getattr(self, to_snake(key))
            if not _RFC3339.match(value):
                raise RuleError(key, value, "must be an RFC 3339 timestamp such as 2026-12-20T00:00:00Z")
        if self.end_time <= self.start_time:
            raise RuleError("endTime", self.end_time, f"must be after startTime ({self.start_time})")
        return self


class ClusterConfig(Model):
    """The GKE cluster."""

    name: str | None = Field(
        None, description="Cluster name and prefix of every network name. Default: `nemo-<stack>`."
    )
    regional: bool = Field(
        False,
        description="Regional control plane (three zones) instead of zonal. GPU pools stay in their zone either way.",
    )
    release_channel: Literal["RAPID", "REGULAR", "STABLE", "EXTENDED"] = Field(
        "REGULAR", description="GKE release channel; its default version must meet every pool's minimum."
    )
    master_authorized_networks: tuple[AuthorizedNetwork, ...] = Field(
        (),
        description="Ranges allowed to reach the public control-plane endpoint. Empty: any address (with IAM). "
        "Must include where `pulumi up` runs.",
    )
    maintenance_window: MaintenanceWindow = Field(
        default_factory=MaintenanceWindow, description="When GKE may upgrade."
    )
    maintenance_exclusions: tuple[MaintenanceExclusion, ...] = Field(
        (), description="Periods without upgrades, e.g. around a long training campaign."
    )

    @model_validator(mode="after")
    def _check(self) -> ClusterConfig:
        if self.name is not None:
            check_name("name", self.name, 24)
        names = [e.name for e in self.maintenance_exclusions]
        for i, name in enumerate(names):
            if names.index(name) != i:
                raise RuleError(f"maintenanceExclusions[{i}].name", name, "must be unique")
        return self


class SystemPoolConfig(Model):
    """The CPU pool for controllers (Kueue, JobSet) and TensorBoard."""

    machine_type: str = Field("e2-standard-4", description="General-purpose machine type.")
    node_count: int = Field(1, ge=1, le=100, description="Nodes per zone of the cluster.")
    disk_size_gb: int = Field(100, ge=50, le=2000, description="Boot disk size.")

    @model_validator(mode="after")
    def _check(self) -> SystemPoolConfig:
        if not _GENERAL_MACHINE.match(self.machine_type):
            raise RuleError(
                "machineType",
                self.machine_type,
                "must be a general-purpose type <family>-<standard|highmem|highcpu>-<vCPUs>, "
                "family one of e2, n1, n2, n2d, n4, c2, c2d, c3, c3d, c4, t2d (e.g. e2-standard-4)",
            )
        return self


CapacityType = Literal["onDemand", "reservation", "spot", "flexStart", "queuedProvisioning"]
# Capacity types that provision whole node groups on request and scale from zero.
DWS_CAPACITY: frozenset[str] = frozenset({"flexStart", "queuedProvisioning"})


class Capacity(Model):
    type: CapacityType = Field("onDemand", description="How the pool obtains its VMs.")
    reservation: str | None = Field(None, description="Specific reservation to consume (type `reservation`).")
    reservation_block: str | None = Field(None, description="Block of the reservation to pin the pool to.")
    reservation_project: str | None = Field(
        None, description="Project owning a shared reservation. Default: this project."
    )
    max_run_duration_seconds: int | None = Field(
        None, ge=600, le=604800, description="Flex-start/queued: VMs are reclaimed after this long (max 7 days)."
    )

    @model_validator(mode="after")
    def _check(self) -> Capacity:
        if self.type == "reservation" and self.reservation is None:
            raise RuleError("reservation", None, "is required when capacity.type is 'reservation'")
        if self.type != "reservation":
            for key in ("reservation", "reservationBlock", "reservationProject"):
                value = getattr(self, to_snake(key))
                if value is not None:
                    why = {
                        "spot": "reservations exclude Spot",
                        "flexStart": "flex-start cannot consume a reservation",
                        "queuedProvisioning": "queued provisioning cannot consume a reservation",
                        "onDemand": "set capacity.type to 'reservation' to consume one",
                    }[self.type]
                    raise RuleError(key, value, f"must be unset with capacity.type {self.type!r}: {why}")
        if self.max_run_duration_seconds is not None and self.type not in DWS_CAPACITY:
            raise RuleError(
                "maxRunDurationSeconds",
                self.max_run_duration_seconds,
                "applies only to capacity.type 'flexStart' or 'queuedProvisioning'",
            )
        for key in ("reservation", "reservationBlock"):
            value = getattr(self, to_snake(key))
            if value is not None:
                check_name(key, value, 63)
        return self


class Autoscaling(Model):
    min_nodes: int = Field(0, ge=0, le=1000, description="Lower bound of the pool's size.")
    max_nodes: int = Field(ge=1, le=1000, description="Upper bound of the pool's size.")

    @model_validator(mode="after")
    def _check(self) -> Autoscaling:
        if self.max_nodes < self.min_nodes:
            raise RuleError("maxNodes", self.max_nodes, f"must be at least minNodes ({self.min_nodes})")
        return self


class GpuPoolConfig(Model):
    """One GPU node pool."""

    name: str = Field(description="Node pool name (stable: renaming replaces the pool).")
    machine_type: str = Field(description="A machine type of the catalog.")
    node_count: int | None = Field(None, ge=0, le=1000, description="Static size. Exclusive with `autoscaling`.")
    autoscaling: Autoscaling | None = Field(
        None, description="Autoscaled size; flex-start and queued provisioning need minNodes 0."
    )
    zone: str | None = Field(None, description="Zone of the pool. Default: the stack's `zone`.")
    capacity: Capacity = Field(default_factory=Capacity, description="Capacity mode.")
    placement: Literal["compact", "none"] | None = Field(
        None,
        description="`compact` puts the nodes close together. Default: compact for multi-node 8-GPU pools "
        "whose capacity mode allows it.",
    )
    placement_policy: str | None = Field(None, description="Existing resource policy to use for compact placement.")
    auto_repair: bool | None = Field(
        None, description="Node auto-repair. Default: on, off for flex-start and queued provisioning."
    )
    gpu_driver_version: Literal["LATEST", "DEFAULT"] = Field("LATEST", description="GKE-managed NVIDIA driver.")
    disk_type: str | None = Field(None, description="Boot disk type. Default: the machine's first supported type.")
    disk_size_gb: int = Field(200, ge=100, le=4000, description="Boot disk size.")
    max_pods_per_node: int = Field(32, ge=8, le=256, description="Pods per node; sizes each node's pod range.")

    @property
    def machine(self) -> MachineType:
        return machine_type(self.machine_type)

    @property
    def max_nodes(self) -> int:
        """Nodes the pool can hold at most: what queues and quotas are sized for."""
        return self.autoscaling.max_nodes if self.autoscaling else (self.node_count or 0)

    @property
    def compact_allowed(self) -> bool:
        """Whether GKE accepts compact placement for this pool's capacity mode and machine."""
        if self.capacity.type == "queuedProvisioning":
            return False
        if self.capacity.type == "flexStart":
            return self.machine.compact_with_flex_start
        return True

    @property
    def compact(self) -> bool:
        if self.placement is not None:
            return self.placement == "compact"
        return self.machine.gpus == 8 and self.max_nodes > 1 and self.compact_allowed

    @property
    def boot_disk_type(self) -> str:
        return self.disk_type or self.machine.boot_disk_types[0]

    @model_validator(mode="after")
    def _check(self) -> GpuPoolConfig:
        check_name("name", self.name, 40)
        if self.machine_type not in MACHINE_TYPES:
            raise RuleError(
                "machineType", self.machine_type, f"is not in the catalog; known: {', '.join(MACHINE_TYPES)}"
            )
        machine = self.machine
        if self.node_count is not None and self.autoscaling is not None:
            raise RuleError("nodeCount", self.node_count, "must be unset when autoscaling is set")
        if self.node_count is None and self.autoscaling is None:
            raise RuleError("nodeCount", None, "is required unless autoscaling is set")
        if self.disk_type is not None and self.disk_type not in machine.boot_disk_types:
            raise RuleError(
                "diskType", self.disk_type, f"{machine.name} boots from: {', '.join(machine.boot_disk_types)}"
            )
        mode = self.capacity.type
        if mode in DWS_CAPACITY:
            if self.autoscaling is None or self.autoscaling.min_nodes != 0:
                raise RuleError(
                    "autoscaling",
                    self.autoscaling.model_dump(by_alias=True) if self.autoscaling else None,
                    f"capacity.type {mode!r} needs autoscaling from zero (autoscaling.minNodes: 0, maxNodes: N)",
                )
            if self.auto_repair:
                raise RuleError("autoRepair", True, f"must be false with capacity.type {mode!r}")
        if self.placement == "compact" and not self.compact_allowed:
            if mode == "queuedProvisioning":
                why = "queued provisioning excludes compact placement (GKE allows it only for TPUs)"
            else:
                allowed = [m.name for m in MACHINE_TYPES.values() if m.compact_with_flex_start]
                why = f"GKE allows compact placement with flex-start only on {', '.join(allowed)}"
            raise RuleError("placement", "compact", why)
        if self.placement_policy is not None:
            if not self.compact:
                raise RuleError("placementPolicy", self.placement_policy, "needs compact placement")
            check_name("placementPolicy", self.placement_policy, 63)
        return self


# --------------------------------------------------------------------------- platform

FilestoreTier = Literal["BASIC_HDD", "BASIC_SSD", "ZONAL", "REGIONAL", "ENTERPRISE"]
# Provisionable capacity per tier: (min GiB, max GiB, step GiB) ranges.
# https://cloud.google.com/filestore/docs/service-tiers
FILESTORE_CAPACITY: dict[str, tuple[tuple[int, int, int], ...]] = {
    "BASIC_HDD": ((1024, 65433, 1),),
    "BASIC_SSD": ((2560, 65433, 1),),
    "ZONAL": ((1024, 9984, 256), (10240, 102400, 2560)),
    "REGIONAL": ((1024, 9984, 256), (10240, 102400, 2560)),
    "ENTERPRISE": ((1024, 10240, 256),),
}
# Tiers whose instances live in a region rather than a zone.
REGIONAL_FILESTORE_TIERS = frozenset({"REGIONAL", "ENTERPRISE"})


def describe_capacity(tier: str) -> str:
    return " or ".join(
        f"{low}-{high} GiB" + (f" in steps of {step} GiB" if step > 1 else "")
        for low, high, step in FILESTORE_CAPACITY[tier]
    )


class FilestoreConfig(Model):
    """The shared file system for logs and checkpoints, mounted at /nfs in every pod."""

    tier: FilestoreTier = Field("BASIC_HDD", description="Filestore service tier.")
    capacity_gib: int = Field(1024, description="Capacity; allowed range and step depend on the tier.")
    share_name: str = Field("nemo", description="Name of the NFS share.")

    @model_validator(mode="after")
    def _check(self) -> FilestoreConfig:
        ranges = FILESTORE_CAPACITY[self.tier]
        if not any(
            low <= self.capacity_gib <= high and (self.capacity_gib - low) % step == 0 for low, high, step in ranges
        ):
            raise RuleError("capacityGib", self.capacity_gib, f"tier {self.tier} allows {describe_capacity(self.tier)}")
        if not re.match(r"^[a-z][a-z0-9_]{0,15}$", self.share_name):
            raise RuleError("shareName", self.share_name, "must be 1-16 of a-z, 0-9 and '_', starting with a letter")
        return self


class BucketConfig(Model):
    name: str | None = Field(None, description="Bucket name. Default: `<project>-<cluster>-<role>`.")
    create: bool = Field(True, description="Create the bucket; false uses an existing one.")

    @model_validator(mode="after")
    def _check(self) -> BucketConfig:
        if self.name is not None and not re.match(r"^[a-z0-9][a-z0-9_-]{1,61}[a-z0-9]$", self.name):
            raise RuleError("name", self.name, "must be a bucket name: 3-63 of a-z, 0-9, '_' and '-'")
        if not self.create and self.name is None:
            raise RuleError("name", None, "is required when create is false")
        return self


class CheckpointBucketConfig(BucketConfig):
    hierarchical_namespace: bool = Field(
        True, description="Hierarchical namespace: fast directory renames for checkpoints."
    )


class StorageConfig(Model):
    filestore: FilestoreConfig = Field(default_factory=FilestoreConfig, description="Shared file system.")
    data_bucket: BucketConfig = Field(
        default_factory=BucketConfig, description="Training data, mounted read-only at /data."
    )
    checkpoint_bucket: CheckpointBucketConfig = Field(
        default_factory=CheckpointBucketConfig, description="Checkpoints, mounted read-write at /checkpoints."
    )


class KueueConfig(Model):
    """Queueing and all-or-nothing admission."""

    cluster_queue: str = Field("a3-queue", description="ClusterQueue name.")
    local_queue: str = Field("a3-queue", description="LocalQueue name in the training namespace: runs submit here.")
    wait_for_pods_ready_timeout_seconds: int = Field(
        1800,
        ge=300,
        le=86400,
        description="An admitted workload whose pods are not all ready by then is evicted and requeued; "
        "leaves room for 20-30 GB image pulls.",
    )
    requeue_limit: int = Field(
        5, ge=0, le=100, description="Evictions for not-ready pods before a workload is deactivated."
    )
    preemption: Literal["LowerPriority", "LowerOrNewerEqualPriority", "Never"] = Field(
        "LowerPriority", description="Whether a higher-priority run may preempt a lower one in the queue."
    )

    @model_validator(mode="after")
    def _check(self) -> KueueConfig:
        check_name("clusterQueue", self.cluster_queue, 63)
        check_name("localQueue", self.local_queue, 63)
        return self


class TensorBoardConfig(Model):
    enabled: bool = Field(True, description="Run TensorBoard on the system pool, reading the training logs.")
    cpu_millicores: int = Field(500, ge=100, le=8000, description="CPU request of the TensorBoard pod.")
    memory_mib: int = Field(2048, ge=256, le=65536, description="Memory request (and limit) of the TensorBoard pod.")
    vertex_ai: bool = Field(
        False, description="Also create a Vertex AI TensorBoard instance (needs aiplatform.googleapis.com)."
    )


class GpuDirectConfig(Model):
    nri_device_injector: bool = Field(
        True,
        description="Deploy the NRI device injector TCPX/TCPXO sidecars need; set false where GKE already runs it.",
    )


# --------------------------------------------------------------------------- training

TopologyLevel = Literal["block", "subblock", "host", "hostname"]
TOPOLOGY_LABELS: dict[str, str] = {
    "block": "cloud.google.com/gce-topology-block",
    "subblock": "cloud.google.com/gce-topology-subblock",
    "host": "cloud.google.com/gce-topology-host",
    "hostname": "kubernetes.io/hostname",
}
_OVERRIDE_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class ProfileWindow(Model):
    """Nsight Systems capture between two steps (rank 0 of each node)."""

    start_step: int = Field(ge=0, description="First profiled step.")
    end_step: int = Field(ge=1, description="Last profiled step.")

    @model_validator(mode="after")
    def _check(self) -> ProfileWindow:
        if self.end_step <= self.start_step:
            raise RuleError("endStep", self.end_step, f"must be after startStep ({self.start_step})")
        return self


class DatasetConfig(Model):
    source: Literal["mock", "gcs"] = Field("mock", description="NeMo's mock data, or Megatron .bin/.idx files.")
    prefix: str | None = Field(
        None,
        description="`gcs`: path inside the data bucket of the files, without .bin/.idx "
        "(e.g. datasets/wiki/wiki_text_document).",
    )
    copy_to_local_ssd: bool = Field(
        True, description="`gcs`: copy the files to local SSD before training instead of reading through FUSE."
    )

    @model_validator(mode="after")
    def _check(self) -> DatasetConfig:
        if self.source == "gcs" and not self.prefix:
            raise RuleError("prefix", None, "is required when source is 'gcs'")
        if self.source == "mock" and self.prefix is not None:
            raise RuleError("prefix", self.prefix, "applies only to source 'gcs'")
        if self.prefix is not None and (self.prefix.startswith("/") or ".." in self.prefix.split("/")):
            raise RuleError("prefix", self.prefix, "must be a relative path inside the data bucket")
        return self


class CheckpointConfig(Model):
    enabled: bool = Field(True, description="Save checkpoints to the checkpoint bucket under the run's name.")
    interval_steps: int = Field(100, ge=1, le=1_000_000, description="Steps between checkpoints.")
    resume: bool = Field(True, description="Resume from the newest checkpoint of the run, if any.")


class TopologyConfig(Model):
    mode: Literal["preferred", "required", "none"] | None = Field(
        None, description="Kueue topology-aware placement. Default: preferred where the pool has topology labels."
    )
    level: TopologyLevel = Field("block", description="Topology level to keep the run's nodes within.")


class TokenizerConfig(Model):
    library: Literal["megatron", "huggingface", "sentencepiece"] = Field("megatron", description="Tokenizer library.")
    type: str = Field(
        "GPT2BPETokenizer", description="Megatron tokenizer type, or a Hugging Face model ID / path for huggingface."
    )
    model: str | None = Field(None, description="sentencepiece: path of the model file inside the data bucket.")

    @model_validator(mode="after")
    def _check(self) -> TokenizerConfig:
        if self.library == "sentencepiece" and not self.model:
            raise RuleError("model", None, "is required for library 'sentencepiece'")
        return self


class RunConfig(Model):
    """One pretraining run: a suspended JobSet that Kueue admits when the whole run fits."""

    name: str = Field(description="Run name: names the JobSet, its logs and checkpoints. Changing it starts a new run.")
    model: str = Field(description="A model of the catalog.")
    pool: str | None = Field(None, description="GPU pool to run on. Default: the first GPU pool.")
    nodes: int = Field(ge=1, le=1000, description="Nodes (one pod each, all GPUs of the node).")
    steps: int | None = Field(None, ge=1, le=10_000_000, description="Training steps. Default: the model's.")
    global_batch_size: int | None = Field(None, ge=1, description="Sequences per step. Default: the model's.")
    micro_batch_size: int | None = Field(None, ge=1, description="Sequences per GPU per micro-step.")
    tensor_parallel: int | None = Field(None, ge=1, le=64, description="Tensor-parallel size.")
    pipeline_parallel: int | None = Field(None, ge=1, le=256, description="Pipeline-parallel size.")
    virtual_pipeline: int | None = Field(None, ge=1, le=256, description="Virtual pipeline stages per rank.")
    context_parallel: int | None = Field(None, ge=1, le=64, description="Context-parallel size.")
    sequence_length: int | None = Field(None, ge=128, le=1_048_576, description="Tokens per sequence.")
    fp8: bool | None = Field(None, description="FP8 (hybrid) training. Default: the model's.")
    profile: ProfileWindow | None = Field(None, description="Nsight Systems window; off when unset.")
    dataset: DatasetConfig = Field(default_factory=DatasetConfig, description="Training data.")
    tokenizer: TokenizerConfig = Field(default_factory=TokenizerConfig, description="Tokenizer of the data.")
    checkpoint: CheckpointConfig = Field(default_factory=CheckpointConfig, description="Checkpointing and resume.")
    max_restarts: int = Field(0, ge=0, le=100, description="JobSet restarts of the whole run after a failure.")
    ttl_seconds_after_finished: int = Field(
        43200, ge=0, le=2_592_000, description="Keep the finished JobSet this long."
    )
    topology: TopologyConfig = Field(default_factory=TopologyConfig, description="Topology-aware placement.")
    priority: Literal["nemo-low", "nemo-medium", "nemo-high"] = Field("nemo-medium", description="Kueue priority.")
    image: str | None = Field(None, description="Training image. Default: the model's pinned NeMo image.")
    overrides: dict[str, str | int | float | bool] = Field(
        {}, description="Extra settings by dotted key, applied to the NeMo config (NeMo 1) or recipe (NeMo 2)."
    )
    env: dict[str, str] = Field({}, description="Extra environment variables of the training container.")

    @property
    def spec(self) -> ModelSpec:
        return model_spec(self.model)

    @model_validator(mode="after")
    def _check(self) -> RunConfig:
        check_name("name", self.name, 40)
        if self.model not in MODELS:
            raise RuleError("model", self.model, f"is not in the model catalog; known: {', '.join(MODELS)}")
        if self.image is not None and not re.match(
            r"^[a-z0-9.-]+(:[0-9]+)?/[a-z0-9._/-]+(:[A-Za-z0-9._-]+|@sha256:[0-9a-f]{64})$", self.image
        ):
            raise RuleError("image", self.image, "must be a registry/repository:tag or @sha256 reference")
        if self.virtual_pipeline is not None and self.settings.pipeline_parallel == 1:
            raise RuleError("virtualPipeline", self.virtual_pipeline, "needs pipelineParallel above 1")
        for key in self.overrides:
            if not _OVERRIDE_KEY.match(key):
                raise RuleError(f"overrides.{key}", key, "must be a dotted key such as model.optim.lr")
        for key in self.env:
            if not _ENV_NAME.match(key):
                raise RuleError(f"env.{key}", key, "must be an environment variable name")
        return self

    def _virtual_pipeline(self) -> int | None:
        """The run's own value, else the recipe's when the run keeps the recipe's pipeline layout."""
        recipe = self.spec.recipe
        if self.virtual_pipeline is not None:
            return self.virtual_pipeline
        if self.pipeline_parallel in (None, recipe.pipeline_parallel):
            return recipe.virtual_pipeline
        return None

    @property
    def settings(self) -> RunSettings:
        """The run's effective settings: its overrides on top of the model's recipe."""
        recipe = self.spec.recipe
        return RunSettings(
            steps=self.steps or recipe.max_steps,
            global_batch_size=self.global_batch_size or recipe.global_batch_size,
            micro_batch_size=self.micro_batch_size or recipe.micro_batch_size,
            tensor_parallel=self.tensor_parallel or recipe.tensor_parallel,
            pipeline_parallel=self.pipeline_parallel or recipe.pipeline_parallel,
            virtual_pipeline=self._virtual_pipeline(),
            context_parallel=self.context_parallel or recipe.context_parallel,
            sequence_length=self.sequence_length or recipe.seq_length,
            fp8=recipe.fp8 if self.fp8 is None else self.fp8,
        )


class RunSettings(Model):
    steps: int
    global_batch_size: int
    micro_batch_size: int
    tensor_parallel: int
    pipeline_parallel: int
    virtual_pipeline: int | None
    context_parallel: int
    sequence_length: int
    fp8: bool


class DataPrepConfig(Model):
    """A Job that tokenizes JSONL from the data bucket into Megatron .bin/.idx files there."""

    name: str = Field(description="Job name.")
    input: str = Field(description="JSONL file or glob inside the data bucket, e.g. raw/wiki/*.jsonl.")
    output_prefix: str = Field(description="Output path prefix inside the data bucket, e.g. datasets/wiki/wiki.")
    json_key: str = Field("text", description="Field of each JSON line holding the text.")
    tokenizer: TokenizerConfig = Field(default_factory=TokenizerConfig, description="Tokenizer.")
    workers: int = Field(32, ge=1, le=256, description="Tokenizer processes (one CPU each).")
    pool: str | None = Field(None, description="GPU pool whose CPUs run the job. Default: the first GPU pool.")

    @model_validator(mode="after")
    def _check(self) -> DataPrepConfig:
        check_name("name", self.name, 50)
        for key in ("input", "outputPrefix"):
            value = getattr(self, to_snake(key))
            if value.startswith("/") or ".." in value.split("/"):
                raise RuleError(key, value, "must be a relative path inside the data bucket")
        return self


class TrainingConfig(Model):
    runs: tuple[RunConfig, ...] = Field((), description="Pretraining runs of this stack.")
    data_prep: tuple[DataPrepConfig, ...] = Field((), description="Tokenization jobs of this stack.")

    @model_validator(mode="after")
    def _check(self) -> TrainingConfig:
        for label, items in (("runs", self.runs), ("dataPrep", self.data_prep)):
            names = [i.name for i in items]
            for i, name in enumerate(names):
                if names.index(name) != i:
                    raise RuleError(f"{label}[{i}].name", name, "must be unique")
        return self


@dataclass(frozen=True)
class RunTarget:
    """A GPU pool as a run sees it: its machine, size and its ClusterQueue quota."""

    pool: str
    machine: MachineType
    max_nodes: int
    topology: bool
    gpu_quota: int
    cpu_quota_millicores: int
    memory_quota_mib: int


def check_run(run: RunConfig, targets: Mapping[str, RunTarget], default_pool: str) -> None:
    """Raise RuleError (key relative to the run) if the run cannot work on its pool."""
    pool = run.pool or default_pool
    if pool not in targets:
        raise RuleError("pool", pool, f"is not a GPU pool of the environment; pools: {', '.join(targets)}")
    target, spec, s = targets[pool], run.spec, run.settings
    machine, arch = target.machine, run.spec.architecture
    gpus = run.nodes * machine.gpus
    if run.nodes > target.max_nodes:
        raise RuleError("nodes", run.nodes, f"pool {pool} holds at most {target.max_nodes} nodes")
    if gpus > target.gpu_quota:
        raise RuleError("nodes", run.nodes, f"{gpus} GPUs exceed the queue's quota of {target.gpu_quota} on {pool}")
    cpu, memory = training_pod_requests(machine)
    if run.nodes * cpu > target.cpu_quota_millicores or run.nodes * memory > target.memory_quota_mib:
        raise RuleError("nodes", run.nodes, f"the run's CPU and memory requests exceed the queue's quota on {pool}")
    if machine.gpus % s.tensor_parallel:
        raise RuleError(
            "tensorParallel", s.tensor_parallel, f"must divide the {machine.gpus} GPUs of a {machine.name} node"
        )
    model_parallel = s.tensor_parallel * s.pipeline_parallel * s.context_parallel
    if gpus % model_parallel:
        raise RuleError(
            "nodes",
            run.nodes,
            f"{gpus} GPUs are not a multiple of tensor × pipeline × context parallel = "
            f"{s.tensor_parallel} × {s.pipeline_parallel} × {s.context_parallel} = {model_parallel}",
        )
    data_parallel = gpus // model_parallel
    if s.global_batch_size % (s.micro_batch_size * data_parallel):
        raise RuleError(
            "globalBatchSize",
            s.global_batch_size,
            f"must be a multiple of micro batch × data-parallel size = {s.micro_batch_size} × {data_parallel}",
        )
    if s.sequence_length > arch.max_positions:
        raise RuleError("sequenceLength", s.sequence_length, f"{spec.name} has {arch.max_positions} positions")
    if arch.heads % s.tensor_parallel or arch.kv_heads % s.tensor_parallel:
        raise RuleError(
            "tensorParallel",
            s.tensor_parallel,
            f"must divide the {arch.heads} attention heads and {arch.kv_heads} key/value heads of {spec.name}",
        )
    stages = s.pipeline_parallel * (s.virtual_pipeline or 1)
    if arch.layers % stages:
        raise RuleError(
            "pipelineParallel",
            s.pipeline_parallel,
            f"pipeline × virtual stages ({stages}) must divide the {arch.layers} layers of {spec.name}",
        )
    if s.fp8 and Precision.FP8 not in machine.accelerator.peak_dense_tflops:
        raise RuleError("fp8", True, f"{machine.accelerator.name} GPUs have no FP8")
    if run.profile is not None and run.profile.end_step > s.steps:
        raise RuleError("profile.endStep", run.profile.end_step, f"is after the last step ({s.steps})")
    if run.topology.mode in ("preferred", "required") and not target.topology:
        raise RuleError(
            "topology.mode",
            run.topology.mode,
            f"pool {pool} has no topology labels (they come with compact placement or a reservation); use 'none'",
        )


def training_errors(training: TrainingConfig, targets: Mapping[str, RunTarget], default_pool: str) -> list[RuleError]:
    """What is wrong with the runs and data-prep jobs on these pools, keys relative to the stack."""
    errors = []
    for i, run in enumerate(training.runs):
        try:
            check_run(run, targets, default_pool)
        except RuleError as error:
            errors.append(RuleError(f"training.runs[{i}].{error.key}", error.value, str(error)))
    for i, job in enumerate(training.data_prep):
        try:
            check_data_prep(job, targets, default_pool)
        except RuleError as error:
            errors.append(RuleError(f"training.dataPrep[{i}].{error.key}", error.value, str(error)))
    return errors


def check_data_prep(job: DataPrepConfig, targets: Mapping[str, RunTarget], default_pool: str) -> None:
    pool = job.pool or default_pool
    if pool not in targets:
        raise RuleError("pool", pool, f"is not a GPU pool of the environment; pools: {', '.join(targets)}")
    if job.workers * 1000 > training_pod_requests(targets[pool].machine)[0]:
        raise RuleError("workers", job.workers, f"a {targets[pool].machine.name} node has fewer CPUs")


# --------------------------------------------------------------------------- the stack


class StackConfig(Model):
    """Everything a stack file may set under `nemo-gke:`."""

    project: str = Field(description="GCP project ID. The one value every stack must set.")
    region: str = Field("us-central1", description="Region of the network, the cluster and regional resources.")
    zone: str = Field("us-central1-c", description="Zone of the GPU pools (and of a zonal cluster).")
    production: bool = Field(
        False, description="Production stack: deletion protection on the cluster, Filestore and buckets."
    )
    layers: tuple[Layer, ...] = Field(
        ENVIRONMENT_LAYERS,
        description="Layers this stack deploys: `[bootstrap]`, or a run of cluster, platform, training in order.",
    )
    upstream_stack: str | None = Field(
        None,
        description="Stack holding the layers before this stack's first one, as `<org>/<project>/<stack>` "
        "(`organization/nemo-gke/<stack>` on a self-managed backend) or a bare stack name.",
    )
    labels: dict[str, str] = Field({}, description="Labels added to every GCP resource.")
    bootstrap: BootstrapConfig = Field(default_factory=BootstrapConfig, description="Bootstrap layer settings.")
    network: NetworkConfig = Field(default_factory=NetworkConfig, description="Address plan.")
    cluster: ClusterConfig = Field(default_factory=ClusterConfig, description="GKE cluster settings.")
    system_pool: SystemPoolConfig = Field(default_factory=SystemPoolConfig, description="CPU pool for controllers.")
    gpu_pools: tuple[GpuPoolConfig, ...] = Field(
        (GpuPoolConfig(name="a3-highgpu", machine_type="a3-highgpu-8g", node_count=2),),
        description="GPU node pools (default: the walkthrough's 2 × a3-highgpu-8g).",
    )
    namespace: str = Field("nemo", description="Namespace of the training runs, their volumes and their LocalQueue.")
    storage: StorageConfig = Field(default_factory=StorageConfig, description="Shared file system and buckets.")
    kueue: KueueConfig = Field(default_factory=KueueConfig, description="Kueue queues and admission.")
    tensorboard: TensorBoardConfig = Field(default_factory=TensorBoardConfig, description="TensorBoard.")
    gpudirect: GpuDirectConfig = Field(default_factory=GpuDirectConfig, description="GPUDirect add-ons.")
    training: TrainingConfig = Field(default_factory=TrainingConfig, description="Runs and data preparation.")

    @property
    def cluster_name(self) -> str:
        assert self.cluster.name is not None  # filled in by load_stack_config
        return self.cluster.name

    @property
    def upstream_stack_name(self) -> str | None:
        if self.upstream_stack is None or "/" in self.upstream_stack:
            return self.upstream_stack
        return f"organization/{NAMESPACE}/{self.upstream_stack}"

    def deploys(self, layer: Layer) -> bool:
        return layer in self.layers

    def pool_zone(self, pool: GpuPoolConfig) -> str:
        return pool.zone or self.zone

    @property
    def gpu_machines(self) -> tuple[MachineType, ...]:
        """Distinct machine types of the GPU pools, in pool order."""
        seen: dict[str, MachineType] = {}
        for pool in self.gpu_pools:
            seen.setdefault(pool.machine_type, pool.machine)
        return tuple(seen.values())

    @model_validator(mode="after")
    def _check(self) -> StackConfig:
        self._check_location()
        self._check_layers()
        self._check_labels()
        self._check_pools()
        check_name("namespace", self.namespace, 63)
        if self.namespace in ("default", "kube-system", "kube-public", "kueue-system", "jobset-system"):
            raise RuleError(
                "namespace", self.namespace, "is not a namespace this stack can own; use your own, e.g. nemo"
            )
        return self

    def _check_location(self) -> None:
        if self.project.startswith("<") or not _PROJECT_ID.match(self.project):
            raise RuleError(
                "project",
                self.project,
                "must be your GCP project ID (6-30 lower-case letters, digits, '-'); "
                f"set it with `pulumi config set {NAMESPACE}:project <id>`",
            )
        zone_of_region = _ZONE.match(self.region)
        if zone_of_region:
            raise RuleError("region", self.region, f"is a zone; its region is {zone_of_region.group(1)}")
        if not _REGION.match(self.region):
            raise RuleError("region", self.region, "must be a GCP region such as us-central1")
        if _REGION.match(self.zone):
            raise RuleError("zone", self.zone, f"is a region, not a zone; use a zone of it such as {self.zone}-a")
        zone = _ZONE.match(self.zone)
        if not zone or zone.group(1) != self.region:
            raise RuleError("zone", self.zone, f"must be a zone of region {self.region}, such as {self.region}-a")

    def _check_layers(self) -> None:
        layers = list(self.layers)
        if not layers:
            raise RuleError("layers", [], "must name at least one layer")
        if Layer.BOOTSTRAP in layers:
            if layers != [Layer.BOOTSTRAP]:
                raise RuleError(
                    "layers", [x.value for x in layers], "bootstrap runs alone in its own stack: [bootstrap]"
                )
            return
        start = ENVIRONMENT_LAYERS.index(layers[0])
        if layers != list(ENVIRONMENT_LAYERS[start : start + len(layers)]):
            raise RuleError(
                "layers",
                [x.value for x in layers],
                "must be consecutive layers in the order cluster, platform, training",
            )
        if layers[0] is Layer.CLUSTER and self.upstream_stack is not None:
            raise RuleError(
                "upstreamStack", self.upstream_stack, "must be unset when this stack deploys the cluster layer"
            )
        if layers[0] is not Layer.CLUSTER and self.upstream_stack is None:
            raise RuleError(
                "upstreamStack",
                None,
                f"is required: this stack starts at the {layers[0].value} layer and reads the earlier ones from it",
            )
        if self.upstream_stack is not None and not re.match(
            r"^([^/\s]+/[^/\s]+/)?[A-Za-z0-9._-]+$", self.upstream_stack
        ):
            raise RuleError("upstreamStack", self.upstream_stack, "must be <org>/<project>/<stack> or a stack name")

    def _check_labels(self) -> None:
        for key, value in self.labels.items():
            if not _LABEL_KEY.match(key):
                raise RuleError(
                    f"labels.{key}", key, "label keys are 1-63 of a-z, 0-9, '_', '-', starting with a letter"
                )
            if not _LABEL_VALUE.match(value):
                raise RuleError(f"labels.{key}", value, "label values are 0-63 of a-z, 0-9, '_', '-'")

    def _check_pools(self) -> None:
        if not self.deploys(Layer.CLUSTER):
            return
        if not self.gpu_pools:
            raise RuleError("gpuPools", [], "must define at least one GPU pool")
        names = [p.name for p in self.gpu_pools]
        pod_addresses = 0
        for i, pool in enumerate(self.gpu_pools):
            if names.index(pool.name) != i:
                raise RuleError(f"gpuPools[{i}].name", pool.name, "must be unique")
            zone = self.pool_zone(pool)
            match = _ZONE.match(zone)
            if not match or match.group(1) != self.region:
                raise RuleError(f"gpuPools[{i}].zone", zone, f"must be a zone of region {self.region}")
            if pool.machine.gpudirect.value == "rdma" and zone != self.zone:
                raise RuleError(
                    f"gpuPools[{i}].zone",
                    zone,
                    f"RDMA networks are zonal: {pool.machine_type} pools must be in the stack zone {self.zone}",
                )
            pod_addresses += pool.max_nodes * 2 * pool.max_pods_per_node
        # All GPU machines of one stack share the GPU networks, so their NIC layouts must agree.
        layouts = {(m.gpudirect, m.gpu_nics, m.extra_gvnics) for m in self.gpu_machines if m.is_multi_nic}
        if len(layouts) > 1:
            raise RuleError(
                "gpuPools",
                [p.machine_type for p in self.gpu_pools],
                "multi-NIC machine types with different GPU network layouts cannot share a cluster; "
                "use one of tcpx (a3-highgpu-8g), tcpxo (a3-megagpu-8g) or rdma (a3-ultragpu-8g, a4-highgpu-8g)",
            )
        pod_range = ipaddress.IPv4Network(self.network.pod_cidr).num_addresses
        if pod_addresses > pod_range:
            raise RuleError(
                "network.podCidr",
                self.network.pod_cidr,
                f"holds {pod_range} addresses but the GPU pools need {pod_addresses} "
                "(nodes × 2 × maxPodsPerNode); use a larger range or fewer pods per node",
            )


# --------------------------------------------------------------------------- loading


class ConfigIssue(BaseModel):
    key: str
    value: Any
    message: str

    def __str__(self) -> str:
        shown = "" if self.value is None else f" = {json.dumps(self.value, default=str)}"
        return f"{NAMESPACE}:{self.key}{shown}: {self.message}"


class ConfigError(pulumi.RunError):
    """Invalid stack configuration. A RunError, so Pulumi prints it without a traceback."""

    def __init__(self, issues: list[ConfigIssue]) -> None:
        self.issues = issues
        lines = "\n".join(f"  {issue}" for issue in issues)
        super().__init__(f"invalid stack configuration:\n{lines}")


def _join(loc: Iterable[str | int]) -> str:
    key = ""
    for part in loc:
        key += f"[{part}]" if isinstance(part, int) else (f".{part}" if key else part)
    return key


def unwrap_annotation(annotation: Any) -> Any:
    """The model class behind Optional/tuple/list/dict annotations, if any."""
    while True:
        origin = get_origin(annotation)
        if origin is Annotated:
            annotation = get_args(annotation)[0]
        elif origin in (Union, tuple, list, dict) or str(origin) == "types.UnionType":
            args = [a for a in get_args(annotation) if a is not type(None) and a is not Ellipsis]
            annotation = args[-1] if args else None
        else:
            return annotation


def _model_at(loc: tuple[str | int, ...]) -> type[BaseModel] | None:
    model: type[BaseModel] | None = StackConfig
    for part in loc:
        if model is None:
            return None
        if isinstance(part, int):
            continue
        fields_by_alias = {f.alias or name: f for name, f in model.model_fields.items()}
        field = fields_by_alias.get(part)
        if field is None:
            return None
        candidate = unwrap_annotation(field.annotation)
        model = candidate if isinstance(candidate, type) and issubclass(candidate, BaseModel) else None
    return model


def _known_keys(model: type[BaseModel]) -> str:
    return ", ".join(f.alias or name for name, f in model.model_fields.items())


def _issue(error: Mapping[str, Any]) -> ConfigIssue:
    loc = tuple(error["loc"])
    cause = error.get("ctx", {}).get("error")
    if isinstance(cause, RuleError):
        return ConfigIssue(
            key=_join((*loc, *cause.key.split("."))) if cause.key else _join(loc), value=cause.value, message=str(cause)
        )
    if error["type"] == "extra_forbidden":
        parent = _model_at(loc[:-1])
        known = f"; known keys here: {_known_keys(parent)}" if parent else ""
        return ConfigIssue(key=_join(loc), value=None, message=f"unknown key{known}")
    if error["type"] == "missing":
        return ConfigIssue(key=_join(loc), value=None, message="is required")
    message = error["msg"].removeprefix("Value error, ")
    return ConfigIssue(key=_join(loc), value=error.get("input"), message=message)


def _decode(value: str) -> Any:
    """Pulumi hands structured values to programs as JSON strings, scalars as plain strings."""
    try:
        return json.loads(value)
    except ValueError:
        return value


def parse_stack_config(raw: Mapping[str, str], stack: str) -> StackConfig:
    """Validate the `nemo-gke:*` values of a stack. Raises ConfigError naming every bad key."""
    prefix = f"{NAMESPACE}:"
    data: dict[str, Any] = {key[len(prefix) :]: _decode(value) for key, value in raw.items() if key.startswith(prefix)}
    cluster = data.get("cluster")
    if isinstance(cluster, dict) and "name" not in cluster:
        data["cluster"] = {**cluster, "name": f"nemo-{stack}"}
    elif cluster is None:
        data["cluster"] = {"name": f"nemo-{stack}"}
    try:
        # JSON mode: strict types, with JSON arrays accepted for tuples and strings for enums.
        return StackConfig.from_plain(data)
    except ValidationError as exc:
        raise ConfigError([_issue(e) for e in exc.errors()]) from None


def read_stack_config() -> StackConfig:
    """Read this stack's configuration from the Pulumi runtime, once."""
    raw = {**pulumi.runtime.get_config_env(), **pulumi.runtime.config.CONFIG.get()}
    return parse_stack_config(raw, pulumi.get_stack())
