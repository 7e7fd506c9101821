"""A stack on an existing cluster (examples/Pulumi.existing.yaml): no Google Cloud resource or
provider, flavors and pods that select the described nodes, claims of the cluster's StorageClass,
and everything else as on GKE, validated the same."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from facts.gke import GCSFUSE_POD_ANNOTATIONS
from facts.kubernetes import GPU_TAINT, JOBSET_API, KUEUE_API, TOPOLOGY_LABELS
from facts.machines import NODE_RESERVE_MEMORY_MIB, NODE_RESERVE_MILLICORES
from harness.runner import load_stack_values, run_stack, stack_with
from planners import workload
from tests.conftest import flavors_by_pool, issue_for, mebibytes, millicores, rejected, with_model
from tests.stacks.test_training import container, env, jobset, pod, workload_files

POOL_LABELS = {"cloud.google.com/gke-nodepool": "a3-ultra-pool"}


def existing(**changes: Any) -> dict[str, Any]:
    values = load_stack_values("existing")
    cluster = copy.deepcopy(values["nemo-gke:existingCluster"])
    cluster.update(changes)
    return stack_with("existing", existingCluster=cluster)


def run_only_on(stack: str) -> dict[str, Any]:
    """A run-only stack reading `stack` through upstreamStack, with one 2-node run."""
    return {
        "nemo-gke:layers": ["training"],
        "nemo-gke:upstreamStack": f"organization/nemo-gke/{stack}",
        "nemo-gke:training": {"runs": [{"name": "second", "model": "llama3.1-8b", "nodes": 2, "steps": 10}]},
    }


def test_an_existing_cluster_stack_creates_no_google_cloud_resource(render: Any) -> None:
    run = render("existing")
    types = {r.type for r in run.resources}
    assert types, "the stack registers the platform and its run"
    assert not [t for t in types if t.startswith(("gcp:", "pulumi:providers:gcp"))], types
    (provider,) = run.of_type("pulumi:providers:kubernetes")
    assert provider.inputs["context"] == "team-a3ultra"
    assert provider.inputs["kubeconfig"].endswith("/.kube/config") and "~" not in provider.inputs["kubeconfig"]


def test_flavors_and_pods_select_the_described_nodes_and_tolerate_their_taints(render: Any) -> None:
    """Kueue offers a run only the flavor whose node labels its pods' selector allows
    (planners.queues): both are the pool's labels, not GKE's node pool label of its name."""
    run = render("existing")
    (flavor,) = flavors_by_pool_labels(run)
    assert flavor["spec"]["nodeLabels"] == POOL_LABELS
    assert GPU_TAINT.toleration() in flavor["spec"]["tolerations"]
    # Its nodes carry GKE's topology labels and all exist: runs are placed by topology.
    assert flavor["spec"]["topologyName"].startswith("gke-default-")
    _, manifest = jobset(run)
    spec = pod(manifest)["spec"]
    assert spec["nodeSelector"] == POOL_LABELS
    assert GPU_TAINT.toleration() in spec["tolerations"]
    annotations = pod(manifest)["metadata"]["annotations"]
    assert annotations["kueue.x-k8s.io/podset-preferred-topology"] == TOPOLOGY_LABELS["block"]
    # No Cloud Storage FUSE, no GKE multi-networking, no GPUDirect plugin: NCCL on the pod network.
    assert not [k for k in annotations if k.startswith(("gke-gcsfuse/", "networking.gke.io/", "devices.gke.io/"))]
    assert "initContainers" not in spec and not spec.get("hostNetwork")
    variables = env(manifest)
    assert variables["NCCL_SOCKET_IFNAME"] == "eth0"
    assert not [k for k in variables if k in ("NCCL_NET", "NCCL_INIT_SCRIPT", "NCCL_PLUGIN_PATH")]
    assert not [v for v in spec["volumes"] if "csi" in v]
    assert container(manifest)["resources"]["limits"]["nvidia.com/gpu"] == "8"
    # Off GKE the GPT-2 files a NeMo 2 run tokenizes with are read from the data claim.
    nemo2 = render("existing", values=with_model("existing", "llama3.1-8b"))
    assert '"/data/tokenizers/gpt2/gpt2-vocab.json"' in workload_files(nemo2, "llama3-8b")[workload.RUN_SETTINGS]


def flavors_by_pool_labels(run: Any) -> list[dict[str, Any]]:
    return [run.manifest(f) for f in run.of_type(f"kubernetes:{KUEUE_API}:ResourceFlavor")]


def test_declared_taints_are_tolerated_exactly_by_flavor_and_pods(render: Any) -> None:
    """A pool's taints are tolerated as declared (key, value and effect), no wider; one that GKE's
    GPU toleration (nvidia.com/gpu, Exists, NoSchedule) does not cover, such as the same key with
    NoExecute, gets its own toleration (k8s.io/api core/v1 toleration.go `ToleratesTaint`: a
    toleration with an effect matches only that effect)."""
    pools = copy.deepcopy(load_stack_values("existing")["nemo-gke:existingCluster"]["gpuPools"])
    pools[0]["taints"] += [
        {"key": "team.example.com/reserved", "value": "llm", "effect": "NoSchedule"},
        {"key": "nvidia.com/gpu", "value": "present", "effect": "NoExecute"},
    ]
    run = render("existing", values=existing(gpuPools=pools))
    own = [
        {"key": "team.example.com/reserved", "operator": "Equal", "value": "llm", "effect": "NoSchedule"},
        {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoExecute"},
    ]
    (flavor,) = flavors_by_pool_labels(run)
    assert flavor["spec"]["tolerations"] == [GPU_TAINT.toleration(), *own]
    tolerations = pod(jobset(run)[1])["spec"]["tolerations"]
    assert [t for t in tolerations if t.get("operator") == "Equal"] == own
    assert not [t for t in tolerations if t["key"] == "team.example.com/reserved" and t["operator"] == "Exists"]


def test_a_taint_declared_without_a_value_is_tolerated_whatever_its_value(render: Any) -> None:
    """A taint without `value` says nothing of the nodes' value: it is tolerated with Exists on
    its key and effect, as it was before taints were tolerated exactly; a node taint without a
    value is also valid Kubernetes (`kubectl taint nodes n key:NoSchedule`)."""
    pools = copy.deepcopy(load_stack_values("existing")["nemo-gke:existingCluster"]["gpuPools"])
    pools[0]["taints"].append({"key": "team.example.com/reserved", "effect": "NoExecute"})
    run = render("existing", values=existing(gpuPools=pools))
    any_value = {"key": "team.example.com/reserved", "operator": "Exists", "effect": "NoExecute"}
    (flavor,) = flavors_by_pool_labels(run)
    assert any_value in flavor["spec"]["tolerations"]
    assert any_value in pod(jobset(run)[1])["spec"]["tolerations"]
    # Stack outputs drop the null value; a run-only stack on top still reads the taint.
    upstream = {"organization/nemo-gke/existing": run.exports}
    on_top = run_stack("run-on-existing", values=run_only_on("existing"), upstream=upstream)
    assert any_value in pod(jobset(on_top)[1])["spec"]["tolerations"]


def test_the_claims_come_from_the_cluster_s_storage_class(render: Any) -> None:
    run = render("existing")
    claims = {
        run.manifest(c)["metadata"]["name"]: run.manifest(c)
        for c in run.of_type("kubernetes:core/v1:PersistentVolumeClaim")
    }
    assert set(claims) == {"shared", "data", "checkpoints"}
    for claim in claims.values():
        assert claim["spec"]["storageClassName"] == "standard-rwx"
        assert claim["spec"]["accessModes"] == ["ReadWriteMany"]
    assert not run.of_type("kubernetes:core/v1:PersistentVolume")


def test_controllers_run_on_the_untainted_linux_nodes(render: Any) -> None:
    run = render("existing", values=stack_with("existing", kueue={"install": True}))
    releases = [r for r in run.resources if r.type == "kubernetes:helm.sh/v3:Release"]
    assert releases
    for deployment in run.of_type("kubernetes:apps/v1:Deployment"):
        assert run.manifest(deployment)["spec"]["template"]["spec"]["nodeSelector"] == {"kubernetes.io/os": "linux"}


def test_a_run_only_stack_reads_an_existing_cluster_stack() -> None:
    """The cluster facts travel through the stack outputs like a GKE stack's: a run-only stack
    on top of `existing` gets the same selectors and no Google Cloud provider."""
    run = run_stack("run-on-existing", values=run_only_on("existing"))
    assert not [r for r in run.resources if r.type.startswith(("gcp:", "pulumi:providers:gcp"))]
    _, manifest = jobset(run)
    assert pod(manifest)["spec"]["nodeSelector"] == POOL_LABELS


@pytest.mark.parametrize(
    ("values", "key", "words"),
    [
        (stack_with("existing", layers=["cluster", "platform", "training"]), "layers", "starts at platform"),
        (existing(kubeconfig="apiVersion: v1"), "existingCluster.kubeconfig", "exactly one"),
        (stack_with("existing", resiliency={"enabled": True}), "resiliency.enabled", "off with existingCluster"),
        (existing(storageClass="Standard_RWX"), "existingCluster.storageClass", "DNS label"),
        (
            existing(systemNodeLabels={"kubernetes.io/os": "linux os"}),
            "existingCluster.systemNodeLabels.kubernetes.io/os",
            "Kubernetes label value",
        ),
    ],
)
def test_contradicting_settings_are_refused(values: dict[str, Any], key: str, words: str) -> None:
    assert words in issue_for(rejected(values, "existing"), key)


@pytest.mark.parametrize(
    ("pool", "key", "words"),
    [
        ({"machineType": "p5.48xlarge"}, "machineType", "not in the catalog"),
        ({"nodeLabels": {}}, "nodeLabels", "at least one label"),
        ({"nodeLabels": {"bad key!": "x"}}, "nodeLabels.bad key!", "Kubernetes label key"),
        ({"nodeLabels": {"pool": "a3 ultra"}}, "nodeLabels.pool", "Kubernetes label value"),
        ({"taints": [{"key": "k", "value": "bad value!"}]}, "taints[0].value", "Kubernetes label value"),
        ({"taints": [{"key": "k", "value": "x" * 64}]}, "taints[0].value", "Kubernetes label value"),
        (
            {"taints": [{"key": "k", "value": "a"}, {"key": "k", "value": "b"}]},
            "taints[1]",
            "unique by key and effect",
        ),
    ],
)
def test_bad_pools_are_refused(pool: dict[str, Any], key: str, words: str) -> None:
    pools = copy.deepcopy(load_stack_values("existing")["nemo-gke:existingCluster"]["gpuPools"])
    pools[0].update(pool)
    error = rejected(existing(gpuPools=pools), "existing")
    assert words in issue_for(error, f"existingCluster.gpuPools[0].{key}")
    # One line: the bad item, not also the list it leaves "shorter than 1 item".
    assert len(error.issues) == 1, [str(i) for i in error.issues]


def test_a_run_larger_than_the_described_pool_is_refused_before_anything_is_registered() -> None:
    training = copy.deepcopy(load_stack_values("existing")["nemo-gke:training"])
    training["runs"][0]["nodes"] = 5
    message = issue_for(rejected(stack_with("existing", training=training), "existing"), "training.runs[0].nodes")
    assert "holds at most 4 nodes" in message


def test_local_checkpoints_need_gke_s_node_ssd() -> None:
    training = copy.deepcopy(load_stack_values("existing")["nemo-gke:training"])
    training["runs"][0].update(
        model="llama3.1-8b",
        checkpoint={"intervalSteps": 10},
        resiliency={"faultTolerance": True, "localCheckpointIntervalSteps": 5},
    )
    key = "training.runs[0].resiliency.localCheckpointIntervalSteps"
    assert "existing cluster" in issue_for(rejected(stack_with("existing", training=training), "existing"), key)


def test_gke_stacks_keep_their_selectors(render: Any) -> None:
    """The existing-cluster path leaves GKE pools alone: GKE's node pool label and accelerator."""
    flavors = flavors_by_pool(render("dev"))
    for pool, flavor in flavors.items():
        assert flavor["spec"]["nodeLabels"]["cloud.google.com/gke-nodepool"] == pool
        assert "cloud.google.com/gke-accelerator" in flavor["spec"]["nodeLabels"]


