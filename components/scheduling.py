"""JobSet and Kueue: the controllers (pinned Helm charts), a readiness gate on Kueue's
webhook, and the queueing objects that admit training runs all-or-nothing.

Both controllers install with `helm.v3.Release`: a plain custom resource, so `pulumi preview`
of a stack whose cluster does not exist yet shows it as "to create" instead of failing
(unlike Chart v4, pulumi/pulumi-kubernetes#3027).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.kubernetes import KubernetesObject, owned_namespace, pinned_release
from facts import versions
from facts.errors import require, require_no_problem
from facts.kubernetes import (
    FABRIC_CHECK_PRIORITY,
    FABRIC_CHECK_PRIORITY_VALUE,
    GPU_RESOURCE,
    IMEX_CHANNEL_DEVICE_CLASS,
    IMEX_CHANNEL_RESOURCE,
    JOBSET_NAMESPACE,
    KUEUE_API,
    KUEUE_NAMESPACE,
    NAMESPACE_NAME_LABEL,
    PRIORITY_VALUES,
    dns_label_problem,
)
from facts.kueue import (
    FAIR_SHARING_STRATEGIES,
    MULTIKUEUE_IN_ORDER,
    PROVISIONING_CHECK,
    Dispatch,
    QueueingStrategy,
    ReclaimWithinCohort,
    RequeuingTimestamp,
    WithinClusterQueue,
)
from facts.registries import RegistryMirror, resolve
from planners.queues import TOPOLOGY, TOPOLOGY_SPEC, Flavor
from planners.teams import Team, TeamsPlan, covered_resources, flavor_quota

PROVISIONING_CONFIG = "dws-config"
# Kueue tracks every node and pod for topology-aware scheduling; xpk sizes it per node.
KUEUE_MEMORY_MIB_PER_NODE = 32
KUEUE_MIN_MEMORY_MIB = 512

# Retries a server-side dry-run create of a ResourceFlavor until Kueue's webhook accepts it:
# the webhook refuses requests for a while after its Deployment reports Ready while its
# certificate reaches the pod (kubernetes-sigs/kueue#13036). Nothing is persisted.
_WEBHOOK_PROBE = """set -u
sa=/var/run/secrets/kubernetes.io/serviceaccount
body='{"apiVersion":"KUEUE_API","kind":"ResourceFlavor","metadata":{"name":"nemo-webhook-probe"}}'
url=https://kubernetes.default.svc/apis/KUEUE_API/resourceflavors?dryRun=All
attempt=1
while [ $attempt -le 60 ]; do
  code=$(curl -sS -o /tmp/response -w '%{http_code}' --cacert $sa/ca.crt \\
    -H "Authorization: Bearer $(cat $sa/token)" -H 'Content-Type: application/json' \\
    -X POST --data "$body" "$url") || code=000
  case $code in
    200|201|409) echo "Kueue webhook answered on attempt $attempt"; exit 0 ;;
  esac
  echo "attempt $attempt: HTTP $code $(head -c 300 /tmp/response 2>/dev/null)"
  attempt=$((attempt + 1))
  sleep 5
