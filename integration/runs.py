"""The program's objects applied to the lane, and its runs admitted and placed by the real Kueue
and JobSet."""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from facts.kubernetes import (
    HOSTNAME_LABEL,
    JOBSET_API,
    JOBSET_UID_LABEL,
    KUEUE_API,
)  # fmt: skip
from harness.runner import StackRun
from integration.controlplane import Api, Lane, has_condition, wait_for
from integration.dra import claim_template

# --------------------------------------------------------------------------- the program's objects

# What the lane applies of a stack's render: the platform's namespace, identities, claims and
# queues, and the runs. The controllers themselves run as processes above.
APPLIED_KINDS = (
    "Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Secret", "PersistentVolumeClaim",
    "ResourceFlavor", "Topology", "MultiKueueCluster", "MultiKueueConfig", "AdmissionCheck",
    "WorkloadPriorityClass", "Cohort", "ClusterQueue", "LocalQueue", "ConfigMap", "ComputeDomain",
    "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "Role", "RoleBinding", "JobSet",
)  # fmt: skip


def _plural(kind: str) -> str:
    lower = kind.lower()
    if lower.endswith("y"):
        return lower[:-1] + "ies"
    return lower + ("es" if lower.endswith("s") else "s")


def api_path(manifest: Mapping[str, Any]) -> str:
    """The collection a manifest is created in."""
    version = manifest["apiVersion"]
    base = f"/api/{version}" if "/" not in version else f"/apis/{version}"
    namespace = manifest["metadata"].get("namespace")
    scope = f"/namespaces/{namespace}" if namespace else ""
    return f"{base}{scope}/{_plural(manifest['kind'])}"


def stack_objects(run: StackRun) -> list[dict[str, Any]]:
    by_kind: dict[str, list[dict[str, Any]]] = {kind: [] for kind in APPLIED_KINDS}
    for resource in run.resources:
        kind = resource.type.rsplit(":", 1)[-1]
        if resource.custom and kind in by_kind:
            by_kind[kind].append(run.manifest(resource))
    return [m for kind in APPLIED_KINDS for m in by_kind[kind]]


def claim_volumes(objects: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """A StorageClass without a provisioner and a volume per claim: the claims bind, so the
    runs' pods can be scheduled on the simulated nodes."""
    claims = [m for m in objects if m["kind"] == "PersistentVolumeClaim"]
    # A claim of class "" binds only to a volume without a class (GKE's bucket volumes).
    classes = {c["spec"]["storageClassName"] for c in claims} - {""}
    found: list[dict[str, Any]] = [
        {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": name},
         "provisioner": "kubernetes.io/no-provisioner", "volumeBindingMode": "Immediate"}
        for name in classes
    ]  # fmt: skip
    for claim in claims:
        found.append({
            "apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": f"{claim['metadata']['namespace']}-{claim['metadata']['name']}"},
            "spec": {
                "capacity": {"storage": claim["spec"]["resources"]["requests"]["storage"]},
                "accessModes": ["ReadWriteMany"], "storageClassName": claim["spec"]["storageClassName"],
                "hostPath": {"path": f"/tmp/lane/{claim['metadata']['name']}"},
                "claimRef": {"namespace": claim["metadata"]["namespace"], "name": claim["metadata"]["name"]},
            },
        })  # fmt: skip
    return found


def jobset_run(api: Api, namespace: str, name: str) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """The Workload and pods of the JobSet now named `name`, matched by its uid, not those of an
    earlier JobSet of the same name; (None, []) while there is no such JobSet."""
    status, jobset = api.request("GET", f"/apis/{JOBSET_API}/namespaces/{namespace}/jobsets/{name}")
    if status != 200:
        return None, []
    uid = jobset["metadata"]["uid"]
    _, workloads = api.request("GET", f"/apis/{KUEUE_API}/namespaces/{namespace}/workloads")
    owned = (w for w in workloads["items"] if any(o["uid"] == uid for o in w["metadata"].get("ownerReferences", [])))
    _, pods = api.request("GET", f"/api/v1/namespaces/{namespace}/pods?labelSelector={JOBSET_UID_LABEL}={uid}")
    return next(owned, None), list(pods["items"])


