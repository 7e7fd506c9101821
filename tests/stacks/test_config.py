"""Stack configuration: defaults follow the walkthrough; every bad value is rejected, by key,
before any resource is registered."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from config.loader import parse_stack_config
from config.stack import StackConfig
from facts.kubernetes import (
    MAX_RUN_NAME,
    MAX_RUN_NODES,
    RUN_REPLICATED_JOB,
    jobset_pod_name_length,
    versioned_name,
)
from facts.machines import MACHINE_TYPES
from facts.models import MODELS
from harness.runner import load_stack_values, run_stack, stack_with
from harness.stackfile import to_pulumi_config
from tests.conftest import issue_for, rejected

POOL = {"name": "a3-highgpu", "machineType": "a3-highgpu-8g", "nodeCount": 2}


def minimal() -> StackConfig:
    return parse_stack_config({"nemo-gke:project": "my-project-1"}, stack="dev")


def pools(**changes: Any) -> list[dict[str, Any]]:
    return [{**POOL, **changes}]


def dev_with_run(**changes: Any) -> dict[str, Any]:
    values = load_stack_values("dev")
    training = copy.deepcopy(values["nemo-gke:training"])
    training["runs"][0].update(changes)
    values["nemo-gke:training"] = training
    return values


# --------------------------------------------------------------------------- defaults


def test_defaults_follow_the_walkthrough() -> None:
    cfg = minimal()
    (pool,) = cfg.gpu_pools
    assert (pool.machine_type, pool.node_count) == ("a3-highgpu-8g", 2)
    assert pool.compact, "a multi-node 8-GPU pool is compact by default"
    assert cfg.system_pool.machine_type == "e2-standard-4"
    assert (cfg.storage.filestore.tier, cfg.storage.filestore.capacity_gib) == ("BASIC_HDD", 1024)
    assert cfg.kueue.cluster_queue == cfg.kueue.local_queue == "a3-queue"
    assert [layer.value for layer in cfg.layers] == ["cluster", "platform", "training"]
    assert cfg.cluster_name == "nemo-dev"


def test_the_dev_stack_sets_only_what_a_user_must_choose_plus_the_walkthrough_run() -> None:
    values = load_stack_values("dev")
    assert set(values) == {
        "nemo-gke:project",
        "nemo-gke:region",
        "nemo-gke:zone",
        # Off by default so that an upgrade never changes a deployed stack; a new stack wants it.
        "nemo-gke:imageMirror",
        "nemo-gke:gpuPools",
        "nemo-gke:training",
    }
    cfg = parse_stack_config(to_pulumi_config(values), stack="dev")
    assert [(r.model, r.nodes, r.settings.steps) for r in cfg.training.runs] == [("gpt-5b", 2, 50)]


# --------------------------------------------------------------------------- hostile configs


@pytest.mark.parametrize(
    ("overrides", "key", "expected"),
    [
        ({"regoin": "us-central1"}, "regoin", "known keys here: project, region, zone"),
        ({"network": {"nodeCidr": "10.0.0.0/20", "podCider": "10.4.0.0/14"}}, "network.podCider", "nodeCidr"),
        ({"gpuPools": pools(nodeCnt=2)}, "gpuPools[0].nodeCnt", "machineType"),
        (
            {"gpuPools": pools(capacity={"type": "spot", "reservaton": "x"})},
            "gpuPools[0].capacity.reservaton",
            "reservation",
        ),
        (
            {"storage": {"filestore": {"tier": "BASIC_HDD", "sizeGib": 1024}}},
            "storage.filestore.sizeGib",
            "capacityGib",
        ),
        ({"kueue": {"queue": "a3-queue"}}, "kueue.queue", "clusterQueue"),
        (
            {"existingCluster": {"name": "x", "kubeconfigPath": "k", "storageClass": "s", "gpuPool": []}},
            "existingCluster.gpuPool",
            "gpuPools",
        ),
    ],
    ids=["top-level", "network", "pool", "capacity", "filestore", "kueue", "optional-object"],
)
def test_an_unknown_key_at_any_level_is_rejected(overrides: dict[str, Any], key: str, expected: str) -> None:
    message = issue_for(rejected(stack_with("dev", **overrides)), key)
    assert "unknown key" in message and expected in message


def test_an_unknown_key_inside_a_run_is_rejected() -> None:
    message = issue_for(rejected(dev_with_run(stepz=10)), "training.runs[0].stepz")
    assert "unknown key" in message and "steps" in message


@pytest.mark.parametrize(
    ("overrides", "key"),
    [
        ({"gpuPools": pools(nodeCount="two")}, "gpuPools[0].nodeCount"),
        ({"gpuPools": pools(nodeCount="2")}, "gpuPools[0].nodeCount"),
        ({"production": "yes"}, "production"),
        ({"network": {"iapSsh": "true"}}, "network.iapSsh"),
        ({"layers": "cluster"}, "layers"),
    ],
)
def test_a_wrong_type_is_rejected(overrides: dict[str, Any], key: str) -> None:
    issue_for(rejected(stack_with("dev", **overrides)), key)


@pytest.mark.parametrize(
    ("overrides", "key", "bad", "allowed"),
    [
        ({"gpuPools": pools(nodeCount=-1)}, "gpuPools[0].nodeCount", -1, "greater than or equal to 0"),
        ({"gpuPools": pools(diskSizeGb=-100)}, "gpuPools[0].diskSizeGb", -100, "greater than or equal to 100"),
        ({"systemPool": {"nodeCount": 0}}, "systemPool.nodeCount", 0, "greater than or equal to 1"),
        (
            {"storage": {"filestore": {"capacityGib": -1024}}},
            "storage.filestore.capacityGib",
            -1024,
            "tier BASIC_HDD allows 1024-65433 GiB",
        ),
        ({"kueue": {"requeueLimit": -1}}, "kueue.requeueLimit", -1, "greater than or equal to 0"),
    ],
)
def test_a_negative_count_or_size_is_rejected(overrides: dict[str, Any], key: str, bad: int, allowed: str) -> None:
    message = issue_for(rejected(stack_with("dev", **overrides)), key)
    # One line: the key, the bad value, and what is allowed.
    assert message.startswith(f"nemo-gke:{key} = {bad}: ") and allowed in message, message


def test_an_unknown_machine_type_is_rejected_with_the_known_ones() -> None:
    message = issue_for(
        rejected(stack_with("dev", gpuPools=pools(machineType="a3-highgpu-16g"))), "gpuPools[0].machineType"
    )
    assert "a3-highgpu-16g" in message
    for known in MACHINE_TYPES:
        assert known in message


def test_a_made_up_system_machine_type_is_rejected() -> None:
    # The walkthrough's default "e2-medium-2" does not exist.
    message = issue_for(
        rejected(stack_with("dev", systemPool={"machineType": "e2-medium-2"})), "systemPool.machineType"
    )
    assert "e2-standard-4" in message


def test_a_zone_given_as_a_region_is_rejected() -> None:
    message = issue_for(rejected(stack_with("dev", zone="us-central1")), "zone")
    assert "is a region, not a zone" in message and "us-central1-a" in message


def test_a_region_given_as_a_zone_is_rejected() -> None:
    message = issue_for(rejected(stack_with("dev", region="us-central1-c")), "region")
    assert "is a zone" in message and "us-central1" in message


def test_a_zone_outside_the_region_is_rejected() -> None:
    message = issue_for(rejected(stack_with("dev", zone="europe-west4-a")), "zone")
    assert "us-central1" in message


def test_the_project_placeholder_is_rejected() -> None:
    message = issue_for(rejected(stack_with("dev", project="<YOUR_PROJECT>")), "project")
    assert "pulumi config set nemo-gke:project" in message


@pytest.mark.parametrize(
    ("network", "key", "other"),
    [
        ({"podCidr": "10.0.0.0/14"}, "network.podCidr", "nodeCidr"),
        ({"serviceCidr": "10.4.0.0/20"}, "network.serviceCidr", "podCidr"),
        ({"gpuCidr": "10.0.0.0/16"}, "network.gpuCidr", "nodeCidr"),
        ({"controlPlaneCidr": "192.168.1.0/28"}, "network.controlPlaneCidr", "gpuCidr"),
    ],
)
def test_overlapping_cidrs_are_rejected(network: dict[str, str], key: str, other: str) -> None:
    message = issue_for(rejected(stack_with("dev", network=network)), key)
    assert "overlaps" in message and other in message


def test_a_pod_range_too_small_for_the_pools_is_rejected() -> None:
    message = issue_for(rejected(stack_with("dev", network={"podCidr": "10.4.0.0/26"})), "network.podCidr")
    assert "addresses" in message


@pytest.mark.parametrize(
    ("layers", "upstream", "key"),
    [
        (["cluster", "training"], None, "layers"),
        (["training", "platform"], None, "layers"),
        (["bootstrap", "cluster"], None, "layers"),
        (["platform", "training"], None, "upstreamStack"),
        (["cluster", "platform", "training"], "dev", "upstreamStack"),
    ],
)
def test_layer_combinations_are_checked(layers: list[str], upstream: str | None, key: str) -> None:
    overrides: dict[str, Any] = {"layers": layers}
    if upstream:
        overrides["upstreamStack"] = upstream
    issue_for(rejected(stack_with("dev", **overrides)), key)


# --------------------------------------------------------------------------- capacity modes


@pytest.mark.parametrize(
    ("pool", "key", "expected"),
    [
        (
            {"capacity": {"type": "spot", "reservation": "res"}},
            "gpuPools[0].capacity.reservation",
            "reservations exclude Spot",
        ),
        ({"capacity": {"type": "reservation"}}, "gpuPools[0].capacity.reservation", "is required"),
        (
            {"capacity": {"type": "onDemand", "reservationBlock": "b"}},
            "gpuPools[0].capacity.reservationBlock",
            "reservation",
        ),
        (
            {"nodeCount": None, "autoscaling": {"minNodes": 1, "maxNodes": 4}, "capacity": {"type": "flexStart"}},
            "gpuPools[0].autoscaling",
            "autoscaling from zero",
        ),
        ({"capacity": {"type": "flexStart"}}, "gpuPools[0].autoscaling", "autoscaling from zero"),
        (
            {"nodeCount": None, "autoscaling": {"maxNodes": 4}, "autoRepair": True, "capacity": {"type": "flexStart"}},
            "gpuPools[0].autoRepair",
            "must be false",
        ),
        (
            {"nodeCount": None, "autoscaling": {"maxNodes": 4}, "capacity": {"type": "flexStart", "reservation": "r"}},
            "gpuPools[0].capacity.reservation",
            "flex-start cannot consume a reservation",
        ),
        (
            {
                "nodeCount": None,
                "autoscaling": {"maxNodes": 4},
                "capacity": {"type": "queuedProvisioning"},
                "placement": "compact",
            },
            "gpuPools[0].placement",
            "queued provisioning excludes compact placement",
        ),
        (
            {
                "nodeCount": None,
                "autoscaling": {"maxNodes": 4},
                "capacity": {"type": "flexStart"},
                "placement": "compact",
            },
            "gpuPools[0].placement",
            "a3-ultragpu-8g",
        ),
        (
            {"capacity": {"type": "spot", "maxRunDurationSeconds": 3600}},
            "gpuPools[0].capacity.maxRunDurationSeconds",
            "flexStart",
        ),
        ({"placement": "none", "placementPolicy": "my-policy"}, "gpuPools[0].placementPolicy", "compact"),
    ],
    ids=[
        "spot+reservation",
        "reservation-without-name",
        "block-without-reservation",
        "flex-min-nodes",
        "flex-static-size",
        "flex-auto-repair",
        "flex+reservation",
        "queued+compact",
        "flex+compact-on-a3-high",
        "run-duration-on-spot",
        "policy-without-compact",
    ],
)
def test_each_capacity_mode_rule_rejects_what_gke_refuses(pool: dict[str, Any], key: str, expected: str) -> None:
    spec = {k: v for k, v in {**POOL, **pool}.items() if v is not None}
    values = stack_with("dev", gpuPools=[spec], training={})
    assert expected in issue_for(rejected(values), key)


def test_flex_start_with_compact_placement_is_accepted_where_gke_allows_it() -> None:
    cfg = parse_stack_config(to_pulumi_config(load_stack_values("a3ultra-flex")), stack="flex")
    assert cfg.gpu_pools[0].capacity.type == "flexStart" and cfg.gpu_pools[0].compact


def test_pools_with_different_gpu_network_layouts_cannot_share_a_cluster() -> None:
    two = [POOL, {"name": "mega", "machineType": "a3-megagpu-8g", "nodeCount": 2}]
    assert "network layouts" in issue_for(rejected(stack_with("dev", gpuPools=two, training={})), "gpuPools")


def test_rdma_pools_must_be_in_the_stack_zone() -> None:
    pool = {"name": "ultra", "machineType": "a3-ultragpu-8g", "nodeCount": 2, "zone": "us-central1-a"}
    assert "zonal" in issue_for(rejected(stack_with("dev", gpuPools=[pool], training={})), "gpuPools[0].zone")


# --------------------------------------------------------------------------- platform


@pytest.mark.parametrize(
    ("filestore", "expected"),
    [
        ({"tier": "BASIC_HDD", "capacityGib": 512}, "1024-65433 GiB"),
        ({"tier": "BASIC_SSD", "capacityGib": 1024}, "2560-65433 GiB"),
        ({"tier": "ZONAL", "capacityGib": 1100}, "steps of 256 GiB"),
        ({"tier": "ENTERPRISE", "capacityGib": 20480}, "1024-10240 GiB"),
    ],
)
def test_filestore_capacity_below_or_outside_the_tier_range_is_rejected(
    filestore: dict[str, Any], expected: str
) -> None:
    message = issue_for(rejected(stack_with("dev", storage={"filestore": filestore})), "storage.filestore.capacityGib")
    assert expected in message and filestore["tier"] in message


def test_an_unknown_filestore_tier_is_rejected_with_the_known_ones() -> None:
    message = issue_for(
        rejected(stack_with("dev", storage={"filestore": {"tier": "PREMIUM"}})), "storage.filestore.tier"
    )
    assert "BASIC_HDD" in message and "ZONAL" in message


@pytest.mark.parametrize("timeout", [0, 30])
def test_a_wait_for_pods_ready_timeout_too_short_for_image_pulls_is_rejected(timeout: int) -> None:
    values = stack_with("dev", kueue={"waitForPodsReadyTimeoutSeconds": timeout})
    issue_for(rejected(values), "kueue.waitForPodsReadyTimeoutSeconds")


def test_a_reserved_namespace_is_rejected() -> None:
    issue_for(rejected(stack_with("dev", namespace="kube-system")), "namespace")


# --------------------------------------------------------------------------- training runs


def test_an_unknown_model_is_rejected_with_the_known_ones() -> None:
    message = issue_for(rejected(dev_with_run(model="gpt-4")), "training.runs[0].model")
    for known in MODELS:
        assert known in message


@pytest.mark.parametrize(
    ("changes", "key", "expected"),
    [
        ({"nodes": 3}, "training.runs[0].nodes", "at most 2 nodes"),
        ({"tensorParallel": 3}, "training.runs[0].tensorParallel", "must divide the 8 GPUs"),
        ({"tensorParallel": 8, "pipelineParallel": 3}, "training.runs[0].nodes", "not a multiple"),
        ({"globalBatchSize": 100}, "training.runs[0].globalBatchSize", "micro batch × data-parallel"),
        ({"sequenceLength": 4096}, "training.runs[0].sequenceLength", "2048 positions"),
        ({"pipelineParallel": 2, "virtualPipeline": 5}, "training.runs[0].pipelineParallel", "24 layers"),
        ({"profile": {"startStep": 40, "endStep": 60}}, "training.runs[0].profile.endStep", "last step (50)"),
        ({"pool": "h100x9"}, "training.runs[0].pool", "a3-highgpu"),
        ({"topology": {"mode": "required"}, "pool": None}, None, None),
    ],
    ids=["quota", "tp-in-node", "model-parallel", "batch", "sequence", "layers", "profile", "pool", "topology-ok"],
)
def test_hostile_runs_are_rejected_with_the_key_named(
    changes: dict[str, Any], key: str | None, expected: str | None
) -> None:
    values = dev_with_run(**{k: v for k, v in changes.items() if v is not None})
    if key is None:  # the dev pool is compact, so required topology is fine
        assert run_stack("dev", values=values).of_type("kubernetes:jobset.x-k8s.io/v1alpha2:JobSet")
        return
    assert expected in issue_for(rejected(values), key)


def test_the_longest_run_name_fits_the_jobset_webhook_at_the_most_nodes() -> None:
    """The JobSet webhook refuses a JobSet whose longest pod name, `<jobset>-<replicated job>-
    <job index>-<pod index>-abcde`, is not a DNS label of at most 63 characters
    (sigs.k8s.io/jobset@v0.12.0 pkg/webhooks/jobset_webhook.go). The JobSet is `<run>-<digest>`:
    the run name's limit leaves room for both at MAX_RUN_NODES nodes, and one more character is
    refused before anything is created."""
    jobset = versioned_name("r" * MAX_RUN_NAME, {})
    assert jobset_pod_name_length(jobset, RUN_REPLICATED_JOB, 1, MAX_RUN_NODES) == 63
    message = issue_for(rejected(dev_with_run(name="r" * (MAX_RUN_NAME + 1))), "training.runs[0].name")
    assert str(MAX_RUN_NAME) in message


def test_topology_on_a_pool_without_topology_labels_is_rejected() -> None:
    values = stack_with("dev", gpuPools=pools(placement="none"))
    training = copy.deepcopy(values["nemo-gke:training"])
    training["runs"][0]["topology"] = {"mode": "preferred"}
    values["nemo-gke:training"] = training
    assert "no topology labels" in issue_for(rejected(values), "training.runs[0].topology.mode")


def test_duplicate_run_names_are_rejected() -> None:
    values = load_stack_values("dev")
    run = values["nemo-gke:training"]["runs"][0]
    values["nemo-gke:training"] = {"runs": [run, run]}
    issue_for(rejected(values), "training.runs[1].name")


def test_every_error_of_a_config_is_reported_at_once() -> None:
    error = rejected(stack_with("dev", regoin="x", gpuPools=pools(nodeCount=-1, bogus=1)))
    assert {i.key for i in error.issues} >= {"regoin", "gpuPools[0].nodeCount", "gpuPools[0].bogus"}


# --------------------------------------------------------------------------- what the platform sets


@pytest.mark.parametrize(
    ("env", "variable", "set_to"),
    [
        ({"NNODES": "4"}, "NNODES", "(2)"),
        ({"MASTER_ADDR": "10.0.0.1"}, "MASTER_ADDR", "($(JOBSET_NAME)-workers-0-0.$(JOBSET_NAME))"),
        ({"NCCL_ALGO": "Ring"}, "NCCL_ALGO", "(Ring,Tree)"),
        ({"JOB_COMPLETION_INDEX": "0"}, "JOB_COMPLETION_INDEX", "(from the pod's metadata)"),
    ],
)
def test_a_run_env_that_overrides_what_the_platform_sets_is_refused(
    env: dict[str, str], variable: str, set_to: str
) -> None:
    """A stray NNODES or NCCL_* variable would break torchrun's rendezvous or the machine's tuned
    NCCL settings without a word; replacing one takes an explicit allowEnvOverrides."""
    message = issue_for(rejected(dev_with_run(env=env)), f"training.runs[0].env.{variable}")
    assert f"is set by the platform {set_to}; list it in allowEnvOverrides" in message


def test_an_allowed_override_reaches_the_training_container(render: Any) -> None:
    run = render("dev", values=dev_with_run(env={"NCCL_ALGO": "Tree"}, allowEnvOverrides=["NCCL_ALGO"]))
    jobset = run.manifest(run.one("kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"))
    container = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]
    assert {"name": "NCCL_ALGO", "value": "Tree"} in container["env"]
    assert [e["name"] for e in container["env"]].count("NCCL_ALGO") == 1


def test_an_override_list_names_only_variables_of_env() -> None:
    message = issue_for(
        rejected(dev_with_run(allowEnvOverrides=["NCCL_ALGO"])), "training.runs[0].allowEnvOverrides[0]"
    )
    assert "names no variable of env" in message


# --------------------------------------------------------------------------- times and address space


def test_a_maintenance_window_that_ends_before_it_starts_is_refused() -> None:
    window = {"startTime": "2025-01-04T11:00:00Z", "endTime": "2025-01-04T03:00:00Z"}
    message = issue_for(
        rejected(stack_with("dev", cluster={"maintenanceWindow": window})), "cluster.maintenanceWindow.endTime"
    )
    assert "must be after startTime (2025-01-04T11:00:00Z)" in message


@pytest.mark.parametrize(
    ("start", "end", "valid"),
    [
        # 10:00 in Tokyo is 01:00 UTC, before 02:00 UTC, although the strings sort the other way.
        ("2026-12-20T10:00:00+09:00", "2026-12-20T02:00:00Z", True),
        ("2026-12-20T02:00:00Z", "2026-12-20T10:00:00+09:00", False),
    ],
)
def test_maintenance_times_are_compared_as_times_not_strings(start: str, end: str, valid: bool) -> None:
    exclusion = {"name": "freeze", "startTime": start, "endTime": end}
    values = stack_with("dev", cluster={"maintenanceExclusions": [exclusion]})
    if valid:
        assert run_stack("dev", values=values).of_type("gcp:container/cluster:Cluster")
    else:
        issue_for(rejected(values), "cluster.maintenanceExclusions[0].endTime")


def test_a_node_subnet_too_small_for_the_pools_is_refused() -> None:
    """GCP keeps 4 addresses of every subnet (https://cloud.google.com/vpc/docs/subnets#unusable-ip-addresses-in-every-subnet):
    a /29 gives 4 node addresses; 8 GPU nodes, a system node and a surge node need 10."""
    values = stack_with("dev", network={"nodeCidr": "10.0.0.0/29"}, gpuPools=pools(nodeCount=8))
    message = issue_for(rejected(values), "network.nodeCidr")
    assert "gives 4 node addresses" in message and "can hold 10 nodes" in message


def test_gpu_subnets_too_small_for_the_pools_are_refused() -> None:
    """Every GPU NIC of every node takes an address in its GPU subnet: a /24 block gives /28 subnets
    of 12 usable addresses, too few for a 16-node pool."""
    values = stack_with("dev", network={"gpuCidr": "192.168.0.0/24"}, gpuPools=pools(nodeCount=16), training={})
    message = issue_for(rejected(values), "network.gpuCidr")
    assert "16 /28 subnets of 12 addresses" in message and "hold 16 nodes" in message


# --------------------------------------------------------------------------- the stack and its file


@pytest.mark.parametrize("stack", ["Dev", "a-very-long-stack-name-for-prod"])
def test_a_stack_name_that_makes_no_cluster_name_is_named_as_the_cause(stack: str) -> None:
    error = rejected(load_stack_values("dev"), stack=stack)
    message = issue_for(error, "cluster.name")
    assert f"defaults to nemo-<stack> = 'nemo-{stack}'" in message and f"the stack name {stack!r}" in message
    assert "pulumi config set --path nemo-gke:cluster.name <name>" in message


def test_a_key_under_a_misspelt_namespace_is_warned_about(render: Any) -> None:
    run = render("dev", values={**load_stack_values("dev"), "nemo-gk:production": True})
    assert [w.message for w in run.warnings if w.urn == ""] == [
        "config key 'nemo-gk:production' is ignored: its namespace is not nemo-gke; did you mean nemo-gke:production?"
    ]
