"""A4X (GB200 NVL72) as GKE's A4X guide builds it, rendered from the shipped stack: a pool that is
one NVLink domain, NVIDIA's DRA driver for IMEX channels, a ComputeDomain per run whose channels
Kueue admits, and runs kept inside one domain.
https://cloud.google.com/ai-hypercomputer/docs/create/gke-ai-hypercompute-custom-a4x"""

from __future__ import annotations

import json
from typing import Any

import pytest

from facts.kubernetes import IMEX_CHANNEL_DEVICE_CLASS, IMEX_CHANNEL_RESOURCE
from facts.models import MODELS
from harness.runner import StackRun, stack_with
from tests.conftest import NODE_POOL, Render, issue_for, rejected

DOMAIN = "kubernetes:resource.nvidia.com/v1beta1:ComputeDomain"
JOBSET = "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"
RELEASE = "kubernetes:helm.sh/v3:Release"
POOL = {
    "name": "a4x",
    "machineType": "a4x-highgpu-4g",
    "nodeCount": 18,
    "capacity": {"type": "reservation", "reservation": "r"},
}


def release(run: StackRun, chart: str) -> dict[str, Any]:
    (found,) = [r.inputs for r in run.of_type(RELEASE) if r.inputs["name"] == chart]
    return found


def kueue_configuration(run: StackRun) -> dict[str, Any]:
    values = release(run, "kueue")["values"]
    config: dict[str, Any] = json.loads(values["managerConfig"]["controllerManagerConfigYaml"])
    return config


def pod_of(run: StackRun) -> dict[str, Any]:
    (jobset,) = map(run.manifest, run.of_type(JOBSET))
    pod: dict[str, Any] = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    return pod


def test_the_pool_is_one_nvlink_domain_on_arm_hosts(render: Render) -> None:
    """A HIGH_THROUGHPUT 1x72 workload policy as the pool's compact placement (the guide's
    `--placement-policy`), hyperdisk boot disks (A4X boots from Hyperdisk only), and no local SSD
    count: GKE puts A4X's bundled disks under ephemeral storage itself (cluster-toolkit sends none)."""
    run = render("a4x")
    (policy,) = run.of_type("gcp:compute/resourcePolicy:ResourcePolicy")
    assert policy.inputs["workloadPolicy"] == {"type": "HIGH_THROUGHPUT", "acceleratorTopology": "1x72"}
    (pool,) = [p for p in run.of_type(NODE_POOL) if p.inputs["name"] == "a4x"]
    assert pool.inputs["placementPolicy"]["type"] == "COMPACT"
    node = pool.inputs["nodeConfig"]
    assert node["bootDisk"]["diskType"] == "hyperdisk-balanced"
    assert "ephemeralStorageLocalSsdConfig" not in node
    assert node["guestAccelerators"][0]["type"] == "nvidia-gb200"


def test_each_pod_claims_an_imex_channel_of_its_run_s_compute_domain(render: Render) -> None:
    """The guide's workload: a ComputeDomain per workload, whose controller creates the
    ResourceClaimTemplate its spec names; each pod claims from it and its container takes the
    claim, with the GPUs still from GKE's device plugin."""
    run = render("a4x")
    (domain,) = map(run.manifest, run.of_type(DOMAIN))
    pod = pod_of(run)
    template = domain["spec"]["channel"]["resourceClaimTemplate"]["name"]
    assert domain["spec"]["numNodes"] == 16
    assert domain["metadata"]["namespace"] == pod_namespace(run)
    (claim,) = pod["spec"]["resourceClaims"]
    assert claim["resourceClaimTemplateName"] == template
    (trainer,) = pod["spec"]["containers"]
    assert trainer["resources"]["claims"] == [{"name": claim["name"]}]
    assert trainer["resources"]["limits"]["nvidia.com/gpu"] == "4"
    assert {"key": "kubernetes.io/arch", "operator": "Equal", "value": "arm64", "effect": "NoSchedule"} in pod["spec"][
        "tolerations"
    ]


def pod_namespace(run: StackRun) -> str:
    (jobset,) = map(run.manifest, run.of_type(JOBSET))
    namespace: str = jobset["metadata"]["namespace"]
    return namespace


def test_a_run_on_more_nodes_gets_a_new_compute_domain(render: Render) -> None:
    """A ComputeDomain's spec is immutable (CRD rule `self == oldSelf`,
    computedomains.resource.nvidia.com@v0.4.1): its name carries its spec's digest, so a run on
    other nodes replaces it instead of sending a patch the API server refuses."""
    names = []
    for nodes in (16, 8):
        values = stack_with(
            "a4x",
            training={"runs": [{"name": "llama3-70b", "model": "llama3-70b", "nodes": nodes}]},
        )
        run = render("a4x", values=values)
        (domain,) = map(run.manifest, run.of_type(DOMAIN))
        names.append(domain["metadata"]["name"])
    assert names[0] != names[1] and all(n.startswith("llama3-70b-nvlink-") for n in names)


