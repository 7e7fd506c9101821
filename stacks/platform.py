"""Platform layer: GPUDirect objects and plugins, shared storage, Kueue and JobSet, TensorBoard.

What waits for what (and so the order `pulumi destroy` reverses):
- every Kubernetes object waits for the cluster's Kubernetes provider, which waits for the
  system pool only; nothing here waits for the (slow) GPU pools;
- Filestore waits only for the primary VPC;
- JobSet installs first, then Kueue, then a Job that completes once Kueue's webhook answers,
  and only then the Kueue objects;
- TensorBoard waits for the Filestore claim, the claim for its volume, the volume for Filestore.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.gpudirect import GpuNetworkObjects, GpuNetworkObjectsArgs, NcclPluginInstaller, NcclPluginInstallerArgs
from components.monitoring import GpuMonitoring, GpuMonitoringArgs
from components.multikueue import Manager, ManagerArgs, WorkerAccess, WorkerAccessArgs
from components.nvlink import ComputeDomainDriver, ComputeDomainDriverArgs
from components.resiliency import Supervisor, SupervisorArgs, supervisor_manifests
from components.scheduling import (
    JobSetController,
    JobSetControllerArgs,
    KueueController,
    KueueControllerArgs,
    KueueQueues,
    KueueQueuesArgs,
)
from components.storage import (
    CHECKPOINT_MOUNT_OPTIONS,
    DATA_MOUNT_OPTIONS,
    BucketVolume,
    BucketVolumeArgs,
    SharedFilesystem,
    SharedFilesystemArgs,
    StorageClaims,
    StorageClaimsArgs,
)
from components.teams import TeamBuckets, TeamClaimsOnClass, TeamSpace, TeamSpaceArgs
from components.tensorboard import TensorBoard, TensorBoardArgs
from components.workspace import TrainingWorkspace, TrainingWorkspaceArgs
from config.existing import ExistingClaimsConfig, ExistingClusterConfig
from config.loader import ConfigError
from config.stack import Layer, StackConfig
from facts import versions
from facts.errors import RuleError
from facts.gcp import REGIONAL_FILESTORE_TIERS, default_bucket
from facts.kubernetes import DEFAULT_PRIORITY, FABRIC_CHECK_PRIORITY, PRIORITY_VALUES, node_pool_selector
from facts.kueue import MULTIKUEUE_CHECK
from facts.nvsentinel import (
    PREFLIGHT_ENABLED,
    PREFLIGHT_NAMESPACE_LABEL,
    preflight_namespace_labels,
    preflight_pod_needs,
)
from facts.podsecurity import PodAllowance, needs_of, pod_specs, union
from planners import gpudirect
from planners.monitoring import gpu_alerts, gpu_dashboard, slow_run_alert, step_metrics
from planners.queues import Flavor, plan_flavors
from planners.teams import ShareRequest, TeamRequest, TeamsPlan, plan_teams
from stacks.cluster import ClusterOutputs
from stacks.contract import ClusterExports, MultiKueueWorkerExports, PlatformExports
from stacks.installed import crd_manifest
from stacks.kubeapi import kubeconfig_endpoint
from stacks.multikueue import ManagedWorkers

SHARED_MOUNT = "/nfs"
EXPERIMENTS_DIR = f"{SHARED_MOUNT}/nemo-experiments"
DATA_MOUNT = "/data"
CHECKPOINT_MOUNT = "/checkpoints"
TRAINING_ACCOUNT = "nemo-training"
DATA_PREP_ACCOUNT = "nemo-data-prep"
READ = "roles/storage.objectViewer"
READ_WRITE = "roles/storage.objectUser"


@dataclass(frozen=True)
class PlatformOutputs:
    facts: PlatformExports
    # What a training run must wait for (queue, volumes, identity, GPU network objects); empty
    # when the platform lives in another stack.
    run_dependencies: tuple[pulumi.Resource, ...] = ()


def teams_plan(cfg: StackConfig, flavors: Sequence[Flavor]) -> TeamsPlan | None:
    """The teams' queues (planners.teams), or None where the stack sets no teams."""
    if not cfg.teams:
        return None
    requests = [
        TeamRequest(
            name=team.name,
            namespace=team.namespace_name,
            shares=tuple(ShareRequest(q.pool, q.unit, q.share, q.borrowing_limit, q.lending_limit) for q in team.quota),
            weight=team.weight,
            priorities=tuple(p.value for p in team.priorities),
            groups=team.groups,
        )
        for team in cfg.teams
    ]
    try:
        return plan_teams(
            requests,
            flavors,
            cohort=cfg.kueue.cohort,
            local_queue=cfg.kueue.local_queue,
            overcommit=cfg.kueue.overcommit,
        )
    except RuleError as error:
        raise ConfigError.of([error]) from None