def test_a_run_only_stack_reads_an_upstream_whose_flavors_are_placed_by_topology() -> None:
    """Stack outputs drop null values: a flavor without a topology problem (topologyProblem:
    null) must still read back (planners.queues.Flavor defaults it). a3ultra's reservation pool
    is such a flavor; the run-only stack on top of it failed before the default."""
    run = run_stack("run-on-a3ultra", values=run_only_on("a3ultra"))
    assert len([r for r in run.resources if r.type.endswith(":JobSet")]) == 1


def test_kueue_and_jobset_declared_present_are_not_installed(render: Any) -> None:
    """kueue.install: false: no Helm release, no JobSet CRD of the program's, the queues and runs
    as before. The existing cluster's CRDs were checked (tests/stacks/test_controller_api.py); a GKE
    cluster this program creates cannot be read at preview, so a warning names the API versions
    its controllers must serve."""
    run = render("existing", values=stack_with("existing", kueue={"install": False}))
    assert not [r for r in run.resources if r.type == "kubernetes:helm.sh/v3:Release"]
    assert not run.of_type("kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition")
    assert run.of_type(f"kubernetes:{KUEUE_API}:ClusterQueue") and jobset(run)
    assert not [w for w in run.warnings if "kueue.install" in w.message]
    dev = {key: value for key, value in load_stack_values("dev").items() if key != "nemo-gke:training"}
    cluster_only = run_stack("dev", values={**dev, "nemo-gke:layers": ["cluster"]})
    platform = {
        "nemo-gke:layers": ["platform", "training"],
        "nemo-gke:upstreamStack": "organization/nemo-gke/dev",
        "nemo-gke:kueue": {"install": False},
    }
    upstream = {"organization/nemo-gke/dev": cluster_only.exports}
    said = [w.message for w in run_stack("platform", values=platform, upstream=upstream).warnings]
    assert any("kueue.x-k8s.io/v1beta2" in m and "jobset.x-k8s.io/v1alpha2" in m for m in said)


