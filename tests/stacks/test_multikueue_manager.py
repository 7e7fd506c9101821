"""A MultiKueue manager (stacks.multikueue, components.multikueue.Manager): the shipped `manager`
stack dispatches to the `worker-us` and `worker-eu` stacks, read through their stack outputs.

What Kueue and the API server do with these objects, at the pinned version (kubernetes-sigs/kueue
v0.19.2): the manager reads each worker's kubeconfig from a Secret of its own namespace under the
key `kubeconfig` (site/content/en/docs/tasks/manage/setup_multikueue.md); a ClusterQueue with a
MultiKueue check per flavor, or beside a ProvisioningRequest check, is inactive and admits nothing
(pkg/cache/scheduler/clusterqueue.go, MultiKueueAdmissionCheckAppliedPerFlavor,
MultiKueueWithProvisioningRequest); the JobSet adapter copies the JobSet's spec to the worker and
nothing else (pkg/controller/jobs/jobset/jobset_multikueue_adapter.go) and takes only JobSets whose
spec.managedBy is MultiKueue's (IsJobManagedByKueue)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
import yaml

from components.multikueue import MANAGER_CONFIG, worker_secret
from facts import versions
from facts.kubernetes import KUEUE_NAMESPACE, workload_file_key
from facts.kueue import MULTIKUEUE_CHECK, MULTIKUEUE_CONTROLLER, MULTIKUEUE_IN_ORDER, MULTIKUEUE_KUBECONFIG_KEY
from facts.project import qualified_stack_name
from harness import updates
from harness.runner import SECRET_SENTINEL, StackRun, objects_reader, run_stack, stack_with, unmarked
from harness.stackfile import SECRET_STAND_IN
from planners import workload
from planners.ownership import ObjectRef
from tests.conftest import Render, issue_for, rejected
from tools.summary import markdown

WORKERS = ("worker-us", "worker-eu")
KUEUE = "kubernetes:kueue.x-k8s.io/v1beta2"
JOBSET = "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"


@pytest.fixture(scope="module")
def workers() -> dict[str, dict[str, Any]]:
    """The worker stacks' outputs, as the manager's StackReferences read them."""
    return {qualified_stack_name(w): run_stack(w).exports for w in WORKERS}


def _manifests(run: StackRun, kind: str) -> list[dict[str, Any]]:
    return [run.manifest(r) for r in run.resources if r.custom and r.type.rsplit(":", 1)[-1] == kind]


def _manager(workers: dict[str, dict[str, Any]], **overrides: Any) -> StackRun:
    return run_stack("manager", values=stack_with("manager", **overrides), upstream=workers)


def test_each_worker_has_its_secret_cluster_and_place_in_the_config(render: Render) -> None:
    run = render("manager")
    secrets = {m["metadata"]["name"]: m for m in _manifests(run, "Secret")}
    clusters = {m["metadata"]["name"]: m for m in _manifests(run, "MultiKueueCluster")}
    assert sorted(clusters) == sorted(WORKERS)
    for worker in WORKERS:
        secret = secrets[worker_secret(worker)]
        assert secret["metadata"]["namespace"] == KUEUE_NAMESPACE
        kubeconfig = json.loads(secret["stringData"][MULTIKUEUE_KUBECONFIG_KEY])
        assert kubeconfig["current-context"] == run_stack(worker).exports["multiKueueWorker"]["name"]
        assert clusters[worker]["spec"] == {
            "clusterSource": {"kubeConfig": {"locationType": "Secret", "location": worker_secret(worker)}}
        }
    (config,) = _manifests(run, "MultiKueueConfig")
    assert config["metadata"]["name"] == MANAGER_CONFIG and config["spec"]["clusters"] == list(WORKERS)
    checks = {m["metadata"]["name"]: m["spec"] for m in _manifests(run, "AdmissionCheck")}
    assert checks == {
        MULTIKUEUE_CHECK: {
            "controllerName": MULTIKUEUE_CONTROLLER,
            "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": MANAGER_CONFIG},
        }
    }


def test_the_worker_kubeconfigs_stay_secret(render: Render) -> None:
    run = render("manager")
    secrets = [r for r in run.resources if r.type == "kubernetes:core/v1:Secret"]
    assert len(secrets) == len(WORKERS)
    assert all(SECRET_SENTINEL in json.dumps(r.inputs["stringData"]) for r in secrets)


def test_every_queue_dispatches_through_multikueue_on_every_flavor_and_provisions_nothing() -> None:
    """Workers whose pool comes from queued provisioning gate admission on a ProvisioningRequest
    check of its flavor: on the manager that check, or MultiKueue's per flavor, leaves the queue
    inactive. The workers provision."""
    queued = {}
    for worker in WORKERS:
        values = stack_with(worker)
        pool = values["nemo-gke:gpuPools"][0]
        values["nemo-gke:gpuPools"] = [{**pool, "capacity": {"type": "queuedProvisioning"}}]
        queued[qualified_stack_name(worker)] = run_stack(worker, values=values).exports
        (worker_queue,) = _manifests(run_stack(worker, values=values), "ClusterQueue")
        assert worker_queue["spec"]["admissionChecksStrategy"]["admissionChecks"][0]["onFlavors"]
    run = _manager(queued)
    (queue,) = _manifests(run, "ClusterQueue")
    assert queue["spec"]["admissionChecksStrategy"] == {"admissionChecks": [{"name": MULTIKUEUE_CHECK}]}
    assert not _manifests(run, "ProvisioningRequestConfig")
    assert [m["metadata"]["name"] for m in _manifests(run, "AdmissionCheck")] == [MULTIKUEUE_CHECK]


def test_the_manager_mirrors_the_workers_flavors_with_their_summed_quota(render: Render) -> None:
    run = render("manager")
    us, eu = (run_stack(w) for w in WORKERS)
    (flavor,) = map(unmarked, _manifests(run, "ResourceFlavor"))
    for worker in (us, eu):
        assert flavor in map(unmarked, _manifests(worker, "ResourceFlavor"))

    def gpus(stack: StackRun) -> int:
        (queue,) = _manifests(stack, "ClusterQueue")
        resources = queue["spec"]["resourceGroups"][0]["flavors"][0]["resources"]
        return int(next(r["nominalQuota"] for r in resources if r["name"] == "nvidia.com/gpu"))

    assert gpus(run) == gpus(us) + gpus(eu) == 128


def test_the_manager_runs_no_training_pod_and_holds_no_storage(render: Render) -> None:
    run = render("manager")
    types = {r.type for r in run.resources}
    assert not {t for t in types if t.startswith(("gcp:filestore", "gcp:storage"))}
    assert "gcp:container/nodePool:NodePool" in types
    pools = [r for r in run.resources if r.type == "gcp:container/nodePool:NodePool"]
    assert [p.name for p in pools] == ["cluster-gke-system"]
    kinds = {r.type.rsplit(":", 1)[-1] for r in run.resources if r.type.startswith("kubernetes:")}
    assert not kinds & {"PersistentVolumeClaim", "PersistentVolume", "Deployment", "DaemonSet", "ConfigMap", "Network"}
    assert not [r for r in run.resources if r.type == "kubernetes:core/v1:ServiceAccount" and "nemo-" in r.name]
    assert json.loads(json.dumps(run.exports["platform"]))["workers"][0]["name"] == "worker-us"


def test_kueue_keeps_a_lost_worker_s_run_as_long_as_configured(render: Render) -> None:
    """Configuration multiKueue.workerLostTimeout (apis/config/v1beta2/configuration_types.go); no
    waitForPodsReady, whose blockAdmission holds every admission while one admitted workload is not
    ready (pkg/scheduler/scheduler.go, pkg/cache/scheduler/clusterqueue.go)."""
    run = render("manager")
    (release,) = [r for r in run.resources if r.type == "kubernetes:helm.sh/v3:Release" and "kueue" in r.name]
    config = yaml.safe_load(run.manifest(release)["values"]["managerConfig"]["controllerManagerConfigYaml"])
    assert config["multiKueue"] == {"workerLostTimeout": "900s"}
    # A manager's workloads are ready once a worker started them: blocking admission until then
    # (waitForPodsReady.blockAdmission) would dispatch one run at a time.
    assert "waitForPodsReady" not in config
    worker = run_stack("worker-us")
    (release,) = [r for r in worker.resources if r.type == "kubernetes:helm.sh/v3:Release" and "kueue" in r.name]
    assert "multiKueue" not in yaml.safe_load(
        worker.manifest(release)["values"]["managerConfig"]["controllerManagerConfigYaml"]
    )


def test_a_dispatched_run_is_multikueue_s_and_carries_its_files(render: Render) -> None:
    """MultiKueue copies the JobSet alone: the run's files are in its pod template, read through the
    downward API at the paths the ConfigMap gives them on a worker, byte for byte."""
    run = render("manager")
    (jobset,) = _manifests(run, "JobSet")
    assert jobset["spec"]["managedBy"] == MULTIKUEUE_CONTROLLER
    template = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    (volume,) = [v for v in template["spec"]["volumes"] if v["name"] == "workload"]
    here = stack_with(
        "worker-us", layers=["cluster", "platform", "training"], training=stack_with("manager")["nemo-gke:training"]
    )
    on_worker = run_stack("worker-us", values=here)
    (config_map,) = [m for m in _manifests(on_worker, "ConfigMap") if "workload" in m["metadata"]["name"]]
    files = config_map["data"]
    assert {i["path"] for i in volume["downwardAPI"]["items"]} == {workload.file_path(n) for n in files}
    annotations = template["metadata"]["annotations"]
    assert {name: annotations[workload_file_key(name)] for name in files} == files
    (worker_jobset,) = _manifests(on_worker, "JobSet")
    assert "managedBy" not in worker_jobset["spec"]


def test_a_run_stack_on_the_manager_dispatches_too(workers: dict[str, dict[str, Any]]) -> None:
    manager = run_stack("manager", upstream=workers)
    values = {
        "nemo-gke:layers": ["training"],
        "nemo-gke:upstreamStack": "manager",
        "nemo-gke:training": stack_with("manager")["nemo-gke:training"],
    }
    run = run_stack("run-on-manager", values=values, upstream={qualified_stack_name("manager"): manager.exports})
    (jobset,) = _manifests(run, "JobSet")
    assert jobset["spec"]["managedBy"] == MULTIKUEUE_CONTROLLER


def test_the_shared_checkpoint_bucket_across_regions_is_warned_with_its_rate(render: Render) -> None:
    run = render("manager")
    (line,) = [w.message for w in run.warnings if "across regions" in w.message]
    assert "europe-west1, us-east5" in line and "0.02 USD per GiB" in line


def test_separate_checkpoint_buckets_are_warned_as_no_resume_elsewhere(workers: dict[str, dict[str, Any]]) -> None:
    separate = copy.deepcopy(workers)
    eu = separate[qualified_stack_name("worker-eu")]["multiKueueWorker"]
    eu["checkpointBucket"] = "your-gcp-project-nemo-eu-ckpt"
    run = _manager(separate)
    assert any("starts from that worker's checkpoints" in w.message for w in run.warnings)


# ----------------------------------------------------------------------------- refusals


def test_a_manager_with_gpu_pools_is_refused() -> None:
    values = stack_with("manager")
    del values["nemo-gke:gpuPools"]
    message = issue_for(rejected(values, "manager"), "gpuPools")
    assert "gpuPools: []" in message


@pytest.mark.parametrize("key", ["storage", "tensorboard", "resiliency", "monitoring", "gpudirect"])
def test_a_manager_refuses_what_only_training_pods_use(key: str) -> None:
    values = stack_with("manager", **{key: {}})
    assert "set it in the worker stacks" in issue_for(rejected(values, "manager"), key)


@pytest.mark.parametrize(("key", "value"), [("waitForPodsReadyTimeoutSeconds", 900), ("requeueLimit", 3)])
def test_a_manager_leaves_waiting_for_pods_to_its_workers(key: str, value: int) -> None:
    values = stack_with("manager", kueue={key: value})
    assert "its workers wait for their pods" in issue_for(rejected(values, "manager"), f"kueue.{key}")


def test_a_manager_cannot_be_a_worker_too() -> None:
    values = stack_with("manager", multiKueue={"workers": list(WORKERS), "worker": True})
    assert "cannot be a worker too" in issue_for(rejected(values, "manager"), "multiKueue.worker")


def test_the_worker_lost_timeout_is_a_manager_s_key() -> None:
    values = stack_with("dev", multiKueue={"workerLostTimeoutSeconds": 60})
    assert "manager only" in issue_for(rejected(values), "multiKueue.workerLostTimeoutSeconds")


def test_a_stack_that_is_no_worker_is_refused_by_its_line(workers: dict[str, dict[str, Any]]) -> None:
    plain = copy.deepcopy(workers)
    del plain[qualified_stack_name("worker-eu")]["multiKueueWorker"]
    error = rejected(stack_with("manager"), "manager", upstream=plain)
    assert "multiKueue.worker: true" in issue_for(error, "multiKueue.workers[1]")


def test_a_worker_stack_the_backend_does_not_hold_is_refused_by_its_line(workers: dict[str, dict[str, Any]]) -> None:
    """The mocks answer an unknown stack as the engine does (an invoke error, not a crash)."""
    missing = {name: outputs for name, outputs in workers.items() if not name.endswith("/worker-eu")}
    error = rejected(stack_with("manager"), "manager", upstream=missing)
    assert "is not a stack of this backend" in issue_for(error, "multiKueue.workers[1]")


def test_a_worker_on_another_kueue_is_refused(workers: dict[str, dict[str, Any]]) -> None:
    older = copy.deepcopy(workers)
    older[qualified_stack_name("worker-us")]["multiKueueWorker"]["kueueVersion"] = "0.18.0"
    error = rejected(stack_with("manager"), "manager", upstream=older)
    assert f"runs Kueue 0.18.0 and this manager {versions.KUEUE.version}" in issue_for(error, "multiKueue.workers[0]")


def test_a_worker_without_the_manager_s_namespaces_and_queue_is_refused(workers: dict[str, dict[str, Any]]) -> None:
    """Kueue creates a run's copy in its namespace and LocalQueue on the worker: a manager with teams
    needs workers with the same teams."""
    teams = [{"name": "research", "quota": [{"pool": "a3-ultra", "nodes": 4}]}]
    values = stack_with("manager", teams=teams)
    values["nemo-gke:training"] = {"runs": [{**values["nemo-gke:training"]["runs"][0], "team": "research", "nodes": 4}]}
    error = rejected(values, "manager", upstream=workers)
    assert "no LocalQueue a3-queue in namespace research" in issue_for(error, "multiKueue.workers[0]")


def test_a_pool_unlike_another_worker_s_pool_of_its_name_is_refused() -> None:
    pool = stack_with("worker-eu")["nemo-gke:gpuPools"][0]
    smaller = stack_with("worker-eu", gpuPools=[{**pool, "machineType": "a3-megagpu-8g"}])
    smaller["nemo-gke:region"], smaller["nemo-gke:zone"] = "europe-west4", "europe-west4-b"
    outputs = {
        qualified_stack_name("worker-us"): run_stack("worker-us").exports,
        qualified_stack_name("worker-eu"): run_stack("worker-eu", values=smaller).exports,
    }
    error = rejected(stack_with("manager"), "manager", upstream=outputs)
    assert "unlike multiKueue.workers[0]'s pool" in issue_for(error, "multiKueue.workers[1]")


def test_a_run_larger_than_every_worker_s_pool_is_refused(workers: dict[str, dict[str, Any]]) -> None:
    """The manager's quota is both workers' 16 nodes, but a run runs on one worker's 8."""
    values = stack_with("manager")
    values["nemo-gke:training"] = {"runs": [{**values["nemo-gke:training"]["runs"][0], "nodes": 16}]}
    error = rejected(values, "manager", upstream=workers)
    assert "worker-us 8, worker-eu 8" in issue_for(error, "training.runs[0].nodes")


