"""A submitted run keeps what it was submitted with, until its owner says otherwise.

gpu-recipes (one `helm install` per run) and xpk (one `kubectl apply`) never touch a run once it is
submitted, and neither does `pulumi up`: a run's objects are frozen when they are created
(components.training writes every field under `ignoreChanges`), so what an upgrade of the platform
or of the launcher changes reaches new runs only. What replaces a submitted run is its owner raising
its `revision`: the engine compares it with the one it recorded (`replacementTrigger`;
pulumi/pulumi pkg/resource/deploy/step_generator.go `shouldTriggerReplace`, which ignores a
trigger recorded by none) and replaces the run's objects, named anew (facts.kubernetes.revisioned).

Before anything is registered, each run is held against what the stack's state records of it (its
TrainingRun's outputs: stacks.recorded): a changed definition at the same revision, or a lowered
revision, is refused by key, so a running run is never replaced by accident and never silently left
unlike its stack file.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from facts.errors import RuleError
from facts.kubernetes import DEFINITION_ANNOTATION, RENDERED_ANNOTATION, REVISION_ANNOTATION

# A JSON object of a run's keys.
Definition = Mapping[str, Any]
# What a run's JobSet shows of an encrypted `env` value (its name is shown as it is).
ENCRYPTED = "(encrypted)"


def encoded(definition: Definition) -> str:
    """A definition as JSON, keys sorted, no spaces."""
    return json.dumps(definition, sort_keys=True, separators=(",", ":"))


def shown(definition: Definition, secret_env: bool) -> Definition:
    """A definition as the run's JobSet shows it: an encrypted `env` by its names only."""
    if not secret_env or "env" not in definition:
        return definition
    return {**definition, "env": dict.fromkeys(definition["env"], ENCRYPTED)}


@dataclass(frozen=True)
class PlannedFor:
    """What a layout is planned for: the machine, nodes, global batch, sequence and precision."""

    machine: str
    nodes: int
    global_batch_size: int
    sequence_length: int
    fp8: bool


@dataclass(frozen=True)
class Submitted:
    """What a submitted run was submitted with. A run an earlier nemo-gke submitted records no
    revision until this version's first `up`, and never what it rendered (None)."""

    jobset: str
    namespace: str = ""
    revision: int | None = None
    definition: Definition | None = None
    rendered: str | None = None
    # The state holds the run's JobSet itself (an `up` killed while creating it records the run's
    # TrainingRun, and not the JobSet the API server may have created).
    jobset_recorded: bool = True
    # The layout its plan recorded (`layout` of the plan output, with its micro-batch size), and
    # what it was planned for (PlannedFor): what a run that leaves its layout to the planner keeps
    # while its revision and those stand.
    layout: Mapping[str, Any] | None = None
    planned_for: PlannedFor | None = None

    @property
    def where(self) -> str:
        return f"{self.namespace}/{self.jobset}" if self.namespace else self.jobset


def recorded_of(outputs: Mapping[str, Any], jobset_recorded: bool = True) -> Submitted:
    """What the state records of a run: its TrainingRun's outputs (components.training), and
    whether it holds the run's JobSet."""
    revision, definition = outputs.get("revision"), outputs.get("definition")
    return Submitted(
        jobset=str(outputs.get("jobset", "")),
        namespace=str(outputs.get("namespace", "")),
        revision=int(revision) if isinstance(revision, (int, float)) else None,
        definition=json.loads(definition) if isinstance(definition, str) else None,
        rendered=outputs.get("rendered") if isinstance(outputs.get("rendered"), str) else None,
        jobset_recorded=jobset_recorded,
        layout=_recorded_layout(outputs.get("plan")),
        planned_for=_planned_for(outputs.get("plan")),
    )


# The sizes a recorded layout always holds (stack outputs drop the null virtual pipeline and
# recomputation).
_LAYOUT_SIZES = ("tensorParallel", "pipelineParallel", "contextParallel", "expertParallel", "microBatchSize")


