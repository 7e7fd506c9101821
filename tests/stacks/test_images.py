"""Where a stack's pods get their images: the cluster's remote repositories, image streaming and
preloaded secondary boot disks, each requirement checked before anything is registered."""

from __future__ import annotations

from typing import Any

import pytest

from config.loader import parse_stack_config
from facts.gke import IMAGE_STREAMING_API, PRELOAD_MIN_GKE_VERSION
from facts.registries import UPSTREAMS, parse_reference, preload_disk_image
from harness.mocks import RecordedResource
from harness.runner import StackFailed, StackRun, load_stack_values, run_stack, stack_names, stack_with
from harness.stackfile import to_pulumi_config
from stacks.cluster import minimum_gke_version
from tests.conftest import NODE_POOL, gpu_pools, issue_for, rejected

REPOSITORY = "gcp:artifactregistry/repository:Repository"
# A MultiKueue manager's runs are copied to whichever worker takes them: they name their images as
# published (test_a_dispatched_run_names_its_image_as_published).
GKE_STACKS = [s for s in stack_names() if not s.startswith(("existing", "bootstrap", "run-", "manager"))]
NEMO = "nvcr.io/nvidia/nemo:26.02"


def pod_images(run: StackRun) -> list[str]:
    """Every container image of every pod template the stack renders."""
    found: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            for key in ("containers", "initContainers"):
                found.extend(c["image"] for c in value.get(key) or [] if isinstance(c, dict) and "image" in c)
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    for resource in run.kubernetes_objects:
        walk(run.manifest(resource))
    return found


def streaming_api(run: StackRun) -> list[RecordedResource]:
    """The Container File System API services the stack enables."""
    return [s for s in run.of_type("gcp:projects/service:Service") if s.inputs["service"] == IMAGE_STREAMING_API]


def remote_repositories(run: StackRun) -> dict[str, dict[str, Any]]:
    return {r.inputs["remoteRepositoryConfig"]["description"]: r.inputs for r in run.of_type(REPOSITORY)}


@pytest.mark.parametrize("stack", GKE_STACKS)
def test_no_pod_of_a_gke_stack_pulls_from_a_registry_outside_google(render: Any, stack: str) -> None:
    """nvcr.io and Docker Hub rate-limit anonymous pulls per address, and every node of a cluster shares
    its NAT addresses: each such image comes through the cluster's remote repository in its region
    (https://cloud.google.com/artifact-registry/docs/repositories/remote-overview)."""
    run = render(stack)
    repositories = remote_repositories(run)
    assert set(repositories) == {u.registry for u in UPSTREAMS}
    region = run.one("gcp:container/cluster:Cluster").inputs["location"].rsplit("-", 1)[0]
    for inputs in repositories.values():
        assert (inputs["mode"], inputs["format"]) == ("REMOTE_REPOSITORY", "DOCKER")
        assert inputs["location"] in (region, run.one("gcp:container/cluster:Cluster").inputs["location"])
    for image in pod_images(run):
        registry = parse_reference(image).registry
        assert registry.endswith(("-docker.pkg.dev", "gcr.io", "registry.k8s.io")), image


def test_the_remote_repositories_proxy_ngc_and_docker_hub(render: Any) -> None:
    repositories = remote_repositories(render("a3ultra"))
    assert repositories["nvcr.io"]["remoteRepositoryConfig"]["commonRepository"] == {"uri": "https://nvcr.io"}
    hub = repositories["docker.io"]["remoteRepositoryConfig"]["dockerRepository"]
    assert hub == {"publicRepository": "DOCKER_HUB"}
    # Two clusters of one project and region never claim one repository ID.
    assert all(r["repositoryId"].startswith("nemo-a3ultra-") for r in repositories.values())


def test_without_the_mirror_pods_pull_as_the_references_say(render: Any) -> None:
    run = render("dev", values=stack_with("dev", imageMirror=False))
    assert not run.of_type(REPOSITORY)
    assert any(image.startswith("nvcr.io/nvidia/nemo:") for image in pod_images(run))


