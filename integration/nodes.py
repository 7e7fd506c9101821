"""kwok's simulated nodes, shaped like a stack's GPU pools: their labels (the pool's selector,
GKE's accelerator and topology labels), the GPU taint and the allocatable GPUs, CPUs and memory
of the machine type."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import yaml

from facts import nvsentinel
from facts.kubernetes import (
    GPU_RESOURCE,
    HOSTNAME_LABEL,
    TOPOLOGY_LABELS,
    TopologyLevel,
)  # fmt: skip
from harness.runner import StackRun
from integration.controlplane import (
    CACHE,
    KWOK_NODE_ANNOTATION,
    LOCALHOST,
    Api,
    Lane,
    binary,
    free_port,
    has_condition,
    lane_pins,
    wait_for,
)
from planners.pools import GpuPoolExport
from planners.queues import plan_flavor
from stacks.contract import ClusterExports

# --------------------------------------------------------------------------- nodes


def pool_nodes(pool: GpuPoolExport) -> list[str]:
    """The names of a GPU pool's simulated nodes."""
    return [f"{pool.name}-{i}" for i in range(pool.max_nodes)]


def nvlink_nodes(run: StackRun) -> list[str]:
    """The simulated nodes of the pools whose NVLink spans nodes (integration.dra publishes
    their IMEX channels)."""
    pools = ClusterExports.from_plain(run.exports["cluster"]).gpu_pools
    return [node for pool in pools if pool.machine.nvlink_across_nodes for node in pool_nodes(pool)]


def node_manifests(run: StackRun) -> list[dict[str, Any]]:
    """One Node per node of each GPU pool of the stack, labelled, tainted and sized as the
    cluster facts describe it (GKE's labels for a GKE pool, the described ones for an existing
    cluster's), with GKE's topology labels where the pool has them: a sub-block of 4 nodes, or of
    one NVLink domain where NVLink spans nodes (an A4X sub-block is its NVL72 domain)."""
    nodes = []
    for pool in ClusterExports.from_plain(run.exports["cluster"]).gpu_pools:
        machine = pool.machine
        flavor = plan_flavor(pool)
        millicores, mib = machine.allocatable
        subblock = machine.nvlink_domain_nodes if machine.nvlink_across_nodes else 4
        for i, name in enumerate(pool_nodes(pool)):
            labels = {**flavor.node_labels, HOSTNAME_LABEL: name, "type": "kwok"}
            if pool.has_topology_labels:
                labels |= {
                    TOPOLOGY_LABELS[TopologyLevel.BLOCK]: "block-0",
                    TOPOLOGY_LABELS[TopologyLevel.SUBBLOCK]: f"subblock-{i // subblock}",
                    TOPOLOGY_LABELS[TopologyLevel.HOST]: f"host-{i}",
                }
            capacity = {"cpu": f"{millicores}m", "memory": f"{mib}Mi", GPU_RESOURCE: str(machine.gpus), "pods": "110"}
            nodes.append(
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "metadata": {"name": name, "labels": labels, "annotations": {KWOK_NODE_ANNOTATION: "fake"}},
                    "spec": {"taints": [taint.for_node() for taint in pool.node_taints]},
                    "status": {"capacity": capacity, "allocatable": capacity},
                }
            )
    system = {"cpu": "8", "memory": "32Gi", "pods": "110"}
    nodes.append(
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": "system-0",
                "labels": {
                    "kubernetes.io/os": "linux",
                    "cloud.google.com/gke-nodepool": "system",
                    HOSTNAME_LABEL: "system-0",
                    "type": "kwok",
                },
                "annotations": {KWOK_NODE_ANNOTATION: "fake"},
            },
            "status": {"capacity": system, "allocatable": system},
        }
    )
    return nodes


# Pods labelled so stay Pending and never ready, as pods whose image never pulls: kwok's pod-ready
# stage passes them by (a scenario of Kueue's waitForPodsReady).
NEVER_READY_LABEL = "neverready"


def kwok_stages(workdir: Path, pods_complete: bool) -> Path:
    """kwok's own "fast" node and pod stages, from its module (nothing of it is committed), with
    pods labelled NEVER_READY_LABEL left out of readiness.
    Without `pods_complete`, a Job's pods stay Running until someone marks them Succeeded."""
    module = (
        Path(os.environ.get("GOMODCACHE", CACHE / "go" / "mod")) / f"sigs.k8s.io/kwok@{lane_pins()['KWOK_VERSION']}"
    )
    pod_stages = sorted((module / "kustomize/stage/pod/fast").glob("pod-*.yaml"))
    stages = [
        yaml.safe_load(path.read_text())
        for path in (
            module / "kustomize/stage/node/fast/node-initialize.yaml",
            module / "kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
            *(p for p in pod_stages if pods_complete or p.name != "pod-complete.yaml"),
        )
    ]
    for stage in stages:
        if stage["metadata"]["name"] == "pod-ready":
            stage["spec"]["selector"]["matchExpressions"].append(
                {"key": f".metadata.labels.{NEVER_READY_LABEL}", "operator": "DoesNotExist"}
            )
    target = workdir / "kwok-stages.yaml"
    target.write_text(yaml.safe_dump_all(stages))
    return target


