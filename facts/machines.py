"""Facts about the GPU machines the program supports, in one table.

Every record names the public documents its facts came from (`sources`, keyed by field).
Nothing outside this module restates a GPU count, a NIC count, an MTU or an image pair:
stack files name a machine type and everything else is derived from here. Versions are
pinned in `facts.versions`; this module says which pins belong to which machine.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from enum import StrEnum
from types import MappingProxyType

from facts import versions
from facts.kubernetes import ARM64_TAINT, Taint, TopologyLevel
from facts.versions import Image


class GpuDirect(StrEnum):
    """How GPUs on different nodes exchange data."""

    NONE = "none"
    TCPX = "tcpx"  # GPUDirect-TCPX, a3-highgpu-8g
    TCPXO = "tcpxo"  # GPUDirect-TCPXO, a3-megagpu-8g
    RDMA = "rdma"  # GPUDirect RDMA over RoCE with the gIB NCCL plugin: A3 Ultra and A4


# Container-Optimized OS with containerd: the node image GPUDirect on GKE runs on.
COS_CONTAINERD = "COS_CONTAINERD"


class CpuArch(StrEnum):
    """A node's CPU architecture, as the `kubernetes.io/arch` node label and image manifests name it."""

    AMD64 = "amd64"
    ARM64 = "arm64"


class Precision(StrEnum):
    BF16 = "bf16"
    FP8 = "fp8"


_RECIPES_PEAKS = "AI-Hypercomputer/gpu-recipes:src/utils/training_metrics/src/data_defs.py@2e1fd5e"
_NVIDIA_TENSOR_CORE = "https://resources.nvidia.com/en-us-tensor-core (dense = half the sparse figure)"
_CUDA_GPUS = "https://developer.nvidia.com/cuda-gpus (compute capability per GPU)"
_NVL72 = "https://www.nvidia.com/en-us/data-center/gb200-nvl72/ (specifications)"


@dataclass(frozen=True)
class Accelerator:
    """A GPU model: its memory, its dense (no sparsity) peak throughput per precision, and its
    CUDA compute capability, which is what software keys its choices on (a Hopper GPU is 9.0, a
    Blackwell B200 10.0): a GPU of a new generation is a new record, not new code."""

    name: str
    # NVIDIA's architecture name, for people: decisions read `compute_capability`.
    architecture: str
    compute_capability: tuple[int, int]
    memory_gb: int
    peak_dense_tflops: Mapping[Precision, float]
    sources: Mapping[str, str]
    # NVLink bandwidth of one GPU in each direction, GB/s (NVIDIA quotes both directions summed).
    nvlink_gbytes_per_s: float = 0.0

    def peak_tflops(self, precision: Precision) -> float:
        try:
            return self.peak_dense_tflops[precision]
        except KeyError:
            known = ", ".join(p.value for p in self.peak_dense_tflops)
            raise ValueError(f"{self.name} has no published dense {precision.value} peak; known: {known}") from None


ACCELERATORS: Mapping[str, Accelerator] = {
    a.name: a
    for a in (
        Accelerator(
            "h100",
            "Hopper",
            (9, 0),
            80,
            {Precision.BF16: 989.0, Precision.FP8: 1978.0},
            {
                "peak_dense_tflops": f"{_RECIPES_PEAKS}; {_NVIDIA_TENSOR_CORE}",
                "memory_gb": "https://www.nvidia.com/en-us/data-center/h100/",
                "compute_capability": _CUDA_GPUS,
                "nvlink_gbytes_per_s": "https://www.nvidia.com/en-us/data-center/h100/ (NVLink 900 GB/s)",
            },
            nvlink_gbytes_per_s=450.0,
        ),
        Accelerator(
            "h200",
            "Hopper",
            (9, 0),
            141,
            {Precision.BF16: 989.0, Precision.FP8: 1978.0},
            {
                "peak_dense_tflops": _RECIPES_PEAKS,
                "memory_gb": "https://www.nvidia.com/en-us/data-center/h200/",
                "compute_capability": _CUDA_GPUS,
                "nvlink_gbytes_per_s": "https://www.nvidia.com/en-us/data-center/h200/ (NVLink 900 GB/s)",
            },
            nvlink_gbytes_per_s=450.0,
        ),
        Accelerator(
            "b200",
            "Blackwell",
            (10, 0),
            180,
            {Precision.BF16: 2250.0, Precision.FP8: 4500.0},
            {
                "peak_dense_tflops": f"{_RECIPES_PEAKS}; https://www.nvidia.com/en-us/data-center/hgx/",
                "memory_gb": "https://www.nvidia.com/en-us/data-center/hgx/",
                "compute_capability": _CUDA_GPUS,
                "nvlink_gbytes_per_s": "https://www.nvidia.com/en-us/data-center/hgx/ (B200: 1.8 TB/s NVLink)",
            },
            nvlink_gbytes_per_s=900.0,
        ),
        # A4X's GPU: the B200 die pair of a Grace Blackwell superchip, run at a higher power than
        # HGX B200 (so higher peaks); NVIDIA publishes the rack's figures (GB200 NVL72: 360 PFLOPS
        # BF16 and 720 PFLOPS FP8 with sparsity, 13.4 TB HBM3e, over 72 GPUs).
        Accelerator(
            "gb200",
            "Blackwell",
            (10, 0),
            186,
            {Precision.BF16: 2500.0, Precision.FP8: 5000.0},
            {
                "peak_dense_tflops": f"{_NVL72} (dense = half the sparse figure, per GPU = rack / 72)",
                "memory_gb": f"{_NVL72} (13.4 TB / 72 GPUs)",
                "compute_capability": _CUDA_GPUS,
                "nvlink_gbytes_per_s": f"{_NVL72} (NVLink 1.8 TB/s per GPU)",
            },
            nvlink_gbytes_per_s=900.0,
        ),
        Accelerator(
            "a100",
            "Ampere",
            (8, 0),
            80,
            {Precision.BF16: 312.0},
            {
                "peak_dense_tflops": f"{_RECIPES_PEAKS}; {_NVIDIA_TENSOR_CORE}",
                "memory_gb": "https://www.nvidia.com/en-us/data-center/a100/",
                "compute_capability": _CUDA_GPUS,
                "nvlink_gbytes_per_s": "https://www.nvidia.com/en-us/data-center/a100/ (NVLink 600 GB/s)",
            },
            nvlink_gbytes_per_s=300.0,
        ),
    )
}


