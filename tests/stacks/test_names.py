"""Names that must not collide: every Kubernetes object within its namespace, every GCP resource
within its project, even with two stacks (two clusters) in one project and region."""

from __future__ import annotations

import copy
from collections import Counter
from typing import Any

import pytest

from harness.runner import StackRun, load_stack_values, stack_names, stack_with
from tests.conftest import Render

# Node pools are named within their cluster; every other named GCP resource within the project.
CLUSTER_SCOPED = {"gcp:container/nodePool:NodePool"}
NAME_INPUTS = ("name", "accountId", "instanceId")


def kubernetes_identities(run: StackRun) -> list[tuple[str, str, str]]:
    """(API group and kind, namespace, name) of every Kubernetes object, as the API server keys them."""
    identities = []
    for resource in run.kubernetes_objects:
        manifest = run.manifest(resource)
        group = manifest["apiVersion"].rsplit("/", 1)[0] if "/" in manifest["apiVersion"] else ""
        metadata = manifest["metadata"]
        identities.append((f"{group}/{manifest['kind']}", metadata.get("namespace", ""), metadata["name"]))
    return identities


def gcp_names(run: StackRun) -> set[tuple[str, str]]:
    return {
        (r.type, r.inputs[key])
        for r in run.gcp_resources
        if r.type not in CLUSTER_SCOPED
        for key in NAME_INPUTS
        if isinstance(r.inputs.get(key), str)
    }


@pytest.mark.parametrize("stack", [s for s in stack_names() if s != "bootstrap"])
def test_no_two_kubernetes_objects_share_a_name(render: Render, stack: str) -> None:
    repeated = [i for i, n in Counter(kubernetes_identities(render(stack))).items() if n > 1]
    assert not repeated


def test_a_run_and_a_data_preparation_job_of_one_name_do_not_collide(render: Render) -> None:
    """Before, both wrote the ConfigMap `<name>-workload`: the second `up` would overwrite the
    run's launcher with the tokenizer script (or fail to create it)."""
    values = load_stack_values("a3high-small")
    training: dict[str, Any] = copy.deepcopy(values["nemo-gke:training"])
    training["dataPrep"][0]["name"] = training["runs"][0]["name"]
    run = render("a3high-small", values=stack_with("a3high-small", training=training))
    identities = kubernetes_identities(run)
    assert len(identities) == len(set(identities))


@pytest.mark.parametrize("stack", ["dev", "a3ultra-flex", "a3high-small"])
def test_two_stacks_in_one_project_share_no_resource_name(render: Render, stack: str) -> None:
    """GCP names are unique per project (per region for regional kinds): a second environment
    in the same project, told apart by its cluster name, must not reuse one. The placement
    policy was `<pool>-placement` and collided (issue 10 item 9)."""
    values = load_stack_values(stack)
    cluster = {**values.get("nemo-gke:cluster", {}), "name": "second"}
    first, second = render(stack), render(stack, values=stack_with(stack, cluster=cluster))
    assert gcp_names(first) and not gcp_names(first) & gcp_names(second)