def platform_facts(
    cfg: StackConfig, cluster: ClusterExports, now: datetime, managed: ManagedWorkers | None = None
) -> PlatformExports:
    """The platform's facts; a MultiKueue manager's come from its workers: their flavors, and what
    their runs' pods name (stacks.multikueue)."""
    if managed is not None:
        plan = teams_plan(cfg, managed.plan.flavors)
        return managed.platform.model_copy(
            update={
                "namespace": cfg.namespace,
                "cluster_queue": cfg.kueue.cluster_queue,
                "local_queue": cfg.kueue.local_queue,
                "flavors": managed.plan.flavors,
                "data_bucket": "",
                "checkpoint_bucket": "",
                "preemption": cfg.kueue.preemption,
                "teams": plan.teams if plan else (),
                "workers": managed.plan.workers,
                "dispatch": cfg.multi_kueue.dispatch,
            }
        )
    storage = cfg.storage
    buckets = cluster.gke
    # An existing cluster's own claims, where the config names them.
    claims = ExistingClaimsConfig().names if cluster.gke else _existing(cfg).claims.names
    flavors = plan_flavors(cluster.gpu_pools, now)
    plan = teams_plan(cfg, flavors)
    data_bucket = storage.data_bucket.name or default_bucket(cluster.project, cluster.name, "data")
    checkpoint_bucket = storage.checkpoint_bucket.name or default_bucket(cluster.project, cluster.name, "ckpt")
    return PlatformExports(
        namespace=cfg.namespace,
        service_account=TRAINING_ACCOUNT,
        data_prep_service_account=DATA_PREP_ACCOUNT,
        cluster_queue=cfg.kueue.cluster_queue,
        local_queue=cfg.kueue.local_queue,
        priority_classes=(*(p.value for p in PRIORITY_VALUES), FABRIC_CHECK_PRIORITY),
        default_priority_class=DEFAULT_PRIORITY.value,
        flavors=flavors,
        shared_claim=claims["shared"],
        shared_mount=SHARED_MOUNT,
        experiments_dir=EXPERIMENTS_DIR,
        # On an existing cluster the data and checkpoints live on claims of its StorageClass.
        data_bucket=data_bucket if buckets else "",
        data_claim=claims["data"],
        data_mount=DATA_MOUNT,
        checkpoint_bucket=checkpoint_bucket if buckets else "",
        checkpoint_claim=claims["checkpoints"],
        checkpoint_mount=CHECKPOINT_MOUNT,
        supervisor=cfg.resiliency.enabled,
        gke=cluster.gke,
        cloud_storage_fuse=cluster.gke or _existing(cfg).claims.cloud_storage_fuse,
        preemption=cfg.kueue.preemption,
        teams=plan.teams if plan else (),
        preflight_checks=cfg.nvsentinel.preflight.checks if cfg.nvsentinel.preflight.enabled else (),
    )


def worker_facts(cfg: StackConfig, cluster: ClusterExports, platform: PlatformExports) -> MultiKueueWorkerExports:
    """What a MultiKueue manager checks of a worker before dispatching to it: where it is, the Kueue
    and JobSet it runs (MultiKueue needs the same on both sides), the queues and namespaces a run
    lands in, and where its data and checkpoints live."""
    return MultiKueueWorkerExports(
        name=cluster.name,
        region=cluster.region if cluster.gke else None,
        kueue_version=versions.KUEUE.version if cfg.kueue.install else None,
        jobset_version=versions.JOBSET.version if cfg.kueue.install else None,
        namespaces=tuple(t.namespace for t in platform.teams) or (platform.namespace,),
        local_queue=platform.local_queue,
        flavors=tuple(f.name for f in platform.flavors),
        data_bucket=platform.data_bucket or None,
        checkpoint_bucket=platform.checkpoint_bucket or None,
        control_plane_ranges=(
            tuple(n.cidr for n in cfg.cluster.master_authorized_networks)
            if cluster.gke and cfg.deploys(Layer.CLUSTER)
            else ()
        ),
    )