def test_kueue_not_installed_on_a_cluster_the_stack_creates_is_refused() -> None:
    """Nothing but this stack could install Kueue on a cluster it creates: the queues would wait
    for CRDs that never come."""
    assert [str(i) for i in rejected(stack_with("dev", kueue={"install": False})).issues] == [
        "nemo-gke:kueue.install = false: this stack creates the cluster, so nothing else could have installed "
        "Kueue and JobSet on it: leave it true"
    ]


# --------------------------------------------------------------------------- machines outside the catalog

OKE_POOL_LABELS = {"node.kubernetes.io/instance-type": "BM.GPU.H100.8", "nvidia.com/gpu": "true"}


def oke_pool(**changes: Any) -> dict[str, Any]:
    (pool,) = copy.deepcopy(load_stack_values("existing-oke")["nemo-gke:existingCluster"]["gpuPools"])
    pool.update(changes)
    return {key: value for key, value in pool.items() if value is not None}


def oke(**pool_changes: Any) -> dict[str, Any]:
    cluster = copy.deepcopy(load_stack_values("existing-oke")["nemo-gke:existingCluster"])
    cluster["gpuPools"] = [oke_pool(**pool_changes)]
    return stack_with("existing-oke", existingCluster=cluster)


def test_a_pool_outside_the_catalog_is_sized_by_what_its_nodes_report(render: Any) -> None:
    """examples/Pulumi.existing-oke.yaml: OKE's BM.GPU.H100.8 is not in the catalog. Its flavor's
    quota and the pods' requests come from the allocatable CPU and memory the pool declares, its
    GPUs from gpusPerNode; its nodes have no GKE topology labels, so runs are not placed by topology."""
    run = render("existing-oke")
    (flavor,) = flavors_by_pool_labels(run)
    assert flavor["spec"]["nodeLabels"] == OKE_POOL_LABELS and "topologyName" not in flavor["spec"]
    (queue,) = [run.manifest(q) for q in run.of_type(f"kubernetes:{KUEUE_API}:ClusterQueue")]
    quota = {r["name"]: r["nominalQuota"] for r in queue["spec"]["resourceGroups"][0]["flavors"][0]["resources"]}
    assert quota == {"nvidia.com/gpu": "16", "cpu": "440", "memory": f"{2 * 1800}Gi"}
    _, manifest = jobset(run)
    requests = container(manifest)["resources"]["requests"]
    reserve_cpu, reserve_gib = NODE_RESERVE_MILLICORES // 1000, NODE_RESERVE_MEMORY_MIB // 1024
    assert (millicores(requests["cpu"]), mebibytes(requests["memory"])) == (
        (220 - reserve_cpu) * 1000,
        (1800 - reserve_gib) * 1024,
    )
    assert requests["nvidia.com/gpu"] == "8"
    annotations = pod(manifest)["metadata"]["annotations"]
    assert not [k for k in annotations if k.startswith("kueue.x-k8s.io/podset-")]
    summary = run.exports["summary"]
    assert [(p["machineType"], p["gpus"]) for p in summary["pools"]] == [("BM.GPU.H100.8", 16)]