@pytest.mark.parametrize(
    ("part", "key"),
    [
        ({"dataPrep": [{"name": "prep", "input": "raw/a.jsonl", "outputPrefix": "tok/a"}]}, "training.dataPrep[0]"),
        ({"ncclTests": [{"name": "fabric", "nodes": 2}]}, "training.ncclTests[0]"),
    ],
)
def test_data_preparation_and_fabric_checks_belong_to_the_workers(
    workers: dict[str, dict[str, Any]], part: dict[str, Any], key: str
) -> None:
    values = stack_with("manager")
    values["nemo-gke:training"] = {**values["nemo-gke:training"], **part}
    assert "belongs in a worker's stack" in issue_for(rejected(values, "manager", upstream=workers), key)


def test_a_dispatched_run_names_no_secret(workers: dict[str, dict[str, Any]]) -> None:
    values = stack_with("manager")
    values["nemo-gke:training"] = {
        "runs": [{**values["nemo-gke:training"]["runs"][0], "env": {"WANDB_API_KEY": SECRET_STAND_IN}}]
    }
    error = rejected(values, "manager", upstream=workers)
    assert "MultiKueue does not copy" in issue_for(error, "training.runs[0].env")


def _existing_manager() -> dict[str, Any]:
    return {
        "nemo-gke:layers": ["platform"],
        "nemo-gke:existingCluster": {"name": "hub", "kubeconfigPath": "~/.kube/config", "gpuPools": []},
        "nemo-gke:kueue": {"install": False},
        "nemo-gke:multiKueue": {"workers": list(WORKERS)},
    }


