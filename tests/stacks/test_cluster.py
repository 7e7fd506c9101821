"""Cluster layer, per A3 variant: networks, GKE, node pools, identity and Kubernetes access."""

from __future__ import annotations

import ipaddress
import json
from typing import Any

import pytest
from pulumi.output import Unknown

from harness.mocks import RecordedResource
from harness.runner import StackFailed, StackRun, load_stack_values, run_stack, stack_with
from tests.conftest import MODES, NODE_POOL, gpu_pools, issue_for, rejected

NETWORK = "gcp:compute/network:Network"
SUBNET = "gcp:compute/subnetwork:Subnetwork"
FIREWALL = "gcp:compute/firewall:Firewall"
CLUSTER = "gcp:container/cluster:Cluster"


def networks(run: StackRun) -> dict[str, RecordedResource]:
    return {n.inputs["name"]: n for n in run.of_type(NETWORK)}


# --------------------------------------------------------------------------- networks per variant


@pytest.mark.parametrize(
    ("stack", "gpu_vpcs", "mtu"),
    [("dev", 4, 8244), ("a3mega", 8, 8244)],
)
def test_tcpx_and_tcpxo_get_one_gpu_vpc_per_gpu_nic(render: Any, stack: str, gpu_vpcs: int, mtu: int) -> None:
    run = render(stack)
    nets = networks(run)
    cluster = run.one(CLUSTER).inputs["name"]
    gpu = {name: n for name, n in nets.items() if name.startswith(f"{cluster}-gpu-")}
    assert sorted(gpu) == [f"{cluster}-gpu-{i}" for i in range(1, gpu_vpcs + 1)]
    assert len(nets) == gpu_vpcs + 1
    assert {n.inputs["mtu"] for n in nets.values()} == {mtu}
    assert all("networkProfile" not in n.inputs for n in nets.values())
    assert len([s for s in run.of_type(SUBNET) if s.inputs["name"].startswith(f"{cluster}-gpu-")]) == gpu_vpcs


def test_rdma_gets_a_gvnic_vpc_and_a_roce_vpc_with_eight_subnets(render: Any) -> None:
    run = render("a3ultra")
    nets = networks(run)
    assert sorted(nets) == ["nemo-a3ultra", "nemo-a3ultra-gvnic-1", "nemo-a3ultra-rdma"]
    assert {n.inputs["mtu"] for n in nets.values()} == {8896}
    rdma = nets["nemo-a3ultra-rdma"]
    assert rdma.inputs["networkProfile"] == "projects/your-gcp-project/global/networkProfiles/europe-west1-b-vpc-roce"
    rdma_subnets = [s for s in run.of_type(SUBNET) if rdma.urn in s.all_dependencies]
    assert sorted(s.inputs["name"] for s in rdma_subnets) == [f"nemo-a3ultra-rdma-{i}" for i in range(8)]
    # RoCE networks take no firewall rules.
    assert not [f for f in run.of_type(FIREWALL) if rdma.urn in f.all_dependencies]


def test_small_shapes_get_no_gpu_networks_and_no_multi_networking(render: Any) -> None:
    run = render("a3high-small")
    # a3-highgpu-8g (queued pool) brings TCPX networks; the small pools do not attach to them.
    small = [p for p in gpu_pools(run) if p.inputs["nodeConfig"]["machineType"] != "a3-highgpu-8g"]
    assert small and all("networkConfig" not in p.inputs for p in small)


def test_gpu_subnets_are_carved_from_the_gpu_range_without_overlap(render: Any) -> None:
    run = render("a3ultra")
    cidrs = [ipaddress.ip_network(s.inputs["ipCidrRange"]) for s in run.of_type(SUBNET)]
    for i, a in enumerate(cidrs):
        for b in cidrs[i + 1 :]:
            assert not a.overlaps(b), (a, b)


def test_the_primary_network_has_pod_and_service_ranges_nat_and_no_open_ingress(render: Any) -> None:
    run = render("dev")
    subnet = run.one(SUBNET, "cluster-network-subnet")
    assert [r["rangeName"] for r in subnet.inputs["secondaryIpRanges"]] == ["pods", "services"]
    assert subnet.inputs["privateIpGoogleAccess"] is True
    nat = run.one("gcp:compute/routerNat:RouterNat")
    assert nat.inputs["sourceSubnetworkIpRangesToNat"] == "ALL_SUBNETWORKS_ALL_IP_RANGES"
    for rule in run.of_type(FIREWALL):
        assert "0.0.0.0/0" not in rule.inputs["sourceRanges"], rule.name
    assert not [f for f in run.of_type(FIREWALL) if f.inputs["name"].endswith("iap-ssh")]


