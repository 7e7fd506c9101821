"""The training JobSet, the data-preparation Job and the NeMo configuration, built directly
(without Pulumi) for every machine type and every model of the catalogs."""

from __future__ import annotations

import dataclasses
import json
import re

import pytest

from components.training import DataPreparationArgs, TrainingRunArgs, Volumes, data_prep_job, run_jobset
from facts.gke import CapacityType
from facts.kubernetes import PROGRAM_ERROR_EXIT_CODE
from facts.machines import GPUDIRECT_STACKS, MACHINE_TYPES, GpuDirect, allocatable_memory_mib, allocatable_millicores
from facts.models import MODELS, Framework, model_spec
from planners import nemo, workload
from planners.gpudirect import RXDM_HEALTH_FILE, pod_networking, rxdm_sidecar
from planners.networks import plan_gpu_networks
from planners.pools import GpuPoolExport
from planners.queues import Flavor, plan_flavor
from planners.runs import DataPrepSpec, RunSpec, Tokenizer
from planners.runtimes import bridge, nemo1, nemo2
from tests.conftest import mebibytes, millicores

VOLUMES = Volumes("shared", "/nfs", "data", "/data", "checkpoints", "/checkpoints")
GPT2 = Tokenizer("megatron", "GPT2BPETokenizer")


def flavor(machine: str) -> Flavor:
    return plan_flavor(GpuPoolExport("p", machine, "us-central1-b", 2, CapacityType.ON_DEMAND, True, 2))


def run_spec(model: str = "gpt-5b") -> RunSpec:
    return RunSpec("r1", model, "p", 2, model_spec(model).recipe.settings(), GPT2, "nemo-high")


def jobset_for(machine: str, model: str = "gpt-5b") -> dict:  # type: ignore[type-arg]
    target, run = flavor(machine), run_spec(model)
    m = target.machine
    networking = pod_networking(
        m.gpudirect_stack,
        plan_gpu_networks("c", m if m.is_multi_nic else None, "10.8.0.0/16"),
        m.gpus,
        gib=m.pod_gib_for(run.image_ref),
    )
    paths = workload.run_paths(run, "/nfs/exp", "/checkpoints", "/data")
    args = TrainingRunArgs(
        plan=nemo.plan_run(run, m, networking, paths),
        flavor=target,
        namespace="nemo",
        local_queue="q",
        service_account="sa",
        volumes=VOLUMES,
    )
    return run_jobset(args, "r1-workload", {workload.LAUNCHER: "#!/bin/bash"})


def pod(jobset: dict) -> dict:  # type: ignore[type-arg]
    return jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]  # type: ignore[no-any-return]


