"""The go/no-go summary's figures, computed by hand from the price table and step times."""

from __future__ import annotations

import dataclasses

import pytest

from facts import pricing
from facts.gke import CapacityType
from facts.models import model_spec
from planners.pools import PoolFacts
from planners.runs import RunSpec, Tokenizer
from planners.summary import plan_summary

GPT2 = Tokenizer("megatron", "GPT2BPETokenizer")


def pool(name: str, machine: str, nodes: int, capacity: CapacityType = CapacityType.ON_DEMAND) -> PoolFacts:
    reservation = "r1" if capacity is CapacityType.RESERVATION else None
    return PoolFacts(name, machine, "us-central1-c", nodes, capacity, True, nodes, reservation)


def gpt3_run(nodes: int = 32, **changes: object) -> RunSpec:
    settings = model_spec("gpt3-175b").recipe.settings(steps=100)
    run = RunSpec("r", "gpt3-175b", "mega", nodes, settings, GPT2, "nemo-medium")
    return dataclasses.replace(run, **changes)  # type: ignore[arg-type]


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
    """gpt3-175b on 32 a3-megagpu-8g at the recipe's layout: 25.1155 s per step (gpu-recipes)."""
    summary = plan_summary("p", "us-central1", "z", [pool("mega", "a3-megagpu-8g", 32)], [gpt3_run()])
    (run,) = summary.runs
    hours = 100 * 25.1155 / 3600
    assert run.hours == pytest.approx(hours) and run.gpus == 256
    assert run.usd == pytest.approx(hours * 32 * (9.46006 + 82.75421))
    output = summary.as_output()["runs"][0]
    assert output["stepTimeS"] == 25.1155 and output["usd"] == pytest.approx(run.usd)


@pytest.mark.parametrize(
    "changes",
    [{"nodes": 16}, {"image": "nvcr.io/nvidia/nemo:24.07"}],
    ids=["another-layout", "an-explicit-image"],
)
def test_no_duration_without_a_published_step_time_at_that_exact_layout(changes: dict[str, object]) -> None:
    summary = plan_summary("p", "us-central1", "z", [pool("mega", "a3-megagpu-8g", 32)], [gpt3_run(**changes)])
    (run,) = summary.runs
    assert run.hours is None and run.usd is None and run.step_time_s is None


def test_a_reserved_pool_s_run_has_a_duration_but_no_price() -> None:
    summary = plan_summary(
        "p", "us-central1", "z", [pool("mega", "a3-megagpu-8g", 32, CapacityType.RESERVATION)], [gpt3_run()]
    )
    (run,) = summary.runs
    assert run.hours is not None and run.usd is None
