"""The primary VPC (nodes, pods, services, NAT) and the GPU networks of each A3 variant."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from facts.errors import require, require_no_problem
from facts.gcp import resource_name_problem
from planners.networks import GpuNetworkPlan

IAP_RANGE = "35.235.240.0/20"
ALL_TRAFFIC = [{"protocol": "tcp"}, {"protocol": "udp"}, {"protocol": "icmp"}]


@dataclass(frozen=True)
class PrimaryNetworkArgs:
    name: str
    region: str
    node_cidr: str
    pod_cidr: str
    service_cidr: str
    # Larger MTUs for GPU machines; None keeps the VPC default.
    mtu: int | None
    iap_ssh: bool

    def __post_init__(self) -> None:
        require_no_problem(resource_name_problem(self.name, 63), "name", self.name)
        for key in ("node_cidr", "pod_cidr", "service_cidr"):
            ipaddress.IPv4Network(getattr(self, key))
        _check_mtu(self.mtu)


class PrimaryNetwork(pulumi.ComponentResource):
    """The VPC the nodes, pods, services and Filestore live on, with NAT instead of public IPs."""

    TYPE = "nemo:network:PrimaryNetwork"

    network_name: pulumi.Output[str]
    network_id: pulumi.Output[str]
    subnet_name: pulumi.Output[str]
    pods_range_name: str = "pods"
    services_range_name: str = "services"

    def __init__(self, name: str, args: PrimaryNetworkArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(self.TYPE, name, None, opts)
        network = gcp.compute.Network(
            f"{name}-vpc",
            name=args.name,
            auto_create_subnetworks=False,
            routing_mode="REGIONAL",
            mtu=args.mtu,
            description="Primary network: nodes, pods, services and shared storage.",
            opts=pulumi.ResourceOptions(parent=self),
        )
        subnet = gcp.compute.Subnetwork(
            f"{name}-subnet",
            name=args.name,
            region=args.region,
            network=network.id,
            ip_cidr_range=args.node_cidr,
            private_ip_google_access=True,
            secondary_ip_ranges=[
                {"range_name": self.pods_range_name, "ip_cidr_range": args.pod_cidr},
                {"range_name": self.services_range_name, "ip_cidr_range": args.service_cidr},
            ],
            opts=pulumi.ResourceOptions(parent=network),
        )
        gcp.compute.Firewall(
            f"{name}-internal",
            name=f"{args.name}-internal",
            network=network.id,
            direction="INGRESS",
            source_ranges=[args.node_cidr, args.pod_cidr],
            allows=ALL_TRAFFIC,
            description="Nodes and pods talk to each other; nothing else gets in.",
            opts=pulumi.ResourceOptions(parent=network),
        )
        if args.iap_ssh:
            gcp.compute.Firewall(
                f"{name}-iap-ssh",
                name=f"{args.name}-iap-ssh",
                network=network.id,
                direction="INGRESS",
                source_ranges=[IAP_RANGE],
                allows=[{"protocol": "tcp", "ports": ["22"]}],
                description="SSH through Identity-Aware Proxy only.",
                opts=pulumi.ResourceOptions(parent=network),
            )
        router = gcp.compute.Router(
            f"{name}-router",
            name=f"{args.name}-router",
            region=args.region,
            network=network.id,
            opts=pulumi.ResourceOptions(parent=network),
        )
        gcp.compute.RouterNat(
            f"{name}-nat",
            name=f"{args.name}-nat",
            router=router.name,
            region=args.region,
            nat_ip_allocate_option="AUTO_ONLY",
            source_subnetwork_ip_ranges_to_nat="ALL_SUBNETWORKS_ALL_IP_RANGES",
            log_config={"enable": True, "filter": "ERRORS_ONLY"},
            opts=pulumi.ResourceOptions(parent=router),
        )
        self.network_name = network.name
        self.network_id = network.id
        self.subnet_name = subnet.name
        self.register_outputs({"network_name": self.network_name, "subnet_name": self.subnet_name})


@dataclass(frozen=True)
class GpuNetworksArgs:
    project: str
    region: str
    zone: str
    plan: tuple[GpuNetworkPlan, ...]
    # None keeps the VPC default.
    mtu: int | None
    # Source range allowed between GPU NICs (the whole GPU address block).
    gpu_cidr: str

    def __post_init__(self) -> None:
        require(bool(self.plan), "plan", self.plan, "names at least one GPU network")
        names = [nic.kubernetes_name for nic in self.plan]
        require(len(set(names)) == len(names), "plan", names, "has each network once")
        require(
            all(ipaddress.IPv4Network(n.cidr).subnet_of(ipaddress.IPv4Network(self.gpu_cidr)) for n in self.plan),
            "plan",
            [n.cidr for n in self.plan],
            f"carves its subnets from gpu_cidr {self.gpu_cidr}",
        )
        _check_mtu(self.mtu)


def _check_mtu(mtu: int | None) -> None:
    # https://cloud.google.com/vpc/docs/mtu: 1300-8896 bytes.
    require(mtu is None or 1300 <= mtu <= 8896, "mtu", mtu, "must be 1300-8896 bytes")


class GpuNetworks(pulumi.ComponentResource):
    """One VPC per GPU NIC (TCPX/TCPXO), or a gVNIC VPC plus an RDMA VPC with one subnet per
    RDMA NIC (A3 Ultra, A4). Names come from the plan, so they never change under a workload."""

    TYPE = "nemo:network:GpuNetworks"

    # Shaped for NodePool.network_config.additional_node_network_configs, in NIC order.
    node_networks: list[dict[str, pulumi.Output[str]]]

    def __init__(self, name: str, args: GpuNetworksArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(self.TYPE, name, None, opts)
        networks: dict[str, gcp.compute.Network] = {}
        self.node_networks = []
        for nic in args.plan:
            network = networks.get(nic.vpc)
            if network is None:
                network = networks[nic.vpc] = self._network(name, nic, args)
            subnet = gcp.compute.Subnetwork(
                f"{name}-{nic.kubernetes_name}-subnet",
                name=nic.subnet,
                region=args.region,
                network=network.id,
                ip_cidr_range=nic.cidr,
                opts=pulumi.ResourceOptions(parent=network),
            )
            self.node_networks.append({"network": network.name, "subnetwork": subnet.name})
        self.register_outputs({"vpcs": [n.name for n in networks.values()]})

    def _network(self, name: str, nic: GpuNetworkPlan, args: GpuNetworksArgs) -> gcp.compute.Network:
        rdma = nic.device_mode == "RDMA"
        network = gcp.compute.Network(
            f"{name}-{nic.network_key}",
            name=nic.vpc,
            auto_create_subnetworks=False,
            routing_mode="REGIONAL",
            mtu=args.mtu,
            # RDMA NICs attach only to a VPC created with the zone's RoCE network profile.
            network_profile=f"projects/{args.project}/global/networkProfiles/{args.zone}-vpc-roce" if rdma else None,
            description=f"GPU network ({nic.device_mode}).",
            opts=pulumi.ResourceOptions(parent=self),
        )
        if not rdma:  # RoCE VPCs take no firewall rules.
            gcp.compute.Firewall(
                f"{name}-{nic.network_key}-internal",
                name=f"{nic.vpc}-internal",
                network=network.id,
                direction="INGRESS",
                source_ranges=[args.gpu_cidr],
                allows=ALL_TRAFFIC,
                description="GPU NICs talk to each other; nothing else gets in.",
                opts=pulumi.ResourceOptions(parent=network),
            )
        return network
