"""A run's capacity chain (planners.chains): its `pool`, then its `fallbackPools`, tried by Kueue
in the queue's order; the pods allow every pool of the chain and Kueue pins them to the one it
admits them on."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from facts.kubernetes import NODE_POOL_LABEL
from harness.runner import StackRun, run_stack, stack_with
from tests.conftest import assert_valid, issue_for, rejected
from tools.summary import markdown

POOLS = [
    {"name": "a3-highgpu", "machineType": "a3-highgpu-8g", "nodeCount": 2},
    {"name": "spare", "machineType": "a3-highgpu-8g", "nodeCount": 2, "capacity": {"type": "spot"}},
    {"name": "small", "machineType": "a3-highgpu-4g", "nodeCount": 2},
]


def chained(run: dict[str, Any] | None = None, pools: list[dict[str, Any]] = POOLS) -> dict[str, Any]:
    runs = [{"name": "demo", "model": "gpt-5b", "nodes": 2, "steps": 50, "fallbackPools": ["spare"], **(run or {})}]
    return stack_with("dev", gpuPools=pools, training={"runs": runs})


def pod_spec(jobset: dict[str, Any]) -> dict[str, Any]:
    return jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]  # type: ignore[no-any-return]


def pool_term(spec: dict[str, Any]) -> dict[str, Any]:
    """The pod spec's one required node-affinity term."""
    (term,) = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    return term  # type: ignore[no-any-return]


def test_a_chained_run_s_pods_allow_every_pool_of_its_chain_in_order(render: Any) -> None:
    run = render("dev", values=chained())
    (jobset,) = map(run.manifest, run.of_type("kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"))
    spec = pod_spec(jobset)
    assert "nodeSelector" not in spec
    assert pool_term(spec) == {
        "matchExpressions": [{"key": NODE_POOL_LABEL, "operator": "In", "values": ["a3-highgpu", "spare"]}]
    }


def test_a_run_on_one_pool_keeps_its_node_selector(render: Any) -> None:
    run = render("dev", values=chained({"fallbackPools": []}))
    (jobset,) = map(run.manifest, run.of_type("kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"))
    assert pod_spec(jobset)["nodeSelector"] == {NODE_POOL_LABEL: "a3-highgpu"}
    assert "affinity" not in pod_spec(jobset)


@pytest.mark.parametrize(
    ("run", "key", "said"),
    [
        ({"fallbackPools": ["nowhere"]}, "fallbackPools[0]", "is not a GPU pool of the platform; known: a3-highgpu"),
        ({"fallbackPools": ["spare", "spare"]}, "fallbackPools[1]", "is already in the run's chain"),
        ({"fallbackPools": ["a3-highgpu"]}, "fallbackPools[0]", "is already in the run's chain"),
        ({"fallbackPools": ["small"]}, "fallbackPools[0]", "a chain keeps one machine type"),
        ({"pool": "spare", "fallbackPools": ["a3-highgpu"]}, "fallbackPools",
         "Kueue tries the pools in the order of gpuPools (a3-highgpu, spare)"),
        ({"checkpoint": {"enabled": False}}, "checkpoint.enabled",
         "must be true with a Spot pool (spare) in the chain"),
        ({"nodes": 3}, "nodes", "holds at most 2 nodes"),
        ({"fallbackPools": ["spare"] * 64}, "fallbackPools", "has 64 entries; at most 63 are allowed"),
    ],
    ids=["unknown", "repeated", "its-own-pool", "another-machine", "out-of-order", "spot-without-checkpoints",
         "too-big", "longer-than-a-queue"],
)  # fmt: skip
def test_a_chain_that_cannot_work_is_refused_by_key(run: dict[str, Any], key: str, said: str) -> None:
    message = issue_for(rejected(chained(run)), f"training.runs[0].{key}")
    assert said in message, message


