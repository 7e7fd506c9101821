"""`StackConfig`: everything a stack file may set under `nemo-gke:`, and the rules between layers."""

from __future__ import annotations

import ipaddress
from enum import StrEnum

from pydantic import Field, model_validator

from config.base import Model, check_name
from config.bootstrap import BootstrapConfig
from config.cluster import ClusterConfig, GpuPoolConfig, NetworkConfig, SystemPoolConfig
from config.existing import ExistingClusterConfig
from config.platform import (
    GpuDirectConfig,
    KueueConfig,
    MonitoringConfig,
    MultiKueueConfig,
    NvSentinelConfig,
    ResiliencyConfig,
    StorageConfig,
    TensorBoardConfig,
)
from config.teams import TeamConfig
from config.training import TrainingConfig
from facts import resiliency
from facts.errors import RuleError
from facts.gcp import (
    GKE_DEFAULT_MAX_PODS_PER_NODE,
    GPU_SUBNETS,
    MAX_LABELS,
    SUBNET_RESERVED_ADDRESSES,
    gpu_subnet_prefix,
    is_region,
    label_key_problem,
    label_value_problem,
    pod_range_per_node,
    project_id_problem,
    region_of_zone,
    usable_addresses,
)
from facts.kubernetes import RESERVED_NAMESPACES, SYSTEM_POOL
from facts.kueue import MAX_FLAVORS_PER_GROUP
from facts.machines import GpuDirect, MachineType, nic_layout_groups
from facts.project import PROGRAM_LABELS, PROJECT, qualified_stack_name, stack_reference_problem

# One ClusterQueue and namespace each: a bound well above any platform's research groups, so a stack
# file with thousands of entries is refused at once instead of planned.
MAX_TEAMS = 64


class Layer(StrEnum):
    BOOTSTRAP = "bootstrap"
    CLUSTER = "cluster"
    PLATFORM = "platform"
    TRAINING = "training"


# The environment layers in the order they build on each other.
ENVIRONMENT_LAYERS = (Layer.CLUSTER, Layer.PLATFORM, Layer.TRAINING)

# The layers that read each top-level key (keys read by every stack are absent): a stack that sets a
# key none of its layers reads is refused. Project, region, zone, production and the namespace are
# also what a later layer's stack reads from its upstream; it may repeat them, checked equal.
_KEY_READERS: dict[str, tuple[Layer, ...]] = {
    "bootstrap": (Layer.BOOTSTRAP,),
    "network": (Layer.CLUSTER,),
    "cluster": (Layer.CLUSTER,),
    "systemPool": (Layer.CLUSTER,),
    "gpuPools": (Layer.CLUSTER,),
    "imageMirror": (Layer.CLUSTER,),
    "labels": (Layer.BOOTSTRAP, Layer.CLUSTER, Layer.PLATFORM),
    "storage": (Layer.PLATFORM,),
    "kueue": (Layer.PLATFORM,),
    "tensorboard": (Layer.PLATFORM,),
    "gpudirect": (Layer.PLATFORM,),
    "monitoring": (Layer.PLATFORM,),
    "existingCluster": (Layer.PLATFORM,),
    "teams": (Layer.PLATFORM,),
    "multiKueue": (Layer.PLATFORM,),
    "nvsentinel": (Layer.PLATFORM,),
    "resiliency": (Layer.CLUSTER, Layer.PLATFORM),
    "training": (Layer.TRAINING,),
}

# Keys that configure Google Cloud resources or GKE: an existingCluster stack refuses them.
_GKE_ONLY_KEYS = frozenset(
    {"project", "region", "zone", "production", "labels", "storage", "gpudirect", "monitoring", "resiliency"}
)
# Keys of what training pods use: a MultiKueue manager, whose workers run the pods, refuses them.
_WORKER_KEYS = frozenset({"storage", "gpudirect", "tensorboard", "resiliency", "monitoring", "nvsentinel"})
_INSTEAD = {
    "storage": ": its claims come from existingCluster.storageClass and existingCluster.claims",
    "resiliency": ": the resiliency supervisor is GKE's",
    "monitoring": ": the dashboard and alerts are Cloud Monitoring's",
}