@dataclass(frozen=True)
class GpuDirectStack:
    """A GPUDirect flavour as the public recipes run it: the NCCL plugin installed on every node,
    what the training pod brings itself (its own copy of a plugin, the receive-datapath daemon
    released with that plugin: the two must match), the training images that pairing was
    validated with, and the environment the recipes tune for it."""

    flavour: GpuDirect
    # Put on every node of the flavour by an installer DaemonSet.
    node_plugin: Image
    # The image the flavour's documented NCCL test runs (nccl-tests, MPI and an ssh server):
    # built for the hosts' CPU architecture, like the node plugin.
    nccl_test_image: Image
    # Installed by the training pod into its own volume, when the recipe pins one.
    pod_plugin: Image | None
    rxdm_sidecar: Image | None
    # Pods attach the GPU NICs through GKE Network objects (multi-networking annotations);
    # a host-network pod sees the node's NICs directly.
    pod_networks: bool
    # Whether the pattern can run training pods on the node's network (TCPXO's recipes always
    # do, RDMA's can, TCPX's sidecar pattern cannot): the resiliency supervisor needs it.
    host_network_pods: bool
    # The sidecar receives GPU device nodes through NRI device injection (not when privileged).
    needs_nri_device_injector: bool
    # The RxDM writes $HEALTH_CHECK_LOG_FILE once ready, for a startup probe (TCPXO RxDM v1.0.11
    # and later: CEA gpudirect-tcpxo/README.md "GKE startup probe support", best-practice.md).
    rxdm_health_check: bool
    # Training images the pod's plugin and sidecar were validated with; empty: any image.
    validated_images: tuple[Image, ...]
    # NCCL and Transformer Engine settings the recipes set for the flavour.
    env: Mapping[str, str]
    sources: Mapping[str, str]
    # What the flavour's reference NeMo recipe tunes that a run's own recipe may set otherwise:
    # Megatron-Bridge's PerfEnvPlugin, where a recipe launches through it (planners.nemo).
    recipe_env: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))


_TCPX_TEST = "GoogleCloudPlatform/container-engine-accelerators:gpudirect-tcpx/nccl-test-latest.yaml@992db81"
# The GKE 1.34+ NCCL configuration (CEA 0e5609b "Finalize NCCL config for GKE 1.34+"): no
# FORCE_ACK, TX_COMPLETION_NANOSLEEP or 8-channel caps any more, and Ring and Tree algorithms.
_TCPX_NCCL_CONFIG = "GoogleCloudPlatform/container-engine-accelerators:gpudirect-tcpx/nccl-config.yaml@992db81"
_A3MEGA_RECIPE = (
    "AI-Hypercomputer/gpu-recipes:training/a3mega/gpt3_175b/nemo-gke/nemo2507/recipe/values.yaml and README.md, "
    "src/helm-charts/a3mega/jobset/templates/workload-jobset.yaml@2e1fd5e"
)
_A3ULTRA_RECIPE = (
    "AI-Hypercomputer/gpu-recipes:training/a3ultra/llama31_405b/nemo-gke/nemo2412/recipe/values.yaml@2e1fd5e"
)
# "The following is needed to prevent send-receive stalling execution" (gpu-recipes
# src/helm-charts/a3mega/nemo-training/templates/nemo-launcher-job.yaml@3d9b014, above these two).
_SM_MARGINS = {"NVTE_FWD_LAYERNORM_SM_MARGIN": "8", "NVTE_BWD_LAYERNORM_SM_MARGIN": "8"}

TCPX_STACK, TCPXO_STACK, RDMA_STACK = (
    GpuDirectStack(
        GpuDirect.TCPX,
        node_plugin=versions.TCPX_PLUGIN,
        nccl_test_image=versions.TCPX_PLUGIN,
        pod_plugin=None,
        rxdm_sidecar=versions.TCPX_RXDM,
        pod_networks=True,
        host_network_pods=False,
        needs_nri_device_injector=True,
        rxdm_health_check=False,  # no probe or health file anywhere in CEA gpudirect-tcpx/
        validated_images=(),
        env={
            # CPU cores serving each NIC's transmit and receive paths on an a3-highgpu-8g.
            "NCCL_GPUDIRECTTCPX_TX_BINDINGS": (
                "eth1:8-21,112-125;eth2:8-21,112-125;eth3:60-73,164-177;eth4:60-73,164-177"
            ),
            "NCCL_GPUDIRECTTCPX_RX_BINDINGS": (
                "eth1:22-35,126-139;eth2:22-35,126-139;eth3:74-87,178-191;eth4:74-87,178-191"
            ),
            "NCCL_GPUDIRECTTCPX_PROGRAM_FLOW_STEERING_WAIT_MICROS": "500000",
            "NCCL_CROSS_NIC": "0",
            "NCCL_ALGO": "Ring,Tree",
            "NCCL_PROTO": "Simple",
            "NCCL_NET_GDR_LEVEL": "PIX",
            "NCCL_P2P_PXN_LEVEL": "0",
            "NCCL_DYNAMIC_CHUNK_SIZE": "524288",
            "NCCL_P2P_NET_CHUNKSIZE": "524288",
            "NCCL_P2P_PCI_CHUNKSIZE": "524288",
            "NCCL_P2P_NVL_CHUNKSIZE": "1048576",
            "NCCL_NSOCKS_PERTHREAD": "4",
            "NCCL_SOCKET_NTHREADS": "1",
            "NCCL_BUFFSIZE": "4194304",
        },
        sources={"node_plugin": _TCPX_TEST, "rxdm_sidecar": _TCPX_TEST, "env": _TCPX_NCCL_CONFIG},
    ),
    GpuDirectStack(
        GpuDirect.TCPXO,
        node_plugin=versions.TCPXO_PLUGIN,
        # The pods' own release: the check tests the plugin and NCCL training loads, with the
        # daemon of the same release, as CEA's test of that release did.
        nccl_test_image=versions.TCPXO_RECIPE_PLUGIN,
        pod_plugin=versions.TCPXO_RECIPE_PLUGIN,
        rxdm_sidecar=versions.TCPXO_RECIPE_RXDM,
        # The recipes run TCPXO on the host network with privileged containers: no NRI annotation.
        pod_networks=False,
        host_network_pods=True,
        needs_nri_device_injector=False,
        # The health file and its startup probe: "GKE startup probe support for the TCPXO-daemon"
        # from v1.0.11 (CEA gpudirect-tcpxo/README.md@992db81, Sept 19, 2024; best-practice.md).
        rxdm_health_check=True,
        # The NeMo 24.07 recipes ran on NCCL 2.21.5 (plugin v1.0.3), the NCCL this pair installs.
        validated_images=(versions.NEMO_1,),
        env={**_SM_MARGINS, "NCCL_DEBUG": "VERSION", "NCCL_ALGO": "Ring,Tree", "NCCL_MIN_NCHANNELS": "4"},
        sources={
            "node_plugin": "GoogleCloudPlatform/container-engine-accelerators:gpudirect-tcpxo/README.md@992db81",
            "nccl_test_image": versions.TCPXO_RECIPE_PLUGIN.source,
            "pod_plugin": versions.TCPXO_RECIPE_PLUGIN.source,
            "rxdm_sidecar": versions.TCPXO_RECIPE_RXDM.source,
            "rxdm_health_check": "GoogleCloudPlatform/container-engine-accelerators:gpudirect-tcpxo/README.md and "
            "best-practice.md@992db81",
            "validated_images": _A3MEGA_RECIPE,
            "env": _A3MEGA_RECIPE,
        },
    ),
    GpuDirectStack(
        GpuDirect.RDMA,
        node_plugin=versions.GIB_PLUGIN,
        nccl_test_image=versions.GIB_DIAGNOSTIC,
        pod_plugin=None,
        rxdm_sidecar=None,
        pod_networks=True,
        host_network_pods=True,
        needs_nri_device_injector=False,
        rxdm_health_check=False,
        validated_images=(),
        env={
            "NVTE_UB_SOCKET_IFNAME": "eth1",  # Transformer Engine's userbuffers bootstrap over the gVNIC
            "NCCL_DEBUG": "VERSION",
            "NCCL_WORK_FIFO_DEPTH": "4194304",
        },
        sources={
            "node_plugin": (
                "GoogleCloudPlatform/container-engine-accelerators:gpudirect-rdma/nccl-rdma-installer.yaml@992db81"
            ),
            "env": _A3ULTRA_RECIPE,
            "recipe_env": _A3ULTRA_RECIPE,
        },
        # The NeMo 24.12 A3 Ultra recipe's margins, a tuning of its own: Megatron-Bridge's
        # PerfEnvPlugin sets 16 (20 with HybridEP) for the recipes launched through it.
        recipe_env=MappingProxyType(_SM_MARGINS),
    ),
)