done
echo "Kueue webhook did not answer within 5 minutes" >&2
exit 1
""".replace("KUEUE_API", KUEUE_API)


@dataclass(frozen=True)
class JobSetControllerArgs:
    node_selector: Mapping[str, str]
    # The JobSet CRD of the pinned release (stacks.installed.crd_manifest): applied by the
    # program, since Helm never upgrades the chart's `crds/`.
    crd: Mapping[str, Any]

    def __post_init__(self) -> None:
        require(bool(self.node_selector), "node_selector", self.node_selector, "pins the controller to a pool")
        name = self.crd.get("metadata", {}).get("name")
        require(name == versions.JOBSET_CRD, "crd", name, f"is the {versions.JOBSET_CRD} CustomResourceDefinition")


class JobSetController(pulumi.ComponentResource):
    """The JobSet controller (chart pinned in facts.versions) and its CRD, which the program
    applies itself so that it upgrades with the pin (facts.versions.JOBSET_CRD)."""

    TYPE = "nemo:scheduling:JobSetController"

    release: k8s.helm.v3.Release

    def __init__(self, name: str, args: JobSetControllerArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(self.TYPE, name, None, opts)
        namespace = owned_namespace(f"{name}-namespace", JOBSET_NAMESPACE, self)
        crd = k8s.apiextensions.v1.CustomResourceDefinition(
            f"{name}-crd",
            metadata=args.crd["metadata"],
            spec=args.crd["spec"],
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.release = pinned_release(
            f"{name}-release",
            versions.JOBSET,
            namespace,
            {"controller": {"nodeSelector": dict(args.node_selector)}},
            pulumi.ResourceOptions(parent=self, depends_on=[crd]),
            skip_crds=True,
        )
        self.register_outputs({"release": self.release.name})


@dataclass(frozen=True)
class KueueControllerArgs:
    node_selector: Mapping[str, str]
    wait_for_pods_ready_timeout_seconds: int
    requeue_limit: int
    # GPU nodes the cluster can hold: sizes the controller's memory.
    nodes: int
    # Runs claim IMEX channels (components.nvlink): Kueue charges them to a quota.
    imex_channels: bool = False
    # Teams share a cohort (planners.teams): idle capacity goes by fair sharing.
    fair_sharing: bool = False
    # The teams' namespaces: Kueue manages every Job and JobSet there, with a queue name or not.
    team_namespaces: Sequence[str] = ()
    # Admit nothing while any admitted run's pods are not all ready. Cluster-wide in Kueue
    # (pkg/cache/scheduler/cache.go podsReadyForAllAdmittedWorkloads): with teams, one team's run
    # pulling its image or restarting would hold every other team's admissions, reclaims
    # included, for up to the timeout, so teams turn it off (stacks.platform.kueue_controller_args).
    block_admission: bool = True
    # A MultiKueue manager: how long a run stays on a worker it cannot reach (None: not a manager).
    worker_lost_timeout_seconds: int | None = None
    # A MultiKueue manager: how it offers a run to its workers.
    dispatch: Dispatch = Dispatch.ALL_AT_ONCE
    # The cluster's remote repositories, which the readiness probe's image comes through.
    mirror: RegistryMirror | None = None

    def __post_init__(self) -> None:
        require(bool(self.node_selector), "node_selector", self.node_selector, "pins the controller to a pool")
        # Kueue evicts after waitForPodsReady.timeout; below a few minutes no A3 image pull fits.
        require(
            self.wait_for_pods_ready_timeout_seconds >= 300,
            "wait_for_pods_ready_timeout_seconds",
            self.wait_for_pods_ready_timeout_seconds,
            "must be at least 300",
        )
        require(self.requeue_limit >= 0 and self.nodes >= 0, "nodes", self.nodes, "must not be negative")
        require(
            self.dispatch is Dispatch.ALL_AT_ONCE or self.worker_lost_timeout_seconds is not None,
            "dispatch",
            self.dispatch,
            "is a MultiKueue manager's: set worker_lost_timeout_seconds",
        )


def kueue_configuration(args: KueueControllerArgs) -> dict[str, Any]:
    """The controller's whole Configuration (it replaces the chart's default, so it restates
    the defaults it keeps)."""
    timeout = f"{args.wait_for_pods_ready_timeout_seconds}s"
    # All-or-nothing: a workload whose pods are not all ready in time is evicted and requeued, and
    # (block_admission) nothing else is admitted while one is starting. Not on a MultiKueue manager:
    # its workloads are ready only once a worker has started them, so blocking admission there would
    # dispatch one run at a time (pkg/scheduler/scheduler.go, pkg/cache/scheduler/clusterqueue.go at
    # the pinned version), and the workers wait for their own pods.
    pods_ready = {
        "waitForPodsReady": {
            "timeout": timeout,
            "recoveryTimeout": timeout,
            "blockAdmission": args.block_admission,
            "requeuingStrategy": {
                "timestamp": RequeuingTimestamp.EVICTION.value,
                "backoffLimitCount": args.requeue_limit,
                "backoffBaseSeconds": 60,
                "backoffMaxSeconds": 3600,
            },
        }
    }
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "health": {"healthProbeBindAddress": ":8081"},
        "metrics": {"bindAddress": ":8443"},
        "webhook": {"port": 9443},
        "leaderElection": {"leaderElect": True, "resourceName": "c1f6bfd2.kueue.x-k8s.io"},
        **(pods_ready if args.worker_lost_timeout_seconds is None else {}),
        # Only the kinds this platform queues: Kueue's webhook then never stands between
        # other pods, Deployments or StatefulSets and the API server.
        "integrations": {"frameworks": ["batch/job", "jobset.x-k8s.io/jobset"]},
        **(_DEVICE_CLASS_MAPPINGS if args.imex_channels else {}),
        **(_FAIR_SHARING if args.fair_sharing else {}),
        **(_managed_namespaces(args.team_namespaces) if args.team_namespaces else {}),
        **({"multiKueue": _multikueue(args)} if args.worker_lost_timeout_seconds is not None else {}),
    }


def _multikueue(args: KueueControllerArgs) -> dict[str, Any]:
    """A manager's MultiKueue section; in order: the incremental dispatcher one worker a step
    (facts.kueue). The default dispatcher is left implicit, so stacks that keep it render unchanged."""
    section: dict[str, Any] = {"workerLostTimeout": f"{args.worker_lost_timeout_seconds}s"}
    if args.dispatch is Dispatch.IN_ORDER:
        section.update(MULTIKUEUE_IN_ORDER)
    return section


# Kueue (KueueDRAIntegration, on by default from 0.18) admits a pod that claims devices only when
# their DeviceClass maps to a resource its ClusterQueue has quota for: "DeviceClass ... is not
# mapped in DRA configuration" otherwise (kubernetes-sigs/kueue pkg/dra/claims.go@v0.19.2).
_DEVICE_CLASS_MAPPINGS = {
    "resources": {
        "deviceClassMappings": [{"name": IMEX_CHANNEL_RESOURCE, "deviceClassNames": [IMEX_CHANNEL_DEVICE_CLASS]}]
    }
}


def _managed_namespaces(namespaces: Sequence[str]) -> dict[str, Any]:
    """Kueue suspends and queues a Job or JobSet only where it names a queue, unless it manages jobs
    without one (kubernetes-sigs/kueue pkg/controller/jobframework/utils.go WorkloadShouldBeSuspended):
    in the teams' namespaces it does, so a job that named none would still wait for a quota. A
    team's admission policy refuses such a job first (components.teams); this holds where the
    policy is gone. Elsewhere Kueue keeps to the jobs that name a queue."""
    selector = {"matchExpressions": [{"key": NAMESPACE_NAME_LABEL, "operator": "In", "values": sorted(namespaces)}]}
    return {"manageJobsWithoutQueueName": True, "managedJobsNamespaceSelector": selector}


# Fair sharing is on wherever the Configuration has the section (pkg/scheduler/preemption/fairsharing/
# strategy.go, Enabled); v1beta2 requires its strategies (pkg/config/validation.go, validateFairSharing).
_FAIR_SHARING = {"fairSharing": {"preemptionStrategies": [s.value for s in FAIR_SHARING_STRATEGIES]}}


class KueueController(pulumi.ComponentResource):
    """Kueue (chart pinned in components.versions), configured for JobSet, topology-aware
    scheduling and waitForPodsReady, with a gate that completes only once its webhook answers."""

    TYPE = "nemo:scheduling:KueueController"

    release: k8s.helm.v3.Release
    # Depend on this, not on the release, before creating any Kueue object.
    ready: k8s.batch.v1.Job

    def __init__(self, name: str, args: KueueControllerArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(self.TYPE, name, None, opts)
        namespace = owned_namespace(f"{name}-namespace", KUEUE_NAMESPACE, self)
        memory = f"{max(KUEUE_MIN_MEMORY_MIB, KUEUE_MEMORY_MIB_PER_NODE * args.nodes)}Mi"
        self.release = pinned_release(
            f"{name}-release",
            versions.KUEUE,
            namespace,
            {
                "controllerManager": {
                    "nodeSelector": dict(args.node_selector),
                    "featureGates": [{"name": "TopologyAwareScheduling", "enabled": True}],
                    "manager": {
                        "resources": {"requests": {"cpu": "500m", "memory": memory}, "limits": {"memory": memory}}
                    },
                },
                "managerConfig": {"controllerManagerConfigYaml": json.dumps(kueue_configuration(args), indent=2)},
            },
            pulumi.ResourceOptions(parent=self),
        )
        self.ready = self._readiness_gate(name, namespace, args.node_selector, resolve(versions.CURL.ref, args.mirror))
        self.register_outputs({"release": self.release.name})

    def _readiness_gate(
        self, name: str, namespace: k8s.core.v1.Namespace, node_selector: Mapping[str, str], image: str
    ) -> k8s.batch.v1.Job:
        probe = "kueue-webhook-probe"
        account = k8s.core.v1.ServiceAccount(
            f"{name}-probe-account",
            metadata={"name": probe, "namespace": namespace.metadata.name},
            opts=pulumi.ResourceOptions(parent=self),
        )
        role = k8s.rbac.v1.ClusterRole(
            f"{name}-probe-role",
            metadata={"name": probe},
            rules=[{"apiGroups": ["kueue.x-k8s.io"], "resources": ["resourceflavors"], "verbs": ["create"]}],
            opts=pulumi.ResourceOptions(parent=self),
        )
        binding = k8s.rbac.v1.ClusterRoleBinding(
            f"{name}-probe-binding",
            metadata={"name": probe},
            role_ref={"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role.metadata.name},
            subjects=[{"kind": "ServiceAccount", "name": account.metadata.name, "namespace": namespace.metadata.name}],
            opts=pulumi.ResourceOptions(parent=self),
        )
        # pulumi-kubernetes waits for a Job to complete, so this is the gate.
        return k8s.batch.v1.Job(
            f"{name}-webhook-ready",
            metadata={"name": "kueue-webhook-ready", "namespace": namespace.metadata.name},
            spec={
                "backoffLimit": 1,
                "activeDeadlineSeconds": 600,
                "template": {
                    "spec": {
                        "serviceAccountName": account.metadata.name,
                        "restartPolicy": "Never",
                        "nodeSelector": dict(node_selector),
                        "securityContext": {"runAsNonRoot": True, "runAsUser": 65534},
                        "containers": [
                            {
                                "name": "probe",
                                "image": image,
                                "command": ["/bin/sh", "-c", _WEBHOOK_PROBE],
                                "resources": {
                                    "requests": {"cpu": "10m", "memory": "16Mi"},
                                    "limits": {"memory": "64Mi"},
                                },
                                "securityContext": {
                                    "allowPrivilegeEscalation": False,
                                    "readOnlyRootFilesystem": True,
                                    "capabilities": {"drop": ["ALL"]},
                                },
                                "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
                            }
                        ],
                        "volumes": [{"name": "tmp", "emptyDir": {}}],
                    }
                },
            },
            opts=pulumi.ResourceOptions(
                parent=self,
                depends_on=[self.release, binding],
                custom_timeouts=pulumi.CustomTimeouts(create="12m", update="12m"),
            ),
        )


def _admission_checks(flavors: Sequence[Flavor], names: Sequence[str], multikueue: str | None) -> dict[str, Any]:
    """A MultiKueue manager's queues dispatch through its check, on every flavor (Kueue refuses it per
    flavor, and a ProvisioningRequest check beside it: the workers provision; pkg/cache/scheduler/
    clusterqueue.go at the pinned version). Elsewhere queued provisioning (a ProvisioningRequest)
    gates admission on the queue's queued flavors."""
    if multikueue is not None:
        return {"admissionChecksStrategy": {"admissionChecks": [{"name": multikueue}]}}
    queued = [f.name for f in flavors if f.queued and f.name in names]
    if not queued:
        return {}
    return {"admissionChecksStrategy": {"admissionChecks": [{"name": PROVISIONING_CHECK, "onFlavors": queued}]}}


