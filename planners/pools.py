"""GPU node pools: what later layers know of a pool (`GpuPoolExport`), and how its settings become
a GKE node pool (`plan_node_pool`), with GKE's rules and the platform's defaults applied."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from facts.errors import RuleError, require
from facts.gcp import region_of_zone, reservation_path, scoped_name
from facts.gke import (
    DWS_CAPACITY,
    IMAGE_STREAMING_NODE_IMAGE,
    CapacityType,
    booking_problem,
    capacity_problem,
    compact_placement_problem,
    gke_topology_labels,
    pool_size_problem,
    topology_placement_problem,
)
from facts.kubernetes import GPU_TAINT, QUEUED_TAINT, Taint
from facts.machines import MachineType, OtherMachine, machine_type
from facts.project import is_placeholder


def gke_gpu_taints(queued: bool) -> tuple[Taint, ...]:
    """The taints GKE's GPU nodes carry: its GPU taint, and queued provisioning's own."""
    return (GPU_TAINT, QUEUED_TAINT) if queued else (GPU_TAINT,)


@dataclass(frozen=True)
class GpuPoolExport:
    """A GPU pool as later layers know it (the cluster layer's `gpuPools` output)."""

    name: str
    machine_type: str
    zone: str
    # Nodes the pool can hold at most: what queues and quotas are sized for.
    max_nodes: int
    capacity_type: CapacityType
    compact: bool
    # Nodes the pool keeps at least; 0 when it scales from zero.
    min_nodes: int
    # The reservation it consumes (capacity type reservation).
    reservation: str | None = None
    # A pool of an existing cluster (config.existing): the labels that select its nodes (None:
    # the GKE node pool label of `name`), the taints they carry, and whether they carry GKE's
    # topology labels.
    node_labels: dict[str, str] | None = None
    taints: tuple[Taint, ...] = ()
    topology_labels: bool | None = None
    # An existing cluster's machine outside the catalog (`machine_type` is then its name).
    other_machine: OtherMachine | None = None
    # GKE image streaming on the pool's nodes (False for an existing cluster's pools: not known).
    image_streaming: bool = False
    # The image on the nodes' secondary boot disks, as the config names it.
    preloaded_image: str | None = None
    # Its booked reservation's period (a calendar-mode booking), as RFC 3339 UTC times.
    booked_from: str | None = None
    booked_until: str | None = None
    # False: Kueue places runs on it by quota alone, though its nodes could be placed by topology
    # (the pool's `placeByTopology`), so it can share a chain with pools placed without. None
    # otherwise: stack outputs drop null values, so a pool without the setting exports as before.
    place_by_topology: bool | None = None

    @property
    def machine(self) -> MachineType:
        if self.other_machine is not None:
            return self.other_machine.machine
        return machine_type(self.machine_type)

    @property
    def node_taints(self) -> tuple[Taint, ...]:
        """The taints the pool's nodes carry: an existing pool's declared ones, else GKE's (for GPUs,
        queued provisioning and the CPU architecture)."""
        if self.node_labels is not None:
            return self.taints
        return gke_gpu_taints(self.queued) + self.machine.arch_taints

    @property
    def booked_vm_hours(self) -> int | None:
        """The VM-hours its booking bills, used or not: every booked VM for the whole period."""
        if self.booked_from is None or self.booked_until is None:
            return None
        period = datetime.fromisoformat(self.booked_until) - datetime.fromisoformat(self.booked_from)
        return self.max_nodes * round(period.total_seconds() / 3600)

    @property
    def has_topology_labels(self) -> bool:
        if self.topology_labels is not None:
            return self.topology_labels
        return gke_topology_labels(self.capacity_type, self.compact)

    @property
    def queued(self) -> bool:
        """Nodes come from queued provisioning: admission waits for a ProvisioningRequest."""
        return self.capacity_type is CapacityType.QUEUED_PROVISIONING

    @property
    def topology_problem(self) -> str | None:
        """Why Kueue cannot place runs on this pool by topology, or None."""
        if self.place_by_topology is False:
            return "places runs by quota alone (placeByTopology: false)"
        return topology_placement_problem(self.has_topology_labels, self.min_nodes, self.queued)


@dataclass(frozen=True)
class Autoscaling:
    min_nodes: int
    max_nodes: int


@dataclass(frozen=True)
class Booking:
    """A calendar-mode future reservation the pool's stack requests (facts.gke.BOOKING_*)."""

    start: datetime
    days: int
    draft: bool = False

    @property
    def end(self) -> datetime:
        return self.start + timedelta(days=self.days)


def rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class NodePoolSpec:
    """A GPU node pool's settings, as the config gives them (None: the platform's default)."""

    name: str
    machine_type: str
    zone: str
    capacity_type: CapacityType
    # Exactly one of a static size and autoscaling.
    node_count: int | None
    autoscaling: Autoscaling | None
    compact: bool
    # Reservation to consume (capacity type reservation), in this project unless another is named.
    reservation: str | None = None
    reservation_block: str | None = None
    reservation_project: str | None = None
    # Existing resource policy for compact placement.
    placement_policy: str | None = None
    auto_repair: bool | None = None
    gpu_driver_version: str = "LATEST"
    disk_type: str | None = None
    disk_size_gb: int = 200
    max_pods_per_node: int = 32
    max_run_duration_seconds: int | None = None
    # None: the node pool's setting is left unset.
    image_streaming: bool | None = None
    preloaded_image: str | None = None
    # The disk image that holds it (facts.registries.preload_disk_image).
    preload_disk_image: str | None = None
    # Its reservation, booked by this stack in calendar mode (`reservation` names it).
    booking: Booking | None = None
    # False: Kueue places runs on the pool by quota alone (GpuPoolExport.place_by_topology).
    place_by_topology: bool = True

    @property
    def facts(self) -> GpuPoolExport:
        if self.autoscaling is not None:
            min_nodes, max_nodes = self.autoscaling.min_nodes, self.autoscaling.max_nodes
        else:
            min_nodes = max_nodes = self.node_count or 0
        return GpuPoolExport(
            self.name,
            self.machine_type,
            self.zone,
            max_nodes,
            self.capacity_type,
            self.compact,
            min_nodes,
            self.reservation,
            image_streaming=bool(self.image_streaming),
            preloaded_image=self.preloaded_image,
            booked_from=rfc3339(self.booking.start) if self.booking else None,
            booked_until=rfc3339(self.booking.end) if self.booking else None,
            place_by_topology=None if self.place_by_topology else False,
        )


@dataclass(frozen=True)
class NodePoolPlan:
    """The decided node pool, in the shapes `gcp.container.NodePool` takes."""

    region: str
    node_count: int | None
    initial_node_count: int | None
    autoscaling: dict[str, Any] | None
    # COMPACT placement, in an existing resource policy or (flex-start) a workload policy to create.
    compact: bool
    placement_policy: str | None
    workload_policy: dict[str, str] | None
    # Name of the workload policy to create: the cluster's prefix keeps it unique in the project.
    workload_policy_name: str
    queued_provisioning: bool
    auto_repair: bool
    # None for flex-start and queued provisioning pools: GKE gives them its own SHORT_LIVED
    # strategy, which the provider cannot express.
    upgrade_settings: dict[str, Any] | None
    taints: tuple[dict[str, str], ...]
    boot_disk_type: str
    spot: bool
    flex_start: bool
    max_run_duration: str | None
    reservation_affinity: dict[str, Any] | None
    # The calendar-mode future reservation to request, in the shapes `gcp.compute.FutureReservation` takes.
    booking: dict[str, Any] | None = None


def plan_node_pool(spec: NodePoolSpec, project: str, cluster_name: str) -> NodePoolPlan:
    """GKE's rules and the platform's defaults applied to one pool's settings. The config schema
    checks these rules with messages for users; here they guard the plan's own assumptions."""
    machine = machine_type(spec.machine_type)
    capacity = spec.capacity_type
    dws = capacity in DWS_CAPACITY
    region = region_of_zone(spec.zone)
    if region is None:
        raise RuleError("zone", spec.zone, "must be a zone such as us-central1-c")
    require(
        (spec.node_count is None) != (spec.autoscaling is None),
        "nodeCount",
        spec.node_count,
        "set exactly one of nodeCount and autoscaling",
    )
    require(
        not dws or (spec.autoscaling is not None and spec.autoscaling.min_nodes == 0),
        "autoscaling",
        spec.autoscaling,
        f"capacity.type {capacity.value!r} needs autoscaling from zero",
    )
    require(
        (capacity is CapacityType.RESERVATION) == (spec.reservation is not None),
        "capacity.reservation",
        spec.reservation,
        "a reservation is named exactly when capacity.type is 'reservation'",
    )
    problem = capacity_problem(capacity, machine)
    require(problem is None, "capacity.type", capacity.value, problem or "")
    require(
        not spec.image_streaming or machine.node_image_type == IMAGE_STREAMING_NODE_IMAGE,
        "imageStreaming",
        True,
        f"needs {IMAGE_STREAMING_NODE_IMAGE} nodes, and {machine.name} boots {machine.node_image_type}",
    )
    placement_problem = compact_placement_problem(capacity, machine) if spec.compact else None
    require(placement_problem is None, "placement", "compact", placement_problem or "")
    require(spec.compact or machine.accelerator_topology is None, "placement", "none", "the machine needs placement")
    max_nodes = spec.facts.max_nodes
    problem = pool_size_problem(machine, max_nodes)
    require(problem is None, "nodeCount", max_nodes, problem or "")
    require(spec.compact or spec.placement_policy is None, "placementPolicy", spec.placement_policy, "needs compact")
    boot_disk_type = spec.disk_type or machine.boot_disk_types[0]
    require(
        boot_disk_type in machine.boot_disk_types,
        "diskType",
        boot_disk_type,
        f"{machine.name} boots from: {', '.join(machine.boot_disk_types)}",
    )

    if spec.reservation is not None:
        path = reservation_path(spec.reservation_project or project, spec.reservation, spec.reservation_block)
        reservation_affinity: dict[str, Any] | None = {
            "consume_reservation_type": "SPECIFIC_RESERVATION",
            "key": "compute.googleapis.com/reservation-name",
            "values": [path],
        }
    elif capacity is CapacityType.ON_DEMAND:
        reservation_affinity = None
    else:
        reservation_affinity = {"consume_reservation_type": "NO_RESERVATION"}

    booking = None
    if spec.booking is not None:
        problem = booking_problem(machine, max_nodes)
        require(problem is None, "capacity.booking", spec.booking.days, problem or "")
        require(
            spec.autoscaling is not None and spec.autoscaling.min_nodes == 0,
            "autoscaling",
            spec.autoscaling,
            "a booked pool scales from zero: its nodes can exist only from the booking's start",
        )
        booking = _booking(spec, spec.booking, max_nodes, machine)

    queued = capacity is CapacityType.QUEUED_PROVISIONING
    autoscaling = spec.autoscaling
    return NodePoolPlan(
        region=region,
        node_count=spec.node_count,
        initial_node_count=autoscaling.min_nodes if autoscaling else None,
        autoscaling=(
            {
                "total_min_node_count": autoscaling.min_nodes,
                "total_max_node_count": autoscaling.max_nodes,
                "location_policy": "ANY",
            }
            if autoscaling
            else None
        ),
        compact=spec.compact,
        placement_policy=spec.placement_policy,
        workload_policy=_workload_policy(spec, machine),
        workload_policy_name=scoped_name(cluster_name, spec.name, "placement"),
        queued_provisioning=queued,
        auto_repair=spec.auto_repair if spec.auto_repair is not None else not dws,
        # A3 capacity is scarce: replace nodes in place, never ask for a surge node. GKE upgrades
        # flex-start and queued pools with its SHORT_LIVED strategy, which the provider's schema
        # cannot express (SURGE or BLUE_GREEN only): setting one would diff on every preview
        # (crossplane-contrib/provider-upjet-gcp#1028), so those pools leave it to GKE.
        upgrade_settings=None if dws else {"strategy": "SURGE", "max_surge": 0, "max_unavailable": 1},
        # GKE adds the cloud.google.com/gke-queued taint to queued pools itself; keys under
        # cloud.google.com/ are GKE's (facts.gke.RESERVED_NODE_KEY_PREFIXES).
        taints=(GPU_TAINT.for_node_pool(),),
        boot_disk_type=boot_disk_type,
        spot=capacity is CapacityType.SPOT,
        # Queued provisioning runs on flex-start VMs too (GKE: --flex-start --enable-queued-provisioning).
        flex_start=dws,
        max_run_duration=f"{spec.max_run_duration_seconds}s" if spec.max_run_duration_seconds else None,
        reservation_affinity=reservation_affinity,
        booking=booking,
    )


def _booking(spec: NodePoolSpec, booking: Booking, nodes: int, machine: MachineType) -> dict[str, Any]:
    """The future reservation of a booked pool: calendar mode, submitted (or a draft), its
    reservation named so the pool's affinity can name it before it exists, consumed by name only,
    densely deployed, and deleted with its VMs at its end (auto-delete is required in calendar
    mode). `pulumi destroy` abandons it: a submitted request is mostly not cancellable
    (facts.gke.BOOKING_*), and deleting it would fail the destroy."""
    return {
        "name": spec.reservation,
        "zone": spec.zone,
        "reservation_name": spec.reservation,
        "reservation_mode": "CALENDAR",
        "planning_status": "DRAFT" if booking.draft else "SUBMITTED",
        "time_window": {"start_time": rfc3339(booking.start), "end_time": rfc3339(booking.end)},
        "specific_sku_properties": {
            "instance_properties": {"machine_type": machine.name},
            # The API's int64 travels as a string (pulumi-gcp FutureReservationSpecificSkuPropertiesArgs).
            "total_count": str(nodes),
        },
        "auto_delete_auto_created_reservations": True,
        "specific_reservation_required": True,
        "deployment_type": "DENSE",
        "deletion_policy": "ABANDON",
    }


def _workload_policy(spec: NodePoolSpec, machine: MachineType) -> dict[str, str] | None:
    """The HIGH_THROUGHPUT workload policy to create for the pool's compact placement, or None:
    a machine placed by its accelerator topology gets one of that topology (GKE's A4X guide:
    `--type=HIGH_THROUGHPUT --accelerator-topology=1x72`; cluster-toolkit examples/gke-a4x), and
    flex-start takes compact placement only through one."""
    if not spec.compact or spec.placement_policy is not None:
        return None
    if machine.accelerator_topology is not None:
        return {"type": "HIGH_THROUGHPUT", "accelerator_topology": machine.accelerator_topology}
    if spec.capacity_type is CapacityType.FLEX_START:
        return {"type": "HIGH_THROUGHPUT", "max_topology_distance": "CLUSTER"}
    return None


def node_pool_advice(spec: NodePoolSpec) -> list[str]:
    """What is probably wrong but may be right: a zone the catalog does not list for the machine,
    a reservation name left as the example's placeholder."""
    machine = machine_type(spec.machine_type)
    advice = []
    if spec.zone not in machine.zones:
        advice.append(
            f"the catalog cannot confirm {machine.name} capacity in {spec.zone} (known zones: "
            f"{', '.join(sorted(machine.zones))}); check with "
            f"`gcloud compute machine-types list --filter=name={machine.name} --format='value(zone)'`"
        )
    domain, nodes = machine.nvlink_domain_nodes, spec.facts.max_nodes
    if machine.accelerator_topology is not None and nodes < domain:
        advice.append(
            f"the pool takes a whole {machine.accelerator_topology} NVLink domain of {domain} nodes and uses "
            f"{nodes}: the other {domain - nodes} stay idle, and no other pool can use them until this one grows"
        )
    for key, value in (("reservation", spec.reservation), ("reservationBlock", spec.reservation_block)):
        if value is not None and is_placeholder(value):
            advice.append(f"capacity.{key} {value!r} is the example's placeholder: set your own")
    return advice