@pytest.mark.parametrize("machine", list(MACHINE_TYPES))
def test_a_run_is_one_suspended_queued_pod_per_node_that_fits_its_node(machine: str) -> None:
    jobset = jobset_for(machine)
    m = MACHINE_TYPES[machine]
    # Suspended by Kueue's webhook as it is created, for the queue it names (gpu_jobset).
    assert "suspend" not in jobset["spec"]
    assert jobset["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "q"
    assert jobset["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == "nemo-high"
    job = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]
    assert (job["parallelism"], job["completions"], job["completionMode"]) == (2, 2, "Indexed")
    (container,) = pod(jobset)["spec"]["containers"]
    assert container["name"] == "nemo"
    requests = container["resources"]["requests"]
    assert requests["nvidia.com/gpu"] == container["resources"]["limits"]["nvidia.com/gpu"] == str(m.gpus)
    assert millicores(requests["cpu"]) < allocatable_millicores(m.vcpus)
    assert mebibytes(requests["memory"]) < allocatable_memory_mib(m.memory_gib)
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert (env["NNODES"], env["GPUS_PER_NODE"]) == ("2", str(m.gpus))
    assert env["MASTER_ADDR"] == "$(JOBSET_NAME)-workers-0-0.$(JOBSET_NAME)"
    tolerations = pod(jobset)["spec"]["tolerations"]
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in tolerations


def test_variables_that_name_the_jobset_refer_to_a_variable_defined_before_them() -> None:
    """Kubernetes expands `$(VAR)` in an environment value only when VAR is defined earlier in
    the same container's list; otherwise the text stays literal
    (https://kubernetes.io/docs/tasks/inject-data-application/define-interdependent-environment-variables/).
    JOBSET_NAME comes from the label the JobSet controller puts on every pod
    (sigs.k8s.io/jobset api/jobset/v1alpha2/jobset_types.go JobSetNameKey)."""
    (container,) = pod(jobset_for("a3-megagpu-8g"))["spec"]["containers"]
    names = [e["name"] for e in container["env"]]
    defined = container["env"][names.index("JOBSET_NAME")]
    assert defined["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.labels['jobset.sigs.k8s.io/jobset-name']"
    for i, variable in enumerate(container["env"]):
        for reference in re.findall(r"\$\((\w+)\)", variable.get("value", "")):
            assert reference in names[:i], f"{variable['name']} refers to {reference} before it is defined"


@pytest.mark.parametrize("machine", list(MACHINE_TYPES))
def test_each_machine_gets_its_gpudirect_wiring_and_only_that(machine: str) -> None:
    spec = pod(jobset_for(machine))
    record = MACHINE_TYPES[machine]
    annotations, flavour = spec["metadata"]["annotations"], record.gpudirect
    sidecars = [c["name"] for c in spec["spec"].get("initContainers", [])]
    interfaces = json.loads(annotations.get("networking.gke.io/interfaces", "[]"))
    expected = {
        GpuDirect.NONE: ([], 0, False),
        GpuDirect.TCPX: (["tcpx-daemon"], 5, False),
        GpuDirect.TCPXO: (["nccl-plugin-installer", "tcpxo-daemon"], 0, True),
        # The pod network, the second gVNIC and one interface per RDMA NIC; gIB installed by the pod.
        GpuDirect.RDMA: (["nccl-plugin-installer"], 2 + record.gpu_nics, False),
    }[flavour]
    assert (sidecars, len(interfaces), bool(spec["spec"].get("hostNetwork"))) == expected


def test_data_preparation_is_a_suspended_queued_job_writing_to_the_data_bucket() -> None:
    job = data_prep_job(
        DataPreparationArgs(
            job=DataPrepSpec("wiki", "raw/wiki.jsonl", "datasets/wiki/wiki", "text", GPT2, 16, "p"),
            flavor=flavor("a3-highgpu-8g"),
            namespace="nemo",
            local_queue="q",
            service_account="prep",
            volumes=VOLUMES,
        )
    )
    assert "suspend" not in job["spec"] and job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "q"
    container = job["spec"]["template"]["spec"]["containers"][0]
    assert "--input=/data/raw/wiki.jsonl" in container["command"][-1]
    assert {"name": "data", "mountPath": "/data", "readOnly": False} in container["volumeMounts"]


@pytest.mark.parametrize("model", list(MODELS))
def test_every_model_gets_the_nemo_configuration_of_its_framework(model: str) -> None:
    run = run_spec(model)
    files = nemo.workload_files(
        run, workload.run_paths(run, "/nfs/exp", "/checkpoints", "/data"), MACHINE_TYPES["a3-megagpu-8g"]
    )
    s = run.settings
    if model_spec(model).recipe.framework is Framework.NEMO1:
        config = json.loads(files[nemo1.CONFIG])
        layout = (config["model"]["tensor_model_parallel_size"], config["model"]["pipeline_model_parallel_size"])
        assert config["trainer"]["num_nodes"] == 2 and config["trainer"]["devices"] == 8
    elif model_spec(model).recipe.framework is Framework.NEMO2:
        settings = json.loads(files[workload.RUN_SETTINGS])
        layout = (settings["tensorParallel"], settings["pipelineParallel"])
        assert settings["factory"] == model_spec(model).recipe.factory and settings["nodes"] == 2
    else:
        settings = json.loads(files[workload.RUN_SETTINGS])
        layout = (settings["model"]["tensor_model_parallel_size"], settings["model"]["pipeline_model_parallel_size"])
        assert settings["huggingFace"]["config"] == model_spec(model).hugging_face_config()
        assert settings["worldSize"] == 16
        assert bridge.SCRIPT in files and nemo2.SCRIPT not in files
    assert layout == (s.tensor_parallel, s.pipeline_parallel)
    assert workload.LAUNCHER in files


def test_the_rxdm_gets_a_health_file_and_startup_probe_where_it_writes_one() -> None:
    """CEA gpudirect-tcpxo/best-practice.md: with HEALTH_CHECK_LOG_FILE set, the TCPXO RxDM
    (v1.0.11 and later) writes the file once its buffers are ready ("Buffer manager
    initialization completed"; google/nccl-plugin-gpudirect-tcpxo fastrak_gpumem_manager.cc), and
    a startup probe `cat`s it: the kubelet starts the training container only once a sidecar's
    startup probe succeeded (Kubernetes sidecar containers), so training waits for the receive
    path instead of a fixed sleep. The
    TCPX daemon writes no such file (none anywhere in CEA gpudirect-tcpx/): a probe there would
    fail every pod, so it gets none; the pinned TCPXO daemon (v1.0.13_1) does."""
    stack = MACHINE_TYPES["a3-megagpu-8g"].gpudirect_stack
    assert stack is not None and stack.rxdm_health_check
    for pinned in GPUDIRECT_STACKS:
        if pinned.rxdm_sidecar is not None and not pinned.rxdm_health_check:
            sidecar = rxdm_sidecar("daemon", pinned, ["rxdm"], {}, [])
            assert "startupProbe" not in sidecar and "HEALTH_CHECK_LOG_FILE" not in str(sidecar["env"])
    assert any(p.rxdm_sidecar is not None and not p.rxdm_health_check for p in GPUDIRECT_STACKS), "TCPX"
    sidecar = rxdm_sidecar("tcpxo-daemon", stack, ["rxdm"], {}, [])
    assert {"name": "HEALTH_CHECK_LOG_FILE", "value": RXDM_HEALTH_FILE} in sidecar["env"]
    probe = sidecar["startupProbe"]
    assert probe["exec"]["command"] == ["cat", RXDM_HEALTH_FILE]
    assert "_" not in RXDM_HEALTH_FILE, "the RxDM refuses a file name with '_'"
    assert probe["periodSeconds"] * probe["failureThreshold"] >= 30, "initialization takes about 30 s"


@pytest.mark.parametrize(
    ("machine", "fp8", "tensor_parallel", "expected"),
    [
        ("a3-ultragpu-8g", True, 8, "userbuffers_fp8_h100_h16384_tp8_cp2_mbs1_seqlen8192"),
        ("a3-megagpu-8g", False, 8, "userbuffers_bf16_h100_h16384_tp8_cp2_mbs1_seqlen8192"),
        ("a4-highgpu-8g", True, 4, "userbuffers_fp8_b200_h16384_tp4_cp2_mbs1_seqlen8192"),
        ("a4-highgpu-8g", True, 8, None),  # no configuration tuned for TP 8 on B200
    ],
)
def test_tp_overlap_follows_nemo_s_performance_script(
    machine: str, fp8: bool, tensor_parallel: int, expected: str | None
) -> None:
    """scripts/performance/llm/pretrain_llama31_405b.py picks its userbuffers configuration by
    GPU and precision; each is tuned for one TP size (the name says it)."""
    run = dataclasses.replace(
        run_spec("llama3.1-405b"),
        settings=dataclasses.replace(
            model_spec("llama3.1-405b").recipe.settings(), fp8=fp8, tensor_parallel=tensor_parallel
        ),
    )
    assert workload.tp_overlap(run, MACHINE_TYPES[machine]) == expected


@pytest.mark.parametrize(
    ("machine", "connections", "alloc_conf"), [("a3-ultragpu-8g", "1", True), ("a4-highgpu-8g", "32", False)]
)
def test_the_performance_environment_follows_nemo_s_per_gpu_rules(
    machine: str, connections: str, alloc_conf: bool
) -> None:
    """NeMo's PerfEnvPlugin.setup (nemo/lightning/run/plugins.py@8cfedd7): CUDA_DEVICE_MAX_CONNECTIONS
    1 before SM100 and 32 from it when TP or CP > 1; its executors (scripts/performance/executors.py)
    leave PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True off on B200 ("causes an unexpected error")."""
    env = nemo.perf_env(run_spec("llama3.1-405b"), MACHINE_TYPES[machine])
    assert env["CUDA_DEVICE_MAX_CONNECTIONS"] == connections
    assert ("PYTORCH_CUDA_ALLOC_CONF" in env) is alloc_conf
    assert env["NCCL_P2P_NET_CHUNKSIZE"] == "2097152"  # pipeline parallel 9


@pytest.mark.parametrize(
    ("machine", "tuner"), [("a3-ultragpu-8g", "tuner_config_a3u.txtpb"), ("a4-highgpu-8g", "tuner_config_a4.txtpb")]
)
def test_rdma_runs_keep_the_recipes_nccl_settings_over_gibs_init_script(machine: str, tuner: str) -> None:
    """gpu-recipes' A3 Ultra and A4 charts export NCCL_SOCKET_IFNAME=eth0,eth1 and the machine's
    tuner configuration after sourcing set_nccl_env.sh; every NCCL variable the platform sets
    (the pipeline chunk size included) is named to survive the script."""
    run = dataclasses.replace(run_spec("llama3.1-405b"), machine_type=machine)
    m = MACHINE_TYPES[machine]
    networking = pod_networking(
        m.gpudirect_stack, plan_gpu_networks("c", m, "192.168.0.0/16"), m.gpus, False, m.pod_gib_for(run.image_ref)
    )
    env = nemo.platform_env(run, m, networking, workload.run_paths(run, "/nfs/exp", "/checkpoints", "/data"))
    assert env["NCCL_SOCKET_IFNAME"] == "eth0,eth1"
    assert env["NCCL_TUNER_CONFIG_PATH"] == f"/usr/local/gib/configs/{tuner}"
    kept = env["NCCL_KEEP_AFTER_INIT"].split()
    assert {"NCCL_SOCKET_IFNAME", "NCCL_TUNER_CONFIG_PATH", "NCCL_P2P_NET_CHUNKSIZE"} <= set(kept)
    assert all(env[name] for name in kept) and "NCCL_INIT_SCRIPT" not in kept
    assert env["GPUS_PER_NUMA_NODE"] == "4"


def test_ranks_are_bound_to_numa_nodes_only_where_the_machines_recipes_do() -> None:
    bound = {m.name for m in MACHINE_TYPES.values() if m.gpus_per_numa_node}
    assert bound == {"a3-ultragpu-8g", "a4-highgpu-8g", "a4x-highgpu-4g"}
    for name in bound:
        assert "launcher.sh" in MACHINE_TYPES[name].sources["gpus_per_numa_node"]


def test_machine_nccl_settings_cite_their_recipe() -> None:
    for machine in MACHINE_TYPES.values():
        assert not machine.nccl_env or "gpu-recipes" in machine.sources["nccl_env"], machine.name


def test_tcpx_runs_take_ceas_gke_134_nccl_configuration() -> None:
    """CEA 0e5609b ("Finalize NCCL config for GKE 1.34+", gpudirect-tcpx/nccl-config.yaml) removed
    FORCE_ACK, TX_COMPLETION_NANOSLEEP and the 8-channel caps and runs Ring and Tree."""
    env = MACHINE_TYPES["a3-highgpu-8g"].gpudirect_stack.env  # type: ignore[union-attr]
    gone = {
        "NCCL_GPUDIRECTTCPX_FORCE_ACK",
        "NCCL_GPUDIRECTTCPX_TX_COMPLETION_NANOSLEEP",
        "NCCL_MIN_NCHANNELS",
        "NCCL_MAX_NCHANNELS",
    }
    assert not gone & set(env)
    assert env["NCCL_ALGO"] == "Ring,Tree" and env["NCCL_PROTO"] == "Simple"


def test_a_runs_own_nccl_settings_also_win_over_the_init_script() -> None:
    """An NCCL variable of the run's env (one the platform does not set) would otherwise be
    overwritten by set_nccl_env.sh without a word."""
    m = MACHINE_TYPES["a3-ultragpu-8g"]
    run = dataclasses.replace(run_spec("llama3.1-405b"), machine_type=m.name, env={"NCCL_IB_QPS_PER_CONNECTION": "4"})
    networking = pod_networking(
        m.gpudirect_stack, plan_gpu_networks("c", m, "192.168.0.0/16"), m.gpus, False, m.pod_gib_for(run.image_ref)
    )
    env = nemo.platform_env(run, m, networking, workload.run_paths(run, "/nfs/exp", "/checkpoints", "/data"))
    assert "NCCL_IB_QPS_PER_CONNECTION" in env["NCCL_KEEP_AFTER_INIT"].split()


def test_a_program_error_fails_the_run_at_once_and_anything_else_restarts_it() -> None:
    """A Megatron-Bridge run's launcher checks its configuration before torchrun and exits with
    PROGRAM_ERROR_EXIT_CODE when the library refuses it (payload/launch.sh): the Job's pod failure
    policy fails the Job on that code of the training container (Kubernetes batch/v1
    PodFailurePolicyRule, FailJob; reason PodFailurePolicy), and the JobSet's rule fails the JobSet
    on that reason (JobSet v1alpha2 FailurePolicyRule, FailJobSet). Any other failure matches no rule,
    so the JobSet restarts (RestartJobSet, the rules' default) within maxRestarts. A NeMo 2 run has
    no such check, so no such rule."""
    bridge_run = jobset_for("a3-ultragpu-8g", "llama3-8b")
    rules = bridge_run["spec"]["failurePolicy"]["rules"]
    assert rules == [{"name": "ProgramError", "action": "FailJobSet", "onJobFailureReasons": ["PodFailurePolicy"]}]
    job = bridge_run["spec"]["replicatedJobs"][0]["template"]["spec"]
    training = pod(bridge_run)["spec"]["containers"][-1]["name"]
    assert job["podFailurePolicy"] == {
        "rules": [
            {
                "action": "FailJob",
                "onExitCodes": {"containerName": training, "operator": "In", "values": [PROGRAM_ERROR_EXIT_CODE]},
            }
        ]
    }
    assert pod(bridge_run)["spec"]["restartPolicy"] == "Never"  # a pod failure policy requires it
    env = {e["name"]: e.get("value") for e in pod(bridge_run)["spec"]["containers"][-1]["env"]}
    assert env["NEMO_PREFLIGHT"] == bridge.PREFLIGHT_FLAG
    nemo2 = jobset_for("a3-megagpu-8g", "llama3.1-8b")
    assert "rules" not in nemo2["spec"]["failurePolicy"]
    assert "podFailurePolicy" not in nemo2["spec"]["replicatedJobs"][0]["template"]["spec"]
