"""What NVIDIA's DRA driver would put on the lane for a pool whose NVLink spans nodes (A4X), so
that the real API server, kube-scheduler, kube-controller-manager and Kueue act on the program's
ComputeDomains and channel claims. Nothing of the driver runs here; each stand-in follows the
driver's source, NVIDIA/k8s-dra-driver-gpu (kubernetes-sigs/dra-driver-nvidia-gpu) @2240711:

- the ComputeDomain CRD: the driver's own, from the Go module of the pinned chart's tag;
- the channel DeviceClass its chart installs (templates/deviceclass-compute-domain-default-channel.yaml);
- one ResourceSlice per node as its kubelet plugin publishes it (cmd/compute-domain-kubelet-plugin:
  driver compute-domain.nvidia.com, the node's own pool, `channel-N` and `daemon-0` devices); a
  slice holds at most 128 devices, so the lane publishes channel 0, the one the class selects, and
  the daemon, of the 2048 channels the plugin offers;
- the ResourceClaimTemplate its controller creates for each ComputeDomain
  (templates/compute-domain-workload-claim-template.tmpl.yaml), opaque channel configuration included.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import yaml

from facts import versions
from facts.kubernetes import COMPUTE_DOMAIN_API, IMEX_CHANNEL_DEVICE_CLASS
from tools import crds

DRIVER = "compute-domain.nvidia.com"
COMPUTE_DOMAIN_CRD_FILE = "resource.nvidia.com_computedomains.yaml"
RESOURCE_API = "resource.k8s.io/v1"
_CHANNEL = f"device.attributes['{DRIVER}']"


def compute_domain_crd() -> dict[str, Any]:
    """The driver's ComputeDomain CRD, from the module of the pinned chart's tag (its crds/ folder,
    as the chart installs it; tools.crds fetches and checks the module)."""
    module = next(m for m in versions.CRD_MODULES if COMPUTE_DOMAIN_API.split("/")[0] in m.groups)
    path = crds.module_dir(module) / module.path / COMPUTE_DOMAIN_CRD_FILE
    crd: dict[str, Any] = yaml.safe_load(path.read_text())
    return crd


def channel_device_class() -> dict[str, Any]:
    return {
        "apiVersion": RESOURCE_API,
        "kind": "DeviceClass",
        "metadata": {"name": IMEX_CHANNEL_DEVICE_CLASS},
        "spec": {
            "selectors": [
                {
                    "cel": {
                        "expression": f"device.driver == '{DRIVER}' && {_CHANNEL}.type == 'channel' "
                        f"&& {_CHANNEL}.id == 0"
                    }
                }
            ]
        },
    }


def resource_slice(node: str) -> dict[str, Any]:
    def device(kind: str) -> dict[str, Any]:
        return {"name": f"{kind}-0", "attributes": {"type": {"string": kind}, "id": {"int": 0}}}

    return {
        "apiVersion": RESOURCE_API,
        "kind": "ResourceSlice",
        "metadata": {"name": f"{DRIVER}-{node}"},
        "spec": {
            "driver": DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": [device("channel"), device("daemon")],
        },
    }


def claim_template(domain: Mapping[str, Any]) -> dict[str, Any]:
    """The ResourceClaimTemplate the driver's controller creates for a ComputeDomain."""
    template = domain["spec"]["channel"]["resourceClaimTemplate"]["name"]
    return {
        "apiVersion": RESOURCE_API,
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": template, "namespace": domain["metadata"]["namespace"]},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [{"name": "channel", "exactly": {"deviceClassName": IMEX_CHANNEL_DEVICE_CLASS}}],
                    "config": [
                        {
                            "requests": ["channel"],
                            "opaque": {
                                "driver": DRIVER,
                                "parameters": {
                                    "apiVersion": COMPUTE_DOMAIN_API,
                                    "kind": "ComputeDomainChannelConfig",
                                    "domainID": str(uuid.uuid5(uuid.NAMESPACE_URL, template)),
                                    "allocationMode": domain["spec"]["channel"].get("allocationMode", "Single"),
                                },
                            },
                        }
                    ],
                }
            }
        },
    }


def driver_objects(nodes: Sequence[str]) -> list[dict[str, Any]]:
    """The CRD, the DeviceClass and the nodes' ResourceSlices, in the order they can be created."""
    return [compute_domain_crd(), channel_device_class(), *(resource_slice(node) for node in nodes)]