# GB200 hosts are Arm (Grace): the same gIB pattern, with the plugin built for arm64.
RDMA_ARM64_STACK = replace(
    RDMA_STACK,
    node_plugin=versions.GIB_ARM64_PLUGIN,
    nccl_test_image=versions.GIB_ARM64_DIAGNOSTIC,
    sources={
        **RDMA_STACK.sources,
        "node_plugin": (
            "GoogleCloudPlatform/container-engine-accelerators:gpudirect-rdma/nccl-rdma-installer-a4x.yaml@992db81"
        ),
    },
)


@dataclass(frozen=True)
class MachineType:
    """One GPU machine type as GKE sees it."""

    name: str
    accelerator: Accelerator
    gpus: int
    # Value of the node label cloud.google.com/gke-accelerator and of guest_accelerator.type.
    gke_accelerator: str
    vcpus: int
    # GiB, as Compute Engine reports machine memory.
    memory_gib: int
    # Local SSD disks bundled with the machine; GKE requires this exact count in
    # ephemeral_storage_local_ssd_config (unless `local_ssds_automatic`).
    local_ssds: int
    cpu_arch: CpuArch
    # GPUs one NVLink domain joins: the node's own on an HGX board, more where NVLink spans
    # nodes (GB200 NVL72). Tensor parallelism stays inside it.
    nvlink_domain_gpus: int
    # How GPUs on different nodes exchange data, as the machine's recipes run it (None: over the
    # pod network, no GPUDirect).
    gpudirect_stack: GpuDirectStack | None
    # NICs that carry GPU traffic: one VPC each (TCPX/TCPXO) or one RDMA subnet each (RDMA).
    gpu_nics: int
    # gVNICs beyond the primary one that are not GPU NICs (A3 Ultra and A4 have one).
    extra_gvnics: int
    # MTU of every VPC the node attaches to; None keeps the VPC default.
    mtu: int | None
    boot_disk_types: tuple[str, ...]
    # GKE node image type of the machine's pools (its GPUDirect stack's requirement).
    node_image_type: str
    # Oldest GKE version that supports the machine with its GPUDirect flavour.
    min_gke_version: str
    # Whether GKE accepts compact placement together with flex-start on this machine.
    compact_with_flex_start: bool
    # Zones where the machine type is offered, as far as the cited sources show.
    zones: frozenset[str]
    sources: Mapping[str, str]
    # CPU (millicores) and memory (MiB) a node leaves to pods as its kubelet reports them
    # (`status.allocatable`), for a machine outside the catalog; None: GKE's reservations apply.
    reported_allocatable: tuple[int, int] | None = None
    # GCE workload policy topology every pool of the machine is placed with (a HIGH_THROUGHPUT
    # policy's accelerator_topology: "1x72" is one GB200 NVL72 domain); None: compact placement
    # by the platform's default (planners.pools).
    accelerator_topology: str | None = None
    # The Kueue topology level whose domains are the machine's NVLink domains (a node on an HGX
    # board, a GKE sub-block for GB200 NVL72): runs keep tensor parallelism inside one.
    nvlink_domain_level: TopologyLevel = TopologyLevel.HOSTNAME
    # Size of one bundled Local SSD disk, GiB (375 on A3 and A4: https://cloud.google.com/compute/docs/disks/local-ssd).
    local_ssd_gib: int = 375
    # GKE puts the bundled disks under ephemeral storage itself, and a pool names no count.
    local_ssds_automatic: bool = False
    # Compute Engine offers the machine only through reservations (no on-demand, Spot or flex-start VMs).
    reservation_only: bool = False
    # Line rate of each GPU NIC, Gb/s: what the layout planner's scale-out exchanges run at
    # (0 without GPU NICs).
    gpu_nic_gbps: int = 0
    # NCCL settings the machine's recipes export after their GPUDirect stack's init script (which
    # would otherwise set its own): they win over it in the training pods.
    nccl_env: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    # GPUs per NUMA node where the machine's recipes bind each rank to its GPU's NUMA node
    # (CPU and memory, numactl); None: no binding.
    gpus_per_numa_node: int | None = None
    # The gIB image, with its NCCL, the training pods install for themselves (the node's gIB has no
    # NCCL since CEA 2da1c92), by the workload image they run: the recipes pin one per machine and
    # image (network.gibVersion). The first serves any other image.
    pod_gib: tuple[tuple[str, Image], ...] = ()

    @property
    def allocatable(self) -> tuple[int, int]:
        """CPU (millicores) and memory (MiB) a node of this machine leaves to pods."""
        if self.reported_allocatable is not None:
            return self.reported_allocatable
        return allocatable_millicores(self.vcpus), allocatable_memory_mib(self.memory_gib)

    @property
    def gpudirect(self) -> GpuDirect:
        return self.gpudirect_stack.flavour if self.gpudirect_stack is not None else GpuDirect.NONE

    @property
    def pods_on_host_network(self) -> bool:
        """Whether training pods can use the node's network with the machine's GPUDirect stack."""
        return self.gpudirect_stack is None or self.gpudirect_stack.host_network_pods

    @property
    def nvlink_domain_nodes(self) -> int:
        """Nodes one NVLink domain joins."""
        return self.nvlink_domain_gpus // self.gpus

    @property
    def nvlink_across_nodes(self) -> bool:
        """NVLink joins GPUs of several nodes (GB200 NVL72): a run's pods reach each other's GPU
        memory only through IMEX channels, which NVIDIA's DRA driver gives them (ComputeDomain)."""
        return self.nvlink_domain_gpus > self.gpus

    @property
    def arch_taints(self) -> tuple[Taint, ...]:
        """Taints GKE puts on the machine's nodes for their CPU architecture."""
        return (ARM64_TAINT,) if self.cpu_arch is CpuArch.ARM64 else ()

    @property
    def additional_networks(self) -> int:
        """Node networks beyond the primary one."""
        return self.gpu_nics + self.extra_gvnics

    @property
    def is_multi_nic(self) -> bool:
        return self.additional_networks > 0

    @property
    def nic_layout(self) -> tuple[GpuDirect, int, int]:
        """What the cluster's GPU networks must match: machines of one cluster share them."""
        return (self.gpudirect, self.gpu_nics, self.extra_gvnics)

    def pod_gib_for(self, image_ref: str | None) -> Image | None:
        """The gIB a pod running `image_ref` installs (None: the machine's first pin); an RDMA
        machine without pins installs its node plugin's release, CEA's current one."""
        if self.pod_gib:
            return dict(self.pod_gib).get(image_ref or "", self.pod_gib[0][1])
        stack = self.gpudirect_stack
        return stack.node_plugin if stack and stack.flavour is GpuDirect.RDMA else None


