"""An existing cluster's own Kueue (`kueue.install: false`) read before anything is registered:
teams are warned where its Configuration has no fair sharing or another tool's ClusterQueue
admits GPUs on their pools' nodes (xpk's `cluster-queue`), and any stack is told what to migrate
where Kueue objects may still be stored at v1beta1 (planners.controller_api)."""

from __future__ import annotations

import copy
from typing import Any

import yaml

from facts.kubernetes import KUEUE_API
from harness.runner import StackRun, crd_reader, objects_reader, pinned_crds, run_stack, stack_with
from planners.controller_api import shared_kueue_advice, stored_version_advice
from planners.ownership import ObjectRef

CONFIG = ObjectRef("v1", "ConfigMap", "kueue-system", "kueue-manager-config")
QUEUES = ObjectRef(KUEUE_API, "ClusterQueue", None, "")
FLAVORS = ObjectRef(KUEUE_API, "ResourceFlavor", None, "")


def _config_map(configuration: dict[str, Any]) -> dict[str, Any]:
    return {"data": {"controller_manager_config.yaml": yaml.safe_dump(configuration)}}


FAIR = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "fairSharing": {"preemptionStrategies": []}}
XPK_QUEUE = {
    "metadata": {"name": "cluster-queue"},
    "spec": {
        "resourceGroups": [
            {"coveredResources": ["nvidia.com/gpu"], "flavors": [{"name": "h200", "resources": []}]},
        ]
    },
}


def test_fair_sharing_is_read_from_either_configuration_version() -> None:
    pools = {"a3-ultra": {"pool": "a3-ultra"}}
    assert shared_kueue_advice(FAIR, [], [], set(), pools) == []
    on = {"apiVersion": "config.kueue.x-k8s.io/v1beta1", "fairSharing": {"enable": True}}
    assert shared_kueue_advice(on, [], [], set(), pools) == []
    for off in (
        {"apiVersion": "config.kueue.x-k8s.io/v1beta1", "fairSharing": {"enable": False}},
        {"apiVersion": "config.kueue.x-k8s.io/v1beta2"},
    ):
        (line,) = shared_kueue_advice(off, [], [], set(), pools)
        assert "runs without fair sharing" in line
    (line,) = shared_kueue_advice(None, [], [], set(), pools)
    assert "could not be read" in line


def test_another_tool_s_gpu_queue_on_the_pools_nodes_is_named() -> None:
    pools = {"a3-ultra": {"pool": "a3-ultra", "gpu": "h200"}}
    any_node = [{"metadata": {"name": "h200"}, "spec": {}}]
    (line,) = shared_kueue_advice(FAIR, [XPK_QUEUE], any_node, set(), pools)
    assert line.startswith("ClusterQueue cluster-queue (xpk's queue), not this stack's, admits nvidia.com/gpu")
    assert "selects the nodes of a3-ultra" in line
    same = [{"metadata": {"name": "h200"}, "spec": {"nodeLabels": {"gpu": "h200"}}}]
    assert len(shared_kueue_advice(FAIR, [XPK_QUEUE], same, set(), pools)) == 1
    other = [{"metadata": {"name": "h200"}, "spec": {"nodeLabels": {"gpu": "b200"}}}]
    assert shared_kueue_advice(FAIR, [XPK_QUEUE], other, set(), pools) == []
    assert shared_kueue_advice(FAIR, [XPK_QUEUE], any_node, {"cluster-queue"}, pools) == []


def test_kueue_objects_still_stored_at_v1beta1_are_named_with_the_migration() -> None:
    crds = {"workloads.kueue.x-k8s.io": {"status": {"storedVersions": ["v1beta1", "v1beta2"]}}}
    crds["clusterqueues.kueue.x-k8s.io"] = {"status": {"storedVersions": ["v1beta2"]}}
    crds["jobsets.jobset.x-k8s.io"] = {"status": {"storedVersions": ["v1beta1"]}}
    (line,) = stored_version_advice(crds)
    assert line.startswith("the cluster's Kueue may hold workloads.kueue.x-k8s.io objects stored at v1beta1")
    assert "drop v1beta1 from each CRD's status.storedVersions" in line
    assert stored_version_advice({"workloads.kueue.x-k8s.io": {"status": {"storedVersions": ["v1beta2"]}}}) == []


def _teams_on_existing() -> dict[str, Any]:
    values = stack_with("existing")
    pool = values["nemo-gke:existingCluster"]["gpuPools"][0]
    values["nemo-gke:teams"] = [{"name": "red", "quota": [{"pool": pool["name"], "nodes": pool["nodes"]}]}]
    for run in values["nemo-gke:training"]["runs"]:
        run["team"] = "red"
    return values


def _said(run: StackRun) -> list[str]:
    return [w.message for w in run.warnings if "Kueue" in w.message or "ClusterQueue" in w.message]


def test_teams_on_the_cluster_s_kueue_are_warned_of_what_undoes_their_shares() -> None:
    values = _teams_on_existing()
    queues = {"items": [XPK_QUEUE]}
    flavors = {"items": [{"metadata": {"name": "h200"}, "spec": {}}]}
    said = _said(run_stack("existing", values=values, read_objects=objects_reader({QUEUES: queues, FLAVORS: flavors})))
    assert any("could not be read" in line for line in said), said
    assert any(line.startswith("ClusterQueue cluster-queue (xpk's queue)") for line in said), said
    clean = objects_reader({CONFIG: _config_map(FAIR), QUEUES: {"items": []}, FLAVORS: {"items": []}})
    assert _said(run_stack("existing", values=values, read_objects=clean)) == []
    # Without teams nothing is shared: no read, no warning.
    assert _said(run_stack("existing")) == []


def test_a_cluster_whose_kueue_crds_list_v1beta1_as_stored_is_told_before_an_upgrade() -> None:
    crds = copy.deepcopy(pinned_crds())
    stored = {"storedVersions": ["v1beta1", "v1beta2"]}
    crds["workloads.kueue.x-k8s.io"] = {"metadata": {"name": "workloads.kueue.x-k8s.io"}, "status": stored}
    said = _said(run_stack("existing", read_crds=crd_reader(crds)))
    assert any("stored at v1beta1" in line for line in said), said
