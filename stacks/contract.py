"""The contract between layers: what the cluster and platform layers export (stack outputs
`cluster` and `platform`) and what a later layer reads back, in this stack or in another one.

The records inside are the planners' own (`GpuPoolExport`, `GpuNetworkPlan`, `Flavor`), so a record
has one shape from the config to the component that uses it. Reading them back from an upstream
stack validates every field, strictly: an upstream stack deployed by another version of this
program is refused with a message instead of being misread.
"""

from __future__ import annotations

from config.base import Model
from facts.kubernetes import node_pool_selector
from facts.kueue import Dispatch, WithinClusterQueue
from facts.registries import RegistryMirror
from planners.multikueue import Worker
from planners.networks import GpuNetworkPlan
from planners.pools import GpuPoolExport
from planners.queues import Flavor
from planners.teams import Team


class ClusterExports(Model):
    """The cluster layer's plain outputs (stack output `cluster`)."""

    project: str
    region: str
    zone: str
    name: str
    # A zone (zonal cluster) or the region (regional cluster).
    location: str
    production: bool
    primary_network: str
    workload_pool: str
    system_pool: str
    gpu_networks: tuple[GpuNetworkPlan, ...]
    gpu_pools: tuple[GpuPoolExport, ...]
    # The resiliency supervisor's CPU pool, when the stack has one.
    supervisor_pool: str | None = None
    # False: an existing cluster (config.existing), reached by kubeconfig, with no Google Cloud
    # resource of this program; its controllers run on the nodes these labels select.
    gke: bool = True
    system_node_labels: dict[str, str] | None = None
    # Google Groups for RBAC is on with this group (config.cluster.rbac_security_group).
    rbac_security_group: str | None = None
    # The cluster's remote repositories (config imageMirror): its pods pull nvcr.io and Docker Hub
    # images through them. None: as the references say.
    image_mirror: RegistryMirror | None = None

    @property
    def system_selector(self) -> dict[str, str]:
        if self.system_node_labels is not None:
            return dict(self.system_node_labels)
        return node_pool_selector(self.system_pool)


class PlatformExports(Model):
    """The platform layer's plain outputs (stack output `platform`)."""

    namespace: str
    # Training runs read data and write checkpoints; data preparation writes data.
    service_account: str
    data_prep_service_account: str
    cluster_queue: str
    local_queue: str
    priority_classes: tuple[str, ...]
    default_priority_class: str
    # One per GPU pool, with the pool's whole capacity as quota; the first is the default pool.
    flavors: tuple[Flavor, ...]
    shared_claim: str
    shared_mount: str
    experiments_dir: str
    data_bucket: str
    data_claim: str
    data_mount: str
    checkpoint_bucket: str
    checkpoint_claim: str
    checkpoint_mount: str
    # Whether the platform runs the resiliency supervisor (runs with resiliency.supervisor need it).
    supervisor: bool = False
    # False: on an existing cluster, whose claims come from a StorageClass or are its own.
    gke: bool = True
    # Pods mount Cloud Storage FUSE claims: on GKE, or an existing cluster's own bucket claims.
    cloud_storage_fuse: bool = True
    # The ClusterQueue's preemption within it (kueue.preemption): whether a fabric check can take
    # the pool from a run.
    preemption: WithinClusterQueue = WithinClusterQueue.LOWER_PRIORITY
    # Teams sharing the pools (planners.teams): each job then names one and goes to its namespace
    # and queue. Empty: one queue in `namespace`.
    teams: tuple[Team, ...] = ()
    # A MultiKueue manager's workers (planners.multikueue): its runs are dispatched to one of them,
    # and run there. Empty: the runs run on this cluster.
    workers: tuple[Worker, ...] = ()
    # How the manager offers a run to `workers` (multiKueue.dispatch).
    dispatch: Dispatch = Dispatch.ALL_AT_ONCE
    # NVSentinel's preflight checks every GPU pod of the platform names (nvsentinel.preflight), in
    # namespaces labelled for them. Empty: none.
    preflight_checks: tuple[str, ...] = ()

    @property
    def flavors_by_pool(self) -> dict[str, Flavor]:
        return {f.pool: f for f in self.flavors}

    @property
    def teams_by_name(self) -> dict[str, Team]:
        return {t.name: t for t in self.teams}


class MultiKueueWorkerExports(Model):
    """What a MultiKueue worker tells its manager (stack output `multiKueueWorker`): where it is, the
    Kueue and JobSet it runs (None: the cluster's own), the namespaces that hold its LocalQueue, its
    flavors and buckets."""

    name: str
    namespaces: tuple[str, ...]
    local_queue: str
    flavors: tuple[str, ...]
    region: str | None = None
    kueue_version: str | None = None
    jobset_version: str | None = None
    data_bucket: str | None = None
    checkpoint_bucket: str | None = None
    # The ranges the worker's control plane admits (cluster.masterAuthorizedNetworks); empty: any
    # address, or not known (a cluster this stack does not create).
    control_plane_ranges: tuple[str, ...] = ()