_GCE_A3 = "https://cloud.google.com/compute/docs/accelerator-optimized-machines#a3-vms"
_GCE_A4 = "https://cloud.google.com/compute/docs/accelerator-optimized-machines#a4-vms"
_LOCAL_SSD = "https://cloud.google.com/compute/docs/disks/local-ssd#lssd_disks_fixed"
_CTK = "GoogleCloudPlatform/cluster-toolkit"
_CTK_LABELS = f"{_CTK}:pkg/config/machine_mappings.json@1047080"
_CTK_GPU_DIRECT = f"{_CTK}:modules/compute/gke-node-pool/gpu_direct.tf@1047080"
_CTK_DISKS = f"{_CTK}:modules/compute/gke-node-pool/disk_definitions.tf@1047080"
_CTK_FLEX_COMPACT = f"{_CTK}:modules/compute/gke-node-pool/main.tf@1047080 (precondition from PR #5737)"
_CTK_RDMA_VPC = f"{_CTK}:modules/network/gpu-rdma-vpc/variables.tf@1047080 (mtu default 8896, nic_type MRDMA)"
_GKE_TCPX = "https://cloud.google.com/kubernetes-engine/docs/how-to/gpu-bandwidth-gpudirect-tcpx"
_GKE_RDMA_ENUM = "https://cloud.google.com/kubernetes-engine/docs/reference/rest/v1beta1/NodeConfig#gpudirectstrategy"
_SIDECARS = "https://kubernetes.io/docs/concepts/workloads/pods/sidecar-containers/"
# Every A3 and A4 machine is an x86 host; the HGX board's NVSwitch joins its 8 GPUs, and the
# smaller A3 High shapes are parts of one board.
_HGX = "https://www.nvidia.com/en-us/data-center/hgx/ (NVLink and NVSwitch inside the 8-GPU board)"
# GPUDirect on GKE runs on Container-Optimized OS, the node image of every recipe and blueprint.
_COS = f"{_GKE_TCPX} (requirements: Container-Optimized OS); {_CTK}:modules/compute/gke-node-pool/variables.tf@1047080"
# Zones: Google's GPU locations page (https://cloud.google.com/compute/docs/gpus/gpu-regions-zones)
# is the authority; these lists come from sources that record it, and a zone outside them is
# only warned about (`gcloud compute machine-types list --filter=name=<type>` says for sure).
_ZONES_SKYPILOT = "skypilot-org/skypilot-catalog:catalogs/v8/gcp/vms.csv@8427bbf (from the Compute API)"
_ZONES_AI_ON_GKE = "GoogleCloudPlatform/ai-on-gke:metadata.display.yaml@c87ef2c (a3_mega_zone, a3_ultra_zone)"
_ZONES_A4 = (
    f"{_ZONES_SKYPILOT}; stewartpark/private-llm:cli/setup.go@2800676 (gpu-regions-zones, 2026-02-05); "
    "https://cloud.google.com/batch/docs/locations (zones recommended for Dynamic Workload Scheduler)"
)
_A3_HIGH_ZONES = frozenset(
    {
        "asia-east1-c", "asia-northeast1-b", "asia-south1-c", "asia-south2-b", "asia-southeast1-b",
        "asia-southeast1-c", "australia-southeast1-c", "europe-north1-c", "europe-west1-b", "europe-west1-c",
        "europe-west3-c", "europe-west4-b", "europe-west4-c", "europe-west9-c", "us-central1-a", "us-central1-b",
        "us-central1-c", "us-east4-a", "us-east4-b", "us-east4-c", "us-east5-a", "us-west1-a", "us-west1-b",
        "us-west4-a",
    }
)  # fmt: skip
_A3_MEGA_ZONES = frozenset(
    {
        "asia-east1-c", "asia-northeast1-b", "asia-southeast1-b", "asia-southeast1-c", "australia-southeast1-c",
        "europe-north1-c", "europe-west1-b", "europe-west1-c", "europe-west3-c", "europe-west4-b", "europe-west4-c",
        "us-central1-a", "us-central1-b", "us-central1-c", "us-east4-a", "us-east4-b", "us-east4-c", "us-east5-a",
        "us-east7-b", "us-west1-a", "us-west1-b", "us-west4-a",
    }
)  # fmt: skip
_A3_ULTRA_ZONES = frozenset(
    {
        "asia-south1-b", "asia-south2-c", "europe-west1-b", "europe-west4-a", "us-central1-b", "us-east4-b",
        "us-east5-a", "us-east7-c", "us-south1-b", "us-west1-c",
    }
)  # fmt: skip
_A4_ZONES = frozenset(
    {
        "asia-northeast1-b", "asia-southeast1-b", "europe-north1-b", "europe-west4-b", "us-central1-a",
        "us-central1-b", "us-east1-b", "us-east4-b", "us-south1-b", "us-west2-c", "us-west3-b", "us-west3-c",
    }
)  # fmt: skip


