"""The shipped two-team stack (examples/Pulumi.teams.yaml) on the lane: 8 kwok nodes shaped like its
a3-ultra pool, the program's Cohort, team ClusterQueues and LocalQueues applied, and the real Kueue
(configured as the program configures it, fair sharing on) deciding who runs.

Runs are the stack's own JobSets, resized where a scenario needs another size (integration.runs.
resized): the queues see nothing else of a run. The scenarios run in order on one lane, each
starting from an empty cluster."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from facts.kubernetes import FABRIC_CHECK_PRIORITY, JOBSET_API, KUEUE_API, PRIORITY_CLASS_LABEL, QUEUE_NAME_LABEL
from harness.runner import StackRun, run_stack
from integration.controlplane import Api, Lane, has_condition, wait_for
from integration.lane import running
from integration.nodes import NEVER_READY_LABEL
from integration.runs import api_path, apply_objects, clear_runs, jobset_run, placed, resized, stack_objects
from planners.teams import Team
from stacks.contract import PlatformExports
from tools import waiting

# The control-plane time from the owner's submission until the borrower is preempted and the owner's
# run admitted and bound: Kueue's scheduler runs at once on a new workload, so this is seconds; it is
# bounded at 60 s, the target the recovery scenarios hold too.
RECLAIM_SECONDS = 60


@dataclass
class TeamsLane:
    run: StackRun
    lane: Lane
    api: Api
    teams: dict[str, Team]
    # The stack's run of each team, by team.
    jobsets: dict[str, dict[str, Any]]

    def submit(self, jobset: dict[str, Any]) -> None:
        self.api.create(api_path(jobset), jobset)

    def workloads(self, team: str) -> list[dict[str, Any]]:
        namespace = self.teams[team].namespace
        _, listing = self.api.request("GET", f"/apis/{KUEUE_API}/namespaces/{namespace}/workloads")
        return list(listing["items"])

    def admitted_nodes(self, team: str) -> int:
        """Nodes held by the team's admitted workloads (one pod per node)."""
        return sum(
            sum(p["count"] for p in w["spec"]["podSets"]) for w in self.workloads(team) if has_condition(w, "Admitted")
        )

    def clear(self) -> None:
        """Delete every JobSet and wait until no Workload or pod of any team is left."""
        clear_runs(self.lane, self.api, [team.namespace for team in self.teams.values()])


@pytest.fixture(scope="module")
def lane() -> Iterator[TeamsLane]:
    run = run_stack("teams")
    platform = PlatformExports.from_plain(run.exports["platform"])
    objects = stack_objects(run)
    jobsets = {m["metadata"]["namespace"]: m for m in objects if m["kind"] == "JobSet"}
    # Pods stay Running: a team holds its nodes until its run is preempted or deleted.
    with running(run, pods_complete=False) as (lane, started):
        apply_objects(lane, started.api, [m for m in objects if m["kind"] != "JobSet"])
        teams = {t.name: t for t in platform.teams}
        by_team = {name: jobsets[team.namespace] for name, team in teams.items()}
        yield TeamsLane(run, lane, started.api, teams, by_team)


def _name(jobset: dict[str, Any]) -> str:
    return str(jobset["metadata"]["name"])


def _nodes(jobset: dict[str, Any]) -> int:
    return int(jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["parallelism"])


