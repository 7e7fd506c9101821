"""The platform layer's keys: `storage`, `kueue`, `tensorboard`, `gpudirect` and `resiliency`."""

from __future__ import annotations

import re

from pydantic import Field, model_validator

from config.base import Model, check_name, parse_cidr
from facts import nvsentinel, resiliency
from facts.errors import RuleError
from facts.gcp import FilestoreTier, bucket_name_problem, filestore_capacity_problem, general_machine_problem
from facts.kueue import (
    DEFAULT_WORKER_LOST_TIMEOUT_SECONDS,
    MAX_MULTIKUEUE_CLUSTERS,
    MULTIKUEUE_DISPATCH_ROUND_SECONDS,
    Dispatch,
    WithinClusterQueue,
)
from facts.project import qualified_stack_name, stack_reference_problem

_SHARE_NAME = re.compile(r"^[a-z][a-z0-9_]{0,15}$")


class FilestoreConfig(Model):
    """The shared file system for logs and checkpoints, mounted at /nfs in every pod."""

    tier: FilestoreTier = Field(FilestoreTier.BASIC_HDD, description="Filestore service tier.")
    capacity_gib: int = Field(1024, description="Capacity; allowed range and step depend on the tier.")
    share_name: str = Field("nemo", description="Name of the NFS share.")

    @model_validator(mode="after")
    def _check(self) -> FilestoreConfig:
        problem = filestore_capacity_problem(self.tier, self.capacity_gib)
        if problem:
            raise RuleError("capacityGib", self.capacity_gib, problem)
        if not _SHARE_NAME.match(self.share_name):
            raise RuleError("shareName", self.share_name, "must be 1-16 of a-z, 0-9 and '_', starting with a letter")
        return self


class BucketConfig(Model):
    name: str | None = Field(None, description="Bucket name. Default: `<project>-<cluster>-<role>`.")
    create: bool = Field(True, description="Create the bucket; false uses an existing one.")

    @model_validator(mode="after")
    def _check(self) -> BucketConfig:
        if self.name is not None:
            problem = bucket_name_problem(self.name)
            if problem:
                raise RuleError("name", self.name, problem)
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

    @model_validator(mode="after")
    def _check(self) -> StorageConfig:
        # Every training pod mounts both: two volumes of one CSI volume handle in one pod never mount
        # (kubernetes/kubernetes#91556; GoogleCloudPlatform/gcs-fuse-csi-driver#48).
        name = self.data_bucket.name
        if name is not None and name == self.checkpoint_bucket.name:
            raise RuleError(
                "checkpointBucket.name", name, "is also dataBucket.name: a pod cannot mount one bucket twice; use two"
            )
        return self


class KueueConfig(Model):
    """Queueing and all-or-nothing admission."""

    install: bool = Field(
        True,
        description="Install the pinned Kueue and JobSet releases. false: both are on the cluster already "
        "(serving kueue.x-k8s.io/v1beta2 and jobset.x-k8s.io/v1alpha2) and the program creates only its queues; "
        "an existingCluster stack reads the cluster's CRDs at every preview and update, before registering "
        "anything, and stops where they cannot take its objects. Not with a cluster this stack creates. "
        "true on an existingCluster stack: stops where the cluster runs a Kueue or JobSet this stack did not "
        "install (docs/existing-cluster.md).",
    )
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
    preemption: WithinClusterQueue = Field(
        WithinClusterQueue.LOWER_PRIORITY,
        description="Whether a higher-priority run may preempt a lower one in the queue.",
    )
    cohort: str = Field("nemo", description="With teams: the Kueue cohort their ClusterQueues share.")
    overcommit: bool = Field(
        False,
        description="With teams: allow their guaranteed shares of a pool to add up to more than its nodes (then "
        "not every team can have its share at once).",
    )

    @model_validator(mode="after")
    def _check(self) -> KueueConfig:
        check_name("clusterQueue", self.cluster_queue, 63)
        check_name("localQueue", self.local_queue, 63)
        check_name("cohort", self.cohort, 63)
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


class SupervisorPoolConfig(Model):
    """The CPU pool the supervisor's Deployments run on (the recipe: 2 × e2-standard-8)."""

    machine_type: str = Field(resiliency.SUPERVISOR_MACHINE_TYPE, description="General-purpose machine type.")
    node_count: int = Field(resiliency.SUPERVISOR_NODES, ge=1, le=10, description="Nodes.")
    zone: str | None = Field(None, description="Zone. Default: the zone of the first GPU pool.")

    @model_validator(mode="after")
    def _check(self) -> SupervisorPoolConfig:
        problem = general_machine_problem(self.machine_type)
        if problem:
            raise RuleError("machineType", self.machine_type, problem)
        return self


