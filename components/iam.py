"""Service accounts with only the roles their holders need."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from facts.errors import require

# GKE's predefined role for node service accounts (logging, monitoring, metadata and
# autoscaling metrics), plus pulling images from Artifact Registry.
# https://cloud.google.com/kubernetes-engine/docs/how-to/service-accounts#default-gke-service-agent
# Image streaming with a node account other than the default one needs Service Usage Consumer in the
# project holding the images (https://cloud.google.com/kubernetes-engine/docs/how-to/image-streaming
# #requirements): the cluster's own project, where its remote repositories are.
NODE_ROLES = ("roles/container.defaultNodeServiceAccount", "roles/artifactregistry.reader")
IMAGE_STREAMING_ROLE = "roles/serviceusage.serviceUsageConsumer"


@dataclass(frozen=True)
class NodeServiceAccountArgs:
    project: str
    account_id: str
    display_name: str
    # Some pool streams images: the nodes also need IMAGE_STREAMING_ROLE.
    image_streaming: bool = False

    def __post_init__(self) -> None:
        # IAM service account IDs: 6-30 characters, RFC 1035.
        require(
            6 <= len(self.account_id) <= 30 and self.account_id[0].isalpha() and self.account_id[-1] != "-",
            "account_id",
            self.account_id,
            "must be 6-30 of a-z, 0-9 and '-', starting with a letter",
        )


class NodeServiceAccount(pulumi.ComponentResource):
    """A dedicated identity for GKE nodes: never the Compute Engine default account."""

    TYPE = "nemo:iam:NodeServiceAccount"

    email: pulumi.Output[str]

    def __init__(self, name: str, args: NodeServiceAccountArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(self.TYPE, name, None, opts)
        account = gcp.serviceaccount.Account(
            f"{name}-account",
            account_id=args.account_id,
            display_name=args.display_name,
            opts=pulumi.ResourceOptions(parent=self),
        )
        grants = [
            gcp.projects.IAMMember(
                f"{name}-{role.rsplit('/', 1)[-1]}",
                project=args.project,
                role=role,
                member=account.member,
                opts=pulumi.ResourceOptions(parent=account),
            )
            for role in (*NODE_ROLES, *((IMAGE_STREAMING_ROLE,) if args.image_streaming else ()))
        ]
        # Resolves once the roles are granted: nodes using it never start without them.
        self.email = pulumi.Output.all(account.email, *(g.id for g in grants)).apply(lambda values: values[0])
        self.register_outputs({"email": self.email})