def _recorded_layout(plan: Any) -> Mapping[str, Any] | None:
    """The plan output's layout with its micro-batch size, as whole numbers (the engine answers
    numbers as floats: a protobuf Struct's); None where a record lacks one (an earlier nemo-gke's)."""
    if not isinstance(plan, Mapping) or not isinstance(plan.get("layout"), Mapping):
        return None
    recorded = {
        key: _whole(value) for key, value in {**plan["layout"], "microBatchSize": plan.get("microBatchSize")}.items()
    }
    if any(recorded.get(key) is None for key in _LAYOUT_SIZES):
        return None
    return recorded


def _planned_for(plan: Any) -> PlannedFor | None:
    """What the recorded plan was planned for; None where a record lacks it."""
    if not isinstance(plan, Mapping):
        return None
    numbers = [_whole(plan.get(key)) for key in ("nodes", "globalBatchSize", "sequenceLength")]
    machine, precision = plan.get("machine"), plan.get("precision")
    if None in numbers or not isinstance(machine, str) or not isinstance(precision, str):
        return None
    nodes, batch, sequence = (n or 0 for n in numbers)
    return PlannedFor(machine, nodes, batch, sequence, precision.startswith("fp8"))


def _whole(value: Any) -> int | None:
    """A recorded whole number (an int, or the float the engine answers it as); None otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not float(value).is_integer():
        return None
    return int(value)


def live_of(jobset: Mapping[str, Any]) -> Submitted:
    """What a run's JobSet on the cluster shows of its submission (its annotations)."""
    metadata = jobset.get("metadata") or {}
    annotations = metadata.get("annotations") or {}
    revision, definition = annotations.get(REVISION_ANNOTATION), annotations.get(DEFINITION_ANNOTATION)
    return Submitted(
        jobset=str(metadata.get("name", "")),
        namespace=str(metadata.get("namespace", "")),
        revision=int(revision) if isinstance(revision, str) and revision.isdigit() else None,
        definition=json.loads(definition) if isinstance(definition, str) else None,
        rendered=annotations.get(RENDERED_ANNOTATION),
    )


class RunStep(StrEnum):
    """What `pulumi up` does to a run."""

    SUBMIT = "submit"  # the stack has not submitted it
    KEEP = "keep"  # submitted: left as it is
    REPLACE = "replace"  # submitted, and its revision raised: replaced with its current definition


