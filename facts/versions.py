"""Every pinned version the program deploys, in one place.

Each pin names the public document it was taken from. Changing a pin here changes it
everywhere, including the CRD schemas the objects are validated against: those come from the
Go module of the same release (`CRD_MODULES`), downloaded by `make install`.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Image:
    """A container image pinned by tag, or by digest where upstream publishes no tag."""

    repository: str
    tag: str
    source: str
    digest: str | None = None

    @property
    def ref(self) -> str:
        if self.digest:
            return f"{self.repository}@{self.digest}"
        return f"{self.repository}:{self.tag}"


@dataclass(frozen=True)
class HelmChart:
    """A Helm chart pinned by version, pulled from an OCI registry."""

    repository: str
    name: str
    version: str
    source: str

    @property
    def ref(self) -> str:
        return f"{self.repository}/{self.name}"


# Kubernetes minor the rendered objects are validated against (kubernetes-validate);
# GKE's REGULAR channel default at the time of writing.
KUBERNETES_MINOR = "1.34"
# Oldest GKE the platform runs on: training pods use native sidecar containers, on by
# default from Kubernetes 1.29 (https://kubernetes.io/docs/concepts/workloads/pods/sidecar-containers/).
PLATFORM_MIN_GKE_VERSION = "1.29.0-gke.0"
# Flex-start (and queued provisioning on flex-start VMs) needs at least this version.
# https://cloud.google.com/kubernetes-engine/docs/concepts/dws#requirements
FLEX_START_MIN_GKE_VERSION = "1.32.2-gke.1652000"

KUEUE = HelmChart(
    repository="oci://registry.k8s.io/kueue/charts",
    name="kueue",
    version="0.19.2",
    source="https://github.com/kubernetes-sigs/kueue/releases/tag/v0.19.2",
)
JOBSET = HelmChart(
    repository="oci://registry.k8s.io/jobset/charts",
    name="jobset",
    version="0.12.0",
    source="https://github.com/kubernetes-sigs/jobset/releases/tag/v0.12.0",
)

# NVIDIA's DRA driver for GPUs, with only its ComputeDomain part enabled: IMEX channels for
# NVLink across the nodes of a GB200 NVL72 domain (GKE's device plugin keeps serving the GPUs).
# Renamed from nvidia-dra-driver-gpu and moved to registry.k8s.io at 0.4.0; it needs Kubernetes
# 1.34.2 (DRA's resource.k8s.io/v1) and an NVIDIA driver of at least 570.158.01.
# NVIDIA/k8s-dra-driver-gpu (now kubernetes-sigs/dra-driver-nvidia-gpu):docs/install.md,
# docs/prerequisites.md@2240711. 0.4.1 (2026-06-30) keeps a stale prepare retry from recreating a
# ComputeDomain's checkpoint for a claim it no longer prepares (#1188, #1162).
NVIDIA_DRA_DRIVER = HelmChart(
    repository="oci://registry.k8s.io/dra-driver-nvidia/charts",
    name="dra-driver-nvidia-gpu",
    version="0.4.1",
    source="https://github.com/kubernetes-sigs/dra-driver-nvidia-gpu/releases/tag/v0.4.1",
)
# Oldest Kubernetes the driver's ComputeDomains run on (docs/prerequisites.md@2240711).
NVIDIA_DRA_DRIVER_MIN_GKE_VERSION = "1.34.2-gke.0"


@dataclass(frozen=True)
class CrdModule:
    """A Go module that ships the CustomResourceDefinitions of some API groups. `make install`
    downloads it from the Go module proxy (`go mod download`) and caches the schemas by version;
    every object of those groups is validated against them."""

    module: str
    version: str
    # The module's go.sum hash (what `go mod download -json` reports as Sum): a download that
    # hashes otherwise is refused. A new version needs its new hash here.
    sum: str
    # Folder of the CRD files inside the module.
    path: str
    groups: tuple[str, ...]
    source: str
    # CustomResourceDefinitions (by name) the program applies itself, from this module.
    applied: tuple[str, ...] = ()


def _chart_crds(chart: HelmChart, module: str, module_sum: str, group: str, applied: tuple[str, ...] = ()) -> CrdModule:
    """The CRDs of a chart's release: the Go module tagged v<chart version>."""
    return CrdModule(
        module, f"v{chart.version}", module_sum, "config/components/crd/bases", (group,), chart.source, applied
    )


