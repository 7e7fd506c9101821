"""`layout: auto`: a run that leaves its layout to the planner (planners.layout) gets the same one
on every render, keeps the one it was submitted with while its revision stands, and is refused
by key where the planner has nothing to offer."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import pytest

from harness import updates
from harness.runner import StackRun, load_stack_values, recorded_state, run_stack
from planners.layout import LayoutRequest, Proposal
from tests.conftest import Render, issue_for, rejected

JOBSET = "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"


def _dev_with(**keys: Any) -> dict[str, Any]:
    """The dev stack (gpt-5b on 2 × a3-highgpu-8g) with its run's `keys` set."""
    values = load_stack_values("dev")
    runs = copy.deepcopy(values["nemo-gke:training"]["runs"])
    runs[0].update(keys)
    return {**values, "nemo-gke:training": {**values["nemo-gke:training"], "runs": runs}}


def _plan(run: StackRun) -> dict[str, Any]:
    return run.exports["training"]["runs"]["gpt5b-demo"]["plan"]


def _layout_of(plan: dict[str, Any]) -> dict[str, Any]:
    return {**plan["layout"], "microBatchSize": plan["microBatchSize"]}


def _as_plan(p: Proposal) -> dict[str, Any]:
    lay = p.layout
    return {
        "tensorParallel": lay.tensor_parallel,
        "pipelineParallel": lay.pipeline_parallel,
        "virtualPipeline": lay.virtual_pipeline,
        "contextParallel": lay.context_parallel,
        "expertParallel": lay.expert_parallel,
        "recomputeLayers": lay.recompute_layers or None,
        "microBatchSize": lay.micro_batch_size,
    }


def test_an_auto_run_renders_the_planners_choice_twice_alike(render: Render) -> None:
    values = _dev_with(layout="auto")
    first, second = render("dev", values=values), render("dev", values=values)
    chosen = LayoutRequest.of("gpt-5b", "a3-highgpu-8g", 2).choose()
    assert _layout_of(_plan(first)) == _as_plan(chosen) == _layout_of(_plan(second))
    jobsets = [[StackRun.manifest(r) for r in run.custom_resources if r.type == JOBSET] for run in (first, second)]
    assert jobsets[0] == jobsets[1]


def test_the_go_no_go_names_the_planners_layout() -> None:
    from tools.summary import markdown  # noqa: PLC0415

    run = run_stack("dev", values=_dev_with(layout="auto", globalBatchSize=1024))
    (line,) = run.exports["summary"]["runs"]
    chosen = LayoutRequest.of("gpt-5b", "a3-highgpu-8g", 2, global_batch_size=1024).choose()
    assert line["plannedLayout"] == chosen.layout.describe
    text = markdown("dev", run.exports["summary"], [])
    assert f"gpt5b-demo's layout is the layout planner's ({chosen.layout.describe})" in text
    assert run_stack("dev").exports["summary"]["runs"][0]["plannedLayout"] is None


def test_the_recipes_layout_is_kept_where_nothing_is_predicted_clearly_faster() -> None:
    """gpt-5b's recipe (TP1 PP1, micro-batch 4) on 16 H100 ties with the fastest: NVIDIA's tuning wins."""
    chosen = LayoutRequest.of("gpt-5b", "a3-highgpu-8g", 2).choose()
    assert (chosen.layout.tensor_parallel, chosen.layout.pipeline_parallel, chosen.layout.micro_batch_size) == (1, 1, 4)


def test_a_submitted_auto_run_keeps_its_layout_when_the_planner_changes_its_mind(
    render: Render, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A newer planner that would choose otherwise reaches the run only when its revision is
    raised: its plan keeps the recorded layout and its JobSet stays as it is."""
    values = _dev_with(layout="auto")
    before = render("dev", values=values)
    kept = _layout_of(_plan(before))
    choose = LayoutRequest.choose

    def changed_mind(self: LayoutRequest) -> Proposal:
        p = choose(self)
        return dataclasses.replace(p, layout=dataclasses.replace(p.layout, micro_batch_size=1))

    monkeypatch.setattr(LayoutRequest, "choose", changed_mind)
    assert kept["microBatchSize"] != 1, "the stand-in must choose otherwise"
    after = run_stack("dev", values=values, recorded=recorded_state(before))
    assert _layout_of(_plan(after)) == kept
    steps = {new.type: step.op for _, new, step in updates.plan(before, after).values()}
    assert steps[JOBSET] == "same"
    # Raised, the revision takes the planner's new choice; a new stack takes it at once.
    raised = run_stack("dev", values=_dev_with(layout="auto", revision=2), recorded=recorded_state(before))
    assert _layout_of(_plan(raised))["microBatchSize"] == 1
    assert _layout_of(_plan(run_stack("dev", values=values)))["microBatchSize"] == 1


def test_a_changed_input_at_the_same_revision_is_refused_not_replanned(render: Render) -> None:
    before = render("dev", values=_dev_with(layout="auto"))
    with pytest.raises(Exception) as failed:
        run_stack("dev", values=_dev_with(layout="auto", globalBatchSize=1024), recorded=recorded_state(before))
    issues = [(i.key, i.value) for i in failed.value.error.issues]  # type: ignore[attr-defined]
    assert issues == [("training.runs[0].globalBatchSize", 1024)]


def test_a_layout_key_beside_auto_is_refused_by_key() -> None:
    error = rejected(_dev_with(layout="auto", tensorParallel=2))
    assert "is the layout planner's to choose with layout: auto" in issue_for(error, "training.runs[0].tensorParallel")


def test_a_model_no_layout_of_the_pool_fits_is_refused_by_nodes() -> None:
    """Llama 3.1 405B over 16 H100: its weights, gradients and optimizer state alone are 405e9 ×
    16 bytes / 16 GPUs, five times an H100 (the batch case: tests/unit/test_layout_planner.py)."""
    error = rejected(_dev_with(layout="auto", model="llama3.1-405b"))
    assert "no layout of llama3.1-405b fits 16 H100 GPUs" in issue_for(error, "training.runs[0].nodes")


def test_a_layout_is_kept_only_for_what_it_was_planned_for() -> None:
    """The record's machine, nodes, batch, sequence and precision must all still hold: a run whose
    default pool now has another machine is planned again (and its JobSet kept as submitted)."""
    from config.training import RunConfig  # noqa: PLC0415
    from facts.models import model_spec  # noqa: PLC0415
    from planners.submitted import PlannedFor, Submitted  # noqa: PLC0415
    from stacks.training import _kept_layout  # noqa: PLC0415

    run = RunConfig.model_validate({"name": "r", "model": "llama3-70b", "nodes": 4, "layout": "auto"})
    settings = model_spec("llama3-70b").recipe_on("a3-megagpu-8g").settings()
    planned = PlannedFor("a3-megagpu-8g", 4, settings.global_batch_size, settings.sequence_length, settings.fp8)
    layout = {
        "tensorParallel": 4,
        "pipelineParallel": 8,
        "contextParallel": 1,
        "expertParallel": 1,
        "microBatchSize": 1,
    }
    submitted = Submitted("r", revision=1, layout=layout, planned_for=planned)
    assert _kept_layout(run, submitted, "a3-megagpu-8g", settings) == layout
    assert _kept_layout(run, submitted, "a3-highgpu-4g", settings) is None
    assert _kept_layout(run, dataclasses.replace(submitted, revision=2), "a3-megagpu-8g", settings) is None
    assert _kept_layout(run, dataclasses.replace(submitted, planned_for=None), "a3-megagpu-8g", settings) is None
