"""Loss and step time against step, with the averaging window shaded: a run at a glance.

Uses matplotlib's object API with the Agg canvas (no pyplot, no display, no global state),
so it runs in pods and CI and can be called repeatedly from tests.

The plot draws every step of the log, while `metrics` checks only the window: a value outside
it that cannot be drawn (NaN, ±inf, or beyond ±1e100, where matplotlib's axis arithmetic
overflows; a diverged loss stays far below) is left as a gap, and the panel says how many.
"""

from __future__ import annotations

import math
from pathlib import Path

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from analysis.errors import AnalysisError
from analysis.logs import LOSS, STEP_TIME, StepRange, TrainingLog
from analysis.metrics import RunMetrics, average_step_time, loss_failure_text

# Below this many points, mark each step so single outliers stay visible.
_MARKER_LIMIT = 200
_WINDOW_COLOUR = "tab:orange"
# Larger values are not drawn: they are garbage, and near 1e308 matplotlib's ticks overflow.
_DRAWABLE = 1e100


def build_figure(log: TrainingLog, window: StepRange, metrics: RunMetrics | None = None) -> Figure:
    """Two panels sharing the step axis: loss on top, step time below, the window shaded in both."""
    figure = Figure(figsize=(11, 7), dpi=110, layout="constrained")
    FigureCanvasAgg(figure)
    loss_axes, time_axes = figure.subplots(2, 1, sharex=True)
    for axes, metric, label, colour in (
        (loss_axes, LOSS, "loss (reduced_train_loss)", "tab:blue"),
        (time_axes, STEP_TIME, "step time (s)", "tab:green"),
    ):
        _draw_series(axes, log, metric, label, colour)
        axes.axvspan(
            window.start - 0.5,
            window.end + 0.5,
            color=_WINDOW_COLOUR,
            alpha=0.15,
            label=f"averaging window, steps {window}",
        )
        axes.grid(True, alpha=0.3)
    if log.loss_failure is not None:
        step, _ = log.loss_failure
        for axes in (loss_axes, time_axes):
            axes.axvline(
                step, color="tab:red", linestyle=":", label=f"run failed: {loss_failure_text(log.loss_failure)}"
            )
    mean = _mean_step_time(log, window)
    if mean is not None:
        step_time, steps = mean
        label = f"mean {step_time:.3f} s over {steps} steps"
        time_axes.hlines(step_time, window.start, window.end, colors="black", linestyles="--", zorder=3, label=label)
    time_axes.set_xlabel("step")
    for axes in (loss_axes, time_axes):
        if axes.get_legend_handles_labels()[0]:
            axes.legend(loc="upper right", fontsize=9)
    figure.suptitle(_title(log, window, mean, metrics), fontsize=12)
    return figure


def _draw_series(axes: Axes, log: TrainingLog, metric: str, label: str, colour: str) -> None:
    steps, values = log.series(metric)
    axes.set_ylabel(label)
    if not steps:
        axes.text(0.5, 0.5, f"no {metric!r} in this log", transform=axes.transAxes, ha="center", va="center")
        return
    drawable = [v if math.isfinite(v) and abs(v) <= _DRAWABLE else math.nan for v in values]
    hidden = sum(1 for v in drawable if math.isnan(v))
    if hidden:
        axes.text(
            0.01,
            0.97,
            f"{hidden} value{'' if hidden == 1 else 's'} not drawn (NaN, infinite or beyond ±{_DRAWABLE:.0e})",
            transform=axes.transAxes,
            ha="left",
            va="top",
            fontsize=8,
        )
    marker = "o" if len(steps) <= _MARKER_LIMIT else None
    axes.plot(steps, drawable, color=colour, linewidth=1.2, marker=marker, markersize=3, label=metric)


def _mean_step_time(log: TrainingLog, window: StepRange) -> tuple[float, int] | None:
    """The window's mean step time, or None: a plot is still worth drawing when the window is empty."""
    try:
        return average_step_time(log, window)
    except AnalysisError:
        return None


def _title(log: TrainingLog, window: StepRange, mean: tuple[float, int] | None, metrics: RunMetrics | None) -> str:
    head = f"{log.path.name} ({log.format.value})"
    if log.loss_failure is not None:
        head += f" · FAILED: {loss_failure_text(log.loss_failure)}"
    if mean is None:
        return f"{head}\nno step times in the window (steps {window})"
    summary = f"step time {mean[0]:.3f} s (mean of steps {window})"
    if metrics is not None:
        summary += f" · {metrics.tflops_per_gpu:.1f} TFLOPS/GPU · MFU {metrics.mfu:.1%}"
        summary += f" · {metrics.gpus} × {metrics.accelerator} {metrics.precision.value}"
    return f"{head}\n{summary}"


def write_png(figure: Figure, out: Path) -> None:
    try:
        figure.savefig(out, format="png")
    except OSError as e:
        raise AnalysisError(f"cannot write {out}: {e.strerror or e}") from None
