"""payload/step_record.py: the line the Megatron-Bridge and NeMo 2 launchers print after each step
past their warm-up, as the platform's step metrics read it (planners.monitoring)."""

from __future__ import annotations

import ast
import json

import payload
from analysis.startup import CHECKPOINT_LOAD
from facts.monitoring import EXPECTED_FIELD, RECORD_FIELD, RUN_FIELD, SECONDS_FIELD, STEP_FIELD, STEP_RECORD
from payload import step_record
from payload.step_record import StepRecords
from planners.monitoring import step_record_problems
from planners.runtimes import bridge, nemo2

RECORD = {
    "fields": {RECORD_FIELD: STEP_RECORD, RUN_FIELD: "llama", EXPECTED_FIELD: 1.1},
    "stepField": STEP_FIELD,
    "secondsField": SECONDS_FIELD,
    "warmupSteps": 2,
}


def test_a_process_reports_its_steps_past_its_warm_up_as_the_metrics_read_them() -> None:
    """Steps 40 and 41 of a restarted run are its process's first two: warm-up, not reported."""
    records = StepRecords(RECORD)
    lines = [records.after(step, 1.234567) for step in range(40, 44)]
    assert lines[:2] == [None, None]
    assert [json.loads(line)[STEP_FIELD] for line in lines[2:] if line] == [42, 43]
    for line in lines[2:]:
        assert line is not None and step_record_problems(line, "llama") == []
    assert json.loads(lines[2] or "")[SECONDS_FIELD] == 1.2346


def test_a_run_without_a_step_record_prints_none() -> None:
    records = StepRecords(None)
    assert [records.after(step, 1.0) for step in range(5)] == [None] * 5


def test_the_launchers_name_their_load_records_as_the_analytics_read_them() -> None:
    assert step_record.CHECKPOINT_LOAD == CHECKPOINT_LOAD


def _calls(script: str) -> list[str]:
    """Every call in a payload script, as its source text."""
    tree = ast.parse(payload.text(script))
    return [ast.unparse(node) for node in ast.walk(tree) if isinstance(node, ast.Call)]


def test_both_launchers_hand_their_step_log_to_the_training() -> None:
    """The step logs are checked in make runtime-check on their own; here, that each launcher
    installs its own: the NeMo 2 recipe's trainer gets the callback with the run's record, and the
    Megatron-Bridge pretrain gets the step log whose loads are timed."""
    nemo2_calls = _calls(nemo2.SCRIPT)
    assert "trainer.callbacks.append(run.Config(StepLog, record=SETTINGS['stepRecord']))" in nemo2_calls
    bridge_calls = _calls(bridge.SCRIPT)
    assert "StepLog(settings['dlloggerFile'], settings.get('stepRecord'))" in bridge_calls
    assert "time_checkpoint_loads(step_log, Timers)" in bridge_calls
    assert any(call.startswith("pretrain(") and "callbacks=[step_log]" in call for call in bridge_calls)