class ResiliencyConfig(Model):
    """The Google Cloud Resiliency supervisor of the A3 Ultra resiliency recipe: it watches the
    GPU nodes (ECC and XID watchdogs) and the training ranks' heartbeats, and replaces failed
    nodes or restarts the workload. Runs use it with `resiliency.supervisor: true`."""

    enabled: bool = Field(False, description="Deploy the supervisor and its CPU pool.")
    pool: SupervisorPoolConfig = Field(default_factory=SupervisorPoolConfig, description="The supervisor's CPU pool.")
    heartbeat_polling_period_seconds: int = Field(
        resiliency.HEARTBEAT_POLLING_PERIOD_SECONDS, ge=1, le=600, description="How often ranks' heartbeats are read."
    )
    heartbeat_timeout_seconds: int = Field(
        resiliency.HEARTBEAT_TIMEOUT_SECONDS, ge=1, le=3600, description="A rank silent this long has failed."
    )
    watchdogs: tuple[resiliency.Watchdog, ...] = Field(
        resiliency.WATCHDOGS, description="GPU health checks of the host daemon on every GPU node."
    )
    watchdog_interval_seconds: int = Field(
        resiliency.WATCHDOG_INTERVAL_SECONDS, ge=1, le=3600, description="Seconds between watchdog checks."
    )
    watchdog_notification_cooldown_seconds: int = Field(
        resiliency.WATCHDOG_NOTIFICATION_COOLDOWN_SECONDS,
        ge=1,
        le=3600,
        description="Seconds between two reports of the same watchdog finding.",
    )
    topology_aware: bool = Field(
        True,
        description="Replace nodes with topology in mind (host daemon --enable_topology_aware_scheduling); needs "
        "GPU pools with compact placement or a reservation block.",
    )

    @model_validator(mode="after")
    def _check(self) -> ResiliencyConfig:
        if len(set(self.watchdogs)) != len(self.watchdogs):
            raise RuleError("watchdogs", list(self.watchdogs), "must not repeat a watchdog")
        if self.heartbeat_timeout_seconds <= self.heartbeat_polling_period_seconds:
            raise RuleError(
                "heartbeatTimeoutSeconds",
                self.heartbeat_timeout_seconds,
                f"must be longer than heartbeatPollingPeriodSeconds ({self.heartbeat_polling_period_seconds})",
            )
        return self


_CHANNEL = re.compile(r"^projects/[a-z][-a-z0-9]{4,28}[a-z0-9]/notificationChannels/[0-9]+$")
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")


class AlertsConfig(Model):
    enabled: bool = Field(
        False,
        description="Alert on GPU XID errors, on GPU nodes of fixed-size pools missing and on runs slower than their "
        "plan.",
    )
    notification_channels: tuple[str, ...] = Field(
        (), description="Existing channels, as projects/<project>/notificationChannels/<id>."
    )
    email: str | None = Field(None, description="Also create an email channel to this address.")
    step_time_margin: float = Field(
        0.2,
        gt=0,
        le=5,
        description="Alert when a run's mean step time stays more than this fraction above the step time its plan "
        "expects (NVIDIA's published step at its layout, else the layout planner's prediction) for 15 minutes: "
        "0.2 is 20 % slower. The dashboard draws the same line.",
    )

    @model_validator(mode="after")
    def _check(self) -> AlertsConfig:
        for i, channel in enumerate(self.notification_channels):
            if not _CHANNEL.match(channel):
                raise RuleError(
                    f"notificationChannels[{i}]", channel, "must be projects/<project>/notificationChannels/<id>"
                )
        if self.email is not None and not _EMAIL.match(self.email):
            raise RuleError("email", self.email, "must be an email address")
        if self.enabled and not self.notification_channels and self.email is None:
            raise RuleError("enabled", True, "needs somewhere to send alerts: notificationChannels or email")
        return self


class MonitoringConfig(Model):
    dashboard: bool = Field(
        True,
        description="A Cloud Monitoring dashboard of the GPUs (DCGM metrics), the training restarts and the runs' "
        "step times against their plans.",
    )
    alerts: AlertsConfig = Field(default_factory=AlertsConfig, description="Alert policies, off by default.")


class PreflightConfig(Model):
    enabled: bool = Field(
        False,
        description="Run NVSentinel's preflight checks at every start of a training pod: the training namespaces "
        f"get the label {nvsentinel.PREFLIGHT_NAMESPACE_LABEL}={nvsentinel.PREFLIGHT_ENABLED}, on which the "
        "cluster's NVSentinel (installed with its preflight) injects the checks as init containers; a failed check "
        "cordons the node and the run restarts without it (docs/recovery.md).",
    )
    checks: tuple[str, ...] = Field(
        nvsentinel.PREFLIGHT_CHECKS,
        description="The checks every GPU pod of the platform names (NVSentinel's "
        f"{nvsentinel.PREFLIGHT_CHECKS_ANNOTATION} annotation), from {', '.join(nvsentinel.PREFLIGHT_CHECKS)}: "
        "DCGM diagnostics of the pod's GPUs (about 2 minutes at NVSentinel's default level) and an all-reduce "
        "across the node's GPUs, which pods of GKE's GPUDirect machines leave out (docs/recovery.md).",
    )

    @model_validator(mode="after")
    def _check(self) -> PreflightConfig:
        for i, check in enumerate(self.checks):
            if check == nvsentinel.PREFLIGHT_NCCL_ALLREDUCE:
                why = (
                    "finds its gang through Kubernetes' PodGroup API or a scheduler's PodGroup, and NVSentinel "
                    "documents none for Kueue's JobSets: a run's fabricCheck tests the network across its nodes instead"
                )
                raise RuleError(f"checks[{i}]", check, why)
            if check not in nvsentinel.PREFLIGHT_CHECKS:
                raise RuleError(f"checks[{i}]", check, f"is not one of {', '.join(nvsentinel.PREFLIGHT_CHECKS)}")
            if self.checks.index(check) != i:
                raise RuleError(f"checks[{i}]", check, f"is also checks[{self.checks.index(check)}]")
        if self.enabled and nvsentinel.PREFLIGHT_DCGM_DIAG not in self.checks:
            why = (
                f"must include {nvsentinel.PREFLIGHT_DCGM_DIAG}: pods of GKE's GPUDirect machines leave "
                f"{nvsentinel.PREFLIGHT_NCCL_LOOPBACK} out, and a pod left with no check would get every check "
                "NVSentinel's chart enables on releases that read an empty list as none given; to run none, set "
                "enabled to false"
            )
            raise RuleError("checks", list(self.checks), why)
        return self


