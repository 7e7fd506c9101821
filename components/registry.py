"""An Artifact Registry repository for custom training images."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import pulumi
import pulumi_gcp as gcp

from facts.errors import require_no_problem
from facts.gcp import resource_name_problem


@dataclass(frozen=True)
class ImageRegistryArgs:
    project: str
    region: str
    repository_id: str
    labels: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        require_no_problem(resource_name_problem(self.repository_id, 63), "repository_id", self.repository_id)


class ImageRegistry(pulumi.ComponentResource):
    """A Docker repository; nodes pull from it with their service account's reader role."""

    TYPE = "nemo:registry:ImageRegistry"

    url: pulumi.Output[str]

    def __init__(self, name: str, args: ImageRegistryArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(self.TYPE, name, None, opts)
        repository = gcp.artifactregistry.Repository(
            f"{name}-repository",
            project=args.project,
            location=args.region,
            repository_id=args.repository_id,
            format="DOCKER",
            description="Custom NeMo training images.",
            labels=dict(args.labels),
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.url = pulumi.Output.concat(f"{args.region}-docker.pkg.dev/{args.project}/", repository.repository_id)
        self.register_outputs({"url": self.url})
