"""An Artifact Registry repository for custom training images."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import pulumi
import pulumi_gcp as gcp

from facts.errors import require_no_problem
from facts.gcp import resource_name_problem
from facts.registries import UPSTREAMS, RegistryMirror, docker_host, mirror_repository_id


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
        self.url = pulumi.Output.concat(f"{docker_host(args.region)}/{args.project}/", repository.repository_id)
        self.register_outputs({"url": self.url})


@dataclass(frozen=True)
class ImageMirrorArgs:
    mirror: RegistryMirror
    labels: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for upstream in UPSTREAMS:
            repository_id = mirror_repository_id(self.mirror.cluster, upstream)
            require_no_problem(resource_name_problem(repository_id, 63), "repository_id", repository_id)


class ImageMirror(pulumi.ComponentResource):
    """One Artifact Registry remote repository per public upstream (facts.registries.UPSTREAMS), in
    the cluster's region: the first pull of an image fetches it from the upstream, every later one
    (every other node) reads the cached copy. Nodes read it with their service account's reader role."""

    TYPE = "nemo:registry:ImageMirror"

    urls: pulumi.Output[dict[str, str]]

    def __init__(self, name: str, args: ImageMirrorArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(self.TYPE, name, None, opts)
        mirror = args.mirror
        urls: dict[str, pulumi.Output[str]] = {}
        for upstream in UPSTREAMS:
            repository = gcp.artifactregistry.Repository(
                f"{name}-{upstream.repository_suffix}",
                project=mirror.project,
                location=mirror.region,
                repository_id=mirror_repository_id(mirror.cluster, upstream),
                format="DOCKER",
                mode="REMOTE_REPOSITORY",
                description=f"{upstream.registry} images for the pods of cluster {mirror.cluster}.",
                remote_repository_config={"description": upstream.registry, **upstream.remote_config},
                labels=dict(args.labels),
                opts=pulumi.ResourceOptions(parent=self),
            )
            urls[upstream.registry] = pulumi.Output.concat(
                f"{docker_host(mirror.region)}/{mirror.project}/", repository.repository_id
            )
        self.urls = pulumi.Output.all(**urls)
        self.register_outputs({"urls": self.urls})
