"""The mocks behave like the engine: camelCase outputs, unknowns in preview, no silent invokes."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from pulumi.runtime.mocks import MockCallArgs

from harness.mocks import FAKE_CA, RecordingMocks
from harness.runner import UNKNOWN, StackRun


def test_an_invoke_the_mocks_do_not_know_raises() -> None:
    mocks = RecordingMocks(project="p", preview=False)
    with pytest.raises(NotImplementedError, match="gcp:compute/getZones:getZones"):
        mocks.call(MockCallArgs(token="gcp:compute/getZones:getZones", args={}, provider=""))


def test_outputs_come_back_under_wire_names_and_reach_the_program_typed(render: Any) -> None:
    run: StackRun = render("dev")
    # The kubeconfig is built from cluster.master_auth.cluster_ca_certificate: it can only hold
    # the CA if the mock's camelCase masterAuth output was read as the typed output object.
    kubeconfig = json.loads(run.exports["kubeconfig"])
    cluster = kubeconfig["clusters"][0]["cluster"]
    assert cluster["certificate-authority-data"] == FAKE_CA
    assert base64.b64decode(FAKE_CA)
    assert cluster["server"] == "https://34.118.0.10"


def test_in_preview_computed_outputs_are_unknown(render: Any) -> None:
    run: StackRun = render("dev", preview=True)
    assert run.exports["kubeconfig"] == UNKNOWN
    pv = next(r for r in run.kubernetes_objects if r.name == "platform-filestore-volume")
    assert run.manifest(pv)["spec"]["csi"]["volumeAttributes"]["ip"] == UNKNOWN


def test_a_run_records_parent_provider_and_dependencies(render: Any) -> None:
    run: StackRun = render("dev")
    pool = run.one("gcp:container/nodePool:NodePool", "cluster-a3-highgpu-pool")
    cluster = run.one("gcp:container/cluster:Cluster")
    gcp_provider = run.one("pulumi:providers:gcp")
    assert run.by_urn(pool.parent).type == "nemo:gke:GpuNodePool"
    assert pool.provider_urn == gcp_provider.urn
    assert cluster.urn in pool.all_dependencies
    assert pool.delete_before_replace and pool.custom_timeouts["create"] == "90m"


def test_the_stack_exports_each_layer_and_keeps_the_kubeconfig_secret(render: Any) -> None:
    run: StackRun = render("dev")
    assert {"cluster", "kubeconfig", "platform", "training"} <= set(run.exports)
    assert run.secret_exports == {"kubeconfig"}
