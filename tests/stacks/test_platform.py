"""Platform layer: GPUDirect objects and plugins, storage, Kueue and JobSet, TensorBoard, and
the dependency graph that makes a first `pulumi up` and a `pulumi destroy` work in one go."""

from __future__ import annotations

import json
from typing import Any

import pytest

from facts import versions
from facts.machines import allocatable_memory_mib, allocatable_millicores, machine_type
from harness.mocks import RecordedResource
from harness.runner import StackRun, stack_with, unmarked
from stacks import installed
from tests.conftest import MODES, flavors_by_pool, gpu_pools, mebibytes, millicores
from tools import crds

KUEUE = "kubernetes:kueue.x-k8s.io/v1beta2"
PARAMS = "kubernetes:networking.gke.io/v1:GKENetworkParamSet"
NETWORK = "kubernetes:networking.gke.io/v1:Network"
RELEASE = "kubernetes:helm.sh/v3:Release"


def release(run: StackRun, chart: str) -> RecordedResource:
    return next(r for r in run.of_type(RELEASE) if r.inputs["name"] == chart)


def kueue_objects(run: StackRun) -> list[RecordedResource]:
    return [r for r in run.custom_resources if r.type.startswith(KUEUE)]


def manifest(run: StackRun, typ: str, name: str | None = None) -> dict[str, Any]:
    found = [run.manifest(r) for r in run.of_type(typ)]
    return next(m for m in found if name is None or m["metadata"]["name"] == name)


# --------------------------------------------------------------------------- GPUDirect objects


@pytest.mark.parametrize(
    ("stack", "net_devices", "rdma"),
    # A3 Mega pods run on the host network, as the recipes do: they attach no GKE Network.
    [("dev", 4, 0), ("a3mega", 0, 0), ("a3ultra", 1, 8), ("a3ultra-flex", 1, 8)],
)
def test_one_network_object_per_gpu_nic_a_pod_attaches(render: Any, stack: str, net_devices: int, rdma: int) -> None:
    run = render(stack)
    modes = [run.manifest(p)["spec"]["deviceMode"] for p in run.of_type(PARAMS)]
    assert (modes.count("NetDevice"), modes.count("RDMA")) == (net_devices, rdma)
    networks = [run.manifest(n) for n in run.of_type(NETWORK)]
    assert len(networks) == net_devices + rdma
    for network in networks:
        assert network["spec"]["type"] == "Device"
        assert network["spec"]["parametersRef"] == {
            "group": "networking.gke.io",
            "kind": "GKENetworkParamSet",
            "name": network["metadata"]["name"],
        }


def test_small_shapes_get_no_network_objects_or_installers(render: Any) -> None:
    pools = [{"name": "h100x2", "machineType": "a3-highgpu-2g", "nodeCount": 1, "capacity": {"type": "spot"}}]
    run = render("dev", values=stack_with("dev", gpuPools=pools, training={}))
    assert not run.of_type(PARAMS) and not run.of_type(NETWORK)
    assert not run.of_type("kubernetes:apps/v1:DaemonSet")


@pytest.mark.parametrize("stack", ["dev", "a3mega", "a3ultra"])
def test_network_objects_name_the_cluster_layers_vpcs_and_subnets(render: Any, stack: str) -> None:
    run = render(stack)
    vpcs = {n.inputs["name"] for n in run.of_type("gcp:compute/network:Network")}
    subnets = {s.inputs["name"] for s in run.of_type("gcp:compute/subnetwork:Subnetwork")}
    for params in run.of_type(PARAMS):
        spec = run.manifest(params)["spec"]
        assert spec["vpc"] in vpcs and spec["vpcSubnet"] in subnets, spec