# The node lease kwok holds and renews for each node it manages, a quarter of it apart, as a kubelet
# does (its default, 40 s). Without the flag kwok held none: the nodes lived on their status
# heartbeats alone, which kwok's heartbeat stage sends every 10 minutes, so the node lifecycle
# controller marked every node NotReady 50 s after each ("all Nodes are not-Ready", every 55 s),
# kwok's node stage made them Ready again 5 s later, and Kueue could take the flicker of a second
# node of a run for a second failure and evict it.
NODE_LEASE_SECONDS = 40
# Who holds a silenced node's lease, and for how long: longer than any scenario, so that kwok
# neither renews it nor takes it back.
SILENT_HOLDER = "silent"
SILENT_LEASE_SECONDS = 3600


def _lease_path(node: str) -> str:
    return f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{node}"


def silence(api: Api, node: str) -> None:
    """The node's kubelet falls silent, as a hung host's does: kwok stops managing the node and
    its lease is no longer renewed, so the node lifecycle controller marks it NotReady once the
    lease is older than its grace period."""
    _kwok_manages(api, node, False)
    patch = {"spec": {"holderIdentity": SILENT_HOLDER, "leaseDurationSeconds": SILENT_LEASE_SECONDS}}
    code, answer = api.request("PATCH", _lease_path(node), patch, STRATEGIC)
    assert code == 200, answer


def revive(api: Api, node: str) -> None:
    """The node's kubelet is back: kwok manages the node again and holds a new lease."""
    code, answer = api.request("DELETE", _lease_path(node))
    assert code in (200, 404), answer
    _kwok_manages(api, node, True)


def _kwok_manages(api: Api, node: str, managed: bool) -> None:
    patch = {"metadata": {"annotations": {KWOK_NODE_ANNOTATION: "fake" if managed else "silent"}}}
    code, answer = api.request("PATCH", f"/api/v1/nodes/{node}", patch)
    assert code == 200, answer


def simulated_nodes(lane: Lane, api: Api, run: StackRun, pods_complete: bool = True) -> int:
    nodes = node_manifests(run)
    with lane.phase(f"kwok and {len(nodes)} nodes"):
        lane.start("kwok", [
            str(binary("kwok")), "--kubeconfig", str(lane.workdir / "admin.kubeconfig"),
            "--manage-all-nodes=false", f"--manage-nodes-with-annotation-selector={KWOK_NODE_ANNOTATION}=fake",
            "--config", str(kwok_stages(lane.workdir, pods_complete)), "--server-address", f"{LOCALHOST}:{free_port()}",
            "--node-lease-duration-seconds", str(NODE_LEASE_SECONDS),
        ])  # fmt: skip
        for node in nodes:
            api.create("/api/v1/nodes", node)

        def all_ready() -> bool:
            lane.check_alive()
            _, listing = api.request("GET", "/api/v1/nodes")
            return sum(has_condition(n, "Ready") for n in listing["items"]) == len(nodes)

        wait_for("the simulated nodes", all_ready)
    return len(nodes)


# --------------------------------------------------------------------------- NVSentinel's quarantine

# A node's conditions merge by type under a strategic merge patch, as the connector updates them.
STRATEGIC = "application/strategic-merge-patch+json"


def quarantine(api: Api, node: str, check: str, message: str) -> None:
    """What NVSentinel does to a node on a fatal health event (facts.nvsentinel): the event's
    condition, then the cordon with its labels and annotations. The node lifecycle controller adds
    the unschedulable taint, as on any cordoned node."""
    status = {"status": {"conditions": [nvsentinel.fault_condition(check, message)]}}
    code, answer = api.request("PATCH", f"/api/v1/nodes/{node}/status", status, STRATEGIC)
    assert code == 200, answer
    event = json.dumps({node: [{"checkName": check, "isFatal": True}]})
    patch = {
        "metadata": {
            "labels": {
                nvsentinel.CORDON_BY_LABEL: nvsentinel.CORDON_BY,
                nvsentinel.CORDON_REASON_LABEL: check,
                nvsentinel.STATE_LABEL: nvsentinel.QUARANTINED,
            },
            "annotations": {
                nvsentinel.HEALTH_EVENTS_ANNOTATION: event,
                nvsentinel.CORDONED_ANNOTATION: nvsentinel.CORDONED,
            },
        },
        "spec": {"unschedulable": True},
    }
    code, answer = api.request("PATCH", f"/api/v1/nodes/{node}", patch)
    assert code == 200, answer


def release(api: Api, node: str, check: str) -> None:
    """What NVSentinel does once every check of the node is healthy again: the condition False, its
    labels and annotations removed, the node uncordoned."""
    healthy = nvsentinel.healthy_condition(check)
    code, answer = api.request(
        "PATCH", f"/api/v1/nodes/{node}/status", {"status": {"conditions": [healthy]}}, STRATEGIC
    )
    assert code == 200, answer
    labels = (nvsentinel.CORDON_BY_LABEL, nvsentinel.CORDON_REASON_LABEL, nvsentinel.STATE_LABEL)
    annotations = (nvsentinel.HEALTH_EVENTS_ANNOTATION, nvsentinel.CORDONED_ANNOTATION)
    patch = {
        "metadata": {"labels": dict.fromkeys(labels), "annotations": dict.fromkeys(annotations)},
        "spec": {"unschedulable": None},
    }
    code, answer = api.request("PATCH", f"/api/v1/nodes/{node}", patch)
    assert code == 200, answer


def evict(api: Api, namespace: str, pod: str, grace_seconds: int) -> None:
    """The Eviction API, as NVSentinel's drainer uses it in Immediate mode."""
    eviction = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": pod, "namespace": namespace},
        "deleteOptions": {"gracePeriodSeconds": grace_seconds},
    }
    code, answer = api.request("POST", f"/api/v1/namespaces/{namespace}/pods/{pod}/eviction", eviction)
    assert code == 201, answer
