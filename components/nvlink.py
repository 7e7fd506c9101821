"""NVLink across nodes (GB200 NVL72): NVIDIA's DRA driver with only its ComputeDomain part, which
gives each run's pods IMEX channels into one another's GPU memory, installed as GKE's A4X guide
does (https://cloud.google.com/ai-hypercomputer/docs/create/gke-ai-hypercompute-custom-a4x,
"Install the NVIDIA Compute Domain CRD and DRA driver"); and the ComputeDomain of one run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.kubernetes import owned_namespace, pinned_release
from facts import versions
from facts.errors import require
from facts.kubernetes import (
    ACCELERATOR_LABEL,
    ARCH_LABEL,
    COMPUTE_DOMAIN_API,
    GPU_TAINT,
    NVIDIA_DRA_NAMESPACE,
    versioned_name,
)
from facts.machines import MachineType

# Where GKE's managed driver puts the NVIDIA libraries and binaries on a node (the guide's
# `nvidiaDriverRoot`).
GKE_NVIDIA_DRIVER_ROOT = "/home/kubernetes/bin/nvidia"
# The driver's pods run at these priorities; outside kube-system GKE admits such pods only up to
# a ResourceQuota scoped to them (the guide; cluster-toolkit examples/gke-a4x/nvidia-dra-driver.yaml).
CRITICAL_PRIORITIES = ("system-node-critical", "system-cluster-critical")


def driver_pods(nodes: int) -> int:
    """Pods the driver runs at those priorities, at most: a kubelet plugin and a ComputeDomain's
    IMEX daemon per node, and the controller (the guide: at least 2 × nodes + 1)."""
    return 2 * nodes + 1


def driver_values(machines: Sequence[MachineType], controller_selector: Mapping[str, str]) -> dict[str, Any]:
    """The chart's values on GKE: GKE's device plugin keeps serving the GPUs (`gpus.enabled: false`;
    the chart refuses both), the kubelet plugin runs on the machines' nodes and tolerates their
    taints, and the controller runs beside the platform's other controllers."""
    accelerators = sorted({m.gke_accelerator for m in machines})
    archs = sorted({m.cpu_arch.value for m in machines})
    taints = {t for m in machines for t in m.arch_taints}
    return {
        "nvidiaDriverRoot": GKE_NVIDIA_DRIVER_ROOT,
        # Helm would otherwise pick the DeviceClass version from the cluster's APIs.
        "resourceApiVersion": "resource.k8s.io/v1",
        "resources": {"gpus": {"enabled": False}, "computeDomains": {"enabled": True}},
        "controller": {"nodeSelector": dict(controller_selector)},
        "kubeletPlugin": {
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {"key": ACCELERATOR_LABEL, "operator": "In", "values": accelerators},
                                    {"key": ARCH_LABEL, "operator": "In", "values": archs},
                                ]
                            }
                        ]
                    }
                }
            },
            "tolerations": [t.exact_toleration() for t in (GPU_TAINT, *sorted(taints, key=lambda t: t.key))],
        },
    }


@dataclass(frozen=True)
class ComputeDomainDriverArgs:
    # The machines whose NVLink spans nodes, and how many of their nodes the cluster can hold.
    machines: Sequence[MachineType]
    nodes: int
    # The pool the driver's controller runs on.
    controller_selector: Mapping[str, str]

    def __post_init__(self) -> None:
        require(bool(self.machines), "machines", self.machines, "names the machines whose NVLink spans nodes")
        for machine in self.machines:
            require(machine.nvlink_across_nodes, "machines", machine.name, "has no NVLink across nodes")
        require(self.nodes > 0, "nodes", self.nodes, "must be positive")
        require(bool(self.controller_selector), "controller_selector", self.controller_selector, "pins the controller")


class ComputeDomainDriver(pulumi.ComponentResource):
    """NVIDIA's DRA driver (chart pinned in facts.versions) in its own namespace, with the quota
    GKE needs to admit its critical pods."""

    TYPE = "nemo:nvlink:ComputeDomainDriver"

    release: k8s.helm.v3.Release

    def __init__(self, name: str, args: ComputeDomainDriverArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(self.TYPE, name, None, opts)
        namespace = owned_namespace(f"{name}-namespace", NVIDIA_DRA_NAMESPACE, self)
        quota = k8s.core.v1.ResourceQuota(
            f"{name}-critical-pods",
            metadata={"name": "critical-pods", "namespace": namespace.metadata.name},
            spec={
                "hard": {"pods": str(driver_pods(args.nodes))},
                "scopeSelector": {
                    "matchExpressions": [
                        {"scopeName": "PriorityClass", "operator": "In", "values": list(CRITICAL_PRIORITIES)}
                    ]
                },
            },
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.release = pinned_release(
            f"{name}-release",
            versions.NVIDIA_DRA_DRIVER,
            namespace,
            driver_values(args.machines, args.controller_selector),
            pulumi.ResourceOptions(parent=self, depends_on=[quota]),
        )
        self.register_outputs({"release": self.release.name})


def compute_domain(machine: MachineType, workload: str, namespace: str, nodes: int) -> dict[str, Any] | None:
    """The ComputeDomain of one workload (a run, a fabric check) on the machine, where its NVLink
    spans nodes (else None): its controller creates the ResourceClaimTemplate of the same name,
    from which each of the workload's pods claims its IMEX channel. The spec is immutable (CRD
    rule `self == oldSelf`, computedomains.resource.nvidia.com@v0.4.1), so the name carries the
    digest of the spec: a workload on more nodes gets a new ComputeDomain, never a refused patch.
    `numNodes` is what GKE's guide and the recipes set (the driver no longer waits for it)."""
    if not machine.nvlink_across_nodes:
        return None
    name = versioned_name(f"{workload}-nvlink", {"numNodes": nodes})
    return {
        "apiVersion": COMPUTE_DOMAIN_API,
        "kind": "ComputeDomain",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"numNodes": nodes, "channel": {"resourceClaimTemplate": {"name": name}}},
    }


def channel_template(domain: Mapping[str, Any] | None) -> str | None:
    """The claim template a ComputeDomain's controller creates for its channels (None: no domain)."""
    return domain["spec"]["channel"]["resourceClaimTemplate"]["name"] if domain else None
