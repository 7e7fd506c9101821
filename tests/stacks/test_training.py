"""Training layer: the JobSet per A3 variant, its NeMo configuration, data preparation, and
runs as their own stacks."""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import pytest

import payload
from config.loader import ConfigError
from facts import versions
from facts.kubernetes import RUN_LABEL, Taint
from facts.machines import machine_type, training_pod_requests
from facts.models import MODELS, Framework
from harness.mocks import RecordedResource
from harness.runner import StackFailed, StackRun, load_stack_values, run_stack, stack_with
from planners import nemo, workload
from planners.runtimes import nemo1, nemo2
from tests.conftest import (
    MODES,
    flavors_by_pool,
    issue_for,
    mebibytes,
    millicores,
    parse_source,
    rejected,
    with_model,
)

JOBSET = "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"
CONFIG_MAP = "kubernetes:core/v1:ConfigMap"
LOCAL_QUEUE = "kubernetes:kueue.x-k8s.io/v1beta2:LocalQueue"


def runs(run: StackRun) -> list[RecordedResource]:
    """The training runs' JobSets (fabric checks are JobSets too: tests/stacks/test_fabric.py)."""
    return [r for r in run.of_type(JOBSET) if RUN_LABEL in run.manifest(r)["metadata"]["labels"]]


def jobset(run: StackRun, name: str | None = None) -> tuple[RecordedResource, dict[str, Any]]:
    resources = [r for r in runs(run) if name is None or run.manifest(r)["metadata"]["labels"][RUN_LABEL] == name]
    (resource,) = resources
    return resource, run.manifest(resource)


def pod(manifest: dict[str, Any]) -> dict[str, Any]:
    (replicated,) = manifest["spec"]["replicatedJobs"]
    return replicated["template"]["spec"]["template"]


def container(manifest: dict[str, Any]) -> dict[str, Any]:
    (main,) = pod(manifest)["spec"]["containers"]
    return main


def env(manifest: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("value", "<from field>") for e in container(manifest)["env"]}


def network_names(run: StackRun) -> set[str]:
    return {run.manifest(n)["metadata"]["name"] for n in run.of_type("kubernetes:networking.gke.io/v1:Network")}


def workload_files(run: StackRun, run_name: str) -> dict[str, str]:
    config_map = next(run.manifest(c) for c in run.of_type(CONFIG_MAP) if c.name.endswith(f"{run_name}-workload"))
    return config_map["data"]


# --------------------------------------------------------------------------- the JobSet


@MODES
def test_a_run_is_one_suspended_indexed_jobset_named_after_the_run(render: Any, preview: bool) -> None:
    """Named after the run, so one run is one JobSet whatever an interrupted `up` left behind: the
    API server applies a second of the name over the first (components.training)."""
    run = render("dev", preview=preview)
    resource, manifest = jobset(run)
    assert manifest["metadata"]["name"] == "gpt5b-demo"
    assert manifest["metadata"]["namespace"] == "nemo"
    spec = manifest["spec"]
    # Kueue's webhook suspends it as it is created (components.training.gpu_jobset).
    assert "suspend" not in spec and manifest["metadata"]["labels"]["kueue.x-k8s.io/queue-name"]
    # It checkpoints and resumes: the resiliency recipe's restart budget (planners.runs.max_restarts).
    assert spec["failurePolicy"] == {"maxRestarts": 20}
    # A finished run stays, in the cluster and in the stack's state (see tests/stacks/test_updates.py).
    assert "ttlSecondsAfterFinished" not in spec
    assert spec["network"]["enableDNSHostnames"] is True
    (replicated,) = spec["replicatedJobs"]
    job = replicated["template"]["spec"]
    assert (replicated["replicas"], job["parallelism"], job["completions"]) == (1, 2, 2)
    assert (job["completionMode"], job["backoffLimit"]) == ("Indexed", 0)
    assert pod(manifest)["spec"]["restartPolicy"] == "Never"
    # Frozen once submitted, replaced when its revision rises, deleted before its successor is
    # created (tests/stacks/test_updates.py).
    assert resource.ignore_changes == ["metadata", "spec"] and not resource.replace_on_changes
    assert resource.replacement_trigger == 1 and resource.delete_before_replace


