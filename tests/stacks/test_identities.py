"""The identity lock: the URNs of every shipped stack are the ones in tests/identities/.

A URN change without an alias makes `pulumi up` delete a deployed resource and create another
(pulumi/pulumi-kubernetes#2948 for fixed-name objects); the lock makes every such change visible.
"""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

import pytest

from harness.runner import StackRun, stack_names
from tools import identities

CLUSTER = "gcp:container/cluster:Cluster"


@pytest.mark.parametrize("stack", stack_names())
def test_every_shipped_stack_has_the_locked_resource_identities(render: Any, stack: str) -> None:
    drift = identities.drift(render(stack), identities.locked(stack))
    assert not drift, drift.explain(stack)


def renamed(run: StackRun, typ: str, new_name: str, aliases: list[dict[str, Any]]) -> StackRun:
    """The run with one resource renamed (its URN changed), as a code change would do it."""
    target = run.one(typ)
    new_urn = target.urn.rsplit("::", 1)[0] + f"::{new_name}"
    changed = copy.copy(run)
    changed.resources = [
        replace(r, name=new_name, urn=new_urn, aliases=aliases)
        if r is target
        else replace(r, parent=new_urn if r.parent == target.urn else r.parent)
        for r in run.resources
    ]
    return changed


def test_a_rename_without_an_alias_is_caught_and_explained(render: Any) -> None:
    run = render("dev")
    drift = identities.drift(renamed(run, CLUSTER, "cluster-gke-main", []), identities.locked("dev"))
    chain = "nemo:cluster:ClusterLayer$nemo:gke:Cluster$gcp:container/cluster:Cluster"
    assert drift.lost == [f"{chain}::cluster-gke-cluster"]
    assert drift.new == [f"{chain}::cluster-gke-main"]
    message = drift.explain("dev")
    for advice in ("pulumi up would delete it", "aliases=[pulumi.Alias(", "make identities"):
        assert advice in message


def test_a_rename_with_an_alias_keeps_the_identity(render: Any) -> None:
    run = render("dev")
    alias = {"name": "cluster-gke-cluster", "type": "", "parentUrn": "", "noParent": False}
    drift = identities.drift(renamed(run, CLUSTER, "cluster-gke-main", [alias]), identities.locked("dev"))
    assert drift.lost == [], "the alias keeps the old URN"
    assert len(drift.new) == 1, "the new URN still has to be locked"


def test_the_lock_spells_urns_with_every_parent_type(render: Any) -> None:
    """Child URNs carry the whole chain of parent types (pulumi/pulumi:sdk/go/common/resource/urn.go)."""
    run = render("dev")
    cluster = run.one(CLUSTER)
    assert identities.identity(run, cluster) == (
        "nemo:cluster:ClusterLayer$nemo:gke:Cluster$gcp:container/cluster:Cluster::cluster-gke-cluster"
    )
    provider = run.one("pulumi:providers:gcp")
    assert identities.identity(run, provider) == "pulumi:providers:gcp::gcp"
