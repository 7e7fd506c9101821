"""What `pulumi up` does to a Kubernetes object the program registered before, as the Pulumi
engine and the Kubernetes provider decide it: the model behind the update tests.

The rules, from the sources:

- The engine first resets every `ignoreChanges` path of the new inputs to the old inputs' value
  (pulumi/pulumi pkg/resource/deploy/step_generator.go `processIgnoreChanges`); a replacement is
  created from the program's own inputs again (it re-runs the provider's Check on them).
- The provider diffs the new inputs against the live object *pruned to the fields of the old
  inputs*: keys and list items a controller added are not seen (pulumi-kubernetes
  provider/pkg/provider/provider.go `Diff`, util.go `pruneMap`/`pruneSlice`); it then drops the
  differences under an `ignoreChanges` path as well ("Remove any ignored changes").
- A `replacementTrigger` that differs from the recorded one replaces the object without asking the
  provider; one recorded by none, or none now, replaces nothing (step_generator.go
  `shouldTriggerReplace`).
- A change under `metadata.name`, `metadata.namespace` or a kind's force-new fields
  (provider/pkg/provider/diff.go) replaces the object, and so does one under a
  `replaceOnChanges` path (the engine); anything else is a patch.
- A replacement deletes first when one of the provider's own force-new fields changed and the
  object keeps its name and namespace (provider.go: "Delete before replacement if ... the new
  version of that object MUST have the same name"), or when `deleteBeforeReplace` is set. A
  replacement caused by `replaceOnChanges` (or `--replace`) keeps the provider's answer
  (step_generator.go `applyReplaceOnChanges`): without the option it creates first, which fails
  with AlreadyExists for an object that keeps its name. Otherwise the new object is created first
  and the old one deleted at the end of the update, after everything that refers to it has moved.
- `pulumi refresh` replaces the stored inputs with the live object pruned to the old inputs
  (provider.go `Read`), so a field a controller changed becomes the stored value.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from harness.mocks import RecordedResource
from harness.runner import StackRun

# The provider's force-new fields of the kinds this program registers (diff.go).
_FORCE_NEW: dict[tuple[str, str], tuple[str, ...]] = {
    ("batch/v1", "Job"): ("spec.completions", "spec.parallelism", "spec.selector", "spec.template"),
    ("v1", "ConfigMap"): ("data", "binaryData"),
    ("v1", "Secret"): ("type", "stringData", "data"),
    ("v1", "PersistentVolume"): ("spec.csi", "spec.nfs"),
    ("v1", "PersistentVolumeClaim"): (
        "spec.accessModes",
        "spec.selector",
        "spec.storageClassName",
        "spec.volumeName",
    ),
    ("apps/v1", "DaemonSet"): ("spec.selector",),
    ("apps/v1", "Deployment"): ("spec.selector",),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): ("roleRef",),
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): ("roleRef",),
    ("storage.k8s.io/v1", "StorageClass"): ("parameters", "provisioner"),
}
_IDENTITY = ("metadata.name", "metadata.namespace")


@dataclass(frozen=True)
class Step:
    """One object's step: "same", "update" or "replace", and the paths that differ."""

    op: str
    paths: tuple[str, ...] = ()
    delete_before_replace: bool = False


def prune(live: Any, inputs: Any) -> Any:
    """`live` cut down to the shape of `inputs` (pulumi-kubernetes `pruneMap`/`pruneSlice`)."""
    if isinstance(live, dict) and isinstance(inputs, dict):
        return {k: prune(v, inputs[k]) for k, v in live.items() if k in inputs}
    if isinstance(live, list) and isinstance(inputs, list):
        return [prune(v, t) for v, t in zip(live, inputs, strict=False)]
    return live


def changed_paths(old: Any, new: Any, path: str = "") -> Iterator[str]:
    """Dotted paths (`a.b[0].c`) where `new` differs from `old`."""
    if isinstance(old, dict) and isinstance(new, dict):
        for key in sorted(old.keys() | new.keys()):
            child = f"{path}.{key}" if path else key
            if key not in old or key not in new:
                yield child
            else:
                yield from changed_paths(old[key], new[key], child)
    elif isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        for index, (a, b) in enumerate(zip(old, new, strict=True)):
            yield from changed_paths(a, b, f"{path}[{index}]")
    elif old != new:
        yield path


def _under(path: str, prefix: str) -> bool:
    return path == prefix or path.startswith((f"{prefix}.", f"{prefix}["))


_SEGMENT = re.compile(r"[^.\[\]]+|\[\d+\]")


def _segments(path: str) -> list[str | int]:
    return [int(s[1:-1]) if s.startswith("[") else s for s in _SEGMENT.findall(path)]


def _reset(new: dict[str, Any], old: Mapping[str, Any], path: str) -> None:
    """The engine's `processIgnoreChanges` for one path: take the old value, or drop the new one."""
    *parents, last = _segments(path)
    source: Any = old
    target: Any = new
    for segment in parents:
        try:
            source, target = source[segment], target[segment]
        except (KeyError, IndexError, TypeError):
            return
    if isinstance(target, dict):
        if isinstance(source, Mapping) and last in source:
            target[last] = copy.deepcopy(source[last])
        else:
            target.pop(last, None)


def _manifest(resource: RecordedResource) -> dict[str, Any]:
    return StackRun.manifest(resource)


def step(old: RecordedResource, new: RecordedResource, live: Mapping[str, Any] | None = None) -> Step:
    """What `pulumi up` does to an object registered as `old` (live as `live`, by default as
    created) when the program now registers `new` under the same URN."""
    if (
        None not in (old.replacement_trigger, new.replacement_trigger)
        and old.replacement_trigger != new.replacement_trigger
    ):
        return Step("replace", ("replacementTrigger",), delete_before_replace=new.delete_before_replace)
    old_inputs, new_inputs = _manifest(old), _manifest(new)
    for path in new.ignore_changes:
        _reset(new_inputs, old_inputs, path)
    pruned = prune(dict(live) if live is not None else old_inputs, old_inputs)
    paths = tuple(
        p for p in changed_paths(pruned, new_inputs) if not any(_under(p, ignored) for ignored in new.ignore_changes)
    )
    if not paths:
        return Step("same")
    kind = (str(new_inputs.get("apiVersion")), str(new_inputs.get("kind")))
    provider_force_new = (*_IDENTITY, *_FORCE_NEW.get(kind, ()))
    by_provider = any(_under(p, f) for p in paths for f in provider_force_new)
    if not by_provider and not any(_under(p, f) for p in paths for f in new.replace_on_changes):
        return Step("update", paths)
    same_identity = all(
        old_inputs.get("metadata", {}).get(key) == new_inputs.get("metadata", {}).get(key)
        for key in ("name", "namespace")
    )
    return Step("replace", paths, delete_before_replace=(by_provider and same_identity) or new.delete_before_replace)


def refreshed(old: RecordedResource, live: Mapping[str, Any]) -> RecordedResource:
    """`old` as `pulumi refresh` stores it: its inputs become the live object pruned to them."""
    inputs = prune(dict(live), _manifest(old))
    return RecordedResource(**{**old.__dict__, "inputs": inputs})


def plan(before: StackRun, after: StackRun) -> dict[str, tuple[RecordedResource, RecordedResource, Step]]:
    """The step of every Kubernetes object both runs register (by URN), live as created."""
    old = {r.urn: r for r in before.kubernetes_objects}
    return {r.urn: (old[r.urn], r, step(old[r.urn], r)) for r in after.kubernetes_objects if r.urn in old}
