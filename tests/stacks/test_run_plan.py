"""A run is planned once (planners.nemo.plan_run): the config check, the summary, the training
layer and the component read one frozen plan, and the stack exports it for the user."""

from __future__ import annotations

import dataclasses
import json
from typing import Any
from unittest import mock

import pytest

from facts.machines import MACHINE_TYPES
from harness.runner import run_stack
from planners import nemo, workload
from stacks import training
from tests.conftest import Render


def test_each_run_is_planned_once_per_program_run() -> None:
    """It was planned three times: the check, the summary and the layer each built the run
    again, and the component built its files and environment a fourth time."""
    with (
        mock.patch.object(training, "run_spec", wraps=training.run_spec) as specs,
        mock.patch.object(nemo, "plan_run", wraps=nemo.plan_run) as plans,
        mock.patch.object(nemo, "workload_files", wraps=nemo.workload_files) as files,
    ):
        run = run_stack("teams")
    runs = len(run.exports["training"]["runs"])
    assert runs > 1
    assert specs.call_count == plans.call_count == files.call_count == runs


def test_a_plan_cannot_be_changed_once_made() -> None:
    made: list[nemo.RunPlan] = []
    plan_run = nemo.plan_run

    def keep(*args: Any) -> nemo.RunPlan:
        made.append(plan_run(*args))
        return made[-1]

    with mock.patch.object(nemo, "plan_run", side_effect=keep):
        run_stack("dev")
    (plan,) = made
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.steps = 1  # type: ignore[attr-defined]
    with pytest.raises(TypeError):
        plan.files["launch.sh"] = ""  # type: ignore[index]
    with pytest.raises(TypeError):
        plan.env["NNODES"] = "9"  # type: ignore[index]


@pytest.mark.parametrize("stack", ["dev", "a4", "a3ultra"])
def test_the_stack_exports_each_run_s_plan_as_its_pods_run_it(render: Render, stack: str) -> None:
    run = render(stack)
    for name, exported in run.exports["training"]["runs"].items():
        plan = json.loads(json.dumps(exported["plan"]))
        config_map = next(
            run.manifest(c) for c in run.of_type("kubernetes:core/v1:ConfigMap") if c.name.endswith(f"{name}-workload")
        )
        files: dict[str, Any] = config_map["data"]
        assert plan["gpus"] == plan["nodes"] * MACHINE_TYPES[plan["machine"]].gpus
        if workload.RUN_SETTINGS in files and plan["runtime"] == "Megatron-Bridge":
            settings = json.loads(files[workload.RUN_SETTINGS])
            assert settings["train"]["train_iters"] == plan["steps"]
            assert settings["model"]["tensor_model_parallel_size"] == plan["layout"]["tensorParallel"]
            assert settings["train"]["global_batch_size"] == plan["globalBatchSize"]
        assert plan["entrypoint"].split()[0].endswith(".py")
