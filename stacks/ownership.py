"""The stack's mark on every Kubernetes object it writes, and, on an existing cluster, the check
that none of its objects' names is taken by someone else's (planners.ownership).

The check runs once the program has built its resources, before it yields to the SDK's event
loop, which is when the SDK sends their registrations; a refusal ends the program at once
(stacks.program.main), so none is sent and the state and the cluster stay as they were.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pulumi

from config.existing import ExistingClusterConfig
from config.loader import ConfigError
from facts.errors import RuleError
from facts.pulumi_cli import SECRET_STAND_IN
from planners.ownership import ObjectRef, marked, ownership, shown
from stacks.kubeapi import ClusterUnreadable, Kubeconfig, ObjectReader

# Kubernetes resources the stack writes that are not objects of their own: Helm keeps the objects
# of a release and refuses those another release or tool wrote (helm/helm pkg/action/validate.go).
UNMARKED_TYPES = ("kubernetes:helm.sh/v3:Release",)


def _plain_metadata(props: Mapping[str, Any]) -> Mapping[str, Any] | None:
    metadata = props.get("metadata")
    if metadata is None:
        return {}
    if isinstance(metadata, Mapping):
        return metadata
    return None  # an Output: the program gives every object's metadata as a dictionary


@dataclass
class StackObjects:
    """Marks each Kubernetes object with `identity` as the program builds it, and lists those whose
    name and namespace are known now (an object in a namespace the stack creates is named by that
    namespace's output: it is the stack's once its namespace is)."""

    identity: str
    written: list[ObjectRef] = field(default_factory=list)

    def transformation(self, args: pulumi.ResourceTransformationArgs) -> pulumi.ResourceTransformationResult | None:
        if not args.type_.startswith("kubernetes:") or args.type_ in UNMARKED_TYPES:
            return None
        metadata = _plain_metadata(args.props)
        if metadata is None:
            raise TypeError(f"{args.type_} {args.name}: metadata must be a dictionary to carry the stack's mark")
        api_version = args.props.get("api_version", args.props.get("apiVersion"))
        kind = args.props.get("kind")
        name, namespace = metadata.get("name"), metadata.get("namespace")
        plain = all(isinstance(v, str) for v in (api_version, kind, name)) and isinstance(namespace, str | None)
        if plain:
            self.written.append(ObjectRef(str(api_version), str(kind), namespace, str(name)))
        return pulumi.ResourceTransformationResult(
            {**args.props, "metadata": marked(metadata, self.identity)}, args.opts
        )


def mark_objects(identity: str) -> StackObjects:
    """From here on, every Kubernetes object the program builds carries `identity`."""
    objects = StackObjects(identity)
    pulumi.runtime.register_stack_transformation(objects.transformation)
    return objects


def _refusal(cfg: ExistingClusterConfig, ref: ObjectRef, written: str) -> RuleError:
    taken = (
        f"{ref} is already on the cluster, written {written}: this stack would take it over, and delete it on destroy"
    )
    if ref.kind == "Namespace":
        fix = "to use it as it is, set existingCluster.namespaceExists: true; or choose another namespace"
        return RuleError("namespace", ref.name, f"{taken}; {fix}")
    fix = "remove it, or give this stack's objects other names (its namespace, its pools' names)"
    return RuleError("existingCluster.name", cfg.name, f"{taken}; {fix}")


def check_existing(cfg: ExistingClusterConfig, objects: StackObjects, read: ObjectReader) -> None:
    """Refuse, with the names, objects of the stack's names that another stack, Helm, kubectl or
    another tool wrote on the cluster; warn of those a Pulumi program wrote unmarked, which the
    stack takes as its own (planners.ownership.ownership)."""
    if cfg.kubeconfig == SECRET_STAND_IN:
        return  # the render cannot decrypt it, nor reach the cluster
    try:
        live = read(Kubeconfig(cfg.kubeconfig, cfg.kubeconfig_path, cfg.context), sorted(set(objects.written)))
    except ClusterUnreadable as error:
        why = f"the cluster's objects could not be read to check that the stack's names are free: {error}"
        raise ConfigError.of([RuleError("existingCluster.name", cfg.name, why)]) from None
    found = ownership(live, objects.identity)
    if found.foreign:
        raise ConfigError.of([_refusal(cfg, ref, written) for ref, written in found.foreign])
    if found.unmarked:
        pulumi.log.warn(
            f"{len(found.unmarked)} objects of this stack's names on the cluster were written by Pulumi without the "
            f"stack's mark ({shown(found.unmarked)}): taken as this stack's own, from before the program marked "
            "its objects; this `up` marks them"
        )
