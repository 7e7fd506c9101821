"""The go/no-go summary's figures, computed by hand from the price table and step times."""

from __future__ import annotations

import dataclasses

import pytest

from facts import pricing
from facts.gke import CapacityType
from facts.machines import machine_type
from facts.models import FORCED_BALANCE, model_spec
from harness.mocks import LogWarning
from planners import nemo, workload
from planners.gpudirect import pod_networking
from planners.nemo import RunPlan
from planners.networks import plan_gpu_networks
from planners.pools import GpuPoolExport
from planners.runs import RunSpec, Tokenizer, max_restarts
from planners.summary import CpuPool, Filestore, plan_summary
from tools.summary import markdown, warning_lines

GPT2 = Tokenizer("megatron", "GPT2BPETokenizer")


def pool(name: str, machine: str, nodes: int, capacity: CapacityType = CapacityType.ON_DEMAND) -> GpuPoolExport:
    reservation = "r1" if capacity is CapacityType.RESERVATION else None
    return GpuPoolExport(name, machine, "us-central1-c", nodes, capacity, True, nodes, reservation)


def gpt3_run(nodes: int = 32, **changes: object) -> RunSpec:
    settings = model_spec("gpt3-175b").recipe.settings(steps=100)
    run = RunSpec("r", "gpt3-175b", "mega", nodes, settings, GPT2, "nemo-medium")
    return dataclasses.replace(run, **changes)  # type: ignore[arg-type]


def planned(*runs: RunSpec, machine: str = "a3-megagpu-8g") -> list[RunPlan]:
    """The runs as planned on the machine of their pool (planners.nemo.plan_run)."""
    m = machine_type(machine)
    networks = plan_gpu_networks("c", m if m.is_multi_nic else None, "10.8.0.0/16")
    return [
        nemo.plan_run(
            run,
            m,
            pod_networking(m.gpudirect_stack, networks, m.gpus, gib=m.pod_gib_for(run.image_ref)),
            workload.run_paths(run, "/nfs/exp", "/checkpoints", "/data"),
        )
        for run in runs
    ]


def test_on_demand_pools_are_priced_per_node_hour_and_others_say_why_not() -> None:
    summary = plan_summary(
        "p",
        "us-central1",
        "us-central1-c",
        [
            pool("mega", "a3-megagpu-8g", 32),
            pool("spot", "a3-highgpu-8g", 2, CapacityType.SPOT),
            pool("held", "a3-ultragpu-8g", 4, CapacityType.RESERVATION),
        ],
        [],
    )
    mega, spot, held = summary.pools
    assert mega.usd_per_hour == pytest.approx(32 * (9.46006 + 82.75421))
    assert (mega.gpus, spot.gpus, held.gpus) == (256, 16, 32)
    assert spot.usd_per_hour is None and "Spot" in spot.pricing
    assert held.usd_per_hour is None and held.reservation == "r1"
    assert summary.usd_per_hour == mega.usd_per_hour
    assert pricing.SOURCE in summary.as_output()["priceSource"]


def test_a_run_with_a_published_step_time_gets_a_duration_and_a_cost() -> None:
    """gpt3-175b on 32 a3-megagpu-8g at the recipe's layout: 25.397 s per step (the recipe's mean of
    steps 10-30), and its one checkpoint at step 100, which NeMo 1 writes while the steps wait:
    2.45 TB at 32 x 4.62459 GB/s, 16.57 s."""
    summary = plan_summary("p", "us-central1", "z", [pool("mega", "a3-megagpu-8g", 32)], planned(gpt3_run()))
    (run,) = summary.runs
    assert (run.checkpoint_saves, run.checkpoint_async) == (1, False)
    assert run.checkpoint_wait_s == pytest.approx(16.573, abs=1e-3)
    hours = (100 * 25.397 + run.checkpoint_wait_s) / 3600
    assert run.hours == pytest.approx(hours) and run.gpus == 256
    assert run.usd == pytest.approx(hours * 32 * (9.46006 + 82.75421))
    output = summary.as_output()["runs"][0]
    assert output["stepTimeS"] == 25.397 and output["usd"] == pytest.approx(run.usd)
    # The summary says what each run trains with.
    assert (output["runtime"], output["image"]) == ("NeMo 1", "nvcr.io/nvidia/nemo:24.07")