def test_a_team_borrows_idle_quota_and_the_owner_takes_it_back(lane: TeamsLane) -> None:
    """Pretraining's 8-node run holds its own 2 nodes, the cohort's 4 and alignment's idle 2; when
    alignment submits its 2-node run, Kueue reclaims alignment's share (`reclaimWithinCohort: Any`):
    the borrower is preempted and the owner admitted and bound within RECLAIM_SECONDS."""
    lane.clear()
    borrower, owner = lane.jobsets["pretraining"], lane.jobsets["alignment"]
    pretraining, alignment = lane.teams["pretraining"], lane.teams["alignment"]
    assert _nodes(borrower) == 8 > sum(q.nodes for q in pretraining.quotas)
    lane.submit(borrower)
    with lane.lane.phase("the borrower admitted on 8 nodes"):
        wait_for("the borrower", lambda: placed(lane.api, pretraining.namespace, _name(borrower), 8), timeout=180)
    assert lane.admitted_nodes("pretraining") == 8

    started = time.monotonic()
    lane.submit(owner)
    wait_for(
        "the owner's run",
        lambda: (
            placed(lane.api, alignment.namespace, _name(owner), _nodes(owner))
            and lane.admitted_nodes("pretraining") == 0
        ),
        timeout=180,
    )
    took = time.monotonic() - started
    print(f"lane: teams: alignment reclaimed its share from pretraining in {took:.1f} s")
    assert took < RECLAIM_SECONDS
    (evicted,) = lane.workloads("pretraining")
    assert has_condition(evicted, "Preempted"), evicted["status"]["conditions"]
    # 6 nodes are free, and the borrower needs 8: it waits instead of taking alignment's share again.
    time.sleep(5)
    assert lane.admitted_nodes("pretraining") == 0 and lane.admitted_nodes("alignment") == 2


def test_why_is_my_run_waiting_says_it_in_each_state(lane: TeamsLane, capsys: pytest.CaptureFixture[str]) -> None:
    """`python -m tools.waiting` against the lane's API server, in the states the reclaim left: the
    borrower preempted and short of quota, the owner running, a run larger than its queue can ever
    hold, and a run that does not exist."""
    _, owner = lane.jobsets["pretraining"], lane.jobsets["alignment"]
    kubeconfig = ["--kubeconfig", str(lane.lane.workdir / "admin.kubeconfig"), "--context", "lane"]

    def waiting_for(run: str, team: str) -> tuple[int, str]:
        code = waiting.main([run, "-n", lane.teams[team].namespace, *kubeconfig])
        out = capsys.readouterr().out
        print(out, end="")
        return code, out

    code, out = waiting_for("llama3-8b-pretrain", "pretraining")
    assert code == 3, out
    assert f"preempted by JobSet alignment/{_name(owner)} (reclamation within the cohort)" in out
    assert "16 more GPUs needed (team alignment holds 16)" in out
    code, out = waiting_for("llama3-8b-ablation", "alignment")
    assert code == 0 and f"running: admitted in ClusterQueue alignment, {_nodes(owner)} pods ready" in out
    # alignment's share (2 nodes) and its borrowing limit (4) hold 6 nodes at most.
    lane.submit(resized(owner, "alignment-seven", 7))
    wait_for("the 7-node run's verdict", lambda: waiting_for("llama3-8b-ablation", "alignment")[0] == 4, timeout=60)
    assert waiting_for("no-such-run", "alignment")[0] == 5


def test_idle_capacity_goes_to_the_teams_by_weight(lane: TeamsLane) -> None:
    """Both teams ask for more than the pool (eight 1-node runs each): each gets its share, and the
    cohort's 4 unassigned nodes go 3:1 by weight (pretraining 3, alignment 1), so 5 and 3 nodes.
    Without fair sharing Kueue would hand them out in submission order."""
    lane.clear()
    pretraining, alignment = lane.teams["pretraining"], lane.teams["alignment"]
    shares = {t.name: sum(q.nodes for q in t.quotas) for t in (pretraining, alignment)}
    weights = {t.name: float(t.weight) for t in (pretraining, alignment)}
    spare = 8 - sum(shares.values())
    expected = {name: shares[name] + round(spare * weights[name] / sum(weights.values())) for name in shares}
    assert expected == {"pretraining": 5, "alignment": 3}
    for i in range(8):
        for team in ("alignment", "pretraining"):
            lane.submit(resized(lane.jobsets[team], f"{team}-{i}", 1))

    def settled() -> bool:
        return lane.lane.alive() and {name: lane.admitted_nodes(name) for name in shares} == expected

    with lane.lane.phase("sixteen 1-node runs shared by weight"):
        wait_for(f"admitted nodes {expected}", settled, timeout=240)
    time.sleep(5)
    assert settled(), {name: lane.admitted_nodes(name) for name in shares}
    print(f"lane: teams: admitted nodes by team {expected} (shares {shares}, weights {weights})")


