"""Resilient runs as the A3 Ultra Llama 3.1 405B resiliency recipe runs them: the supervisor's
objects and CPU pool, the checkpoint bucket's mount, and the run settings, validated and
rendered (sources in facts/resiliency.py)."""

from __future__ import annotations

import copy
import json
from types import SimpleNamespace
from typing import Any

import pytest

from components.resiliency import SupervisorArgs, endpoint_config, supervisor_manifests
from components.storage import CHECKPOINT_MOUNT_OPTIONS
from config.loader import ConfigError
from facts import resiliency, versions
from facts.errors import RuleError
from facts.kubernetes import GPU_TAINT, NODE_POOL_LABEL, RUN_REPLICATED_JOB, TRAINING_CONTAINER
from facts.machines import machine_type
from facts.models import model_spec
from harness.runner import StackRun, load_stack_values, stack_with, unmarked
from planners import nemo, workload
from planners.runs import Resiliency, RunSpec, Tokenizer, local_checkpoint_bytes, local_ssd_bytes
from stacks.platform import check_platform
from tests.conftest import NODE_POOL, issue_for, rejected, with_model
from tests.stacks.test_training import container, env, jobset, pod, workload_files

SUPERVISOR_TYPES = (
    "kubernetes:apps/v1:Deployment",
    "kubernetes:core/v1:Service",
    "kubernetes:apps/v1:DaemonSet",
)


def objects(run: StackRun, kind: str) -> list[dict[str, Any]]:
    return [
        run.manifest(r)
        for r in run.resources
        if r.type.endswith(f":{kind}") and "Supervisor" in r.parent + r.urn.split("::")[0]
    ]


def supervisor_args(**overrides: Any) -> SupervisorArgs:
    fields: dict[str, Any] = {
        "namespace": "nemo",
        "workload_namespace": "nemo",
        "project": "p",
        "node_selector": {NODE_POOL_LABEL: resiliency.SUPERVISOR_POOL},
        "heartbeat_polling_period_seconds": 15,
        "heartbeat_timeout_seconds": 30,
        "watchdogs": ("ecc", "xid"),
        "watchdog_interval_seconds": 10,
        "watchdog_notification_cooldown_seconds": 10,
        "topology_aware": True,
        "gpus_per_node": 8,
    }
    return SupervisorArgs(**{**fields, **overrides})


# --------------------------------------------------------------------------- the supervisor


def test_the_supervisor_renders_the_chart_s_objects_pinned_and_placed(render: Any) -> None:
    """The chart's three services (Deployment + Service each, ports 60080-60082), the host daemon
    DaemonSet (host port 60010, privileged, SYS_ADMIN/SYS_PTRACE/IPC_LOCK, on every GPU node),
    and its ConfigMap: the Deployments on the supervisor's CPU pool (the chart leaves them free;
    the recipe says they belong there), everything on the one pinned image."""
    run = render("a3ultra")
    deployments = objects(run, "Deployment")
    services = objects(run, "Service")
    (daemon,) = objects(run, "DaemonSet")
    assert sorted(d["metadata"]["name"] for d in deployments) == [
        "supervisor-actuator",
        "supervisor-controller",
        "supervisor-sensor",
    ]
    ports = {s["metadata"]["name"]: s["spec"]["ports"][0]["port"] for s in services}
    assert ports == {"supervisor-actuator": 60080, "supervisor-sensor": 60081, "supervisor-controller": 60082}
    for deployment in deployments:
        spec = deployment["spec"]["template"]["spec"]
        assert spec["nodeSelector"] == {NODE_POOL_LABEL: resiliency.SUPERVISOR_POOL}
        assert "tolerations" not in spec
        (main,) = spec["containers"]
        assert main["image"] == versions.RESILIENCY.ref
        assert main["command"][1].startswith("resiliency/supervisor/")
    spec = daemon["spec"]["template"]["spec"]
    assert spec["nodeSelector"] == {"cloud.google.com/gke-gpu": "true"}
    assert GPU_TAINT.toleration() in spec["tolerations"]
    assert (spec["hostNetwork"], spec["hostPID"]) == (True, True)
    (main,) = spec["containers"]
    assert main["image"] == versions.RESILIENCY.ref
    assert main["ports"] == [{"containerPort": 60010, "hostPort": 60010, "protocol": "TCP"}]
    assert main["securityContext"] == {
        "privileged": True,
        "capabilities": {"add": ["SYS_ADMIN", "SYS_PTRACE", "IPC_LOCK"]},
    }
    command = main["command"][2]
    for flag in ("--port=60010", "--watchdogs=ecc", "--watchdogs=xid", "--workers_per_host=8"):
        assert flag in command
    assert "--enable_topology_aware_scheduling" in command


