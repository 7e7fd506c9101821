"""Teams (config.teams, planners.teams, components.teams): one ClusterQueue per team in one cohort,
the unassigned capacity held by the cohort, each team in its own namespace with its own identities
and claims, and every job checked against its team before anything is registered."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from facts.errors import RuleError
from facts.kubernetes import GPU_RESOURCE
from facts.kueue import FAIR_SHARING_STRATEGIES
from harness.cel import policy_refusals
from harness.runner import StackRun, stack_with
from planners.queues import Flavor
from planners.teams import ShareRequest, TeamRequest, plan_teams
from stacks.contract import PlatformExports
from tests.conftest import Render, issue_for, rejected
from tools.summary import markdown

CLUSTER_QUEUE = "kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue"
LOCAL_QUEUE = "kubernetes:kueue.x-k8s.io/v1beta2:LocalQueue"
COHORT = "kubernetes:kueue.x-k8s.io/v1beta2:Cohort"
JOBSET = "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"

TWO_TEAMS = [
    {"name": "red", "quota": [{"pool": "a3-highgpu", "nodes": 1}]},
    {"name": "blue", "quota": [{"pool": "a3-highgpu", "gpus": 8}], "weight": 2},
]


def _flavor(nodes: int = 8, gpus_per_node: int = 8) -> Flavor:
    return Flavor(
        name="pool-abc123",
        pool="pool",
        machine_type="a3-ultragpu-8g",
        nodes=nodes,
        gpus=gpus_per_node * nodes,
        cpu_millicores=1000 * nodes,
        memory_mib=2048 * nodes,
        topology=True,
        queued=False,
    )


def _team(name: str, amount: int, unit: str = "nodes", **share: Any) -> TeamRequest:
    return TeamRequest(
        name=name,
        namespace=name,
        shares=(ShareRequest("pool", unit, amount, **share),),
        weight=1.0,
        priorities=("nemo-medium",),
    )


def _plan(*teams: TeamRequest, overcommit: bool = False, nodes: int = 8) -> Any:
    return plan_teams(teams, [_flavor(nodes)], cohort="nemo", local_queue="q", overcommit=overcommit)


# --------------------------------------------------------------------------- the planner


def test_shares_in_gpus_become_nodes_and_the_rest_is_the_cohorts() -> None:
    plan = _plan(_team("a", 2), _team("b", 24, "gpus", borrowing_limit=16, lending_limit=8))
    assert [q.nodes for t in plan.teams for q in t.quotas] == [2, 3]
    (b,) = plan.teams[1].quotas
    assert (b.borrowing_nodes, b.lending_nodes) == (2, 1)
    assert plan.unassigned == (("pool-abc123", 3),)


def test_a_share_of_part_of_a_node_is_refused() -> None:
    """A run takes every GPU of its nodes, so 12 GPUs of 8-GPU nodes could admit one node at most."""
    with pytest.raises(RuleError) as error:
        _plan(_team("a", 12, "gpus"))
    assert error.value.key == "teams[0].quota[0].gpus" and "multiple of 8" in str(error.value)


def test_guarantees_beyond_the_pool_are_refused_with_the_excess() -> None:
    with pytest.raises(RuleError) as error:
        _plan(_team("a", 6), _team("b", 5))
    assert error.value.key == "teams"
    assert "guarantee 11 nodes of pool pool, which holds 8 (a 6, b 5): over by 3" in str(error.value)
    assert "kueue.overcommit" in str(error.value)


def test_overcommitment_when_asked_leaves_the_cohort_nothing() -> None:
    plan = _plan(_team("a", 6), _team("b", 5), overcommit=True)
    assert plan.unassigned == (("pool-abc123", 0),)


def test_a_share_of_an_unknown_pool_is_refused() -> None:
    team = TeamRequest("a", "a", (ShareRequest("other", "nodes", 1),), 1.0, ("nemo-medium",))
    with pytest.raises(RuleError) as error:
        _plan(team)
    assert error.value.key == "teams[0].quota[0].pool"


# --------------------------------------------------------------------------- config refusals


def _red(**quota: Any) -> list[dict[str, Any]]:
    return [{"name": "red", "quota": [{"pool": "a3-highgpu", **quota}]}]


@pytest.mark.parametrize(
    ("teams", "key", "words"),
    [
        ([TWO_TEAMS[0], {**TWO_TEAMS[1], "name": "red"}], "teams[1].name", "teams[0]'s"),
        ([{**TWO_TEAMS[0], "namespace": "nemo"}], "teams[0].namespace", "the platform's namespace"),
        ([{**TWO_TEAMS[0], "namespace": "kube-system"}], "teams[0].namespace", "not a namespace"),
        ([{"name": "red", "quota": [{"pool": "nope", "nodes": 1}]}], "teams[0].quota[0].pool", "a3-highgpu"),
        (_red(nodes=3), "teams", "over by 1"),
        (_red(gpus=4), "teams[0].quota[0].gpus", "multiple of 8"),
        (_red(nodes=1, gpus=8), "teams[0].quota[0].nodes", "exactly one of nodes and gpus"),
        (
            _red(nodes=1, lendingLimit=2),
            "teams[0].quota[0].lendingLimit",
            "is in nodes, as the share is, and must not exceed the team's share (1 nodes)",
        ),
        ([{**_red(nodes=1)[0], "name": "Red"}], "teams[0].name", "DNS label"),
        ([{**TWO_TEAMS[0], "groups": ["not-an-email"]}], "teams[0].groups[0]", "email"),
    ],
)
def test_bad_teams_are_refused_by_key(teams: list[dict[str, Any]], key: str, words: str) -> None:
    error = rejected(stack_with("dev", teams=teams))
    assert words in issue_for(error, key)


def test_overcommitment_is_allowed_when_asked(render: Render) -> None:
    teams = [{"name": "red", "quota": [{"pool": "a3-highgpu", "nodes": 2}]}, TWO_TEAMS[1]]
    values = stack_with("dev", teams=teams, kueue={"overcommit": True}, training={"runs": [_run(team="red")]})
    run = render("dev", values=values)
    assert {q.name for q in run.of_type(CLUSTER_QUEUE)} == {
        "platform-queues-team-red-cluster-queue",
        "platform-queues-team-blue-cluster-queue",
    }


def _run(**fields: Any) -> dict[str, Any]:
    return {"name": "r", "model": "llama3-8b", "nodes": 1, "steps": 10, **fields}


@pytest.mark.parametrize(
    ("run", "key", "words"),
    [
        (_run(), "training.runs[0].team", "is required: the platform's pools are shared by teams (red, blue)"),
        (_run(team="green"), "training.runs[0].team", "not a team of the platform"),
        (_run(team="red", priority="nemo-high"), "training.runs[0].priority", "not one team red may use"),
    ],
)
def test_a_run_names_a_team_of_the_platform_and_keeps_to_its_priorities(
    run: dict[str, Any], key: str, words: str
) -> None:
    teams = [{**TWO_TEAMS[0], "priorities": ["nemo-low", "nemo-medium"]}, TWO_TEAMS[1]]
    error = rejected(stack_with("dev", teams=teams, training={"runs": [run]}))
    assert words in issue_for(error, key)


def test_a_run_on_a_pool_outside_its_teams_quota_is_refused() -> None:
    pools = [
        {"name": "a3-highgpu", "machineType": "a3-highgpu-8g", "nodeCount": 2},
        {"name": "other", "machineType": "a3-highgpu-8g", "nodeCount": 1},
    ]
    teams = [TWO_TEAMS[0], {**TWO_TEAMS[1], "quota": [{"pool": "other", "nodes": 1}]}]
    error = rejected(
        stack_with("dev", gpuPools=pools, teams=teams, training={"runs": [_run(team="red", pool="other")]})
    )
    assert "not a pool of team red's quota (a3-highgpu)" in issue_for(error, "training.runs[0].pool")


def test_a_team_on_a_platform_without_teams_is_refused() -> None:
    error = rejected(stack_with("dev", training={"runs": [_run(team="red")]}))
    assert "the platform has none" in issue_for(error, "training.runs[0].team")


def test_a_teams_data_preparation_writes_only_its_folder() -> None:
    job = {"name": "prep", "input": "raw/*.jsonl", "outputPrefix": "datasets/wiki", "team": "red"}
    error = rejected(stack_with("dev", teams=TWO_TEAMS, training={"dataPrep": [job]}))
    assert "must start with red/" in issue_for(error, "training.dataPrep[0].outputPrefix")


def test_existing_claims_cannot_serve_teams() -> None:
    values = stack_with("existing")
    pool = values["nemo-gke:existingCluster"]["gpuPools"][0]["name"]
    cluster = {**values["nemo-gke:existingCluster"], "namespaceExists": True, "claims": {"shared": "logs"}}
    values.update(
        {
            "nemo-gke:existingCluster": cluster,
            "nemo-gke:teams": [{"name": "red", "quota": [{"pool": pool, "nodes": 1}]}],
        }
    )
    error = rejected(values, stack="existing")
    assert "each team needs its own" in issue_for(error, "existingCluster.claims")


# --------------------------------------------------------------------------- what the teams stack creates


def _manifests(run: StackRun, typ: str) -> dict[str, dict[str, Any]]:
    return {m["metadata"]["name"]: m for m in map(run.manifest, run.of_type(typ))}


def test_each_team_has_a_cluster_queue_in_the_cohort_that_takes_its_share_back(render: Render) -> None:
    """reclaimWithinCohort Any: an owner takes its nominal quota back from borrowers of any priority;
    borrowWithinCohort stays unset (Never), the only value Kueue allows with fair sharing
    (apis/kueue/v1beta2/clusterqueue_types.go, BorrowWithinCohort)."""
    run = render("teams")
    queues = _manifests(run, CLUSTER_QUEUE)
    assert set(queues) == {"pretraining", "alignment"}
    for name, queue in queues.items():
        spec = queue["spec"]
        assert spec["cohortName"] == "nemo"
        assert spec["preemption"] == {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}
        assert spec["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": name}}
    assert queues["pretraining"]["spec"]["fairSharing"] == {"weight": "3"}
    assert queues["alignment"]["spec"]["fairSharing"] == {"weight": "1"}


def _gpus(spec: dict[str, Any]) -> int:
    (group,) = spec["resourceGroups"]
    (flavor,) = group["flavors"]
    return sum(int(r["nominalQuota"]) for r in flavor["resources"] if r["name"] == GPU_RESOURCE)


def test_the_cohort_holds_what_no_team_is_guaranteed(render: Render) -> None:
    """Teams' shares and the cohort's own quota add up to the pool, GPU by GPU."""
    run = render("teams")
    (cohort,) = _manifests(run, COHORT).values()
    queues = _manifests(run, CLUSTER_QUEUE)
    assert _gpus(cohort["spec"]) == 32
    assert _gpus(cohort["spec"]) + sum(_gpus(q["spec"]) for q in queues.values()) == 8 * 8


def test_fair_sharing_is_configured_only_with_teams(render: Render) -> None:
    """Kueue turns fair sharing on for the whole cluster wherever the section is present
    (pkg/scheduler/preemption/fairsharing/strategy.go, Enabled), so a stack without teams has none."""

    def configuration(stack: str) -> dict[str, Any]:
        releases = render(stack).of_type("kubernetes:helm.sh/v3:Release")
        (release,) = [r for r in releases if r.inputs["name"] == "kueue"]
        return dict(yaml.safe_load(release.inputs["values"]["managerConfig"]["controllerManagerConfigYaml"]))

    assert configuration("teams")["fairSharing"] == {"preemptionStrategies": [s.value for s in FAIR_SHARING_STRATEGIES]}
    assert "fairSharing" not in configuration("dev")


def _kueue_configuration(render: Render, stack: str) -> dict[str, Any]:
    releases = render(stack).of_type("kubernetes:helm.sh/v3:Release")
    (release,) = [r for r in releases if r.inputs["name"] == "kueue"]
    return dict(yaml.safe_load(release.inputs["values"]["managerConfig"]["controllerManagerConfigYaml"]))


def test_kueue_manages_every_job_of_the_teams_namespaces_and_only_there(render: Render) -> None:
    """Kueue suspends and queues a job only where it names a queue, unless it manages jobs without
    one (pkg/controller/jobframework/utils.go WorkloadShouldBeSuspended): in the teams' namespaces it
    does, so a job that slipped past the team's admission policy still waits for a quota; elsewhere
    (kube-system, the platform's own) it does not."""
    config = _kueue_configuration(render, "teams")
    assert config["manageJobsWithoutQueueName"] is True
    assert config["managedJobsNamespaceSelector"] == {
        "matchExpressions": [
            {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["alignment", "pretraining"]}
        ]
    }
    assert "manageJobsWithoutQueueName" not in _kueue_configuration(render, "dev")


def test_with_teams_one_run_starting_blocks_no_other_team(render: Render) -> None:
    """waitForPodsReady.blockAdmission holds every admission in the cluster while any admitted run's
    pods are not ready (pkg/cache/scheduler/cache.go podsReadyForAllAdmittedWorkloads): with teams,
    one team's run pulling its image would hold the other's reclaim for up to the timeout. Teams
    turn it off; the timeout still evicts a run whose pods never start. Without teams it stays on."""
    teams = _kueue_configuration(render, "teams")["waitForPodsReady"]
    assert teams["blockAdmission"] is False and teams["timeout"]
    assert _kueue_configuration(render, "dev")["waitForPodsReady"]["blockAdmission"] is True


def test_each_team_submits_to_its_own_local_queue_and_runs_there(render: Render) -> None:
    run = render("teams")
    local = [run.manifest(q) for q in run.of_type(LOCAL_QUEUE)]
    assert sorted((q["metadata"]["namespace"], q["spec"]["clusterQueue"]) for q in local) == [
        ("alignment", "alignment"),
        ("pretraining", "pretraining"),
    ]
    platform = PlatformExports.from_plain(run.exports["platform"])
    for jobset in map(run.manifest, run.of_type(JOBSET)):
        namespace = jobset["metadata"]["namespace"]
        assert namespace in {t.namespace for t in platform.teams}
        assert jobset["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "a3-queue"
        # Logs go to the team's folder of the shared file system.
        assert f"/nfs/nemo-experiments/{namespace}/" in json.dumps(jobset)


def test_a_teams_runs_write_only_its_checkpoint_folder(render: Render) -> None:
    """Only the team's training identity may write its managed folder, and its checkpoint volume
    mounts that folder alone; no team identity is granted write on a whole bucket."""
    run = render("teams")
    members = list(run.of_type("gcp:storage/managedFolderIamMember:ManagedFolderIamMember"))
    for team in ("pretraining", "alignment"):
        (checkpoints,) = [m for m in members if m.name == f"platform-team-{team}-checkpoints-write"]
        assert checkpoints.inputs["role"] == "roles/storage.objectUser"
        assert checkpoints.inputs["member"].endswith(f"/subject/ns/{team}/sa/nemo-training")
        (folder,) = [
            f
            for f in run.of_type("gcp:storage/managedFolder:ManagedFolder")
            if f.name == f"platform-team-{team}-checkpoints-folder"
        ]
        assert folder.inputs["name"] == f"{team}/"
        volume = run.manifest(
            next(
                v
                for v in run.of_type("kubernetes:core/v1:PersistentVolume")
                if v.name == f"platform-team-{team}-checkpoints-volume"
            )
        )
        assert f"only-dir={team}" in volume["spec"]["mountOptions"]
    bucket_members = run.of_type("gcp:storage/bucketIAMMember:BucketIAMMember")
    for member in bucket_members:
        if "/subject/ns/pretraining/" in member.inputs["member"] or "/subject/ns/alignment/" in member.inputs["member"]:
            assert member.inputs["role"] == "roles/storage.objectViewer", member.name


def test_team_service_accounts_are_bound_to_nothing_and_groups_to_their_namespace(render: Render) -> None:
    run = render("teams")
    bindings = [run.manifest(b) for b in run.of_type("kubernetes:rbac.authorization.k8s.io/v1:RoleBinding")]
    assert sorted((b["metadata"]["namespace"], b["subjects"][0]["name"]) for b in bindings) == [
        ("alignment", "alignment@your-domain.com"),
        ("pretraining", "pretraining@your-domain.com"),
    ]
    assert all(s["kind"] == "Group" for b in bindings for s in b["subjects"])
    cluster_bindings = [
        run.manifest(b) for b in run.of_type("kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding")
    ]
    assert not [
        s for b in cluster_bindings for s in b["subjects"] if s.get("namespace") in {"pretraining", "alignment"}
    ]


def test_groups_on_gke_need_google_groups_for_rbac(render: Render) -> None:
    """GKE resolves a RoleBinding's Google group only where the cluster names its security group
    (https://cloud.google.com/kubernetes-engine/docs/how-to/google-groups-rbac)."""
    teams = [{**TWO_TEAMS[0], "groups": ["red@example.com"]}, TWO_TEAMS[1]]
    runs = {"runs": [_run(team="red")]}
    error = rejected(stack_with("dev", teams=teams, training=runs))
    assert "cluster.rbacSecurityGroup" in issue_for(error, "teams[0].groups")
    run = render(
        "dev",
        values=stack_with(
            "dev", teams=teams, training=runs, cluster={"rbacSecurityGroup": "gke-security-groups@example.com"}
        ),
    )
    (cluster,) = run.of_type("gcp:container/cluster:Cluster")
    assert cluster.inputs["authenticatorGroupsConfig"] == {"securityGroup": "gke-security-groups@example.com"}
    (dev,) = render("dev").of_type("gcp:container/cluster:Cluster")
    assert "authenticatorGroupsConfig" not in dev.inputs


def test_only_gke_s_security_group_name_is_taken() -> None:
    error = rejected(stack_with("dev", cluster={"rbacSecurityGroup": "admins@example.com"}))
    assert "gke-security-groups@<your domain>" in issue_for(error, "cluster.rbacSecurityGroup")


MEMBER = ("someone@your-domain.com", ("alignment@your-domain.com", "system:authenticated"))
JOBSET_CONTROLLER = ("system:serviceaccount:jobset-system:jobset-controller", ("system:serviceaccounts",))


def test_each_team_s_queue_and_priorities_are_enforced_by_the_api_server(render: Render) -> None:
    """Kueue runs a job that names no queue outside every quota and lets one name any queue or
    WorkloadPriorityClass, so the team's ValidatingAdmissionPolicy refuses, in its namespace, a
    JobSet or Job that does not queue in the team's LocalQueue, a priority class the team may not
    use, and the fabric check's class from a member. The Jobs a JobSet creates pass by who creates
    them (the JobSet controller's service account), not by an owner reference a member can write.
    The expressions are evaluated here with CEL; the lane's API server enforces them
    (tests/integration/test_lane_teams.py)."""
    run = render("teams")
    policies = _manifests(run, "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy")
    bindings = _manifests(run, "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding")
    assert set(policies) == set(bindings) == {"nemo-team-alignment", "nemo-team-pretraining"}
    binding = bindings["nemo-team-alignment"]["spec"]
    assert binding["matchResources"]["namespaceSelector"] == {
        "matchLabels": {"kubernetes.io/metadata.name": "alignment"}
    }
    assert binding["validationActions"] == ["Deny"]
    policy = policies["nemo-team-alignment"]
    (queue,) = [
        t.local_queue for t in PlatformExports.from_plain(run.exports["platform"]).teams if t.name == "alignment"
    ]

    def jobset(priority: str | None, pod_class: str | None = None, queue_name: str | None = queue) -> Any:
        labels = {
            **({"kueue.x-k8s.io/priority-class": priority} if priority else {}),
            **({"kueue.x-k8s.io/queue-name": queue_name} if queue_name else {}),
        }
        pod = {"priorityClassName": pod_class} if pod_class else {}
        template = {"template": {"spec": {"template": {"spec": pod}}}}
        return {"metadata": {"labels": labels}, "spec": {"replicatedJobs": [template]}}

    def job(queue_name: str | None, **meta: Any) -> Any:
        labels = {"kueue.x-k8s.io/queue-name": queue_name} if queue_name else {}
        return {"metadata": {"labels": labels, **meta}, "spec": {"template": {"spec": {}}}}

    queue_refused = f"team alignment's jobs queue in its LocalQueue {queue}"
    priority_refused = "team alignment may use the priority classes nemo-low, nemo-medium"
    assert policy_refusals(policy, jobset("nemo-low"), user=MEMBER) == []
    assert policy_refusals(policy, job(queue), user=MEMBER) == []
    # A LocalQueue's name is its namespace's: any other names a queue the team was not given.
    for unqueued in (jobset("nemo-low", queue_name=None), jobset("nemo-low", queue_name="borrowed"), job(None)):
        (message,) = policy_refusals(policy, unqueued, user=MEMBER)
        assert message.startswith(queue_refused), message
    # An owner reference names a JobSet, and anyone can write one: not a way around the queue.
    forged = job(None, ownerReferences=[{"kind": "JobSet", "apiVersion": "jobset.x-k8s.io/v1alpha2"}])
    assert [m[: len(queue_refused)] for m in policy_refusals(policy, forged, user=MEMBER)] == [queue_refused]
    # The JobSet controller's own Jobs name no queue.
    assert policy_refusals(policy, job(None), user=JOBSET_CONTROLLER) == []
    (message,) = policy_refusals(policy, jobset("nemo-high"), user=MEMBER)
    assert message.startswith(priority_refused)
    # Without the label Kueue takes the pods' priorityClassName: not a way around the policy.
    (message,) = policy_refusals(policy, jobset(None, "system-cluster-critical"), user=MEMBER)
    assert message.startswith(priority_refused)
    # The fabric check's class: the platform's checks, not a member's run.
    assert policy_refusals(policy, jobset("nemo-fabric-check")) == []
    (message,) = policy_refusals(policy, jobset("nemo-fabric-check"), user=MEMBER)
    assert message.startswith("the priority class nemo-fabric-check is the fabric checks'")
    # Kueue suspending a JobSet admitted before the team lost the class.
    assert policy_refusals(policy, jobset("nemo-high"), old=jobset("nemo-high")) == []
    assert policy_refusals(policy, jobset("nemo-high"), old=jobset("nemo-low")) != []


def test_one_bucket_for_data_and_checkpoints_is_refused() -> None:
    """Every training pod mounts both volumes, and two volumes of one CSI handle in one pod never
    mount (kubernetes/kubernetes#91556)."""
    storage = {"dataBucket": {"name": "shared-bucket"}, "checkpointBucket": {"name": "shared-bucket"}}
    error = rejected(stack_with("dev", storage=storage))
    assert "mount one bucket twice" in issue_for(error, "storage.checkpointBucket.name")


def test_a_run_stack_reads_its_teams_from_the_platform_stack(render: Render) -> None:
    """A team's members keep their runs in stacks of their own: the run stack reads the teams from
    its upstream platform's outputs, and is held to them as a run of the platform's stack is."""
    base = {"upstreamStack": "organization/nemo-gke/teams", "region": "europe-west1", "zone": "europe-west1-b"}
    run = {"name": "ablation-2", "model": "llama3-8b", "nodes": 1, "steps": 10}
    error = rejected(stack_with("run-llama8b", **base, training={"runs": [run]}), stack="run-llama8b")
    assert "is required" in issue_for(error, "training.runs[0].team")
    values = stack_with("run-llama8b", **base, training={"runs": [{**run, "team": "alignment"}]})
    rendered = render("run-llama8b", values=values)
    (jobset,) = map(rendered.manifest, rendered.of_type(JOBSET))
    assert jobset["metadata"]["namespace"] == "alignment"


def test_the_summary_prices_each_team_s_guarantee(render: Render) -> None:
    """The go/no-go summary lists each team's guarantee and what its guaranteed nodes cost on demand
    (the pool's per-node price times the nodes), the basis a platform team charges back on."""
    values = stack_with("dev", teams=TWO_TEAMS, training={"runs": [_run(team="red")]})
    summary = render("dev", values=values).exports["summary"]
    (pool,) = summary["pools"]
    per_node = pool["usdPerHour"] / pool["nodes"]
    teams = {t["name"]: t for t in summary["teams"]}
    assert teams["red"]["shares"] == ["a3-highgpu 1 nodes (8 GPUs)"]
    assert teams["red"]["usdPerHour"] == pytest.approx(per_node)
    assert teams["blue"]["weight"] == "2" and teams["blue"]["usdPerHour"] == pytest.approx(per_node)
    assert "| red | red | a3-highgpu 1 nodes (8 GPUs) | 1 |" in markdown("dev", summary, [])


@pytest.mark.parametrize(("key", "value"), [("cohort", "shared"), ("overcommit", True)])
def test_a_teams_only_kueue_key_on_a_stack_without_teams_is_refused(key: str, value: Any) -> None:
    """Both rendered with no word before: they shape only the teams' queues."""
    error = rejected(stack_with("dev", kueue={key: value}))
    assert "the stack sets no teams" in issue_for(error, f"kueue.{key}")