class StackConfig(Model):
    """Everything a stack file may set under `nemo-gke:`."""

    project: str | None = Field(
        None,
        description="GCP project ID: required where the stack creates the bootstrap or the cluster layer; a later "
        "layer's stack takes its upstream's; an existingCluster stack has none.",
    )
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
    image_mirror: bool = Field(
        False,
        description="Artifact Registry remote repositories of nvcr.io and Docker Hub in the cluster's region: "
        "every pod of the stack pulls those registries' images through them, and GPU pools stream them "
        "(docs/fast-first-step.md). Off by default so that upgrading the program never changes a deployed "
        "stack's pods and pools; the examples turn it on.",
    )
    gpu_pools: tuple[GpuPoolConfig, ...] = Field(
        (GpuPoolConfig(name="a3-highgpu", machine_type="a3-highgpu-8g", node_count=2),),
        # One Kueue flavor each, in one resource group of the ClusterQueue.
        max_length=MAX_FLAVORS_PER_GROUP,
        description="GPU node pools (default: the walkthrough's 2 × a3-highgpu-8g).",
    )
    namespace: str = Field("nemo", description="Namespace of the training runs, their volumes and their LocalQueue.")
    storage: StorageConfig = Field(default_factory=StorageConfig, description="Shared file system and buckets.")
    kueue: KueueConfig = Field(default_factory=KueueConfig, description="Kueue queues and admission.")
    tensorboard: TensorBoardConfig = Field(default_factory=TensorBoardConfig, description="TensorBoard.")
    gpudirect: GpuDirectConfig = Field(default_factory=GpuDirectConfig, description="GPUDirect add-ons.")
    monitoring: MonitoringConfig = Field(
        default_factory=MonitoringConfig, description="GPU dashboard and alerts (platform layer)."
    )
    existing_cluster: ExistingClusterConfig | None = Field(
        None,
        description="Put the platform and the runs on an existing cluster instead of creating one: no cluster "
        "layer, no Google Cloud resource.",
    )
    resiliency: ResiliencyConfig = Field(
        default_factory=ResiliencyConfig, description="The resiliency supervisor (cluster and platform layers)."
    )
    teams: tuple[TeamConfig, ...] = Field(
        (),
        max_length=MAX_TEAMS,
        description="Teams sharing the GPU pools (docs/teams.md): each gets a namespace, a ClusterQueue in the "
        "kueue.cohort with its guaranteed share, and its own claims; runs then name their team. Unset: one queue "
        "in `namespace` for everyone.",
    )
    multi_kueue: MultiKueueConfig = Field(
        default_factory=MultiKueueConfig,
        description="MultiKueue (docs/regions.md): this cluster as a worker of a manager's Kueue, or as the manager.",
    )
    nvsentinel: NvSentinelConfig = Field(
        default_factory=NvSentinelConfig,
        description="What the platform asks of the cluster's NVIDIA NVSentinel (platform layer; docs/recovery.md).",
    )
    training: TrainingConfig = Field(default_factory=TrainingConfig, description="Runs and data preparation.")

    @property
    def gcp_project(self) -> str:
        if self.project is None:
            raise ValueError("project is unset: StackConfig requires it where a layer reads it")
        return self.project

    @property
    def given(self) -> frozenset[str]:
        """The top-level keys the stack file sets (as written, camelCase)."""
        return frozenset(type(self).model_fields[name].alias or name for name in self.model_fields_set)

    @property
    def cluster_name(self) -> str:
        if self.cluster.name is None:
            raise ValueError("cluster.name is unset: read the config with config.loader.parse_stack_config")
        return self.cluster.name

    @property
    def upstream_stack_name(self) -> str | None:
        return None if self.upstream_stack is None else qualified_stack_name(self.upstream_stack)

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
        self._check_layers()
        self._check_keys_read()
        if self.deploys(Layer.BOOTSTRAP) or self.deploys(Layer.CLUSTER):
            self._check_location()
        for key, value in self.labels.items():
            problem = label_key_problem(key) or label_value_problem(value)
            if key in PROGRAM_LABELS:
                problem = "is a label the program sets on every resource itself"
            if problem:
                raise RuleError(f"labels.{key}", value, problem)
        if len(self.labels) > MAX_LABELS - 2:
            raise RuleError(
                "labels",
                len(self.labels),
                f"a Google Cloud resource holds {MAX_LABELS} labels, 2 of them the program's",
            )
        self._check_pools()
        self._check_resiliency()
        check_name("namespace", self.namespace, 63)
        if self.namespace in RESERVED_NAMESPACES:
            raise RuleError(
                "namespace", self.namespace, "is not a namespace this stack can own; use your own, e.g. nemo"
            )
        self._check_teams()
        self._check_manager()
        return self

    def _check_manager(self) -> None:
        """A MultiKueue manager dispatches runs and runs none: its workers hold the GPU pools, the
        storage and everything a training pod needs; a worker needs GPU pools."""
        existing = self.existing_cluster
        if not self.multi_kueue.manager:
            if existing is not None and not existing.gpu_pools:
                raise RuleError("existingCluster.gpuPools", [], "must name at least one GPU pool")
            return
        why = "a MultiKueue manager (multiKueue.workers) runs no training pod"
        if self.deploys(Layer.CLUSTER) and self.gpu_pools:
            names = [p.name for p in self.gpu_pools]
            raise RuleError("gpuPools", names, f"{why}: set gpuPools: [] (the default is not empty); workers hold them")
        if existing is not None:
            if existing.gpu_pools:
                raise RuleError("existingCluster.gpuPools", [p.name for p in existing.gpu_pools], f"{why}: leave it []")
            for key, used in (("storageClass", existing.storage_class), ("claims", existing.claims.given or None)):
                if used is not None:
                    raise RuleError(f"existingCluster.{key}", used, f"{why}: storage belongs in the worker stacks")
        for key in sorted(self.given & _WORKER_KEYS):
            raise RuleError(key, None, f"{why}: set it in the worker stacks")
        for field in ("wait_for_pods_ready_timeout_seconds", "requeue_limit"):
            if field in self.kueue.model_fields_set:
                key = type(self.kueue).model_fields[field].alias or field
                raise RuleError(f"kueue.{key}", getattr(self.kueue, field), f"{why}: its workers wait for their pods")

    def _check_teams(self) -> None:
        """Each team owns its name and namespace; on an existing cluster its claims come from the
        StorageClass, since claims the cluster has live in one namespace only."""
        for key in ("name", "namespace_name"):
            values = [getattr(team, key) for team in self.teams]
            for i, value in enumerate(values):
                written = "name" if key == "name" else "namespace"
                if values.index(value) != i:
                    raise RuleError(
                        f"teams[{i}].{written}",
                        value,
                        f"is also teams[{values.index(value)}]'s; give each team its own",
                    )
        for i, team in enumerate(self.teams):
            ns = team.namespace_name
            if ns == self.namespace or ns in RESERVED_NAMESPACES:
                why = "the platform's namespace" if ns == self.namespace else "not a namespace this stack can own"
                raise RuleError(f"teams[{i}].namespace", ns, f"is {why}; give the team its own")
        if not self.teams:
            for field in ("cohort", "overcommit"):
                if field in self.kueue.model_fields_set:
                    key = type(self.kueue).model_fields[field].alias or field
                    why = "shapes the teams' queues, and the stack sets no teams: set teams, or leave it unset"
                    raise RuleError(f"kueue.{key}", getattr(self.kueue, field), why)
        existing = self.existing_cluster
        if self.teams and existing is not None and existing.claims.given:
            raise RuleError(
                "existingCluster.claims",
                sorted(existing.claims.given),
                "are claims of one namespace, and each team needs its own: with teams, leave it unset and set "
                "existingCluster.storageClass",
            )

    def _check_keys_read(self) -> None:
        """Every key the stack sets is read by a layer it deploys: one no layer reads is refused by
        name, never ignored."""
        given, layers = self.given, list(self.layers)
        for key in sorted(given):
            readers = _KEY_READERS.get(key)
            if readers is not None and not any(self.deploys(layer) for layer in readers):
                names = " or ".join(layer.value for layer in readers)
                raise RuleError(
                    key,
                    None,
                    f"is read by the {names} layer, which this stack does not deploy (layers: "
                    f"{', '.join(layer.value for layer in layers)})",
                )
        if self.existing_cluster is not None:
            for key in sorted(given & _GKE_ONLY_KEYS):
                why = "applies to Google Cloud resources, and an existingCluster stack creates none"
                raise RuleError(key, None, why + _INSTEAD.get(key, ""))
        elif self.project is None and (self.deploys(Layer.BOOTSTRAP) or self.deploys(Layer.CLUSTER)):
            raise RuleError(
                "project", None, f"is required: set it with `pulumi config set {PROJECT}:project <your project ID>`"
            )

    def _check_location(self) -> None:
        problem = project_id_problem(self.project) if self.project is not None else None
        if problem:
            raise RuleError(
                "project", self.project, f"{problem}; set it with `pulumi config set {PROJECT}:project <id>`"
            )
        region_of_region = region_of_zone(self.region)
        if region_of_region:
            raise RuleError("region", self.region, f"is a zone; its region is {region_of_region}")
        if not is_region(self.region):
            raise RuleError("region", self.region, "must be a GCP region such as us-central1")
        if is_region(self.zone):
            raise RuleError("zone", self.zone, f"is a region, not a zone; use a zone of it such as {self.zone}-a")
        if region_of_zone(self.zone) != self.region:
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
        if self.existing_cluster is not None:
            if Layer.CLUSTER in layers:
                raise RuleError("layers", [x.value for x in layers], "an existingCluster stack starts at platform")
            if self.upstream_stack is not None:
                raise RuleError("upstreamStack", self.upstream_stack, "must be unset with existingCluster")
            for key, used in (
                ("resiliency.enabled", self.resiliency.enabled),
                ("tensorboard.vertexAi", self.tensorboard.vertex_ai),
                ("monitoring.alerts.enabled", self.monitoring.alerts.enabled),
            ):
                if used:
                    raise RuleError(key, True, "is a GKE or Google Cloud feature: off with existingCluster")
            return
        if layers[0] is Layer.CLUSTER and not self.kueue.install and Layer.PLATFORM in layers:
            raise RuleError(
                "kueue.install",
                False,
                "this stack creates the cluster, so nothing else could have installed Kueue and JobSet on it: leave "
                "it true",
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
        if self.upstream_stack is not None:
            problem = stack_reference_problem(self.upstream_stack)
            if problem:
                raise RuleError("upstreamStack", self.upstream_stack, problem)

    def _check_pools(self) -> None:
        if not self.deploys(Layer.CLUSTER):
            return
        if not self.gpu_pools and not self.multi_kueue.manager:
            raise RuleError("gpuPools", [], "must define at least one GPU pool")
        names = [p.name for p in self.gpu_pools]
        pod_addresses = 0
        for i, pool in enumerate(self.gpu_pools):
            if names.index(pool.name) != i:
                raise RuleError(f"gpuPools[{i}].name", pool.name, "must be unique")
            if pool.name == SYSTEM_POOL:
                why = "is the name of the cluster's CPU pool for the controllers: GKE takes one pool per name"
                raise RuleError(f"gpuPools[{i}].name", pool.name, why)
            zone = self.pool_zone(pool)
            # Name the key the user wrote: the pool's own zone, or the stack's.
            zone_key = f"gpuPools[{i}].zone" if pool.zone else "zone"
            if region_of_zone(zone) != self.region:
                raise RuleError(zone_key, zone, f"must be a zone of region {self.region}")
            if pool.machine.gpudirect is GpuDirect.RDMA and zone != self.zone:
                raise RuleError(
                    f"gpuPools[{i}].zone",
                    zone,
                    f"RDMA networks are zonal: {pool.machine_type} pools must be in the stack zone {self.zone}",
                )
            if zone not in pool.machine.zones and not pool.allow_unlisted_zone:
                raise RuleError(
                    zone_key,
                    zone,
                    f"offers no {pool.machine_type} as far as the catalog knows (it lists "
                    f"{', '.join(sorted(pool.machine.zones))}); if Google has added it, set "
                    f"gpuPools[{i}].allowUnlistedZone: true",
                )
            pod_addresses += pool.max_nodes * pod_range_per_node(pool.max_pods_per_node)
        # All GPU machines of one stack share the GPU networks, so their NIC layouts must agree.
        layouts = {m.nic_layout for m in self.gpu_machines if m.is_multi_nic}
        if len(layouts) > 1:
            raise RuleError(
                "gpuPools",
                [p.machine_type for p in self.gpu_pools],
                "multi-NIC machine types with different GPU network layouts cannot share a cluster; "
                f"use machines of one layout: {nic_layout_groups()}",
            )
        self._check_subnets()
        pod_addresses += self._cpu_nodes() * pod_range_per_node(GKE_DEFAULT_MAX_PODS_PER_NODE)
        pod_range = ipaddress.IPv4Network(self.network.pod_cidr).num_addresses
        if pod_addresses > pod_range:
            raise RuleError(
                "network.podCidr",
                self.network.pod_cidr,
                f"holds {pod_range} addresses but the pools need {pod_addresses} (GKE gives each node the "
                "power of two at or above 2 × its maxPodsPerNode, CPU nodes 110 pods); use a larger range "
                "or fewer pods per node",
            )

    def _check_resiliency(self) -> None:
        r = self.resiliency
        if not r.enabled or not self.deploys(Layer.CLUSTER):
            return
        if any(pool.name == resiliency.SUPERVISOR_POOL for pool in self.gpu_pools):
            raise RuleError(
                "resiliency.enabled", True, f"names its pool {resiliency.SUPERVISOR_POOL}, as a GPU pool is"
            )
        if r.pool.zone is not None and region_of_zone(r.pool.zone) != self.region:
            raise RuleError("resiliency.pool.zone", r.pool.zone, f"must be a zone of region {self.region}")
        if r.topology_aware:
            for i, pool in enumerate(self.gpu_pools):
                if not pool.compact and pool.capacity.reservation_block is None:
                    raise RuleError(
                        "resiliency.topologyAware",
                        True,
                        f"needs compact placement (host_daemon.py --enable_topology_aware_scheduling), and "
                        f"gpuPools[{i}] ({pool.name}) has neither compact placement nor a reservation block; "
                        "set it false",
                    )

    def _cpu_nodes(self) -> int:
        """The system pool's nodes in every zone of the cluster, one surge node for its upgrades,
        and the resiliency supervisor's pool where the stack has one."""
        supervisor = self.resiliency.pool.node_count if self.resiliency.enabled else 0
        return self.system_pool.node_count * self.cluster.zones + 1 + supervisor

    def _check_subnets(self) -> None:
        """Every node gets an address in the node subnet, and one in each GPU subnet per GPU NIC;
        GCP keeps four addresses of every subnet."""
        nodes = self._cpu_nodes() + sum(p.max_nodes for p in self.gpu_pools)
        usable = usable_addresses(self.network.node_cidr)
        if nodes > usable:
            raise RuleError(
                "network.nodeCidr",
                self.network.node_cidr,
                f"gives {usable} node addresses ({SUBNET_RESERVED_ADDRESSES} of every subnet are GCP's) but the "
                f"pools can hold {nodes} nodes; use a larger range",
            )
        gpu_nodes = sum(p.max_nodes for p in self.gpu_pools if p.machine.is_multi_nic)
        prefix = gpu_subnet_prefix(self.network.gpu_cidr)
        per_subnet = 2 ** (32 - prefix) - SUBNET_RESERVED_ADDRESSES
        if gpu_nodes > per_subnet:
            raise RuleError(
                "network.gpuCidr",
                self.network.gpu_cidr,
                f"is cut into {GPU_SUBNETS} /{prefix} subnets of {per_subnet} addresses, but the GPU pools can "
                f"hold {gpu_nodes} nodes, each with an address in every GPU subnet; use a larger range",
            )