def cluster_queue_spec(
    flavors: Sequence[Flavor], namespace: str, preemption: WithinClusterQueue, multikueue: str | None = None
) -> dict[str, Any]:
    """Quotas for GPUs, CPU and memory per flavor: each pool's whole allocatable capacity
    (planners.queues), so CPU and memory requests can never make a run inadmissible."""
    resources = covered_resources(flavors)
    spec: dict[str, Any] = {
        "namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: namespace}},
        "queueingStrategy": QueueingStrategy.BEST_EFFORT_FIFO.value,
        "preemption": {"withinClusterQueue": preemption.value, "reclaimWithinCohort": ReclaimWithinCohort.NEVER.value},
        "resourceGroups": [
            {"coveredResources": resources, "flavors": [flavor_quota(f, resources, f.nodes) for f in flavors]}
        ],
    }
    return {**spec, **_admission_checks(flavors, [f.name for f in flavors], multikueue)}


def team_queue_spec(
    team: Team, flavors: Sequence[Flavor], cohort: str, preemption: WithinClusterQueue, multikueue: str | None = None
) -> dict[str, Any]:
    """A team's ClusterQueue in the cohort (planners.teams): its share as nominal quota, taken back
    from borrowers of any priority, and its fair-sharing weight."""
    resources = covered_resources(flavors)
    by_name = {f.name: f for f in flavors}
    spec: dict[str, Any] = {
        "cohortName": cohort,
        "namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: team.namespace}},
        "queueingStrategy": QueueingStrategy.BEST_EFFORT_FIFO.value,
        "preemption": {"withinClusterQueue": preemption.value, "reclaimWithinCohort": ReclaimWithinCohort.ANY.value},
        "fairSharing": {"weight": team.weight},
        "resourceGroups": [
            {
                "coveredResources": resources,
                "flavors": [
                    flavor_quota(by_name[q.flavor], resources, q.nodes, q.borrowing_nodes, q.lending_nodes)
                    for q in team.quotas
                ],
            }
        ],
    }
    return {**spec, **_admission_checks(flavors, [q.flavor for q in team.quotas], multikueue)}