def test_an_existing_cluster_manages_without_pools_or_claims(workers: dict[str, dict[str, Any]]) -> None:
    run = run_stack("hub", values=_existing_manager(), upstream=workers)
    kinds = {r.type.rsplit(":", 1)[-1] for r in run.resources}
    assert {"MultiKueueCluster", "MultiKueueConfig", "AdmissionCheck", "ClusterQueue"} <= kinds
    assert not kinds & {"PersistentVolumeClaim", "StorageClass"}
    assert not [r for r in run.resources if r.type.startswith("gcp:")]


def test_an_existing_cluster_that_manages_nothing_needs_a_gpu_pool() -> None:
    values = _existing_manager()
    del values["nemo-gke:multiKueue"]
    values["nemo-gke:existingCluster"] = {**values["nemo-gke:existingCluster"], "storageClass": "standard-rwx"}
    assert "at least one GPU pool" in issue_for(rejected(values, "hub"), "existingCluster.gpuPools")


def test_an_existing_manager_refuses_storage() -> None:
    values = _existing_manager()
    values["nemo-gke:existingCluster"] = {**values["nemo-gke:existingCluster"], "storageClass": "standard-rwx"}
    assert "storage belongs in the worker stacks" in issue_for(rejected(values, "hub"), "existingCluster.storageClass")