@pytest.mark.parametrize(
    "changes",
    [{"nodes": 16}, {"image": "nvcr.io/nvidia/nemo:24.07"}],
    ids=["another-layout", "an-explicit-image"],
)
def test_without_a_published_step_time_at_that_exact_layout_the_prediction_prices_the_run(
    changes: dict[str, object],
) -> None:
    """Another layout, or the run's own image: NVIDIA's row does not apply, and the layout
    planner's prediction for the run's layout gives its duration and cost, marked predicted."""
    (plan,) = planned(gpt3_run(**changes))
    summary = plan_summary("p", "us-central1", "z", [pool("mega", "a3-megagpu-8g", 32)], [plan])
    (run,) = summary.runs
    assert plan.step is None and plan.predicted_step_seconds is not None
    assert run.step_time_predicted and run.step_time_s == plan.predicted_step_seconds
    assert run.step_time_source is None
    assert run.hours is not None and run.hours >= 100 * plan.predicted_step_seconds / 3600
    assert run.usd is not None
    assert summary.as_output()["runs"][0]["stepTimePredicted"] is True


def test_a_reserved_pool_s_run_has_a_duration_but_no_price() -> None:
    summary = plan_summary(
        "p", "us-central1", "z", [pool("mega", "a3-megagpu-8g", 32, CapacityType.RESERVATION)], planned(gpt3_run())
    )
    (run,) = summary.runs
    assert run.hours is not None and run.usd is None


def test_cpu_pools_and_filestore_are_priced_from_the_table() -> None:
    """The system pool's e2-standard-4 and a supervisor pool's e2-standard-8 at their catalog
    rows, Filestore per provisioned GiB-hour, and all of them in the total."""
    summary = plan_summary(
        "p",
        "us-west1",
        "us-west1-b",
        [],
        [],
        cpu_pools=[CpuPool("system", "e2-standard-4", 3)],
        filestore=Filestore("BASIC_HDD", 1024),
    )
    assert summary.cpu_pools[0].usd_per_hour is None  # the table has no us-west1 e2 row
    summary = plan_summary(
        "p",
        "us-central1",
        "us-central1-c",
        [pool("mega", "a3-megagpu-8g", 2)],
        [],
        cpu_pools=[CpuPool("system", "e2-standard-4", 3), CpuPool("supervisor", "e2-standard-8", 2)],
    )
    system, supervisor = summary.cpu_pools
    assert system.usd_per_hour == pytest.approx(3 * 0.13402)
    assert supervisor.usd_per_hour == pytest.approx(2 * 0.26805)
    gpus = summary.pools[0].usd_per_hour
    assert gpus is not None and summary.usd_per_hour == pytest.approx(gpus + 3 * 0.13402 + 2 * 0.26805)
    west = plan_summary("p", "us-west1", "us-west1-b", [], [], filestore=Filestore("BASIC_HDD", 1024))
    assert west.filestore is not None and west.filestore.usd_per_hour == pytest.approx(1024 * 0.000274)
    assert pricing.FILESTORE_SOURCE in west.filestore.pricing


def test_what_has_no_price_is_listed_never_guessed() -> None:
    summary = plan_summary(
        "p",
        "us-central1",
        "us-central1-c",
        [pool("spot", "a3-highgpu-8g", 2, CapacityType.SPOT)],
        [],
        cpu_pools=[CpuPool("system", "n2-standard-4", 1)],
        filestore=Filestore("ZONAL", 1024),
    )
    assert summary.usd_per_hour is None
    assert summary.cpu_pools[0].usd_per_hour is None and summary.filestore is not None
    assert summary.filestore.usd_per_hour is None
    listed = summary.not_priced
    assert any(line.startswith("pool spot: Spot") for line in listed)
    assert "pool system: no price for n2-standard-4 in us-central1 in the table" in listed
    assert "Filestore: no price for Filestore ZONAL in us-central1 in the table" in listed
    assert set(pricing.NEVER_PRICED) <= set(listed)
    assert summary.as_output()["notPriced"] == list(listed)