def test_a_run_is_checked_against_the_machine_the_pool_describes() -> None:
    """The run planner's rules read the described machine: tensor parallelism must divide its
    gpusPerNode, and an A100 has no FP8 (facts.machines.ACCELERATORS)."""
    training = copy.deepcopy(load_stack_values("existing-oke")["nemo-gke:training"])
    training["runs"][0]["tensorParallel"] = 8
    values = {**oke(gpusPerNode=4), "nemo-gke:training": training}
    message = issue_for(rejected(values, "existing-oke"), "training.runs[0].tensorParallel")
    assert "4 GPUs of a BM.GPU.H100.8 NVLink domain (a node)" in message
    del training["runs"][0]["tensorParallel"]
    training["runs"][0]["fp8"] = True
    values = {**oke(accelerator="a100", machineType="BM.GPU.A100-v2.8"), "nemo-gke:training": training}
    assert "a100 GPUs have no FP8" in issue_for(rejected(values, "existing-oke"), "training.runs[0].fp8")


def test_a_run_only_stack_reads_a_pool_outside_the_catalog_from_its_upstream() -> None:
    """The described machine travels in the cluster facts (planners.pools.GpuPoolExport.other_machine):
    a run-only stack on top sizes its pods from it, not from a catalog lookup of the name."""
    _, manifest = jobset(run_stack("run-on-existing-oke", values=run_only_on("existing-oke")))
    assert pod(manifest)["spec"]["nodeSelector"] == OKE_POOL_LABELS
    assert millicores(container(manifest)["resources"]["requests"]["cpu"]) == 212_000


