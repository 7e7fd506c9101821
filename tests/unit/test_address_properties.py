"""Property-based tests of the address plan and pool-size rules, through the config parser: for
any ranges and pools hypothesis draws, the stack is accepted exactly when GKE and VPC could hold
it, as computed here from the rules themselves (each cited), and refused otherwise with a key
that names a range that is too small or overlapping."""

from __future__ import annotations

import ipaddress
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from config.base import parse_cidr
from config.cluster import NetworkConfig
from config.loader import ConfigError, parse_stack_config
from facts.errors import RuleError
from facts.project import PROJECT
from harness.stackfile import to_pulumi_config
from planners.networks import gpu_subnets

KEYS = ("nodeCidr", "podCidr", "serviceCidr", "gpuCidr", "controlPlaneCidr")
# Every subnet loses four addresses (https://cloud.google.com/vpc/docs/subnets#unusable-ip-addresses-in-every-subnet).
RESERVED = 4


def pod_range_per_node(max_pods: int) -> int:
    """GKE's flexible Pod CIDR table as published (the program computes it; this reads the table):
    8 pods /28, 9-16 /27, 17-32 /26, 33-64 /25, 65-128 /24, 129-256 /23 (https://cloud.google.com/kubernetes-engine/docs/how-to/flexible-pod-cidr)."""
    for most, prefix in ((8, 28), (16, 27), (32, 26), (64, 25), (128, 24), (256, 23)):
        if max_pods <= most:
            return 2 ** (32 - prefix)
    raise AssertionError(max_pods)


def network(draw: Any, low: int, high: int) -> str:
    prefix = draw(st.integers(low, high))
    address = draw(st.integers(0, 2**32 - 1)) & ~((1 << (32 - prefix)) - 1) & 0xFFFFFFFF
    return f"{ipaddress.IPv4Address(address)}/{prefix}"


@st.composite
def address_plans(draw: Any) -> dict[str, str]:
    """Five ranges that overlap now and then: addresses drawn from a small space."""
    plan = {key: network(draw, 8, 30) for key in KEYS}
    if draw(st.booleans()):
        plan["controlPlaneCidr"] = network(draw, 28, 28)
    return plan


def rule_key(data: dict[str, str]) -> str | None:
    try:
        NetworkConfig.from_plain(data)
    except ValidationError as error:
        cause = error.errors()[0]["ctx"]["error"]
        assert isinstance(cause, RuleError), cause
        return cause.key
    return None


@settings(max_examples=300, deadline=None)
@given(address_plans())
def test_an_address_plan_is_accepted_exactly_when_its_ranges_are_disjoint_and_sized(plan: dict[str, str]) -> None:
    nets = {key: ipaddress.IPv4Network(value) for key, value in plan.items()}
    overlapping = {b for i, a in enumerate(KEYS) for b in KEYS[i + 1 :] if nets[a].overlaps(nets[b])}
    sized = nets["controlPlaneCidr"].prefixlen == 28 and nets["gpuCidr"].prefixlen <= 25
    key = rule_key(plan)
    if sized and not overlapping:
        assert key is None
    else:
        assert key is not None
        assert key in overlapping or (not sized and key in ("controlPlaneCidr", "gpuCidr")), (key, overlapping)


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(0, 32))
def test_a_range_is_taken_only_aligned_and_with_its_prefix(address: int, prefix: int) -> None:
    """GKE takes ranges "in CIDR notation": host bits set, or no prefix length at all, is refused
    naming the key, and a bare address is answered with its /32."""
    text = str(ipaddress.IPv4Address(address))
    aligned = address & ((1 << (32 - prefix)) - 1) == 0
    try:
        parsed = parse_cidr("cidr", f"{text}/{prefix}")
    except RuleError as error:
        assert not aligned and error.key == "cidr"
    else:
        assert aligned and parsed == ipaddress.IPv4Network(f"{text}/{prefix}")
    try:
        parse_cidr("cidr", text)
    except RuleError as error:
        assert error.key == "cidr" and f"{text}/32" in str(error)
    else:
        raise AssertionError(f"{text} without a prefix was taken")