def test_adding_a_worker_is_one_line_and_leaves_the_runs_alone(workers: dict[str, dict[str, Any]]) -> None:
    """What `pulumi up` does after a line is added under multiKueue.workers (harness.updates, the
    engine's and the provider's rules): the worker's Secret and MultiKueueCluster are created, the
    MultiKueueConfig and the ClusterQueue's quota patched, and nothing replaced: a run dispatched
    meanwhile keeps running. Removing the line is the reverse."""
    one = _manager(workers, multiKueue={"workers": [WORKERS[0]]})
    both = _manager(workers)
    steps = updates.plan(one, both)
    changed = {new.type.rsplit(":", 1)[-1]: step.op for _, new, step in steps.values() if step.op != "same"}
    assert changed == {"MultiKueueConfig": "update", "ClusterQueue": "update"}
    created = {r.urn for r in both.kubernetes_objects} - {r.urn for r in one.kubernetes_objects}
    names = sorted(urn.rsplit("::", 1)[-1] for urn in created)
    assert names == ["platform-multikueue-worker-eu", "platform-multikueue-worker-eu-kubeconfig"]
    assert not {r.urn for r in one.kubernetes_objects} - {r.urn for r in both.kubernetes_objects}


def test_a_worker_s_authorized_networks_must_admit_the_manager_s_egress() -> None:
    """A worker stack exports the ranges its control plane admits; its manager is refused before
    anything is registered unless its egress ranges fall within them (planners.multikueue)."""
    values = stack_with("worker-us")
    values["nemo-gke:cluster"] = {
        **values["nemo-gke:cluster"],
        "masterAuthorizedNetworks": [{"cidr": "203.0.113.0/24"}],
    }
    guarded = run_stack("worker-us", values=values).exports
    assert guarded["multiKueueWorker"]["controlPlaneRanges"] == ["203.0.113.0/24"]
    upstream = {
        qualified_stack_name("worker-us"): guarded,
        qualified_stack_name("worker-eu"): run_stack("worker-eu").exports,
    }
    error = rejected(stack_with("manager"), "manager", upstream=upstream)
    assert "admits only 203.0.113.0/24 to its control plane" in issue_for(error, "multiKueue.egressRanges")
    outside = stack_with("manager", multiKueue={"workers": list(WORKERS), "egressRanges": ["198.51.100.7/32"]})
    error = rejected(outside, "manager", upstream=upstream)
    assert "not the manager's egress 198.51.100.7/32" in issue_for(error, "multiKueue.workers[0]")
    inside = stack_with("manager", multiKueue={"workers": list(WORKERS), "egressRanges": ["203.0.113.7/32"]})
    assert run_stack("manager", values=inside, upstream=upstream).of_type(f"{KUEUE}:MultiKueueCluster")