# The JobSet chart ships its CRD in `crds/`, which Helm installs once and never upgrades ("There
# is no support at this time for upgrading or deleting CRDs using Helm", helm-www
# chart_best_practices/custom_resource_definitions.md), and no value renders it as a template.
# The release skips it and the program applies the CRD of the same tag itself (the module's
# config/components/crd/bases file is the chart's crds/ file), so bumping JOBSET upgrades it.
# Kueue's chart renders its CRDs as templates (charts/kueue/templates/crd/): they upgrade with it.
JOBSET_CRD = "jobsets.jobset.x-k8s.io"
JOBSET_CRDS = _chart_crds(
    JOBSET,
    "sigs.k8s.io/jobset",
    "h1:YYPuV0px8Ongq/RXmJg6V0w2UC67aiR+rCMD06vhQQQ=",
    "jobset.x-k8s.io",
    applied=(JOBSET_CRD,),
)


CRD_MODULES = (
    _chart_crds(KUEUE, "sigs.k8s.io/kueue", "h1:mPNzr37u0nwI7ikST5QQl5gg6EgtYOAvC9ZbTgywdN8=", "kueue.x-k8s.io"),
    JOBSET_CRDS,
    # GKE installs the Network and GKENetworkParamSet CRDs itself; the module is only where their
    # schemas are published. v0.2.5 has the GKENetworkParamSet schema of commit 34c617f, which
    # this program was written against, and a Network schema that only adds optional fields.
    # The driver's chart ships its CRDs in crds/, which the module of the chart's tag holds.
    CrdModule(
        "sigs.k8s.io/dra-driver-nvidia-gpu",
        f"v{NVIDIA_DRA_DRIVER.version}",
        "h1:up4wTyW4UxLDB8I+pDOhQ1+F3Ol2f/qHgN4v6vlcPEc=",
        "deployments/helm/dra-driver-nvidia-gpu/crds",
        ("resource.nvidia.com",),
        NVIDIA_DRA_DRIVER.source,
    ),
    CrdModule(
        "github.com/GoogleCloudPlatform/gke-networking-api",
        "v0.2.5",
        "h1:HD9wBh5JzUfeanU9HkCqqLnuWCbEHkQUCiQGNmcZJZg=",
        "config/crds",
        ("networking.gke.io",),
        "https://pkg.go.dev/github.com/GoogleCloudPlatform/gke-networking-api@v0.2.5",
    ),
)