def test_the_api_server_refuses_a_priority_the_team_may_not_use(lane: TeamsLane) -> None:
    """The team's ValidatingAdmissionPolicy (components.teams): alignment may use nemo-low and
    nemo-medium, so its JobSet at nemo-high is refused at the API server, and at nemo-low accepted;
    Kueue alone would admit any priority class."""
    lane.clear()
    jobset = resized(lane.jobsets["alignment"], "alignment-high", 1)
    jobset["metadata"]["labels"][PRIORITY_CLASS_LABEL] = "nemo-high"
    path = api_path(jobset)

    def refused() -> bool:
        # The API server enforces a new policy once its informers have it: until then the JobSet is
        # created, and taken away again.
        status, answer = lane.api.request("POST", path, jobset)
        if status in (201, 409):  # created, or the one created before is still being deleted
            lane.api.request("DELETE", f"{path}/{jobset['metadata']['name']}")
            return False
        assert status in (403, 422), (status, answer)
        assert "team alignment may use the priority classes nemo-low, nemo-medium" in answer["message"]
        return True

    wait_for("the team's admission policy", refused, timeout=60)
    jobset["metadata"]["labels"][PRIORITY_CLASS_LABEL] = "nemo-low"
    status, answer = lane.api.request("POST", api_path(jobset), jobset)
    assert status == 201, (status, answer)


def test_one_team_cannot_read_another_s_secrets_or_claims(lane: TeamsLane) -> None:
    """RBAC on the lane's API server, with the program's Roles and RoleBindings applied: a team's
    training identity is bound to nothing, so it reads no Secret or claim of the other team (nor of
    its own); a member of a team's Google group submits JobSets in its namespace and nowhere else,
    and reads no Secret of the other team."""
    pretraining = "system:serviceaccount:pretraining:nemo-training"
    accounts = ["system:serviceaccounts", "system:serviceaccounts:pretraining"]
    for resource in ("secrets", "persistentvolumeclaims"):
        assert not lane.api.allowed(pretraining, accounts, "get", resource, namespace="alignment")
        assert not lane.api.allowed(pretraining, accounts, "list", resource, namespace="alignment")
    member, groups = "someone@your-domain.com", ["alignment@your-domain.com", "system:authenticated"]
    assert lane.api.allowed(member, groups, "create", "jobsets", namespace="alignment", group="jobset.x-k8s.io")
    assert not lane.api.allowed(member, groups, "create", "jobsets", namespace="pretraining", group="jobset.x-k8s.io")
    assert not lane.api.allowed(member, groups, "get", "secrets", namespace="pretraining")