def cohort_spec(plan: TeamsPlan, flavors: Sequence[Flavor]) -> dict[str, Any]:
    """The cohort's own quota: the nodes of each flavor no team is guaranteed."""
    resources = covered_resources(flavors)
    unassigned = dict(plan.unassigned)
    return {
        "resourceGroups": [
            {
                "coveredResources": resources,
                "flavors": [flavor_quota(f, resources, unassigned.get(f.name, 0)) for f in flavors],
            }
        ]
    }


@dataclass(frozen=True)
class KueueQueuesArgs:
    flavors: Sequence[Flavor]
    cluster_queue: str
    local_queue: str
    namespace: pulumi.Input[str]
    preemption: WithinClusterQueue
    # What every Kueue object waits for: the controller's readiness gate.
    after: Sequence[pulumi.Resource]
    # Teams (planners.teams): a ClusterQueue and LocalQueue each, in place of the single pair.
    teams: TeamsPlan | None = None
    # Each team's namespace, by team name (the LocalQueue goes there once it exists).
    team_namespaces: Mapping[str, pulumi.Input[str]] = field(default_factory=dict)
    # A MultiKueue manager's AdmissionCheck (components.multikueue): every queue dispatches through it.
    multikueue: str | None = None

    def __post_init__(self) -> None:
        names = [f.name for f in self.flavors]
        require(bool(names) and len(set(names)) == len(names), "flavors", names, "names each GPU pool once")
        require_no_problem(dns_label_problem(self.cluster_queue), "cluster_queue", self.cluster_queue)
        require_no_problem(dns_label_problem(self.local_queue), "local_queue", self.local_queue)
        if self.teams is not None:
            teams = [t.name for t in self.teams.teams]
            require(bool(teams), "teams", teams, "holds at least one team")
            require(
                set(self.team_namespaces) == set(teams),
                "team_namespaces",
                sorted(self.team_namespaces),
                f"names each team: {teams}",
            )
            for team in self.teams.teams:
                unknown = [q.flavor for q in team.quotas if q.flavor not in names]
                require(not unknown, "teams", unknown, "names flavors of the queues")


