"""`python -m analysis stragglers`: slow ranks and their nodes from Megatron Core's straggler
reports, on logs written by analysis.samples.straggler_line (Megatron Core's format) with known
answers worked out here."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from analysis import samples
from analysis.__main__ import main
from analysis.stragglers import SPREAD, find_stragglers, read_reports

WHEN = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def write(tmp_path: Path, reports: list[tuple[tuple[float, int], tuple[float, int]]], noise: str = "") -> Path:
    path = tmp_path / "node-0.log"
    lines = [noise, *(samples.straggler_line(WHEN, fast, slow) for fast, slow in reports), noise]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_the_sample_run_s_straggler_and_what_it_costs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The sample: rank 13 the slowest in 15 of 20 reports by 12 %, so up to 15 × 0.12/1.12 / 20 =
    8.04 % of the run waits for it; 5 reports of another rank by 2 % bring the mean wait to
    (15 × 0.12/1.12 + 5 × 0.02/1.02) / 20 = 8.53 %. 16 GPUs, 8 a node: rank 13 is on node 1."""
    log = tmp_path / "node-0.log"
    log.write_text(samples.sample_files()["node-0.log"])
    assert main(["stragglers", "--log", str(log), "--gpus-per-node", "8", "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    (straggler,) = found["stragglers"]
    assert straggler == {
        "rank": samples.STRAGGLER_RANK,
        "node": 1,
        "slowestIn": 15,
        "spread": pytest.approx(samples.STRAGGLER_SPREAD, abs=1e-4),
        "cost": pytest.approx(15 * (0.12 / 1.12) / 20, abs=1e-4),
    }
    assert found["reports"] == samples.STRAGGLER_REPORTS == 20
    assert found["waiting"] == pytest.approx((15 * 0.12 / 1.12 + 5 * 0.02 / 1.02) / 20, abs=1e-4)
    assert main(["stragglers", "--log", str(log), "--gpus-per-node", "8"]) == 0
    table = capsys.readouterr().out
    assert "rank 13 on node 1 (pod index 1, logs/node-1.log)" in table and "up to 8.0%" in table


def test_the_node_follows_the_gpus_per_node(tmp_path: Path) -> None:
    log = write(tmp_path, [((100.0, 0), (120.0, 13))] * 4)
    assert find_stragglers(read_reports(log), 4).stragglers[0].node == 3


def test_a_slowest_rank_that_changes_or_barely_lags_is_no_straggler(tmp_path: Path) -> None:
    """Rank 5 slowest in half the reports but within SPREAD; the others' slowest changes."""
    lag = 1 + SPREAD / 2
    reports = [
        ((100.0, 0), (100.0 * lag, 5)),
        ((100.0, 0), (100.0 * lag, 5)),
        ((100.0, 0), (130.0, 1)),
        ((100.0, 0), (130.0, 2)),
    ]
    log = write(tmp_path, reports)
    found = find_stragglers(read_reports(log), 8)
    assert found.stragglers == ()
    assert found.slowest == {5: 2, 1: 1, 2: 1}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("INFO: step 1 | elapsed time per iteration (ms): 19400.0\n", "no straggler report"),
        ("MnRtt/Rnk: 120.00ms/0 | MxRtt/Rnk: 100.00ms/3\n", "a straggler report with times 120.0 and 100.0 ms"),
        ("MnRtt/Rnk: 0.00ms/0 | MxRtt/Rnk: 100.00ms/3\n", "a straggler report with times 0.0 and 100.0 ms"),
        # Not Megatron Core's two-decimal values: no report at all, never a traceback or an infinity.
        ("MnRtt/Rnk: 1.2.3ms/0 | MxRtt/Rnk: 100.00ms/3\n", "no straggler report"),
        (f"MnRtt/Rnk: 1.00ms/0 | MxRtt/Rnk: {'9' * 400}.00ms/3\n", "no straggler report"),
    ],
)
def test_a_log_without_readable_reports_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, message: str
) -> None:
    log = tmp_path / "node-0.log"
    log.write_text(text)
    assert main(["stragglers", "--log", str(log), "--gpus-per-node", "8"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and len(captured.err.strip().splitlines()) == 1 and message in captured.err


def test_a_missing_log_and_a_bad_gpu_count_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["stragglers", "--log", str(tmp_path / "none.log"), "--gpus-per-node", "8"]) == 2
    assert "none.log" in capsys.readouterr().err
    for flags in (["--gpus-per-node", "0"], []):
        with pytest.raises(SystemExit) as exited:
            main(["stragglers", "--log", str(tmp_path / "none.log"), *flags])
        assert exited.value.code == 2