def test_every_address_in_the_endpoint_config_is_a_service_of_the_supervisor() -> None:
    """The chart writes `<release>-<x>-service:<port>` into the ConfigMap; here each address must
    resolve to a Service of the same namespace on the port its Deployment listens on."""
    manifests = supervisor_manifests(supervisor_args())
    services = {m["metadata"]["name"]: m["spec"]["ports"][0]["port"] for m in manifests if m["kind"] == "Service"}
    listening = {
        m["metadata"]["name"]: m["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"]
        for m in manifests
        if m["kind"] == "Deployment"
    }
    config = endpoint_config(supervisor_args())
    # Every key the chart renders (resilient-training.yaml), set or empty as the recipe leaves it.
    chart_keys = {
        "SENSOR_ADDRESS", "ACTUATOR_ADDRESS", "CONTROLLER_ADDRESS", "HOST_DAEMON_PORT",
        "HEARTBEAT_POLLING_PERIOD_S", "HEARTBEAT_TIMEOUT_S", "WORKERS_PER_HOST", "JOB_NAMESPACE",
        "NUM_NODES_PER_DP", "NUM_DP_REPLICAS", "MAX_IN_JOB_RESTARTS", "MAX_WORKLOAD_RESTARTS",
        "ENABLE_WORKLOAD_SCALING", "PROJECT", "POD_TERMINATION_THRESHOLD_S", "JOBSET_DOWNTIME_THRESHOLD_S",
        "REPLICATED_JOB_NAME", "WORKLOAD_CONTAINER_NAME", "ENABLE_FAULT_INJECTION", "FAULT_INJECTION_PERIOD_S",
        "WORKLOAD_NAMESPACE", "GLOG_logtostderr", "GLOG_v",
    }  # fmt: skip
    assert set(config) == chart_keys
    assert (config["REPLICATED_JOB_NAME"], config["WORKLOAD_CONTAINER_NAME"]) == ("workers", "nemo")
    for service in resiliency.SERVICES:
        host, port = config[service.address_key].split(":")
        assert services[host] == int(port) == listening[host]
    assert (config["JOB_NAMESPACE"], config["WORKLOAD_NAMESPACE"]) == ("nemo", "nemo")


def test_the_supervisor_s_rbac_is_the_recipe_s_and_no_more() -> None:
    """ksa-setup.yaml: pods, nodes and jobsets with get/list/watch/create/patch/delete/
    deletecollection, bound to the account every supervisor pod runs as; nothing else (no
    secrets, no wildcard, no "update" the A3 Mega copy adds)."""
    manifests = supervisor_manifests(supervisor_args())
    (role,) = [m for m in manifests if m["kind"] == "ClusterRole"]
    (binding,) = [m for m in manifests if m["kind"] == "ClusterRoleBinding"]
    (rule,) = role["rules"]
    assert sorted(rule["resources"]) == ["jobsets", "nodes", "pods"]
    assert sorted(rule["verbs"]) == sorted(["get", "list", "watch", "create", "patch", "delete", "deletecollection"])
    assert sorted(rule["apiGroups"]) == ["", "jobset.x-k8s.io"]
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    (subject,) = binding["subjects"]
    accounts = {
        m["spec"]["template"]["spec"]["serviceAccountName"]
        for m in manifests
        if m["kind"] in ("Deployment", "DaemonSet")
    }
    assert accounts == {subject["name"]} == {resiliency.SUPERVISOR_SERVICE_ACCOUNT}
    assert subject["namespace"] == "nemo"


@pytest.mark.parametrize(
    ("field", "value"),
    [("watchdogs", ("ecc", "power")), ("heartbeat_timeout_seconds", 15), ("node_selector", {})],
)
def test_supervisor_args_are_checked_before_anything_is_created(field: str, value: Any) -> None:
    with pytest.raises(RuleError) as error:
        supervisor_args(**{field: value})
    assert error.value.key == field