def test_iap_ssh_is_opt_in_and_limited_to_iap(render: Any) -> None:
    run = render("dev", values=stack_with("dev", network={"iapSsh": True}))
    rule = next(f for f in run.of_type(FIREWALL) if f.inputs["name"].endswith("iap-ssh"))
    assert rule.inputs["sourceRanges"] == ["35.235.240.0/20"]
    assert rule.inputs["allows"] == [{"protocol": "tcp", "ports": ["22"]}]


# --------------------------------------------------------------------------- the cluster


@MODES
def test_the_cluster_is_private_dataplane_v2_multi_network_with_workload_identity(render: Any, preview: bool) -> None:
    cluster = render("dev", preview=preview).one(CLUSTER).inputs
    assert cluster["privateClusterConfig"]["enablePrivateNodes"] is True
    assert cluster["datapathProvider"] == "ADVANCED_DATAPATH"
    assert cluster["enableMultiNetworking"] is True
    assert cluster["networkingMode"] == "VPC_NATIVE"
    assert cluster["workloadIdentityConfig"] == {"workloadPool": "your-gcp-project.svc.id.goog"}
    assert cluster["removeDefaultNodePool"] is True
    assert cluster["enableShieldedNodes"] is True
    addons = cluster["addonsConfig"]
    for driver in ("gcpFilestoreCsiDriverConfig", "gcsFuseCsiDriverConfig", "gcePersistentDiskCsiDriverConfig"):
        assert addons[driver] == {"enabled": True}, driver
    assert "DCGM" in cluster["monitoringConfig"]["enableComponents"]
    assert cluster["monitoringConfig"]["managedPrometheus"] == {"enabled": True}
    assert cluster["releaseChannel"] == {"channel": "REGULAR"}
    assert cluster["maintenancePolicy"]["recurringWindow"]["recurrence"] == "FREQ=WEEKLY;BYDAY=SA,SU"
    assert cluster["deletionProtection"] is False


def test_a_small_shape_cluster_without_gpu_nics_skips_multi_networking(render: Any) -> None:
    pools = [{"name": "h100x4", "machineType": "a3-highgpu-4g", "nodeCount": 2, "capacity": {"type": "spot"}}]
    run = render("dev", values=stack_with("dev", gpuPools=pools, training={}))
    assert run.one(CLUSTER).inputs["enableMultiNetworking"] is False
    assert not run.of_type("kubernetes:networking.gke.io/v1:Network")


def test_production_turns_deletion_protection_on(render: Any) -> None:
    assert render("a3mega").one(CLUSTER).inputs["deletionProtection"] is True


def test_authorized_networks_and_maintenance_exclusions_come_from_config(render: Any) -> None:
    cluster = render("a3mega").one(CLUSTER).inputs
    assert cluster["masterAuthorizedNetworksConfig"]["cidrBlocks"] == [
        {"cidrBlock": "203.0.113.0/24", "displayName": "platform-team"}
    ]
    exclusion = {"name": "freeze", "startTime": "2026-12-20T00:00:00Z", "endTime": "2027-01-04T00:00:00Z"}
    run = render("dev", values=stack_with("dev", cluster={"maintenanceExclusions": [exclusion]}))
    made, _ = run.one(CLUSTER).inputs["maintenancePolicy"]["maintenanceExclusions"]
    assert made["exclusionName"] == "freeze"
    assert made["exclusionOptions"] == {"scope": "NO_MINOR_OR_NODE_UPGRADES"}