def test_egress_ranges_are_a_manager_s_key_in_cidr_notation() -> None:
    values = stack_with("dev", multiKueue={"egressRanges": ["203.0.113.7/32"]})
    assert "is a manager's" in issue_for(rejected(values), "multiKueue.egressRanges")
    values = stack_with("manager", multiKueue={"workers": list(WORKERS), "egressRanges": ["203.0.113.7"]})
    assert "203.0.113.7/32" in issue_for(rejected(values, "manager"), "multiKueue.egressRanges[0]")


def test_a_flex_start_worker_pool_is_refused_where_another_worker_could_take_the_run() -> None:
    """MultiKueue keeps the first worker to admit, and a flex-start pool's Kueue admits before any VM
    exists; queued provisioning (the shipped workers') admits only once GKE has the VMs."""
    values = stack_with("worker-us")
    pools = copy.deepcopy(values["nemo-gke:gpuPools"])
    pools[0]["capacity"]["type"] = "flexStart"
    flex = run_stack("worker-us", values={**values, "nemo-gke:gpuPools": pools}).exports
    upstream = {
        qualified_stack_name("worker-us"): flex,
        qualified_stack_name("worker-eu"): run_stack("worker-eu").exports,
    }
    error = rejected(stack_with("manager"), "manager", upstream=upstream)
    assert "has the flex-start pool a3-ultra" in issue_for(error, "multiKueue.workers[0]")
    alone = stack_with("manager", multiKueue={"workers": ["worker-us"]})
    assert run_stack("manager", values=alone, upstream=upstream).of_type(f"{KUEUE}:MultiKueueCluster")


