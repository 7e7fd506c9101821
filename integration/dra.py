"""What NVIDIA's DRA driver would put on the lane for a pool whose NVLink spans nodes (A4X), so
that the real API server, kube-scheduler, kube-controller-manager and Kueue act on the program's
ComputeDomains and channel claims. Nothing of the driver runs here; each stand-in follows the
driver's source, NVIDIA/k8s-dra-driver-gpu (kubernetes-sigs/dra-driver-nvidia-gpu) @2240711:

- the ComputeDomain CRD: the harness's schema of it (harness.schemas.STAND_IN_SCHEMAS), with the
  CRD's immutability rule (`self == oldSelf` on spec);
- the channel DeviceClass its chart installs (templates/deviceclass-compute-domain-default-channel.yaml);
- one ResourceSlice per node as its kubelet plugin publishes it (cmd/compute-domain-kubelet-plugin:
  driver compute-domain.nvidia.com, the node's own pool, `channel-N` and `daemon-0` devices); a
  slice holds at most 128 devices, so the lane publishes channel 0, the one the class selects, and
  the daemon, of the 2048 channels the plugin offers;
- the ResourceClaimTemplate its controller creates for each ComputeDomain
  (templates/compute-domain-workload-claim-template.tmpl.yaml), opaque channel configuration included.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from facts.kubernetes import COMPUTE_DOMAIN_API, IMEX_CHANNEL_DEVICE_CLASS
from harness.schemas import STAND_IN_SCHEMAS

DRIVER = "compute-domain.nvidia.com"
RESOURCE_API = "resource.k8s.io/v1"
_CHANNEL = f"device.attributes['{DRIVER}']"


def _structural(schema: Any) -> Any:
    """A strict JSON schema as a CRD's structural schema: the API server prunes unknown fields
    instead (a CRD schema may not say `additionalProperties: false`)."""
    if isinstance(schema, Mapping):
        return {k: _structural(v) for k, v in schema.items() if k != "additionalProperties"}
    if isinstance(schema, list):
        return [_structural(v) for v in schema]
    return schema


def compute_domain_crd() -> dict[str, Any]:
    group, version = COMPUTE_DOMAIN_API.split("/")
    schema = _structural(copy.deepcopy(STAND_IN_SCHEMAS[(COMPUTE_DOMAIN_API, "ComputeDomain")]))
    schema["properties"]["spec"]["x-kubernetes-validations"] = [
        {"rule": "self == oldSelf", "message": "A computeDomain.spec is immutable"}
    ]
    schema["properties"]["status"] = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"computedomains.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"kind": "ComputeDomain", "plural": "computedomains", "singular": "computedomain"},
            "versions": [
                {
                    "name": version,
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": schema},
                    "subresources": {"status": {}},
                }
            ],
        },
    }


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
