"""One module per runtime a training run can use, chosen by its recipe's framework as a machine's
GPUDirect stack is chosen by its machine (planners.gpudirect)."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from facts.errors import RuleError
from facts.models import Framework, Recipe
from planners.runs import RunSpec
from planners.runtimes import bridge, nemo1, nemo2
from planners.workload import Runtime

RUNTIMES: Mapping[Framework, Runtime] = MappingProxyType(
    {runtime.framework: runtime for runtime in (nemo1.RUNTIME, nemo2.RUNTIME, bridge.RUNTIME)}
)


def runtime_of(recipe: Recipe) -> Runtime:
    return RUNTIMES[recipe.framework]


def check_overrides(run: RunSpec) -> None:
    """No override sets what one of the run's keys sets (Runtime.keyed_overrides)."""
    keyed = runtime_of(run.recipe).keyed_overrides
    for key, value in run.overrides.items():
        if key in keyed:
            why = f"is what the run's key {keyed[key]} sets ({run.recipe.framework.label}): set {keyed[key]} instead"
            raise RuleError(f"overrides.{key}", value, why)