def test_the_supervisor_pool_is_the_recipe_s_in_the_gpu_pool_s_zone(render: Any) -> None:
    run = render("a3ultra")
    (pool,) = [p for p in run.of_type(NODE_POOL) if p.inputs["name"] == resiliency.SUPERVISOR_POOL]
    assert pool.inputs["nodeConfig"]["machineType"] == "e2-standard-8"
    assert pool.inputs["nodeCount"] == 2
    assert pool.inputs["nodeLocations"] == ["europe-west1-b"]
    # Nothing of a run waits for it: the first `up` trains whether or not it is ready.
    training = [r for r in run.resources if "TrainingLayer" in r.urn]
    assert training and all(pool.urn not in r.dependencies for r in training)
    assert not [p for p in render("dev").of_type(NODE_POOL) if p.inputs["name"] == resiliency.SUPERVISOR_POOL]


def test_a_platform_whose_cluster_has_no_supervisor_pool_is_refused() -> None:
    """A platform stack on an upstream cluster stack without the pool: the Deployments would
    never schedule, so the program stops before registering anything."""
    cfg = SimpleNamespace(resiliency=SimpleNamespace(enabled=True))
    with pytest.raises(ConfigError) as error:
        check_platform(cfg, SimpleNamespace(supervisor_pool=None))  # type: ignore[arg-type]
    assert "CPU pool" in issue_for(error.value, "resiliency.enabled")


def test_topology_aware_supervision_needs_placed_pools() -> None:
    values = stack_with("a3ultra", resiliency={"enabled": True, "topologyAware": False})
    values["nemo-gke:gpuPools"][0]["capacity"].pop("reservationBlock")
    values["nemo-gke:resiliency"]["topologyAware"] = True
    message = issue_for(rejected(values, "a3ultra"), "resiliency.topologyAware")
    assert "compact" in message and "a3-ultra" in message


def test_the_checkpoint_bucket_mounts_with_the_recipe_s_checkpoint_options(render: Any) -> None:
    """gpu-recipes src/helm-charts/storage/gcs-fuse/templates/pv.yaml@226cd3a, `checkpoints`."""
    assert CHECKPOINT_MOUNT_OPTIONS == (
        "implicit-dirs",
        "metadata-cache:negative-ttl-secs:0",
        "metadata-cache:ttl-secs:-1",
        "metadata-cache:stat-cache-max-size-mb:-1",
        "metadata-cache:type-cache-max-size-mb:-1",
        "write:enable-streaming-writes:true",
        "machine-type:a3-highgpu-8g",
        "file-cache:max-size-mb:-1",
        "file-cache:cache-file-for-range-read:true",
        "file-cache:enable-parallel-downloads:true",
    )
    run = render("a3ultra")
    volumes = [run.manifest(v) for v in run.of_type("kubernetes:core/v1:PersistentVolume")]
    (checkpoints,) = [v for v in volumes if v["spec"]["claimRef"]["name"] == "checkpoints"]
    assert tuple(checkpoints["spec"]["mountOptions"]) == CHECKPOINT_MOUNT_OPTIONS
    attributes = checkpoints["spec"]["csi"]["volumeAttributes"]
    assert (attributes["skipCSIBucketAccessCheck"], attributes["gcsfuseMetadataPrefetchOnMount"]) == ("true", "true")


# --------------------------------------------------------------------------- the run side


