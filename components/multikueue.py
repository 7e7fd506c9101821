"""MultiKueue: a worker's account for its manager (WorkerAccess), and the manager's side (Manager).

A worker gives a manager cluster's Kueue what it needs to dispatch runs there, and no more.

Kueue's manager reaches a worker through a kubeconfig kept in a Secret of its own namespace
(https://kueue.sigs.k8s.io/docs/tasks/manage/setup_multikueue/). The worker grants that identity
what the documentation's `create-multikueue-kubeconfig.sh` grants, for the two kinds this platform
queues only (batch Jobs and JobSets; Kueue's `integrations.frameworks`), split by where it is
needed: reading them, their Workloads and the queues across the cluster (the manager watches its
copies by label in every namespace: pkg/controller/admissionchecks/multikueue), and creating and
deleting them and their Workloads only in the namespaces runs land in (a RoleBinding each), so the
token cannot start a pod in `kube-system` or any other namespace. It reads no Secret and runs no pod
of its own (kubernetes-sigs/kueue site/static/examples/multikueue/create-multikueue-kubeconfig.sh at
the pinned version).

The credential is a long-lived service-account token: the controller-manager writes it into a
Secret of type `kubernetes.io/service-account-token`, which pulumi-kubernetes awaits until it holds
the token (pulumi/pulumi-kubernetes#2048). The manager's kubeconfig names the worker's API server and
CA and this token, and nothing else: Kueue refuses kubeconfigs that run programs.

The manager keeps each worker's kubeconfig in a Secret of Kueue's namespace under the key
`kubeconfig`, names it in a MultiKueueCluster, lists the clusters in a MultiKueueConfig and gates
its queues with an AdmissionCheck of the MultiKueue controller (site/static/examples/multikueue/
multikueue-setup.yaml and site/content/en/docs/tasks/manage/setup_multikueue.md at the pinned version).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.kubernetes import owned_namespace
from facts.errors import require, require_no_problem
from facts.kubernetes import JOBSET_API, KUEUE_API, KUEUE_NAMESPACE, MULTIKUEUE_WORKER_NAMESPACE, dns_label_problem
from facts.kueue import MAX_MULTIKUEUE_CLUSTERS, MULTIKUEUE_CHECK, MULTIKUEUE_CONTROLLER, MULTIKUEUE_KUBECONFIG_KEY

WORKER_ACCOUNT = "nemo-multikueue"
WORKER_ROLE = "nemo-multikueue-worker"
# Bound in each namespace runs land in, never cluster-wide.
WORKER_WRITE_ROLE = "nemo-multikueue-worker-write"
WORKER_TOKEN = "nemo-multikueue-token"
# The manager's MultiKueueConfig; its queues name the AdmissionCheck MULTIKUEUE_CHECK.
MANAGER_CONFIG = "nemo-multikueue"
_READ = ["get", "list", "watch"]
_JOBSET_GROUP, _KUEUE_GROUP = JOBSET_API.split("/")[0], KUEUE_API.split("/")[0]

# Kueue's list for a worker, for batch Jobs and JobSets (the module's docstring): what it reads
# across the cluster, and what it writes in the namespaces runs land in.
WORKER_RULES: tuple[Mapping[str, Any], ...] = (
    {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": _READ},
    {"apiGroups": ["batch"], "resources": ["jobs/status"], "verbs": ["get"]},
    {"apiGroups": [_JOBSET_GROUP], "resources": ["jobsets"], "verbs": _READ},
    {"apiGroups": [_JOBSET_GROUP], "resources": ["jobsets/status"], "verbs": ["get"]},
    {"apiGroups": [_KUEUE_GROUP], "resources": ["workloads"], "verbs": _READ},
    {"apiGroups": [_KUEUE_GROUP], "resources": ["workloads/status"], "verbs": ["get"]},
    {"apiGroups": [_KUEUE_GROUP], "resources": ["clusterqueues", "localqueues"], "verbs": _READ},
)
WORKER_WRITE_RULES: tuple[Mapping[str, Any], ...] = (
    {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["create", "delete"]},
    {"apiGroups": [_JOBSET_GROUP], "resources": ["jobsets"], "verbs": ["create", "delete"]},
    {"apiGroups": [_KUEUE_GROUP], "resources": ["workloads"], "verbs": ["create", "delete", "update", "patch"]},
    {"apiGroups": [_KUEUE_GROUP], "resources": ["workloads/status"], "verbs": ["patch", "update"]},
)


def worker_kubeconfig(server: str, ca_data: str, token_base64: str, name: str) -> str:
    """The manager's kubeconfig of the worker: its API server and CA, and the worker token."""
    token = base64.b64decode(token_base64).decode() if token_base64 else ""
    cluster = {"server": server, **({"certificate-authority-data": ca_data} if ca_data else {})}
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": name, "cluster": cluster}],
            "users": [{"name": WORKER_ACCOUNT, "user": {"token": token}}],
            "contexts": [{"name": name, "context": {"cluster": name, "user": WORKER_ACCOUNT}}],
            "current-context": name,
        }
    )


