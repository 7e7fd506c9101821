"""Where container images come from: the public registries the platform's pods pull from, their
Artifact Registry remote repositories in the cluster's region, and how an image reference reads
through one.

Google's own registries (`*.pkg.dev`, `gcr.io`, `registry.k8s.io`) already serve from Google's
network and are read as they are. The others are proxied by a remote repository: pulls stay inside
Google's network, the upstream's rate limits apply once per image rather than once per node, and
the images become eligible for GKE image streaming, which streams only from Artifact Registry
("Your container images must be stored in standard or remote repositories in Artifact Registry",
https://cloud.google.com/kubernetes-engine/docs/how-to/image-streaming#requirements).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from facts.gcp import scoped_name

# How a reference names its registry: the first path component is a registry host when it holds a
# '.' or a ':' or is `localhost`; otherwise the image is Docker Hub's, and a one-component name is
# one of its official images under `library/` (github.com/distribution/reference normalize.go:
# splitDockerDomain, defaultDomain "docker.io", officialRepoPrefix "library/").
DOCKER_HUB = "docker.io"
_DOCKER_HUB_ALIASES = ("index.docker.io", "registry-1.docker.io")
_OFFICIAL_PREFIX = "library/"
# name[:tag][@sha256:digest], the name as github.com/distribution/reference's grammar has it
# (regexp.go: a domain with an optional port, then lowercase path components joined by `/`, each
# separated within by `.`, `_`, `__` or dashes), reduced to what refs here use (no IPv6 domain).
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_DOMAIN_PART = r"[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?"
_DOMAIN = rf"{_DOMAIN_PART}(?:\.{_DOMAIN_PART})*(?::[0-9]+)?"
_REFERENCE = re.compile(
    rf"^(?P<name>(?:{_DOMAIN}/)?{_COMPONENT}(?:/{_COMPONENT})*)"
    r"(?::(?P<tag>\w[\w.-]{0,127}))?(?:@(?P<digest>sha256:[0-9a-f]{64}))?$"
)


@dataclass(frozen=True)
class ImageReference:
    """A reference split as the container runtime reads it."""

    registry: str
    path: str
    tag: str | None
    digest: str | None

    @property
    def suffix(self) -> str:
        """`:tag`, `@digest` or both, as written."""
        return (f":{self.tag}" if self.tag else "") + (f"@{self.digest}" if self.digest else "")


def parse_reference(ref: str) -> ImageReference:
    match = _REFERENCE.match(ref)
    if match is None:
        raise ValueError(f"{ref!r} is not an image reference such as nvcr.io/nvidia/nemo:26.02")
    name = match.group("name")
    first, _, rest = name.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        registry, path = first, rest
    else:
        registry, path = DOCKER_HUB, name
    if registry in _DOCKER_HUB_ALIASES:
        registry = DOCKER_HUB
    if registry == DOCKER_HUB and "/" not in path:
        path = _OFFICIAL_PREFIX + path
    return ImageReference(registry, path, match.group("tag"), match.group("digest"))


@dataclass(frozen=True)
class Upstream:
    """A public registry proxied by an Artifact Registry remote repository of the Docker format."""

    # The registry as references name it.
    registry: str
    # The end of the remote repository's ID (the cluster's name comes first).
    repository_suffix: str
    # pulumi-gcp RepositoryRemoteRepositoryConfigArgs, less its description.
    remote_config: Mapping[str, object]
    source: str


# The registries of the images this program runs, or that a run's `image` may name, outside Google:
# NVIDIA's NGC (the NeMo containers) and Docker Hub (the TensorBoard, curl and ubuntu images).
UPSTREAMS = (
    Upstream(
        "nvcr.io",
        "nvcr",
        MappingProxyType({"common_repository": {"uri": "https://nvcr.io"}}),
        "https://cloud.google.com/artifact-registry/docs/repositories/remote-repo (custom Docker upstreams: "
        "commonRepository.uri; pulumi-gcp RepositoryRemoteRepositoryConfigCommonRepositoryArgs)",
    ),
    Upstream(
        DOCKER_HUB,
        "docker-hub",
        MappingProxyType({"docker_repository": {"public_repository": "DOCKER_HUB"}}),
        "https://cloud.google.com/artifact-registry/docs/repositories/remote-repo (public_repository DOCKER_HUB)",
    ),
)
UPSTREAMS_BY_REGISTRY = MappingProxyType({u.registry: u for u in UPSTREAMS})


def mirror_repository_id(cluster: str, upstream: Upstream) -> str:
    """A cluster's remote repository of `upstream`: per cluster, so two stacks of one project and
    region never claim the same ID (repository IDs follow resource naming, 63 characters)."""
    return scoped_name(cluster, upstream.repository_suffix)


def docker_host(region: str) -> str:
    """Artifact Registry's Docker host of a region
    (https://cloud.google.com/artifact-registry/docs/docker/names)."""
    return f"{region}-docker.pkg.dev"


@dataclass(frozen=True)
class RegistryMirror:
    """The remote repositories of one cluster: where its pods read the upstreams' images."""

    project: str
    region: str
    cluster: str

    def repository_url(self, upstream: Upstream) -> str:
        return f"{docker_host(self.region)}/{self.project}/{mirror_repository_id(self.cluster, upstream)}"

    def resolve(self, ref: str) -> str:
        """`ref` as this cluster's pods pull it: through its remote repository when the image's
        registry is proxied, as written otherwise."""
        image = parse_reference(ref)
        upstream = UPSTREAMS_BY_REGISTRY.get(image.registry)
        if upstream is None:
            return ref
        return f"{self.repository_url(upstream)}/{image.path}{image.suffix}"


def resolve(ref: str, mirror: RegistryMirror | None) -> str:
    """`ref` through `mirror`, or unchanged where there is none (an existing cluster's pods)."""
    return ref if mirror is None else mirror.resolve(ref)


def in_artifact_registry(ref: str) -> bool:
    """Whether the image is in Artifact Registry (`<location>-docker.pkg.dev`), so GKE can stream it."""
    return parse_reference(ref).registry.endswith("-docker.pkg.dev")


# gke-disk-image-builder: builds a Compute Engine disk image that holds container images, for a node
# pool's secondary boot disks (ai-on-gke/tools:gke-disk-image-builder/README.md and cli/main.go@dd19189;
# https://cloud.google.com/kubernetes-engine/docs/how-to/data-container-image-preloading). Its Go module
# is the gke-disk-image-builder folder; its VM has no external address, so it runs on the stack's own
# network (Private Google Access and Cloud NAT); it refuses an image name that exists. Its 20-minute
# default timeout is short for a NeMo image of tens of gigabytes.
DISK_IMAGE_BUILDER_REPOSITORY = "https://github.com/ai-on-gke/tools"
DISK_IMAGE_BUILDER = "go -C tools/gke-disk-image-builder run ./cli"
DISK_IMAGE_BUILD_TIMEOUT = "90m"
# Room for the image's unpacked layers: NeMo containers are reported at 29-36 GB on disk
# (NVIDIA-NeMo/Speech#11824; the gpt_oss 25.07 variant 36.4 GB).
PRELOAD_DISK_SIZE_GB = 100


def preload_disk_image(cluster: str, pulled_as: str) -> str:
    """The name of the disk image that preloads the reference the pods pull (`pulled_as`) for a
    cluster's pools: RFC 1035, 63 characters, one name per reference (a tag names whatever it points
    at when the image is built; a digest pins the content)."""
    image = parse_reference(pulled_as)
    readable = re.sub(r"[^a-z0-9]+", "-", f"{image.path.rsplit('/', 1)[-1]}-{image.tag or 'digest'}".lower())
    digest = hashlib.sha256(pulled_as.encode()).hexdigest()[:8]
    return scoped_name(cluster, readable.strip("-"), digest)


def preload_disk_path(project: str, disk_image: str) -> str:
    """A disk image as a node pool's secondary boot disk names it (global images of the project)."""
    return f"projects/{project}/global/images/{disk_image}"


def preload_build_command(
    project: str, zone: str, *, network: str, disk_image: str, pulled_as: str, logs_bucket: str
) -> str:
    """The one command that builds `disk_image` holding `pulled_as` (the reference the pods pull), on
    the cluster's network (named like its subnet), from a clone of the builder's repository."""
    auth = "ServiceAccountToken" if in_artifact_registry(pulled_as) else "None"
    return (
        f"git clone --depth 1 {DISK_IMAGE_BUILDER_REPOSITORY} tools && {DISK_IMAGE_BUILDER} "
        f"--project-name={project} --zone={zone} --network={network} --subnet={network} "
        f"--image-name={disk_image} --container-image={pulled_as} --image-pull-auth={auth} "
        f"--disk-size-gb={PRELOAD_DISK_SIZE_GB} --timeout={DISK_IMAGE_BUILD_TIMEOUT} "
        f"--gcs-path=gs://{logs_bucket}/disk-image-builder"
    )