def _leaves(value: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """Each dotted key and its value; an empty mapping, which says nothing, has none."""
    if isinstance(value, Mapping):
        for key in sorted(value):
            yield from _leaves(value[key], f"{path}.{key}" if path else str(key))
    else:
        yield path, value


def changes(before: Definition, after: Definition) -> list[tuple[str, Any, Any]]:
    """(key, submitted value, current value) of every dotted key that differs; None where absent."""
    old, new = dict(_leaves(before)), dict(_leaves(after))
    keys = sorted(old.keys() | new.keys())
    return [(key, old.get(key), new.get(key)) for key in keys if old.get(key) != new.get(key)]


def _change(key: str, before: Any, after: Any, secret: bool) -> str:
    def value(v: Any) -> str:
        return ENCRYPTED if secret and key.startswith("env.") else json.dumps(v)

    if before is None:
        return f"{key} set to {value(after)}"
    if after is None:
        return f"{key} {value(before)} removed"
    return f"{key} {value(before)} → {value(after)}"


def _refusal(found: list[tuple[str, Any, Any]], secret_env: bool, why: str) -> RuleError:
    key, _, value = found[0]
    listed = "; ".join(_change(*change, secret_env) for change in found)
    shown_value = ENCRYPTED if secret_env and key.startswith("env.") else value
    return RuleError(key, shown_value, why.format(changes=listed))


def step_of(
    name: str, revision: int, definition: Definition, submitted: Submitted | None, secret_env: bool = False
) -> RunStep:
    """What becomes of the run `name` at `revision` with `definition`, given what the state records
    of it. Raises RuleError, keyed relative to the run, for a lowered revision and for a changed
    definition at the submitted revision (an encrypted `env` named, never shown)."""
    if submitted is None:
        return RunStep.SUBMIT
    if submitted.revision is None:
        # Submitted by an earlier nemo-gke: kept; this `up` records its revision, as the engine its trigger.
        return RunStep.KEEP
    if revision < submitted.revision:
        why = f"is below run {name}'s submitted revision {submitted.revision}: a revision only rises"
        raise RuleError("revision", revision, why)
    if revision > submitted.revision:
        return RunStep.REPLACE
    found = changes(submitted.definition or {}, definition)
    if found:
        raise _refusal(
            found,
            secret_env,
            f"changes run {name}, submitted at revision {revision} ({{changes}}): raise revision to {revision + 1} "
            "to replace the run with this definition (its pods stop, and the new JobSet resumes from its "
            "checkpoints), or put the submitted values back",
        )
    return RunStep.KEEP


def check_unrecorded(
    name: str, revision: int, jobset: str, definition: Definition, found: Submitted, *, secret_env: bool = False
) -> None:
    """A JobSet of the run, marked with this stack, that the stack's state does not hold: an
    interrupted `up` submitted it. The next `up` applies over it where it is the JobSet this `up`
    names (`jobset`, at `revision`), which takes it where it runs the same definition; where it runs
    another, the JobSet webhook would refuse that apply where its pods differ (a JobSet's replicated
    jobs cannot change), and take it with files it was not started with where they do not; under
    another name (a revision raised since) it would train beside the new one. Those are refused
    here, before anything. `definition` is compared as the JobSet shows it (`shown`)."""
    where = (
        f"run {name}'s JobSet {found.where} is on the cluster, marked with this stack, and its state does not hold it"
    )
    fix = f"or delete it first (kubectl -n {found.namespace} delete jobset {found.jobset})"
    if found.jobset != jobset:
        raise RuleError(
            "revision",
            revision,
            f"{where} (an interrupted `pulumi up` submitted it at revision {found.revision}): this `up` would submit "
            f"{jobset} beside it; put revision {found.revision} back to take it over, {fix}",
        )
    found_changes = changes(found.definition or {}, shown(definition, secret_env))
    if found_changes:
        raise _refusal(
            found_changes,
            secret_env,
            f"{where} (an interrupted `pulumi up` submitted it); it runs another definition ({{changes}}): put those "
            f"values back to take it over, {fix}",
        )


@dataclass(frozen=True)
class Submission:
    """What a run's TrainingRun does with its step: the JobSet it names and records, and what
    `preview` and `up` say of it (a warning where they replace it, a line where they keep it)."""

    jobset: str
    rendered: str | None
    warning: str | None = None
    notice: str | None = None


def submission(
    name: str, *, revision: int, jobset: str, rendered: str, step: RunStep, submitted: Submitted | None
) -> Submission:
    """The submission of the run `name` at `revision`, whose JobSet this version names `jobset` and
    renders as the digest `rendered`."""
    if step is RunStep.SUBMIT or submitted is None:
        return Submission(jobset, rendered)
    if step is RunStep.REPLACE:
        warning = (
            f"run {name}: revision {submitted.revision} → {revision} replaces JobSet {submitted.where} with "
            f"{jobset}: its pods stop, and the new JobSet resumes from the run's checkpoints"
        )
        return Submission(jobset, rendered, warning=warning)
    if submitted.rendered is None:
        notice = (
            f"run {name}: JobSet {submitted.where} was submitted by an earlier nemo-gke; it is kept as it is, and "
            "raising its revision replaces it"
        )
    elif submitted.rendered != rendered:
        notice = (
            f"run {name}: JobSet {submitted.where} is kept as submitted at revision {submitted.revision}; this "
            "version of the platform renders the run otherwise, which reaches it only when its revision is raised"
        )
    else:
        notice = None
    return Submission(submitted.jobset, submitted.rendered, notice=notice)