@dataclass(frozen=True)
class WorkerAccessArgs:
    # A name for the worker in the manager's MultiKueueCluster (the cluster's name).
    name: str
    # The cluster's API server and CA (base64 PEM; empty: the system's roots), as the stack reaches it.
    server: pulumi.Input[str]
    ca_data: pulumi.Input[str]
    # The namespaces runs land in (the platform's, or its teams'), each by a name for its binding:
    # the only ones the manager writes.
    namespaces: Mapping[str, pulumi.Input[str]]

    def __post_init__(self) -> None:
        require_no_problem(dns_label_problem(self.name), "name", self.name)
        require(self.server is not None, "server", None, "is the worker's API server")
        require(bool(self.namespaces), "namespaces", list(self.namespaces), "names where runs land")
        for key in self.namespaces:
            require_no_problem(dns_label_problem(key), "namespaces", key)


class WorkerAccess(pulumi.ComponentResource):
    """The worker's account for a MultiKueue manager, its least-privilege roles and token."""

    TYPE = "nemo:multikueue:WorkerAccess"

    # The manager's kubeconfig of this worker (a secret).
    kubeconfig: pulumi.Output[str]

    def __init__(self, name: str, args: WorkerAccessArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(self.TYPE, name, None, opts)
        namespace = owned_namespace(f"{name}-namespace", MULTIKUEUE_WORKER_NAMESPACE, self)
        after = pulumi.ResourceOptions(parent=self)
        account = k8s.core.v1.ServiceAccount(
            f"{name}-account",
            metadata={"name": WORKER_ACCOUNT, "namespace": namespace.metadata.name},
            opts=after,
        )
        role = k8s.rbac.v1.ClusterRole(
            f"{name}-role", metadata={"name": WORKER_ROLE}, rules=[dict(r) for r in WORKER_RULES], opts=after
        )
        subjects = [{"kind": "ServiceAccount", "name": WORKER_ACCOUNT, "namespace": MULTIKUEUE_WORKER_NAMESPACE}]
        k8s.rbac.v1.ClusterRoleBinding(
            f"{name}-binding",
            metadata={"name": WORKER_ROLE},
            role_ref={"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role.metadata.name},
            subjects=subjects,
            opts=after,
        )
        writes = k8s.rbac.v1.ClusterRole(
            f"{name}-write-role",
            metadata={"name": WORKER_WRITE_ROLE},
            rules=[dict(r) for r in WORKER_WRITE_RULES],
            opts=after,
        )
        for key, where in args.namespaces.items():
            k8s.rbac.v1.RoleBinding(
                f"{name}-write-{key}",
                metadata={"name": WORKER_WRITE_ROLE, "namespace": where},
                role_ref={"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": writes.metadata.name},
                subjects=subjects,
                opts=after,
            )
        token = k8s.core.v1.Secret(
            f"{name}-token",
            metadata={
                "name": WORKER_TOKEN,
                "namespace": namespace.metadata.name,
                "annotations": {"kubernetes.io/service-account.name": WORKER_ACCOUNT},
            },
            type="kubernetes.io/service-account-token",
            opts=pulumi.ResourceOptions(parent=self, depends_on=[account], additional_secret_outputs=["data"]),
        )
        self.kubeconfig = pulumi.Output.secret(
            pulumi.Output.all(args.server, args.ca_data, token.data).apply(
                lambda v: worker_kubeconfig(
                    v[0], v[1], v[2].get("token", "") if isinstance(v[2], dict) else "", args.name
                )
            )
        )
        self.register_outputs({"kubeconfig": self.kubeconfig})


def worker_secret(worker: str) -> str:
    """The Secret in Kueue's namespace that holds a worker's kubeconfig."""
    return f"nemo-multikueue-{worker}"


@dataclass(frozen=True)
class ManagerArgs:
    # Each worker's MultiKueueCluster name, and the kubeconfig that reaches it (a secret).
    kubeconfigs: Mapping[str, pulumi.Input[str]]
    # What every Kueue object waits for: the controller's readiness gate.
    after: Sequence[pulumi.Resource] = ()
    # Legal but costly choices of the workers (planners.multikueue), said on the manager.
    advice: Sequence[str] = ()

    def __post_init__(self) -> None:
        names = list(self.kubeconfigs)
        require(
            0 < len(names) <= MAX_MULTIKUEUE_CLUSTERS,
            "kubeconfigs",
            names,
            f"names 1 to {MAX_MULTIKUEUE_CLUSTERS} workers (MultiKueueConfig spec.clusters)",
        )
        for name in names:
            require_no_problem(dns_label_problem(name), "kubeconfigs", name)


class Manager(pulumi.ComponentResource):
    """A MultiKueue manager: a Secret and a MultiKueueCluster per worker, the MultiKueueConfig that
    lists them and the AdmissionCheck (`MULTIKUEUE_CHECK`) its ClusterQueues name."""

    TYPE = "nemo:multikueue:Manager"

    check: k8s.apiextensions.CustomResource

    def __init__(self, name: str, args: ManagerArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(self.TYPE, name, None, opts)
        for line in args.advice:
            pulumi.log.warn(line, resource=self)
        clusters = []
        for worker, kubeconfig in args.kubeconfigs.items():
            secret = k8s.core.v1.Secret(
                f"{name}-{worker}-kubeconfig",
                metadata={"name": worker_secret(worker), "namespace": KUEUE_NAMESPACE},
                string_data={MULTIKUEUE_KUBECONFIG_KEY: kubeconfig},
                opts=pulumi.ResourceOptions(parent=self, depends_on=list(args.after)),
            )
            clusters.append(
                k8s.apiextensions.CustomResource(
                    f"{name}-{worker}",
                    api_version=KUEUE_API,
                    kind="MultiKueueCluster",
                    metadata={"name": worker},
                    spec={
                        "clusterSource": {"kubeConfig": {"locationType": "Secret", "location": worker_secret(worker)}}
                    },
                    opts=pulumi.ResourceOptions(parent=self, depends_on=[*args.after, secret]),
                )
            )
        config = k8s.apiextensions.CustomResource(
            f"{name}-config",
            api_version=KUEUE_API,
            kind="MultiKueueConfig",
            metadata={"name": MANAGER_CONFIG},
            spec={"clusters": list(args.kubeconfigs)},
            opts=pulumi.ResourceOptions(parent=self, depends_on=[*args.after, *clusters]),
        )
        self.check = k8s.apiextensions.CustomResource(
            f"{name}-check",
            api_version=KUEUE_API,
            kind="AdmissionCheck",
            metadata={"name": MULTIKUEUE_CHECK},
            spec={
                "controllerName": MULTIKUEUE_CONTROLLER,
                "parameters": {"apiGroup": KUEUE_API.split("/")[0], "kind": "MultiKueueConfig", "name": MANAGER_CONFIG},
            },
            opts=pulumi.ResourceOptions(parent=self, depends_on=[*args.after, config]),
        )
        self.register_outputs({"check": self.check.metadata["name"]})
