"""Whether a cluster's own Kueue and JobSet can take this program's objects, from their CRDs as
the API server returns them: each kind's CRD exists, serves the version the program writes, and
its schema knows every field the program sets (facts.controller_api).

The API server prunes a field its structural schema does not know, with no error (Kubernetes
docs, "Field pruning" under CustomResourceDefinitions), so an older release would take the
objects and silently drop, say, a flavor's topologyName. Hence the fields, not only the version.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from facts.controller_api import CONTROLLER_KINDS, KUEUE_RETIRED_VERSION, ControllerKind
from facts.kubernetes import GPU_RESOURCE, KUEUE_API, KUEUE_NAMESPACE
from facts.kueue import KUEUE_CONFIG_MAP, KUEUE_GROUP, MULTIKUEUE_IN_ORDER, MULTIKUEUE_IN_ORDER_GATES, XPK_CLUSTER_QUEUE
from facts.project import PROJECT
from facts.versions import JOBSET_CRD
from planners.ownership import installer, mark_of


def served_schema(crd: Mapping[str, Any], version: str) -> Mapping[str, Any] | None:
    """The OpenAPI schema of `version` if the CRD serves it."""
    for entry in crd.get("spec", {}).get("versions", []):
        if entry.get("name") == version and entry.get("served"):
            schema: Mapping[str, Any] = entry.get("schema", {}).get("openAPIV3Schema", {})
            return schema
    return None


def schema_knows(schema: Mapping[str, Any], path: str) -> bool:
    """The schema defines the field at `path`; a subtree that keeps unknown fields knows all."""
    node: Mapping[str, Any] | None = schema
    for step in path.split("."):
        if node is None:
            return False
        if node.get("x-kubernetes-preserve-unknown-fields"):
            return True
        name, into_items = (step[:-2], True) if step.endswith("[]") else (step, False)
        node = node.get("properties", {}).get(name)
        if node is not None and into_items:
            node = node.get("items")
    return node is not None


def kind_problem(kind: ControllerKind, crd: Mapping[str, Any] | None) -> str | None:
    upgrade = f"install {kind.release} or later, or let the program install it (kueue.install: true)"
    if crd is None:
        return f"the cluster has no CRD {kind.crd_name} ({kind.kind}): {upgrade}"
    schema = served_schema(crd, kind.version)
    if schema is None:
        served = [v["name"] for v in crd.get("spec", {}).get("versions", []) if v.get("served")]
        return f"{kind.crd_name} serves {', '.join(served) or 'no version'}, not {kind.version}: {upgrade}"
    missing = [path for path in kind.fields if not schema_knows(schema, path)]
    if missing:
        return (
            f"{kind.crd_name} {kind.version} lacks {', '.join(missing)}, which this program sets: "
            f"the cluster's release is older than {kind.release}; {upgrade}"
        )
    return None


def controller_api_problems(crds: Mapping[str, Mapping[str, Any] | None]) -> list[str]:
    """One line per kind the cluster cannot take; `crds` maps each CRD name to the CRD, or to
    None where the cluster has none."""
    problems = (kind_problem(kind, crds.get(kind.crd_name)) for kind in CONTROLLER_KINDS)
    return [p for p in problems if p is not None]


def crd_names() -> tuple[str, ...]:
    """The CRDs read of an existing cluster: the kinds the program writes, and Workloads, the
    Kueue objects most likely stored at a retired version (stored_version_advice)."""
    return (*(kind.crd_name for kind in CONTROLLER_KINDS), f"workloads.{KUEUE_GROUP}")


def installed_by_others(crds: Mapping[str, Mapping[str, Any] | None], identity: str) -> list[str]:
    """`kueue.install: true` on a cluster that already runs Kueue or JobSet: one line per controller
    this stack did not install. The stack applies the JobSet CRD itself, marked with its identity
    (facts.kubernetes.STACK_ANNOTATION), before Kueue's release: a JobSet CRD without that mark is
    someone else's, and so is Kueue where it is not. pulumi-kubernetes creates with a client-side
    create that fails with AlreadyExists on any object that exists (pulumi/pulumi-kubernetes#4278,
    from v4.29), so such a stack's first `up` would fail half-way."""
    jobset = crds.get(JOBSET_CRD) or {}
    if mark_of(jobset) == identity:
        return []
    present = {
        kind.release.split()[0]: (kind.crd_name, crd)
        for kind in reversed(CONTROLLER_KINDS)
        if (crd := crds.get(kind.crd_name)) is not None
    }
    return [
        f"the cluster already runs {controller} (its CRD {name} was installed {installer(crd)}), which this "
        f"stack would create again and fail with AlreadyExists: use the cluster's own with `pulumi config set "
        f"--path {PROJECT}:kueue.install false` (its API is then checked before anything is created), or remove it"
        for controller, (name, crd) in sorted(present.items())
    ]


