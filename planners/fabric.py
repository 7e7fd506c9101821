"""A fabric check: nccl-tests across N nodes of a GPU pool, with the pool's GPUDirect wiring and
the binaries of the flavour's documented NCCL test (facts.nccl), queued through Kueue like a
run. It passes when every collective ran with no wrong result and, where a pass mark is
published for exactly this test, above it; a run may require a passed check first.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from facts import versions
from facts.errors import RuleError
from facts.machines import MachineType
from facts.nccl import NCCL_TEST_LAUNCH, PUBLISHED
from facts.versions import Image
from planners.queues import Flavor

NCCL_TEST_SCRIPT = "nccl_test.sh"
# nccl-tests fails a run whose average bus bandwidth is below 90 % of NCCL_TESTS_MIN_BW
# (NVIDIA/nccl-tests src/util.cu@a0b82b2): the pass mark is handed over divided by that.
MIN_BW_FACTOR = 0.9


@dataclass(frozen=True)
class NcclTestSpec:
    name: str
    pool: str
    nodes: int
    collectives: tuple[str, ...]
    # How long `pulumi up` waits for the check to pass when a run requires it.
    timeout_minutes: int = 60


def check_nccl_test(test: NcclTestSpec, flavors: Mapping[str, Flavor]) -> None:
    """Raise RuleError (key relative to the check) if the check cannot run on its pool."""
    if test.pool not in flavors:
        raise RuleError("pool", test.pool, f"is not a GPU pool of the environment; pools: {', '.join(flavors)}")
    flavor = flavors[test.pool]
    if flavor.machine.gpudirect not in NCCL_TEST_LAUNCH:
        raise RuleError(
            "pool", test.pool, f"{flavor.machine.name} has no GPUDirect fabric to check; its GPUs use the pod network"
        )
    if test.nodes > flavor.nodes:
        raise RuleError("nodes", test.nodes, f"pool {test.pool} holds at most {flavor.nodes} nodes")


def pass_marks(test: NcclTestSpec, machine: MachineType) -> dict[str, float]:
    """Per collective, the published pass mark (average bus bandwidth, GB/s) that applies to
    exactly this test: the published collective, node count and machine."""
    published = PUBLISHED[machine.gpudirect]
    if test.nodes != published.nodes or machine.name not in published.machines:
        return {}
    return {c: published.min_avg_busbw for c in test.collectives if c == published.collective}


# gIB's diagnostic images (nccl-tests, MPI, sshd) of known releases: a check runs the one of the
# release it installs where there is one, so the tests were built with the NCCL they load.
GIB_DIAGNOSTICS = (versions.GIB_DIAGNOSTIC, versions.GIB_DIAGNOSTIC_V110, versions.GIB_ARM64_DIAGNOSTIC)


def nccl_test_image(machine: MachineType, gib: Image | None = None) -> Image:
    """The image of the machine's GPUDirect stack's documented NCCL test; on an RDMA machine, its
    diagnostic image of the gIB release the check installs (`gib`) where one is published."""
    stack = machine.gpudirect_stack
    if stack is None:
        raise RuleError("machineType", machine.name, "has no GPUDirect fabric to check")
    same = [d for d in GIB_DIAGNOSTICS if gib and d.repository == stack.nccl_test_image.repository and d.tag == gib.tag]
    return same[0] if same else stack.nccl_test_image


def nccl_test_env(test: NcclTestSpec, machine: MachineType, results_dir: str) -> dict[str, str]:
    """What scripts/nccl_test.sh reads (beside the pod's GPUDirect environment)."""
    launch = NCCL_TEST_LAUNCH[machine.gpudirect]
    env = {
        "NNODES": str(test.nodes),
        "GPUS_PER_NODE": str(machine.gpus),
        "NCCL_TEST_DIR": results_dir,
        "NCCL_TEST_COLLECTIVES": " ".join(test.collectives),
        "NCCL_TEST_BEGIN": launch.begin,
        "NCCL_TEST_END": launch.end,
        "NCCL_TEST_SSHD": launch.sshd,
        "NCCL_TEST_RANK": " ".join(launch.rank_command),
        "NCCL_TEST_TIMEOUT_S": str(test.timeout_minutes * 60),
    }
    for collective, mark in pass_marks(test, machine).items():
        env[f"NCCL_TEST_MIN_BUSBW_{collective}"] = f"{mark / MIN_BW_FACTOR:.2f}"
    return env