@pytest.mark.parametrize(
    ("pool", "key", "words"),
    [
        (
            {"gpusPerNode": None, "accelerator": None, "allocatableCpus": None, "allocatableMemoryGib": None},
            "machineType",
            "for a machine outside it, set gpusPerNode, accelerator, allocatableCpus, allocatableMemoryGib",
        ),
        ({"allocatableMemoryGib": None}, "allocatableMemoryGib", "is required for BM.GPU.H100.8"),
        ({"machineType": "a3-ultragpu-8g"}, "gpusPerNode", "the catalog describes a3-ultragpu-8g's nodes"),
        ({"accelerator": "mi300x"}, "accelerator", "must be one of h100, h200, b200, gb200, a100"),
        ({"allocatableCpus": 8}, "allocatableCpus", "must exceed 8"),
        ({"allocatableMemoryGib": 64}, "allocatableMemoryGib", "must exceed 64"),
        ({"gpusPerNode": 17}, "gpusPerNode", "less than or equal to 16"),
        ({"machineType": "BM GPU"}, "machineType", "Kubernetes label value"),
        ({"machineType": "BM.GPU."}, "machineType", "Kubernetes label value"),
    ],
    ids=[
        "no-description",
        "incomplete",
        "catalog-and-described",
        "gpu-model",
        "cpus",
        "memory",
        "gpus",
        "name",
        "name-end",
    ],
)
def test_bad_machines_outside_the_catalog_are_refused(pool: dict[str, Any], key: str, words: str) -> None:
    message = issue_for(rejected(oke(**pool), "existing-oke"), f"existingCluster.gpuPools[0].{key}")
    assert words in message