@pytest.mark.parametrize(
    ("stack", "plugin", "daemonsets"),
    [
        ("dev", versions.TCPX_PLUGIN, {"nccl-tcpx-installer", "device-injector"}),
        # The TCPXO sidecar is privileged on the host network: no NRI device injection.
        ("a3mega", versions.TCPXO_PLUGIN, {"nccl-tcpxo-installer"}),
        # With the resiliency supervisor's host daemon beside it.
        ("a3ultra", versions.GIB_PLUGIN, {"nccl-rdma-installer", "supervisor-host-daemon"}),
    ],
)
def test_the_nccl_plugin_installer_of_each_flavour_is_pinned(
    render: Any, stack: str, plugin: Any, daemonsets: set[str]
) -> None:
    run = render(stack)
    found = {run.manifest(d)["metadata"]["name"]: run.manifest(d) for d in run.of_type("kubernetes:apps/v1:DaemonSet")}
    assert set(found) == daemonsets
    installer = next(d for name, d in found.items() if name.startswith("nccl-"))
    images = [c["image"] for c in installer["spec"]["template"]["spec"]["initContainers"]]
    assert plugin.ref in images
    for daemonset in found.values():
        for container in [
            *daemonset["spec"]["template"]["spec"].get("initContainers", []),
            *daemonset["spec"]["template"]["spec"]["containers"],
        ]:
            assert ":latest" not in container["image"] and "master" not in container["image"]
            assert ":" in container["image"] or "@sha256:" in container["image"]
    if "device-injector" in found:
        injector = found["device-injector"]["spec"]["template"]["spec"]["containers"][0]
        assert injector["image"] == versions.NRI_DEVICE_INJECTOR.ref


def test_the_nri_device_injector_can_be_left_to_gke(render: Any) -> None:
    run = render("dev", values=stack_with("dev", gpudirect={"nriDeviceInjector": False}))
    names = {run.manifest(d)["metadata"]["name"] for d in run.of_type("kubernetes:apps/v1:DaemonSet")}
    assert names == {"nccl-tcpx-installer"}


# --------------------------------------------------------------------------- storage


def test_filestore_is_an_instance_on_the_primary_vpc_behind_a_static_volume(render: Any) -> None:
    run = render("dev")
    instance = run.one("gcp:filestore/instance:Instance").inputs
    assert (instance["tier"], instance["fileShares"]["capacityGb"]) == ("BASIC_HDD", 1024)
    assert instance["location"] == "us-central1-c"
    assert instance["networks"][0]["network"] == "nemo-dev"
    volume = manifest(run, "kubernetes:core/v1:PersistentVolume", "nemo-shared")
    assert volume["spec"]["csi"]["driver"] == "filestore.csi.storage.gke.io"
    assert volume["spec"]["csi"]["volumeHandle"] == "modeInstance/us-central1-c/nemo-dev-shared/nemo"
    assert volume["spec"]["csi"]["volumeAttributes"] == {"ip": "10.0.0.2", "volume": "nemo"}
    assert volume["spec"]["persistentVolumeReclaimPolicy"] == "Retain"
    claim = manifest(run, "kubernetes:core/v1:PersistentVolumeClaim", "shared")
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]
    assert claim["spec"]["volumeName"] == "nemo-shared" and claim["metadata"]["namespace"] == "nemo"


def test_regional_tiers_put_filestore_in_the_region_and_production_protects_it(render: Any) -> None:
    run = render(
        "dev",
        values=stack_with("dev", production=True, storage={"filestore": {"tier": "REGIONAL", "capacityGib": 1024}}),
    )
    instance = run.one("gcp:filestore/instance:Instance")
    assert instance.inputs["location"] == "us-central1"
    assert instance.protect


def test_buckets_are_private_uniform_and_checkpoints_hierarchical(render: Any) -> None:
    run = render("dev")
    buckets = {b.inputs["name"]: b.inputs for b in run.of_type("gcp:storage/bucket:Bucket")}
    assert set(buckets) == {"your-gcp-project-nemo-dev-data", "your-gcp-project-nemo-dev-ckpt"}
    for bucket in buckets.values():
        assert bucket["uniformBucketLevelAccess"] is True
        assert bucket["publicAccessPrevention"] == "enforced"
        assert bucket["location"] == "US-CENTRAL1"
    assert buckets["your-gcp-project-nemo-dev-ckpt"]["hierarchicalNamespace"] == {"enabled": True}
    assert "hierarchicalNamespace" not in buckets["your-gcp-project-nemo-dev-data"]


