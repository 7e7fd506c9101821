"""Where training runs live: their namespace and the Kubernetes service account they run as."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s


@dataclass(frozen=True)
class TrainingWorkspaceArgs:
    project: str
    namespace: str
    service_account: str


class TrainingWorkspace(pulumi.ComponentResource):
    """The training namespace and its service account. The account needs no Google service
    account: Workload Identity Federation grants IAM roles to it directly (`principal`)."""

    namespace: pulumi.Output[str]
    service_account_name: pulumi.Output[str]
    # IAM principal of the Kubernetes service account.
    principal: pulumi.Output[str]
    service_account: k8s.core.v1.ServiceAccount

    def __init__(self, name: str, args: TrainingWorkspaceArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("nemo:workspace:TrainingWorkspace", name, None, opts)
        namespace = k8s.core.v1.Namespace(
            f"{name}-namespace",
            metadata={"name": args.namespace, "labels": {"app.kubernetes.io/part-of": "nemo-gke"}},
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.service_account = k8s.core.v1.ServiceAccount(
            f"{name}-service-account",
            metadata={"name": args.service_account, "namespace": namespace.metadata.name},
            opts=pulumi.ResourceOptions(parent=namespace),
        )
        project = gcp.organizations.get_project_output(
            project_id=args.project, opts=pulumi.InvokeOutputOptions(parent=self)
        )
        self.principal = pulumi.Output.concat(
            "principal://iam.googleapis.com/projects/",
            project.number,
            f"/locations/global/workloadIdentityPools/{args.project}.svc.id.goog/subject/ns/",
            namespace.metadata.name,
            "/sa/",
            self.service_account.metadata.name,
        )
        self.namespace = namespace.metadata.name
        self.service_account_name = self.service_account.metadata.name
        self.register_outputs({"namespace": self.namespace, "principal": self.principal})