def _a3_high(gpus: int, vcpus: int, memory_gib: int, local_ssds: int) -> MachineType:
    """The a3-highgpu shapes below 8 GPUs: one NIC, no GPUDirect."""
    return MachineType(
        name=f"a3-highgpu-{gpus}g",
        accelerator=ACCELERATORS["h100"],
        gpus=gpus,
        gke_accelerator="nvidia-h100-80gb",
        vcpus=vcpus,
        memory_gib=memory_gib,
        local_ssds=local_ssds,
        cpu_arch=CpuArch.AMD64,
        nvlink_domain_gpus=gpus,
        gpudirect_stack=None,
        gpu_nics=0,
        extra_gvnics=0,
        mtu=None,
        boot_disk_types=("pd-ssd", "pd-balanced"),
        node_image_type=COS_CONTAINERD,
        min_gke_version=versions.PLATFORM_MIN_GKE_VERSION,
        compact_with_flex_start=False,
        # The smaller shapes are also offered in europe-west8-c.
        zones=_A3_HIGH_ZONES | {"europe-west8-c"},
        sources={
            "gpus": _GCE_A3,
            "gke_accelerator": _CTK_LABELS,
            "vcpus": _GCE_A3,
            "memory_gib": _GCE_A3,
            "local_ssds": _LOCAL_SSD,
            "cpu_arch": _GCE_A3,
            "nvlink_domain_gpus": _HGX,
            "gpudirect_stack": f"{_CTK_GPU_DIRECT} (GPUDirect settings exist only for the 8-GPU shapes)",
            "gpu_nics": _GCE_A3,
            "gpu_nic_gbps": f"{_GCE_A3} (no GPU NICs)",
            "mtu": _GCE_A3,
            "boot_disk_types": _GCE_A3,
            "node_image_type": _COS,
            "min_gke_version": _SIDECARS,
            "compact_with_flex_start": _CTK_FLEX_COMPACT,
            "zones": _ZONES_SKYPILOT,
        },
    )


def _a3_8g(
    name: str,
    *,
    gke_accelerator: str,
    gpudirect_stack: GpuDirectStack,
    gpu_nics: int,
    min_gke_version: str,
    zones: frozenset[str],
    sources: Mapping[str, str],
) -> MachineType:
    """a3-highgpu-8g and a3-megagpu-8g: the same host, with 4 or 8 GPU gVNICs."""
    return MachineType(
        name=name,
        accelerator=ACCELERATORS["h100"],
        gpus=8,
        gke_accelerator=gke_accelerator,
        vcpus=208,
        memory_gib=1872,
        local_ssds=16,
        cpu_arch=CpuArch.AMD64,
        nvlink_domain_gpus=8,
        gpudirect_stack=gpudirect_stack,
        gpu_nics=gpu_nics,
        gpu_nic_gbps=200,
        extra_gvnics=0,
        mtu=8244,
        boot_disk_types=("pd-ssd", "pd-balanced", "hyperdisk-balanced"),
        node_image_type=COS_CONTAINERD,
        min_gke_version=min_gke_version,
        compact_with_flex_start=False,
        zones=zones,
        sources={
            "gpus": _GCE_A3,
            "gke_accelerator": _CTK_LABELS,
            "vcpus": _GCE_A3,
            "memory_gib": _GCE_A3,
            "local_ssds": f"{_LOCAL_SSD}; {_CTK_DISKS}",
            "cpu_arch": _GCE_A3,
            "nvlink_domain_gpus": _HGX,
            "gpudirect_stack": _GKE_TCPX,
            "node_image_type": _COS,
            "gpu_nics": f"{_GKE_TCPX} (up to 4 secondary NICs on A3 High, 8 on A3 Mega)",
            "gpu_nic_gbps": f"{_GCE_A3} (A3 High 4 × 200 Gbps, A3 Mega 8 × 200 Gbps GPU NICs)",
            "boot_disk_types": f"{_GCE_A3}; {_CTK}:examples/machine-learning/a3-megagpu-8g/a3mega-slurm-blueprint.yaml",
            "min_gke_version": _CTK_GPU_DIRECT,
            "compact_with_flex_start": _CTK_FLEX_COMPACT,
            **sources,
        },
    )


