"""The benchmark script runs and its generated log is one the tool reads correctly (not a timing test)."""

from __future__ import annotations

from pathlib import Path

import pytest

from analysis.benchmark import main, write_log
from analysis.logs import LogFormat, StepRange, read_log
from analysis.metrics import model_flops


def test_generated_log_is_a_dllogger_log_with_a_gpt3_config(tmp_path: Path) -> None:
    path = tmp_path / "bench.json"
    write_log(path, 300)
    log = read_log(path)
    assert log.format is LogFormat.DLLOGGER
    assert log.steps_in_file == StepRange(0, 299)
    assert len(log.records) == 300
    assert model_flops(log.parameters).flops_per_sample == pytest.approx(2.2044e15, rel=1e-4)


def test_benchmark_reports_the_best_time_against_the_goal(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--steps", "500", "--repeats", "2"]) == 0
    out = capsys.readouterr().out
    assert "500-step DLLogger log" in out
    assert "best" in out
    assert "the 2 s goal" in out