@pytest.mark.parametrize("stack", ["dev", "a3mega", "a3ultra", "a3ultra-flex", "a3high-small"])
def test_gke_never_drains_a_gpu_node_to_upgrade_it_unless_told_to(render: Any, stack: str) -> None:
    """A3 pools auto-upgrade: a node upgrade drains the node and kills the run on it, and the
    weekend window does not wait for a run to end. By default the cluster carries the exclusion
    cluster-toolkit's A3 Ultra and A4 examples set (examples/gke-a3-ultragpu/gke-a3-ultragpu.yaml
    @1047080): scope NO_MINOR_OR_NODE_UPGRADES, no end date but the version's end of support
    (exclusion_options.end_time_behavior, which terraform-provider-google's
    resource_container_cluster.go allows only as UNTIL_END_OF_SUPPORT, with no end_time)."""
    exclusions = render(stack).one(CLUSTER).inputs["maintenancePolicy"]["maintenanceExclusions"]
    standing = {e["exclusionName"]: e for e in exclusions}["no-minor-or-node-upgrades-indefinite"]
    assert standing["exclusionOptions"] == {
        "scope": "NO_MINOR_OR_NODE_UPGRADES",
        "endTimeBehavior": "UNTIL_END_OF_SUPPORT",
    }
    assert "endTime" not in standing and standing["startTime"] == "2025-12-01T00:00:00Z"
    cluster = {**load_stack_values(stack).get("nemo-gke:cluster", {}), "pauseNodeUpgrades": False}
    off = render(stack, values=stack_with(stack, cluster=cluster)).one(CLUSTER).inputs["maintenancePolicy"]
    assert "no-minor-or-node-upgrades-indefinite" not in {
        e["exclusionName"] for e in off.get("maintenanceExclusions", [])
    }


def test_an_exclusion_may_not_take_the_standing_exclusion_s_name() -> None:
    exclusion = {"name": "no-minor-or-node-upgrades-indefinite", "startTime": "2026-12-20T00:00:00Z",
                 "endTime": "2027-01-04T00:00:00Z"}  # fmt: skip
    error = rejected(stack_with("dev", cluster={"maintenanceExclusions": [exclusion]}))
    assert "pauseNodeUpgrades" in issue_for(error, "cluster.maintenanceExclusions[0].name")


def test_the_cluster_starts_at_the_channel_version_and_never_diffs_on_upgrades(render: Any) -> None:
    cluster = render("dev").one(CLUSTER)
    assert cluster.inputs["minMasterVersion"] == "1.34.1-gke.1829001"  # the mocked REGULAR default
    assert cluster.ignore_changes == ["minMasterVersion"]


def test_a_channel_older_than_a_pool_needs_is_refused_by_key_before_anything_is_registered() -> None:
    """Checked in the component's apply, the rule reached the user as 141 lines of tracebacks under
    the engine; read before the first resource, it is one line naming the key."""
    # The mocked EXTENDED default (1.32.9) is older than a3-megagpu-8g's floor (1.32.11).
    values = stack_with("a3mega", cluster={"releaseChannel": "EXTENDED", "name": "nemo-a3mega"})
    with pytest.raises(StackFailed) as failure:
        run_stack("a3mega", values=values)
    assert failure.value.resources == []
    why = issue_for(failure.value.error, "cluster.releaseChannel")
    assert "defaults to GKE 1.32.9-gke.1108000" in why and "older than 1.32.11-gke.1174000" in why
    assert why.endswith("choose RAPID or REGULAR or STABLE"), why


def test_the_control_plane_can_reach_the_controllers_webhooks(render: Any) -> None:
    run = render("dev")
    rule = next(f for f in run.of_type(FIREWALL) if f.name == "cluster-gke-controller-webhooks")
    assert rule.inputs["sourceRanges"] == ["172.16.0.0/28"]
    assert set(rule.inputs["allows"][0]["ports"]) == {"9443", "8082"}


# --------------------------------------------------------------------------- node pools