def _rdma_8g(
    name: str,
    *,
    accelerator: str,
    gke_accelerator: str,
    memory_gib: int,
    min_gke_version: str,
    zones: frozenset[str],
    tuner_config: str,
    pod_gib: tuple[tuple[str, Image], ...],
    sources: Mapping[str, str],
) -> MachineType:
    """A3 Ultra and A4: two gVNICs plus eight ConnectX-7 RDMA NICs."""
    gce = _GCE_A4 if name.startswith("a4") else _GCE_A3
    return MachineType(
        name=name,
        accelerator=ACCELERATORS[accelerator],
        gpus=8,
        gke_accelerator=gke_accelerator,
        vcpus=224,
        memory_gib=memory_gib,
        local_ssds=32,
        cpu_arch=CpuArch.AMD64,
        nvlink_domain_gpus=8,
        gpudirect_stack=RDMA_STACK,
        gpu_nics=8,
        gpu_nic_gbps=400,
        extra_gvnics=1,
        mtu=8896,
        boot_disk_types=("hyperdisk-balanced",),
        node_image_type=COS_CONTAINERD,
        min_gke_version=min_gke_version,
        compact_with_flex_start=True,
        zones=zones,
        # The recipes' charts, after sourcing gIB's set_nccl_env.sh: NCCL's bootstrap on both
        # gVNICs, and gIB's tuner configuration for the machine.
        nccl_env=MappingProxyType(
            {"NCCL_SOCKET_IFNAME": "eth0,eth1", "NCCL_TUNER_CONFIG_PATH": f"/usr/local/gib/configs/{tuner_config}"}
        ),
        # The recipes' launchers: `numactl --cpunodebind=$((LOCAL_RANK/4)) --membind=$((LOCAL_RANK/4))`.
        gpus_per_numa_node=4,
        pod_gib=pod_gib,
        sources={
            "gpus": gce,
            "gke_accelerator": _CTK_LABELS,
            "vcpus": gce,
            "memory_gib": gce,
            "local_ssds": f"{_LOCAL_SSD}; {_CTK_DISKS}",
            "cpu_arch": gce,
            "nvlink_domain_gpus": _HGX,
            "gpudirect_stack": _GKE_RDMA_ENUM,
            "node_image_type": _COS,
            "gpu_nics": f"{gce}; {_CTK_RDMA_VPC}",
            "gpu_nic_gbps": f"{gce} (8 × 400 Gbps ConnectX-7 RDMA NICs)",
            "mtu": _CTK_RDMA_VPC,
            "boot_disk_types": f"{gce}; {_CTK}:examples/machine-learning/a3-ultragpu-8g/a3ultra-slurm-blueprint.yaml",
            "compact_with_flex_start": _CTK_FLEX_COMPACT,
            **sources,
        },
    )


_CTK_A4X = f"{_CTK}:examples/gke-a4x/gke-a4x.yaml@1047080"
_GCE_A4X_DOC = "https://cloud.google.com/ai-hypercomputer/docs/gpu (A4X: 4 GPUs, 140 vCPUs, 884 GB, Hyperdisk only)"
# "An NVLink domain, also called a sub-block": 18 instances, 72 GPUs, one rack.
_A4X_DOMAIN = "https://cloud.google.com/ai-hypercomputer/docs/terminology (NVLink domain, sub-block)"
_GKE_A4X = "https://cloud.google.com/ai-hypercomputer/docs/create/gke-ai-hypercompute-custom-a4x"
_A4X_SSD = "https://cloud.google.com/ai-hypercomputer/docs/view-reserved-capacity (an a4x reservation's localSsds)"
_A4X_RECIPE = "AI-Hypercomputer/gpu-recipes:training/a4x/llama3_70b/nemo-gke/nemo2602/64gpus-fp8cs-gbs256/recipe"
# A4X: GB200 NVL72. Four GPUs per Arm host, 18 hosts per rack-wide NVLink domain, which GCE
# provisions as one sub-block placed by a HIGH_THROUGHPUT workload policy of topology 1x72.
A4X = MachineType(
    name="a4x-highgpu-4g",
    accelerator=ACCELERATORS["gb200"],
    gpus=4,
    gke_accelerator="nvidia-gb200",
    vcpus=140,
    memory_gib=884,
    local_ssds=4,
    cpu_arch=CpuArch.ARM64,
    nvlink_domain_gpus=72,
    gpudirect_stack=RDMA_ARM64_STACK,
    gpu_nics=4,
    gpu_nic_gbps=400,
    extra_gvnics=1,
    mtu=8896,
    boot_disk_types=("hyperdisk-balanced",),
    node_image_type=COS_CONTAINERD,
    # The NVIDIA DRA driver's floor; gpu-recipes' A4X environment asks for 1.33.4-gke.1036000.
    min_gke_version=versions.NVIDIA_DRA_DRIVER_MIN_GKE_VERSION,
    compact_with_flex_start=False,
    # Where A4X became generally available; the GPU locations page has the current list.
    zones=frozenset({"us-central1-a"}),
    # The A4X recipes keep A3 Ultra's gIB tuner configuration.
    nccl_env=MappingProxyType(
        {"NCCL_SOCKET_IFNAME": "eth0,eth1", "NCCL_TUNER_CONFIG_PATH": "/usr/local/gib/configs/tuner_config_a3u.txtpb"}
    ),
    # Two superchips per host, each a Grace CPU with two GPUs: numactl --cpunodebind=$((LOCAL_RANK/2)).
    gpus_per_numa_node=2,
    # The arm64 gIB every A4X NeMo 26.02 and 25.11 recipe pins (25.07's are split: their newest).
    pod_gib=((versions.NEMO_2602.ref, versions.GIB_ARM64_PLUGIN),),
    accelerator_topology="1x72",
    nvlink_domain_level=TopologyLevel.SUBBLOCK,
    local_ssd_gib=3000,
    local_ssds_automatic=True,
    reservation_only=True,
    sources={
        "gpus": f"{_GCE_A4X_DOC}; {_CTK_A4X}",
        "gke_accelerator": _CTK_LABELS,
        "vcpus": _GCE_A4X_DOC,
        "memory_gib": _GCE_A4X_DOC,
        "local_ssds": f"{_A4X_SSD} (4 NVMe disks of 3000 GB)",
        "local_ssd_gib": _A4X_SSD,
        "local_ssds_automatic": f"{_CTK_DISKS} (no count for a4x); GoogleCloudPlatform/cluster-autoscaler:pkg/"
        "cloudprovider/gke/machinetypes/deprecated_machine_types_config.go@0d974c0 (automatic ephemeral local SSD "
        "count 4)",
        "reservation_only": f"{_GKE_A4X} (reservation-bound provisioning only; no Spot or flex-start VMs)",
        "pod_gib": "AI-Hypercomputer/gpu-recipes:training/a4x/llama3_70b/nemo-gke/nemo2602/64gpus-fp8cs-gbs256/"
        "values.yaml@2e1fd5e (network.gibVersion)",
        "cpu_arch": f"{_CTK_A4X} (target_architecture arm64); {_GKE_A4X} (arm64 node affinity)",
        "nvlink_domain_gpus": f"{_A4X_DOMAIN}; {_CTK_A4X} (1x72)",
        "gpudirect_stack": RDMA_ARM64_STACK.sources["node_plugin"],
        "gpu_nics": f"{_CTK}:examples/gke-a4x/gke-a4x.yaml@0f9034d (4 RDMA subnets); {_CTK_RDMA_VPC}",
        "gpu_nic_gbps": "https://cloud.google.com/ai-hypercomputer/docs/gpu (A4X: 4 × 400 Gbps ConnectX-7 RDMA NICs)",
        "mtu": _CTK_RDMA_VPC,
        "boot_disk_types": f"{_CTK_A4X} (hyperdisk-balanced); {_GCE_A4X_DOC}",
        "node_image_type": _COS,
        "min_gke_version": "NVIDIA/k8s-dra-driver-gpu:docs/prerequisites.md@2240711; "
        "AI-Hypercomputer/gpu-recipes:docs/configuring-environment-gke-a4x.md@2e1fd5e",
        "compact_with_flex_start": _CTK_FLEX_COMPACT,
        "zones": "https://cloud.google.com/compute/docs/release-notes (2025-09-10: A4X generally available in "
        "us-central1-a); https://cloud.google.com/compute/docs/gpus/gpu-regions-zones",
        "gpus_per_numa_node": f"{_A4X_RECIPE}/launcher.sh@2e1fd5e",
        "nccl_env": f"{_A4X_RECIPE}/templates/workload-job.yaml@2e1fd5e",
        "accelerator_topology": f"{_GKE_A4X} (a 1x72 pool takes one whole 18-instance sub-block); {_CTK_A4X} "
        "(workload_policy); AI-Hypercomputer/xpk:src/xpk/core/nodepool.py@367c838",
        "nvlink_domain_level": f"{_A4X_DOMAIN}; {_CTK}:examples/gke-a4x/nccl-jobset-example.yaml@1047080 "
        "(podset-required-topology gce-topology-subblock); AI-Hypercomputer/gpu-recipes:training/a4x/deepseek_v3/"
        "megatron-bridge-gke/nemo2511/256gpus-bf16-seq4096-gbs4096/recipe/values.yaml@2e1fd5e "
        "(16-node slices per sub-block)",
    },
)


