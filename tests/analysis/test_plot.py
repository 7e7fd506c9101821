"""`python -m analysis plot`: a real PNG with the loss and step-time series and the window marked."""

from __future__ import annotations

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
from tests.analysis.logs_for_tests import (
    GPT_PARAMETERS,
    SHARED_LOG,
    dllogger_line,
    needs_shared_log,
    valid_gpt_log,
    write_dllogger,
)

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
        (["--start-step", "5", "--end-step", "4"], "start step 5 is after its end step 4"),
    ],
)
def test_plot_bad_input_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    assert main(["plot", "--log", str(valid_gpt_log(tmp_path)), "--out", str(tmp_path / "x.png"), *extra]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "x.png").exists()


def test_plot_to_a_missing_directory_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plot", "--log", str(valid_gpt_log(tmp_path)), "--out", str(tmp_path / "no" / "x.png")]) == 2
    assert "cannot write" in capsys.readouterr().err
