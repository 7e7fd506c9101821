"""Kueue and JobSet upgraded under a running run, on the lane: the `existing` stack's platform
started with the releases before the pins (integration.controllers.PREVIOUS), its run admitted
and its pods bound; then the CRDs and managers moved to the pinned releases, as their charts'
upgrade moves them (the old managers stopped, the CRDs replaced, the new managers and webhooks
started). The run keeps its Workload, its admission and its pods, and a run submitted after is
admitted by the new Kueue. The scenario serves every later bump: PREVIOUS becomes the release
the new pin replaces."""

from __future__ import annotations

import functools
import time
from typing import Any

from facts.kubernetes import JOBSET_API
from harness.runner import run_stack
from integration.controllers import PINNED, PREVIOUS, lane_kueue_config, upgrade
from integration.controlplane import Api, has_condition, wait_for
from integration.lane import running
from integration.runs import admit_runs, api_path, jobset_run, placed, resized, stack_objects

# How long the new managers are left to reconcile what they found before the run is compared:
# Kueue's and JobSet's controllers resync every object they watch at start, within seconds.
SETTLE_SECONDS = 15


def _snapshot(api: Api, namespace: str, name: str) -> dict[str, Any]:
    """What an upgrade must not change of a running run: its Workload (uid, admission and when it
    was admitted, no eviction), its pods (uids, nodes, phase) and its JobSet's restarts."""
    workload, pods = jobset_run(api, namespace, name)
    assert workload is not None, f"run {name}: no Workload"
    conditions = {c["type"]: c for c in workload["status"].get("conditions", [])}
    _, jobset = api.request("GET", f"/apis/{JOBSET_API}/namespaces/{namespace}/jobsets/{name}")
    return {
        "workload": workload["metadata"]["uid"],
        "admitted": (conditions["Admitted"]["status"], conditions["Admitted"]["lastTransitionTime"]),
        "evicted": conditions.get("Evicted", {}).get("status", "False"),
        "admission": workload["status"]["admission"],
        "pods": sorted((p["metadata"]["uid"], p["spec"]["nodeName"], p["status"].get("phase")) for p in pods),
        "restarts": (jobset.get("status") or {}).get("restarts", 0),
    }


def test_an_upgrade_of_kueue_and_jobset_leaves_a_running_run_alone() -> None:
    run = run_stack("existing")
    (jobset,) = [m for m in stack_objects(run) if m["kind"] == "JobSet"]
    namespace, name = jobset["metadata"]["namespace"], jobset["metadata"]["name"]
    # Pods stay Running: the run is mid-training when the controllers move.
    with running(run, pods_complete=False, release=PREVIOUS) as (lane, started):
        api = started.api
        admit_runs(lane, api, run)
        before = _snapshot(api, namespace, name)
        assert before["admitted"][0] == "True" and before["pods"], before
        upgrade(lane, api, lane_kueue_config(run), PINNED)
        running_binaries = tuple(lane.processes[name].args[0] for name in ("kueue", "jobset"))
        assert running_binaries == tuple(map(str, PINNED.binaries())), running_binaries
        time.sleep(SETTLE_SECONDS)
        lane.check_alive()
        after = _snapshot(api, namespace, name)
        assert after == before, f"the upgrade from {PREVIOUS} to {PINNED} changed the run:\n{before}\n{after}"
        later = resized(jobset, "after-upgrade", 1)
        api.create(api_path(later), later)
        check = functools.partial(placed, api, namespace, "after-upgrade", 1)
        with lane.phase(f"a run submitted after the upgrade admitted by Kueue {PINNED.kueue.version}"):
            wait_for("the run submitted after the upgrade", lambda: lane.alive() and check(), timeout=120)
        workload, _ = jobset_run(api, namespace, "after-upgrade")
        assert workload is not None and has_condition(workload, "Admitted")
    print(
        f"lane: upgrade {PREVIOUS} → {PINNED}: run {name} kept its Workload, admission and "
        f"{len(before['pods'])} pods ({SETTLE_SECONDS} s after); a new run admitted after"
    )
