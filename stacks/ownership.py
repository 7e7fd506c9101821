"""The stack's mark on every Kubernetes object it writes, and, on an existing cluster, the check
that none of its objects' names is taken by someone else's (planners.ownership).

The check runs once the program has built its resources, before it yields to the SDK's event
loop, which is when the SDK sends their registrations; a refusal ends the program at once
(stacks.program.main), so none is sent and the state and the cluster stay as they were.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pulumi

from config.existing import ExistingClusterConfig
from config.loader import ConfigError
from config.stack import StackConfig
from facts.errors import RuleError
from facts.pulumi_cli import SECRET_STAND_IN
from planners.ownership import ObjectRef, mark_of, marked, ownership, shown
from planners.submitted import Submitted, live_of
from stacks.existing import kubeconfig_of
from stacks.kubeapi import ObjectReader

# Kubernetes resources the stack writes that are not objects of their own: Helm keeps the objects
# of a release and refuses those another release or tool wrote (helm/helm pkg/action/validate.go).
UNMARKED_TYPES = ("kubernetes:helm.sh/v3:Release",)
NAMESPACE_TYPE = "kubernetes:core/v1:Namespace"


def _plain_metadata(props: Mapping[str, Any]) -> Mapping[str, Any] | None:
    metadata = props.get("metadata")
    if metadata is None:
        return {}
    if isinstance(metadata, Mapping):
        return metadata
    return None  # an Output: the program gives every object's metadata as a dictionary


@dataclass
class StackObjects:
    """Marks each Kubernetes object with `identity` as the program builds it, and lists what to
    look for on the cluster: each object by name, where its name and namespace are known now.
    An object named by its namespace's output is in a namespace the stack creates, which is
    looked for itself, or in one it reads (`existingCluster.namespaceExists`): it is looked for
    in each namespace the stack reads."""

    identity: str
    written: list[ObjectRef] = field(default_factory=list)
    # (apiVersion, kind, name) of objects whose namespace is an output.
    unplaced: list[tuple[str, str, str]] = field(default_factory=list)
    # The namespaces the stack reads and does not create.
    read_namespaces: list[str] = field(default_factory=list)

    def transformation(self, args: pulumi.ResourceTransformationArgs) -> pulumi.ResourceTransformationResult | None:
        if not args.type_.startswith("kubernetes:") or args.type_ in UNMARKED_TYPES:
            return None
        if args.opts.id is not None or args.opts.urn is not None:
            # A read (`Namespace.get`): the cluster's object, neither written nor marked.
            if args.type_ == NAMESPACE_TYPE and isinstance(args.opts.id, str):
                self.read_namespaces.append(args.opts.id)
            return None
        metadata = _plain_metadata(args.props)
        if metadata is None:
            raise TypeError(f"{args.type_} {args.name}: metadata must be a dictionary to carry the stack's mark")
        api_version = args.props.get("api_version", args.props.get("apiVersion"))
        kind = args.props.get("kind")
        name, namespace = metadata.get("name"), metadata.get("namespace")
        if all(isinstance(v, str) for v in (api_version, kind, name)):
            if namespace is None or isinstance(namespace, str):
                self.written.append(ObjectRef(str(api_version), str(kind), namespace, str(name)))
            else:
                self.unplaced.append((str(api_version), str(kind), str(name)))
        return pulumi.ResourceTransformationResult(
            {**args.props, "metadata": marked(metadata, self.identity)}, args.opts
        )

    def refs(self) -> list[ObjectRef]:
        """Every object to look for on the cluster, once each, in a stable order."""
        placed = (ObjectRef(*ref[:2], namespace, ref[2]) for namespace in self.read_namespaces for ref in self.unplaced)
        return sorted({*self.written, *placed}, key=ObjectRef.key)


def mark_objects(identity: str) -> StackObjects:
    """From here on, every Kubernetes object the program builds carries `identity`."""
    objects = StackObjects(identity)
    pulumi.runtime.register_stack_transformation(objects.transformation)
    return objects


def _refusal(cfg: StackConfig, cluster: ExistingClusterConfig, ref: ObjectRef, written: str) -> RuleError:
    taken = (
        f"{ref} is already on the cluster, written {written}: this stack would take it over, and delete it on destroy"
    )
    if ref.kind == "Namespace":
        teams = [i for i, team in enumerate(cfg.teams) if team.namespace_name == ref.name]
        key = f"teams[{teams[0]}].namespace" if teams else "namespace"
        fix = "to use it as it is, set existingCluster.namespaceExists: true; or choose another namespace"
        return RuleError(key, ref.name, f"{taken}; {fix}")
    fix = "remove it, or give this stack's objects other names (its namespace, its pools' names)"
    return RuleError("existingCluster.name", cluster.name, f"{taken}; {fix}")


def _unreadable(cluster: ExistingClusterConfig, error: Exception) -> ConfigError:
    why = f"the cluster's objects could not be read to check that the stack's names are free: {error}"
    return ConfigError.of([RuleError("existingCluster.name", cluster.name, why)])


def check_existing(cfg: StackConfig, cluster: ExistingClusterConfig, objects: StackObjects, read: ObjectReader) -> None:
    """Refuse, with the names, objects of the stack's names that another stack, Helm, kubectl or
    another tool wrote on the cluster; warn of those a Pulumi program wrote unmarked, which the
    stack takes as its own (planners.ownership.ownership). Whatever goes wrong reading the
    cluster refuses too: the objects are built, and only a refusal keeps them from the engine
    (stacks.program.main). `cluster` is the stack's `existingCluster`."""
    if cluster.kubeconfig == SECRET_STAND_IN:
        return  # the render cannot decrypt it, nor reach the cluster
    try:
        found = ownership(read(kubeconfig_of(cluster), objects.refs()), objects.identity)
    except Exception as error:  # any failure refuses: the objects are built, and must not reach the engine
        raise _unreadable(cluster, error) from None
    if found.foreign:
        raise ConfigError.of([_refusal(cfg, cluster, ref, written) for ref, written in found.foreign])
    if found.unmarked:
        pulumi.log.warn(
            f"{len(found.unmarked)} objects of this stack's names on the cluster were written by Pulumi without the "
            f"stack's mark ({shown(found.unmarked)}): taken as this stack's own, from before the program marked "
            "its objects; this `up` marks them"
        )


def unrecorded_runs(
    cluster: ExistingClusterConfig, identity: str, jobsets: Mapping[str, Sequence[ObjectRef]], read: ObjectReader
) -> dict[str, Submitted]:
    """Of the JobSets each run may have on the cluster although the stack's state does not hold
    them (`jobsets`, by run name: stacks.training.unrecorded_jobsets), the first marked with
    `identity`: what an interrupted `up` submitted (planners.submitted.check_unrecorded). A failure
    to read the cluster refuses, as check_existing."""
    refs = [ref for candidates in jobsets.values() for ref in candidates]
    if cluster.kubeconfig == SECRET_STAND_IN or not refs:
        return {}
    try:
        live = read(kubeconfig_of(cluster), refs)
    except Exception as error:  # as check_existing: a run must not reach the engine unchecked
        raise _unreadable(cluster, error) from None
    found: dict[str, Submitted] = {}
    for run, candidates in jobsets.items():
        ours = [live_of(j) for ref in candidates if (j := live.get(ref)) is not None and mark_of(j) == identity]
        if ours:
            found[run] = ours[0]
    return found