class KueueQueues(pulumi.ComponentResource):
    """Topology, one ResourceFlavor per GPU pool, priorities, the ClusterQueue and the
    training namespace's LocalQueue (plus DWS provisioning for queued pools)."""

    TYPE = "nemo:scheduling:KueueQueues"

    # The training namespace's, or one per team.
    local_queues: list[k8s.apiextensions.CustomResource]

    def __init__(self, name: str, args: KueueQueuesArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(self.TYPE, name, None, opts)

        def opts_after(*resources: pulumi.Resource, **extra: Any) -> pulumi.ResourceOptions:
            return pulumi.ResourceOptions(parent=self, depends_on=[*args.after, *resources], **extra)

        def kueue_object(
            suffix: str, kind: str, object_name: str, opts: pulumi.ResourceOptions, **fields: Any
        ) -> k8s.apiextensions.CustomResource:
            return k8s.apiextensions.CustomResource(
                f"{name}-{suffix}",
                api_version=KUEUE_API,
                kind=kind,
                metadata={"name": object_name},
                opts=opts,
                **fields,
            )

        def local_queue(
            suffix: str,
            queue_name: str,
            namespace: pulumi.Input[str],
            cluster_queue_name: str,
            cluster_queue: pulumi.Resource,
        ) -> k8s.apiextensions.CustomResource:
            return k8s.apiextensions.CustomResource(
                f"{name}-{suffix}",
                api_version=KUEUE_API,
                kind="LocalQueue",
                metadata={"name": queue_name, "namespace": namespace},
                spec={"clusterQueue": cluster_queue_name},
                # Immutable (a CEL rule): another ClusterQueue means a new LocalQueue of the same name,
                # so the old one must go first (the provider deletes first only for its own force-new
                # fields; the engine keeps that answer for replaceOnChanges).
                opts=opts_after(cluster_queue, replace_on_changes=["spec.clusterQueue"], delete_before_replace=True),
            )

        topology = (
            [kueue_object("topology", "Topology", TOPOLOGY, opts_after(), spec=TOPOLOGY_SPEC)]
            if any(f.topology for f in args.flavors)
            else []
        )
        before_queue: list[pulumi.Resource] = list(topology)
        for flavor in args.flavors:
            # A changed pool is a flavor of a new name (planners.queues): created before the
            # ClusterQueue moves to it, the old one deleted after.
            before_queue.append(
                kueue_object(
                    f"flavor-{flavor.pool}", "ResourceFlavor", flavor.name, opts_after(*topology), spec=flavor.spec
                )
            )
        classes = [
            *((p.value, value, f"Training runs at {p.name.lower()} priority.") for p, value in PRIORITY_VALUES.items()),
            (FABRIC_CHECK_PRIORITY, FABRIC_CHECK_PRIORITY_VALUE, "Fabric checks, which come before any training run."),
        ]
        for class_name, value, description in classes:
            KubernetesObject(
                f"{name}-priority-{class_name}",
                {
                    "apiVersion": KUEUE_API,
                    "kind": "WorkloadPriorityClass",
                    "metadata": {"name": class_name},
                    "value": value,
                    "description": description,
                },
                opts=opts_after(),
            )
        if any(f.queued for f in args.flavors) and args.multikueue is None:
            config = kueue_object(
                "provisioning-config",
                "ProvisioningRequestConfig",
                PROVISIONING_CONFIG,
                opts_after(),
                spec={
                    "provisioningClassName": "queued-provisioning.gke.io",
                    "managedResources": [GPU_RESOURCE],
                    "podSetUpdates": {
                        "nodeSelector": [
                            {
                                "key": "autoscaling.gke.io/provisioning-request",
                                "valueFromProvisioningClassDetail": "ResizeRequestName",
                            }
                        ]
                    },
                },
            )
            before_queue.append(
                kueue_object(
                    "provisioning-check",
                    "AdmissionCheck",
                    PROVISIONING_CHECK,
                    opts_after(config),
                    spec={
                        "controllerName": "kueue.x-k8s.io/provisioning-request",
                        "parameters": {
                            "apiGroup": "kueue.x-k8s.io",
                            "kind": "ProvisioningRequestConfig",
                            "name": PROVISIONING_CONFIG,
                        },
                    },
                )
            )
        if args.teams is None:
            cluster_queue = kueue_object(
                "cluster-queue",
                "ClusterQueue",
                args.cluster_queue,
                opts_after(*before_queue),
                spec=pulumi.Output.from_input(args.namespace).apply(
                    lambda namespace: cluster_queue_spec(args.flavors, namespace, args.preemption, args.multikueue)
                ),
            )
            self.local_queues = [
                local_queue("local-queue", args.local_queue, args.namespace, args.cluster_queue, cluster_queue)
            ]
        else:
            plan = args.teams
            cohort = kueue_object(
                "cohort", "Cohort", plan.cohort, opts_after(*before_queue), spec=cohort_spec(plan, args.flavors)
            )
            self.local_queues = []
            for team in plan.teams:
                queue = kueue_object(
                    f"team-{team.name}-cluster-queue",
                    "ClusterQueue",
                    team.cluster_queue,
                    opts_after(*before_queue, cohort),
                    spec=team_queue_spec(team, args.flavors, plan.cohort, args.preemption, args.multikueue),
                )
                self.local_queues.append(
                    local_queue(
                        f"team-{team.name}-local-queue",
                        team.local_queue,
                        args.team_namespaces[team.name],
                        team.cluster_queue,
                        queue,
                    )
                )
        self.register_outputs({"local_queues": [q.metadata["name"] for q in self.local_queues]})