@pytest.mark.parametrize(
    ("stack", "machine", "accelerator", "ssds", "nics", "disk"),
    [
        ("dev", "a3-highgpu-8g", "nvidia-h100-80gb", 16, 4, "pd-ssd"),
        ("a3mega", "a3-megagpu-8g", "nvidia-h100-mega-80gb", 16, 8, "pd-ssd"),
        ("a3ultra", "a3-ultragpu-8g", "nvidia-h200-141gb", 32, 9, "hyperdisk-balanced"),
    ],
)
def test_gpu_pools_per_variant(
    render: Any, stack: str, machine: str, accelerator: str, ssds: int, nics: int, disk: str
) -> None:
    (pool,) = gpu_pools(render(stack))
    node = pool.inputs["nodeConfig"]
    assert node["machineType"] == machine
    assert node["guestAccelerators"] == [
        {"type": accelerator, "count": 8, "gpuDriverInstallationConfig": {"gpuDriverVersion": "LATEST"}}
    ]
    assert node["gvnic"] == {"enabled": True}
    assert node["ephemeralStorageLocalSsdConfig"] == {"localSsdCount": ssds}
    assert node["bootDisk"]["diskType"] == disk
    assert len(pool.inputs["networkConfig"]["additionalNodeNetworkConfigs"]) == nics
    assert node["workloadMetadataConfig"] == {"mode": "GKE_METADATA"}
    assert {"key": "nvidia.com/gpu", "value": "present", "effect": "NO_SCHEDULE"} in node["taints"]
    assert pool.inputs["upgradeSettings"] == {"strategy": "SURGE", "maxSurge": 0, "maxUnavailable": 1}
    assert pool.delete_before_replace
    assert pool.custom_timeouts["create"] == "90m"


def test_the_gpu_nics_are_wired_to_the_gpu_vpcs_in_order(render: Any) -> None:
    run = render("dev")
    (pool,) = gpu_pools(run)
    wired = pool.inputs["networkConfig"]["additionalNodeNetworkConfigs"]
    assert wired == [{"network": f"nemo-dev-gpu-{i}", "subnetwork": f"nemo-dev-gpu-{i}"} for i in range(1, 5)]


def test_multi_node_pools_are_compact_by_default(render: Any) -> None:
    assert gpu_pools(render("dev"))[0].inputs["placementPolicy"] == {"type": "COMPACT"}
    run = render(
        "dev",
        values=stack_with(
            "dev", gpuPools=[{"name": "one", "machineType": "a3-highgpu-8g", "nodeCount": 1}], training={}
        ),
    )
    assert "placementPolicy" not in gpu_pools(run)[0].inputs


def test_nodes_run_as_a_dedicated_least_privilege_service_account(render: Any) -> None:
    run = render("dev")
    account = run.one("gcp:serviceaccount/account:Account")
    assert account.inputs["accountId"] == "nemo-dev-nodes"
    email = "nemo-dev-nodes@your-gcp-project.iam.gserviceaccount.com"
    for pool in run.of_type(NODE_POOL):
        assert pool.inputs["nodeConfig"]["serviceAccount"] == email
        assert "compute@developer" not in pool.inputs["nodeConfig"]["serviceAccount"]
    roles = {m.inputs["role"] for m in run.of_type("gcp:projects/iAMMember:IAMMember")}
    # Image streaming with a node account of its own needs Service Usage Consumer in the images' project
    # (https://cloud.google.com/kubernetes-engine/docs/how-to/image-streaming#requirements).
    assert roles == {
        "roles/container.defaultNodeServiceAccount",
        "roles/artifactregistry.reader",
        "roles/serviceusage.serviceUsageConsumer",
    }
    grants = run.of_type("gcp:projects/iAMMember:IAMMember")
    for pool in run.of_type(NODE_POOL):
        for grant in grants:
            assert run.depends_on(pool, grant), f"{pool.name} starts before {grant.inputs['role']} is granted"


def test_the_system_pool_is_e2_standard_4(render: Any) -> None:
    system = render("dev").one(NODE_POOL, "cluster-gke-system").inputs
    assert system["nodeConfig"]["machineType"] == "e2-standard-4"
    assert system["nodeCount"] == 1


# --------------------------------------------------------------------------- capacity modes


def test_a_reservation_pool_consumes_the_specific_reservation_block(render: Any) -> None:
    (pool,) = gpu_pools(render("a3ultra"))
    assert pool.inputs["nodeConfig"]["reservationAffinity"] == {
        "consumeReservationType": "SPECIFIC_RESERVATION",
        "key": "compute.googleapis.com/reservation-name",
        "values": ["projects/your-gcp-project/reservations/your-a3ultra-reservation/reservationBlocks/your-block"],
    }


def test_spot_pools_are_spot_without_reservations(render: Any) -> None:
    spot = [p for p in gpu_pools(render("a3high-small")) if p.inputs["nodeConfig"].get("spot")]
    assert len(spot) == 2
    for pool in spot:
        assert pool.inputs["nodeConfig"]["reservationAffinity"] == {"consumeReservationType": "NO_RESERVATION"}


