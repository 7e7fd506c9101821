"""The predicted time to a run's first step, term by term, against hand-computed cases."""

from __future__ import annotations

import pytest

from facts.gke import CapacityType
from facts.registries import RegistryMirror
from planners.pools import GpuPoolExport
from planners.startup import first_step

NEMO = "nvcr.io/nvidia/nemo:26.02"
MIRROR = RegistryMirror("proj-1", "us-east5", "nemo-dev")


def pool(min_nodes: int = 4, streaming: bool = True, preloaded: str | None = None) -> GpuPoolExport:
    return GpuPoolExport(
        "gpu", "a3-ultragpu-8g", "us-east5-b", 4, CapacityType.ON_DEMAND, True, min_nodes,
        image_streaming=streaming, preloaded_image=preloaded,
    )  # fmt: skip


def seconds(start: object) -> dict[str, float | None]:
    return {t.name: t.seconds for t in start.terms}  # type: ignore[attr-defined]


def test_a_nemo_image_pulled_whole_takes_its_size_over_the_measured_bandwidth() -> None:
    """5.4 GB pulled in 191 - 30 = 161 s is 33.5 MB/s; a 30 GB NeMo image then takes 30 / (5.4 / 161)
    = 894.4 s. Warm-up: 107 - 25.6 = 81.4 s."""
    start = first_step(NEMO, 4, pool(streaming=False), None)
    assert seconds(start)["image"] == pytest.approx(894.4, abs=0.1)
    assert seconds(start)["warm-up"] == pytest.approx(81.4)
    assert seconds(start)["nodes"] == 0.0 and seconds(start)["pod start and NCCL"] is None
    assert start.known_seconds == pytest.approx(975.8, abs=0.1) and not start.complete


def test_an_image_through_the_mirror_streams_and_a_preloaded_one_costs_nothing() -> None:
    assert seconds(first_step(NEMO, 4, pool(), MIRROR))["image"] == 30.0
    # Without the mirror nvcr.io is not Artifact Registry: nothing streams.
    assert seconds(first_step(NEMO, 4, pool(), None))["image"] == pytest.approx(894.4, abs=0.1)
    assert seconds(first_step(NEMO, 4, pool(preloaded=NEMO), MIRROR))["image"] == 0.0
    # A pool preloaded with another image streams the run's.
    assert seconds(first_step(NEMO, 4, pool(preloaded="nvcr.io/nvidia/nemo:25.11"), MIRROR))["image"] == 30.0


def test_what_has_no_public_figure_is_not_predicted() -> None:
    start = first_step("ghcr.io/team/trainer:1", 4, pool(min_nodes=0, streaming=False), None)
    assert seconds(start)["image"] is None and seconds(start)["nodes"] is None
    assert start.known_seconds == pytest.approx(81.4)