def test_gpu_pools_stream_images_and_the_nodes_wait_for_what_streaming_needs(render: Any) -> None:
    """Image streaming needs the Container File System API and a node account that may consume it
    (https://cloud.google.com/kubernetes-engine/docs/how-to/image-streaming#requirements); the node
    pool setting is updated in place (terraform-provider-google node_config.go@e03b762: gcfs_config is
    not ForceNew; nodePoolNodeConfigUpdate sends UpdateNodePoolRequest.GcfsConfig)."""
    run = render("a3ultra")
    for pool in gpu_pools(run):
        assert pool.inputs["nodeConfig"]["gcfsConfig"] == {"enabled": True}
        assert "secondaryBootDisks" not in pool.inputs["nodeConfig"]
    api = run.one("gcp:projects/service:Service", "cluster-services-containerfilesystem")
    assert api.inputs["service"] == IMAGE_STREAMING_API and api.inputs["disableOnDestroy"] is False
    cluster = run.one("gcp:container/cluster:Cluster")
    assert run.depends_on(cluster, api)
    for repository in run.of_type(REPOSITORY):
        assert run.depends_on(cluster, repository)
    off = render("a3ultra", values=stack_with("a3ultra", gpuPools=[{**pool_of("a3ultra"), "imageStreaming": False}]))
    assert [p.inputs["nodeConfig"]["gcfsConfig"] for p in gpu_pools(off)] == [{"enabled": False}]
    assert not streaming_api(off)


def pool_of(stack: str) -> dict[str, Any]:
    return dict(load_stack_values(stack)["nemo-gke:gpuPools"][0])


def test_a_preloaded_pool_reads_its_image_from_a_secondary_boot_disk(render: Any) -> None:
    """GKE preloads the image from a disk image in CONTAINER_IMAGE_CACHE mode, from 1.30.1-gke.1329000
    on Container-Optimized OS (https://cloud.google.com/kubernetes-engine/docs/how-to/
    data-container-image-preloading#requirements); the floor joins the cluster's minimum version."""
    values = stack_with("a3ultra", gpuPools=[{**pool_of("a3ultra"), "preloadedImage": NEMO}])
    run = render("a3ultra", values=values)
    (pool,) = gpu_pools(run)
    # Named by the reference the pods pull (through the mirror).
    disk = preload_disk_image("nemo-a3ultra", run.pulled_as(NEMO))
    assert pool.inputs["nodeConfig"]["secondaryBootDisks"] == [
        {"diskImage": f"projects/your-gcp-project/global/images/{disk}", "mode": "CONTAINER_IMAGE_CACHE"}
    ]
    command = run.exports["preloadCommands"][disk]
    assert f"--image-name={disk}" in command
    assert f"--container-image={run.pulled_as(NEMO)}" in command and "--image-pull-auth=ServiceAccountToken" in command
    # The floor joins the cluster's: dev's a3-highgpu-8g needs 1.29.15-gke.2467000 alone.
    dev = load_stack_values("dev")
    preloaded = {**dev, "nemo-gke:gpuPools": [{**pool_of("dev"), "preloadedImage": NEMO}]}
    assert minimum_gke_version(parse_stack_config(to_pulumi_config(dev), stack="dev")) == "1.29.15-gke.2467000"
    assert minimum_gke_version(parse_stack_config(to_pulumi_config(preloaded), stack="dev")) == PRELOAD_MIN_GKE_VERSION


def test_a_preloaded_image_whose_disk_image_is_missing_is_refused_with_the_command_that_builds_it() -> None:
    values = stack_with("a3ultra", imageMirror=False, gpuPools=[{**pool_of("a3ultra"), "preloadedImage": NEMO}])
    disk = preload_disk_image("nemo-a3ultra", NEMO)
    with pytest.raises(StackFailed) as failed:
        run_stack("a3ultra", values=values, missing_images=frozenset({disk}))
    assert failed.value.resources == []
    message = str(failed.value.error)
    assert "nemo-gke:gpuPools[0].preloadedImage" in message and f"needs disk image {disk}" in message
    assert "build it once with: git clone --depth 1 https://github.com/ai-on-gke/tools tools && go -C" in message


def test_preloading_needs_image_streaming() -> None:
    values = stack_with("a3ultra", gpuPools=[{**pool_of("a3ultra"), "preloadedImage": NEMO, "imageStreaming": False}])
    message = issue_for(rejected(values, "a3ultra"), "gpuPools[0].imageStreaming")
    assert "GKE reads secondary boot disks through it" in message
    bad = stack_with("a3ultra", gpuPools=[{**pool_of("a3ultra"), "preloadedImage": "nvcr.io/nvidia/nemo:26.02:x"}])
    assert "not an image reference" in issue_for(rejected(bad, "a3ultra"), "gpuPools[0].preloadedImage")


