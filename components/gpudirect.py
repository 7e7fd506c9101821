"""GPUDirect inside the cluster: the GKE network objects pods attach their GPU NICs through,
and the node-level NCCL plugin installers of each flavour (plus the NRI device injector
TCPX/TCPXO sidecars need)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from facts import versions
from facts.errors import require
from facts.kubernetes import ACCELERATOR_LABEL, NETWORKING_API, SYSTEM_NAMESPACE
from facts.machines import GPUDIRECT_STACKS, GpuDirect, GpuDirectStack
from planners.networks import GpuNetworkPlan

# Where the installers leave the NCCL plugin on the host; workloads mount it from here.
HOST_NVIDIA_DIR = "/home/kubernetes/bin/nvidia"
HOST_GIB_DIR = "/home/kubernetes/bin/gib"


@dataclass(frozen=True)
class GpuNetworkObjectsArgs:
    plan: Sequence[GpuNetworkPlan]

    def __post_init__(self) -> None:
        names = [nic.kubernetes_name for nic in self.plan]
        require(bool(names) and len(set(names)) == len(names), "plan", names, "names each GPU network once")


class GpuNetworkObjects(pulumi.ComponentResource):
    """A `GKENetworkParamSet` and a `Network` (type Device) per GPU NIC, named as the plan says,
    so pods can ask for the NIC with the `networking.gke.io/interfaces` annotation."""

    TYPE = "nemo:gpudirect:GpuNetworkObjects"

    network_names: list[str]

    def __init__(self, name: str, args: GpuNetworkObjectsArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(self.TYPE, name, None, opts)
        for nic in args.plan:
            params = k8s.apiextensions.CustomResource(
                f"{name}-{nic.kubernetes_name}-params",
                api_version=NETWORKING_API,
                kind="GKENetworkParamSet",
                metadata={"name": nic.kubernetes_name},
                spec={"vpc": nic.vpc, "vpcSubnet": nic.subnet, "deviceMode": nic.device_mode},
                opts=pulumi.ResourceOptions(parent=self),
            )
            k8s.apiextensions.CustomResource(
                f"{name}-{nic.kubernetes_name}",
                api_version=NETWORKING_API,
                kind="Network",
                metadata={"name": nic.kubernetes_name},
                spec={
                    "type": "Device",
                    "parametersRef": {
                        "group": NETWORKING_API.split("/", 1)[0],
                        "kind": "GKENetworkParamSet",
                        "name": nic.kubernetes_name,
                    },
                },
                opts=pulumi.ResourceOptions(parent=self, depends_on=[params]),
            )
        self.network_names = [nic.kubernetes_name for nic in args.plan]
        self.register_outputs({"network_names": self.network_names})


def _host_path(name: str, path: str, kind: str | None = None) -> dict[str, Any]:
    return {"name": name, "hostPath": {"path": path, **({"type": kind} if kind else {})}}


def _node_daemonset(
    name: str, app: str, accelerators: Sequence[str], pod_spec: dict[str, Any], opts: pulumi.ResourceOptions
) -> k8s.apps.v1.DaemonSet:
    """A privileged kube-system DaemonSet on the GPU nodes of the given accelerators."""
    labels = {"k8s-app": app}
    return k8s.apps.v1.DaemonSet(
        name,
        metadata={"name": app, "namespace": SYSTEM_NAMESPACE, "labels": labels},
        spec={
            "selector": {"matchLabels": labels},
            "updateStrategy": {"type": "RollingUpdate"},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "priorityClassName": "system-node-critical",
                    "affinity": {
                        "nodeAffinity": {
                            "requiredDuringSchedulingIgnoredDuringExecution": {
                                "nodeSelectorTerms": [
                                    {
                                        "matchExpressions": [
                                            {
                                                "key": ACCELERATOR_LABEL,
                                                "operator": "In",
                                                "values": list(accelerators),
                                            }
                                        ]
                                    }
                                ]
                            }
                        }
                    },
                    "tolerations": [{"operator": "Exists"}],
                    "hostNetwork": True,
                    "hostPID": True,
                    **pod_spec,
                },
            },
        },
        opts=opts,
    )


_PRIVILEGED = {"privileged": True}
_INSTALLER_RESOURCES = {"requests": {"cpu": "150m"}}
_PAUSE = {"name": "pause", "image": versions.PAUSE.ref}

# Host preparation for TCPXO: load the dmabuf import helper and expose the receive-path
# PCI devices under /dev/aperture_devices, as the upstream installer does.
_TCPXO_HOST_PREP = """set -e
nsenter -at 1 -- sh -c '
/sbin/iptables -I INPUT -p tcp -m tcp -j ACCEPT
modprobe import-helper
mkdir -p /dev/aperture_devices
for bdf in $(lspci -nn -D | grep "1ae0:0084" | cut -d" " -f1); do
  dir=/dev/aperture_devices/$bdf
  mkdir -p $dir
  mountpoint -q $dir || mount --bind "$(readlink -f /sys/bus/pci/devices/$bdf)" $dir