def test_buckets_mount_through_gcs_fuse_with_the_recipes_options(render: Any) -> None:
    run = render("dev")
    data = manifest(run, "kubernetes:core/v1:PersistentVolume", "nemo-data")["spec"]
    checkpoints = manifest(run, "kubernetes:core/v1:PersistentVolume", "nemo-checkpoints")["spec"]
    assert data["csi"]["driver"] == checkpoints["csi"]["driver"] == "gcsfuse.csi.storage.gke.io"
    assert data["csi"]["volumeHandle"] == "your-gcp-project-nemo-dev-data"
    assert "metadata-cache:ttl-secs:-1" in data["mountOptions"]
    assert "write:enable-streaming-writes:true" not in data["mountOptions"]
    assert "write:enable-streaming-writes:true" in checkpoints["mountOptions"]
    assert "file-cache:enable-parallel-downloads:true" in checkpoints["mountOptions"]


def test_each_identity_gets_exactly_the_bucket_roles_it_needs(render: Any) -> None:
    run = render("dev")
    principal = (
        "principal://iam.googleapis.com/projects/123456789012/locations/global/workloadIdentityPools/"
        "your-gcp-project.svc.id.goog/subject/ns/nemo/sa/{}"
    )
    grants = {
        (g.inputs["bucket"], g.inputs["role"], g.inputs["member"])
        for g in run.of_type("gcp:storage/bucketIAMMember:BucketIAMMember")
    }
    assert grants == {
        ("your-gcp-project-nemo-dev-data", "roles/storage.objectViewer", principal.format("nemo-training")),
        ("your-gcp-project-nemo-dev-data", "roles/storage.objectUser", principal.format("nemo-data-prep")),
        ("your-gcp-project-nemo-dev-ckpt", "roles/storage.objectUser", principal.format("nemo-training")),
    }
    assert not run.of_type("gcp:serviceaccount/iAMBinding:IAMBinding"), "no authoritative bindings"


def test_an_existing_data_bucket_is_mounted_not_created(render: Any) -> None:
    run = render("dev", values=stack_with("dev", storage={"dataBucket": {"name": "corpora", "create": False}}))
    assert {b.inputs["name"] for b in run.of_type("gcp:storage/bucket:Bucket")} == {"your-gcp-project-nemo-dev-ckpt"}
    assert manifest(run, "kubernetes:core/v1:PersistentVolume", "nemo-data")["spec"]["csi"]["volumeHandle"] == "corpora"


# --------------------------------------------------------------------------- Kueue and JobSet


@MODES
def test_kueue_and_jobset_install_from_pinned_charts(render: Any, preview: bool) -> None:
    run = render("dev", preview=preview)
    jobset, kueue = release(run, "jobset"), release(run, "kueue")
    assert (jobset.inputs["chart"], jobset.inputs["version"]) == (versions.JOBSET.ref, "0.12.0")
    assert (kueue.inputs["chart"], kueue.inputs["version"]) == (versions.KUEUE.ref, "0.19.2")
    assert (jobset.inputs["namespace"], kueue.inputs["namespace"]) == ("jobset-system", "kueue-system")
    assert kueue.inputs["skipAwait"] is False and jobset.inputs["skipAwait"] is False
    assert run.depends_on(kueue, jobset), "JobSet installs first"


def test_kueue_is_configured_for_jobset_topology_and_all_or_nothing_admission(render: Any) -> None:
    values = release(render("dev"), "kueue").inputs["values"]
    config = json.loads(values["managerConfig"]["controllerManagerConfigYaml"])
    assert config["apiVersion"] == "config.kueue.x-k8s.io/v1beta2"
    assert config["waitForPodsReady"]["timeout"] == "1800s"
    assert config["waitForPodsReady"]["blockAdmission"] is True
    assert "enable" not in config["waitForPodsReady"], "v1beta2 has no enable field"
    assert config["integrations"]["frameworks"] == ["batch/job", "jobset.x-k8s.io/jobset"]
    assert {"name": "TopologyAwareScheduling", "enabled": True} in values["controllerManager"]["featureGates"]
    assert values["controllerManager"]["nodeSelector"] == {"cloud.google.com/gke-nodepool": "system"}