# ----------------------------------------------------------------------------- dispatch in order


def _in_order(workers: dict[str, dict[str, Any]], order: tuple[str, ...] = WORKERS) -> StackRun:
    return _manager(workers, multiKueue={"workers": list(order), "dispatch": "inOrder"})


def _kueue_configuration(run: StackRun) -> dict[str, Any]:
    (release,) = [r for r in run.resources if r.type == "kubernetes:helm.sh/v3:Release" and "kueue" in r.name]
    return dict(yaml.safe_load(run.manifest(release)["values"]["managerConfig"]["controllerManagerConfigYaml"]))


def test_in_order_kueue_offers_a_run_to_one_worker_a_round_in_the_workers_order(
    workers: dict[str, dict[str, Any]],
) -> None:
    """The incremental dispatcher (Configuration multiKueue.dispatcherName) nominates stepSize more
    workers each round, in MultiKueueConfig spec.clusters' order (pkg/controller/workloaddispatcher/
    incrementaldispatcher.go, v0.19.2); the default leaves the section as it was."""
    run = _in_order(workers, tuple(reversed(WORKERS)))
    assert _kueue_configuration(run)["multiKueue"] == {
        "workerLostTimeout": "900s",
        "dispatcherName": "kueue.x-k8s.io/multikueue-dispatcher-incremental",
        "incrementalDispatcherConfig": {"stepSize": 1},
    }
    (config,) = _manifests(run, "MultiKueueConfig")
    assert config["spec"]["clusters"] == list(reversed(WORKERS))
    assert "dispatcherName" not in _kueue_configuration(_manager(workers))["multiKueue"]


