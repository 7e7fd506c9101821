"""GPUDirect inside the cluster: the GKE network objects pods attach their GPU NICs through,
and the node-level NCCL plugin installers of each flavour (plus the NRI device injector
TCPX/TCPXO sidecars need)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from facts import versions
from facts.errors import require
from facts.kubernetes import ACCELERATOR_LABEL, NETWORKING_API, SYSTEM_NAMESPACE
from facts.machines import GpuDirect, GpuDirectStack
from facts.registries import RegistryMirror, resolve
from planners.gpudirect import HOST_GIB_DIR, HOST_NVIDIA_DIR, host_path_volume
from planners.networks import GpuNetworkPlan


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


def _installer_pod(stack: GpuDirectStack, mirror: RegistryMirror | None) -> dict[str, Any]:
    """Init containers that copy the flavour's NCCL plugin onto the host, then a pause container."""
    image = stack.node_plugin.ref
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
                host_path_volume("nvidia-lib64", f"{HOST_NVIDIA_DIR}/lib64", "DirectoryOrCreate"),
                host_path_volume("gib", HOST_GIB_DIR, "DirectoryOrCreate"),
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
                "image": resolve(versions.UBUNTU.ref, mirror),
                "command": ["/bin/bash", "-c", _TCPXO_HOST_PREP],
                "securityContext": _PRIVILEGED,
                "resources": _INSTALLER_RESOURCES,
            },
        )
    return {
        "initContainers": init,
        "containers": [_PAUSE],
        "volumes": [
            host_path_volume("var-lib", "/var/lib"),
            host_path_volume("library-dir-host", "/home/kubernetes/bin"),
        ],
    }


@dataclass(frozen=True)
class NcclPluginInstallerArgs:
    stack: GpuDirectStack
    # The installer's own name: its flavour, with the CPU architecture on Arm hosts
    # (planners.gpudirect.plugin_installers).
    key: str
    # GKE accelerator labels of the machines using this flavour.
    accelerators: Sequence[str]
    nri_device_injector: bool
    # The cluster's remote repositories, which the host preparation's ubuntu image comes through.
    mirror: RegistryMirror | None = None

    def __post_init__(self) -> None:
        require(bool(self.accelerators), "accelerators", self.accelerators, "names the GPUs to install on")


class NcclPluginInstaller(pulumi.ComponentResource):
    """Installs the flavour's NCCL network plugin on every GPU node of that flavour, from a
    pinned image, and (TCPX/TCPXO) the NRI device injector the receive-path sidecar relies on."""

    TYPE = "nemo:gpudirect:NcclPluginInstaller"

    def __init__(self, name: str, args: NcclPluginInstallerArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(self.TYPE, name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        _node_daemonset(
            f"{name}-plugin",
            f"nccl-{args.key}-installer",
            args.accelerators,
            _installer_pod(args.stack, args.mirror),
            child,
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
                    "volumes": [host_path_volume("dev", "/dev"), host_path_volume("nri", "/var/run/nri")],
                },
                child,
            )
        self.register_outputs({})