def test_the_wait_for_pods_ready_timeout_comes_from_config(render: Any) -> None:
    run = render("dev", values=stack_with("dev", kueue={"waitForPodsReadyTimeoutSeconds": 3600}))
    config = json.loads(release(run, "kueue").inputs["values"]["managerConfig"]["controllerManagerConfigYaml"])
    assert config["waitForPodsReady"]["timeout"] == "3600s"


@MODES
def test_every_kueue_object_waits_for_the_webhook_readiness_gate(render: Any, preview: bool) -> None:
    run = render("dev", preview=preview)
    gate = run.one("kubernetes:batch/v1:Job", "platform-kueue-webhook-ready")
    assert run.depends_on(gate, release(run, "kueue"))
    objects = kueue_objects(run)
    assert {o.type.rsplit(":", 1)[-1] for o in objects} >= {
        "Topology", "ResourceFlavor", "WorkloadPriorityClass", "ClusterQueue", "LocalQueue",
    }  # fmt: skip
    for kueue_object in objects:
        assert run.depends_on(kueue_object, gate), kueue_object.name
    probe = run.manifest(gate)["spec"]["template"]["spec"]["containers"][0]
    assert "dryRun=All" in probe["command"][-1] and probe["image"] == run.pulled_as(versions.CURL.ref)
    role = manifest(run, "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole", "kueue-webhook-probe")
    assert role["rules"] == [{"apiGroups": ["kueue.x-k8s.io"], "resources": ["resourceflavors"], "verbs": ["create"]}]


@pytest.mark.parametrize(
    ("stack", "gpus"), [("dev", 16), ("a3mega", 256), ("a3ultra", 576), ("a3high-small", 4 * 2 + 1 + 8 * 4)]
)
def test_the_gpu_quota_equals_the_pools_gpus(render: Any, stack: str, gpus: int) -> None:
    run = render(stack)
    queue = manifest(run, f"{KUEUE}:ClusterQueue")["spec"]
    (group,) = queue["resourceGroups"]
    assert group["coveredResources"] == ["nvidia.com/gpu", "cpu", "memory"]
    quotas = [{r["name"]: r["nominalQuota"] for r in f["resources"]} for f in group["flavors"]]
    assert sum(int(q["nvidia.com/gpu"]) for q in quotas) == gpus
    flavors = flavors_by_pool(run)
    assert sorted(flavors) == sorted(p.inputs["name"] for p in gpu_pools(run))
    assert sorted(f["name"] for f in group["flavors"]) == sorted(f["metadata"]["name"] for f in flavors.values())


def test_cpu_and_memory_quotas_are_the_pools_allocatable_capacity(render: Any) -> None:
    queue = manifest(render("dev"), f"{KUEUE}:ClusterQueue")["spec"]
    quota = {r["name"]: r["nominalQuota"] for r in queue["resourceGroups"][0]["flavors"][0]["resources"]}
    machine = machine_type("a3-highgpu-8g")
    assert millicores(quota["cpu"]) == 2 * allocatable_millicores(machine.vcpus)
    assert mebibytes(quota["memory"]) == 2 * allocatable_memory_mib(machine.memory_gib)


