"""What this stack's state records of the runs it has submitted.

The engine's builtin `pulumi:pulumi:readStackResourceOutputs` answers with every resource of a
stack's latest checkpoint and its outputs (pulumi/pulumi pkg/resource/deploy/builtins.go
`readStackResourceOutputs`, pkg/backend/backend.go `GetStackResourceOutputs`), secrets decrypted.
Asked for this stack before anything is registered, it is the state the update starts from: each
run's TrainingRun outputs as the last `up` left them (components.training). The invoke registers
no resource of the stack's, only the engine's own: its root, and the provider of its builtin
invokes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pulumi

from components.training import TrainingRun
from planners.submitted import Submitted, recorded_of

READ_STACK_RESOURCES = "pulumi:pulumi:readStackResourceOutputs"


def runs_of(resources: Mapping[str, Any], layer: str) -> dict[str, Submitted]:
    """What a stack's recorded resources (URN to type and outputs) say of each run, by its name:
    the TrainingRuns of the training layer named `layer`, named `<layer>-<run>` (an earlier
    nemo-gke's record no run name among their outputs), and whether each one's JobSet, its child
    `<layer>-<run>-jobset`, is recorded too."""
    names = {urn.rsplit("::", 1)[-1] for urn in resources}
    found: dict[str, Submitted] = {}
    for urn, entry in resources.items():
        if entry.get("type") != TrainingRun.TYPE:
            continue
        component = urn.rsplit("::", 1)[-1]
        outputs = entry.get("outputs") or {}
        run = outputs.get("run") or component.removeprefix(f"{layer}-")
        found[str(run)] = recorded_of(outputs, jobset_recorded=f"{component}-jobset" in names)
    return found


def recorded_runs(stack: str, layer: str) -> dict[str, Submitted]:
    """What the stack named `stack` (organization/project/stack) records of its runs."""
    result = pulumi.runtime.invoke(READ_STACK_RESOURCES, {"stackName": stack})
    return runs_of(dict((result.value or {}).get("outputs") or {}), layer)
