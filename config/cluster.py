"""The cluster layer's keys: `network`, `cluster`, `systemPool` and `gpuPools`."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Literal

from pydantic import Field, model_validator

from config.base import Model, check_name, check_period, parse_cidr, to_snake
from facts.errors import RuleError
from facts.gcp import general_machine_problem
from facts.gke import (
    BOOKING_MAX_DAYS,
    BOOKING_MIN_DAYS,
    DWS_CAPACITY,
    IMAGE_STREAMING_NODE_IMAGE,
    NODE_UPGRADE_EXCLUSION_NAME,
    NODE_UPGRADE_EXCLUSION_SCOPE,
    CapacityType,
    booking_problem,
    capacity_problem,
    compact_placement_problem,
    default_compact,
    gke_topology_labels,
    pool_size_problem,
    rbac_security_group_problem,
    topology_placement_problem,
)
from facts.machines import MACHINE_TYPES, MachineType, machine_type
from facts.project import PROJECT
from facts.registries import parse_reference


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
        keys = ("nodeCidr", "podCidr", "serviceCidr", "gpuCidr", "controlPlaneCidr")
        ranges = {key: parse_cidr(key, getattr(self, to_snake(key))) for key in keys}
        if ranges["controlPlaneCidr"].prefixlen != 28:
            raise RuleError("controlPlaneCidr", self.control_plane_cidr, "must be a /28")
        if ranges["gpuCidr"].prefixlen > 25:
            raise RuleError("gpuCidr", self.gpu_cidr, "must be /25 or larger so each of its 16 subnets holds nodes")
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


class AuthorizedNetwork(Model):
    cidr: str = Field(description="CIDR allowed to reach the control plane, e.g. your office egress range.")
    display_name: str | None = Field(None, description="Label shown in the console. Default: the CIDR.")

    @model_validator(mode="after")
    def _check(self) -> AuthorizedNetwork:
        parse_cidr("cidr", self.cidr)
        return self


class MaintenanceWindow(Model):
    start_time: str = Field("2025-01-04T03:00:00Z", description="RFC 3339 start of the first window.")
    end_time: str = Field("2025-01-04T11:00:00Z", description="RFC 3339 end of the first window.")
    recurrence: str = Field("FREQ=WEEKLY;BYDAY=SA,SU", description="RFC 5545 RRULE repeating the window.")

    @model_validator(mode="after")
    def _check(self) -> MaintenanceWindow:
        check_period("startTime", self.start_time, "endTime", self.end_time, "2025-01-04T03:00:00Z")
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
        check_period("startTime", self.start_time, "endTime", self.end_time, "2026-12-20T00:00:00Z")
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
        description="Ranges allowed to reach the public control-plane endpoint. Empty: any address (with IAM), "
        "which the program warns about. Must include where `pulumi up` runs.",
    )
    maintenance_window: MaintenanceWindow = Field(
        default_factory=MaintenanceWindow, description="When GKE may upgrade."
    )
    maintenance_exclusions: tuple[MaintenanceExclusion, ...] = Field(
        (), description="Periods without upgrades, e.g. around a long training campaign."
    )
    rbac_security_group: str | None = Field(
        None,
        description="Google Groups for RBAC: `gke-security-groups@<your domain>`, the group holding the groups "
        "RoleBindings may name (teams[].groups needs it). Unset: off.",
    )
    pause_node_upgrades: bool = Field(
        True,
        description=f"A {NODE_UPGRADE_EXCLUSION_SCOPE} maintenance exclusion (`{NODE_UPGRADE_EXCLUSION_NAME}`) "
        "until the cluster version's end of support, as cluster-toolkit's A3 Ultra and A4 examples set: GKE never "
        "drains a training node to upgrade it; control-plane patches still happen. Upgrade nodes between "
        "campaigns. false: nodes auto-upgrade in the maintenance window.",
    )

    @property
    def zones(self) -> int:
        """Zones the system pool spans: a regional cluster's node pools take three zones of the region
        by default (https://cloud.google.com/kubernetes-engine/docs/concepts/regional-clusters)."""
        return 3 if self.regional else 1

    @property
    def control_plane_advice(self) -> str | None:
        """A warning when any address may reach the control plane: the default, or a /0 range."""
        if self.master_authorized_networks and all(not n.cidr.endswith("/0") for n in self.master_authorized_networks):
            return None
        return (
            "the cluster's control plane accepts connections from any address (IAM still applies); allow only "
            "yours and where `pulumi up` runs: `pulumi config set --path "
            f"'{PROJECT}:cluster.masterAuthorizedNetworks[0].cidr' <your egress address>/32`"
        )

    @model_validator(mode="after")
    def _check(self) -> ClusterConfig:
        if self.name is not None:
            # 24: the node service account `<cluster>-nodes` must fit IAM's 30 characters.
            check_name("name", self.name, 24)
        names = [e.name for e in self.maintenance_exclusions]
        for i, name in enumerate(names):
            if names.index(name) != i:
                raise RuleError(f"maintenanceExclusions[{i}].name", name, "must be unique")
            if self.pause_node_upgrades and name == NODE_UPGRADE_EXCLUSION_NAME:
                raise RuleError(f"maintenanceExclusions[{i}].name", name, "is the exclusion of pauseNodeUpgrades")
        if self.rbac_security_group is not None:
            problem = rbac_security_group_problem(self.rbac_security_group)
            if problem:
                raise RuleError("rbacSecurityGroup", self.rbac_security_group, problem)
        return self


class SystemPoolConfig(Model):
    """The CPU pool for controllers (Kueue, JobSet) and TensorBoard."""

    machine_type: str = Field("e2-standard-4", description="General-purpose machine type.")
    node_count: int = Field(1, ge=1, le=100, description="Nodes per zone of the cluster.")
    disk_size_gb: int = Field(100, ge=50, le=2000, description="Boot disk size.")

    @model_validator(mode="after")
    def _check(self) -> SystemPoolConfig:
        problem = general_machine_problem(self.machine_type)
        if problem:
            raise RuleError("machineType", self.machine_type, problem)
        return self


_UTC_RULE = "must be a UTC time in RFC 3339, such as 2026-12-14T00:00:00Z"
# How the Pulumi CLI hands over a YAML timestamp written without quotes: Go's time.Time String().
_GO_UTC = "%Y-%m-%d %H:%M:%S +0000 UTC"


def _utc(text: str) -> datetime | None:
    """A UTC time written in RFC 3339 (`2026-12-14T00:00:00Z`), or as the Pulumi CLI passes an
    unquoted YAML timestamp; None for anything else."""
    try:
        return datetime.strptime(text, _GO_UTC).replace(tzinfo=UTC)
    except ValueError:
        pass
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    return moment if text.endswith("Z") and moment.utcoffset() == timedelta(0) else None


class Booking(Model):
    """GPU capacity booked ahead: a calendar-mode future reservation this stack requests
    (facts.gke.BOOKING_*), which the pool consumes from its start."""

    start: str = Field(description="When the booking starts, in UTC (RFC 3339): `2026-12-14T00:00:00Z`.")
    days: int = Field(description=f"How long it lasts, {BOOKING_MIN_DAYS} to {BOOKING_MAX_DAYS} days.")
    draft: bool = Field(
        False,
        description="Create the request as a draft, for review, instead of submitting it; a draft can be "
        "deleted, a submitted request mostly cannot.",
    )

    @property
    def start_time(self) -> datetime:
        start = _utc(self.start)
        if start is None:  # _check refuses it before anything reads it
            raise RuleError("start", self.start, _UTC_RULE)
        return start

    @model_validator(mode="after")
    def _check(self) -> Booking:
        if _utc(self.start) is None:
            raise RuleError("start", self.start, _UTC_RULE)
        if not BOOKING_MIN_DAYS <= self.days <= BOOKING_MAX_DAYS:
            raise RuleError(
                "days", self.days, f"a calendar-mode booking lasts {BOOKING_MIN_DAYS} to {BOOKING_MAX_DAYS} days"
            )
        return self


class Capacity(Model):
    type: CapacityType = Field(CapacityType.ON_DEMAND, description="How the pool obtains its VMs.")
    reservation: str | None = Field(None, description="Specific reservation to consume (type `reservation`).")
    reservation_block: str | None = Field(None, description="Block of the reservation to pin the pool to.")
    reservation_project: str | None = Field(
        None, description="Project owning a shared reservation. Default: this project."
    )
    max_run_duration_seconds: int | None = Field(
        None, ge=600, le=604800, description="Flex-start/queued: VMs are reclaimed after this long (max 7 days)."
    )
    booking: Booking | None = Field(
        None,
        description="Book the reservation ahead in calendar mode (type `reservation`): this stack requests it, "
        "named `reservation` (default: the cluster's and the pool's names), and the pool consumes it from its start.",
    )

    @model_validator(mode="after")
    def _check(self) -> Capacity:
        if self.booking is not None:
            if self.type is not CapacityType.RESERVATION:
                raise RuleError(
                    "booking", self.booking.start, "needs capacity.type 'reservation': the pool consumes what it books"
                )
            for key in ("reservationBlock", "reservationProject"):
                value = getattr(self, to_snake(key))
                if value is not None:
                    raise RuleError(key, value, "must be unset with a booking: it books a reservation in this project")
        elif self.type is CapacityType.RESERVATION and self.reservation is None:
            raise RuleError("reservation", None, "is required when capacity.type is 'reservation' (or a booking)")
        if self.type is not CapacityType.RESERVATION:
            for key in ("reservation", "reservationBlock", "reservationProject"):
                value = getattr(self, to_snake(key))
                if value is not None:
                    why = {
                        CapacityType.SPOT: "reservations exclude Spot",
                        CapacityType.FLEX_START: "flex-start cannot consume a reservation",
                        CapacityType.QUEUED_PROVISIONING: "queued provisioning cannot consume a reservation",
                        CapacityType.ON_DEMAND: "set capacity.type to 'reservation' to consume one",
                    }[self.type]
                    raise RuleError(key, value, f"must be unset with capacity.type {self.type.value!r}: {why}")
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
    place_by_topology: bool | None = Field(
        None,
        description="Kueue places runs on the pool by topology (its nodes' block, sub-block and host). Default: "
        "where the nodes carry GKE's topology labels (compact placement or a reservation) and exist when Kueue "
        "admits (a fixed size, minNodes above 0, or queued provisioning). `false` places runs by quota alone, "
        "so the pool can share a run's chain with pools placed without topology, such as flex-start; Kueue then "
        "neither replaces a run's failed node nor sees a Spot reclaim.",
    )
    auto_repair: bool | None = Field(
        None, description="Node auto-repair. Default: on, off for flex-start and queued provisioning."
    )
    gpu_driver_version: Literal["LATEST", "DEFAULT"] = Field("LATEST", description="GKE-managed NVIDIA driver.")
    disk_type: str | None = Field(None, description="Boot disk type. Default: the machine's first supported type.")
    disk_size_gb: int = Field(200, ge=100, le=4000, description="Boot disk size.")
    max_pods_per_node: int = Field(32, ge=8, le=256, description="Pods per node; sizes each node's pod range.")
    allow_unlisted_zone: bool = Field(
        False,
        description="Accept a zone the catalog does not list for the machine type (Google adds zones); "
        "the program then warns instead of refusing.",
    )
    image_streaming: bool | None = Field(
        None,
        description="GKE image streaming: a container starts while its image streams from Artifact Registry "
        f"(with `imageMirror`, the NeMo image too); other images are pulled whole. Needs {IMAGE_STREAMING_NODE_IMAGE} "
        "nodes. Default: on with `imageMirror` or `preloadedImage`, where the machine's node image has it.",
    )
    preloaded_image: str | None = Field(
        None,
        description="A container image every node of the pool has on a secondary boot disk, such as the runs' "
        "NeMo image: build its disk image once with the command `pulumi up` names (output `preloadCommands`). "
        "Needs imageStreaming. Changing it recreates the pool, stopping the runs on it: add a second pool instead.",
    )

    @property
    def machine(self) -> MachineType:
        return machine_type(self.machine_type)

    @property
    def max_nodes(self) -> int:
        """Nodes the pool can hold at most: what queues and quotas are sized for."""
        return self.autoscaling.max_nodes if self.autoscaling else (self.node_count or 0)

    @property
    def compact(self) -> bool:
        if self.placement is not None:
            return self.placement == "compact"
        return default_compact(self.capacity.type, self.machine, self.max_nodes)

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
        if self.image_streaming and machine.node_image_type != IMAGE_STREAMING_NODE_IMAGE:
            raise RuleError(
                "imageStreaming",
                True,
                f"needs {IMAGE_STREAMING_NODE_IMAGE} nodes, and {machine.name} boots {machine.node_image_type}",
            )
        if self.preloaded_image is not None:
            try:
                parse_reference(self.preloaded_image)
            except ValueError as error:
                raise RuleError("preloadedImage", self.preloaded_image, str(error)) from None
            if self.image_streaming is False:
                why = "must be true with preloadedImage: GKE reads secondary boot disks through it"
                raise RuleError("imageStreaming", False, why)
            if machine.node_image_type != IMAGE_STREAMING_NODE_IMAGE:
                why = f"needs {IMAGE_STREAMING_NODE_IMAGE} nodes (through image streaming), and {machine.name} boots "
                raise RuleError("preloadedImage", self.preloaded_image, why + machine.node_image_type)
        mode = self.capacity.type
        if mode in DWS_CAPACITY:
            if self.autoscaling is None or self.autoscaling.min_nodes != 0:
                raise RuleError(
                    "autoscaling",
                    self.autoscaling.model_dump(by_alias=True) if self.autoscaling else None,
                    f"capacity.type {mode.value!r} needs autoscaling from zero (autoscaling.minNodes: 0, maxNodes: N)",
                )
            if self.auto_repair:
                raise RuleError("autoRepair", True, f"must be false with capacity.type {mode.value!r}")
        problem = capacity_problem(mode, machine)
        if problem:
            raise RuleError("capacity.type", mode.value, problem)
        if self.capacity.booking is not None:
            if self.autoscaling is None or self.autoscaling.min_nodes != 0:
                raise RuleError(
                    "autoscaling",
                    self.autoscaling.model_dump(by_alias=True) if self.autoscaling else None,
                    "a booked pool scales from zero (autoscaling.minNodes: 0, maxNodes: the VMs to book): its nodes "
                    "can exist only from the booking's start",
                )
            problem = booking_problem(machine, self.max_nodes)
            if problem:
                raise RuleError("capacity.booking", self.capacity.booking.start, problem)
        problem = pool_size_problem(machine, self.max_nodes)
        if problem:
            key = "autoscaling.maxNodes" if self.autoscaling else "nodeCount"
            raise RuleError(key, self.max_nodes, problem)
        if self.placement == "compact":
            problem = compact_placement_problem(mode, machine)
            if problem:
                raise RuleError("placement", "compact", problem)
        if self.placement == "none" and machine.accelerator_topology is not None:
            raise RuleError(
                "placement",
                "none",
                f"{machine.name} pools are always placed in one NVLink domain by a {machine.accelerator_topology} "
                "workload policy",
            )
        if self.placement_policy is not None:
            if not self.compact:
                raise RuleError("placementPolicy", self.placement_policy, "needs compact placement")
            check_name("placementPolicy", self.placement_policy, 63)
        if self.place_by_topology:
            min_nodes = self.autoscaling.min_nodes if self.autoscaling else self.max_nodes
            problem = topology_placement_problem(
                gke_topology_labels(mode, self.compact), min_nodes, mode is CapacityType.QUEUED_PROVISIONING
            )
            if problem:
                raise RuleError("placeByTopology", True, f"the pool {problem}")
        return self