def test_flavors_select_their_pool_tolerate_gpus_and_use_the_gke_topology(render: Any) -> None:
    run = render("dev")
    flavor = manifest(run, f"{KUEUE}:ResourceFlavor")["spec"]
    assert flavor["nodeLabels"] == {
        "cloud.google.com/gke-accelerator": "nvidia-h100-80gb",
        "cloud.google.com/gke-nodepool": "a3-highgpu",
    }
    assert flavor["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    topology = manifest(run, f"{KUEUE}:Topology")
    assert flavor["topologyName"] == topology["metadata"]["name"]
    levels = [level["nodeLabel"] for level in topology["spec"]["levels"]]
    assert levels == [
        "cloud.google.com/gce-topology-block",
        "cloud.google.com/gce-topology-subblock",
        "cloud.google.com/gce-topology-host",
        "kubernetes.io/hostname",
    ]


def test_pools_without_topology_labels_get_no_topology(render: Any) -> None:
    run = render("a3high-small")
    flavors = {m["metadata"]["name"]: m["spec"] for m in map(run.manifest, run.of_type(f"{KUEUE}:ResourceFlavor"))}
    assert not any("topologyName" in spec for spec in flavors.values())
    assert not run.of_type(f"{KUEUE}:Topology")


def test_queued_pools_are_admitted_through_a_provisioning_request(render: Any) -> None:
    run = render("a3high-small")
    queue = manifest(run, f"{KUEUE}:ClusterQueue")["spec"]
    queued = flavors_by_pool(run)["h100x8-queued"]
    assert queue["admissionChecksStrategy"] == {
        "admissionChecks": [{"name": "dws-prov", "onFlavors": [queued["metadata"]["name"]]}]
    }
    check = manifest(run, f"{KUEUE}:AdmissionCheck")["spec"]
    assert check["controllerName"] == "kueue.x-k8s.io/provisioning-request"
    config = manifest(run, f"{KUEUE}:ProvisioningRequestConfig")["spec"]
    assert config["provisioningClassName"] == "queued-provisioning.gke.io"
    assert config["podSetUpdates"]["nodeSelector"][0]["key"] == "autoscaling.gke.io/provisioning-request"
    flavor = queued["spec"]
    assert {"key": "cloud.google.com/gke-queued", "operator": "Exists", "effect": "NoSchedule"} in flavor["tolerations"]
    assert "admissionChecksStrategy" not in manifest(render("dev"), f"{KUEUE}:ClusterQueue")["spec"]


def test_the_local_queue_lives_in_the_training_namespace_with_priorities_and_preemption(render: Any) -> None:
    run = render("dev")
    local = manifest(run, f"{KUEUE}:LocalQueue")
    assert unmarked(local)["metadata"] == {"name": "a3-queue", "namespace": "nemo"}
    assert local["spec"] == {"clusterQueue": "a3-queue"}
    queue = manifest(run, f"{KUEUE}:ClusterQueue")["spec"]
    assert queue["preemption"]["withinClusterQueue"] == "LowerPriority"
    assert queue["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": "nemo"}}
    priorities = {
        m["metadata"]["name"]: m["value"] for m in map(run.manifest, run.of_type(f"{KUEUE}:WorkloadPriorityClass"))
    }
    assert priorities == {"nemo-low": 100, "nemo-medium": 500, "nemo-high": 1000, "nemo-fabric-check": 10000}


# --------------------------------------------------------------------------- ordering


@MODES
def test_filestore_and_the_controllers_never_wait_for_gpu_pools(render: Any, preview: bool) -> None:
    run = render("a3mega", preview=preview)
    pools = gpu_pools(run)
    assert pools
    waiting = [
        run.one("gcp:filestore/instance:Instance"),
        release(run, "kueue"),
        release(run, "jobset"),
        run.one("kubernetes:batch/v1:Job", "platform-kueue-webhook-ready"),
        *kueue_objects(run),
        *run.of_type("kubernetes:apps/v1:Deployment"),
    ]
    for resource in waiting:
        for pool in pools:
            assert not run.depends_on(resource, pool), f"{resource.name} waits for {pool.name}"


