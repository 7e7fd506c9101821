"""What this stack's state records of the runs it has submitted.

The engine's builtin `pulumi:pulumi:readStackResourceOutputs` answers with every resource of a
stack's latest checkpoint and its outputs (pulumi/pulumi pkg/resource/deploy/builtins.go
`readStackResourceOutputs`, pkg/backend/backend.go `GetStackResourceOutputs`), secrets decrypted.
Asked for this stack before anything is registered, it is the state the update starts from: each
run's TrainingRun outputs as the last `up` left them (components.training). The invoke registers
no resource of the stack's, only the engine's own: its root, and the provider of its builtin
invokes.

On a file backend (`pulumi login file://...`) that read can race the engine's own write of the
checkpoint as it registers the stack: gocloud's fileblob replaces the checkpoint by a rename, but
rewrites its `.attrs` sidecar in place (os.Create, then the JSON: blob/fileblob/attrs.go
`setAttrs`, gocloud.dev v0.46), and a read that finds the sidecar empty fails with "failed to load
checkpoint: EOF" (pkg/backend/diy/state.go `getCheckpoint`, pulumi v3.274.1). Such a read is tried
again.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

import pulumi

from components.training import TrainingRun
from planners.submitted import Submitted, recorded_of

READ_STACK_RESOURCES = "pulumi:pulumi:readStackResourceOutputs"
# A read that met the checkpoint's sidecar half written, and the waits before each new try.
TORN_CHECKPOINT_READ = "failed to load checkpoint: EOF"
READ_RETRY_WAITS_S = (0.05, 0.1, 0.2, 0.4, 0.8)


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
    result = read_retrying_torn(lambda: pulumi.runtime.invoke(READ_STACK_RESOURCES, {"stackName": stack}))
    return runs_of(dict((result.value or {}).get("outputs") or {}), layer)


def read_retrying_torn(read: Callable[[], Any], sleep: Callable[[float], None] = time.sleep) -> Any:
    """`read()`, tried again after each wait of READ_RETRY_WAITS_S while it fails on a torn
    checkpoint; any other failure, or the last one, is raised."""
    for wait in READ_RETRY_WAITS_S:
        try:
            return read()
        except Exception as error:
            if TORN_CHECKPOINT_READ not in str(error):
                raise
        sleep(wait)
    return read()