def test_a_fallback_pool_too_small_for_the_run_is_refused_naming_it() -> None:
    pools = [POOLS[0] | {"nodeCount": 4}, POOLS[1]]
    message = issue_for(rejected(chained({"nodes": 4}, pools)), "training.runs[0].nodes")
    assert "pool spare holds at most 2 nodes" in message


def test_the_summary_shows_each_pool_of_the_chain_with_its_price_and_wait(render: Any) -> None:
    """gpt-5b has no published step time on a3-highgpu-8g: the on-demand link prices the run at
    the layout planner's prediction, the Spot link per hour only where a Spot price is known."""
    run = render("dev", values=chained())
    (line,) = [r for r in run.exports["summary"]["runs"] if r["name"] == "demo"]
    first, second = line["chain"]
    assert (first["pool"], first["capacity"], second["pool"], second["capacity"]) == (
        "a3-highgpu", "onDemand", "spare", "spot"
    )  # fmt: skip
    # 2 nodes at us-central1's on-demand a3-highgpu-8g price (facts.pricing: 9.46006 + 33.60609).
    assert first["usdPerHour"] == pytest.approx(2 * (9.46006 + 33.60609))
    assert first["usd"] == pytest.approx(first["usdPerHour"] * line["hours"])
    assert second["usdPerHour"] is None and "preemptible" in second["wait"]
    text = markdown("dev", run.exports["summary"], [])
    assert (
        "demo runs on the first pool of its chain with room, in this order: a3-highgpu (onDemand: ~86 USD/h for its "
        "nodes, ~32 USD for the run; wait: none known: on-demand VMs, where the zone has them), then spare (spot: not "
        "priced; wait: none known, and preemptible: Spot VMs may be reclaimed at any time; each reclaim costs one of "
        "the run's 20 restarts and the steps since its checkpoint)."
    ) in text


def test_a_spot_link_says_a_reclaim_costs_a_restart_or_fails_a_run_without_any(render: Any) -> None:
    """A reclaim fails the run's pods, and its JobSet restarts once (the lane, test_lane_chains.py)."""
    run = render("dev", values=chained({"maxRestarts": 3}))
    (line,) = [r for r in run.exports["summary"]["runs"] if r["name"] == "demo"]
    assert line["chain"][1]["wait"].endswith(
        "each reclaim costs one of the run's 3 restarts and the steps since its checkpoint"
    )
    assert "restarts" not in line["chain"][0]["wait"]
    run = render("dev", values=chained({"maxRestarts": 0}))
    (line,) = [r for r in run.exports["summary"]["runs"] if r["name"] == "demo"]
    assert line["chain"][1]["wait"].endswith("a reclaim fails the run, which has no restarts (maxRestarts 0)")
    run = render("dev", values=chained({"maxRestarts": 2, "checkpoint": {"enabled": True, "resume": False}}))
    (line,) = [r for r in run.exports["summary"]["runs"] if r["name"] == "demo"]
    assert line["chain"][1]["wait"].endswith("one of the run's 2 restarts and all its steps (resume: false)")