@MODES
def test_destroy_removes_workloads_claims_volumes_filestore_then_networks(render: Any, preview: bool) -> None:
    run = render("dev", preview=preview)
    tensorboard = run.one("kubernetes:apps/v1:Deployment")
    jobset = run.one("kubernetes:jobset.x-k8s.io/v1alpha2:JobSet")
    claim = run.one("kubernetes:core/v1:PersistentVolumeClaim", "platform-filestore-claim")
    volume = run.one("kubernetes:core/v1:PersistentVolume", "platform-filestore-volume")
    filestore = run.one("gcp:filestore/instance:Instance")
    network = run.one("gcp:compute/network:Network", "cluster-network-vpc")
    cluster = run.one("gcp:container/cluster:Cluster")
    chain = [
        (tensorboard, claim),
        (jobset, claim),
        (claim, volume),
        (volume, filestore),
        (filestore, network),
        (cluster, network),
    ]
    for dependent, dependency in chain:
        assert run.depends_on(dependent, dependency), f"{dependent.name} must go before {dependency.name}"
    # Kubernetes objects go before the cluster, through their provider.
    assert run.depends_on(claim, cluster)


def test_a_preview_before_the_cluster_exists_plans_every_platform_object(render: Any) -> None:
    update, preview = render("dev"), render("dev", preview=True)
    assert sorted(r.urn for r in preview.resources) == sorted(r.urn for r in update.resources)


# --------------------------------------------------------------------------- TensorBoard


