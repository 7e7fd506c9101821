"""Whether a cluster's own Kueue and JobSet can take this program's objects, from their CRDs as
the API server returns them: each kind's CRD exists, serves the version the program writes, and
its schema knows every field the program sets (facts.controller_api).

The API server prunes a field its structural schema does not know, with no error (Kubernetes
docs, "Field pruning" under CustomResourceDefinitions), so an older release would take the
objects and silently drop, say, a flavor's topologyName. Hence the fields, not only the version.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from facts.controller_api import CONTROLLER_KINDS, ControllerKind
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
    return tuple(kind.crd_name for kind in CONTROLLER_KINDS)


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
