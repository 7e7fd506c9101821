"""The pod side of GPUDirect: what a training pod adds for its machine's flavour (network
attachments, the receive-datapath sidecar, host volumes, the NCCL environment), as the public
A3 recipes configure it. Pure data; components/gpudirect.py installs the node side."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from facts import nvsentinel
from facts.machines import CpuArch, GpuDirect, GpuDirectStack, MachineType
from facts.podsecurity import PodAllowance, needs_of, union
from facts.versions import Image
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
    # The training container runs privileged (the host-network pattern of the TCPXO recipes).
    privileged: bool
    # Init containers: one-off installers, then native sidecars (restartPolicy Always).
    init_containers: list[dict[str, Any]]
    volumes: list[dict[str, Any]]
    mounts: list[dict[str, Any]]
    env: dict[str, str]
    # NCCL environment script the launcher sources, shipped with the plugin.
    nccl_init_script: str | None
    # The gIB release (with its NCCL) the pod installs for itself (RDMA machines).
    gib: Image | None = None
    # What the flavour's reference recipe tunes and a run's recipe may replace
    # (GpuDirectStack.recipe_env).
    recipe_env: dict[str, str] = field(default_factory=dict)


NVIDIA_MOUNT = "/usr/local/nvidia"
GIB_MOUNT = "/usr/local/gib"
# Where a TCPXO training pod installs its own copy of the recipe's plugin.
TCPXO_PLUGIN_MOUNT = "/usr/local/nccl-plugin"
TCPX_SOCKET = "/run/tcpx"
APERTURE_DEVICES = "/dev/aperture_devices"
# The RxDM writes this once its buffers are ready; the name may not contain "_"
# (CEA gpudirect-tcpxo/best-practice.md, "Startup probe").
RXDM_HEALTH_FILE = "/run/health-check"


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


def _health_probe(stack: GpuDirectStack) -> tuple[dict[str, str], dict[str, Any]]:
    """The sidecar's health file variable and startup probe, where its RxDM writes the file: the
    kubelet starts a pod's later containers only once its sidecar's startup probe succeeded
    (https://kubernetes.io/docs/concepts/workloads/pods/sidecar-containers/), so training starts
    with the receive path up rather than after the recipes' fixed sleep; where it never comes up,
    the sidecar restarts, the pod never becomes ready and Kueue's waitForPodsReady evicts the run.
    CEA best-practice.md's probe, with a failure budget of 60 s for the "~30s" initialization."""
    if not stack.rxdm_health_check:
        return {}, {}
    probe = {
        "exec": {"command": ["cat", RXDM_HEALTH_FILE]},
        "initialDelaySeconds": 1,
        "periodSeconds": 5,
        "timeoutSeconds": 1,
        "successThreshold": 1,
        "failureThreshold": 12,
    }
    return {"HEALTH_CHECK_LOG_FILE": RXDM_HEALTH_FILE}, {"startupProbe": probe}


def rxdm_sidecar(
    name: str,
    stack: GpuDirectStack,
    command: list[str],
    security: dict[str, Any],
    mounts: list[dict[str, Any]],
) -> dict[str, Any]:
    """The flavour's receive-datapath daemon as a native sidecar: it starts before the training
    container and stops by itself after it."""
    if stack.rxdm_sidecar is None:
        raise ValueError(f"the catalog pairs no receive-datapath sidecar with {stack.flavour.value}")
    health_env, probe = _health_probe(stack)
    env = {"LD_LIBRARY_PATH": f"{NVIDIA_MOUNT}/lib64", **health_env}
    return {
        "name": name,
        "image": stack.rxdm_sidecar.ref,
        "restartPolicy": "Always",
        "command": command,
        "securityContext": security,
        "env": [{"name": k, "value": v} for k, v in env.items()],
        **probe,
        "resources": _SIDECAR_RESOURCES,
        "volumeMounts": [_NVIDIA_MOUNT, *mounts, *_HOST_SYS_MOUNTS],
    }


# The TCPXO recipes' RxDM command: forward SIGTERM to the daemon, whose entry script does not.
_TCPXO_RXDM = """trap 'kill -TERM "$child" 2>/dev/null; wait "$child"' TERM
chmod 755 /fts/entrypoint_rxdm_container.sh
/fts/entrypoint_rxdm_container.sh --num_hops=2 --num_nics=NICS --uid= --alsologtostderr &
child=$!
wait "$child"
"""
# The recipes' plugin installer: installs the plugin with its NCCL, then copies it into the pod's
# volume, as the chart of the pair's recipe runs it, without a build type (gpu-recipes
# src/helm-charts/a3mega/nemo-training-v2/templates/nemo-launcher-job.yaml@2e1fd5e).
_TCPXO_PLUGIN_INSTALL = f"""set -e
chmod 755 /scripts/container_entry.sh
/scripts/container_entry.sh install --install-nccl
cp -r /var/lib/tcpxo/* {TCPXO_PLUGIN_MOUNT}/
"""


def _tcpx(stack: GpuDirectStack, plan: Sequence[GpuNetworkPlan], gpus: int) -> PodNetworking:
    """CEA's gpudirect-tcpx/nccl-test-latest.yaml: GPU NICs by multi-networking, the RxDM with
    NET_ADMIN and its GPU devices from the NRI injector, the plugin on the host."""
    return PodNetworking(
        annotations={**_interfaces(plan), "devices.gke.io/container.tcpx-daemon": _gpu_devices(gpus)},
        host_network=False,
        privileged=False,
        init_containers=[
            rxdm_sidecar(
                "tcpx-daemon",
                stack,
                [
                    "/tcpgpudmarxd/build/app/tcpgpudmarxd",
                    *("--gpu_nic_preset", "a3vm", "--gpu_shmem_type", "fd", "--uds_path", TCPX_SOCKET),
                    *("--setup_param", "--verbose 128 2 0"),
                ],
                {"capabilities": {"add": ["NET_ADMIN"]}},
                [{"name": "tcpx-socket", "mountPath": TCPX_SOCKET}],
            )
        ],
        volumes=[_NVIDIA_HOST_VOLUME, {"name": "tcpx-socket", "emptyDir": {}}, *_HOST_SYS_VOLUMES],
        mounts=[_NVIDIA_MOUNT, {"name": "tcpx-socket", "mountPath": TCPX_SOCKET}],
        env={
            "LD_LIBRARY_PATH": f"{NVIDIA_MOUNT}/lib64",
            "NCCL_PLUGIN_PATH": f"{NVIDIA_MOUNT}/lib64",
            "NCCL_SOCKET_IFNAME": "eth0",
            "NCCL_GPUDIRECTTCPX_CTRL_DEV": "eth0",
            "NCCL_GPUDIRECTTCPX_SOCKET_IFNAME": ",".join(nic.interface for nic in plan),
            "NCCL_GPUDIRECTTCPX_UNIX_CLIENT_PREFIX": TCPX_SOCKET,
            **stack.env,
        },
        nccl_init_script=None,
    )


def _tcpxo(stack: GpuDirectStack, plan: Sequence[GpuNetworkPlan]) -> PodNetworking:
    """The A3 Mega recipes' pattern, whole (gpu-recipes src/helm-charts/a3mega/jobset/templates/
    workload-jobset.yaml@2e1fd5e with `hostNetwork: true`): host network, privileged training
    container and RxDM, no NRI or interface annotations (so no GKE Network objects), the recipe's
    plugin installed by the pod itself, its NCCL profile sourced by the launcher."""
    if stack.pod_plugin is None:
        raise ValueError("the TCPXO recipes install their plugin in the pod: the catalog must pin one")
    plugin_lib = f"{TCPXO_PLUGIN_MOUNT}/lib64"
    installer = {
        "name": "nccl-plugin-installer",
        "image": stack.pod_plugin.ref,
        "command": ["/bin/sh", "-c", _TCPXO_PLUGIN_INSTALL],
        "resources": {"requests": {"cpu": "150m"}},
        "volumeMounts": [{"name": "nccl-plugin", "mountPath": TCPXO_PLUGIN_MOUNT}],
    }
    daemon = rxdm_sidecar(
        "tcpxo-daemon",
        stack,
        ["bash", "-c", _TCPXO_RXDM.replace("NICS", str(len(plan)))],
        {"privileged": True, "capabilities": {"add": ["NET_ADMIN", "NET_BIND_SERVICE"]}},
        [],
    )
    return PodNetworking(
        annotations={},
        host_network=True,
        privileged=True,
        init_containers=[installer, daemon],
        volumes=[
            _NVIDIA_HOST_VOLUME,
            {"name": "nccl-plugin", "emptyDir": {}},
            host_path_volume("aperture-devices", APERTURE_DEVICES),
            *_HOST_SYS_VOLUMES,
        ],
        mounts=[
            {"name": "nccl-plugin", "mountPath": TCPXO_PLUGIN_MOUNT},
            {"name": "aperture-devices", "mountPath": APERTURE_DEVICES},
        ],
        env={
            # GKE's device plugin provides the driver libraries at NVIDIA_MOUNT in GPU containers.
            "LD_LIBRARY_PATH": f"{plugin_lib}:{NVIDIA_MOUNT}/lib64",
            "NCCL_PLUGIN_PATH": f"{plugin_lib}:{NVIDIA_MOUNT}/lib64",
            "NCCL_LIB_DIR": plugin_lib,
            "NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY": APERTURE_DEVICES,
            **stack.env,
        },
        # The plugin's own profile sets the tuned NCCL environment for its version.
        nccl_init_script=f"{plugin_lib}/nccl-env-profile.sh",
    )


# The RDMA recipes' gIB install in the pod: the plugin with its NCCL (the node's has none since
# CEA 2da1c92 dropped --install-nccl), copied into the pod's own volume (gpu-recipes training/
# a3ultra/llama3_70b/megatron-bridge-gke/nemo2602/64gpus-bf16-seq8192-gbs256/recipe/templates/
# workload-job.yaml@2e1fd5e, nccl-plugin-installer).
GIB_INSTALL_TARGET = f"/target{GIB_MOUNT}"
_GIB_INSTALL = f"""set -ex
/scripts/container_entry.sh install --install-nccl
cp -R /var/lib/gib/lib64/. {GIB_INSTALL_TARGET}/lib64
cp -R /var/lib/gib/. {GIB_INSTALL_TARGET}
"""


def _rdma(stack: GpuDirectStack, plan: Sequence[GpuNetworkPlan], host_network: bool, gib: Image) -> PodNetworking:
    """The A3 Ultra and A4 recipes: gVNIC and RDMA NICs by multi-networking, and gIB with its NCCL
    installed by the pod itself at the version the recipe pins for its image, ahead of the
    image's own NCCL on the library path, so the pod loads the NCCL the recipe validated. On the
    host network (the resiliency recipe: gpu-recipes training/a3ultra/llama31_405b/
    nemo-gke-resiliency/nemo2412/recipe/values.yaml@61b3f8a `hostNetwork: true`, privileged) the
    pod sees the node's NICs themselves and needs no interface annotations."""
    installer = {
        "name": "nccl-plugin-installer",
        "image": gib.ref,
        "command": ["/bin/sh", "-c", _GIB_INSTALL],
        "resources": {"requests": {"cpu": "150m"}},
        "volumeMounts": [{"name": "gib", "mountPath": GIB_INSTALL_TARGET}],
    }
    return PodNetworking(
        annotations={} if host_network else _interfaces(plan),
        host_network=host_network,
        privileged=host_network,
        init_containers=[installer],
        volumes=[_NVIDIA_HOST_VOLUME, {"name": "gib", "emptyDir": {}}],
        mounts=[_NVIDIA_MOUNT, {"name": "gib", "mountPath": GIB_MOUNT}],
        env={
            "LD_LIBRARY_PATH": f"{GIB_MOUNT}/lib64:{NVIDIA_MOUNT}/lib64",
            "NCCL_PLUGIN_PATH": f"{GIB_MOUNT}/lib64",
            # Fail instead of falling back to TCP when the gIB plugin is missing.
            "NCCL_NET": "gIB",
            "NCCL_SOCKET_IFNAME": "eth0",
            **stack.env,
        },
        nccl_init_script=f"{GIB_MOUNT}/scripts/set_nccl_env.sh",
        gib=gib,
        recipe_env=dict(stack.recipe_env),
    )


def pod_networking(
    stack: GpuDirectStack | None,
    plan: Sequence[GpuNetworkPlan],
    gpus: int,
    host_network: bool = False,
    gib: Image | None = None,
) -> PodNetworking:
    """The pod side of a machine's GPUDirect stack (None: NCCL over the pod network), as the
    public A3 recipes configure it. `host_network` asks for pods on the node's network where the
    stack has such a pattern (TCPXO always has); `gib` is the gIB an RDMA pod installs
    (MachineType.pod_gib_for)."""
    if stack is None:
        return PodNetworking(
            annotations={},
            host_network=host_network,
            privileged=False,
            init_containers=[],
            volumes=[],
            mounts=[],
            env={"NCCL_SOCKET_IFNAME": "eth0"},
            nccl_init_script=None,
        )
    if host_network and not stack.host_network_pods:
        raise ValueError(f"the {stack.flavour.value} pattern of this program runs pods off the host network")
    if stack.flavour is GpuDirect.TCPX:
        return _tcpx(stack, plan, gpus)
    if stack.flavour is GpuDirect.TCPXO:
        return _tcpxo(stack, plan)
    if gib is None:
        raise ValueError("the RDMA recipes install gIB in the pod: the machine must pin one for the image")
    return _rdma(stack, plan, host_network, gib)


def gpudirect_stack(machine: MachineType, gke: bool) -> GpuDirectStack | None:
    """The machine's GPUDirect wiring on GKE; elsewhere none of GKE's networks or plugins exist,
    so NCCL uses the pod network."""
    return machine.gpudirect_stack if gke else None


def networking_needs(net: PodNetworking) -> PodAllowance:
    """What a GPU pod wired by `net` needs beyond the Baseline pod security policy: its init
    containers, host volumes and network, and its main container privileged where the pattern runs
    it so (components.training.gpu_container and gpu_jobset build the pod this way)."""
    main = {"securityContext": {"privileged": net.privileged}, "volumeMounts": net.mounts}
    return needs_of(
        {
            "hostNetwork": net.host_network,
            "initContainers": net.init_containers,
            "containers": [main],
            "volumes": net.volumes,
        }
    )


def machine_needs(machine: MachineType, gke: bool, plan: Sequence[GpuNetworkPlan], supervised: bool) -> PodAllowance:
    """What the runs and fabric checks on a pool of `machine` need of their namespace's pod
    security: the machine's pod networking, and its host-network pattern too where a run may be
    supervised (a supervised run's pods use the host network, planners.runs)."""
    stack = gpudirect_stack(machine, gke)
    gib = machine.pod_gib_for(None)
    patterns = [False, *([True] if supervised and machine.pods_on_host_network else [])]
    return union(networking_needs(pod_networking(stack, plan, machine.gpus, on_host, gib)) for on_host in patterns)


def plugin_installers(machines: Iterable[MachineType]) -> dict[str, tuple[GpuDirectStack, list[str]]]:
    """One node-plugin installer per GPUDirect flavour and CPU architecture among the machines,
    keyed by its name suffix ("rdma"; "rdma-arm64" for Arm hosts), with the GKE accelerators
    whose nodes it runs on. Machines sharing an installer must share its plugin image."""
    found: dict[str, tuple[GpuDirectStack, list[str]]] = {}
    for machine in machines:
        stack = machine.gpudirect_stack
        if stack is None:
            continue
        key = stack.flavour.value + ("" if machine.cpu_arch is CpuArch.AMD64 else f"-{machine.cpu_arch.value}")
        chosen, accelerators = found.setdefault(key, (stack, []))
        if chosen.node_plugin != stack.node_plugin:
            raise ValueError(
                f"{machine.name}'s {key} node plugin {stack.node_plugin.ref} differs from {chosen.node_plugin.ref} "
                "of another machine of the cluster: one installer runs per flavour and CPU architecture"
            )
        if machine.gke_accelerator not in accelerators:
            accelerators.append(machine.gke_accelerator)
    return {key: (stack, sorted(accelerators)) for key, (stack, accelerators) in found.items()}


def node_checks(checks: tuple[str, ...], networking: PodNetworking) -> tuple[tuple[str, ...] | None, str | None]:
    """The platform's preflight checks (facts.nvsentinel; none: no preflight, so None) a pod with
    this networking can pass, and why one was left out. NVSentinel's webhook gives each check the
    training container's NCCL environment but only the mounts its volumeMountPatterns name: where
    the pod's GPUDirect mounts are not all among them, NCCL in the loopback check is pointed at a
    network plugin it cannot load (NCCL_NET=gIB without the gib mount: "network gIB not found"),
    and the check fails on healthy nodes."""
    if not checks:
        return None, None
    # GKE's device plugin gives every container that requests GPUs the driver at /usr/local/nvidia
    # (https://cloud.google.com/kubernetes-engine/docs/how-to/gpus), the checks as well.
    missing = [
        m["name"]
        for m in networking.mounts
        if m["mountPath"] != NVIDIA_MOUNT and not nvsentinel.copied_into_checks(m["name"])
    ]
    if nvsentinel.PREFLIGHT_NCCL_LOOPBACK not in checks or not missing:
        return checks, None
    why = (
        f"{nvsentinel.PREFLIGHT_NCCL_LOOPBACK} left out: NVSentinel's webhook copies the training container's NCCL "
        "environment into the check but only the mounts named "
        f"{', '.join(nvsentinel.PREFLIGHT_VOLUME_MOUNT_PATTERNS)}, and this pod's GPUDirect mounts "
        f"{', '.join(missing)} are not, so NCCL there could not load its network plugin"
    )
    return tuple(c for c in checks if c != nvsentinel.PREFLIGHT_NCCL_LOOPBACK), why
