"""The schema validators catch what they must, so every other test can trust them."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from harness.mocks import RecordedResource
from harness.runner import StackRun
from harness.schemas import kubernetes_errors, pulumi_input_errors, resource_errors


def recorded(typ: str, inputs: dict[str, Any]) -> RecordedResource:
    return RecordedResource(
        urn=f"urn:pulumi:test::nemo-gke::{typ}::x",
        type=typ,
        name="x",
        custom=True,
        inputs=inputs,
        parent="",
        provider="",
        dependencies=[],
        property_dependencies={},
    )


def one(run: StackRun, typ: str) -> RecordedResource:
    return run.of_type(typ)[0]


@pytest.fixture(scope="module")
def dev(render: Any) -> StackRun:
    return render("dev")


# --------------------------------------------------------------------------- GCP inputs


def test_a_valid_node_pool_passes(dev: StackRun) -> None:
    pool = dev.one("gcp:container/nodePool:NodePool", "cluster-a3-highgpu-pool")
    assert pulumi_input_errors(pool) == []


def test_a_misspelt_field_deep_inside_a_gcp_argument_is_caught(dev: StackRun) -> None:
    pool = copy.deepcopy(dev.one("gcp:container/nodePool:NodePool", "cluster-a3-highgpu-pool"))
    pool.inputs["nodeConfig"]["guestAccelerators"][0]["gpuDriverInstalationConfig"] = {"gpuDriverVersion": "LATEST"}
    errors = pulumi_input_errors(pool)
    assert any("guestAccelerators[0].gpuDriverInstalationConfig: not a field" in e for e in errors), errors


def test_a_misspelt_top_level_gcp_argument_is_caught() -> None:
    errors = pulumi_input_errors(recorded("gcp:compute/network:Network", {"name": "n", "autoCreateSubnetwork": False}))
    assert any("autoCreateSubnetwork: not a field of NetworkArgs" in e for e in errors), errors


def test_a_wrong_type_inside_a_gcp_argument_is_caught() -> None:
    inputs = {"cluster": "c", "nodeConfig": {"machineType": "a3-highgpu-8g", "gvnic": {"enabled": "yes"}}}
    errors = pulumi_input_errors(recorded("gcp:container/nodePool:NodePool", inputs))
    assert any("gvnic.enabled: expected a boolean" in e for e in errors), errors


def test_a_missing_required_gcp_argument_is_caught() -> None:
    errors = pulumi_input_errors(recorded("gcp:container/nodePool:NodePool", {"nodeCount": 1}))
    assert any("cluster: required by NodePoolArgs" in e for e in errors), errors


def test_helm_release_inputs_are_checked_against_their_args_class(dev: StackRun) -> None:
    release = copy.deepcopy(one(dev, "kubernetes:helm.sh/v3:Release"))
    assert pulumi_input_errors(release) == []
    release.inputs["chartVersion"] = "1.0"
    assert any("chartVersion: not a field of ReleaseArgs" in e for e in pulumi_input_errors(release))


# --------------------------------------------------------------------------- Kubernetes


def kueue(dev: StackRun, kind: str) -> dict[str, Any]:
    return copy.deepcopy(dev.manifest(one(dev, f"kubernetes:kueue.x-k8s.io/v1beta2:{kind}")))


def test_valid_kueue_objects_pass(dev: StackRun) -> None:
    for kind in ("ClusterQueue", "LocalQueue", "ResourceFlavor", "Topology", "WorkloadPriorityClass"):
        assert kubernetes_errors(kueue(dev, kind)) == [], kind


def test_an_invalid_kueue_field_is_caught(dev: StackRun) -> None:
    queue = kueue(dev, "ClusterQueue")
    queue["spec"]["resourceGroups"][0]["coverdResources"] = queue["spec"]["resourceGroups"][0].pop("coveredResources")
    errors = kubernetes_errors(queue)
    assert any("coverdResources" in e for e in errors), errors


def test_a_kueue_value_outside_its_enum_is_caught(dev: StackRun) -> None:
    queue = kueue(dev, "ClusterQueue")
    queue["spec"]["queueingStrategy"] = "FirstComeFirstServed"
    assert any("queueingStrategy" in e for e in kubernetes_errors(queue))


def test_a_v1beta1_only_field_in_a_v1beta2_object_is_caught(dev: StackRun) -> None:
    queue = kueue(dev, "ClusterQueue")
    queue["spec"]["admissionChecks"] = ["dws-prov"]  # v1beta2 has admissionChecksStrategy only
    assert any("admissionChecks" in e for e in kubernetes_errors(queue))


def test_an_invalid_deployment_field_is_caught(dev: StackRun) -> None:
    deployment = copy.deepcopy(dev.manifest(one(dev, "kubernetes:apps/v1:Deployment")))
    assert kubernetes_errors(deployment) == []
    deployment["spec"]["template"]["spec"]["containers"][0]["resource"] = {"requests": {"cpu": "1"}}
    errors = kubernetes_errors(deployment)
    assert any("resource" in e and "unexpected" in e for e in errors), errors


def test_an_invalid_jobset_field_is_caught(dev: StackRun) -> None:
    jobset = copy.deepcopy(dev.manifest(one(dev, "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet")))
    assert kubernetes_errors(jobset) == []
    jobset["spec"]["failurePolicy"]["maxRestart"] = 3
    assert any("maxRestart" in e for e in kubernetes_errors(jobset))


def test_an_invalid_gke_network_object_is_caught(dev: StackRun) -> None:
    params = copy.deepcopy(dev.manifest(one(dev, "kubernetes:networking.gke.io/v1:GKENetworkParamSet")))
    params["spec"]["deviceMode"] = "SRIOV"
    assert any("deviceMode" in e for e in kubernetes_errors(params))


def test_an_invalid_object_name_is_caught(dev: StackRun) -> None:
    namespace = copy.deepcopy(dev.manifest(one(dev, "kubernetes:core/v1:Namespace")))
    namespace["metadata"]["name"] = "Nemo_Training"
    assert any("DNS-1123" in e for e in kubernetes_errors(namespace))


def test_a_kind_with_no_schema_is_an_error_not_a_pass() -> None:
    errors = kubernetes_errors({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Cohortt", "metadata": {"name": "x"}})
    assert errors and "no CRD schema" in errors[0]


def test_a_resource_type_without_a_validator_is_reported() -> None:
    resource = recorded("random:index/randomPet:RandomPet", {})
    assert resource_errors(resource, {}, preview=False) == [
        "random:index/randomPet:RandomPet: no schema to validate this resource type against"
    ]