def test_nothing_but_gpu_pools_change_for_a_stack_without_gpu_pools(render: Any) -> None:
    """A MultiKueue manager has no GPU pool: no image streaming API, but still the mirror its
    controllers' probe pulls through."""
    run = render("manager")
    assert not streaming_api(run)
    assert not run.of_type(NODE_POOL) or all("gcfsConfig" not in p.inputs.get("nodeConfig", {}) for p in gpu_pools(run))


def test_a_dispatched_run_names_its_image_as_published(render: Any) -> None:
    """MultiKueue copies the JobSet's spec to one worker (jobset_multikueue_adapter.go at the pinned
    Kueue): an image through the manager's remote repository would pull across regions, so it stays
    the published reference."""
    run = render("manager")
    images = [i for i in pod_images(run) if "nvidia/nemo" in i]
    assert images and all(i.startswith("nvcr.io/") for i in images)


@pytest.mark.parametrize("stack", [s for s in stack_names() if not s.startswith("bootstrap")])
def test_every_run_of_a_shipped_stack_shows_its_time_to_first_step(render: Any, stack: str) -> None:
    run = render(stack)
    for line in run.exports["summary"]["runs"]:
        names = [t.split(":", 1)[0] for t in line["firstStepTerms"]]
        assert names == ["nodes", "image", "pod start and NCCL", "first step"]
        assert line["firstStepS"] >= 0


def test_the_walkthrough_run_streams_its_image_and_prices_the_wait(render: Any) -> None:
    """dev: 2 static a3-highgpu-8g nodes (up), the NeMo image streamed through the mirror (30 s), no
    published first step for gpt-5b: at least 30 s, at two nodes' on-demand price; without the mirror
    the image is pulled whole (924.4 s)."""
    summary = render("dev").exports["summary"]
    (line,) = summary["runs"]
    assert line["firstStepS"] == pytest.approx(30.0)
    (pool,) = summary["pools"]
    per_node_hour = pool["usdPerHour"] / pool["nodes"]
    assert line["firstStepUsd"] == pytest.approx(30.0 / 3600 * 2 * per_node_hour)
    (pulled,) = render("dev", values=stack_with("dev", imageMirror=False)).exports["summary"]["runs"]
    assert pulled["firstStepS"] == pytest.approx(924.4, abs=0.1)


def test_a_run_whose_image_is_not_its_pools_preloaded_one_is_warned_about(render: Any) -> None:
    values = stack_with("dev", gpuPools=[{**pool_of("dev"), "preloadedImage": NEMO}])
    run = render("dev", values=values)
    (warning,) = [w.message for w in run.warnings if "preloads" in w.message]
    assert warning.startswith(
        f"run gpt5b-demo: pool a3-highgpu preloads {NEMO}, and the run's image nvcr.io/nvidia/nemo:24.07"
    )
    values = stack_with("dev", gpuPools=[{**pool_of("dev"), "preloadedImage": "nvcr.io/nvidia/nemo:24.07"}])
    preloaded = render("dev", values=values)
    assert not [w for w in preloaded.warnings if "preloads" in w.message]
    (line,) = preloaded.exports["summary"]["runs"]
    assert line["firstStepTerms"][1].startswith("image: 0 s (preloaded")


def test_a_stack_that_does_not_ask_for_the_mirror_deploys_as_before(render: Any) -> None:
    """Off by default: upgrading the program changes no deployed stack's pods or pools (enabling image
    streaming updates a pool, and a new image reference replaces every running run's JobSet)."""
    values = {k: v for k, v in load_stack_values("dev").items() if k != "nemo-gke:imageMirror"}
    run = render("dev", values=values)
    assert not run.of_type(REPOSITORY)
    # Left unset, as before: the provider would otherwise update every deployed pool.
    assert all("gcfsConfig" not in p.inputs["nodeConfig"] for p in gpu_pools(run))
    assert not streaming_api(run)
    roles = {m.inputs["role"] for m in run.of_type("gcp:projects/iAMMember:IAMMember")}
    assert "roles/serviceusage.serviceUsageConsumer" not in roles
    assert all(not image.startswith("us-central1-docker.pkg.dev") for image in pod_images(run))


@pytest.mark.parametrize("ref", ["not an image", "../etc/passwd", "a//b"])
def test_a_preloaded_image_that_is_not_an_image_reference_is_refused(ref: str) -> None:
    """Each rendered with no word: the reference grammar's name was anything without `@` or `:`."""
    values = stack_with("a3ultra", gpuPools=[{**pool_of("a3ultra"), "preloadedImage": ref}])
    assert "is not an image reference" in issue_for(rejected(values, "a3ultra"), "gpuPools[0].preloadedImage")
