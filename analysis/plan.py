"""A run's plan, as the stack output `training.runs.<run>.plan` holds it (planners.nemo.RunPlan):
what `python -m analysis metrics --plan FILE` reads the run's GPUs, batch, GPU and precision from,
and the step times it holds the measured one to: the layout planner's prediction for the run's
layout (`predictedStepTimeS`) and NVIDIA's published step at exactly that layout
(`publishedStepTimeS`), where there is one."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from analysis.errors import AnalysisError
from analysis.metrics import MAX_STEP_TIME_S
from facts.machines import MACHINE_TYPES, Precision


@dataclass(frozen=True)
class RunPlan:
    path: Path
    model: str
    gpus: int
    global_batch_size: int
    sequence_length: int
    accelerator: str
    precision: Precision
    predicted_step_s: float | None
    published_step_s: float | None


# A reference step time outside these bounds is no step of a training run (analysis.metrics
# bounds a measured one by MAX_STEP_TIME_S too).
MIN_REFERENCE_STEP_S = 1e-3


def _number(plan: dict[str, Any], key: str, path: Path, *, whole: bool = True, optional: bool = False) -> Any:
    """A whole number, or a step time in seconds; integral floats count as whole (the engine
    answers numbers as floats)."""
    value = plan.get(key)
    if value is None and optional:
        return None
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        if whole and float(value).is_integer() and value > 0:
            return int(value)
        if not whole and MIN_REFERENCE_STEP_S <= value <= MAX_STEP_TIME_S:
            return float(value)
    kind = "a positive whole number" if whole else f"a step time from {MIN_REFERENCE_STEP_S:g} to {MAX_STEP_TIME_S:g} s"
    raise AnalysisError(f"--plan {path}: `{key}` must be {kind}, got {json.dumps(value)}")


def _plan_in(document: Any, path: Path, run: str | None) -> dict[str, Any]:
    """The run's plan in a stack's outputs (`pulumi stack output --json`, or a render's
    outputs.json), its `training` output, a run's outputs, or the plan itself."""
    if isinstance(document, dict) and isinstance(document.get("training"), dict):
        document = document["training"]
    if isinstance(document, dict) and isinstance(document.get("runs"), dict):
        runs = document["runs"]
        if run is None and len(runs) != 1:
            raise AnalysisError(f"--plan {path} holds runs {', '.join(runs) or '(none)'}: name one with --run")
        name = run if run is not None else next(iter(runs))
        if name not in runs:
            raise AnalysisError(f"--run {name}: --plan {path} holds runs {', '.join(runs) or '(none)'}")
        document = runs[name]
    elif run is not None:
        raise AnalysisError(f"--run {run}: --plan {path} holds one run's plan, not a stack's outputs")
    plan = document.get("plan", document) if isinstance(document, dict) else None
    if not isinstance(plan, dict):
        raise AnalysisError(f"--plan {path}: expected a stack's outputs or a run's plan (training.runs.<run>.plan)")
    return plan


def read_plan(path: Path, run: str | None = None) -> RunPlan:
    """The plan of the run `run` (None: the only one) in `path` (_plan_in)."""
    try:
        document = json.loads(path.read_text())
    except OSError as e:
        raise AnalysisError(f"--plan {path}: {e.strerror or e}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise AnalysisError(f"--plan {path}: not JSON ({e})") from None
    except RecursionError:
        raise AnalysisError(f"--plan {path}: JSON nested too deeply for a stack's outputs") from None
    plan = _plan_in(document, path, run)
    machine = MACHINE_TYPES.get(str(plan.get("machine")))
    if machine is None:
        raise AnalysisError(
            f"--plan {path}: `machine` {json.dumps(plan.get('machine'))} is not a catalog machine; pass "
            "--accelerator and the other throughput options instead"
        )
    precision = str(plan.get("precision", ""))
    if not precision.startswith(("bf16", "fp8")):
        raise AnalysisError(f"--plan {path}: `precision` must be bf16 or fp8 (…), got {json.dumps(precision)}")
    model = plan.get("model")
    if not isinstance(model, str) or not model:
        raise AnalysisError(f"--plan {path}: `model` must name a catalog model")
    return RunPlan(
        path=path,
        model=model,
        gpus=_number(plan, "gpus", path),
        global_batch_size=_number(plan, "globalBatchSize", path),
        sequence_length=_number(plan, "sequenceLength", path),
        accelerator=machine.accelerator.name,
        precision=Precision.FP8 if precision.startswith("fp8") else Precision.BF16,
        predicted_step_s=_number(plan, "predictedStepTimeS", path, whole=False, optional=True),
        published_step_s=_number(plan, "publishedStepTimeS", path, whole=False, optional=True),
    )


@dataclass(frozen=True)
class Against:
    """A measured step time beside a reference one."""

    what: str
    reference_s: float
    measured_s: float

    @property
    def ratio(self) -> float:
        """Measured over reference: above 1, the run is slower."""
        return self.measured_s / self.reference_s

    def sentence(self) -> str:
        change = self.ratio - 1
        direction = "slower" if change > 0 else "faster"
        # The throughput figures scale with the inverse of the step time.
        return (
            f"{self.reference_s:.2f} s {self.what}: the run is {abs(change):.1%} {direction}, "
            f"its TFLOPS and MFU {1 / self.ratio:.1%} of what that step time gives"
        )

    def as_json(self) -> dict[str, float]:
        return {"reference_step_time_s": self.reference_s, "measured_over_reference": self.ratio}


def against(plan: RunPlan, measured_s: float) -> list[Against]:
    """The plan's references the measured step time is held to, the prediction first."""
    found = []
    if plan.predicted_step_s is not None:
        found.append(Against("predicted by the layout planner", plan.predicted_step_s, measured_s))
    if plan.published_step_s is not None:
        found.append(Against("published by NVIDIA at this layout", plan.published_step_s, measured_s))
    return found
