"""The Google Cloud Resiliency supervisor, as the A3 Ultra resiliency recipe deploys it.

The same objects as the recipe's supervisor chart and its `ksa-setup.yaml` (facts.resiliency),
rendered as typed resources rather than the chart installed: the chart has no default values,
names objects after the Helm release and leaves its pods free to land anywhere but the tainted
GPU nodes, and its RBAC lives outside it. Here every object is pinned and placed: the Actuator,
Sensor and Controller on the supervisor's CPU pool, the host daemon on every GPU node.

`supervisor_manifests` is pure, so tests read every field; the component only registers them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from facts import resiliency, versions
from facts.errors import require, require_no_problem
from facts.kubernetes import (
    GPU_TAINT,
    IMPENDING_TERMINATION_TOLERATION,
    PART_OF,
    RUN_REPLICATED_JOB,
    SKIP_AWAIT,
    TIMEOUT_SECONDS_ANNOTATION,
    TRAINING_CONTAINER,
    dns_label_problem,
)

NAME = "supervisor"
CONFIG_MAP = f"{NAME}-endpoints"


@dataclass(frozen=True)
class SupervisorArgs:
    namespace: str
    # Namespace of the training JobSets the supervisor watches and repairs.
    workload_namespace: str
    project: str
    # Node selector of the supervisor's CPU pool.
    node_selector: Mapping[str, str]
    heartbeat_polling_period_seconds: int
    heartbeat_timeout_seconds: int
    watchdogs: Sequence[str]
    watchdog_interval_seconds: int
    watchdog_notification_cooldown_seconds: int
    topology_aware: bool
    gpus_per_node: int
    after: Sequence[pulumi.Resource] = ()

    def __post_init__(self) -> None:
        require_no_problem(dns_label_problem(self.namespace), "namespace", self.namespace)
        require_no_problem(dns_label_problem(self.workload_namespace), "workload_namespace", self.workload_namespace)
        require(bool(self.node_selector), "node_selector", dict(self.node_selector), "must select the CPU pool")
        unknown = set(self.watchdogs) - set(resiliency.WATCHDOGS)
        require(not unknown, "watchdogs", list(self.watchdogs), f"must be of {', '.join(resiliency.WATCHDOGS)}")
        require(
            self.heartbeat_timeout_seconds > self.heartbeat_polling_period_seconds,
            "heartbeat_timeout_seconds",
            self.heartbeat_timeout_seconds,
            "must exceed the polling period",
        )
        require(self.gpus_per_node >= 1, "gpus_per_node", self.gpus_per_node, "must be at least 1")


def _labels(component: str) -> dict[str, str]:
    return {"app.kubernetes.io/name": f"{NAME}-{component}", **PART_OF}


# Keys the chart always renders and the recipe leaves empty: the supervisor reads its whole
# configuration from the environment (SupervisorConfig.from_environment), so they are kept.
_UNSET_KEYS = (
    "NUM_NODES_PER_DP",
    "NUM_DP_REPLICAS",
    "MAX_IN_JOB_RESTARTS",
    "MAX_WORKLOAD_RESTARTS",
    "ENABLE_WORKLOAD_SCALING",
    "POD_TERMINATION_THRESHOLD_S",
    "JOBSET_DOWNTIME_THRESHOLD_S",
    "ENABLE_FAULT_INJECTION",
    "FAULT_INJECTION_PERIOD_S",
)


def endpoint_config(args: SupervisorArgs) -> dict[str, str]:
    """The chart's `endpoint-config` ConfigMap: where each service listens, the recipe's
    supervisor settings, and this platform's job and container names (the recipe's are its
    defaults). Workload scaling and fault injection stay off (the recipe leaves them empty)."""
    return {
        **dict.fromkeys(_UNSET_KEYS, ""),
        "REPLICATED_JOB_NAME": RUN_REPLICATED_JOB,
        "WORKLOAD_CONTAINER_NAME": TRAINING_CONTAINER,
        **{s.address_key: f"{NAME}-{s.name}:{s.port}" for s in resiliency.SERVICES},
        "HOST_DAEMON_PORT": str(resiliency.HOST_DAEMON_PORT),
        "HEARTBEAT_POLLING_PERIOD_S": str(args.heartbeat_polling_period_seconds),
        "HEARTBEAT_TIMEOUT_S": str(args.heartbeat_timeout_seconds),
        "WORKERS_PER_HOST": str(args.gpus_per_node),
        "JOB_NAMESPACE": args.workload_namespace,
        "WORKLOAD_NAMESPACE": args.workload_namespace,
        "PROJECT": args.project,
        "GLOG_logtostderr": "1",
        "GLOG_v": "2",
    }


def _service_objects(args: SupervisorArgs, service: resiliency.Service) -> list[dict[str, Any]]:
    labels = _labels(service.name)
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": f"{NAME}-{service.name}",
            "namespace": args.namespace,
            "labels": labels,
            # Awaited, for longer than the recipe's own time to ready.
            "annotations": {TIMEOUT_SECONDS_ANNOTATION: str(resiliency.SERVICES_AWAIT_SECONDS)},
        },
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "serviceAccountName": resiliency.SUPERVISOR_SERVICE_ACCOUNT,
                    "nodeSelector": dict(args.node_selector),
                    "containers": [
                        {
                            "name": service.name,
                            "image": versions.RESILIENCY.ref,
                            "command": ["python3", service.script],
                            "env": [{"name": "PORT", "value": str(service.port)}],
                            "envFrom": [{"configMapRef": {"name": CONFIG_MAP}}],
                            "ports": [{"containerPort": service.port, "protocol": "TCP"}],
                            "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}},
                        }
                    ],
                },
            },
        },
    }
    svc = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": f"{NAME}-{service.name}", "namespace": args.namespace, "labels": labels},
        "spec": {"selector": labels, "ports": [{"port": service.port, "targetPort": service.port, "protocol": "TCP"}]},
    }
    return [deployment, svc]


def host_daemon_command(args: SupervisorArgs) -> str:
    """The chart's host daemon command line with the stack's settings."""
    flags = [
        f"--workers_per_host={args.gpus_per_node}",
        f"--port={resiliency.HOST_DAEMON_PORT}",
        f"--project={args.project}",
        *(f"--watchdogs={w}" for w in args.watchdogs),
        f"--watchdog_interval_s={args.watchdog_interval_seconds}",
        f"--watchdog_notification_cooldown_s={args.watchdog_notification_cooldown_seconds}",
    ]
    if args.topology_aware:
        flags.append("--enable_topology_aware_scheduling")
    return " ".join(["exec", "python3", resiliency.HOST_DAEMON_SCRIPT, *flags])


def host_daemon(args: SupervisorArgs) -> dict[str, Any]:
    labels = _labels("host-daemon")
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {
            "name": f"{NAME}-host-daemon",
            "namespace": args.namespace,
            "labels": labels,
            # One pod per GPU node, which come and go (repairs, flex-start, autoscaling), and the
            # recipe saw 8 minutes on 16 nodes: awaiting its rollout would fail `up` past the
            # 10-minute await on a large pool or one slow node, and `refresh` whenever one GPU node
            # is down. Left unawaited, as the recipe's own `helm install` leaves it.
            "annotations": dict(SKIP_AWAIT),
        },
        "spec": {
            "selector": {"matchLabels": labels},
            "updateStrategy": {"type": "RollingUpdate"},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "serviceAccountName": resiliency.SUPERVISOR_SERVICE_ACCOUNT,
                    "hostNetwork": True,
                    "hostPID": True,
                    "dnsPolicy": "ClusterFirstWithHostNet",
                    "terminationGracePeriodSeconds": 3,
                    "nodeSelector": {resiliency.GKE_GPU_NODE_LABEL: "true"},
                    "tolerations": [GPU_TAINT.toleration(), IMPENDING_TERMINATION_TOLERATION],
                    "containers": [
                        {
                            "name": "host-daemon",
                            "image": versions.RESILIENCY.ref,
                            "command": ["bash", "-c", host_daemon_command(args)],
                            "env": [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
                            "envFrom": [{"configMapRef": {"name": CONFIG_MAP}}],
                            "ports": [
                                {
                                    "containerPort": resiliency.HOST_DAEMON_PORT,
                                    "hostPort": resiliency.HOST_DAEMON_PORT,
                                    "protocol": "TCP",
                                }
                            ],
                            "securityContext": {
                                "privileged": True,
                                "capabilities": {"add": list(resiliency.HOST_DAEMON_CAPABILITIES)},
                            },
                            "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}},
                        }
                    ],
                },
            },
        },
    }


def supervisor_manifests(args: SupervisorArgs) -> list[dict[str, Any]]:
    """Every object of the supervisor, in the order they are created."""
    account = resiliency.SUPERVISOR_SERVICE_ACCOUNT
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": account, "namespace": args.namespace}},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": f"nemo-gke-{NAME}"},
            "rules": [dict(rule) for rule in resiliency.SUPERVISOR_RULES],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": f"nemo-gke-{NAME}"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": f"nemo-gke-{NAME}"},
            "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": args.namespace}],
        },
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": CONFIG_MAP, "namespace": args.namespace},
            "data": endpoint_config(args),
        },
        *(obj for service in resiliency.SERVICES for obj in _service_objects(args, service)),
        host_daemon(args),
    ]


_TYPED: dict[str, Any] = {
    "ServiceAccount": k8s.core.v1.ServiceAccount,
    "ClusterRole": k8s.rbac.v1.ClusterRole,
    "ClusterRoleBinding": k8s.rbac.v1.ClusterRoleBinding,
    "ConfigMap": k8s.core.v1.ConfigMap,
    "Deployment": k8s.apps.v1.Deployment,
    "Service": k8s.core.v1.Service,
    "DaemonSet": k8s.apps.v1.DaemonSet,
}


def _snake(key: str) -> str:
    return re.sub(r"(?<!^)([A-Z])", r"_\1", key).lower()


class Supervisor(pulumi.ComponentResource):
    """The supervisor's services on its CPU pool and its host daemon on every GPU node."""

    TYPE = "nemo:resiliency:Supervisor"

    def __init__(self, name: str, args: SupervisorArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(self.TYPE, name, None, opts)
        created: list[pulumi.Resource] = list(args.after)
        for manifest in supervisor_manifests(args):
            kind = manifest["kind"]
            # The typed classes take their top-level fields in snake case (roleRef → role_ref).
            fields = {_snake(k): v for k, v in manifest.items() if k not in ("apiVersion", "kind")}
            suffix = f"{kind.lower()}-{manifest['metadata']['name']}"
            resource = _TYPED[kind](
                f"{name}-{suffix}", **fields, opts=pulumi.ResourceOptions(parent=self, depends_on=created[:])
            )
            if kind in ("ServiceAccount", "ConfigMap", "ClusterRoleBinding"):
                created.append(resource)
        self.register_outputs({})