def test_a_supervised_run_starts_under_the_resiliency_launcher_on_the_host_network(render: Any) -> None:
    """The supervisor reaches each worker at the host daemon's port + local rank + 1
    (AI-Hypercomputer/resiliency third_party/nvidia-resiliency-ext/launcher.py
    setup_goodput_client@ef69c85): the pod is on the host network, privileged as the recipe runs
    it, with no interface annotations; local checkpoints sit on the node's SSD through a hostPath
    that outlives the pod."""
    run = render("a3ultra")
    _, manifest = jobset(run)
    spec, main = pod(manifest)["spec"], container(manifest)
    assert any("supervised, so it runs on the resiliency recipe's image" in w.message for w in run.warnings)
    assert (spec["hostNetwork"], spec["dnsPolicy"]) == (True, "ClusterFirstWithHostNet")
    assert main["securityContext"] == {"privileged": True}
    assert not [k for k in pod(manifest)["metadata"]["annotations"] if k.startswith("networking.gke.io/")]
    assert main["image"] == versions.RESILIENCY.ref
    variables = env(manifest)
    assert variables["RUN_LAUNCHER"] == nemo.Launcher.SUPERVISED
    assert variables["HOST_DAEMON_PORT"] == "60010"
    assert (variables["REPLICATED_JOB_NAME"], variables["WORKLOAD_CONTAINER_NAME"]) == (
        RUN_REPLICATED_JOB,
        TRAINING_CONTAINER,
    )
    assert (variables["FT_PARAM_INITIAL_RANK_HEARTBEAT_TIMEOUT"], variables["FT_PARAM_RANK_HEARTBEAT_TIMEOUT"]) == (
        "720",
        "720",
    )
    assert not [v for v in spec["volumes"] if v["name"] == "local-checkpoints"]
    settings = json.loads(workload_files(run, "llama31-405b")[workload.RUN_SETTINGS])
    assert settings["resiliency"] == {
        "faultTolerance": True,
        "asyncCheckpoint": True,
        "localCheckpointDir": None,
        "localCheckpointInterval": None,
    }
    assert settings["checkpointInterval"] == 25


def test_local_checkpoints_sit_on_the_node_ssd_and_outlive_the_pod(render: Any) -> None:
    """A fault-tolerant run (NVRx's ft_launcher, NeMo 25.07's local checkpoints) keeps them on
    the node's ephemeral SSD through a hostPath, as the recipe mounts it, so a pod re-created on
    the same node finds them; an emptyDir would go with the pod."""
    values = with_run(
        "a3ultra",
        None,
        resiliency={"faultTolerance": True, "asyncCheckpoint": True, "localCheckpointIntervalSteps": 5},
    )
    run = render("a3ultra", values=values)
    _, manifest = jobset(run)
    spec, main = pod(manifest)["spec"], container(manifest)
    assert env(manifest)["RUN_LAUNCHER"] == nemo.Launcher.FAULT_TOLERANT
    assert main["image"] == run.pulled_as("nvcr.io/nvidia/nemo:25.07")
    (local,) = [v for v in spec["volumes"] if v["name"] == "local-checkpoints"]
    assert local["hostPath"] == {"path": "/mnt/stateful_partition/kube-ephemeral-ssd", "type": "Directory"}
    assert {"name": "local-checkpoints", "mountPath": resiliency.LOCAL_CHECKPOINT_MOUNT} in main["volumeMounts"]
    settings = json.loads(workload_files(run, "llama31-405b")[workload.RUN_SETTINGS])
    assert settings["resiliency"] == {
        "faultTolerance": True,
        "asyncCheckpoint": True,
        "localCheckpointDir": f"{resiliency.LOCAL_CHECKPOINT_MOUNT}/llama31-405b",
        "localCheckpointInterval": 5,
    }


def test_runs_without_resiliency_settings_stay_plain_torchrun(render: Any) -> None:
    _, manifest = jobset(render("dev"))
    assert "RUN_LAUNCHER" not in env(manifest)
    assert not [v for v in pod(manifest)["spec"]["volumes"] if v["name"] == "local-checkpoints"]
    nemo2 = render("a3high-small", values=with_model("a3high-small", "llama3.1-8b"))
    settings = json.loads(workload_files(nemo2, "llama3-8b")[workload.RUN_SETTINGS])
    assert settings["resiliency"] == {
        "faultTolerance": False,
        "asyncCheckpoint": None,
        "localCheckpointDir": None,
        "localCheckpointInterval": None,
    }


def with_run(stack: str, platform: dict[str, Any] | None = None, **run: Any) -> dict[str, Any]:
    values = load_stack_values(stack)
    training = copy.deepcopy(values["nemo-gke:training"])
    for key, value in run.items():
        if value is None:
            training["runs"][0].pop(key, None)
        else:
            training["runs"][0][key] = value
    extra = {"resiliency": platform} if platform is not None else {}
    return stack_with(stack, training=training, **extra)


