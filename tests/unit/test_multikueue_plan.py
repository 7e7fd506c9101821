"""The MultiKueue manager's planner (planners.multikueue), directly: merged flavors, the checks of
each worker and the advice on buckets (sources in the module's docstring)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from facts.errors import RuleError
from planners.multikueue import Worker, WorkerOffer, plan_manager, worker_name
from planners.queues import Flavor

ULTRA = Flavor(
    name="a3-ultra-bb9e66", pool="a3-ultra", machine_type="a3-ultragpu-8g", nodes=8, gpus=64,
    cpu_millicores=1_000_000, memory_mib=2_000_000, topology=True, queued=False,
)  # fmt: skip
MEGA = replace(ULTRA, name="a3-mega-0a1b2c", pool="a3-mega", machine_type="a3-megagpu-8g", nodes=4, gpus=32)
SHAPE = {"sharedClaim": "shared", "gke": True}


def offer(i: int, *flavors: Flavor, region: str = "us-east5", **changes: Any) -> WorkerOffer:
    stack = f"acme/nemo-gke/w{i}"
    worker = Worker(
        name=worker_name(stack), stack=stack, region=region, gke=True, gpu_networks=(), pools=(),
        flavors=flavors or (ULTRA,), data_bucket=f"data-{i}", checkpoint_bucket="ckpt",
    )  # fmt: skip
    fields: dict[str, Any] = {
        "key": f"multiKueue.workers[{i}]", "worker": worker, "kueue_version": "0.19.2", "jobset_version": "0.12.0",
        "namespaces": ("nemo",), "local_queue": "a3-queue", "run_shape": SHAPE,
    }  # fmt: skip
    return WorkerOffer(**{**fields, **changes})


def plan(*offers: WorkerOffer) -> Any:
    return plan_manager(offers, kueue_version="0.19.2", jobset_version="0.12.0", queues={"nemo": "a3-queue"})


def test_a_pool_alike_on_two_workers_is_one_flavor_with_both_capacities() -> None:
    found = plan(offer(0), offer(1, ULTRA, MEGA))
    merged = [(f.name, f.nodes, f.gpus) for f in found.flavors]
    assert merged == [("a3-ultra-bb9e66", 16, 128), ("a3-mega-0a1b2c", 4, 32)]
    assert found.flavors[0].cpu_millicores == 2 * ULTRA.cpu_millicores
    assert [w.name for w in found.workers] == ["w0", "w1"]


def test_a_worker_s_closed_pool_adds_nothing_to_the_manager_s_flavor() -> None:
    """A booked pool outside its booking as of its worker's `up` (Flavor.closed) takes no run
    there: the manager's flavor of the name holds the open workers' capacity, and is closed only
    where every worker's is."""
    closed = replace(ULTRA, closed="booked from 2026-12-14T00:00:00Z: ...")
    for first, second in ((closed, ULTRA), (ULTRA, closed)):
        (merged,) = plan(offer(0, first), offer(1, second)).flavors
        assert (merged.nodes, merged.gpus, merged.closed) == (8, 64, None)
    (both,) = plan(offer(0, closed), offer(1, closed)).flavors
    assert both.closed is not None


def test_a_pool_of_one_name_must_be_the_same_flavor_everywhere() -> None:
    other = replace(ULTRA, name="a3-ultra-ffffff")
    with pytest.raises(RuleError, match=r"unlike multiKueue.workers\[0\]'s pool") as error:
        plan(offer(0), offer(1, other))
    assert error.value.key == "multiKueue.workers[1]"


def test_kueue_and_jobset_versions_must_match_or_be_checked_by_hand() -> None:
    with pytest.raises(RuleError, match=r"runs JobSet 0\.11\.0 and this manager 0\.12\.0"):
        plan(offer(0), offer(1, jobset_version="0.11.0"))
    unknown = plan(offer(0, kueue_version=None))
    assert any("runs the cluster's own Kueue" in line and "0.19.2" in line for line in unknown.advice)


def test_a_worker_must_mirror_the_manager_s_namespaces_and_local_queue() -> None:
    with pytest.raises(RuleError, match="no LocalQueue a3-queue in namespace nemo"):
        plan(offer(0), offer(1, namespaces=("research",)))
    with pytest.raises(RuleError, match="no LocalQueue a3-queue in namespace nemo"):
        plan(offer(0, local_queue="other"))


def test_what_a_run_s_pods_name_is_alike_on_every_worker() -> None:
    with pytest.raises(RuleError, match=r"names sharedClaim 'nfs' where multiKueue\.workers\[0\] names 'shared'"):
        plan(offer(0), offer(1, run_shape={**SHAPE, "sharedClaim": "nfs"}))


def test_two_stacks_of_one_name_are_refused() -> None:
    twin = offer(1)
    twin = replace(twin, worker=replace(twin.worker, name="w0", stack="other/nemo-gke/w0"))
    with pytest.raises(RuleError, match="is named w0 in Kueue"):
        plan(offer(0), twin)


def test_worker_names_are_dns_labels_of_the_stack_name() -> None:
    assert worker_name("acme/nemo-gke/US_East.5") == "us-east-5"
    assert worker_name("organization/nemo-gke/worker-us") == "worker-us"


def test_buckets_shared_across_regions_and_separate_checkpoints_are_advised() -> None:
    shared = plan(offer(0), offer(1, region="europe-west1"))
    (line,) = shared.advice
    assert "share the checkpoint bucket ckpt from regions europe-west1, us-east5" in line and "0.02 USD per GiB" in line
    same_region = plan(offer(0), offer(1))
    assert same_region.advice == ()
    separate = offer(1)
    separate = replace(separate, worker=replace(separate.worker, checkpoint_bucket="ckpt-1"))
    (line,) = plan(offer(0), separate).advice
    assert "writes checkpoints" not in line and "starts from that worker's checkpoints" in line


def test_a_worker_with_authorized_networks_must_admit_the_manager_s_egress() -> None:
    """GKE refuses a control-plane connection from outside the authorized networks
    (https://cloud.google.com/kubernetes-engine/docs/how-to/authorized-networks), so MultiKueue
    could not reach such a worker: its MultiKueueCluster stays inactive and no run lands there."""
    guarded = offer(0, control_plane_ranges=("203.0.113.0/24",))

    def manager(egress: tuple[str, ...]) -> Any:
        return plan_manager(
            [guarded], kueue_version="0.19.2", jobset_version="0.12.0", queues={"nemo": "a3-queue"}, egress=egress
        )

    with pytest.raises(RuleError) as unset:
        manager(())
    assert unset.value.key == "multiKueue.egressRanges"
    assert "admits only 203.0.113.0/24 to its control plane" in str(unset.value)
    with pytest.raises(RuleError) as outside:
        manager(("198.51.100.7/32",))
    assert outside.value.key == "multiKueue.workers[0]"
    assert "not the manager's egress 198.51.100.7/32" in str(outside.value)
    assert manager(("203.0.113.7/32",)).workers
    assert plan(offer(0)).workers, "a worker open to any address needs no egress"