def test_switching_to_in_order_reconfigures_kueue_and_replaces_nothing(workers: dict[str, dict[str, Any]]) -> None:
    """Only the Kueue release's configuration changes; its chart rolls the manager on that file's
    checksum (charts/kueue/templates/manager/manager.yaml, config-checksum, v0.19.2), and every
    Kubernetes object, runs included, stays as it is."""
    before, after = _manager(workers), _in_order(workers)
    steps = updates.plan(before, after)
    assert {step.op for _, _, step in steps.values()} == {"same"}
    old = {r.name: r.inputs for r in before.resources if r.type == "kubernetes:helm.sh/v3:Release"}
    new = {r.name: r.inputs for r in after.resources if r.type == "kubernetes:helm.sh/v3:Release"}
    assert old.keys() == new.keys() and [name for name in new if new[name] != old[name]] == ["platform-kueue-release"]
    assert _kueue_configuration(before) | {"multiKueue": _kueue_configuration(after)["multiKueue"]} == (
        _kueue_configuration(after)
    )


def test_a_spot_worker_s_link_says_what_a_reclaim_costs_the_run(workers: dict[str, dict[str, Any]]) -> None:
    """A dispatched run restarts on a worker as on any cluster: a Spot reclaim costs one of its
    restarts (planners.summary._chain_wait, as for a run's own chain)."""
    spot = copy.deepcopy(workers)
    spot[qualified_stack_name(WORKERS[1])]["cluster"]["gpuPools"][0]["capacityType"] = "spot"
    (line,) = _in_order(spot).exports["summary"]["runs"]
    first, second = line["chain"]
    assert "restarts" not in first["wait"]
    assert second["wait"].endswith("each reclaim costs one of the run's 20 restarts and the steps since its checkpoint")


def test_the_summary_gives_each_worker_s_link_its_offer_time(workers: dict[str, dict[str, Any]]) -> None:
    """Kueue adds a worker each round whether it has the run's pool or not: a worker without it
    still delays the ones after it."""
    (line,) = _in_order(workers).exports["summary"]["runs"]
    assert line["dispatch"] == "inOrder"
    first, second = line["chain"]
    assert (first["worker"], second["worker"]) == WORKERS
    assert first["wait"] == "until the Dynamic Workload Scheduler provisions all nodes at once"
    assert second["wait"].startswith("offered 5 min after the first worker, if none has admitted it by then; then ")
    values = stack_with("worker-eu")
    other = copy.deepcopy(values["nemo-gke:gpuPools"])
    other[0]["name"] = "a3-ultra-b"
    three = {**workers, qualified_stack_name("worker-b"): run_stack("worker-b", values={
        **values, "nemo-gke:gpuPools": other, "nemo-gke:cluster": {**values["nemo-gke:cluster"], "name": "nemo-b"},
    }).exports}  # fmt: skip
    (line,) = _in_order(three, ("worker-b", *WORKERS)).exports["summary"]["runs"]
    assert [link["worker"] for link in line["chain"]] == list(WORKERS)
    assert [link["wait"].split(",")[0] for link in line["chain"]] == [
        "offered 5 min after the first worker",
        "offered 10 min after the first worker",
    ]
    # Only the second worker has the run's pool: one link, still a round late.
    two = {qualified_stack_name(w): three[qualified_stack_name(w)] for w in ("worker-b", "worker-us")}
    (line,) = _in_order(two, ("worker-b", "worker-us")).exports["summary"]["runs"]
    ((link,),) = (line["chain"],)
    assert link["worker"] == "worker-us" and link["wait"].startswith("offered 5 min after the first worker")
    assert "runs on the first to admit it" in _said_summary(_manager(workers))
    assert "one more each 5 minutes none admits it: a3-ultra on worker-us" in _said_summary(_in_order(workers))


