"""What a run's checkpoints cost it (planners.checkpoints), worked by hand from the cited figures:
14 bytes a parameter (facts.resiliency: bf16 weights, fp32 main copy and two Adam moments) written
at 4,624.59 MB/s a node (GCSFuse's sequential-write benchmark)."""

from __future__ import annotations

import dataclasses
import json

import pytest

from facts.machines import MACHINE_TYPES
from facts.models import model_spec
from planners import nemo, workload
from planners.checkpoints import checkpoint_advice, checkpoint_cost
from planners.runs import RunSpec, Tokenizer

LLAMA3_70B_BYTES = 70_553_698_304 * 14
# Llama 3 70B on 8 nodes: 987.75 GB over 8 x 4.62459 GB/s.
LLAMA3_70B_WRITE_S = LLAMA3_70B_BYTES / (8 * 4_624.59e6)


def bridge_run(steps: int, interval: int, nodes: int = 8) -> RunSpec:
    settings = model_spec("llama3-70b").recipe_on("a3-ultragpu-8g").settings(steps=steps)
    tokenizer = Tokenizer("huggingface", "meta-llama/Meta-Llama-3-70B", "tokenizers/llama3")
    run = RunSpec("r", "llama3-70b", "gpu", nodes, settings, tokenizer, "normal", machine_type="a3-ultragpu-8g")
    return dataclasses.replace(run, checkpoint_interval_steps=interval)


def gpt3_run(steps: int, interval: int) -> RunSpec:
    settings = model_spec("gpt3-175b").recipe.settings(steps=steps)
    run = RunSpec("g", "gpt3-175b", "mega", 32, settings, Tokenizer("megatron", "GPT2BPETokenizer"), "normal")
    return dataclasses.replace(run, checkpoint_interval_steps=interval)


def advice_for(run: RunSpec, step_s: float | None) -> tuple[str, ...]:
    return checkpoint_advice(run, checkpoint_cost(run), step_s)


def launcher_checkpoint(run: RunSpec) -> dict[str, object]:
    machine = MACHINE_TYPES["a3-ultragpu-8g"]
    paths = workload.run_paths(run, "/nfs/exp", "/checkpoints", "/data")
    settings = json.loads(nemo.workload_files(run, paths, machine)[workload.RUN_SETTINGS])
    return settings["checkpoint"]  # type: ignore[no-any-return]


def test_a_megatron_bridge_run_saves_in_the_background_every_interval_and_once_after_its_loop() -> None:
    saving = checkpoint_cost(bridge_run(steps=100, interval=25))
    assert saving is not None and saving.asynchronous
    # Steps 25, 50, 75 and 100 in the loop, and the library's save after it.
    assert saving.saves == 5
    assert saving.bytes_per_save == LLAMA3_70B_BYTES
    assert saving.write_s == pytest.approx(26.698, abs=1e-3)
    assert launcher_checkpoint(bridge_run(steps=100, interval=25))["async_save"] is True


def test_an_interval_that_reaches_the_end_saves_the_last_step_once_not_twice() -> None:
    """The library saves after its loop whatever the step: an in-loop save at the last step would
    write the same checkpoint again, so the launcher leaves the loop's interval unset."""
    run = bridge_run(steps=30, interval=100)
    assert launcher_checkpoint(run)["save_interval"] is None
    assert checkpoint_cost(run).saves == 1  # type: ignore[union-attr]
    assert launcher_checkpoint(bridge_run(steps=30, interval=10))["save_interval"] == 10


def test_background_saves_cost_only_the_last_write_when_each_ends_before_the_next() -> None:
    saving = checkpoint_cost(bridge_run(steps=100, interval=25))
    assert saving is not None
    # 25 steps of 10 s outlast a 26.7 s write: only the last save is waited for.
    assert saving.wait_s(10.0) == pytest.approx(LLAMA3_70B_WRITE_S)
    # 25 steps of 1 s do not: each of the four saves before the last holds the next back 1.698 s.
    assert saving.wait_s(1.0) == pytest.approx(4 * (LLAMA3_70B_WRITE_S - 25) + LLAMA3_70B_WRITE_S)
    assert saving.wait_s(None) is None


def test_a_synchronous_save_holds_the_steps_for_its_whole_write() -> None:
    """NeMo 1: exp_manager saves every interval, synchronously. GPT-3 175B on 32 nodes: 2.45 TB at
    32 x 4.62459 GB/s is 16.57 s a save, whatever the step time."""
    saving = checkpoint_cost(gpt3_run(steps=100, interval=25))
    assert saving is not None and not saving.asynchronous and saving.saves == 4
    assert saving.write_s == pytest.approx(16.573, abs=1e-3)
    assert saving.wait_s(None) == pytest.approx(4 * saving.write_s)


def test_no_checkpoints_cost_nothing() -> None:
    assert checkpoint_cost(dataclasses.replace(bridge_run(100, 25), checkpoint=False)) is None


def test_advice_names_the_interval_that_brings_synchronous_saves_under_five_percent() -> None:
    # 100 steps of 2 s with a 16.57 s save every 10 steps: 165.7 s of 365.7 s.
    (advice,) = advice_for(gpt3_run(steps=100, interval=10), 2.0)
    # 16.57 s may be 5 % of the interval's 2 s steps: 166 steps.
    assert "45% of its time" in advice and "checkpoint.intervalSteps 166 or more" in advice
    assert advice_for(gpt3_run(steps=1000, interval=500), 2.0) == ()


def test_advice_for_a_short_run_that_waits_only_for_its_last_background_save() -> None:
    # 30 steps of 5 s and one 26.7 s save: 15 % of its time, no interval changes that.
    (advice,) = advice_for(bridge_run(steps=30, interval=100), 5.0)
    assert "15% of its time" in advice and "all of it for the last save" in advice
    assert "checkpoint.enabled: false" in advice
    # Saves that spill into each other: an interval as long as a write ends each before the next.
    (advice,) = advice_for(bridge_run(steps=100, interval=2), 1.0)
    assert "checkpoint.intervalSteps 27 or more" in advice
    assert advice_for(bridge_run(steps=30, interval=100), None) == ()
