"""A MultiKueue manager's plan: its workers as Kueue dispatches to them, the flavors it mirrors, and
what must hold of every worker for a run to run wherever it lands.

Kueue's manager admits a run against its own ClusterQueue, then copies it to the workers, and the
first worker whose Kueue admits it runs it (site/content/en/docs/concepts/multikueue.md at the pinned
version). So:
- the manager's quota of each flavor is what its workers hold together (the same page: "the quota in
  the manager cluster should equal the total quota available in all worker clusters"), and its
  ResourceFlavors and Topology are the workers' own (site/static/examples/multikueue/tas/
  manager-setup.yaml): flavor names here are digests of their spec (planners.queues), so a pool
  alike on two workers is one flavor;
- the copy lands in the run's namespace and LocalQueue on the worker, which must exist there
  (site/content/en/docs/tasks/manage/setup_multikueue.md, "mirrors the one of the manager");
- MultiKueue needs the same Kueue and JobSet on both sides (the same page's CRD note; the manager
  copies objects of its own API version);
- a run's pods name the workers' claims, accounts and GPU networks, so those must be alike on every
  worker.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from facts.errors import RuleError
from facts.gke import CapacityType
from facts.kueue import Dispatch
from facts.pricing import INTER_REGION_STORAGE_SOURCE, INTER_REGION_STORAGE_USD_PER_GIB
from planners.networks import GpuNetworkPlan
from planners.pools import GpuPoolExport
from planners.queues import Flavor


@dataclass(frozen=True)
class Worker:
    """A worker as its manager dispatches runs to it (the manager's `platform.workers`)."""

    # Its MultiKueueCluster: the worker stack's name, as a DNS label.
    name: str
    stack: str
    # None: an existing cluster, whose region the program does not know.
    region: str | None
    gke: bool
    gpu_networks: tuple[GpuNetworkPlan, ...]
    pools: tuple[GpuPoolExport, ...]
    flavors: tuple[Flavor, ...]
    data_bucket: str | None = None
    checkpoint_bucket: str | None = None

    def flavor(self, pool: str) -> Flavor | None:
        return next((f for f in self.flavors if f.pool == pool), None)


@dataclass(frozen=True)
class WorkerOffer:
    """What a worker stack exports for its manager, with the key of the manager's config naming it."""

    key: str
    worker: Worker
    kueue_version: str | None
    jobset_version: str | None
    # Namespaces that hold the worker's LocalQueue `local_queue`.
    namespaces: tuple[str, ...]
    local_queue: str
    # What a run's pods name on the worker (claims, accounts, mounts): alike on every worker.
    run_shape: Mapping[str, Any]
    # The ranges the worker's control plane admits; empty: any address (or not known).
    control_plane_ranges: tuple[str, ...] = ()


@dataclass(frozen=True)
class ManagerPlan:
    workers: tuple[Worker, ...]
    # The workers' flavors, each with the capacity of every worker that has it.
    flavors: tuple[Flavor, ...]
    # Legal but costly: said once in the render and the summary.
    advice: tuple[str, ...]


_NOT_DNS = re.compile(r"[^a-z0-9-]+")


def worker_name(stack: str) -> str:
    """A worker's MultiKueueCluster name: its stack's name (`<org>/<project>/<stack>`) as a DNS label."""
    return _NOT_DNS.sub("-", stack.rsplit("/", 1)[-1].lower()).strip("-")[:63] or "worker"


def plan_manager(
    offers: Sequence[WorkerOffer],
    *,
    kueue_version: str,
    jobset_version: str,
    queues: Mapping[str, str],
    egress: Sequence[str] = (),
    dispatch: Dispatch = Dispatch.ALL_AT_ONCE,
) -> ManagerPlan:
    """The manager's workers and flavors; `queues` maps each namespace the manager queues runs in to
    its LocalQueue, `egress` lists the ranges the manager's Kueue reaches workers from, `dispatch`
    how it offers runs to them. Raises RuleError naming the worker's key."""
    advice: list[str] = []
    names: dict[str, str] = {}
    for offer in offers:
        name = offer.worker.name
        if name in names:
            why = f"is named {name} in Kueue, as {names[name]} is: give one of the stacks another name"
            raise RuleError(offer.key, offer.worker.stack, why)
        names[name] = offer.key
        _check_versions(offer, kueue_version, jobset_version, advice)
        _check_reach(offer, egress)
        for namespace, local_queue in queues.items():
            if namespace not in offer.namespaces or local_queue != offer.local_queue:
                why = (
                    f"has no LocalQueue {local_queue} in namespace {namespace} (it queues in "
                    f"{', '.join(offer.namespaces)} as {offer.local_queue}): Kueue creates a run's copy in its "
                    "namespace and LocalQueue on the worker; give the worker the manager's namespace and teams"
                )
                raise RuleError(offer.key, offer.worker.stack, why)
    _check_flex_start(offers, dispatch)
    first = offers[0]
    for offer in offers[1:]:
        for field, value in offer.run_shape.items():
            if value != first.run_shape.get(field):
                why = (
                    f"names {field} {value!r} where {first.key} names {first.run_shape.get(field)!r}: a run's pods "
                    "must find the same on whichever worker takes it"
                )
                raise RuleError(offer.key, offer.worker.stack, why)
    advice += _bucket_advice([o.worker for o in offers])
    return ManagerPlan(tuple(o.worker for o in offers), merged_flavors(offers), tuple(advice))


def _check_flex_start(offers: Sequence[WorkerOffer], dispatch: Dispatch) -> None:
    """MultiKueue keeps the first worker whose copy of a run is Admitted (the default dispatcher
    copies it to every worker: kueue pkg/controller/admissionchecks/multikueue/workload.go, "Get
    the admitting remote"), and a worker's Kueue admits a flex-start pool's run on quota alone,
    before GKE has a VM for it. With another worker to choose, the run could then wait there for
    the pods-ready timeout while that worker has nodes. Queued provisioning adds a
    ProvisioningRequest check, so a worker admits only once GKE has the VMs; neither dispatcher
    (all-at-once, incremental) waits for nodes. In order, the last worker is offered a run only
    once every other has left it unadmitted for a round: flex-start there is the chain's last
    resort, as a run's own chain may end on one."""
    if len(offers) < 2:
        return
    for offer in offers[:-1] if dispatch is Dispatch.IN_ORDER else offers:
        for pool in offer.worker.pools:
            if pool.capacity_type is CapacityType.FLEX_START:
                why = (
                    f"has the flex-start pool {pool.name}, whose runs its Kueue admits before any VM exists: "
                    "MultiKueue keeps the first worker to admit, so a run could wait there for the pods-ready "
                    "timeout while another worker has nodes. Give the pool capacityType queuedProvisioning in "
                    "that stack: its ProvisioningRequest check admits a run only once GKE has its VMs, or list it "
                    "last with multiKueue.dispatch: inOrder"
                )
                raise RuleError(offer.key, offer.worker.stack, why)


def _check_reach(offer: WorkerOffer, egress: Sequence[str]) -> None:
    """A worker whose control plane admits only some ranges (GKE's authorized networks) must admit
    every address the manager's Kueue connects from, or MultiKueue cannot reach it: the
    MultiKueueCluster stays inactive and no run is dispatched there."""
    if not offer.control_plane_ranges:
        return
    ranges = ", ".join(offer.control_plane_ranges)
    if not egress:
        why = (
            f"is needed: worker {offer.key} ({offer.worker.stack}) admits only {ranges} to its control plane. Give "
            "the manager's egress addresses (its Cloud NAT's, made static), each within one of those ranges, or add "
            "them to that stack's cluster.masterAuthorizedNetworks"
        )
        raise RuleError("multiKueue.egressRanges", None, why)
    allowed = [ipaddress.IPv4Network(r) for r in offer.control_plane_ranges]
    for source in egress:
        if not any(ipaddress.IPv4Network(source).subnet_of(r) for r in allowed):
            why = (
                f"admits only {ranges} to its control plane, not the manager's egress {source} "
                "(multiKueue.egressRanges): add it to that stack's cluster.masterAuthorizedNetworks"
            )
            raise RuleError(offer.key, offer.worker.stack, why)


def _check_versions(offer: WorkerOffer, kueue_version: str, jobset_version: str, advice: list[str]) -> None:
    pairs = (("Kueue", offer.kueue_version, kueue_version), ("JobSet", offer.jobset_version, jobset_version))
    for what, theirs, ours in pairs:
        if theirs is None:
            advice.append(
                f"{offer.key} ({offer.worker.stack}) runs the cluster's own {what} (kueue.install: false): MultiKueue "
                f"needs the manager's, {ours}; check it there by hand"
            )
        elif theirs != ours:
            why = f"runs {what} {theirs} and this manager {ours}: MultiKueue needs the same on both; update one"
            raise RuleError(offer.key, offer.worker.stack, why)


def merged_flavors(offers: Sequence[WorkerOffer]) -> tuple[Flavor, ...]:
    """Each flavor once, in the workers' order, with the capacity of all workers that have it."""
    merged: dict[str, Flavor] = {}
    owner: dict[str, tuple[str, str]] = {}
    for offer in offers:
        for flavor in offer.worker.flavors:
            seen = owner.get(flavor.pool)
            if seen is not None and seen[1] != flavor.name:
                why = (
                    f"has a pool {flavor.pool} unlike {seen[0]}'s pool of that name (another machine, size of node, "
                    "labels or taints): runs name pools, so give one of them another name"
                )
                raise RuleError(offer.key, offer.worker.stack, why)
            owner[flavor.pool] = (offer.key, flavor.name)
            known = merged.get(flavor.name)
            # A closed flavor (a booked pool outside its booking as of its worker's `up`) adds no
            # capacity to an open one of the name, and takes none from it.
            if known is None or (known.closed is not None and flavor.closed is None):
                merged[flavor.name] = flavor
            elif known.closed is None and flavor.closed is None:
                merged[flavor.name] = replace(
                    known,
                    nodes=known.nodes + flavor.nodes,
                    gpus=known.gpus + flavor.gpus,
                    cpu_millicores=known.cpu_millicores + flavor.cpu_millicores,
                    memory_mib=known.memory_mib + flavor.memory_mib,
                )
    if not merged:
        raise RuleError(offers[0].key, offers[0].worker.stack, "has no GPU pool, and neither has any other worker")
    return tuple(merged.values())


def _bucket_advice(workers: Sequence[Worker]) -> list[str]:
    """Where the runs' data and checkpoints live: a run reads its worker's buckets, so a bucket
    shared across regions is read across regions, and separate checkpoint buckets mean a run
    dispatched again to another worker starts over."""
    found: list[str] = []
    for role in ("data", "checkpoint"):
        users: dict[str, list[Worker]] = {}
        for worker in workers:
            bucket = worker.data_bucket if role == "data" else worker.checkpoint_bucket
            if bucket:
                users.setdefault(bucket, []).append(worker)
        for bucket, sharing in users.items():
            regions = sorted({w.region for w in sharing if w.region})
            if len(regions) > 1:
                found.append(
                    f"workers {', '.join(w.name for w in sharing)} share the {role} bucket {bucket} from regions "
                    f"{', '.join(regions)}: runs outside the bucket's region read and write it across regions, "
                    f"billed from {INTER_REGION_STORAGE_USD_PER_GIB:.2f} USD per GiB ({INTER_REGION_STORAGE_SOURCE})"
                )
        if role == "checkpoint" and len(users) > 1:
            found.append(
                f"workers write checkpoints to {len(users)} buckets ({', '.join(sorted(users))}): a run dispatched "
                "again to another worker (its worker lost) starts from that worker's checkpoints, not its own; "
                "share one bucket (storage.checkpointBucket.name, create: false on all but one) to resume anywhere"
            )
    return found


def worker_pools(workers: Sequence[Worker]) -> dict[str, tuple[GpuPoolExport, str]]:
    """Where a MultiKueue manager's runs are priced: each pool of the first worker that has it, in
    that worker's region (none known for an existing cluster's)."""
    found: dict[str, tuple[GpuPoolExport, str]] = {}
    for worker in workers:
        for pool in worker.pools:
            found.setdefault(pool.name, (pool, worker.region or ""))
    return found
