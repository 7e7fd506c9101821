"""`python -m analysis plot`: a real PNG with the loss and step-time series and the window marked."""

from __future__ import annotations

import math
import re
import struct
from pathlib import Path

import numpy as np
import pytest
from matplotlib.collections import LineCollection
from matplotlib.patches import Rectangle

from analysis.__main__ import main
from analysis.logs import StepRange, read_log
from analysis.metrics import compute, model_flops
from analysis.plot import build_figure, write_png
from facts.machines import Precision
from tests.unit.analysis.logs_for_tests import (
    GPT_PARAMETERS,
    SHARED_LOG,
    dllogger_line,
    needs_shared_log,
    step_data,
    valid_gpt_log,
    write_dllogger,
    write_restarted_dllogger,
)
from tests.unit.analysis.test_cli import HOSTILE_LOGS, RUN

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
STEP_TIMES = [9.0] * 5 + [3.0] * 35


def png_size(path: Path) -> tuple[int, int]:
    """Width and height from the IHDR chunk, which must come first."""
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE
    assert data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def test_figure_draws_both_series_and_the_window(tmp_path: Path) -> None:
    log = read_log(write_dllogger(tmp_path / "gpt.json", STEP_TIMES, GPT_PARAMETERS))
    window = StepRange(10, 30)
    result = compute(
        log,
        window,
        model_flops(log.parameters),
        gpus=8,
        global_batch_size=16,
        accelerator_name="h100",
        precision=Precision.BF16,
    )
    figure = build_figure(log, window, result)
    loss_axes, time_axes = figure.axes

    loss_line = loss_axes.lines[0]
    assert np.array_equal(np.asarray(loss_line.get_xdata()), np.arange(40))
    assert np.allclose(np.asarray(loss_line.get_ydata()), [10.0 - step / 10 for step in range(40)])
    time_line = time_axes.lines[0]
    assert np.array_equal(np.asarray(time_line.get_xdata()), np.arange(40))
    assert np.allclose(np.asarray(time_line.get_ydata()), STEP_TIMES)
    assert "loss" in loss_axes.get_ylabel()
    assert "step time" in time_axes.get_ylabel()
    assert time_axes.get_xlabel() == "step"

    for axes in (loss_axes, time_axes):
        spans = [p for p in axes.patches if isinstance(p, Rectangle)]
        assert len(spans) == 1
        left = spans[0].get_x()
        assert (left, left + spans[0].get_width()) == pytest.approx((9.5, 30.5))
    mean = time_axes.collections[0]
    assert isinstance(mean, LineCollection)
    assert mean.get_segments()[0].tolist() == [[10.0, 3.0], [30.0, 3.0]]
    title = figure.texts[0].get_text()
    assert "step time 3.000 s" in title and "TFLOPS/GPU" in title and "MFU" in title

    out = tmp_path / "run.png"
    write_png(figure, out)
    assert png_size(out) == (1210, 770)  # 11 × 7 inches at 110 dpi


@needs_shared_log
def test_cli_writes_a_png_of_the_shared_log(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "shared.png"
    assert main(["plot", "--log", str(SHARED_LOG), "--out", str(out)]) == 0
    assert capsys.readouterr().out.strip() == f"wrote {out}"
    width, height = png_size(out)
    assert width > 1000 and height > 700
    assert out.stat().st_size > 20_000  # drawn content, not an empty canvas


def test_a_log_without_loss_still_plots_and_says_so(tmp_path: Path) -> None:
    log_path = tmp_path / "noloss.json"
    log_path.write_text("\n".join(dllogger_line(s, {"train_step_timing in s": 2.0}) for s in range(40)))
    figure = build_figure(read_log(log_path), StepRange(10, 30))
    loss_axes, time_axes = figure.axes
    assert not loss_axes.lines
    assert "no 'reduced_train_loss'" in loss_axes.texts[0].get_text()
    assert len(time_axes.lines) == 1


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--gpus", "8"], "only with all of --gpus"),
        (["--start-step", "5", "--end-step", "4"], "--end-step 4 is before --start-step 5"),
    ],
)
def test_plot_bad_input_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    assert main(["plot", "--log", str(valid_gpt_log(tmp_path)), "--out", str(tmp_path / "x.png"), *extra]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "x.png").exists()


