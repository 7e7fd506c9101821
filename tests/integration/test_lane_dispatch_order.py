"""MultiKueue on the lane, in order (`multiKueue.dispatch: inOrder`): the manager lists lane-b
before lane-a, against the alphabetical order Kueue used before v0.19 (integration.federation).

Kueue's incremental dispatcher nominates one more worker a round, in MultiKueueConfig
spec.clusters' order, when none of those nominated has admitted the run within its round of
5 minutes, a constant (pkg/controller/workloaddispatcher/incrementaldispatcher.go, v0.19.2). The
scenarios run in order on the same three clusters:
1. both workers free: the run is offered to lane-b alone and runs there;
2. lane-b full (the first run and a 2-node run of its own): a 2-node run is offered to lane-b
   alone, waits there for the round, and is then offered to lane-a too and runs there.
Under the default dispatcher both runs are offered to both workers at once."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from facts.kubernetes import RUN_LABEL
from facts.kueue import MULTIKUEUE_DISPATCH_ROUND_SECONDS
from integration.controlplane import wait_for
from integration.federation import NAMESPACE, Cluster, Federation, federation, why
from integration.runs import jobset_run, placed, resized

ORDER = ("lane-b", "lane-a")
# From the round's end until the run is bound on the next worker: Kueue's copy, admission and
# the pods' binding, seconds on the lane.
DISPATCH_SECONDS = 60


@pytest.fixture(scope="module")
def in_order() -> Iterator[Federation]:
    with federation({"workers": list(ORDER), "dispatch": "inOrder"}) as made:
        yield made


def test_a_run_goes_to_the_first_worker_and_is_offered_to_no_other(in_order: Federation) -> None:
    """Kueue clears status.nominatedClusterNames once a worker admits the run
    (pkg/controller/admissionchecks/multikueue/workload.go), which can be within one poll: the
    second worker's events tell instead, as a copy offered there leaves them (its Workload and
    JobSet created, then removed) even after it is gone."""
    first, second = (in_order.workers[w] for w in ORDER)
    name = in_order.run["metadata"]["name"]
    offered: set[str] = set()

    def on_first() -> bool:
        offered.update(in_order.offered(name))
        return in_order.dispatched_to(name) == "lane-b" and placed(first.api, NAMESPACE, name, 2)

    in_order.submit(in_order.manager.api, in_order.run)
    with in_order.manager.lane.phase("the run dispatched to the first worker"):
        wait_for("the run on lane-b", on_first, timeout=180)
    assert offered <= {"lane-b"}, offered
    assert jobset_run(second.api, NAMESPACE, name) == (None, [])
    assert not _events_about(second, name), _events_about(second, name)


def _events_about(cluster: Cluster, name: str) -> list[str]:
    """The events of the run's namespace on a cluster about an object named after the run."""
    _, listing = cluster.api.request("GET", f"/api/v1/namespaces/{NAMESPACE}/events")
    return [
        f"{e['involvedObject']['kind']}/{e['involvedObject']['name']} {e['reason']}"
        for e in listing.get("items", [])
        if name in e["involvedObject"]["name"]
    ]


def test_with_the_first_worker_full_a_run_moves_to_the_next_after_one_round(in_order: Federation) -> None:
    first, second = (in_order.workers[w] for w in ORDER)
    # lane-b keeps the first run (2 nodes) and takes a 2-node run of its own: full.
    filler = resized(in_order.local_run, "filler", 2)
    in_order.submit(first.api, filler)
    with first.lane.phase("lane-b filled"):
        wait_for("the filler", lambda: placed(first.api, NAMESPACE, "filler", 2), timeout=180)

    late = resized(in_order.run, "late", 2)
    late["metadata"]["labels"][RUN_LABEL] = "late"
    started = time.monotonic()
    in_order.submit(in_order.manager.api, late)
    wait_for("the late run offered", lambda: in_order.offered("late") == ["lane-b"], timeout=60)
    code, out = why(in_order, "late")
    assert code == 3 and "offered by MultiKueue to workers lane-b, none of which has admitted it yet" in out
    time.sleep(30)
    assert in_order.offered("late") == ["lane-b"] and jobset_run(second.api, NAMESPACE, "late") == (None, [])
    with in_order.manager.lane.phase("the late run offered to lane-a after the round and bound there"):
        wait_for(
            "the late run on lane-a",
            lambda: in_order.dispatched_to("late") == "lane-a" and placed(second.api, NAMESPACE, "late", 2),
            timeout=MULTIKUEUE_DISPATCH_ROUND_SECONDS + DISPATCH_SECONDS,
        )
    took = time.monotonic() - started
    print(f"lane: multikueue in order: lane-b full, the run bound on lane-a {took:.1f} s after it was submitted")
    assert MULTIKUEUE_DISPATCH_ROUND_SECONDS <= took <= MULTIKUEUE_DISPATCH_ROUND_SECONDS + DISPATCH_SECONDS, took