def test_kueue_admits_the_channel_claims_on_the_a4x_quota(render: Render) -> None:
    """Kueue 0.19 (KueueDRAIntegration on by default) leaves a workload that claims devices
    inadmissible unless their DeviceClass maps to a resource ("DeviceClass ... is not mapped in DRA
    configuration", kubernetes-sigs/kueue pkg/dra/claims.go@v0.19.2) with quota in the ClusterQueue:
    one channel per node of the pool."""
    run = render("a4x")
    mappings = kueue_configuration(run)["resources"]["deviceClassMappings"]
    assert mappings == [{"name": IMEX_CHANNEL_RESOURCE, "deviceClassNames": [IMEX_CHANNEL_DEVICE_CLASS]}]
    (queue,) = map(run.manifest, run.of_type("kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue"))
    (group,) = queue["spec"]["resourceGroups"]
    assert IMEX_CHANNEL_RESOURCE in group["coveredResources"]
    (flavor,) = group["flavors"]
    quota = {r["name"]: r["nominalQuota"] for r in flavor["resources"]}
    assert quota[IMEX_CHANNEL_RESOURCE] == "18"


def test_stacks_without_nvlink_across_nodes_keep_their_kueue_and_queues(render: Render) -> None:
    run = render("a4")
    assert "resources" not in kueue_configuration(run)
    (queue,) = map(run.manifest, run.of_type("kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue"))
    assert IMEX_CHANNEL_RESOURCE not in queue["spec"]["resourceGroups"][0]["coveredResources"]
    assert not run.of_type(DOMAIN)
    assert not [r for r in run.of_type(RELEASE) if r.inputs["name"] == "dra-driver-nvidia-gpu"]


def test_the_dra_driver_serves_compute_domains_only_on_the_a4x_nodes(render: Render) -> None:
    """The guide's values: GKE's driver root, GPUs left to GKE's device plugin (the chart refuses
    both), the kubelet plugin on GB200 Arm nodes tolerating their taints, and a quota admitting its
    critical pods outside kube-system: at least 2 × nodes + 1."""
    run = render("a4x")
    values = release(run, "dra-driver-nvidia-gpu")["values"]
    assert values["nvidiaDriverRoot"] == "/home/kubernetes/bin/nvidia"
    assert values["resources"]["gpus"]["enabled"] is False
    plugin = values["kubeletPlugin"]
    (term,) = plugin["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert {e["key"]: e["values"] for e in term["matchExpressions"]} == {
        "cloud.google.com/gke-accelerator": ["nvidia-gb200"],
        "kubernetes.io/arch": ["arm64"],
    }
    assert {t["key"] for t in plugin["tolerations"]} == {"nvidia.com/gpu", "kubernetes.io/arch"}
    (quota,) = map(run.manifest, run.of_type("kubernetes:core/v1:ResourceQuota"))
    assert quota["spec"]["hard"]["pods"] == str(2 * 18 + 1)


def test_the_run_is_kept_inside_one_nvlink_domain(render: Render) -> None:
    """cluster-toolkit examples/gke-a4x/nccl-jobset-example.yaml@1047080 requires the sub-block, the
    A4X NVLink domain (18 instances; GCE's terminology: a sub-block is an NVLink domain)."""
    annotations = pod_of(render("a4x"))["metadata"]["annotations"]
    assert annotations["kueue.x-k8s.io/podset-required-topology"] == "cloud.google.com/gce-topology-subblock"


@pytest.mark.parametrize(
    ("change", "key", "message"),
    [
        ({"capacity": {"type": "spot"}}, "capacity.type", "offered only through reservations"),
        ({"nodeCount": 19}, "nodeCount", "one 1x72 NVLink domain of at most 18 nodes"),
        ({"placement": "none"}, "placement", "always placed in one NVLink domain"),
    ],
)
def test_a4x_pools_gke_cannot_build_are_refused_by_key(change: dict[str, Any], key: str, message: str) -> None:
    error = rejected(stack_with("a4x", gpuPools=[{**POOL, **change}]), stack="a4x")
    assert message in issue_for(error, f"gpuPools[0].{key}")


@pytest.mark.parametrize(
    ("model", "nodes"),
    [
        (name, 2 if name == "llama3-8b" else 16)
        for name, spec in MODELS.items()
        # Published on A4X (DeepSeek-V3's is A3 Ultra's layout, 32 nodes, without its Hopper settings).
        if "gpu-recipes" in spec.sources.get("recipe on a4x-highgpu-4g", "")
    ],
)
def test_each_a4x_recipe_runs_at_its_published_size(render: Render, model: str, nodes: int) -> None:
    """gpu-recipes' A4X recipes: Llama 3 8B on 8 GPUs (2 nodes), Llama 3 70B on 64 (16 nodes); the
    run starts from the machine's recipe and passes every layout rule at that size."""
    values = stack_with("a4x", training={"runs": [{"name": "r", "model": model, "nodes": nodes}]})
    run = render("a4x", values=values)
    recipe = MODELS[model].recipe_on("a4x-highgpu-4g")
    (planned,) = run.exports["summary"]["runs"]
    assert (planned["gpus"], planned["model"]) == (4 * nodes, model)
    configs = [run.manifest(r) for r in run.of_type("kubernetes:core/v1:ConfigMap") if r.name.endswith("-workload")]
    assert any(f'"micro_batch_size": {recipe.micro_batch_size}' in text for c in configs for text in c["data"].values())