def test_a_run_without_a_duration_is_listed_as_not_priced() -> None:
    """Neither published nor predicted (a machine outside the catalog): no duration, no cost."""
    (plan,) = planned(gpt3_run(nodes=16))
    unpredicted = dataclasses.replace(plan, predicted_step_seconds=None)
    summary = plan_summary("p", "us-central1", "z", [pool("mega", "a3-megagpu-8g", 32)], [unpredicted])
    (run,) = summary.runs
    assert run.hours is None and run.usd is None and not run.step_time_predicted
    assert "run r: no published or predicted step time, so no duration" in summary.not_priced


@pytest.mark.parametrize(
    ("project", "reservation", "reasons"),
    [
        ("my-project", "my-reservation", 0),
        ("your-gcp-project", "my-reservation", 1),
        ("my-project", "your-reservation", 1),
        ("your-gcp-project", "your-reservation", 2),
    ],
)
def test_placeholders_left_in_the_stack_make_it_no_go(project: str, reservation: str, reasons: int) -> None:
    """The project and a pool's reservation must be the user's own: GKE refuses a project or a
    reservation that does not exist."""
    held = dataclasses.replace(pool("held", "a3-ultragpu-8g", 4, CapacityType.RESERVATION), reservation=reservation)
    summary = plan_summary(project, "us-central1", "z", [held], [])
    assert len(summary.no_go) == reasons
    assert summary.as_output()["noGo"] == list(summary.no_go)


def output(project: str = "my-project") -> dict[str, object]:
    return plan_summary(
        project, "us-central1", "us-central1-c", [pool("mega", "a3-megagpu-8g", 2)], planned(gpt3_run(nodes=2))
    ).as_output()


def test_the_summary_ends_with_its_verdict() -> None:
    go = markdown("s", output(), [])
    assert go.rstrip().splitlines()[-1].startswith("**Verdict: GO**")
    no_go = markdown("s", output("your-gcp-project"), []).rstrip().splitlines()[-1]
    assert no_go.startswith("**Verdict: NO-GO**") and "your-gcp-project" in no_go


def test_the_summary_lists_what_it_does_not_price() -> None:
    text = markdown("s", output(), [])
    listed = text[text.index("Not priced:") :]
    assert all(f"- {item}" in listed for item in pricing.NEVER_PRICED)


def test_each_warning_appears_once_before_the_figures() -> None:
    """The same advice from two resources is one line naming both; render prints no other copy."""
    urn = "urn:pulumi:dev::nemo-gke::nemo:gke:GpuNodePool::"
    warnings = [
        LogWarning(f"{urn}pool-a", "zone not confirmed"),
        LogWarning(f"{urn}pool-b", "zone not confirmed"),
        LogWarning(f"{urn}pool-a", "zone not confirmed"),
        LogWarning("", "a stack-level warning"),
    ]
    assert warning_lines(warnings) == [
        "> **warning** (pool-a, pool-b): zone not confirmed",
        "> **warning** (stack): a stack-level warning",
    ]
    text = markdown("s", output(), warnings)
    assert text.count("zone not confirmed") == 1 and text.index("zone not confirmed") < text.index("| Pool")