def test_a_booked_pool_takes_runs_from_the_first_up_within_its_booking() -> None:
    """Kueue admits on quota: before its booking starts a booked pool's flavor has none in the
    ClusterQueue, and the chain's run is admitted on the next pool (warned about); the first `up`
    within the booking gives it the pool's quota, and the flavor's name stays."""
    booked = {
        "name": "a4",
        "machineType": "a4-highgpu-8g",
        "autoscaling": {"minNodes": 0, "maxNodes": 2},
        "capacity": {"type": "reservation", "booking": {"start": "2026-12-14T00:00:00Z", "days": 7}},
    }
    spot = {
        "name": "spare",
        "machineType": "a4-highgpu-8g",
        "nodeCount": 2,
        "capacity": {"type": "spot"},
        "placement": "none",
    }
    runs = [{"name": "moe", "model": "qwen3-30b-a3b", "nodes": 1, "pool": "a4", "fallbackPools": ["spare"]}]
    values = stack_with("a4", gpuPools=[booked, spot], training={"runs": runs})

    def gpu_quotas(run: StackRun) -> dict[str, str]:
        (queue,) = map(run.manifest, run.of_type("kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue"))
        return {
            f["name"]: next(r["nominalQuota"] for r in f["resources"] if r["name"] == "nvidia.com/gpu")
            for f in queue["spec"]["resourceGroups"][0]["flavors"]
        }

    before = run_stack("a4", values=values)
    assert_valid(before)
    (warning,) = [w.message for w in before.warnings if "takes no run" in w.message]
    assert "pool a4 takes no run as of the platform's `up`, booked from 2026-12-14T00:00:00Z" in warning
    assert warning.endswith("; Kueue admits the run on spare"), warning
    (line,) = before.exports["summary"]["runs"]
    assert line["chain"][0]["wait"].startswith(
        "none while the reservation has room, within its booking only (2026-12-14T00:00:00Z to 2026-12-21T00:00:00Z)"
    ), line["chain"][0]
    within = run_stack("a4", values=values, now=datetime(2026, 12, 14, 9, tzinfo=UTC))
    assert not [w for w in within.warnings if "takes no run" in w.message]
    closed, opened = gpu_quotas(before), gpu_quotas(within)
    assert closed.keys() == opened.keys()
    assert sorted(closed.values()) == ["0", "16"] and sorted(opened.values()) == ["16", "16"]


def teams_with_spot(runs: list[dict[str, Any]]) -> dict[str, Any]:
    pools = [
        {"name": "a3-ultra", "machineType": "a3-ultragpu-8g", "nodeCount": 8,
         "capacity": {"type": "reservation", "reservation": "r1"}},
        {"name": "spot", "machineType": "a3-ultragpu-8g", "nodeCount": 2, "capacity": {"type": "spot"}},
    ]  # fmt: skip
    teams = [
        {"name": "pretraining", "quota": [{"pool": "a3-ultra", "nodes": 2}, {"pool": "spot", "nodes": 2}], "weight": 3},
        {"name": "alignment", "quota": [{"pool": "a3-ultra", "gpus": 16}]},
    ]
    return stack_with("teams", gpuPools=pools, teams=teams, training={"runs": runs})


def test_a_team_s_run_chains_the_pools_of_its_share_in_its_queue_s_order(render: Any) -> None:
    runs = [{"name": "pre", "team": "pretraining", "model": "llama3-8b", "nodes": 2, "fallbackPools": ["spot"]}]
    run = render("teams", values=teams_with_spot(runs))
    (jobset,) = map(run.manifest, run.of_type("kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"))
    assert pool_term(pod_spec(jobset))["matchExpressions"][0]["values"] == ["a3-ultra", "spot"]


def test_a_team_s_run_cannot_chain_a_pool_outside_its_share() -> None:
    runs = [{"name": "abl", "team": "alignment", "model": "llama3-8b", "nodes": 2, "fallbackPools": ["spot"]}]
    message = issue_for(rejected(teams_with_spot(runs), "teams"), "training.runs[0].fallbackPools[0]")
    assert "is not a pool of team alignment's quota (a3-ultra)" in message


def test_a_spot_pool_before_the_end_of_a_chain_not_placed_by_topology_is_warned_about() -> None:
    """Kueue sees a Spot reclaim's lost nodes only in a topology placement, where it evicts the run
    and admits it on the next pool (the lane's Spot scenario); elsewhere the run waits on Spot."""
    pools = [
        {"name": "spot", "machineType": "a3-highgpu-8g", "nodeCount": 2, "capacity": {"type": "spot"},
         "placement": "none"},
        {"name": "on-demand", "machineType": "a3-highgpu-8g", "nodeCount": 2, "placement": "none"},
    ]  # fmt: skip
    runs = [
        {"name": "demo", "model": "gpt-5b", "nodes": 2, "steps": 50, "pool": "spot", "fallbackPools": ["on-demand"]}
    ]
    run = run_stack("dev", values=stack_with("dev", gpuPools=pools, training={"runs": runs}))
    (warning,) = [w.message for w in run.warnings if "reclaims pool spot" in w.message]
    assert "does not move to on-demand" in warning and "has no topology labels" in warning
    compact = [{**p, "placement": "compact"} for p in pools]
    placed = run_stack("dev", values=stack_with("dev", gpuPools=compact, training={"runs": runs}))
    assert not [w for w in placed.warnings if "reclaims pool" in w.message]