# The TCPX plugin and its receive-datapath daemon are released as a pair.
_GPUDIRECT_SOURCE = (
    "GoogleCloudPlatform/container-engine-accelerators:gpudirect-tcpx/nccl-tcpx-installer.yaml and "
    "gpudirect-tcpx/nccl-test-latest.yaml@992db81"
)
TCPX_PLUGIN = Image(
    "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpx/nccl-plugin-gpudirecttcpx-dev",
    "v3.1.9",
    _GPUDIRECT_SOURCE,
)
TCPX_RXDM = Image(
    "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpx/tcpgpudmarxd-dev",
    "v2.0.12",
    _GPUDIRECT_SOURCE,
)
# TCPXO on the nodes: the installer DaemonSet (host preparation: the dmabuf import helper and
# /dev/aperture_devices) at CEA's current release, as cluster-toolkit installs it.
TCPXO_PLUGIN = Image(
    "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpxo/nccl-plugin-gpudirecttcpx-dev",
    "v1.0.15",
    "GoogleCloudPlatform/container-engine-accelerators:gpudirect-tcpxo/README.md@992db81",
)
# TCPXO in the training pod: the plugin the pod installs for itself and the RxDM sidecar, as one
# release of CEA's table (the daemon "is coupled with the NCCL plugin installer version"): the
# newest pair of an A3 Mega training recipe (Llama 3 70B with checkpoints to Cloud Storage), CEA's
# Nov 27, 2024 release, which CEA's own NCCL test ran together (nccl-test.yaml@4aeee0d). It
# installs NCCL 2.21.5, as the NeMo 24.07 recipes' v1.0.3 and v1.0.9 did, and its daemon writes
# the startup probe's health file (from v1.0.11).
_TCPXO_PAIR = (
    "AI-Hypercomputer/gpu-recipes:training/a3mega/llama3_70b/nemo-gke-gcs/nemo2507/recipe/values.yaml@2e1fd5e; "
    "GoogleCloudPlatform/container-engine-accelerators:gpudirect-tcpxo/README.md@992db81 (Nov 27, 2024) and "
    "gpudirect-tcpxo/nccl-test.yaml@4aeee0d"
)
TCPXO_RECIPE_PLUGIN = Image(
    "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpxo/nccl-plugin-gpudirecttcpx-dev", "v1.0.7", _TCPXO_PAIR
)
TCPXO_RECIPE_RXDM = Image("us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpxo/tcpgpudmarxd-dev", "v1.0.13_1", _TCPXO_PAIR)
# One gIB image serves both RDMA machines (H200 and B200 node affinity upstream).
GIB_PLUGIN = Image(
    "us-docker.pkg.dev/gce-ai-infra/gpudirect-gib/nccl-plugin-gib",
    "v1.1.1",
    "GoogleCloudPlatform/container-engine-accelerators:gpudirect-rdma/nccl-rdma-installer.yaml@992db81",
)
# gIB at v1.1.0, as the recipes pin it for the training pods' own install (network.gibVersion:
# A3 Ultra's NeMo 26.02 recipes, A4's NeMo 25.07 ones); A4's NeMo 26.02 recipes pin GIB_PLUGIN.
GIB_POD_V110 = Image(
    "us-docker.pkg.dev/gce-ai-infra/gpudirect-gib/nccl-plugin-gib",
    "v1.1.0",
    "AI-Hypercomputer/gpu-recipes:training/a3ultra/llama3_70b/megatron-bridge-gke/nemo2602/"
    "64gpus-bf16-seq8192-gbs256/recipe/values.yaml and training/a4/llama31_405b/nemo-gke/nemo2507/"
    "128gpus-fp8-gbs128/recipe/recipe/values.yaml@2e1fd5e",
)
# gIB at v1.0.5, as A3 Ultra's resiliency recipes pin it for their image (RESILIENCY).
GIB_POD_V105 = Image(
    "us-docker.pkg.dev/gce-ai-infra/gpudirect-gib/nccl-plugin-gib",
    "v1.0.5",
    "AI-Hypercomputer/gpu-recipes:training/a3ultra/llama31_405b/nemo-gke-resiliency/nemo2412/recipe/values.yaml@2e1fd5e",
)
# Arm hosts (A4X) take gIB from its own repository, at the version CEA's A4X installer pins.
GIB_ARM64_PLUGIN = Image(
    "us-docker.pkg.dev/gce-ai-infra/gpudirect-gib/nccl-plugin-gib-arm64",
    "v1.1.0",
    "GoogleCloudPlatform/container-engine-accelerators:gpudirect-rdma/nccl-rdma-installer-a4x.yaml@992db81",
)
# gIB with nccl-tests, MPI and an ssh server: the image CEA's RDMA NCCL test runs.
GIB_DIAGNOSTIC = Image(
    "us-docker.pkg.dev/gce-ai-infra/gpudirect-gib/nccl-plugin-gib-diagnostic",
    "v1.1.1",
    "GoogleCloudPlatform/container-engine-accelerators:gpudirect-rdma/nccl-test.yaml@992db81",
)
# The diagnostic image of gIB v1.1.0, which cluster-toolkit's A3 Ultra and A4 NCCL tests run.
GIB_DIAGNOSTIC_V110 = Image(
    "us-docker.pkg.dev/gce-ai-infra/gpudirect-gib/nccl-plugin-gib-diagnostic",
    "v1.1.0",
    "GoogleCloudPlatform/cluster-toolkit:examples/gke-a3-ultragpu/nccl-jobset-example.yaml and "
    "examples/gke-a4/nccl-jobset-example.yaml@1047080",
)
# The same for Arm hosts: CEA's A4X NCCL test, whose pods share a ComputeDomain.
GIB_ARM64_DIAGNOSTIC = Image(
    "us-docker.pkg.dev/gce-ai-infra/gpudirect-gib/nccl-plugin-gib-diagnostic-arm64",
    "v1.1.0",
    "GoogleCloudPlatform/container-engine-accelerators:gpudirect-rdma/nccl-test-imex-a4x.yaml@992db81",
)
# Upstream pins this image by digest only.
NRI_DEVICE_INJECTOR = Image(
    "gcr.io/gke-release/nri-device-injector",
    "",
    "GoogleCloudPlatform/container-engine-accelerators:nri_device_injector/nri-device-injector.yaml@992db81",
    digest="sha256:6e79483d52abdc28454bf186320b10a56b0f117a10e8d65d5c74dbb821a76970",
)

