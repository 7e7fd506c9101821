"""The predicted time to a run's first step, term by term, against hand-computed cases."""

from __future__ import annotations

import pytest

from facts.gke import CapacityType
from facts.registries import RegistryMirror
from planners.pools import GpuPoolExport
from planners.startup import FirstStep, first_step

NEMO = "nvcr.io/nvidia/nemo:26.02"
MIRROR = RegistryMirror("proj-1", "us-east5", "nemo-dev")


def pool(
    min_nodes: int = 4, streaming: bool = True, preloaded: str | None = None, machine: str = "a3-ultragpu-8g"
) -> GpuPoolExport:
    return GpuPoolExport(
        "gpu", machine, "us-east5-b", 4, CapacityType.ON_DEMAND, True, min_nodes,
        image_streaming=streaming, preloaded_image=preloaded,
    )  # fmt: skip


def seconds(start: FirstStep) -> dict[str, float | None]:
    return {t.name: t.seconds for t in start.terms}


def test_a_nemo_image_pulled_whole_takes_its_size_over_the_measured_bandwidth() -> None:
    """5.4 GB pulled in 191 - 30 = 161 s is 33.5 MB/s; a 30 GB NeMo image then starts after
    30 + 30 / (5.4 / 161) = 924.4 s, comparable with the 30 s of a streamed start."""
    start = first_step(NEMO, "llama3-70b", 4, pool(streaming=False), None)
    assert seconds(start)["image"] == pytest.approx(924.4, abs=0.1)
    assert seconds(start)["nodes"] == 0.0 and seconds(start)["pod start and NCCL"] is None
    # Only the published run's first step is known.
    assert seconds(start)["first step"] is None
    assert start.known_seconds == pytest.approx(924.4, abs=0.1)


def test_the_published_runs_first_step_counts_for_that_run_only() -> None:
    gpt3 = first_step(NEMO, "gpt3-175b", 4, pool(machine="a3-megagpu-8g"), MIRROR)
    assert seconds(gpt3)["first step"] == 107.0
    assert gpt3.known_seconds == pytest.approx(30.0 + 107.0)
    assert seconds(first_step(NEMO, "gpt3-175b", 4, pool(), MIRROR))["first step"] is None


def test_an_image_through_the_mirror_streams_and_a_preloaded_one_costs_nothing() -> None:
    assert seconds(first_step(NEMO, "llama3-70b", 4, pool(), MIRROR))["image"] == 30.0
    # Without the mirror nvcr.io is not Artifact Registry: nothing streams.
    assert seconds(first_step(NEMO, "llama3-70b", 4, pool(), None))["image"] == pytest.approx(924.4, abs=0.1)
    assert seconds(first_step(NEMO, "llama3-70b", 4, pool(preloaded=NEMO), MIRROR))["image"] == 0.0
    # A pool preloaded with another image streams the run's.
    other = pool(preloaded="nvcr.io/nvidia/nemo:25.11")
    assert seconds(first_step(NEMO, "llama3-70b", 4, other, MIRROR))["image"] == 30.0


def test_what_has_no_public_figure_is_not_predicted() -> None:
    start = first_step("ghcr.io/team/trainer:1", "llama3-70b", 4, pool(min_nodes=0, streaming=False), None)
    assert seconds(start)["image"] is None and seconds(start)["nodes"] is None
    assert start.known_seconds == 0.0