def test_a_described_machine_this_version_does_not_know_is_refused_in_an_upstream_stack() -> None:
    """An upstream stack of a newer version may describe a GPU model this one lacks: the run-only
    stack says to update it (stacks.upstream), with no traceback from a catalog lookup."""
    upstream = copy.deepcopy(run_stack("existing-oke").exports)
    upstream["cluster"]["gpuPools"][0]["otherMachine"]["accelerator"] = "gb300"
    error = rejected(
        run_only_on("existing-oke"), "run-on-existing-oke", {"organization/nemo-gke/existing-oke": upstream}
    )
    message = issue_for(error, "upstreamStack")
    assert "gpuPools.0.otherMachine" in message and "update that stack" in message


# --------------------------------------------------------------------------- an existing namespace and claims

FSS = {"shared": "fss-shared", "data": "fss-data", "checkpoints": "fss-data"}


def reads(run: Any, typ: str) -> list[str]:
    return [r.read_id for r in run.of_type(typ) if r.read]


def claims_mounted(pod_template: dict[str, Any]) -> dict[str, str]:
    volumes = pod_template["spec"]["volumes"]
    return {v["name"]: v["persistentVolumeClaim"]["claimName"] for v in volumes if "persistentVolumeClaim" in v}


def test_existing_claims_in_an_existing_namespace_are_read_not_created(render: Any) -> None:
    """namespaceExists and claims: the namespace and the named claims are reads (`Resource.get`):
    `pulumi preview` stops on a missing one, and `pulumi destroy` deletes neither. Runs and
    TensorBoard mount the named claims; one claim may hold both data and checkpoints."""
    values = existing(namespaceExists=True, claims=FSS)
    del values["nemo-gke:existingCluster"]["storageClass"]
    values["nemo-gke:kueue"] = {"install": True}
    run = render("existing", values=values)
    assert reads(run, "kubernetes:core/v1:Namespace") == ["nemo"]
    created = [
        run.manifest(r)["metadata"]["name"] for r in run.custom_resources if r.type == "kubernetes:core/v1:Namespace"
    ]
    assert "nemo" not in created and created, "Kueue's and JobSet's namespaces are still the program's"
    assert sorted(reads(run, "kubernetes:core/v1:PersistentVolumeClaim")) == ["nemo/fss-data", "nemo/fss-shared"]
    assert not [r for r in run.custom_resources if r.type == "kubernetes:core/v1:PersistentVolumeClaim"]
    _, manifest = jobset(run)
    assert claims_mounted(pod(manifest)) == {"shared": "fss-shared", "data": "fss-data", "checkpoints": "fss-data"}
    (tensorboard,) = [run.manifest(d) for d in run.of_type("kubernetes:apps/v1:Deployment") if "tensorboard" in d.name]
    assert list(claims_mounted(tensorboard["spec"]["template"]).values()) == ["fss-shared"]
    (jobset_resource,) = run.of_type(f"kubernetes:{JOBSET_API}:JobSet")
    for claim in [r for r in run.of_type("kubernetes:core/v1:PersistentVolumeClaim") if r.read]:
        assert run.depends_on(jobset_resource, claim), "a run waits for the reads of its claims"