def test_a_flex_start_pool_scales_from_zero_without_repair_in_a_workload_policy(render: Any) -> None:
    run = render("a3ultra-flex")
    (pool,) = gpu_pools(run)
    inputs, node = pool.inputs, pool.inputs["nodeConfig"]
    assert node["flexStart"] is True and node["maxRunDuration"] == "86400s"
    assert inputs["autoscaling"] == {"totalMinNodeCount": 0, "totalMaxNodeCount": 8, "locationPolicy": "ANY"}
    assert inputs["initialNodeCount"] == 0 and "nodeCount" not in inputs
    assert inputs["management"]["autoRepair"] is False
    policy = run.one("gcp:compute/resourcePolicy:ResourcePolicy")
    assert policy.inputs["workloadPolicy"] == {"type": "HIGH_THROUGHPUT", "maxTopologyDistance": "CLUSTER"}
    assert inputs["placementPolicy"] == {"type": "COMPACT", "policyName": policy.inputs["name"]}


def test_a_queued_provisioning_pool_is_queued_flex_start_and_not_compact_and_leaves_its_taint_to_gke(
    render: Any,
) -> None:
    """GKE taints queued-provisioning nodes with cloud.google.com/gke-queued itself, and keys under
    cloud.google.com/ are GKE's (hashicorp/terraform-provider-google#19677): the pool sets neither
    that taint nor a label; the Kueue flavor tolerates the taint (tests/stacks/test_platform.py)."""
    (pool,) = [p for p in gpu_pools(render("a3high-small")) if p.inputs.get("queuedProvisioning")]
    node = pool.inputs["nodeConfig"]
    assert pool.inputs["queuedProvisioning"] == {"enabled": True}
    assert node["taints"] == [{"key": "nvidia.com/gpu", "value": "present", "effect": "NO_SCHEDULE"}]
    assert "labels" not in node
    assert node["flexStart"] is True
    assert "placementPolicy" not in pool.inputs
    assert "upgradeSettings" not in pool.inputs
    assert node["reservationAffinity"] == {"consumeReservationType": "NO_RESERVATION"}


# --------------------------------------------------------------------------- Kubernetes access


@MODES
def test_the_kubeconfig_is_secret_and_uses_the_gcloud_exec_plugin(render: Any, preview: bool) -> None:
    run = render("dev", preview=preview)
    assert "kubeconfig" in run.secret_exports
    provider = run.one("pulumi:providers:kubernetes")
    wire = provider.inputs["kubeconfig"]
    assert "4dabf18193072939515e22adb298388d" in wire, "the kubeconfig reaches the provider as a secret"
    if preview:
        assert isinstance(wire["value"], Unknown), "unknown until the cluster exists"
        return
    kubeconfig = json.loads(wire["value"])
    user = kubeconfig["users"][0]["user"]
    assert set(user) == {"exec"}, "no token or client certificate in state"
    assert user["exec"]["command"] == "gke-gcloud-auth-plugin"


def test_the_kubernetes_provider_survives_credential_rotation_and_waits_only_for_the_system_pool(render: Any) -> None:
    run = render("dev")
    provider = run.one("pulumi:providers:kubernetes")
    cluster = run.one(CLUSTER)
    assert provider.inputs["clusterIdentifier"] == "projects/your-gcp-project/locations/us-central1-c/clusters/nemo-dev"
    system = run.one(NODE_POOL, "cluster-gke-system")
    assert run.depends_on(provider, system) and run.depends_on(provider, cluster)
    for pool in gpu_pools(run):
        assert not run.depends_on(provider, pool)


def test_a_bad_cluster_name_is_rejected_before_anything_exists() -> None:
    message = issue_for(rejected(stack_with("dev", cluster={"name": "Nemo_Dev"})), "cluster.name")
    assert message.startswith('nemo-gke:cluster.name = "Nemo_Dev": must be 1-24 characters of lower-case letters')


# --------------------------------------------------------------------------- advice