MACHINE_TYPES: Mapping[str, MachineType] = {
    m.name: m
    for m in (
        _a3_high(1, 26, 234, 2),
        _a3_high(2, 52, 468, 4),
        _a3_high(4, 104, 936, 8),
        _a3_8g(
            "a3-highgpu-8g",
            gke_accelerator="nvidia-h100-80gb",
            gpudirect_stack=TCPX_STACK,
            gpu_nics=4,
            # Highest per-minor floor of CTK's map; the map lists nothing newer.
            min_gke_version="1.29.15-gke.2467000",
            zones=_A3_HIGH_ZONES,
            sources={
                "mtu": f"{_CTK}:examples/gke-a3-highgpu/gke-a3-highgpu.yaml@1047080; {_GKE_TCPX}",
                "zones": _ZONES_SKYPILOT,
            },
        ),
        _a3_8g(
            "a3-megagpu-8g",
            gke_accelerator="nvidia-h100-mega-80gb",
            gpudirect_stack=TCPXO_STACK,
            gpu_nics=8,
            min_gke_version="1.32.11-gke.1174000",
            zones=_A3_MEGA_ZONES,
            sources={
                "mtu": f"{_CTK}:examples/gke-a3-megagpu/gke-a3-megagpu.yaml@1047080",
                "zones": f"{_ZONES_SKYPILOT}; {_ZONES_AI_ON_GKE}",
            },
        ),
        _rdma_8g(
            "a3-ultragpu-8g",
            accelerator="h200",
            gke_accelerator="nvidia-h200-141gb",
            memory_gib=2952,
            min_gke_version="1.31.7-gke.1265000",
            zones=_A3_ULTRA_ZONES,
            tuner_config="tuner_config_a3u.txtpb",
            # NeMo 26.02: all eight A3 Ultra recipes; NeMo 25.07 has no A3 Ultra recipe: A4's pin,
            # which was CEA's installer release while those recipes were validated; the resiliency
            # recipes' image: theirs.
            pod_gib=(
                (versions.NEMO_2602.ref, versions.GIB_POD_V110),
                (versions.NEMO_2.ref, versions.GIB_POD_V110),
                (versions.RESILIENCY.ref, versions.GIB_POD_V105),
            ),
            sources={
                "pod_gib": f"{versions.GIB_POD_V110.source}; {versions.GIB_POD_V105.source}",
                "nccl_env": "AI-Hypercomputer/gpu-recipes:training/a3ultra/llama3_70b/megatron-bridge-gke/nemo2602/"
                "64gpus-bf16-seq8192-gbs256/recipe/templates/workload-job.yaml@2e1fd5e",
                "gpus_per_numa_node": "AI-Hypercomputer/gpu-recipes:training/a3ultra/llama3_70b/megatron-bridge-gke/"
                "nemo2602/64gpus-bf16-seq8192-gbs256/recipe/launcher.sh@2e1fd5e",
                "min_gke_version": "AI-Hypercomputer/gpu-recipes:docs/configuring-environment-gke-a3-ultra.md@2e1fd5e",
                "zones": f"{_ZONES_SKYPILOT}; {_ZONES_AI_ON_GKE}",
            },
        ),
        _rdma_8g(
            "a4-highgpu-8g",
            accelerator="b200",
            gke_accelerator="nvidia-b200",
            memory_gib=3968,
            min_gke_version="1.32.4-gke.1236000",
            zones=_A4_ZONES,
            tuner_config="tuner_config_a4.txtpb",
            # NeMo 26.02: all eleven A4 recipes; NeMo 25.07: all nine.
            pod_gib=((versions.NEMO_2602.ref, versions.GIB_PLUGIN), (versions.NEMO_2.ref, versions.GIB_POD_V110)),
            sources={
                "pod_gib": "AI-Hypercomputer/gpu-recipes:training/a4/llama3_70b/nemo-gke/nemo2602/64gpus-fp8mx-gbs256/"
                f"recipe/values.yaml@2e1fd5e; {versions.GIB_POD_V110.source}",
                "nccl_env": "AI-Hypercomputer/gpu-recipes:training/a4/llama3_70b/nemo-gke/nemo2602/"
                "64gpus-fp8mx-gbs256/recipe/templates/workload-job.yaml@2e1fd5e",
                "gpus_per_numa_node": "AI-Hypercomputer/gpu-recipes:training/a4/llama3_70b/nemo-gke/nemo2602/"
                "64gpus-fp8mx-gbs256/recipe/launcher.sh@2e1fd5e",
                "min_gke_version": "AI-Hypercomputer/gpu-recipes:docs/configuring-environment-gke-a4.md@2e1fd5e",
                "zones": _ZONES_A4,
            },
        ),
        A4X,
    )
}