class NvSentinelConfig(Model):
    """What the platform asks of the cluster's NVIDIA NVSentinel, which it does not install
    (docs/recovery.md)."""

    preflight: PreflightConfig = Field(
        default_factory=PreflightConfig, description="NVSentinel's preflight checks on every start of a run's pods."
    )


class MultiKueueConfig(Model):
    """Kueue's MultiKueue (docs/regions.md): this cluster as a worker a manager cluster's Kueue
    dispatches runs to, or as the manager of such workers. Kueue does not let one cluster be both
    (site/content/en/docs/concepts/multikueue.md, Limitations)."""

    worker: bool = Field(
        False,
        description="Give a MultiKueue manager what it needs here: an account with Kueue's least-privilege worker "
        "role and its token, exported as the secret output `multiKueueKubeconfig`, with the worker's facts in "
        "`multiKueueWorker` (docs/regions.md).",
    )
    workers: tuple[str, ...] = Field(
        (),
        max_length=MAX_MULTIKUEUE_CLUSTERS,
        description="Make this cluster a MultiKueue manager of these worker stacks, each `<org>/<project>/<stack>` "
        "(a stack with `multiKueue.worker: true`): runs submitted here are dispatched to a worker that admits "
        "them. One line adds or removes a worker. A manager has no GPU pools of its own.",
    )
    dispatch: Dispatch = Field(
        Dispatch.ALL_AT_ONCE,
        description="How this manager offers a run to its workers. allAtOnce: to every worker at once, and the "
        "first whose Kueue admits it runs it. inOrder: to one worker at a time in the order of `workers`, adding "
        f"the next when none has admitted it for {MULTIKUEUE_DISPATCH_ROUND_SECONDS // 60} minutes (Kueue's "
        "incremental dispatcher, whose round is fixed): runs prefer the first worker's region (its reservation, "
        "its data) and fall back to the next (docs/regions.md). The last worker may then have a flex-start pool.",
    )
    egress_ranges: tuple[str, ...] = Field(
        (),
        description="Where this manager's Kueue reaches its workers from, as IPv4 CIDRs (its Cloud NAT's "
        "addresses, made static): each must be within a worker's cluster.masterAuthorizedNetworks where that worker "
        "sets any (checked before anything is registered). Unneeded while no worker restricts its control plane.",
    )
    worker_lost_timeout_seconds: int = Field(
        DEFAULT_WORKER_LOST_TIMEOUT_SECONDS,
        ge=10,
        le=7 * 24 * 3600,
        description="How long a run stays on a worker the manager cannot reach before it is dispatched again "
        "(Kueue's multiKueue.workerLostTimeout; default Kueue's 15 minutes).",
    )

    @property
    def manager(self) -> bool:
        return bool(self.workers)

    @model_validator(mode="after")
    def _check(self) -> MultiKueueConfig:
        names = [qualified_stack_name(w) if stack_reference_problem(w) is None else w for w in self.workers]
        for i, worker in enumerate(self.workers):
            problem = stack_reference_problem(worker)
            if problem:
                raise RuleError(f"workers[{i}]", worker, problem)
            if names.index(names[i]) != i:
                raise RuleError(f"workers[{i}]", worker, f"is also workers[{names.index(names[i])}]")
        for i, cidr in enumerate(self.egress_ranges):
            parse_cidr(f"egressRanges[{i}]", cidr)
        if self.egress_ranges and not self.workers:
            raise RuleError("egressRanges", list(self.egress_ranges), "is a manager's: set workers too, or unset it")
        if self.worker and self.workers:
            why = "a MultiKueue manager cannot be a worker too (Kueue's limitation): use one stack for each role"
            raise RuleError("worker", True, why)
        if "dispatch" in self.model_fields_set and not self.workers:
            raise RuleError("dispatch", self.dispatch.value, "is read by a manager only: set workers")
        if "worker_lost_timeout_seconds" in self.model_fields_set and not self.workers:
            raise RuleError(
                "workerLostTimeoutSeconds", self.worker_lost_timeout_seconds, "is read by a manager only: set workers"
            )
        return self