# Keeps an installer DaemonSet's pod alive after its init containers have done the work.
PAUSE = Image(
    "gke.gcr.io/pause",
    "3.8",
    "GoogleCloudPlatform/container-engine-accelerators:gpudirect-tcpx/nccl-tcpx-installer.yaml@992db81",
    digest="sha256:880e63f94b145e46f1b1082bb71b85e21f16b99b180b9996407d61240ceb9830",
)
# Shell with nsenter for the TCPXO host preparation (upstream uses an untagged ubuntu).
UBUNTU = Image(
    "ubuntu",
    "24.04",
    "https://hub.docker.com/_/ubuntu; the host step of "
    "GoogleCloudPlatform/container-engine-accelerators:gpudirect-tcpxo/nccl-tcpxo-installer.yaml@992db81",
)
# NeMo 1.x (Hydra configs, megatron_gpt_pretraining.py): the image the public GPT-3 175B
# recipe validated. NeMo 2.0 (NeMo-Run `llm pretrain`): NeMo 2.4.
NEMO_1 = Image(
    "nvcr.io/nvidia/nemo",
    "24.07",
    "AI-Hypercomputer/gpu-recipes:src/docker/nemo-24.07/nemo.Dockerfile@2e1fd5e",
)
NEMO_2 = Image(
    "nvcr.io/nvidia/nemo",
    "25.07",
    "AI-Hypercomputer/gpu-recipes:training/a4/llama31_405b/nemo-gke/nemo2507/128gpus-fp8-gbs128/recipe/values.yaml@2e1fd5e",
)
# The NeMo Framework container whose Megatron-Bridge (0.3.0, with Megatron Core 0.16) the
# Megatron-Bridge recipes of A3 Ultra and A4 run; published by tag only (no digest in any public
# recipe). NVIDIA-NeMo/Megatron-Bridge:docs/releases/software-versions.md@21b02e0 lists the versions.
NEMO_2602 = Image(
    "nvcr.io/nvidia/nemo",
    "26.02",
    "AI-Hypercomputer/gpu-recipes:training/a3ultra/llama3_70b/megatron-bridge-gke/nemo2602/"
    "64gpus-bf16-seq8192-gbs256/recipe/values.yaml@2e1fd5e",
)
# The Megatron-Bridge and Megatron Core releases inside NEMO_2602, on PyPI: the launcher's
# configuration step is checked against them (make runtime-check).
MEGATRON_BRIDGE = "0.3.0"
MEGATRON_CORE = "0.16.0"
# The Google Cloud Resiliency supervisor and its training launcher (resiliency/launcher.py under
# /workspace): the image of the A3 Ultra and A3 Mega resiliency recipes, published by tag only.
RESILIENCY = Image(
    "us-central1-docker.pkg.dev/deeplearning-images/reproducibility/pytorch-gpu-goodput",
    "nemo24.12.01-2025-08-07",
    "AI-Hypercomputer/gpu-recipes:training/a3ultra/llama31_405b/nemo-gke-resiliency/nemo2412/recipe/"
    "values-supervisor.yaml and values.yaml@61b3f8a",
)
# GPT-2 BPE tokenizer files in a public bucket, mounted read-only through Cloud Storage FUSE as
# the A3 Mega GPT-3 recipe mounts them (bucket, folder; the NeMo configs name the two files).
# AI-Hypercomputer/gpu-recipes:training/a3mega/gpt3_175b/nemo-gke/nemo2507/recipe/values.yaml@2e1fd5e
# and src/frameworks/a3mega/nemo-configs/gpt3-175b-256gpus-fp8.yaml (vocab_file, merge_file)
GPT2_TOKENIZER_BUCKET = "cloud-samples-data"
GPT2_TOKENIZER_FOLDER = "third-party/tokenizers/gpt2"
GPT2_VOCAB_FILE = "gpt2-vocab.json"
GPT2_MERGES_FILE = "gpt2-merges.txt"
TENSORBOARD = Image(
    "tensorflow/tensorflow",
    "2.18.0",
    "https://hub.docker.com/r/tensorflow/tensorflow (CPU image; ships the tensorboard CLI)",
)
# Small image with a shell and curl, used by the Kueue webhook readiness gate.
CURL = Image(
    "curlimages/curl",
    "8.11.1",
    "https://hub.docker.com/r/curlimages/curl",
)


def gke_version_key(version: str) -> tuple[int, ...]:
    """Sortable key of a GKE version such as 1.34.1-gke.1829001."""
    base, _, build = version.partition("-gke.")
    try:
        return (*(int(part) for part in base.split(".")), int(build or 0))
    except ValueError:
        raise ValueError(f"{version!r} is not a GKE version like 1.34.1-gke.1829001") from None