POOL_MACHINES = ("a3-highgpu-1g", "a3-megagpu-8g")  # one NIC, and eight GPU NICs


@st.composite
def sized_stacks(draw: Any) -> dict[str, Any]:
    """Disjoint ranges of drawn sizes (each in its own /10 or block), a system pool and one to
    three GPU pools of drawn sizes and pods per node."""
    pools = [
        {
            "name": f"pool{i}",
            "machineType": draw(st.sampled_from(POOL_MACHINES)),
            "nodeCount": draw(st.integers(0, 600)),
            "maxPodsPerNode": draw(st.integers(8, 256)),
            "placement": "none",
        }
        for i in range(draw(st.integers(1, 3)))
    ]
    return {
        f"{PROJECT}:project": "property-test",
        f"{PROJECT}:region": "us-central1",
        f"{PROJECT}:zone": "us-central1-a",
        f"{PROJECT}:systemPool": {"nodeCount": draw(st.integers(1, 5))},
        f"{PROJECT}:network": {
            "nodeCidr": f"10.0.0.0/{draw(st.integers(18, 29))}",
            "podCidr": f"10.64.0.0/{draw(st.integers(12, 24))}",
            "serviceCidr": "10.128.0.0/20",
            "gpuCidr": f"192.168.0.0/{draw(st.integers(16, 25))}",
            "controlPlaneCidr": "172.16.0.0/28",
        },
        f"{PROJECT}:gpuPools": pools,
        f"{PROJECT}:training": {},
    }


def too_small(values: dict[str, Any]) -> set[str]:
    """The ranges GKE and VPC could not fit the pools into."""
    net = {k: ipaddress.IPv4Network(v) for k, v in values[f"{PROJECT}:network"].items()}
    pools = values[f"{PROJECT}:gpuPools"]
    # The system pool's nodes (a zonal cluster: one zone) and a surge node for its upgrades.
    system = values[f"{PROJECT}:systemPool"]["nodeCount"] + 1
    found = set()
    if system + sum(p["nodeCount"] for p in pools) > net["nodeCidr"].num_addresses - RESERVED:
        found.add("network.nodeCidr")
    multi_nic = sum(p["nodeCount"] for p in pools if p["machineType"] == "a3-megagpu-8g")
    if multi_nic > net["gpuCidr"].num_addresses // 16 - RESERVED:
        found.add("network.gpuCidr")
    # CPU pools keep GKE's default of 110 pods per node.
    pods = system * pod_range_per_node(110) + sum(
        p["nodeCount"] * pod_range_per_node(p["maxPodsPerNode"]) for p in pools
    )
    if pods > net["podCidr"].num_addresses:
        found.add("network.podCidr")
    return found


@settings(max_examples=300, deadline=None)
@given(sized_stacks())
def test_pools_are_accepted_exactly_when_their_addresses_fit(values: dict[str, Any]) -> None:
    expected = too_small(values)
    try:
        config = parse_stack_config(to_pulumi_config(values), "property")
    except ConfigError as error:
        keys = {issue.key for issue in error.issues}
        assert expected and keys <= expected, ([str(i) for i in error.issues], expected)
        return
    assert not expected, expected
    subnets = [ipaddress.IPv4Network(s) for s in gpu_subnets(config.network.gpu_cidr)]
    block = ipaddress.IPv4Network(config.network.gpu_cidr)
    assert len(subnets) == 16 and all(s.subnet_of(block) for s in subnets)
    assert len({s.network_address for s in subnets}) == 16
    multi_nic = sum(p.max_nodes for p in config.gpu_pools if p.machine.is_multi_nic)
    assert all(s.num_addresses - RESERVED >= multi_nic for s in subnets)