def test_the_run_is_queued_on_an_existing_local_queue_and_waits_for_it_and_its_volumes(render: Any) -> None:
    run = render("dev")
    resource, manifest = jobset(run)
    queues = {run.manifest(q)["metadata"]["name"]: q for q in run.of_type(LOCAL_QUEUE)}
    queue_name = manifest["metadata"]["labels"]["kueue.x-k8s.io/queue-name"]
    assert queue_name in queues
    assert manifest["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == "nemo-medium"
    assert run.depends_on(resource, queues[queue_name])
    claims = {run.manifest(c)["metadata"]["name"]: c for c in run.of_type("kubernetes:core/v1:PersistentVolumeClaim")}
    mounted = {
        v["persistentVolumeClaim"]["claimName"]
        for v in pod(manifest)["spec"]["volumes"]
        if "persistentVolumeClaim" in v
    }
    assert mounted == set(claims) == {"shared", "data", "checkpoints"}
    for claim in claims.values():
        assert run.depends_on(resource, claim)
    account = pod(manifest)["spec"]["serviceAccountName"]
    assert account == "nemo-training"
    assert account in {run.manifest(a)["metadata"]["name"] for a in run.of_type("kubernetes:core/v1:ServiceAccount")}


def test_torchrun_starts_every_node_with_the_first_pod_as_master(render: Any) -> None:
    _, manifest = jobset(render("dev"))
    main = container(manifest)
    assert main["command"] == ["bash", "/workload/launch.sh"]
    variables = env(manifest)
    assert variables["NNODES"] == "2" and variables["GPUS_PER_NODE"] == "8"
    # Kubernetes expands $(JOBSET_NAME), set from the pod's label, to the JobSet's name.
    assert variables["MASTER_ADDR"] == "$(JOBSET_NAME)-workers-0-0.$(JOBSET_NAME)"
    assert variables["JOB_COMPLETION_INDEX"] == "<from field>"
    launcher = (payload.DIR / workload.LAUNCHER).read_text()
    for flag in (
        '--nproc-per-node="${GPUS_PER_NODE}"',
        '--nnodes="${NNODES}"',
        '--node-rank="${node}"',
        '--master-addr="${MASTER_ADDR}"',
    ):
        assert flag in launcher


@pytest.mark.parametrize(
    ("stack", "run_name", "pool", "machine", "nodes"),
    [
        ("dev", "gpt5b-demo", "a3-highgpu", "a3-highgpu-8g", 2),
        ("a3mega", "gpt3-175b", "a3-mega", "a3-megagpu-8g", 32),
        ("a3ultra", "llama31-405b", "a3-ultra", "a3-ultragpu-8g", 72),
        ("a3high-small", "llama3-8b", "h100x4", "a3-highgpu-4g", 2),
    ],
)
def test_gpu_cpu_and_memory_requests_fit_the_pools_quota(
    render: Any, stack: str, run_name: str, pool: str, machine: str, nodes: int
) -> None:
    run = render(stack)
    _, manifest = jobset(run, run_name)
    requests = container(manifest)["resources"]["requests"]
    gpus = machine_type(machine).gpus
    cpu, memory = training_pod_requests(machine_type(machine))
    assert container(manifest)["resources"]["limits"]["nvidia.com/gpu"] == requests["nvidia.com/gpu"] == str(gpus)
    assert (millicores(requests["cpu"]), mebibytes(requests["memory"])) == (cpu, memory)
    queue = run.manifest(run.one("kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue"))["spec"]
    flavor_name = flavors_by_pool(run)[pool]["metadata"]["name"]
    flavor = next(f for f in queue["resourceGroups"][0]["flavors"] if f["name"] == flavor_name)
    quota = {r["name"]: r["nominalQuota"] for r in flavor["resources"]}
    assert nodes * gpus <= int(quota["nvidia.com/gpu"])
    assert nodes * cpu <= millicores(quota["cpu"])
    assert nodes * memory <= mebibytes(quota["memory"])


def queued_workloads(run: StackRun) -> list[tuple[RecordedResource, dict[str, Any], list[dict[str, Any]]]]:
    """Every run and data-preparation job (what Kueue queues): resource, manifest, pod templates."""
    found = []
    for resource in run.of_type(JOBSET, "kubernetes:batch/v1:Job"):
        manifest = run.manifest(resource)
        if "kueue.x-k8s.io/queue-name" not in manifest["metadata"].get("labels", {}):
            continue
        templates = (
            [rj["template"]["spec"]["template"] for rj in manifest["spec"]["replicatedJobs"]]
            if manifest["kind"] == "JobSet"
            else [manifest["spec"]["template"]]
        )
        found.append((resource, manifest, templates))
    return found


def _bucket_volumes(run: StackRun, pod_spec: dict[str, Any]) -> dict[str, dict[str, str]]:
    """The Cloud Storage FUSE volumes a pod mounts, by volume name: their volume attributes,
    inline or on the PersistentVolume its claim is bound to."""
    volumes = {}
    persistent = {
        (pv["spec"]["claimRef"]["name"]): pv["spec"]["csi"]
        for pv in map(run.manifest, run.of_type("kubernetes:core/v1:PersistentVolume"))
        if pv["spec"].get("csi", {}).get("driver") == "gcsfuse.csi.storage.gke.io"
    }
    for volume in pod_spec["volumes"]:
        csi = volume.get("csi") or persistent.get(volume.get("persistentVolumeClaim", {}).get("claimName"))
        if csi and csi["driver"] == "gcsfuse.csi.storage.gke.io":
            volumes[volume["name"]] = csi["volumeAttributes"]
    return volumes


@pytest.mark.parametrize("stack", ["a3mega", "dev", "a3high-small"])
def test_host_network_pods_reach_their_buckets_as_their_own_identity(render: Any, stack: str) -> None:
    """A pod on the host network has no GKE metadata server between it and the node's: its
    Cloud Storage FUSE mounts authenticate as the node's service account, which has no storage
    role here, unless the volume says `hostNetworkPodKSA: "true"`
    (GoogleCloudPlatform/gcs-fuse-csi-driver docs/authentication.md; pkg/csi_driver/node.go
    shouldPopulateIdentityProvider reads it for host-network pods only). Every bucket a pod mounts
    carries it, whichever pool it runs on."""
    run = render(stack)
    for resource, manifest, templates in queued_workloads(run):
        for template in templates:
            buckets = _bucket_volumes(run, template["spec"])
            assert {"data", "checkpoints"} <= set(buckets) or RUN_LABEL not in manifest["metadata"]["labels"]
            for name, attributes in buckets.items():
                assert attributes.get("hostNetworkPodKSA") == "true", (resource.urn, name)
    assert stack != "a3mega" or any(
        run.manifest(r)["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"].get("hostNetwork")
        for r in runs(run)
    ), "a3mega runs on the host network"


def test_no_pod_downloads_at_start(render: Any) -> None:
    """Nothing a pod needs may come from the internet when it starts (an outage would abort a
    run): no pip install, no URL in the launcher or the environment, Hugging Face offline, and
    the GPT-2 files from a read-only bucket volume (as gpu-recipes' A3 Mega GPT-3 recipe mounts
    gs://cloud-samples-data/third-party/tokenizers/gpt2)."""
    launcher = (payload.DIR / workload.LAUNCHER).read_text()
    assert "pip install" not in launcher and "http" not in launcher and "curl" not in launcher
    for stack in ("dev", "a3high-small"):
        workloads = queued_workloads(render(stack))
        assert {manifest["kind"] for _, manifest, _ in workloads} >= {"JobSet"}
        for resource, manifest, templates in workloads:
            text = json.dumps(manifest["spec"])
            assert "http://" not in text and "https://" not in text, resource.urn
            for template in templates:
                (main,) = template["spec"]["containers"]
                variables = {e["name"]: e.get("value") for e in main["env"]}
                assert variables["HF_HUB_OFFLINE"] == variables["TRANSFORMERS_OFFLINE"] == "1"
                tokenizer = {v["name"]: v for v in template["spec"]["volumes"]}["gpt2-tokenizer"]
                assert tokenizer["csi"]["readOnly"] is True
                assert tokenizer["csi"]["volumeAttributes"]["bucketName"] == "cloud-samples-data"


def test_every_pod_has_shared_memory_local_ssd_and_the_three_volumes(render: Any) -> None:
    for stack in ("dev", "a3mega", "a3ultra", "a3high-small"):
        run = render(stack)
        for resource in runs(run):
            manifest = run.manifest(resource)
            volumes = {v["name"]: v for v in pod(manifest)["spec"]["volumes"]}
            assert volumes["shm"]["emptyDir"]["medium"] == "Memory"
            assert "emptyDir" in volumes["local-ssd"]
            mounts = {m["mountPath"]: m for m in container(manifest)["volumeMounts"]}
            assert {"/dev/shm", "/ssd", "/nfs", "/data", "/checkpoints", "/workload"} <= set(mounts)
            assert mounts["/data"]["readOnly"] is True
            tolerations = pod(manifest)["spec"]["tolerations"]
            assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in tolerations
            assert pod(manifest)["metadata"]["annotations"]["gke-gcsfuse/volumes"] == "true"


# The taint the node lifecycle controller puts on a cordoned node (k8s.io/api core/v1
# well_known_taints.go, TaintNodeUnschedulable), as on every node NVSentinel quarantines
# (facts.nvsentinel): a run's pods that tolerated it would be bound again on the quarantined node
# (tests/integration/test_lane_recovery.py showed it with a blanket toleration).
CORDONED = Taint("node.kubernetes.io/unschedulable")


@pytest.mark.parametrize("stack", ["dev", "a3mega", "a3ultra", "a4", "a4x", "teams", "existing", "run-llama8b"])
def test_no_training_pod_tolerates_a_cordoned_node(render: Any, stack: str) -> None:
    run = render(stack)
    manifests = [run.manifest(resource) for resource in runs(run)]
    assert manifests
    for manifest in manifests:
        assert not CORDONED.tolerated_by(pod(manifest)["spec"]["tolerations"]), manifest["metadata"]["name"]


# --------------------------------------------------------------------------- per variant


def test_tcpx_pods_attach_four_gpu_nics_and_run_the_tcpx_daemon(render: Any) -> None:
    run = render("dev")
    _, manifest = jobset(run)
    annotations = pod(manifest)["metadata"]["annotations"]
    interfaces = json.loads(annotations["networking.gke.io/interfaces"])
    assert interfaces[0] == {"interfaceName": "eth0", "network": "default"}
    assert [i["interfaceName"] for i in interfaces[1:]] == ["eth1", "eth2", "eth3", "eth4"]
    assert {i["network"] for i in interfaces[1:]} == network_names(run) == {"vpc1", "vpc2", "vpc3", "vpc4"}
    assert "/dev/nvidia7" in annotations["devices.gke.io/container.tcpx-daemon"]
    (sidecar,) = pod(manifest)["spec"]["initContainers"]
    assert sidecar["name"] == "tcpx-daemon" and sidecar["restartPolicy"] == "Always"
    assert sidecar["image"].endswith("tcpgpudmarxd-dev:v2.0.12")
    assert "--uds_path" in sidecar["command"] and "/run/tcpx" in sidecar["command"]
    variables = env(manifest)
    assert variables["NCCL_GPUDIRECTTCPX_SOCKET_IFNAME"] == "eth1,eth2,eth3,eth4"
    assert variables["NCCL_GPUDIRECTTCPX_TX_BINDINGS"].startswith("eth1:8-21")
    assert variables["NCCL_GPUDIRECTTCPX_UNIX_CLIENT_PREFIX"] == "/run/tcpx"
    mounts = {m["mountPath"] for m in container(manifest)["volumeMounts"]}
    assert {"/run/tcpx", "/usr/local/nvidia"} <= mounts
    assert not pod(manifest)["spec"].get("hostNetwork")


def test_tcpxo_pods_follow_the_a3_mega_recipe_whole(render: Any) -> None:
    """One documented pattern, not a mix: gpu-recipes src/helm-charts/a3mega/jobset/templates/
    workload-jobset.yaml@2e1fd5e with `hostNetwork: true` (the GPT-3 175B recipe's values) runs
    the workload and the RxDM privileged (the RxDM also with NET_ADMIN and NET_BIND_SERVICE),
    renders neither the NRI device annotation nor the interfaces annotation, installs the recipe's
    plugin into an emptyDir at /usr/local/nccl-plugin with an init container, and points
    NCCL_INIT_SCRIPT and NCCL_LIB_DIR there. (CEA's nccl-test-latest.yaml is the other, unprivileged
    pattern: NRI annotation, capabilities only, no host network.)"""
    run = render("a3mega")
    _, manifest = jobset(run)
    spec = pod(manifest)["spec"]
    assert spec["hostNetwork"] is True and spec["dnsPolicy"] == "ClusterFirstWithHostNet"
    annotations = pod(manifest)["metadata"]["annotations"]
    assert not [key for key in annotations if key.startswith(("networking.gke.io/", "devices.gke.io/"))]
    assert not run.of_type("kubernetes:networking.gke.io/v1:Network")
    installer, sidecar = spec["initContainers"]
    assert installer["name"] == "nccl-plugin-installer" and "restartPolicy" not in installer
    assert installer["image"].endswith("nccl-plugin-gpudirecttcpx-dev:v1.0.7")
    # As the pair's recipe chart installs it (nemo-training-v2: no build type).
    assert "/scripts/container_entry.sh install --install-nccl\n" in installer["command"][-1]
    assert "cp -r /var/lib/tcpxo/* /usr/local/nccl-plugin/" in installer["command"][-1]
    assert (sidecar["name"], sidecar["restartPolicy"]) == ("tcpxo-daemon", "Always")
    assert sidecar["image"].endswith("tcpgpudmarxd-dev:v1.0.13_1")
    assert sidecar["startupProbe"]["exec"]["command"] == ["cat", "/run/health-check"]
    assert sidecar["securityContext"] == {
        "privileged": True,
        "capabilities": {"add": ["NET_ADMIN", "NET_BIND_SERVICE"]},
    }
    assert "--num_hops=2 --num_nics=8 --uid= --alsologtostderr" in sidecar["command"][-1]
    assert container(manifest)["securityContext"] == {"privileged": True}
    assert container(manifest)["image"] == run.pulled_as("nvcr.io/nvidia/nemo:24.07")
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["aperture-devices"]["hostPath"]["path"] == "/dev/aperture_devices"
    assert volumes["nccl-plugin"] == {"name": "nccl-plugin", "emptyDir": {}}
    mounts = {m["mountPath"]: m["name"] for m in container(manifest)["volumeMounts"]}
    assert mounts["/usr/local/nccl-plugin"] == "nccl-plugin" and "/usr/local/nvidia" not in mounts
    variables = env(manifest)
    assert variables["NCCL_INIT_SCRIPT"] == "/usr/local/nccl-plugin/lib64/nccl-env-profile.sh"
    assert variables["NCCL_LIB_DIR"] == "/usr/local/nccl-plugin/lib64"
    assert variables["NCCL_PLUGIN_PATH"] == "/usr/local/nccl-plugin/lib64:/usr/local/nvidia/lib64"
    assert installer["command"][-1].startswith("set -e\nchmod 755 /scripts/container_entry.sh\n")
    assert "chmod 755 /fts/entrypoint_rxdm_container.sh\n" in sidecar["command"][-1]
    assert variables["NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY"] == "/dev/aperture_devices"


def test_a3_mega_runs_carry_the_recipe_s_tuned_settings(render: Any) -> None:
    """gpu-recipes training/a3mega/gpt3_175b/nemo-gke/nemo2507/recipe/values.yaml@2e1fd5e:
    NVTE_FWD/BWD_LAYERNORM_SM_MARGIN=8 ("needed to prevent send-receive stalling"),
    NCCL_ALGO=Ring,Tree and NCCL_MIN_NCHANNELS=4 (its ncclSettings); and the recipe's NeMo config
    src/frameworks/a3mega/nemo-configs/gpt3-175b-256gpus-fp8.yaml: hidden and attention dropout 0.1."""
    run = render("a3mega")
    _, manifest = jobset(run)
    variables = env(manifest)
    assert variables["NVTE_FWD_LAYERNORM_SM_MARGIN"] == variables["NVTE_BWD_LAYERNORM_SM_MARGIN"] == "8"
    assert (variables["NCCL_ALGO"], variables["NCCL_MIN_NCHANNELS"]) == ("Ring,Tree", "4")
    model = json.loads(workload_files(run, "gpt3-175b")[nemo1.CONFIG])["model"]
    assert (model["hidden_dropout"], model["attention_dropout"]) == (0.1, 0.1)


def unsupervised_a3ultra(render: Any) -> StackRun:
    """The a3ultra example with its run off the supervisor (so off the host network)."""
    training = copy.deepcopy(load_stack_values("a3ultra")["nemo-gke:training"])
    del training["runs"][0]["resiliency"]
    return render("a3ultra", values=stack_with("a3ultra", training=training))


def test_rdma_pods_attach_the_gvnic_and_eight_rdma_nics_with_gib(render: Any) -> None:
    run = unsupervised_a3ultra(render)
    _, manifest = jobset(run)
    interfaces = json.loads(pod(manifest)["metadata"]["annotations"]["networking.gke.io/interfaces"])
    assert [i["network"] for i in interfaces] == ["default", "gvnic-1", *(f"rdma-{i}" for i in range(8))]
    assert [i["interfaceName"] for i in interfaces] == [f"eth{i}" for i in range(10)]
    assert {i["network"] for i in interfaces[1:]} == network_names(run)
    # gIB with its NCCL, installed by the pod at the version the machine's recipes pin for the
    # image (the node's gIB has no NCCL since CEA 2da1c92), as gpu-recipes' charts do.
    (installer,) = pod(manifest)["spec"]["initContainers"]
    # NeMo 25.07 on A3 Ultra: v1.1.0 (no A3 Ultra recipe of that image; A4's pin for it).
    assert container(manifest)["image"].endswith("/nvidia/nemo:25.07")  # through the example's mirror
    assert installer["image"] == versions.GIB_POD_V110.ref
    # The example's own run is supervised: the resiliency image, whose recipes pin v1.0.5
    # (gpu-recipes a3ultra/llama31_405b/nemo-gke-resiliency/nemo2412/recipe/values.yaml@2e1fd5e).
    _, supervised = jobset(render("a3ultra"))
    assert container(supervised)["image"] == versions.RESILIENCY.ref
    assert pod(supervised)["spec"]["initContainers"][0]["image"] == versions.GIB_POD_V105.ref
    assert "/scripts/container_entry.sh install --install-nccl" in installer["command"][-1]
    assert installer["volumeMounts"] == [{"name": "gib", "mountPath": "/target/usr/local/gib"}]
    assert {"name": "gib", "emptyDir": {}} in pod(manifest)["spec"]["volumes"]
    variables = env(manifest)
    assert variables["NCCL_NET"] == "gIB"
    assert variables["NCCL_INIT_SCRIPT"] == "/usr/local/gib/scripts/set_nccl_env.sh"
    assert variables["LD_LIBRARY_PATH"].startswith("/usr/local/gib/lib64")
    assert pod(manifest)["metadata"]["annotations"]["kueue.x-k8s.io/podset-required-topology"] == (
        "cloud.google.com/gce-topology-block"
    )


def test_small_shapes_run_without_gpudirect(render: Any) -> None:
    _, manifest = jobset(render("a3high-small"), "llama3-8b")
    annotations = pod(manifest)["metadata"]["annotations"]
    assert not [a for a in annotations if a.startswith(("networking.gke.io", "devices.gke.io"))]
    assert "initContainers" not in pod(manifest)["spec"]
    assert env(manifest)["NCCL_SOCKET_IFNAME"] == "eth0"
    assert "kueue.x-k8s.io/podset-preferred-topology" not in annotations  # Spot pool: no topology labels


def test_topology_defaults_to_preferred_block_on_pools_with_topology(render: Any) -> None:
    _, manifest = jobset(render("dev"))
    annotations = pod(manifest)["metadata"]["annotations"]
    assert annotations["kueue.x-k8s.io/podset-preferred-topology"] == "cloud.google.com/gce-topology-block"


# --------------------------------------------------------------------------- NeMo configuration


def test_nemo1_runs_get_a_complete_hydra_config(render: Any) -> None:
    files = workload_files(render("dev"), "gpt5b-demo")
    config = json.loads(files[nemo1.CONFIG])
    arch = MODELS["gpt-5b"].architecture
    model = config["model"]
    assert (model["num_layers"], model["hidden_size"], model["num_attention_heads"]) == (
        arch.layers,
        arch.hidden,
        arch.heads,
    )
    assert (model["micro_batch_size"], model["global_batch_size"], model["encoder_seq_length"]) == (4, 2048, 2048)
    assert config["trainer"]["num_nodes"] == 2 and config["trainer"]["devices"] == 8
    assert config["trainer"]["max_steps"] == 50
    assert model["data"]["data_impl"] == "mock"
    assert config["exp_manager"]["explicit_log_dir"] == "/nfs/nemo-experiments/gpt5b-demo"
    assert (
        config["exp_manager"]["dllogger_logger_kwargs"]["json_file"] == "/nfs/nemo-experiments/gpt5b-demo/dllogger.json"
    )
    assert config["exp_manager"]["checkpoint_callback_params"]["dirpath"] == "/checkpoints/gpt5b-demo"
    assert config["exp_manager"]["resume_if_exists"] is True
    assert model["tokenizer"]["vocab_file"] == f"{workload.GPT2_TOKENIZER_DIR}/gpt2-vocab.json"
    assert set(files) == {workload.LAUNCHER, workload.NCCL_INIT, workload.DLLOGGER, nemo1.CONFIG}


def test_the_gpt3_175b_recipe_layout(render: Any) -> None:
    config = json.loads(workload_files(render("a3mega"), "gpt3-175b")[nemo1.CONFIG])
    model = config["model"]
    parallel = (
        model["tensor_model_parallel_size"],
        model["pipeline_model_parallel_size"],
        model["virtual_pipeline_model_parallel_size"],
    )
    assert parallel == (4, 8, 2)
    assert model["fp8"] is True and model["sequence_parallel"] is True
    assert config["trainer"]["num_nodes"] == 32


def script_keys(source: str) -> set[str]:
    """Every key the NeMo 2 script reads from its settings."""
    keys = set(re.findall(r'SETTINGS\["(\w+)"\]', source))
    keys |= {f"tokenizer.{k}" for k in re.findall(r'tokenizer\["(\w+)"\]', source)}
    keys |= {f"profile.{k}" for k in re.findall(r'\["profile"\]\["(\w+)"\]', source)}
    keys |= {f"resiliency.{k}" for k in re.findall(r'RESILIENCY\["(\w+)"\]', source)}
    return keys


def settings_keys(settings: dict[str, Any]) -> set[str]:
    keys = set(settings)
    keys |= {f"tokenizer.{k}" for k in settings["tokenizer"]}
    keys |= {f"profile.{k}" for k in ("startStep", "endStep")}
    keys |= {f"resiliency.{k}" for k in settings["resiliency"]}
    return keys


def test_nemo2_runs_get_settings_the_recipe_script_reads_and_nothing_else(render: Any) -> None:
    files = workload_files(render("a3ultra"), "llama31-405b")
    script = files[nemo2.SCRIPT]
    parse_source(script)
    settings = json.loads(files[workload.RUN_SETTINGS])
    assert script_keys(script) == settings_keys(settings)
    assert settings["factory"] == "llama31_405b"
    layout = (
        settings["tensorParallel"],
        settings["pipelineParallel"],
        settings["virtualPipeline"],
        settings["contextParallel"],
    )
    assert layout == (8, 9, 14, 1)
    assert (settings["nodes"], settings["gpusPerNode"], settings["globalBatchSize"], settings["fp8"]) == (
        72,
        8,
        2016,
        True,
    )
    assert "run.cli.main(" in script and "else llm.pretrain" in script
    _, manifest = jobset(render("a3ultra"))
    assert container(manifest)["args"] == ["--yes"]
    assert env(manifest)["NEMO_ENTRYPOINT"] == "/workload/nemo2_pretrain.py"


def test_megatron_bridge_runs_on_gib_machines_get_the_plugin_s_sm_margins_not_nemo_24_12_s(render: Any) -> None:
    """Megatron-Bridge's PerfEnvPlugin sets the layer-norm SM margins to 16 (20 with HybridEP:
    scripts/performance/perf_plugins.py@21b02e0); the RDMA flavour's 8 is the NeMo 24.12 A3 Ultra
    recipe's tuning, and won over it. A3 Mega's 8 prevents send-receive stalls on TCPXO and stays."""
    run = render("a4")
    for name in ("llama3-70b", "qwen3-moe"):
        variables = env(jobset(run, name)[1])
        assert variables["NVTE_FWD_LAYERNORM_SM_MARGIN"] == variables["NVTE_BWD_LAYERNORM_SM_MARGIN"] == "16", name
    tcpxo = env(jobset(render("a3mega"))[1])
    assert tcpxo["NVTE_FWD_LAYERNORM_SM_MARGIN"] == "8"


def test_a3_ultra_405b_runs_carry_the_recipe_and_nemo_performance_settings(render: Any) -> None:
    """The A3 Ultra recipe's environment (gpu-recipes training/a3ultra/llama31_405b/nemo-gke/
    nemo2412/recipe/values.yaml@2e1fd5e: NVTE_*_LAYERNORM_SM_MARGIN=8, NVTE_UB_SOCKET_IFNAME=eth1,
    NCCL_WORK_FIFO_DEPTH=4194304), and what NeMo's scripts/performance/llm/pretrain_llama31_405b.py
    applies (@8cfedd7): its executor's PERF_ENV_VARS, PerfEnvPlugin's CUDA_DEVICE_MAX_CONNECTIONS=1
    on Hopper with TP > 1, NCCL_P2P_NET_CHUNKSIZE=2097152 with PP > 1 and TORCH_NCCL_HIGH_PRIORITY=1,
    and the FP8 TP-overlap userbuffers configuration of its "h100" entry on the H200."""
    run = render("a3ultra")
    _, manifest = jobset(run)
    variables = env(manifest)
    expected = {
        "NVTE_FWD_LAYERNORM_SM_MARGIN": "8",
        "NVTE_BWD_LAYERNORM_SM_MARGIN": "8",
        "NVTE_UB_SOCKET_IFNAME": "eth1",
        "NCCL_WORK_FIFO_DEPTH": "4194304",
        "CUDA_DEVICE_MAX_CONNECTIONS": "1",
        "NCCL_P2P_NET_CHUNKSIZE": "2097152",
        "TORCH_NCCL_HIGH_PRIORITY": "1",
        "TORCH_NCCL_AVOID_RECORD_STREAMS": "1",
        "NCCL_NVLS_ENABLE": "0",
        "NVTE_FLASH_ATTN": "1",
        "NVTE_FUSED_ATTN": "1",
        "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
    }
    assert {key: variables.get(key) for key in expected} == expected
    settings = json.loads(workload_files(run, "llama31-405b")[workload.RUN_SETTINGS])
    assert settings["tpOverlapConfig"] == "userbuffers_fp8_h100_h16384_tp8_cp2_mbs1_seqlen8192"
    script = workload_files(run, "llama31-405b")[nemo2.SCRIPT]
    for layer in ("qkv_fprop", "proj_dgrad", "fc1_fprop", "fc2_dgrad"):
        assert f'"{layer}"' in script
    assert "MegatronCommOverlapCallback" in script and "tp_comm_overlap_cfg" in script


def test_models_without_a_performance_script_get_no_performance_environment(render: Any) -> None:
    run = render("a3high-small", values=with_model("a3high-small", "llama3.1-8b"))
    variables = env(jobset(run, "llama3-8b")[1])
    assert "CUDA_DEVICE_MAX_CONNECTIONS" not in variables and "TORCH_NCCL_HIGH_PRIORITY" not in variables
    settings = json.loads(workload_files(run, "llama3-8b")[workload.RUN_SETTINGS])
    assert settings["tpOverlapConfig"] is None


def test_a_model_whose_image_the_a3_mega_pair_never_saw_is_refused_or_warned() -> None:
    """An untested mix of NeMo image and TCPXO plugin/RxDM is refused by default (facts.machines:
    the A3 Mega pair was validated with NeMo 24.07 only); chosen explicitly, it runs, with a warning."""
    values = load_stack_values("a3mega")
    training = copy.deepcopy(values["nemo-gke:training"])
    training["runs"][0].update(model="llama3.1-70b")
    message = issue_for(rejected(stack_with("a3mega", training=training), "a3mega"), "training.runs[0].model")
    assert "nemo:25.07 was never validated" in message and "gpt3-175b" in message
    training["runs"][0]["image"] = "nvcr.io/nvidia/nemo:25.07"
    run = run_stack("a3mega", values=stack_with("a3mega", training=training))
    assert any("never validated" in w.message and "chosen explicitly" in w.message for w in run.warnings)


def test_run_overrides_reach_the_nemo_configuration(render: Any) -> None:
    values = load_stack_values("dev")
    training = copy.deepcopy(values["nemo-gke:training"])
    training["runs"][0].update(
        {
            "steps": 200,
            "globalBatchSize": 1024,
            "overrides": {"model.optim.lr": 0.0003},
            "profile": {"startStep": 10, "endStep": 12},
        }
    )
    values["nemo-gke:training"] = training
    run = render("dev", values=values)
    config = json.loads(workload_files(run, "gpt5b-demo")[nemo1.CONFIG])
    assert config["trainer"]["max_steps"] == 200 and config["model"]["global_batch_size"] == 1024
    assert config["model"]["optim"]["lr"] == 0.0003
    assert config["model"]["nsys_profile"]["enabled"] is True
    _, manifest = jobset(run)
    assert env(manifest)["NSYS_START_STEP"] == "10"


def test_gcs_data_is_copied_to_local_ssd_before_training(render: Any) -> None:
    run = render("run-llama8b")
    _, manifest = jobset(run)
    variables = env(manifest)
    assert variables["DATASET_SOURCE"] == "/data/datasets/wikipedia/wiki_text_document"
    assert variables["DATASET_TARGET"] == "/ssd/data/wiki_text_document"
    settings = json.loads(workload_files(run, "llama3-8b-gcs")[workload.RUN_SETTINGS])
    assert settings["dataset"]["blend"] == [["/ssd/data/wiki_text_document"], None]
    profiling = settings["profiling"]
    assert (profiling["profile_step_start"], profiling["profile_step_end"]) == (20, 22)


def test_every_model_pins_its_image_and_framework() -> None:
    for spec in MODELS.values():
        for recipe in (spec.recipe, *spec.machine_recipes.values()):
            assert recipe.image.tag and recipe.image.tag != "latest"
            if recipe.framework is Framework.NEMO2:
                assert recipe.factory
            elif recipe.framework is Framework.MEGATRON_BRIDGE:
                assert spec.hugging_face
            else:
                assert recipe.learning_rate and recipe.init_std


# --------------------------------------------------------------------------- data preparation


def test_data_preparation_tokenizes_into_the_data_bucket_as_its_own_identity(render: Any) -> None:
    run = render("a3high-small")
    job = run.manifest(run.one("kubernetes:batch/v1:Job", "training-wiki-gpt2-job"))
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "a3-queue"
    assert job["metadata"]["annotations"]["pulumi.com/skipAwait"] == "true"
    # Suspended by Kueue's webhook as it is created, for the queue it names (components.training.REPLACE_JOB).
    assert "suspend" not in job["spec"]
    spec = job["spec"]["template"]["spec"]
    assert spec["serviceAccountName"] == "nemo-data-prep"
    script = spec["containers"][0]["command"][-1]
    assert nemo.PREPROCESS_SCRIPT in script
    assert "--input=/data/raw/wikipedia/wiki.jsonl" in script
    assert "--output-prefix=/data/datasets/wikipedia/wiki" in script
    assert "--tokenizer-type=GPT2BPETokenizer" in script and "--workers=32" in script
    mounts = {m["mountPath"]: m for m in spec["containers"][0]["volumeMounts"]}
    assert mounts["/data"]["readOnly"] is False


# --------------------------------------------------------------------------- runs as stacks


@MODES
def test_a_training_only_stack_renders_against_a_mocked_stack_reference(render: Any, preview: bool) -> None:
    run = render("run-llama8b", preview=preview)
    reference = run.one("pulumi:pulumi:StackReference")
    assert reference.read and reference.name == "organization/nemo-gke/a3high-small"
    assert not run.gcp_resources, "a run stack creates no cloud resources"
    assert {r.type for r in run.kubernetes_objects} == {JOBSET, CONFIG_MAP}
    provider = run.one("pulumi:providers:kubernetes")
    for resource in run.kubernetes_objects:
        assert resource.provider_urn == provider.urn
    _, manifest = jobset(run)
    assert manifest["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "a3-queue"
    assert "pulumi:pulumi:readStackOutputs" in run.invokes


def test_the_environment_stack_keeps_the_walkthrough_run(render: Any) -> None:
    assert list(render("dev").exports["training"]["runs"]) == ["gpt5b-demo"]


def upstream_exports(render: Any) -> dict[str, Any]:
    return {"organization/nemo-gke/a3high-small": render("a3high-small").exports}


def test_an_upstream_stack_the_backend_does_not_hold_is_refused_by_key() -> None:
    error = rejected(load_stack_values("run-llama8b"), "run-llama8b", upstream={})
    message = issue_for(error, "upstreamStack")
    assert "is not a stack of this backend" in message and "pulumi stack ls" in message


@pytest.mark.parametrize(
    ("changes", "key", "expected"),
    [
        ({"nodes": 3}, "training.runs[0].nodes", "at most 2 nodes"),
        ({"pool": "h100x1", "nodes": 1, "contextParallel": 2}, "training.runs[0].nodes", "not a multiple"),
        ({"globalBatchSize": 6}, "training.runs[0].globalBatchSize", "micro batch × data-parallel"),
        ({"sequenceLength": 262144}, "training.runs[0].sequenceLength", "8192 positions"),
        ({"pool": "a3-mega"}, "training.runs[0].pool", "h100x4"),
    ],
)
def test_a_run_only_stack_checks_its_runs_against_the_environment_before_creating_anything(
    render: Any, changes: dict[str, Any], key: str, expected: str
) -> None:
    values = load_stack_values("run-llama8b")
    training = copy.deepcopy(values["nemo-gke:training"])
    training["runs"][0].update(changes)
    values["nemo-gke:training"] = training
    with pytest.raises(StackFailed) as failure:
        run_stack("run-llama8b", values=values, upstream=upstream_exports(render))
    assert isinstance(failure.value.error, ConfigError)
    assert expected in issue_for(failure.value.error, key)
    assert failure.value.resources == [], "nothing is registered, not even the StackReference"


@pytest.mark.parametrize(
    ("outputs", "expected"),
    [
        ({}, "has no output 'cluster'"),
        ({"cluster": {"project": "p"}}, "its output 'cluster' is not what this program expects"),
    ],
)
def test_a_run_only_stack_explains_an_upstream_stack_it_cannot_use(outputs: dict[str, Any], expected: str) -> None:
    with pytest.raises(StackFailed) as failure:
        run_stack("run-llama8b", upstream={"organization/nemo-gke/a3high-small": outputs})
    assert isinstance(failure.value.error, ConfigError)
    assert expected in issue_for(failure.value.error, "upstreamStack")
    assert failure.value.resources == []


# --------------------------------------------------------------------------- straggler reports


def _with_first_run(stack: str, **keys: Any) -> dict[str, Any]:
    training = copy.deepcopy(load_stack_values(stack)["nemo-gke:training"])
    training["runs"][0].update(keys)
    return stack_with(stack, training=training)


def test_straggler_reports_are_off_unless_a_run_asks(render: Any) -> None:
    """Megatron Core's StragglerDetector gathers every rank's timings to rank 0 at each report:
    only a run with `stragglers: true` pays for it, with the lowest-throughput ranks listed."""
    run_name = load_stack_values("a4")["nemo-gke:training"]["runs"][0]["name"]
    default = json.loads(workload_files(render("a4"), run_name)[workload.RUN_SETTINGS])
    assert default["straggler"] is None
    asked = render("a4", values=_with_first_run("a4", stragglers=True))
    settings = json.loads(workload_files(asked, run_name)[workload.RUN_SETTINGS])
    assert settings["straggler"] == {"log_straggler": True, "straggler_minmax_count": 8}


def test_straggler_reports_of_a_runtime_without_them_are_refused_by_key() -> None:
    """a3ultra's first run is Llama 3.1 405B on NeMo 2, whose launcher has no straggler detector."""
    error = rejected(_with_first_run("a3ultra", stragglers=True), stack="a3ultra")
    assert "NeMo 2" in issue_for(error, "training.runs[0].stragglers")
