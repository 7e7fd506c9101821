"""Whose an object on the cluster is, from its metadata: what lets a stack take over what it made
itself (an `up` that was interrupted left it behind) and nothing else.

Every Kubernetes object the program writes carries the stack's fully qualified name
(facts.kubernetes.STACK_ANNOTATION). Its Kubernetes providers create by server-side apply over an
object that exists (`upsertExistingObjects`), which is what lets `pulumi cancel` and `pulumi up`
converge after an interrupted `up` (docs/user-guide.md, "An interrupted `pulumi up`"); so an
object of the program's name that the stack did not write must be found before anything is
applied, and refused with its name.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from facts.kubernetes import HELM_RELEASE_NAME_ANNOTATION, HELM_RELEASE_NAMESPACE_ANNOTATION, STACK_ANNOTATION

# Field managers of the Pulumi Kubernetes provider: "pulumi-kubernetes-<random>" under server-side
# apply, "pulumi-kubernetes" under client-side apply, "pulumi-resource-kubernetes" before v3
# (pulumi/pulumi-kubernetes provider/pkg/provider/provider.go fieldManagerName, and await.go
# patchForce, which lists the client-side names).
PULUMI_FIELD_MANAGERS = ("pulumi-kubernetes", "pulumi-resource-kubernetes")


@dataclass(frozen=True)
class ObjectRef:
    """A Kubernetes object by API version, kind, namespace (None at cluster scope) and name."""

    api_version: str
    kind: str
    namespace: str | None
    name: str

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}" if self.namespace else f"{self.kind} {self.name}"

    def key(self) -> tuple[str, str, str, str]:
        """The order objects are read and named in (cluster scope first within a kind)."""
        return (self.api_version, self.kind, self.namespace or "", self.name)


def marked(metadata: Mapping[str, Any], identity: str) -> dict[str, Any]:
    """`metadata` with the stack's identity among its annotations."""
    return {**metadata, "annotations": {**(metadata.get("annotations") or {}), STACK_ANNOTATION: identity}}


def mark_of(live: Mapping[str, Any]) -> str | None:
    """The stack an object's mark names, if it has one."""
    mark = ((live.get("metadata") or {}).get("annotations") or {}).get(STACK_ANNOTATION)
    return None if mark is None else str(mark)


def installer(live: Mapping[str, Any]) -> str:
    """Who wrote an object, as far as its metadata says."""
    metadata = live.get("metadata") or {}
    annotations, labels = metadata.get("annotations") or {}, metadata.get("labels") or {}
    if STACK_ANNOTATION in annotations:
        return f"by the Pulumi stack {annotations[STACK_ANNOTATION]}"
    if HELM_RELEASE_NAME_ANNOTATION in annotations:
        where = annotations.get(HELM_RELEASE_NAMESPACE_ANNOTATION, "?")
        return f"by the Helm release {annotations[HELM_RELEASE_NAME_ANNOTATION]} in {where}"
    if "app.kubernetes.io/managed-by" in labels:
        return f"managed by {labels['app.kubernetes.io/managed-by']}"
    if written_by_pulumi(live):
        return "by a Pulumi program"
    return "with kubectl or another tool"


def written_by_pulumi(live: Mapping[str, Any]) -> bool:
    """One of the object's field managers is the Pulumi Kubernetes provider."""
    managers = (entry.get("manager", "") for entry in (live.get("metadata") or {}).get("managedFields") or ())
    return any(manager.startswith(PULUMI_FIELD_MANAGERS) for manager in managers)


@dataclass(frozen=True)
class Ownership:
    """What the stack may write over. `foreign`: objects of its names that others wrote, each with
    who wrote it; `unmarked`: objects a Pulumi program wrote before the program marked its objects, taken
    as this stack's own (it marks them now)."""

    foreign: tuple[tuple[ObjectRef, str], ...]
    unmarked: tuple[ObjectRef, ...]


def ownership(live: Mapping[ObjectRef, Mapping[str, Any] | None], identity: str) -> Ownership:
    """Sort the objects of the stack's names found on the cluster (None: not there).

    - marked with `identity`: the stack's own, left there by an interrupted `up` or in its state;
    - marked with another stack's identity: that stack's, refused;
    - unmarked, written by the Pulumi Kubernetes provider: the stack's own from before the mark
      existed (its objects are named after its config; another Pulumi program would need the same
      names), taken and marked;
    - anything else: written by kubectl, Helm or another tool, refused.
    """
    foreign: list[tuple[ObjectRef, str]] = []
    unmarked: list[ObjectRef] = []
    for ref, found in sorted(live.items(), key=lambda item: item[0].key()):
        if found is None:
            continue
        mark = mark_of(found)
        if mark == identity:
            continue
        if mark is None and written_by_pulumi(found):
            unmarked.append(ref)
            continue
        foreign.append((ref, installer(found)))
    return Ownership(tuple(foreign), tuple(unmarked))


def shown(refs: Sequence[ObjectRef], most: int = 3) -> str:
    """Up to `most` objects by name, and how many more."""
    names = ", ".join(map(str, refs[:most]))
    return names if len(refs) <= most else f"{names} and {len(refs) - most} more"
