"""Where training runs live: their namespace and the Kubernetes service account they run as."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s

from facts.errors import require_no_problem
from facts.kubernetes import PART_OF, dns_label_problem
from facts.podsecurity import ENFORCE_LABEL, PodSecurityLevel


@dataclass(frozen=True)
class TrainingWorkspaceArgs:
    # None: not on GKE, so no Workload Identity principals.
    project: str | None
    # The cluster's Workload Identity pool (`<project>.svc.id.goog`).
    workload_pool: str
    namespace: str
    # Kubernetes service accounts to create, one per kind of workload.
    service_accounts: Sequence[str]
    # The Pod Security level the namespace enforces: the strictest its pods allow (the platform
    # layer derives it from the pods' needs, facts.podsecurity).
    pod_security: PodSecurityLevel
    # The namespace exists on the cluster (config.existing): read, never created or deleted, its
    # labels the cluster owner's.
    namespace_exists: bool = False
    # Labels of the namespace beyond the platform's own (facts.nvsentinel's preflight).
    labels: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for key, name in (("namespace", self.namespace), *(("service_accounts", a) for a in self.service_accounts)):
            require_no_problem(dns_label_problem(name), key, name)


class TrainingWorkspace(pulumi.ComponentResource):
    """The training namespace and its service accounts. They need no Google service accounts:
    Workload Identity Federation grants IAM roles to each of them directly (`principals`)."""

    TYPE = "nemo:workspace:TrainingWorkspace"

    namespace: pulumi.Output[str]
    # IAM principal of each Kubernetes service account, by name.
    principals: dict[str, pulumi.Output[str]]
    accounts: list[k8s.core.v1.ServiceAccount]

    def __init__(self, name: str, args: TrainingWorkspaceArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(self.TYPE, name, None, opts)
        namespace = (
            # A read: `pulumi preview` stops with "not found" if the namespace is missing.
            k8s.core.v1.Namespace.get(
                f"{name}-namespace-existing", args.namespace, opts=pulumi.ResourceOptions(parent=self)
            )
            if args.namespace_exists
            else k8s.core.v1.Namespace(
                f"{name}-namespace",
                metadata={
                    "name": args.namespace,
                    "labels": {**PART_OF, ENFORCE_LABEL: args.pod_security.value, **args.labels},
                },
                opts=pulumi.ResourceOptions(parent=self),
            )
        )
        self.accounts, self.principals = [], {}
        for account_name in args.service_accounts:
            account = k8s.core.v1.ServiceAccount(
                f"{name}-{account_name}",
                metadata={"name": account_name, "namespace": namespace.metadata.name},
                opts=pulumi.ResourceOptions(parent=namespace),
            )
            self.accounts.append(account)
            if args.project is None:
                continue
            project = gcp.organizations.get_project_output(
                project_id=args.project, opts=pulumi.InvokeOutputOptions(parent=self)
            )
            self.principals[account_name] = pulumi.Output.concat(
                "principal://iam.googleapis.com/projects/",
                project.number,
                f"/locations/global/workloadIdentityPools/{args.workload_pool}/subject/ns/",
                namespace.metadata.name,
                "/sa/",
                account.metadata.name,
            )
        self.namespace = namespace.metadata.name
        self.register_outputs({"namespace": self.namespace})
