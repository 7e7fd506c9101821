"""`make bench` reports a missed goal and exits 0; only a render that fails fails it."""

from __future__ import annotations

import subprocess
from typing import Any

import pytest

from tools import bench


def test_a_missed_goal_is_reported_not_failed(monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    slow = bench.RENDER_GOAL_S * 2
    monkeypatch.setattr(bench, "time_render", lambda stack, out, repeats: [slow] * repeats)
    monkeypatch.setattr(bench.benchmark, "main", lambda argv: 0)
    assert bench.main(["--stack", "dev", "--repeats", "1"]) == 0
    printed = capsys.readouterr().out
    assert "MISSES" in printed and "1 of 1 renders missed the goal" in printed and "cores" in printed


def test_a_render_that_fails_fails_the_bench_in_one_line(monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    def failed(command: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(command, 2, stdout="", stderr="error: nemo-gke:zone: bad\n")

    monkeypatch.setattr(bench.subprocess, "run", failed)
    assert bench.main(["--stack", "dev"]) == 1
    err = capsys.readouterr().err
    assert err == "error: render dev exited 2: error: nemo-gke:zone: bad\n"