def test_plot_never_replaces_its_log_or_a_file_that_is_not_a_plot(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--out` equal to the log (a log named .png) overwrote the log with the plot."""
    log = valid_gpt_log(tmp_path)
    as_png = log.rename(tmp_path / "log.png")
    text = as_png.read_text()
    assert main(["plot", "--log", str(as_png), "--out", str(as_png)]) == 2
    assert "is the log being read" in capsys.readouterr().err and as_png.read_text() == text
    other = tmp_path / "notes.png"
    other.write_text("not a plot")
    assert main(["plot", "--log", str(as_png), "--out", str(other)]) == 2
    assert "exists and is not a PNG" in capsys.readouterr().err and other.read_text() == "not a plot"
    plot = tmp_path / "plot.png"
    assert main(["plot", "--log", str(as_png), "--out", str(plot)]) == 0
    assert main(["plot", "--log", str(as_png), "--out", str(plot)]) == 0, "a plot replaces a plot"


def test_plot_to_a_missing_directory_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plot", "--log", str(valid_gpt_log(tmp_path)), "--out", str(tmp_path / "no" / "x.png")]) == 2
    assert "cannot write" in capsys.readouterr().err


# ---------------------------------------------------------------------------- plot refuses what metrics refuses

# HOSTILE_LOGS cases refused for the log itself, whatever the throughput options: `plot`
# without them must refuse these too. The others are about the model, the accelerator or
# the options, which `plot` uses only with the throughput options.
LOG_REFUSALS = [
    "empty",
    "blank lines",
    "no step timings",
    "truncated JSON in the window",
    "a foreign line",
    "window after the last step",
    "steps without timings",
    "text timing without a step",
    "text timing without a value",
    "start after end",
    "NaN step time in the window",
    "negative step time in the window",
    "zero step time in the window",
    "step time of 1e308",
    "one step time of 1e308",
    "an integer step time beyond a float",
    "a 5000-digit step time",
]


def _hostile_log(tmp_path: Path, case: str) -> tuple[Path, list[str]]:
    text, extra, _ = HOSTILE_LOGS[case]
    if text is None:
        return valid_gpt_log(tmp_path), extra
    path = tmp_path / "log.json"
    path.write_text(text)
    return path, extra


def _refusal(capsys: pytest.CaptureFixture[str]) -> str:
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("error: ") and captured.err.count("\n") == 1, captured.err
    return captured.err


@pytest.mark.parametrize("case", HOSTILE_LOGS)
def test_plot_with_throughput_options_refuses_what_metrics_refuses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str
) -> None:
    log, extra = _hostile_log(tmp_path, case)
    out = tmp_path / "x.png"
    assert main(["metrics", "--log", str(log), *RUN, *extra]) == 2
    refused_by_metrics = _refusal(capsys)
    assert main(["plot", "--log", str(log), "--out", str(out), *RUN, *extra]) == 2
    assert _refusal(capsys) == refused_by_metrics
    assert not out.exists()


@pytest.mark.parametrize("case", LOG_REFUSALS)
def test_plot_refuses_the_logs_metrics_refuses(tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str) -> None:
    log, extra = _hostile_log(tmp_path, case)
    assert all(not arg.startswith("--") or arg in ("--start-step", "--end-step") for arg in extra)
    out = tmp_path / "x.png"
    assert main(["metrics", "--log", str(log), *RUN, *extra]) == 2
    refused_by_metrics = _refusal(capsys)
    assert main(["plot", "--log", str(log), "--out", str(out), *extra]) == 2
    assert _refusal(capsys) == refused_by_metrics
    assert not out.exists()


def test_plot_accepts_the_logs_metrics_accepts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Outside the window, metrics reads nothing: a NaN or infinite step time, a 1e308 one, a diverged
    loss and a record cut short by a killed writer. plot draws what it can and says what it left out."""
    path = write_dllogger(tmp_path / "gpt.json", STEP_TIMES, GPT_PARAMETERS)
    lines = path.read_text().splitlines()
    lines[3] = dllogger_line(2, step_data(2, float("nan"), loss=float("inf")))
    lines[4] = dllogger_line(3, step_data(3, float("inf"), loss=float("nan")))
    lines[5] = dllogger_line(4, step_data(4, 1e308, loss=1e300))
    lines.append(dllogger_line(40, step_data(40, 3.0))[:-25])
    path.write_text("\n".join(lines) + "\n")
    out = tmp_path / "run.png"
    # The loss turns infinite at step 2: a failed run (exit 1), not a refused log (exit 2).
    assert main(["metrics", "--log", str(path), *RUN]) == 1
    capsys.readouterr()
    assert main(["plot", "--log", str(path), "--out", str(out), *RUN]) == 1
    captured = capsys.readouterr()
    assert captured.out == f"wrote {out}\nrun FAILED at step 2: reduced_train_loss is infinite\n"
    assert (
        captured.err
        == f"note: {path} has 1 unreadable record outside the window (line 42), not drawn; metrics does not read them\n"
    )
    assert png_size(out) == (1210, 770)

    figure = build_figure(read_log(path, StepRange(10, 30), beyond_window=True), StepRange(10, 30))
    loss_axes, time_axes = figure.axes
    times = np.asarray(time_axes.lines[0].get_ydata(), dtype=float)
    assert np.isnan(times[2:5]).all() and np.isfinite(np.delete(times, [2, 3, 4])).all()
    assert "3 values not drawn" in time_axes.texts[0].get_text()
    assert "3 values not drawn" in loss_axes.texts[0].get_text()
    assert "FAILED: reduced_train_loss is infinite at step 2" in figure.get_suptitle()
    failure_lines = [line for line in loss_axes.lines if line.get_label().startswith("run failed")]
    assert [line.get_xdata()[0] for line in failure_lines] == [2]


def test_plot_draws_the_last_attempt_of_a_restarted_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = write_restarted_dllogger(tmp_path / "restarted.json", [3.0] * 26, 20, [5.0] * 20, GPT_PARAMETERS)
    out = tmp_path / "run.png"
    assert main(["plot", "--log", str(log), "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert err.startswith("note: ") and "the last attempt of each is drawn" in err and err.count("\n") == 1
    figure = build_figure(read_log(log, beyond_window=True), StepRange(10, 30))
    times = figure.axes[1].lines[0].get_ydata()
    assert list(times) == [3.0] * 20 + [5.0] * 20


@pytest.mark.parametrize("name", ["run.jpg", "run", "run.png.txt", "png"])
def test_plot_out_must_end_in_png(tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str) -> None:
    out = tmp_path / name
    with pytest.raises(SystemExit) as exit_info:
        main(["plot", "--log", str(valid_gpt_log(tmp_path)), "--out", str(out)])
    assert exit_info.value.code == 2
    assert re.search(r"argument --out: .*must end in \.png", _refusal(capsys))
    assert not out.exists()


def test_plot_out_may_say_png_in_capitals(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "RUN.PNG"
    assert main(["plot", "--log", str(valid_gpt_log(tmp_path)), "--out", str(out)]) == 0
    assert png_size(out)[0] > 0


@pytest.mark.parametrize(
    "extra", [["--model", "gpt-5b"], ["--seq-length", "2048"], ["--model-flops-per-sample", "1e15"]]
)
def test_plot_refuses_model_options_it_would_ignore(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str]
) -> None:
    assert main(["plot", "--log", str(valid_gpt_log(tmp_path)), "--out", str(tmp_path / "x.png"), *extra]) == 2
    assert "only with --gpus, --global-batch-size, --accelerator and --precision" in _refusal(capsys)
    assert not (tmp_path / "x.png").exists()


def test_undrawable_values_are_gaps_not_crashes(tmp_path: Path) -> None:
    """matplotlib's tick arithmetic overflows near 1e308; such values (and NaN, ±inf) become gaps."""
    path = tmp_path / "wild.json"
    path.write_text("\n".join(dllogger_line(s, step_data(s, 1e308 if s < 10 else 2.0, loss=-1e200)) for s in range(40)))
    figure = build_figure(read_log(path, beyond_window=True), StepRange(10, 30))
    assert math.isnan(figure.axes[1].lines[0].get_ydata()[0])
    write_png(figure, tmp_path / "wild.png")
    assert png_size(tmp_path / "wild.png") == (1210, 770)