def test_a_claim_not_given_is_created_of_the_storage_class(render: Any) -> None:
    run = render("existing", values=existing(namespaceExists=True, claims={"data": "fss-data"}))
    created = [c for c in run.custom_resources if c.type == "kubernetes:core/v1:PersistentVolumeClaim"]
    assert sorted(run.manifest(c)["metadata"]["name"] for c in created) == ["checkpoints", "shared"]
    assert reads(run, "kubernetes:core/v1:PersistentVolumeClaim") == ["nemo/fss-data"]


@pytest.mark.parametrize(
    ("changes", "key", "words"),
    [
        ({"claims": {"data": "fss-data"}}, "claims.data", "set namespaceExists"),
        (
            {"namespaceExists": True, "claims": {"data": "shared"}},
            "claims.data",
            "the shared claim the program creates",
        ),
        ({"namespaceExists": True, "claims": {"data": "FSS_data"}}, "claims.data", "DNS subdomain"),
        (
            {"namespaceExists": True, "claims": {"data": "fss-data"}, "storageClass": None},
            "storageClass",
            "shared, checkpoints",
        ),
    ],
    ids=["claims-in-a-new-namespace", "name-of-a-created-claim", "bad-name", "no-class-for-the-rest"],
)
def test_bad_claim_settings_are_refused(changes: dict[str, Any], key: str, words: str) -> None:
    values = existing(**changes)
    cluster = values["nemo-gke:existingCluster"]
    for name in [k for k, v in changes.items() if v is None]:
        del cluster[name]
    error = rejected(values, "existing")
    assert words in issue_for(error, f"existingCluster.{key}")
    assert len(error.issues) == 1, [str(i) for i in error.issues]


def test_existing_cloud_storage_claims_get_the_fuse_sidecar(render: Any) -> None:
    """Claims of GKE's Cloud Storage FUSE driver mount only in pods its webhook gave the sidecar,
    which it does for the `gke-gcsfuse/volumes` annotation (facts.gke.GCSFUSE_POD_ANNOTATIONS); the
    GPT-2 files stay in the data claim. A run-only stack on top reads this from the platform."""
    claims = {**FSS, "cloudStorageFuse": True}
    values = existing(namespaceExists=True, claims=claims)
    values["nemo-gke:training"] = with_model("existing", "llama3.1-8b")["nemo-gke:training"]
    run = render("existing", values=values)
    annotations = pod(jobset(run)[1])["metadata"]["annotations"]
    assert {k: annotations.get(k) for k in GCSFUSE_POD_ANNOTATIONS} == dict(GCSFUSE_POD_ANNOTATIONS)
    assert '"/data/tokenizers/gpt2/gpt2-vocab.json"' in workload_files(run, "llama3-8b")[workload.RUN_SETTINGS]
    upstream = {"organization/nemo-gke/existing": run.exports}
    on_top = run_stack("run-on-existing", values=run_only_on("existing"), upstream=upstream)
    assert "gke-gcsfuse/volumes" in pod(jobset(on_top)[1])["metadata"]["annotations"]
    plain = render("existing", values=existing(namespaceExists=True, claims=FSS))
    assert "gke-gcsfuse/volumes" not in pod(jobset(plain)[1])["metadata"]["annotations"]


def test_cloud_storage_fuse_needs_claims_of_the_cluster() -> None:
    error = rejected(existing(claims={"cloudStorageFuse": True}), "existing")
    assert "names no claim" in issue_for(error, "existingCluster.claims.cloudStorageFuse")