def _said_summary(run: StackRun) -> str:
    return markdown("manager", run.exports["summary"], run.warnings)


def test_a_flex_start_worker_may_close_an_in_order_chain_only() -> None:
    """In order, the last worker is offered a run only after every other left it unadmitted for a
    round: flex-start there is the fallback of GKE's "Plan A on-demand, Plan B DWS". Earlier, or
    all at once, it could take a run another worker has nodes for."""
    upstream = {}
    for worker, capacity in (("worker-eu", "onDemand"), ("worker-us", "flexStart")):
        values = stack_with(worker)
        pools = copy.deepcopy(values["nemo-gke:gpuPools"])
        pools[0]["capacity"] = {"type": capacity}
        upstream[qualified_stack_name(worker)] = run_stack(
            worker, values={**values, "nemo-gke:gpuPools": pools}
        ).exports
    assert _in_order(upstream, ("worker-eu", "worker-us")).of_type(f"{KUEUE}:MultiKueueConfig")
    for dispatch in ("inOrder", "allAtOnce"):
        values = stack_with("manager", multiKueue={"workers": list(WORKERS), "dispatch": dispatch})
        error = rejected(values, "manager", upstream=upstream)
        assert "or list it last with multiKueue.dispatch: inOrder" in issue_for(error, "multiKueue.workers[0]")


def test_dispatch_is_a_manager_s_key_with_its_two_values() -> None:
    values = stack_with("dev", multiKueue={"dispatch": "inOrder"})
    assert "manager only" in issue_for(rejected(values), "multiKueue.dispatch")
    values = stack_with("manager", multiKueue={"workers": list(WORKERS), "dispatch": "firstFree"})
    assert "allAtOnce" in issue_for(rejected(values, "manager"), "multiKueue.dispatch")


def test_an_existing_manager_in_order_is_told_where_its_own_kueue_dispatches_otherwise(
    workers: dict[str, dict[str, Any]],
) -> None:
    """The program does not configure a cluster's own Kueue (kueue.install: false): it reads its
    Configuration and says where it does not dispatch in order."""
    config = ObjectRef("v1", "ConfigMap", KUEUE_NAMESPACE, "kueue-manager-config")
    values = {**_existing_manager(), "nemo-gke:multiKueue": {"workers": list(WORKERS), "dispatch": "inOrder"}}

    def said(configuration: dict[str, Any] | None) -> list[str]:
        data = {"controller_manager_config.yaml": yaml.safe_dump(configuration)}
        found = {} if configuration is None else {config: {"data": data}}
        run = run_stack("hub", values=values, upstream=workers, read_objects=objects_reader(found))
        return [w.message for w in run.warnings if "multiKueue" in w.message]

    (line,) = said({"multiKueue": {"workerLostTimeout": "900s"}})
    assert "does not set multiKueue" in line and "not in the order of multiKueue.workers" in line
    (line,) = said(None)
    assert "could not be read" in line
    assert said({"multiKueue": {"workerLostTimeout": "900s", **MULTIKUEUE_IN_ORDER}}) == []
    gate_off = {"featureGates": {"MultiKueueIncrementalDispatcherRespectConfigOrder": False}}
    (line,) = said({"multiKueue": {"workerLostTimeout": "900s", **MULTIKUEUE_IN_ORDER}, **gate_off})
    assert "turns off the feature gates MultiKueueIncrementalDispatcherRespectConfigOrder" in line