def supervisor_args(cfg: StackConfig, cluster: ClusterExports, namespace: str) -> SupervisorArgs:
    """The resiliency supervisor of the platform's namespace (waiting for nothing yet)."""
    r = cfg.resiliency
    return SupervisorArgs(
        namespace=namespace,
        workload_namespace=namespace,
        project=cluster.project,
        node_selector=node_pool_selector(cluster.supervisor_pool or ""),
        heartbeat_polling_period_seconds=r.heartbeat_polling_period_seconds,
        heartbeat_timeout_seconds=r.heartbeat_timeout_seconds,
        watchdogs=r.watchdogs,
        watchdog_interval_seconds=r.watchdog_interval_seconds,
        watchdog_notification_cooldown_seconds=r.watchdog_notification_cooldown_seconds,
        topology_aware=r.topology_aware,
        gpus_per_node=max(p.machine.gpus for p in cluster.gpu_pools),
    )


def pool_pod_needs(pools: Iterable[str], platform: PlatformExports, cluster: ClusterExports) -> PodAllowance:
    """What the runs and fabric checks on these pools need of their namespace's pod security, with
    what NVSentinel's preflight webhook adds to them."""
    flavors = platform.flavors_by_pool
    needs = union(
        gpudirect.machine_needs(flavors[pool].machine, cluster.gke, cluster.gpu_networks, platform.supervisor)
        for pool in pools
    )
    return needs | preflight_pod_needs(platform.preflight_checks)


def platform_pod_needs(
    platform: PlatformExports, cluster: ClusterExports, supervisor: SupervisorArgs | None
) -> PodAllowance:
    """What the platform's namespace needs: every pool's pods, and the supervisor's (its host daemon
    runs privileged on the node's network and process namespace)."""
    manifests = supervisor_manifests(supervisor) if supervisor else []
    daemons = union(needs_of(spec) for manifest in manifests for spec in pod_specs(manifest))
    return pool_pod_needs((f.pool for f in platform.flavors), platform, cluster) | daemons


def _existing(cfg: StackConfig) -> ExistingClusterConfig:
    if cfg.existing_cluster is None:
        raise ValueError("the platform is on an existing cluster, but existingCluster is unset")
    return cfg.existing_cluster


def check_platform(cfg: StackConfig, cluster: ClusterExports) -> None:
    """What the platform needs of the cluster it lands on, before anything is registered."""
    if cfg.resiliency.enabled and cluster.supervisor_pool is None:
        raise ConfigError.of(
            [RuleError("resiliency.enabled", True, "needs the supervisor's CPU pool: enable it in the cluster's stack")]
        )
    if cluster.gke and cluster.rbac_security_group is None:
        grouped = [i for i, team in enumerate(cfg.teams) if team.groups]
        if grouped:
            why = (
                "binds Google groups, which GKE resolves only with Google Groups for RBAC: set "
                "cluster.rbacSecurityGroup to gke-security-groups@<your domain> in the cluster's stack"
            )
            raise ConfigError.of([RuleError(f"teams[{grouped[0]}].groups", list(cfg.teams[grouped[0]].groups), why)])


@dataclass(frozen=True)
class PlatformLayerArgs:
    config: StackConfig
    cluster: ClusterOutputs
    facts: PlatformExports
    # Labels of every labelled GCP resource.
    labels: Mapping[str, str]
    # The cluster's API server and CA as the stack reaches it, for a MultiKueue manager: a GKE
    # cluster's from its kubeconfig output; an existing cluster's read from its kubeconfig.
    endpoint: pulumi.Output[tuple[str, str]] | None = None
    # A MultiKueue manager's workers: the kubeconfig of each, by its MultiKueueCluster name. The
    # manager queues and dispatches runs, and runs none: no storage, GPU wiring or TensorBoard.
    workers: Mapping[str, pulumi.Output[Any]] | None = None
    # What the manager warns of its workers (planners.multikueue).
    advice: Sequence[str] = ()