@pytest.mark.parametrize(
    ("stack", "platform", "run", "key", "words"),
    [
        # Cadence against steps: a restart would begin at step 0.
        (
            "a3ultra",
            None,
            {"checkpoint": {"intervalSteps": 60}},
            "checkpoint.intervalSteps",
            "exceeds the run's 50 steps",
        ),
        (
            "a3ultra",
            None,
            {"checkpoint": {"intervalSteps": 25}, "steps": 50, "resiliency": {"localCheckpointIntervalSteps": 25}},
            "resiliency.localCheckpointIntervalSteps",
            "must be below checkpoint.intervalSteps (25)",
        ),
        (
            "a3ultra",
            None,
            {"checkpoint": {"enabled": False}, "resiliency": {"localCheckpointIntervalSteps": 5}},
            "resiliency.localCheckpointIntervalSteps",
            "needs checkpoint.enabled",
        ),
        # The supervisor's image predates NeMo's local checkpoints.
        (
            "a3ultra",
            None,
            {"resiliency": {"supervisor": True, "localCheckpointIntervalSteps": 5}},
            "resiliency.localCheckpointIntervalSteps",
            "cannot go with supervisor",
        ),
        # The supervisor needs the platform's, and host-network pods.
        ("a3ultra", {"enabled": False}, {}, "resiliency.supervisor", "set resiliency.enabled: true"),
        (
            "a3high-small",
            None,
            {"model": "llama3.1-8b", "resiliency": {"supervisor": True}},
            "resiliency.supervisor",
            "needs the platform",
        ),
        # NVRx restarts need its launcher; Nsight cannot wrap it.
        ("dev", None, {"resiliency": {"inJobRestarts": 2}}, "resiliency.inJobRestarts", "needs faultTolerance"),
        (
            "dev",
            None,
            {"resiliency": {"workloadRestarts": 2}},
            "resiliency.workloadRestarts",
            "applies only with supervisor",
        ),
        (
            "a3high-small",
            None,
            {"model": "llama3.1-8b", "resiliency": {"faultTolerance": True}, "profile": {"startStep": 2, "endStep": 4}},
            "profile",
            "Nsight Systems",
        ),
        (
            "dev",
            None,
            {"resiliency": {"faultTolerance": True, "heartbeatTimeoutSeconds": 900}},
            "resiliency.heartbeatTimeoutSeconds",
            "must not exceed initialHeartbeatTimeoutSeconds (720)",
        ),
        # NeMo 1 models have none of it.
        ("dev", None, {"resiliency": {"faultTolerance": True}}, "resiliency", "NeMo 1"),
    ],
)
def test_run_resiliency_settings_are_checked(
    stack: str, platform: dict[str, Any] | None, run: dict[str, Any], key: str, words: str
) -> None:
    message = issue_for(rejected(with_run(stack, platform, **run), stack), f"training.runs[0].{key}")
    assert words in message, message


def test_the_supervisor_is_refused_where_the_flavour_keeps_pods_off_the_host_network() -> None:
    values = with_run(
        "dev", {"enabled": True, "topologyAware": False}, model="llama3.1-8b", resiliency={"supervisor": True}
    )
    message = issue_for(rejected(values, "dev"), "training.runs[0].resiliency.supervisor")
    assert "host network" in message and "tcpx" in message


def spec_of(model: str, nodes: int, **resiliency_fields: Any) -> RunSpec:
    return RunSpec(
        name="r",
        model=model,
        pool="p",
        nodes=nodes,
        settings=model_spec(model).recipe.settings(),
        tokenizer=Tokenizer("megatron", "GPT2BPETokenizer"),
        priority="nemo-medium",
        resiliency=Resiliency(**resiliency_fields),
    )


def test_local_checkpoint_space_is_the_hand_computed_figure() -> None:
    """Llama 3.1 405B (405 853 372 416 weights) on 72 A3 Ultra nodes at TP8 × PP9: per GPU
    2 bytes × P / 72 of weights and 12 bytes × P / 576 of optimizer; × 8 GPUs, × 2 replicas,
    × 2 checkpoints at the peak = 631.3 GB, within half of the node's 32 × 375 GiB."""
    a3u = machine_type("a3-ultragpu-8g")
    need = local_checkpoint_bytes(spec_of("llama3.1-405b", 72, local_checkpoint_interval_steps=5), a3u)
    assert need == pytest.approx(405_853_372_416 * (2 / 72 + 12 / 576) * 8 * 2 * 2, rel=1e-9)
    assert round(need / 1e9, 1) == 631.3
    assert local_ssd_bytes(a3u) == 32 * 375 * 2**30
    # One node keeps no replica.
    single = local_checkpoint_bytes(spec_of("llama3.1-8b", 1), machine_type("a3-highgpu-8g"))
    assert single == pytest.approx(8_030_257_152 * (2 / 1 + 12 / 8) * 8 * 1 * 2, rel=1e-9)