def test_a_closed_booked_pool_has_no_quota_in_any_team_s_queue_nor_the_cohort_s() -> None:
    """Before its booking every quota of the booked pool's flavor is 0 (a lending limit with it,
    which Kueue holds to at most the nominal quota): nothing of it can be borrowed or reclaimed,
    so Kueue goes on to the next flavor; within the booking the teams' shares return."""
    pools = [
        {"name": "a4", "machineType": "a4-highgpu-8g", "autoscaling": {"minNodes": 0, "maxNodes": 4},
         "capacity": {"type": "reservation", "booking": {"start": "2026-12-14T00:00:00Z", "days": 7}}},
        {"name": "spare", "machineType": "a4-highgpu-8g", "nodeCount": 2, "placement": "none"},
    ]  # fmt: skip
    teams = [
        {
            "name": "pretraining",
            "quota": [{"pool": "a4", "nodes": 2, "lendingLimit": 1}, {"pool": "spare", "nodes": 2}],
        },
        {"name": "alignment", "quota": [{"pool": "a4", "nodes": 1}]},
    ]
    values = stack_with("teams", region="us-central1", zone="us-central1-b", gpuPools=pools, teams=teams, training={})

    def a4_gpus(run: StackRun) -> dict[str, dict[str, str]]:
        """Each queue's (and the cohort's) GPU quota and limits of the a4 flavor."""
        found = {}
        for kind in ("ClusterQueue", "Cohort"):
            for queue in map(run.manifest, run.of_type(f"kubernetes:kueue.x-k8s.io/v1beta2:{kind}")):
                for flavor in queue["spec"]["resourceGroups"][0]["flavors"]:
                    if flavor["name"].startswith("a4-"):
                        (gpu,) = [r for r in flavor["resources"] if r["name"] == "nvidia.com/gpu"]
                        found[queue["metadata"]["name"]] = {k: v for k, v in gpu.items() if k != "name"}
        return found

    before = run_stack("teams", values=values)
    assert_valid(before)
    closed = a4_gpus(before)
    assert len(closed) == 3 and {q["nominalQuota"] for q in closed.values()} == {"0"}, closed
    assert closed["pretraining"]["lendingLimit"] == "0"
    opened = a4_gpus(run_stack("teams", values=values, now=datetime(2026, 12, 15, tzinfo=UTC)))
    assert opened["pretraining"] == {"nominalQuota": "16", "lendingLimit": "8"}
    assert opened["alignment"]["nominalQuota"] == "8"


def reserved_then_flex(reserved: dict[str, Any] | None = None) -> dict[str, Any]:
    """The issue's chain: a reservation's pool (fixed size: placed by topology by default), then
    a flex-start pool (scaling from zero: placed without)."""
    pools = [
        {"name": "reserved", "machineType": "a3-ultragpu-8g", "nodeCount": 2,
         "capacity": {"type": "reservation", "reservation": "r1"}, **(reserved or {})},
        {"name": "flex", "machineType": "a3-ultragpu-8g", "autoscaling": {"minNodes": 0, "maxNodes": 2},
         "capacity": {"type": "flexStart"}},
    ]  # fmt: skip
    runs = [{"name": "demo", "model": "llama3-8b", "nodes": 2, "pool": "reserved", "fallbackPools": ["flex"]}]
    return stack_with("dev", zone="us-central1-b", gpuPools=pools, training={"runs": runs})