def run_state(api: Api, namespace: str, jobset: str, nodes: Sequence[str] = ()) -> str:
    """One line of what holds the JobSet's run: its Workload's conditions, flavors and unhealthy
    nodes, each pod's phase, node or node selector and gates, and `nodes`' readiness and taints."""
    workload, pods = jobset_run(api, namespace, jobset)
    parts = []
    if workload is None:
        parts.append("no workload")
    else:
        status = workload.get("status") or {}
        conditions = [f"{c['type']}={c['status']}({c.get('reason', '')})" for c in status.get("conditions") or ()]
        assignments = (status.get("admission") or {}).get("podSetAssignments") or ()
        flavors = sorted({f for a in assignments for f in a.get("flavors", {}).values()})
        unhealthy = [n["name"] for n in status.get("unhealthyNodes") or ()]
        parts.append(f"workload {' '.join(conditions)} flavors {flavors} unhealthy nodes {unhealthy}")
    for pod in pods:
        spec, phase = pod["spec"], (pod.get("status") or {}).get("phase")
        where = spec.get("nodeName") or f"selector {(spec.get('nodeSelector') or {}).get(HOSTNAME_LABEL)}"
        gates = [g["name"] for g in spec.get("schedulingGates") or ()]
        deleting = " deleting" if pod["metadata"].get("deletionTimestamp") else ""
        parts.append(f"pod {pod['metadata']['name']} {phase}{deleting} on {where} gates {gates}")
    for node in nodes:
        code, found = api.request("GET", f"/api/v1/nodes/{node}")
        if code != 200:
            parts.append(f"node {node} {code}")
            continue
        ready: dict[str, Any] = next((c for c in found["status"].get("conditions") or () if c["type"] == "Ready"), {})
        taints = [f"{t['key']}:{t['effect']}" for t in found["spec"].get("taints") or ()]
        parts.append(f"node {node} Ready={ready.get('status')}({ready.get('reason')}) taints {taints}")
    return "; ".join(parts)


def placed(api: Api, namespace: str, jobset: str, pods_wanted: int) -> bool:
    """The JobSet's Workload is admitted and every one of its pods is bound to a node."""
    workload, pods = jobset_run(api, namespace, jobset)
    nodes = [p["spec"].get("nodeName") for p in pods]
    return workload is not None and has_condition(workload, "Admitted") and len(nodes) == pods_wanted and all(nodes)


@dataclass(frozen=True)
class Admitted:
    """A run as the real Kueue admitted it and the scheduler bound its pods."""

    name: str
    flavors: dict[str, str]
    # The topology-aware placement Kueue assigned (None: admitted without topology).
    topology: dict[str, Any] | None
    # Node of each pod.
    nodes: list[str]


def apply_objects(lane: Lane, api: Api, objects: Sequence[Mapping[str, Any]]) -> None:
    """Create the objects (and a volume for each claim)."""
    with lane.phase(f"{len(objects)} objects of the stack applied"):
        for manifest in [*claim_volumes(objects), *objects]:
            api.create(api_path(manifest), manifest)
            if manifest["kind"] == "ComputeDomain":
                # The driver's controller creates the domain's channel claim template at once.
                template = claim_template(manifest)
                api.create(api_path(template), template)


def delete_jobset(api: Api, namespace: str, name: str) -> None:
    """Delete a JobSet; its Jobs and pods go in the background, as `kubectl delete` does."""
    api.request(
        "DELETE", f"/apis/{JOBSET_API}/namespaces/{namespace}/jobsets/{name}", {"propagationPolicy": "Background"}
    )


def clear_runs(lane: Lane, api: Api, namespaces: Sequence[str]) -> None:
    """Delete every JobSet of the namespaces and wait until none of them holds a Workload or a pod."""
    for namespace in namespaces:
        _, listing = api.request("GET", f"/apis/{JOBSET_API}/namespaces/{namespace}/jobsets")
        for item in listing["items"]:
            delete_jobset(api, namespace, item["metadata"]["name"])

    def empty() -> bool:
        for namespace in namespaces:
            _, pods = api.request("GET", f"/api/v1/namespaces/{namespace}/pods")
            _, workloads = api.request("GET", f"/apis/{KUEUE_API}/namespaces/{namespace}/workloads")
            if pods["items"] or workloads["items"]:
                return False
        return True

    wait_for("no run left", lambda: lane.alive() and empty(), timeout=120)


def resized(jobset: Mapping[str, Any], name: str, nodes: int) -> dict[str, Any]:
    """A copy of a run's JobSet under another name, on `nodes` nodes: what the queues see of a
    run of that size (the simulated pods run no program)."""
    copy: dict[str, Any] = json.loads(json.dumps(jobset))
    copy["metadata"]["name"] = name
    job = copy["spec"]["replicatedJobs"][0]["template"]["spec"]
    job["parallelism"] = job["completions"] = nodes
    return copy


def admit_runs(lane: Lane, api: Api, run: StackRun) -> list[Admitted]:
    """Apply the stack's objects; wait until every run's Workload is admitted and its pods bound
    to the simulated nodes."""
    objects = stack_objects(run)
    jobsets = [m for m in objects if m["kind"] == "JobSet"]
    apply_objects(lane, api, objects)
    admitted = []
    for jobset in jobsets:
        namespace, name = jobset["metadata"]["namespace"], jobset["metadata"]["name"]
        parallelism = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["parallelism"]
        with lane.phase(f"run {name} admitted and placed"):
            check = functools.partial(placed, api, namespace, name, parallelism)
            wait_for(f"run {name}", lambda check=check: lane.alive() and check(), timeout=180)
        workload, pods = jobset_run(api, namespace, name)
        if workload is None:
            raise RuntimeError(f"run {name}: its Workload is gone")
        assignment = workload["status"]["admission"]["podSetAssignments"][0]
        nodes = sorted(p["spec"]["nodeName"] for p in pods)
        admitted.append(Admitted(name, assignment["flavors"], assignment.get("topologyAssignment"), nodes))
    return admitted