# The GPUDirect stacks of the catalog's machines, each once, in catalog order.
GPUDIRECT_STACKS: tuple[GpuDirectStack, ...] = tuple(
    {id(m.gpudirect_stack): m.gpudirect_stack for m in MACHINE_TYPES.values() if m.gpudirect_stack}.values()
)

# Fields every machine record must cite a source for (the tests check this).
SOURCED_MACHINE_FIELDS = tuple(
    f.name
    for f in fields(MachineType)
    if f.name
    not in {
        "name",
        "accelerator",
        "extra_gvnics",
        "sources",
        "reported_allocatable",
        "nccl_env",
        "gpus_per_numa_node",
        "accelerator_topology",
        "nvlink_domain_level",
        "local_ssd_gib",
        "local_ssds_automatic",
        "reservation_only",
        "pod_gib",
    }
)


# GPUs a node of any GPU machine holds: Google Cloud's GPU machines hold 1, 2, 4, 8 or 16
# (https://cloud.google.com/compute/docs/gpus), as do other clouds' (OCI BM.GPU.H100.8 and VM.GPU.A10.1/2,
# AWS p5.48xlarge and g6.xlarge). Another count is a typo.
GPUS_PER_NODE = (1, 2, 4, 8, 16)


@dataclass(frozen=True)
class OtherMachine:
    """A GPU machine outside the catalog, as an existing cluster's nodes describe it (OKE's
    BM.GPU.H100.8, a DGX H100): its GPUs, and the CPU and memory its kubelet leaves to pods.
    It has no GKE fact: no GPUDirect flavour (NCCL uses the pod network), no local SSD, no zone."""

    name: str
    gpus: int
    # A GPU model of the catalog (ACCELERATORS): its peak throughput and memory.
    accelerator: str
    allocatable_millicores: int
    allocatable_memory_mib: int

    def __post_init__(self) -> None:
        # Read back from another stack's outputs too: a GPU model this version does not know is
        # refused there, as a mismatch of versions, not a KeyError later.
        if self.accelerator not in ACCELERATORS:
            raise ValueError(f"accelerator {self.accelerator!r} is not one of {', '.join(ACCELERATORS)}")

    @property
    def machine(self) -> MachineType:
        return MachineType(
            name=self.name,
            accelerator=ACCELERATORS[self.accelerator],
            gpus=self.gpus,
            gke_accelerator="",
            vcpus=self.allocatable_millicores // 1000,
            memory_gib=self.allocatable_memory_mib // 1024,
            local_ssds=0,
            # Nothing is decided on these two here: no installer or GPUDirect stack runs on it.
            cpu_arch=CpuArch.AMD64,
            nvlink_domain_gpus=self.gpus,
            gpudirect_stack=None,
            gpu_nics=0,
            extra_gvnics=0,
            mtu=None,
            boot_disk_types=(),
            node_image_type="",
            min_gke_version="",
            compact_with_flex_start=False,
            zones=frozenset(),
            sources={},
            reported_allocatable=(self.allocatable_millicores, self.allocatable_memory_mib),
        )


def nic_layout_groups() -> str:
    """The catalog's multi-NIC machines grouped by GPU network layout ("tcpx (a3-highgpu-8g); …"):
    machines of one group can share a cluster's GPU networks."""
    groups: dict[tuple[GpuDirect, int, int], list[str]] = {}
    for machine in MACHINE_TYPES.values():
        if machine.is_multi_nic:
            groups.setdefault(machine.nic_layout, []).append(machine.name)
    return "; ".join(f"{layout[0].value} ({', '.join(names)})" for layout, names in groups.items())


def machine_type(name: str) -> MachineType:
    """The catalog record for `name`; an unknown name lists the known ones."""
    try:
        return MACHINE_TYPES[name]
    except KeyError:
        raise ValueError(f"unknown machine type {name!r}; known: {', '.join(MACHINE_TYPES)}") from None


# --------------------------------------------------------------------------- capacity

_ALLOCATABLE_SOURCE = (
    "https://cloud.google.com/kubernetes-engine/docs/concepts/plan-node-sizes#memory_and_cpu_reservations; "
    "kubernetes/autoscaler:cluster-autoscaler/cloudprovider/gce/reserved.go@729ba95"
)
EVICTION_THRESHOLD_MIB = 100


def _tiered(total: float, tiers: tuple[tuple[float, float], ...], rest: float) -> float:
    """Sum of `rate` × the part of `total` inside each (upper bound, rate) tier."""
    reserved, lower = 0.0, 0.0
    for upper, rate in tiers:
        reserved += max(0.0, min(total, upper) - lower) * rate
        lower = upper
    return reserved + max(0.0, total - lower) * rest


def allocatable_millicores(vcpus: int) -> int:
    """CPU left for pods after GKE's kube-reserved share (see _ALLOCATABLE_SOURCE)."""
    reserved = _tiered(vcpus * 1000, ((1000, 0.06), (2000, 0.01), (4000, 0.005)), 0.0025)
    return int(vcpus * 1000 - reserved)


def allocatable_memory_mib(memory_gib: int) -> int:
    """Memory left for pods after GKE's kube-reserved share and the eviction threshold."""
    total = memory_gib * 1024
    reserved = _tiered(total, ((4096, 0.25), (8192, 0.20), (16384, 0.10), (131072, 0.06)), 0.02)
    return int(total - reserved - EVICTION_THRESHOLD_MIB)


# Kept free on every GPU node for GKE's agents, the NCCL plugin and RxDM DaemonSets and the
# pod's own sidecars (Cloud Storage FUSE, RxDM), so a training pod always fits.
NODE_RESERVE_MILLICORES = 8000
NODE_RESERVE_MEMORY_MIB = 64 * 1024


def training_pod_requests(machine: MachineType) -> tuple[int, int]:
    """CPU (millicores) and memory (MiB) one training pod requests on a whole node."""
    millicores, mib = machine.allocatable
    cpu = millicores - NODE_RESERVE_MILLICORES
    memory = mib - NODE_RESERVE_MEMORY_MIB
    return cpu // 1000 * 1000, memory // 1024 * 1024