class PlatformLayer(pulumi.ComponentResource):
    TYPE = "nemo:platform:PlatformLayer"

    run_dependencies: list[pulumi.Resource]
    # The shared file system's claim (TensorBoard reads the logs on it).
    shared_claim: k8s.core.v1.PersistentVolumeClaim
    tensorboard: TensorBoard | None
    dashboard: pulumi.Output[str] | None = None

    def __init__(self, name: str, args: PlatformLayerArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(self.TYPE, name, None, opts)
        cfg, cluster, facts = args.config, args.cluster, args.facts
        child = pulumi.ResourceOptions(parent=self)
        gke = cluster.facts.gke
        manager = args.workers is not None

        supervisor = supervisor_args(cfg, cluster.facts, facts.namespace) if cfg.resiliency.enabled else None
        # A manager's namespaces hold no pod of a run: the workers' namespaces enforce theirs.
        pods = PodAllowance() if manager else platform_pod_needs(facts, cluster.facts, supervisor)
        workspace = TrainingWorkspace(
            f"{name}-workspace",
            TrainingWorkspaceArgs(
                # Workload Identity principals exist on GKE only.
                project=cluster.facts.project if gke else None,
                workload_pool=cluster.facts.workload_pool,
                namespace=facts.namespace,
                service_accounts=() if manager else (facts.service_account, facts.data_prep_service_account),
                pod_security=pods.level,
                namespace_exists=not gke and _existing(cfg).namespace_exists,
                labels=preflight_namespace_labels(facts.preflight_checks),
            ),
            opts=child,
        )
        self.run_dependencies = list(workspace.accounts)
        if facts.preflight_checks and not gke and _existing(cfg).namespace_exists:
            pulumi.log.warn(
                f"nvsentinel.preflight: namespace {facts.namespace} is the cluster's own, and this program leaves its "
                f"labels alone: label it {PREFLIGHT_NAMESPACE_LABEL}={PREFLIGHT_ENABLED} for NVSentinel to check the "
                "nodes of its pods",
                resource=self,
            )
        # A manager's teams have no storage: their runs run on the workers.
        team_storage: TeamBuckets | TeamClaimsOnClass | None = None
        if gke and not manager:
            team_storage = self._gke_parts(name, args, workspace)
        elif not manager:
            existing = _existing(cfg)
            claims = StorageClaims(
                f"{name}-storage",
                StorageClaimsArgs(
                    namespace=workspace.namespace,
                    claim_names=(facts.shared_claim, facts.data_claim, facts.checkpoint_claim),
                    existing=tuple(existing.claims.given.values()),
                    storage_class=existing.storage_class,
                    size_gib=existing.storage_gib,
                ),
                opts=child,
            )
            self.run_dependencies += claims.claims
            self.shared_claim = claims.claims[0]
            team_storage = TeamClaimsOnClass(storage_class=existing.storage_class or "", size_gib=existing.storage_gib)
        team_namespaces: dict[str, pulumi.Input[str]] = {}
        for team in facts.teams:
            space = TeamSpace(
                f"{name}-team-{team.name}",
                TeamSpaceArgs(
                    team=team,
                    project=cluster.facts.project if gke else None,
                    workload_pool=cluster.facts.workload_pool,
                    training_account=facts.service_account,
                    data_prep_account=facts.data_prep_service_account,
                    claim_names=(facts.shared_claim, facts.data_claim, facts.checkpoint_claim),
                    storage=team_storage,
                    pods=None if manager else pool_pod_needs(team.pools, facts, cluster.facts),
                    labels=preflight_namespace_labels(facts.preflight_checks),
                ),
                opts=child,
            )
            team_namespaces[team.name] = space.namespace
            self.run_dependencies += space.run_dependencies
        self._kubernetes_parts(name, args, workspace, team_namespaces, supervisor)
        self.register_outputs({})

    def _gke_parts(self, name: str, args: PlatformLayerArgs, workspace: TrainingWorkspace) -> TeamBuckets:
        """GPUDirect objects and plugins, Filestore and the buckets: what only GKE has. Returns
        what a team's volumes mount of them."""
        cfg, cluster, facts, labels = args.config, args.cluster, args.facts, args.labels
        child = pulumi.ResourceOptions(parent=self)
        protect = cluster.facts.production
        training = workspace.principals[facts.service_account]
        data_prep = workspace.principals[facts.data_prep_service_account]
        installers = gpudirect.plugin_installers([p.machine for p in cluster.facts.gpu_pools])
        if cluster.facts.gpu_networks and any(stack.pod_networks for stack, _ in installers.values()):
            objects = GpuNetworkObjects(
                f"{name}-gpu-networks", GpuNetworkObjectsArgs(plan=cluster.facts.gpu_networks), opts=child
            )
            self.run_dependencies.append(objects)
        for suffix, (stack, accelerators) in installers.items():
            NcclPluginInstaller(
                f"{name}-nccl-{suffix}",
                NcclPluginInstallerArgs(
                    stack=stack,
                    key=suffix,
                    accelerators=accelerators,
                    nri_device_injector=cfg.gpudirect.nri_device_injector,
                    mirror=cluster.facts.image_mirror,
                ),
                opts=child,
            )

        filestore = cfg.storage.filestore
        shared = SharedFilesystem(
            f"{name}-filestore",
            SharedFilesystemArgs(
                project=cluster.facts.project,
                instance_name=f"{cluster.facts.name}-shared",
                location=cluster.facts.region if filestore.tier in REGIONAL_FILESTORE_TIERS else cluster.facts.zone,
                tier=filestore.tier,
                capacity_gib=filestore.capacity_gib,
                share_name=filestore.share_name,
                network=cluster.primary_network,
                namespace=workspace.namespace,
                claim_name=facts.shared_claim,
                protect=protect,
                labels=labels,
            ),
            opts=child,
        )
        storage = cfg.storage
        buckets = [
            BucketVolume(
                f"{name}-data",
                BucketVolumeArgs(
                    project=cluster.facts.project,
                    region=cluster.facts.region,
                    bucket_name=facts.data_bucket,
                    create=storage.data_bucket.create,
                    hierarchical_namespace=False,
                    namespace=workspace.namespace,
                    claim_name=facts.data_claim,
                    mount_options=DATA_MOUNT_OPTIONS,
                    grants=[(READ, training), (READ_WRITE, data_prep)],
                    protect=protect,
                    labels=labels,
                ),
                opts=child,
            ),
            BucketVolume(
                f"{name}-checkpoints",
                BucketVolumeArgs(
                    project=cluster.facts.project,
                    region=cluster.facts.region,
                    bucket_name=facts.checkpoint_bucket,
                    create=storage.checkpoint_bucket.create,
                    hierarchical_namespace=storage.checkpoint_bucket.hierarchical_namespace,
                    namespace=workspace.namespace,
                    claim_name=facts.checkpoint_claim,
                    mount_options=CHECKPOINT_MOUNT_OPTIONS,
                    grants=[(READ_WRITE, training)],
                    protect=protect,
                    labels=labels,
                ),
                opts=child,
            ),
        ]
        self.run_dependencies += [shared.claim, *(b.claim for b in buckets)]
        self.shared_claim = shared.claim
        return TeamBuckets(
            filestore=shared.source,
            data_bucket=buckets[0].bucket_name,
            data_mount_options=DATA_MOUNT_OPTIONS,
            checkpoint_bucket=buckets[1].bucket_name,
            checkpoint_mount_options=CHECKPOINT_MOUNT_OPTIONS,
        )

    def _kubernetes_parts(
        self,
        name: str,
        args: PlatformLayerArgs,
        workspace: TrainingWorkspace,
        team_namespaces: Mapping[str, pulumi.Input[str]],
        supervisor: SupervisorArgs | None,
    ) -> None:
        """Kueue and JobSet, the queues, the supervisor, monitoring and TensorBoard."""
        cfg, cluster, facts, labels = args.config, args.cluster, args.facts, args.labels
        child = pulumi.ResourceOptions(parent=self)
        system = cluster.facts.system_selector

        ready: list[pulumi.Resource] = []
        if cfg.kueue.install:
            jobset = JobSetController(
                f"{name}-jobset",
                JobSetControllerArgs(
                    node_selector=system,
                    crd=crd_manifest(versions.JOBSET_CRDS, versions.JOBSET_CRD),
                ),
                opts=child,
            )
            kueue = KueueController(
                f"{name}-kueue",
                kueue_controller_args(cfg, cluster.facts),
                # JobSet first: Kueue enables its JobSet integration at start-up.
                opts=pulumi.ResourceOptions(parent=self, depends_on=[jobset]),
            )
            ready.append(kueue.ready)
        nvlink = [p for p in cluster.facts.gpu_pools if p.machine.nvlink_across_nodes]
        if nvlink:
            # The ComputeDomain CRD must exist before a run names one.
            driver = ComputeDomainDriver(
                f"{name}-nvlink",
                ComputeDomainDriverArgs(
                    machines=list({p.machine_type: p.machine for p in nvlink}.values()),
                    nodes=sum(p.max_nodes for p in nvlink),
                    controller_selector=system,
                ),
                opts=child,
            )
            self.run_dependencies.append(driver.release)
        if not cfg.kueue.install and cluster.facts.gke:
            # An existing cluster's CRDs were checked (stacks.existing.check_controllers); one this
            # program creates cannot be read at preview. v1beta2 is served from Kueue 0.15 on (kueue
            # CHANGELOG/CHANGELOG-0.15.md, "Expose the v1beta2 API for CRD serving").
            pulumi.log.warn(
                "kueue.install is false: the cluster's Kueue must serve kueue.x-k8s.io/v1beta2 (Kueue 0.15 or later; "
                f"this program is tested with {versions.KUEUE.version}) and its JobSet jobset.x-k8s.io/v1alpha2 "
                f"(tested with {versions.JOBSET.version}), with waitForPodsReady and the jobset integration on",
                resource=self,
            )
        check: str | None = None
        if args.workers is not None:
            dispatch = Manager(
                f"{name}-multikueue", ManagerArgs(kubeconfigs=args.workers, after=ready, advice=args.advice), opts=child
            )
            ready = [*ready, dispatch.check]
            check = MULTIKUEUE_CHECK
        queues = KueueQueues(
            f"{name}-queues",
            KueueQueuesArgs(
                flavors=facts.flavors,
                cluster_queue=facts.cluster_queue,
                local_queue=facts.local_queue,
                namespace=workspace.namespace,
                preemption=cfg.kueue.preemption,
                after=ready,
                teams=teams_plan(cfg, facts.flavors),
                team_namespaces=team_namespaces,
                multikueue=check,
            ),
            opts=child,
        )
        self.run_dependencies += queues.local_queues
        self.worker_kubeconfig: pulumi.Output[str] | None = None
        if cfg.multi_kueue.worker:
            endpoint = args.endpoint or cluster.kubeconfig.apply(kubeconfig_endpoint)
            worker = WorkerAccess(
                f"{name}-multikueue-worker",
                WorkerAccessArgs(
                    name=cluster.facts.name,
                    server=endpoint.apply(lambda e: e[0]),
                    ca_data=endpoint.apply(lambda e: e[1]),
                    # Where runs land (worker_facts): the teams' namespaces, else the platform's.
                    namespaces=dict(team_namespaces) or {cfg.namespace: workspace.namespace},
                ),
                opts=child,
            )
            self.worker_kubeconfig = worker.kubeconfig

        if supervisor is not None:
            Supervisor(
                f"{name}-supervisor",
                dataclasses.replace(
                    supervisor, after=[workspace, *([cluster.supervisor_pool] if cluster.supervisor_pool else [])]
                ),
                opts=child,
            )

        alerts = cfg.monitoring.alerts
        self.tensorboard = None
        if args.workers is not None:
            return  # a manager runs no GPU pod: nothing to monitor or to show in TensorBoard
        if cluster.facts.gke and (cfg.monitoring.dashboard or alerts.enabled):
            pools, cluster_name = cluster.facts.gpu_pools, cluster.facts.name
            steps = step_metrics(cluster_name)
            monitoring = GpuMonitoring(
                f"{name}-monitoring",
                GpuMonitoringArgs(
                    project=cluster.facts.project,
                    dashboard=gpu_dashboard(cluster_name, facts.namespace, pools, steps, alerts.step_time_margin)
                    if cfg.monitoring.dashboard
                    else None,
                    alerts=(
                        [*gpu_alerts(cluster_name, pools), slow_run_alert(cluster_name, steps, alerts.step_time_margin)]
                        if alerts.enabled
                        else ()
                    ),
                    log_metrics=steps.metrics,
                    notification_channels=alerts.notification_channels,
                    email=alerts.email,
                    labels=labels,
                ),
                opts=child,
            )
            self.dashboard = monitoring.dashboard_id

        if cfg.tensorboard.enabled:
            self.tensorboard = TensorBoard(
                f"{name}-tensorboard",
                TensorBoardArgs(
                    namespace=workspace.namespace,
                    claim=self.shared_claim,
                    mount_path=facts.shared_mount,
                    log_dir=facts.experiments_dir,
                    node_selector=system,
                    cpu_millicores=cfg.tensorboard.cpu_millicores,
                    memory_mib=cfg.tensorboard.memory_mib,
                    vertex_ai=(cluster.facts.project, cluster.facts.region) if cfg.tensorboard.vertex_ai else None,
                    labels=labels,
                    mirror=cluster.facts.image_mirror,
                ),
                opts=child,
            )


def kueue_controller_args(cfg: StackConfig, cluster: ClusterExports) -> KueueControllerArgs:
    """The Kueue the stack installs; on `kueue.install: false`, what it expects of the cluster's."""
    return KueueControllerArgs(
        node_selector=cluster.system_selector,
        wait_for_pods_ready_timeout_seconds=cfg.kueue.wait_for_pods_ready_timeout_seconds,
        requeue_limit=cfg.kueue.requeue_limit,
        nodes=sum(p.max_nodes for p in cluster.gpu_pools),
        imex_channels=any(p.machine.nvlink_across_nodes for p in cluster.gpu_pools),
        fair_sharing=bool(cfg.teams),
        team_namespaces=tuple(team.namespace_name for team in cfg.teams),
        # A run admitted in its team's quota, all of it placed at once (topology-aware where the
        # pool has topology labels), needs no global block; the timeout still evicts one that hangs.
        block_admission=not cfg.teams,
        worker_lost_timeout_seconds=cfg.multi_kueue.worker_lost_timeout_seconds if cfg.multi_kueue.manager else None,
        dispatch=cfg.multi_kueue.dispatch,
        mirror=cluster.image_mirror,
    )


def build(
    cfg: StackConfig,
    cluster: ClusterOutputs,
    facts: PlatformExports,
    labels: Mapping[str, str],
    opts: pulumi.ResourceOptions,
    *,
    endpoint: tuple[str, str] | None = None,
    managed: ManagedWorkers | None = None,
) -> tuple[PlatformOutputs, dict[str, Any]]:
    layer = PlatformLayer(
        "platform",
        PlatformLayerArgs(
            config=cfg,
            cluster=cluster,
            facts=facts,
            labels=labels,
            endpoint=pulumi.Output.from_input(endpoint) if endpoint is not None else None,
            workers=managed.kubeconfigs() if managed is not None else None,
            advice=managed.plan.advice if managed is not None else (),
        ),
        opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(providers={"kubernetes": cluster.provider})),
    )
    exports: dict[str, Any] = {"platform": facts.to_plain()}
    if layer.worker_kubeconfig is not None:
        exports["multiKueueWorker"] = worker_facts(cfg, cluster.facts, facts).to_plain()
        exports["multiKueueKubeconfig"] = layer.worker_kubeconfig
    if layer.dashboard is not None:
        exports["gpuDashboard"] = pulumi.Output.concat(
            "https://console.cloud.google.com/monitoring/dashboards/builder/",
            layer.dashboard.apply(lambda id_: id_.rsplit("/", 1)[-1]),
            f"?project={cluster.facts.project}",
        )
    if layer.tensorboard is not None:
        exports["tensorboardPortForward"] = layer.tensorboard.port_forward_command
        if layer.tensorboard.vertex_ai_tensorboard is not None:
            exports["vertexAiTensorboard"] = layer.tensorboard.vertex_ai_tensorboard
    return PlatformOutputs(facts=facts, run_dependencies=tuple(layer.run_dependencies)), exports