def test_tensorboard_runs_on_the_system_pool_and_reads_the_training_logs(render: Any) -> None:
    run = render("dev")
    pod = manifest(run, "kubernetes:apps/v1:Deployment", "tensorboard")["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert pod["nodeSelector"] == {"cloud.google.com/gke-nodepool": "system"}
    assert container["image"] == run.pulled_as(versions.TENSORBOARD.ref) != versions.TENSORBOARD.ref
    assert "--logdir=/nfs/nemo-experiments" in container["command"]
    assert container["resources"]["requests"] == {"cpu": "500m", "memory": "2Gi"}
    assert pod["volumes"][0]["persistentVolumeClaim"] == {"claimName": "shared", "readOnly": True}
    service = manifest(run, "kubernetes:core/v1:Service", "tensorboard")["spec"]
    assert service["type"] == "ClusterIP" and service["ports"][0]["port"] == 6006
    assert run.exports["tensorboardPortForward"] == "kubectl -n nemo port-forward svc/tensorboard 6006:6006"


def test_a_vertex_ai_tensorboard_is_optional(render: Any) -> None:
    assert not render("dev").of_type("gcp:vertex/aiTensorboard:AiTensorboard")
    vertex = render("a3high-small").one("gcp:vertex/aiTensorboard:AiTensorboard")
    assert vertex.inputs["region"] == "us-east4"


# --------------------------------------------------------------------------- admission on pools that can be empty


PROVISIONING_CONTROLLER = "kueue.x-k8s.io/provisioning-request"


@pytest.mark.parametrize("stack", ["dev", "a3mega", "a3ultra", "a3ultra-flex", "a3high-small"])
def test_a_topology_flavor_has_nodes_or_a_provisioning_request_and_runs_on_empty_pools_ask_for_no_topology(
    render: Any, stack: str
) -> None:
    """Kueue's topology-aware scheduling counts only Ready nodes that carry the topology labels;
    it reaches nodes that do not exist yet only through a ProvisioningRequest admission check on the
    flavor (kubernetes-sigs/kueue site/content/en/docs/concepts/topology_aware_scheduling.md@v0.19.2,
    "ClusterAutoscaler support"; pkg/scheduler/flavorassigner/tas_flavorassigner.go:104-108). A
    JobSet asking for topology on a pool at zero nodes without one stays suspended forever: every
    topology flavor therefore has a pool that keeps nodes, or such a check covering it; every run
    is pinned to its pool, and asks for topology only where its flavor has some."""
    run = render(stack)
    pools = {p.inputs["name"]: p.inputs for p in gpu_pools(run)}
    queue = manifest(run, f"{KUEUE}:ClusterQueue")["spec"]
    checks = {m["metadata"]["name"]: m["spec"] for m in map(run.manifest, run.of_type(f"{KUEUE}:AdmissionCheck"))}
    provisioned = {
        flavor
        for check in queue.get("admissionChecksStrategy", {}).get("admissionChecks", [])
        if checks[check["name"]]["controllerName"] == PROVISIONING_CONTROLLER
        for flavor in check["onFlavors"]
    }
    topology: dict[str, bool] = {}
    for flavor in map(run.manifest, run.of_type(f"{KUEUE}:ResourceFlavor")):
        pool = pools[flavor["spec"]["nodeLabels"]["cloud.google.com/gke-nodepool"]]
        min_nodes = pool["autoscaling"]["totalMinNodeCount"] if "autoscaling" in pool else pool["nodeCount"]
        topology[pool["name"]] = "topologyName" in flavor["spec"]
        if topology[pool["name"]]:
            assert min_nodes > 0 or flavor["metadata"]["name"] in provisioned, flavor["metadata"]["name"]
    for jobset in map(run.manifest, run.of_type("kubernetes:jobset.x-k8s.io/v1alpha2:JobSet")):
        template = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
        pool = template["spec"]["nodeSelector"]["cloud.google.com/gke-nodepool"]
        asks = any(key.startswith("kueue.x-k8s.io/podset-") for key in template["metadata"]["annotations"])
        assert topology[pool] or not asks, jobset["metadata"]["name"]


def test_a_flex_start_run_is_admitted_by_quota_and_scales_its_pool_from_zero(render: Any) -> None:
    """The A3 Ultra flex-start example: compact, from zero, no ProvisioningRequest (flex-start
    without queued provisioning gets its VMs for pending pods). Its flavor carries no topology, so
    Kueue admits the run by quota, unsuspends it, and the pending pods bring up the nodes."""
    run = render("a3ultra-flex")
    (flavor,) = map(run.manifest, run.of_type(f"{KUEUE}:ResourceFlavor"))
    assert "topologyName" not in flavor["spec"] and not run.of_type(f"{KUEUE}:Topology")
    assert not run.of_type(f"{KUEUE}:AdmissionCheck")
    (jobset,) = map(run.manifest, run.of_type("kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"))
    annotations = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["metadata"]["annotations"]
    assert not [key for key in annotations if "topology" in key]


def test_bumping_the_jobset_pin_upgrades_its_crd(render: Any) -> None:
    """Helm installs a chart's `crds/` once and never upgrades them (helm-www
    chart_best_practices/custom_resource_definitions.md; pulumi-kubernetes' `helm.v3.Release`
    runs Helm's own install and upgrade actions, helm_release.go). The JobSet chart ships its CRD
    only there (kubernetes-sigs/jobset charts/jobset/crds/, no value renders it), so the release
    skips it and the program applies the CRD of the pinned module itself: a new pin is a new
    spec, which Pulumi applies to the CRD (await.go replaces CRDs with a PUT). Kueue's chart
    renders its CRDs as templates (charts/kueue/templates/crd/): they upgrade with the release."""
    run = render("dev")
    releases = {r.inputs["name"]: r for r in run.of_type("kubernetes:helm.sh/v3:Release")}
    assert releases["jobset"].inputs["skipCrds"] is True and releases["kueue"].inputs["skipCrds"] is False
    crd = run.one("kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition")
    assert run.depends_on(releases["jobset"], crd), "the controller starts with its CRD in place"
    assert versions.JOBSET_CRDS.version == f"v{releases['jobset'].inputs['version']}"
    # The applied CRD serves exactly the schema JobSets are validated against here...
    manifest = run.manifest(crd)
    (served,) = [v for v in manifest["spec"]["versions"] if v["served"]]
    assert served["schema"]["openAPIV3Schema"] == installed.schemas()[("jobset.x-k8s.io/v1alpha2", "JobSet")]
    # ...and is the chart's own `crds/` file of that tag, byte for byte.
    source = crds.module_dir(versions.JOBSET_CRDS)
    chart_file = source / "charts" / "jobset" / "crds" / "jobset.x-k8s.io_jobsets.yaml"
    assert chart_file.read_bytes() == (source / versions.JOBSET_CRDS.path / chart_file.name).read_bytes()
