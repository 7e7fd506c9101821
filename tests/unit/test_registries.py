"""Image references as the container runtime reads them, and through a cluster's remote repositories."""

from __future__ import annotations

import pytest

from facts import versions
from facts.registries import (
    UPSTREAMS,
    RegistryMirror,
    in_artifact_registry,
    parse_reference,
    preload_build_command,
    preload_disk_image,
    resolve,
)
from facts.versions import Image

MIRROR = RegistryMirror("proj-1", "us-east5", "nemo-dev")
NVCR = "us-east5-docker.pkg.dev/proj-1/nemo-dev-nvcr"
HUB = "us-east5-docker.pkg.dev/proj-1/nemo-dev-docker-hub"


@pytest.mark.parametrize(
    ("ref", "registry", "path"),
    [
        # github.com/distribution/reference normalize.go: a first component without '.' or ':' (and not
        # localhost) is a Docker Hub path; a single component is an official image under library/.
        ("ubuntu:24.04", "docker.io", "library/ubuntu"),
        ("tensorflow/tensorflow:2.18.0", "docker.io", "tensorflow/tensorflow"),
        ("docker.io/curlimages/curl:8.11.1", "docker.io", "curlimages/curl"),
        ("index.docker.io/library/ubuntu:24.04", "docker.io", "library/ubuntu"),
        ("nvcr.io/nvidia/nemo:26.02", "nvcr.io", "nvidia/nemo"),
        ("localhost:5000/team/image:1", "localhost:5000", "team/image"),
        ("localhost/image:1", "localhost", "image"),
    ],
)
def test_a_reference_names_its_registry_as_the_runtime_reads_it(ref: str, registry: str, path: str) -> None:
    image = parse_reference(ref)
    assert (image.registry, image.path) == (registry, path)


def test_public_images_outside_google_are_pulled_through_the_clusters_remote_repositories() -> None:
    digest = "sha256:" + "ab" * 32
    assert MIRROR.resolve("nvcr.io/nvidia/nemo:26.02") == f"{NVCR}/nvidia/nemo:26.02"
    assert MIRROR.resolve(f"nvcr.io/nvidia/nemo:26.02@{digest}") == f"{NVCR}/nvidia/nemo:26.02@{digest}"
    assert MIRROR.resolve("ubuntu:24.04") == f"{HUB}/library/ubuntu:24.04"
    assert MIRROR.resolve(versions.TENSORBOARD.ref) == f"{HUB}/tensorflow/tensorflow:2.18.0"
    # Google's registries serve from its network already; other registries have no remote repository here.
    for ref in (versions.GIB_PLUGIN.ref, versions.PAUSE.ref, versions.NRI_DEVICE_INJECTOR.ref, "ghcr.io/org/x:1"):
        assert MIRROR.resolve(ref) == ref
    assert resolve("ubuntu:24.04", None) == "ubuntu:24.04"


def test_every_pinned_image_parses_and_those_from_proxied_registries_become_streamable() -> None:
    proxied = {u.registry for u in UPSTREAMS}
    for image in (v for v in vars(versions).values() if isinstance(v, Image)):
        reference = parse_reference(image.ref)
        pulled = MIRROR.resolve(image.ref)
        if reference.registry in proxied:
            assert in_artifact_registry(pulled), image.ref
        else:
            assert pulled == image.ref


def test_a_malformed_reference_is_refused() -> None:
    with pytest.raises(ValueError, match="not an image reference"):
        parse_reference("nvcr.io/nvidia/nemo:26.02:extra")


def test_a_disk_image_is_named_by_the_image_it_holds() -> None:
    one = preload_disk_image("nemo-dev", "nvcr.io/nvidia/nemo:26.02")
    assert one.startswith("nemo-dev-nemo-26-02-") and len(one) <= 63
    assert preload_disk_image("nemo-dev", "nvcr.io/nvidia/nemo:26.02") == one
    assert preload_disk_image("nemo-dev", "nvcr.io/nvidia/nemo:25.11") != one
    long = preload_disk_image("a" * 24, "nvcr.io/nvidia/" + "n" * 60 + ":26.02")
    assert len(long) <= 63 and long[0].isalpha() and not long.endswith("-")


def test_the_disk_image_builder_pulls_as_the_pods_do_with_credentials_only_for_artifact_registry() -> None:
    mirrored = preload_build_command(
        "p", "us-east5-b", network="nemo-dev", disk_image="img", pulled_as=f"{NVCR}/nvidia/nemo:26.02", logs_bucket="b"
    )
    assert f"--container-image={NVCR}/nvidia/nemo:26.02" in mirrored
    assert "--image-pull-auth=ServiceAccountToken" in mirrored and "--image-name=img" in mirrored
    assert "--gcs-path=gs://b/" in mirrored and "--zone=us-east5-b" in mirrored
    # The builder's VM has no external address: it runs on the cluster's network, from the builder's module.
    assert "--network=nemo-dev --subnet=nemo-dev" in mirrored
    assert mirrored.startswith("git clone --depth 1 https://github.com/ai-on-gke/tools tools && go -C tools/")
    direct = preload_build_command(
        "p", "us-east5-b", network="n", disk_image="img", pulled_as="nvcr.io/nvidia/nemo:26.02", logs_bucket="b"
    )
    assert "--image-pull-auth=None" in direct