def test_a_reservation_pool_placed_by_topology_and_a_flex_start_pool_are_refused_with_the_way_out() -> None:
    """Kueue 0.19 admits a podset that asks for a topology only on a flavor with one, and one that
    asks for none only on a flavor without (tas_flavorassigner.go, checkPodSetAndFlavorMatchForTAS)."""
    message = issue_for(rejected(reserved_then_flex()), "training.runs[0].fallbackPools[0]")
    assert "is placed without topology, and reserved by topology: a chain keeps one" in message
    assert "set placeByTopology: false on pool reserved" in message


def test_the_refusal_names_the_pool_placed_by_topology_whichever_comes_first() -> None:
    values = reserved_then_flex()
    values["nemo-gke:training"]["runs"][0] |= {"pool": "flex", "fallbackPools": ["reserved"]}
    values["nemo-gke:gpuPools"].reverse()
    message = issue_for(rejected(values), "training.runs[0].fallbackPools[0]")
    assert "is placed by topology, and flex without topology" in message
    assert "set placeByTopology: false on pool reserved" in message


def test_only_a_pool_placed_by_quota_alone_says_so_in_the_cluster_output() -> None:
    """Stack outputs drop null values: a stack of an earlier version, which refuses unknown keys,
    still reads the pools of a stack that leaves the setting out."""
    values = {**reserved_then_flex({"placeByTopology": False}), "nemo-gke:training": {}}
    pools = {p["name"]: p for p in run_stack("dev", values=values).exports["cluster"]["gpuPools"]}
    assert pools["reserved"]["placeByTopology"] is False
    assert pools["flex"].get("placeByTopology") is None


def test_a_reservation_pool_placed_by_quota_alone_chains_with_a_flex_start_pool(render: Any) -> None:
    run = render("dev", values=reserved_then_flex({"placeByTopology": False}))
    flavors = {f["spec"]["nodeLabels"][NODE_POOL_LABEL]: f["spec"] for f in map(run.manifest, run.of_type(
        "kubernetes:kueue.x-k8s.io/v1beta2:ResourceFlavor"))}  # fmt: skip
    assert flavors.keys() == {"reserved", "flex"}
    assert not any("topologyName" in spec for spec in flavors.values())
    (jobset,) = map(run.manifest, run.of_type("kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"))
    assert pool_term(pod_spec(jobset))["matchExpressions"][0]["values"] == ["reserved", "flex"]
    template = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    assert not [k for k in template["metadata"].get("annotations", {}) if "topology" in k]


def test_place_by_topology_true_is_the_default_where_the_pool_can_be_so_placed() -> None:
    values, default = (
        {**reserved_then_flex(setting), "nemo-gke:training": {}} for setting in ({"placeByTopology": True}, None)
    )
    placed = run_stack("dev", values=values)
    assert {r.urn: r.inputs for r in placed} == {r.urn: r.inputs for r in run_stack("dev", values=default)}
    assert any("topologyName" in f["spec"] for f in map(placed.manifest, placed.of_type(
        "kubernetes:kueue.x-k8s.io/v1beta2:ResourceFlavor")))  # fmt: skip


@pytest.mark.parametrize(
    ("pool", "said"),
    [
        ({"name": "loose", "machineType": "a3-ultragpu-8g", "nodeCount": 2, "placement": "none"},
         "has no topology labels"),
        ({"name": "spot", "machineType": "a3-ultragpu-8g", "autoscaling": {"minNodes": 0, "maxNodes": 2},
          "capacity": {"type": "spot"}, "placement": "compact"}, "can scale to zero nodes"),
    ],
    ids=["no-labels", "from-zero"],
)  # fmt: skip
def test_place_by_topology_on_a_pool_that_cannot_be_so_placed_is_refused_by_key(
    pool: dict[str, Any], said: str
) -> None:
    values = stack_with("dev", zone="us-central1-b", gpuPools=[{**pool, "placeByTopology": True}])
    message = issue_for(rejected(values), "gpuPools[0].placeByTopology")
    assert said in message, message
