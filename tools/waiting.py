"""Why is my run waiting: `python -m tools.waiting RUN [-n NAMESPACE] [--kubeconfig PATH] [--context C]`.

Reads the run's newest JobSet (label nemo-gke/run), its Kueue Workload and pods, the cluster's
Workloads and ClusterQueues, the namespace's fabric checks and the nodes NVSentinel quarantined
(where the reader may list nodes) through the Kubernetes API, with the
kubeconfig's credentials as kubectl would use them, and prints one sentence per blocker
(planners.waiting). Nothing is written.

Exit codes: 0 running or finished, 3 waiting, 4 failed or never admissible as it is, 5 no such run,
6 the server is not a Kubernetes API server serving JobSet and Kueue (so "no such run" would be a
guess), 2 bad arguments, 1 the cluster could not be read.
"""

from __future__ import annotations

import argparse
import os
import sys
import urllib.parse
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from facts.kubernetes import FABRIC_CHECK_LABEL, JOBSET_API, JOBSET_UID_LABEL, KUEUE_API, RUN_LABEL, dns_label_problem
from facts.nvsentinel import CORDON_BY, CORDON_BY_LABEL
from planners.waiting import Exit, RunObjects, diagnose
from stacks.kubeapi import ClusterUnreadable, Kubeconfig, connected


def _selector(selector: str) -> str:
    return "?labelSelector=" + urllib.parse.quote(selector, safe="")


def _items(listing: Any) -> list[dict[str, Any]]:
    if listing is None:
        return []
    if not isinstance(listing, dict) or not isinstance(listing.get("items", ...), list | None):
        raise ClusterUnreadable(f"a list was asked for and the server answered {str(listing)[:80]!r}")
    return list(listing.get("items") or [])


def platform_problem(get: Callable[[str], Any]) -> str | None:
    """Why the server is not one this command can answer for, from discovery: a Kubernetes API
    server (GET /api lists APIVersions) that serves the JobSet and Kueue versions the platform
    writes. Without this, a kubeconfig pointing elsewhere reads as "no such run"."""
    core = get("/api")
    if not isinstance(core, dict) or core.get("kind") != "APIVersions":
        return "GET /api does not list API versions: the kubeconfig's server is not a Kubernetes API server"
    for api, what in ((JOBSET_API, "JobSet"), (KUEUE_API, "Kueue")):
        if get(f"/apis/{api}") is None:
            return f"the cluster serves no {api}: {what} is not installed there (is this the platform's cluster?)"
    return None


def read_run(get: Callable[[str], Any], run: str, namespace: str, now: datetime) -> RunObjects:
    """Everything planners.waiting reads about the run, through one connection's GET."""
    jobsets = f"/apis/{JOBSET_API}/namespaces/{namespace}/jobsets"
    runs = _items(get(jobsets + _selector(f"{RUN_LABEL}={run}")))
    checks = _items(get(jobsets + _selector(FABRIC_CHECK_LABEL)))
    try:
        workloads = _items(get(f"/apis/{KUEUE_API}/workloads"))
        queues = _items(get(f"/apis/{KUEUE_API}/clusterqueues"))
    except ClusterUnreadable:
        # A team's submitters read their own namespace only (components.teams): no holders or
        # preemptors outside it, but the run's own blockers all the same.
        workloads, queues = _items(get(f"/apis/{KUEUE_API}/namespaces/{namespace}/workloads")), []
    try:
        quarantined = _items(get("/api/v1/nodes" + _selector(f"{CORDON_BY_LABEL}={CORDON_BY}")))
    except ClusterUnreadable:
        # A team's submitters may not list nodes (components.teams).
        quarantined = []
    jobset = max(runs, key=lambda j: j["metadata"]["creationTimestamp"], default=None)
    workload, pods = None, []
    if jobset is not None:
        uid = jobset["metadata"]["uid"]
        owned = [w for w in workloads if any(o.get("uid") == uid for o in w["metadata"].get("ownerReferences", []))]
        workload = owned[0] if owned else None
        pods = _items(get(f"/api/v1/namespaces/{namespace}/pods" + _selector(f"{JOBSET_UID_LABEL}={uid}")))
    return RunObjects(
        run=run,
        namespace=namespace,
        jobset=jobset,
        workload=workload,
        pods=pods,
        workloads=workloads,
        cluster_queues=queues,
        fabric_checks=checks,
        now=now,
        quarantined=quarantined,
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.waiting", description=__doc__.split("\n\n")[0])
    parser.add_argument("run", help="the run's name (training.runs[].name)")
    parser.add_argument("-n", "--namespace", default="nemo", help="its namespace: the platform's, or its team's")
    parser.add_argument("--kubeconfig", default=os.environ.get("KUBECONFIG", "~/.kube/config").split(os.pathsep)[0])
    parser.add_argument("--context", help="the kubeconfig's context (default: its current one)")
    args = parser.parse_args(argv)
    for flag, value in (("run", args.run), ("--namespace", args.namespace)):
        problem = dns_label_problem(value) if flag == "--namespace" else (None if value.strip() else "is empty")
        if problem:
            parser.error(f"{flag} {value!r}: {problem}")
    try:
        with connected(Kubeconfig(None, args.kubeconfig, args.context)) as get:
            problem = platform_problem(get)
            if problem:
                print(f"cannot answer for run {args.run}: {problem}", file=sys.stderr)
                return int(Exit.NOT_A_PLATFORM)
            objects = read_run(get, args.run, args.namespace, datetime.now(UTC))
    except ClusterUnreadable as error:
        print(f"cannot read the cluster: {error}", file=sys.stderr)
        return 1
    verdict = diagnose(objects)
    print(f"run {args.run} ({args.namespace}): {verdict.exit.name.lower().replace('_', ' ')}")
    for sentence in verdict.sentences:
        print(f"- {sentence}")
    return int(verdict.exit)


if __name__ == "__main__":
    sys.exit(main())
