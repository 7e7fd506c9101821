"""The pod side of GPUDirect: what a training pod adds for its machine's flavour (network
attachments, the receive-datapath sidecar, host volumes, the NCCL environment), as the public
A3 recipes configure it. Pure data; components/gpudirect.py installs the node side."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from facts.machines import GPUDIRECT_STACKS, GpuDirect
from planners.networks import GpuNetworkPlan

# Where the installers leave the NCCL plugin on the host; workloads mount it from here.
HOST_NVIDIA_DIR = "/home/kubernetes/bin/nvidia"
HOST_GIB_DIR = "/home/kubernetes/bin/gib"


def host_path_volume(name: str, path: str, kind: str | None = None) -> dict[str, Any]:
    return {"name": name, "hostPath": {"path": path, **({"type": kind} if kind else {})}}


@dataclass(frozen=True)
class PodNetworking:
    """What a training pod adds for its machine's GPUDirect flavour."""

    annotations: dict[str, str]
    host_network: bool
    # Native sidecars (init containers that keep running: restartPolicy Always).
    sidecars: list[dict[str, Any]]
    volumes: list[dict[str, Any]]
    mounts: list[dict[str, Any]]
    env: dict[str, str]
    # NCCL environment script the launcher sources, shipped with the plugin.
    nccl_init_script: str | None


NVIDIA_MOUNT = "/usr/local/nvidia"
GIB_MOUNT = "/usr/local/gib"
TCPX_SOCKET = "/run/tcpx"
APERTURE_DEVICES = "/dev/aperture_devices"


def _gpu_devices(gpus: int, extra: Sequence[str] = ()) -> str:
    """NRI device-injection list for the receive-path sidecar."""
    paths = [*(f"/dev/nvidia{i}" for i in range(gpus)), "/dev/nvidiactl", "/dev/nvidia-uvm", *extra]
    return "".join(f"- path: {p}\n" for p in paths)


def _interfaces(plan: Sequence[GpuNetworkPlan]) -> dict[str, str]:
    """Attach eth0 to the pod network and ethN to each GPU network, by Network object name."""
    interfaces = [{"interfaceName": "eth0", "network": "default"}]
    interfaces += [{"interfaceName": nic.interface, "network": nic.kubernetes_name} for nic in plan]
    return {
        "networking.gke.io/default-interface": "eth0",
        "networking.gke.io/interfaces": json.dumps(interfaces),
    }


_NVIDIA_HOST_VOLUME = host_path_volume("nvidia", HOST_NVIDIA_DIR)
_NVIDIA_MOUNT = {"name": "nvidia", "mountPath": NVIDIA_MOUNT}
_HOST_SYS_VOLUMES = [host_path_volume("sys", "/sys"), host_path_volume("proc-sys", "/proc/sys")]
_HOST_SYS_MOUNTS = [{"name": "sys", "mountPath": "/hostsysfs"}, {"name": "proc-sys", "mountPath": "/hostprocsysfs"}]
_SIDECAR_RESOURCES = {"requests": {"cpu": "1", "memory": "2Gi"}}


def _rxdm_sidecar(
    name: str, flavour: GpuDirect, command: list[str], capabilities: list[str], mounts: list[dict[str, Any]]
) -> dict[str, Any]:
    """The flavour's receive-datapath daemon as a native sidecar: it starts before the training
    container and stops by itself after it."""
    image = GPUDIRECT_STACKS[flavour].rxdm_sidecar
    if image is None:
        raise ValueError(f"the catalog pairs no receive-datapath sidecar with {flavour.value}")
    return {
        "name": name,
        "image": image.ref,
        "restartPolicy": "Always",
        "command": command,
        "securityContext": {"capabilities": {"add": capabilities}},
        "env": [{"name": "LD_LIBRARY_PATH", "value": f"{NVIDIA_MOUNT}/lib64"}],
        "resources": _SIDECAR_RESOURCES,
        "volumeMounts": [_NVIDIA_MOUNT, *mounts, *_HOST_SYS_MOUNTS],
    }


