"""The runs this stack has submitted, as its state records them.

The engine's builtin `pulumi:pulumi:readStackResourceOutputs` answers with every resource of a
stack's latest checkpoint and its outputs (pulumi/pulumi pkg/resource/deploy/builtins.go
`readStackResourceOutputs`, pkg/backend/backend.go `GetStackResourceOutputs`). Asked for this stack
before anything is registered, it is the state the update starts from: each run's JobSet as the
last `up` or `refresh` left it. An invoke registers nothing, as the upstream read (stacks.upstream).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pulumi

from facts.kubernetes import JOBSET_API, RUN_LABEL
from planners.submitted import Submitted, submitted_of

READ_STACK_RESOURCES = "pulumi:pulumi:readStackResourceOutputs"
JOBSET_TYPE = f"kubernetes:{JOBSET_API}:JobSet"


def runs_of(resources: Mapping[str, Any]) -> dict[str, Submitted]:
    """The JobSet of each run (by its run label) among a stack's recorded resources (URN to type
    and outputs); fabric checks, which carry no run label, are not runs."""
    found: dict[str, Submitted] = {}
    for entry in resources.values():
        if entry.get("type") != JOBSET_TYPE:
            continue
        outputs = entry.get("outputs") or {}
        run = ((outputs.get("metadata") or {}).get("labels") or {}).get(RUN_LABEL)
        if run:
            found[str(run)] = submitted_of(outputs)
    return found


def recorded_runs(stack: str) -> dict[str, Submitted]:
    """The runs the stack named `stack` (organization/project/stack) has submitted."""
    result = pulumi.runtime.invoke(READ_STACK_RESOURCES, {"stackName": stack})
    return runs_of(dict((result.value or {}).get("outputs") or {}))