done
chmod -R a+r /dev/aperture_devices/
chmod a+rw /dev/aperture_devices/*/resource*
'
"""


def _installer_pod(stack: GpuDirectStack) -> dict[str, Any]:
    """Init containers that copy the flavour's NCCL plugin onto the host, then a pause container."""
    image = stack.nccl_plugin.ref
    if stack.flavour is GpuDirect.RDMA:
        script = (
            "set -e\n/scripts/container_entry.sh install\n"
            "cp -r /var/lib/gib/lib64/. /host/nvidia/lib64\ncp -r /var/lib/gib/. /host/gib\n"
        )
        return {
            "initContainers": [
                {
                    "name": "nccl-rdma-installer",
                    "image": image,
                    "command": ["/bin/sh", "-c", script],
                    "securityContext": _PRIVILEGED,
                    "resources": _INSTALLER_RESOURCES,
                    "volumeMounts": [
                        {"name": "nvidia-lib64", "mountPath": "/host/nvidia/lib64"},
                        {"name": "gib", "mountPath": "/host/gib"},
                    ],
                }
            ],
            "containers": [_PAUSE],
            "volumes": [
                _host_path("nvidia-lib64", f"{HOST_NVIDIA_DIR}/lib64", "DirectoryOrCreate"),
                _host_path("gib", HOST_GIB_DIR, "DirectoryOrCreate"),
            ],
        }
    plugin_dir = "/var/lib/tcpx" if stack.flavour is GpuDirect.TCPX else "/var/lib/tcpxo"
    script = (
        "set -e\n/scripts/container_entry.sh install --install-nccl\n"
        f"mkdir -p /usr/local/nvidia/lib64\ncp -r {plugin_dir}/lib64/. /usr/local/nvidia/lib64\n"
    )
    init = [
        {
            "name": f"nccl-{stack.flavour.value}-installer",
            "image": image,
            "command": ["/bin/sh", "-c", script],
            "securityContext": _PRIVILEGED,
            "resources": _INSTALLER_RESOURCES,
            "volumeMounts": [
                {"name": "var-lib", "mountPath": "/var/lib"},
                {"name": "library-dir-host", "mountPath": "/usr/local"},
            ],
        }
    ]
    if stack.flavour is GpuDirect.TCPXO:
        init.insert(
            0,
            {
                "name": "host-preparation",
                "image": versions.UBUNTU.ref,
                "command": ["/bin/bash", "-c", _TCPXO_HOST_PREP],
                "securityContext": _PRIVILEGED,
                "resources": _INSTALLER_RESOURCES,
            },
        )
    return {
        "initContainers": init,
        "containers": [_PAUSE],
        "volumes": [_host_path("var-lib", "/var/lib"), _host_path("library-dir-host", "/home/kubernetes/bin")],
    }


@dataclass(frozen=True)
class NcclPluginInstallerArgs:
    stack: GpuDirectStack
    # GKE accelerator labels of the machines using this flavour.
    accelerators: Sequence[str]
    nri_device_injector: bool

    def __post_init__(self) -> None:
        require(bool(self.accelerators), "accelerators", self.accelerators, "names the GPUs to install on")


class NcclPluginInstaller(pulumi.ComponentResource):
    """Installs the flavour's NCCL network plugin on every GPU node of that flavour, from a
    pinned image, and (TCPX/TCPXO) the NRI device injector the receive-path sidecar relies on."""

    TYPE = "nemo:gpudirect:NcclPluginInstaller"

    def __init__(self, name: str, args: NcclPluginInstallerArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(self.TYPE, name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        flavour = args.stack.flavour.value
        _node_daemonset(
            f"{name}-plugin", f"nccl-{flavour}-installer", args.accelerators, _installer_pod(args.stack), child
        )
        if args.stack.needs_nri_device_injector and args.nri_device_injector:
            _node_daemonset(
                f"{name}-nri-device-injector",
                "device-injector",
                args.accelerators,
                {
                    "containers": [
                        {
                            "name": "device-injector",
                            "image": versions.NRI_DEVICE_INJECTOR.ref,
                            "securityContext": _PRIVILEGED,
                            "resources": _INSTALLER_RESOURCES,
                            "volumeMounts": [
                                {"name": "dev", "mountPath": "/dev"},
                                {"name": "nri", "mountPath": "/var/run/nri"},
                            ],
                        }
                    ],
                    "volumes": [_host_path("dev", "/dev"), _host_path("nri", "/var/run/nri")],
                },
                child,
            )
        self.register_outputs({})


# --------------------------------------------------------------------------- in the pod


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


_NVIDIA_HOST_VOLUME = _host_path("nvidia", HOST_NVIDIA_DIR)
_NVIDIA_MOUNT = {"name": "nvidia", "mountPath": NVIDIA_MOUNT}
_HOST_SYS_VOLUMES = [_host_path("sys", "/sys"), _host_path("proc-sys", "/proc/sys")]
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
            volumes=[_NVIDIA_HOST_VOLUME, _host_path("aperture-devices", APERTURE_DEVICES), *_HOST_SYS_VOLUMES],
            mounts=[_NVIDIA_MOUNT, aperture],
            env={
                "LD_LIBRARY_PATH": f"{NVIDIA_MOUNT}/lib64",
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
            volumes=[_NVIDIA_HOST_VOLUME, _host_path("gib", HOST_GIB_DIR)],
            mounts=[_NVIDIA_MOUNT, gib],
            env={
                "LD_LIBRARY_PATH": f"{GIB_MOUNT}/lib64:{NVIDIA_MOUNT}/lib64",
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