def test_placeholders_are_warned_about_on_the_resource_they_concern(render: Any) -> None:
    warnings = {(w.resource_name, w.message) for w in render("a3mega").warnings}
    assert (
        "cluster",
        "nemo-gke:project 'your-gcp-project' is a placeholder: `pulumi config set nemo-gke:project <your project ID>`",
    ) in warnings
    assert (
        "cluster-a3-mega",
        "gpuPools a3-mega: capacity.reservation 'your-a3mega-reservation' is the example's placeholder: set your own",
    ) in warnings


def test_a_zone_that_offers_no_such_machine_is_refused_naming_the_key_the_user_wrote() -> None:
    """The catalog lists the zones where each machine type is offered (facts.machines, with sources)."""
    message = issue_for(rejected(stack_with("dev", region="us-west2", zone="us-west2-a")), "zone")
    assert 'nemo-gke:zone = "us-west2-a": offers no a3-highgpu-8g as far as the catalog knows' in message
    assert "us-central1-c" in message and "set gpuPools[0].allowUnlistedZone: true" in message
    pool = {"name": "h", "machineType": "a3-highgpu-8g", "nodeCount": 2, "zone": "us-central1-f"}
    message = issue_for(rejected(stack_with("dev", gpuPools=[pool], training={})), "gpuPools[0].zone")
    assert "offers no a3-highgpu-8g" in message


# A control plane only one address reaches: no warning about it.
CLOSED = {"masterAuthorizedNetworks": [{"cidr": "203.0.113.7/32"}]}


def test_an_unlisted_zone_the_user_vouches_for_is_warned_about(render: Any) -> None:
    pool = {"name": "a3-highgpu", "machineType": "a3-highgpu-8g", "nodeCount": 2, "allowUnlistedZone": True}
    values = stack_with(
        "dev", project="acme-ml-prod", region="us-west2", zone="us-west2-a", gpuPools=[pool], cluster=CLOSED
    )
    (warning,) = render("dev", values=values).warnings
    assert warning.resource_name == "cluster-a3-highgpu"
    assert "the catalog cannot confirm a3-highgpu-8g capacity in us-west2-a" in warning.message


def test_a_real_project_in_a_listed_zone_renders_without_a_warning(render: Any) -> None:
    assert render("dev", values=stack_with("dev", project="acme-ml-prod", cluster=CLOSED)).warnings == []


@pytest.mark.parametrize(
    "cluster",
    [{}, {"masterAuthorizedNetworks": [{"cidr": "0.0.0.0/0", "displayName": "everyone"}]}],
    ids=["default", "all-addresses"],
)
def test_a_control_plane_open_to_any_address_is_warned_about_with_the_command_that_closes_it(
    render: Any, cluster: dict[str, Any]
) -> None:
    """GKE's public endpoint takes any address when masterAuthorizedNetworksConfig is unset or
    holds 0.0.0.0/0 (https://cloud.google.com/kubernetes-engine/docs/how-to/authorized-networks)."""
    run = render("dev", values=stack_with("dev", project="acme-ml-prod", cluster=cluster))
    (warning,) = run.warnings
    assert warning.resource_name == "cluster"
    assert "accepts connections from any address" in warning.message
    command = "pulumi config set --path 'nemo-gke:cluster.masterAuthorizedNetworks[0].cidr' <your egress address>/32"
    assert command in warning.message
    network = run.one("gcp:container/cluster:Cluster").inputs.get("masterAuthorizedNetworksConfig")
    assert cluster or network is None


def test_the_one_command_closes_it_a_display_name_defaults_to_the_range(render: Any) -> None:
    run = render("dev", values=stack_with("dev", project="acme-ml-prod", cluster=CLOSED))
    blocks = run.one("gcp:container/cluster:Cluster").inputs["masterAuthorizedNetworksConfig"]["cidrBlocks"]
    assert blocks == [{"cidrBlock": "203.0.113.7/32", "displayName": "203.0.113.7/32"}]


def test_an_authorized_address_without_its_prefix_length_is_refused(render: Any) -> None:
    with pytest.raises(StackFailed) as failed:
        render("dev", values=stack_with("dev", cluster={"masterAuthorizedNetworks": [{"cidr": "203.0.113.7"}]}))
    assert str(failed.value.error).splitlines()[1:] == [
        '  nemo-gke:cluster.masterAuthorizedNetworks[0].cidr = "203.0.113.7": must be an IPv4 range in CIDR '
        "notation, with its prefix length, such as 203.0.113.7/32"
    ]