def test_local_checkpoints_that_overflow_the_ssd_are_refused() -> None:
    """405B on 2 A3 Ultra nodes at TP8 × PP2: every GPU holds 14 bytes × P / 16, so a node needs
    8 × 355 GB × 2 replicas × 2 checkpoints = 11.4 TB at the peak, more than half of its 12.9 TB."""
    values = with_run(
        "a3ultra",
        None,
        nodes=2,
        pipelineParallel=2,
        resiliency={"localCheckpointIntervalSteps": 5},
        checkpoint={"intervalSteps": 25},
    )
    message = issue_for(rejected(values, "a3ultra"), "training.runs[0].resiliency.localCheckpointIntervalSteps")
    assert "GB per node" in message and "local SSD" in message


def test_one_slow_gpu_node_never_fails_up_or_refresh(render: Any) -> None:
    """pulumi-kubernetes awaits a DaemonSet's whole rollout for 10 minutes on create and update, and
    its refresh (Read) fails whenever the rollout is not complete (provider/pkg/await/daemonset.go,
    await.go @94977969). The host daemon runs on every GPU node, which come and go, and the recipe
    saw 8m1s on 16 nodes with `helm install` not waiting at all (its README @2e1fd5e): it is not
    awaited. The services, one pod each on the supervisor's CPU pool, are awaited for three times
    the recipe's 4m36s."""
    run = render("a3ultra")
    (daemon,) = objects(run, "DaemonSet")
    assert unmarked(daemon)["metadata"]["annotations"] == {"pulumi.com/skipAwait": "true"}
    deployments = objects(run, "Deployment")
    assert [unmarked(d)["metadata"]["annotations"] for d in deployments if "supervisor" in d["metadata"]["name"]] == [
        {"pulumi.com/timeoutSeconds": "828"}
    ] * 3


def test_supervised_runs_take_the_resiliency_recipes_pod_and_restart_values(render: Any) -> None:
    """gpu-recipes training/a3ultra/llama31_405b/nemo-gke-resiliency/nemo2412/recipe/values.yaml
    @2e1fd5e: /dev/shm of 600Gi, a 3 s termination grace (the supervisor replaces a node's pods at
    once) and the JobSet's maxRestarts of 20 (workload.max_workload_restarts), which the example
    keeps; a run's own maxRestarts wins, and unsupervised runs keep the platform's defaults: the
    recipe's restarts where they resume from checkpoints, none where they would start again."""
    supervised = render("a3ultra", values=with_run("a3ultra", maxRestarts=None))
    _, manifest = jobset(supervised)
    spec = pod(manifest)["spec"]
    (shm,) = [v for v in spec["volumes"] if v["name"] == "shm"]
    assert shm["emptyDir"]["sizeLimit"] == "600Gi" and spec["terminationGracePeriodSeconds"] == 3
    assert manifest["spec"]["failurePolicy"]["maxRestarts"] == 20
    _, shipped = jobset(render("a3ultra"))
    assert shipped["spec"]["failurePolicy"]["maxRestarts"] == 20
    _, own = jobset(render("a3ultra", values=with_run("a3ultra", maxRestarts=5)))
    assert own["spec"]["failurePolicy"]["maxRestarts"] == 5
    _, fresh = jobset(render("a3ultra", values=with_run("a3ultra", resiliency=None, checkpoint={"resume": False})))
    assert fresh["spec"]["failurePolicy"]["maxRestarts"] == 0
    plain = render("a3ultra", values=with_run("a3ultra", resiliency=None, maxRestarts=None))
    _, manifest = jobset(plain)
    spec = pod(manifest)["spec"]
    (shm,) = [v for v in spec["volumes"] if v["name"] == "shm"]
    assert (shm["emptyDir"]["sizeLimit"], spec["terminationGracePeriodSeconds"]) == ("256Gi", 30)
    assert manifest["spec"]["failurePolicy"]["maxRestarts"] == 20