def test_spare_nodes_are_a_pool_s_nodes_beyond_its_largest_run_at_their_price() -> None:
    """A 34-node fixed pool under runs of 32 and 30 nodes holds 2 standing spares, at 2 nodes' price
    (hand-computed: 2 × (9.46006 + 82.75421) USD/h in us-central1); an autoscaled pool's spares cost
    nothing until it scales; a pool without a run has no line; a pool its run fills has none."""
    autoscaled = dataclasses.replace(pool("flex", "a3-megagpu-8g", 8), min_nodes=0)
    runs = [gpt3_run(32), gpt3_run(30, name="r2"), gpt3_run(4, name="r3", pool="flex")]
    pools = [pool("mega", "a3-megagpu-8g", 34), autoscaled, pool("idle", "a3-megagpu-8g", 2)]
    summary = plan_summary("p", "us-central1", "us-central1-c", pools, planned(*runs))
    by_pool = {line.pool: line for line in summary.spares}
    assert sorted(by_pool) == ["flex", "mega"]
    assert (by_pool["mega"].nodes, by_pool["mega"].standing) == (2, True)
    assert by_pool["mega"].usd_per_hour == pytest.approx(2 * (9.46006 + 82.75421))
    assert (by_pool["flex"].nodes, by_pool["flex"].standing, by_pool["flex"].usd_per_hour) == (4, False, 0.0)
    full = plan_summary("p", "us-central1", "us-central1-c", [pool("mega", "a3-megagpu-8g", 32)], planned(gpt3_run(32)))
    (line,) = full.spares
    assert line.nodes == 0 and "waits for its replacement" in line.pricing
    text = markdown("s", full.as_output(), [])
    assert "| mega | 0 | yes | - (none: a run that loses a node waits for its replacement) |" in text


def test_each_run_states_its_restart_budget() -> None:
    """A run's restarts after an infrastructure failure (planners.runs.max_restarts) are a column
    of the runs' table: 0 says it fails at once."""
    runs = [gpt3_run(max_restarts=20), dataclasses.replace(gpt3_run(max_restarts=0), name="once")]
    summary = plan_summary("p", "us-central1", "z", [pool("mega", "a3-megagpu-8g", 32)], planned(*runs))
    assert [run.max_restarts for run in summary.runs] == [20, 0]
    lines = markdown("dev", summary.as_output(), []).splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| Run |"))
    header, rows = lines[start].split(" | "), [line.split(" | ") for line in lines[start + 2 : start + 4]]
    assert [(row[0], row[header.index("Restarts")]) for row in rows] == [("| r", "20"), ("| once", "0")]


@pytest.mark.parametrize(
    ("given", "checkpoint", "resume", "supervisor", "budget"),
    [(None, True, True, False, 20), (None, False, True, False, 0), (None, True, False, False, 0),
     (None, False, False, True, 20), (3, True, True, True, 3), (0, True, True, False, 0)],
)  # fmt: skip
def test_a_run_that_resumes_from_checkpoints_restarts_as_the_resiliency_recipe_does(
    given: int | None, checkpoint: bool, resume: bool, supervisor: bool, budget: int
) -> None:
    """The resiliency recipe's JobSet restarts 20 times (facts.resiliency.RECIPE_MAX_RESTARTS); a run
    that would begin again at step 0 does not restart unless it says so."""
    assert max_restarts(given, checkpoint, resume, supervisor) == budget


def test_a_step_time_measured_with_a_benchmark_only_setting_says_so() -> None:
    """NVIDIA's MoE rows force tokens evenly over the experts (tools/parity.py, Why.BENCHMARK); a
    run priced from one is told its steps may be slower. A dense model's row carries no caveat."""
    spec = model_spec("qwen3-30b-a3b")
    settings = spec.recipe_on("a4-highgpu-8g").settings(steps=30)
    run = RunSpec("moe", "qwen3-30b-a3b", "a4", 1, settings, Tokenizer("huggingface", ""), "normal",
                  machine_type="a4-highgpu-8g")  # fmt: skip
    summary = plan_summary(
        "p", "us-central1", "z", [pool("a4", "a4-highgpu-8g", 1)], planned(run, machine="a4-highgpu-8g")
    )
    output = summary.as_output()
    assert output["runs"][0]["stepTimeMeasuredWith"] == FORCED_BALANCE
    assert "moe's published step time was measured with tokens forced evenly" in markdown("s", output, [])
    dense = plan_summary("p", "us-central1", "z", [pool("mega", "a3-megagpu-8g", 32)], planned(gpt3_run())).as_output()
    assert dense["runs"][0]["stepTimeMeasuredWith"] is None
    assert "benchmark-only" not in markdown("s", dense, [])