def stored_version_advice(crds: Mapping[str, Mapping[str, Any] | None]) -> list[str]:
    """One line where the cluster's Kueue CRDs still list the retired version among their stored
    versions: such objects stay stored so until written again, and a Kueue that no longer serves
    the version cannot read them (facts.controller_api.KUEUE_RETIRED_VERSION)."""
    stale = sorted(
        name
        for name, crd in crds.items()
        if crd
        and name.endswith(f".{KUEUE_GROUP}")
        and KUEUE_RETIRED_VERSION in (crd.get("status") or {}).get("storedVersions", [])
    )
    if not stale:
        return []
    return [
        f"the cluster's Kueue may hold {', '.join(stale)} objects stored at {KUEUE_RETIRED_VERSION} (the CRDs' "
        f"status.storedVersions): Kueue 0.20 stops serving {KUEUE_RETIRED_VERSION} and then cannot read them. Before "
        f"any move to 0.20, rewrite every such object at {KUEUE_API.split('/')[1]} (Kueue's migration script, "
        "kubernetes-sigs/kueue#8020, or kube-storage-version-migrator) and drop "
        f"{KUEUE_RETIRED_VERSION} from each CRD's status.storedVersions"
    ]


def _fair_sharing(config: Mapping[str, Any]) -> bool:
    """Kueue's Configuration enables fair sharing with a `fairSharing` section (config v1beta2),
    or `fairSharing.enable: true` (v1beta1)."""
    section = config.get("fairSharing")
    if not isinstance(section, Mapping):
        return False
    return bool(section.get("enable")) if str(config.get("apiVersion", "")).endswith("/v1beta1") else True


def shared_kueue_advice(
    config: Mapping[str, Any] | None,
    cluster_queues: Sequence[Mapping[str, Any]],
    flavors: Sequence[Mapping[str, Any]],
    ours: Collection[str],
    pools: Mapping[str, Mapping[str, str]],
) -> list[str]:
    """What a cluster's own Kueue (`kueue.install: false`) means for the teams' shares: fair sharing
    off in its Configuration (`config`, None where unread; the teams' weights and the preemption
    between them then do nothing), and
    each ClusterQueue not in `ours` that admits GPUs on a flavor selecting the nodes of `pools`
    (pool: its node labels) or any node: Kueue counts each ClusterQueue's quota on its own, so jobs
    queued there take the teams' nodes outside their cohort (xpk's queue is named cluster-queue)."""
    advice = []
    where = f"{KUEUE_NAMESPACE}/{KUEUE_CONFIG_MAP}"
    if config is None:
        advice.append(
            f"the cluster's Kueue Configuration ({where}) could not be read: check that it "
            "sets fairSharing, without which the teams' weights and the preemption between them do nothing"
        )
    elif not _fair_sharing(config):
        advice.append(
            f"the cluster's Kueue runs without fair sharing ({where} sets no fairSharing): "
            "the teams' weights and the preemption between them do nothing until it does"
        )
    selectors = {
        str((f.get("metadata") or {}).get("name")): dict((f.get("spec") or {}).get("nodeLabels") or {}) for f in flavors
    }
    for queue in cluster_queues:
        name = str((queue.get("metadata") or {}).get("name"))
        if name in ours:
            continue
        for group in (queue.get("spec") or {}).get("resourceGroups", []):
            if GPU_RESOURCE not in group.get("coveredResources", []):
                continue
            for flavor in group.get("flavors", []):
                labels = selectors.get(str(flavor.get("name")), {})
                taken = [pool for pool, node in pools.items() if labels.items() <= node.items()]
                if taken:
                    known = " (xpk's queue)" if name == XPK_CLUSTER_QUEUE else ""
                    advice.append(
                        f"ClusterQueue {name}{known}, not this stack's, admits {GPU_RESOURCE} on flavor "
                        f"{flavor.get('name')}, which selects the nodes of {', '.join(taken)}: its jobs take those "
                        "nodes outside the teams' cohort, so a team's guarantee holds only while it admits nothing"
                    )
    return advice


def dispatch_advice(config: Mapping[str, Any] | None) -> list[str]:
    """A manager that offers runs in order (multiKueue.dispatch: inOrder) on the cluster's own Kueue
    (`config`: its Configuration, None where unread), which the program does not configure: unless
    it names the incremental dispatcher with a step of one worker, runs go elsewhere first."""
    where = f"{KUEUE_NAMESPACE}/{KUEUE_CONFIG_MAP}"
    wanted = MULTIKUEUE_IN_ORDER
    if config is None:
        return [f"the cluster's Kueue Configuration ({where}) could not be read: check that multiKueue sets {wanted}"]
    section = config.get("multiKueue")
    gates = config.get("featureGates")
    off = [g for g in MULTIKUEUE_IN_ORDER_GATES if isinstance(gates, Mapping) and gates.get(g) is False]
    if isinstance(section, Mapping) and all(section.get(k) == v for k, v in wanted.items()) and not off:
        return []
    what = f"turns off the feature gates {', '.join(off)}" if off else f"does not set multiKueue {wanted}"
    return [
        f"multiKueue.dispatch is inOrder, but the cluster's Kueue ({where}) {what}: it offers runs to the workers "
        "as it is configured to, not in the order of multiKueue.workers (a Kueue before 0.19 sorts them by name)"
    ]