def pod_networking(flavour: GpuDirect, plan: Sequence[GpuNetworkPlan], gpus: int) -> PodNetworking:
    """The pod side of each flavour, as the public A3 recipes configure it."""
    if flavour is GpuDirect.TCPX:
        nics = ",".join(nic.interface for nic in plan)
        return PodNetworking(
            annotations={**_interfaces(plan), "devices.gke.io/container.tcpx-daemon": _gpu_devices(gpus)},
            host_network=False,
            sidecars=[
                _rxdm_sidecar(
                    "tcpx-daemon",
                    flavour,
                    [
                        "/tcpgpudmarxd/build/app/tcpgpudmarxd",
                        *("--gpu_nic_preset", "a3vm", "--gpu_shmem_type", "fd", "--uds_path", TCPX_SOCKET),
                        *("--setup_param", "--verbose 128 2 0"),
                    ],
                    ["NET_ADMIN"],
                    [{"name": "tcpx-socket", "mountPath": TCPX_SOCKET}],
                )
            ],
            volumes=[_NVIDIA_HOST_VOLUME, {"name": "tcpx-socket", "emptyDir": {}}, *_HOST_SYS_VOLUMES],
            mounts=[_NVIDIA_MOUNT, {"name": "tcpx-socket", "mountPath": TCPX_SOCKET}],
            env={
                "LD_LIBRARY_PATH": f"{NVIDIA_MOUNT}/lib64",
                "NCCL_PLUGIN_DIR": f"{NVIDIA_MOUNT}/lib64",
                "NCCL_SOCKET_IFNAME": "eth0",
                "NCCL_GPUDIRECTTCPX_CTRL_DEV": "eth0",
                "NCCL_GPUDIRECTTCPX_SOCKET_IFNAME": nics,
                "NCCL_GPUDIRECTTCPX_UNIX_CLIENT_PREFIX": TCPX_SOCKET,
                # CPU cores serving each NIC's transmit and receive paths on an a3-highgpu-8g.
                "NCCL_GPUDIRECTTCPX_TX_BINDINGS": (
                    "eth1:8-21,112-125;eth2:8-21,112-125;eth3:60-73,164-177;eth4:60-73,164-177"
                ),
                "NCCL_GPUDIRECTTCPX_RX_BINDINGS": (
                    "eth1:22-35,126-139;eth2:22-35,126-139;eth3:74-87,178-191;eth4:74-87,178-191"
                ),
                "NCCL_GPUDIRECTTCPX_PROGRAM_FLOW_STEERING_WAIT_MICROS": "500000",
                "NCCL_GPUDIRECTTCPX_FORCE_ACK": "0",
                "NCCL_GPUDIRECTTCPX_TX_COMPLETION_NANOSLEEP": "1000",
                "NCCL_CROSS_NIC": "0",
                "NCCL_ALGO": "Ring",
                "NCCL_PROTO": "Simple",
                "NCCL_NET_GDR_LEVEL": "PIX",
                "NCCL_P2P_PXN_LEVEL": "0",
                "NCCL_DYNAMIC_CHUNK_SIZE": "524288",
                "NCCL_P2P_NET_CHUNKSIZE": "524288",
                "NCCL_P2P_PCI_CHUNKSIZE": "524288",
                "NCCL_P2P_NVL_CHUNKSIZE": "1048576",
                "NCCL_NSOCKS_PERTHREAD": "4",
                "NCCL_SOCKET_NTHREADS": "1",
                "NCCL_MIN_NCHANNELS": "8",
                "NCCL_MAX_NCHANNELS": "8",
                "NCCL_BUFFSIZE": "4194304",
            },
            nccl_init_script=None,
        )
    if flavour is GpuDirect.TCPXO:
        aperture = {"name": "aperture-devices", "mountPath": APERTURE_DEVICES}
        return PodNetworking(
            # Host networking, as the public recipes run TCPXO: the sidecar sees all 8 GPU NICs.
            annotations={
                "devices.gke.io/container.tcpxo-daemon": _gpu_devices(gpus, ["/dev/dmabuf_import_helper"]),
            },
            host_network=True,
            sidecars=[
                _rxdm_sidecar(
                    "tcpxo-daemon",
                    flavour,
                    [
                        "/fts/entrypoint_rxdm_container.sh",
                        "--num_hops=2",
                        f"--num_nics={len(plan)}",
                        "--uid=",
                        "--alsologtostderr",
                    ],
                    ["NET_ADMIN", "NET_BIND_SERVICE"],
                    [],
                )
            ],
            volumes=[_NVIDIA_HOST_VOLUME, host_path_volume("aperture-devices", APERTURE_DEVICES), *_HOST_SYS_VOLUMES],
            mounts=[_NVIDIA_MOUNT, aperture],
            env={
                "LD_LIBRARY_PATH": f"{NVIDIA_MOUNT}/lib64",
                "NCCL_PLUGIN_DIR": f"{NVIDIA_MOUNT}/lib64",
                "NCCL_LIB_DIR": f"{NVIDIA_MOUNT}/lib64",
                "NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY": APERTURE_DEVICES,
            },
            # The plugin's own profile sets the tuned NCCL environment for its version.
            nccl_init_script=f"{NVIDIA_MOUNT}/lib64/nccl-env-profile.sh",
        )
    if flavour is GpuDirect.RDMA:
        gib = {"name": "gib", "mountPath": GIB_MOUNT}
        return PodNetworking(
            annotations=_interfaces(plan),
            host_network=False,
            sidecars=[],
            volumes=[_NVIDIA_HOST_VOLUME, host_path_volume("gib", HOST_GIB_DIR)],
            mounts=[_NVIDIA_MOUNT, gib],
            env={
                "LD_LIBRARY_PATH": f"{GIB_MOUNT}/lib64:{NVIDIA_MOUNT}/lib64",
                "NCCL_PLUGIN_DIR": f"{GIB_MOUNT}/lib64",
                # Fail instead of falling back to TCP when the gIB plugin is missing.
                "NCCL_NET": "gIB",
                "NCCL_SOCKET_IFNAME": "eth0",
            },
            nccl_init_script=f"{GIB_MOUNT}/scripts/set_nccl_env.sh",
        )
    return PodNetworking(
        annotations={},
        host_network=False,
        sidecars=[],
        volumes=[],
        mounts=[],
        env={"NCCL_SOCKET_IFNAME": "eth0"},
        nccl_init_script=None,
    )
