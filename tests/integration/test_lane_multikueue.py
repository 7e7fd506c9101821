"""MultiKueue on the lane, all at once (Kueue's default dispatcher): a manager and two workers
(integration.federation).

The scenarios run in order on the same three clusters:
1. worker A full (a 4-node run of its own): a 2-node run submitted to the manager goes to B;
2. a 4-node run fits no worker: it waits, offered to both; once A is freed it goes to A;
3. B stops answering (its processes stopped): after Kueue's workerLostTimeout the run that was on B
   is dispatched again, to A, and bound there.
`python -m tools.waiting` on the manager says each state. Kueue v0.19.2's dispatcher, loss handling
and messages: pkg/controller/admissionchecks/multikueue/workload.go."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from facts.kubernetes import RUN_LABEL
from integration.controlplane import wait_for
from integration.federation import NAMESPACE, RUN, WORKERS, Federation, federation, why
from integration.runs import delete_jobset, jobset_run, placed, resized

# Kueue's multiKueue.workerLostTimeout on the lane (the program's lowest allowed is 10 s).
LOST_SECONDS = 15
# From a worker's loss until its run is bound on the other worker: the timeout, then Kueue's
# requeue and dispatch, seconds on the lane.
REDISPATCH_SECONDS = LOST_SECONDS + 60


@pytest.fixture(scope="module")
def three() -> Iterator[Federation]:
    with federation({"workers": list(WORKERS), "workerLostTimeoutSeconds": LOST_SECONDS}) as made:
        yield made


def test_with_worker_a_full_a_run_goes_to_worker_b(three: Federation) -> None:
    a, b = (three.workers[w] for w in WORKERS)
    filler = resized(three.local_run, "filler", 4)
    three.submit(a.api, filler)
    with a.lane.phase("worker A filled by a 4-node run of its own"):
        wait_for("the filler", lambda: placed(a.api, NAMESPACE, "filler", 4), timeout=180)

    run = three.run
    name, nodes = run["metadata"]["name"], 2
    assert run["spec"]["managedBy"] == "kueue.x-k8s.io/multikueue"
    started = time.monotonic()
    three.submit(three.manager.api, run)
    with three.manager.lane.phase("the run dispatched to B and bound there"):
        wait_for(
            "the run on B",
            lambda: three.dispatched_to(name) == "lane-b" and placed(b.api, NAMESPACE, name, nodes),
            timeout=180,
        )
    print(f"lane: multikueue: submitted to the manager, bound on worker B in {time.monotonic() - started:.1f} s")
    # The copy offered to A is gone once B admitted it; the manager runs no pod.
    wait_for("A's copy removed", lambda: jobset_run(a.api, NAMESPACE, name) == (None, []), timeout=60)
    _, pods = three.manager.api.request("GET", f"/api/v1/namespaces/{NAMESPACE}/pods")
    assert pods["items"] == []
    code, out = why(three, RUN)
    assert code == 0 and "dispatched by MultiKueue to worker lane-b, which admitted it" in out


def test_a_run_no_worker_has_room_for_waits_then_goes_to_the_freed_worker(three: Federation) -> None:
    a = three.workers["lane-a"]
    big = resized(three.run, "big", 4)
    big["metadata"]["labels"][RUN_LABEL] = "big"
    three.submit(three.manager.api, big)
    wait_for("the big run offered", lambda: bool(three.offered("big")), timeout=60)
    time.sleep(3)
    assert three.dispatched_to("big") is None
    code, out = why(three, "big")
    assert code == 3 and "offered by MultiKueue to workers" in out and "none of which has admitted it yet" in out

    delete_jobset(a.api, NAMESPACE, "filler")
    with three.manager.lane.phase("the big run dispatched to the freed worker A"):
        wait_for(
            "the big run on A",
            lambda: three.dispatched_to("big") == "lane-a" and placed(a.api, NAMESPACE, "big", 4),
            timeout=180,
        )
    delete_jobset(three.manager.api, NAMESPACE, "big")
    wait_for("A free again", lambda: jobset_run(a.api, NAMESPACE, "big") == (None, []), timeout=120)


def test_a_lost_worker_s_run_is_dispatched_again_after_the_timeout(three: Federation) -> None:
    a, b = (three.workers[w] for w in WORKERS)
    name = three.run["metadata"]["name"]
    assert three.dispatched_to(name) == "lane-b"
    lost = time.monotonic()
    b.lane.stop()
    with three.manager.lane.phase("the lost worker's run dispatched again to A"):
        wait_for(
            "the run on A",
            lambda: three.dispatched_to(name) == "lane-a" and placed(a.api, NAMESPACE, name, 2),
            timeout=REDISPATCH_SECONDS + 60,
        )
    took = time.monotonic() - lost
    print(
        f"lane: multikueue: worker B lost, its run bound on A {took:.1f} s later (workerLostTimeout {LOST_SECONDS} s)"
    )
    assert LOST_SECONDS <= took <= REDISPATCH_SECONDS, took