def test_a_member_cannot_step_around_the_team_s_queue(lane: TeamsLane) -> None:
    """A member of team alignment, through the real API server (impersonated by the lane's admin),
    tries each way around the team's queue and its pools' pod security; the team's admission policy
    refuses each
    (components.teams), while the member's run that queues as it should is created, and the
    stack's runs, whose Jobs the JobSet controller creates naming no queue, are admitted in the
    other scenarios. Without the queue rule a JobSet or Job naming no queue ran outside every
    quota: Kueue manages only jobs that name one, here only in the teams' namespaces."""
    lane.clear()
    member = ("someone@your-domain.com", "alignment@your-domain.com")
    team = lane.teams["alignment"]
    run = resized(lane.jobsets["alignment"], "member-run", 1)
    unqueued = resized(run, "no-queue", 1)
    del unqueued["metadata"]["labels"][QUEUE_NAME_LABEL]
    fabric = resized(run, "fabric-class", 1)
    fabric["metadata"]["labels"][PRIORITY_CLASS_LABEL] = FABRIC_CHECK_PRIORITY
    job_spec = {
        "suspend": False,
        "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}},
    }
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "no-queue-job"}, "spec": job_spec}
    forged = {
        **job,
        "metadata": {
            "name": "forged-owner",
            "ownerReferences": [
                {
                    "apiVersion": JOBSET_API,
                    "kind": "JobSet",
                    "name": "member-run",
                    "uid": "0a1b2c3d-0000-0000-0000-000000000000",
                }
            ],
        },
    }
    privileged = resized(run, "privileged", 1)
    pod = privileged["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    pod["containers"][0]["securityContext"] = {"privileged": True}
    root = resized(run, "host-root", 1)
    pod = root["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    pod["volumes"].append({"name": "root", "hostPath": {"path": "/"}})
    jobs_path = f"/apis/batch/v1/namespaces/{team.namespace}/jobs"
    attempts = {
        "a JobSet naming no queue": (api_path(unqueued), unqueued, "queue in its LocalQueue"),
        "a Job naming no queue": (jobs_path, job, "queue in its LocalQueue"),
        "a Job with a forged JobSet owner": (jobs_path, forged, "queue in its LocalQueue"),
        "the fabric check's priority class": (api_path(fabric), fabric, "is the fabric checks'"),
        # The namespace is privileged (its pools' pods mount the host's NCCL plugin): the team's
        # policy keeps out what those pods do not need.
        "a privileged container": (api_path(privileged), privileged, "may not use a privileged container"),
        "the node's root file system": (api_path(root), root, "may mount from the node only"),
    }

    def refused(path: str, body: dict[str, Any], why: str) -> bool:
        # The API server enforces a new policy once its informers have it (see the priority test).
        status, answer = lane.api.request("POST", path, body, as_user=member)
        if status in (201, 409):
            lane.api.request("DELETE", f"{path}/{body['metadata']['name']}?propagationPolicy=Background")
            return False
        assert status in (403, 422), (status, answer)
        assert why in answer["message"], answer["message"]
        return True

    for what, (path, body, why) in attempts.items():
        wait_for(f"{what} refused", lambda path=path, body=body, why=why: refused(path, body, why), timeout=60)
    status, answer = lane.api.request("POST", api_path(run), run, as_user=member)
    assert status == 201, (status, answer)
    tried = ", ".join(attempts)
    print(f"lane: teams: a member's {len(attempts)} ways around the queue refused ({tried}); its queued run created")


def test_a_reclaim_takes_seconds_while_another_run_is_not_ready(lane: TeamsLane) -> None:
    """Kueue's blockAdmission is cluster-wide: with it, a run whose pods are not ready (an image
    still pulling) held every admission, a reclaim included, for up to the 300 s timeout. With teams
    it is off (components.scheduling): pretraining's 1-node run never becomes ready, its 7-node
    borrower is admitted all the same, and alignment reclaims its share within RECLAIM_SECONDS."""
    lane.clear()
    pretraining, alignment = lane.teams["pretraining"], lane.teams["alignment"]
    stuck = resized(lane.jobsets["pretraining"], "never-ready", 1)
    stuck["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["metadata"]["labels"][NEVER_READY_LABEL] = "true"
    borrower = resized(lane.jobsets["pretraining"], "borrower", 7)
    owner = lane.jobsets["alignment"]
    lane.submit(stuck)
    wait_for("the stuck run admitted", lambda: placed(lane.api, pretraining.namespace, "never-ready", 1), timeout=60)
    lane.submit(borrower)
    wait_for("the borrower", lambda: placed(lane.api, pretraining.namespace, "borrower", 7), timeout=60)
    started = time.monotonic()
    lane.submit(owner)
    wait_for(
        "the owner's run",
        lambda: placed(lane.api, alignment.namespace, _name(owner), _nodes(owner)),
        timeout=RECLAIM_SECONDS,
    )
    took = time.monotonic() - started
    _, pods = jobset_run(lane.api, pretraining.namespace, "never-ready")
    assert pods and not any(has_condition(p, "Ready") for p in pods), "the stuck run's pods became ready"
    print(f"lane: teams: alignment reclaimed its share in {took:.1f} s while pretraining's run was not ready")
