"""A submitted run keeps what it was submitted with, until its owner says otherwise.

gpu-recipes (one `helm install` per run) and xpk (one `kubectl apply`) never touch a run once it is
submitted, and neither does `pulumi up`: a run's objects are frozen when they are created
(components.training writes every field under `ignoreChanges`), so what an upgrade of the platform
or of the launcher changes reaches new runs only. What replaces a submitted run is its owner raising
its `revision`: the engine compares it with the one it recorded (`replacementTrigger`;
pulumi/pulumi pkg/resource/deploy/step_generator.go `shouldTriggerReplace`, which ignores a
trigger recorded by none) and replaces the run's objects.

Before anything is registered, each run is held against its JobSet as the stack's state records it
(the annotations facts.kubernetes REVISION_ANNOTATION, DEFINITION_ANNOTATION and
RENDERED_ANNOTATION): a changed definition at the same revision, or a lowered revision, is refused
by key, so a running run is never replaced by accident and never silently left unlike its stack file.
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


def encoded(definition: Definition) -> str:
    """A definition as its annotation holds it: JSON, keys sorted, no spaces."""
    return json.dumps(definition, sort_keys=True, separators=(",", ":"))


@dataclass(frozen=True)
class Submitted:
    """A run's JobSet as the stack's state records it. A JobSet an earlier nemo-gke submitted
    records neither revision nor definition (None)."""

    jobset: str
    namespace: str
    revision: int | None = None
    definition: Definition | None = None
    rendered: str | None = None


def submitted_of(outputs: Mapping[str, Any]) -> Submitted:
    """The record of a JobSet from its outputs in the stack's state (the live object, as the
    provider last read it)."""
    metadata = outputs.get("metadata") or {}
    annotations = metadata.get("annotations") or {}
    revision = annotations.get(REVISION_ANNOTATION)
    definition = annotations.get(DEFINITION_ANNOTATION)
    return Submitted(
        jobset=str(metadata.get("name", "")),
        namespace=str(metadata.get("namespace", "")),
        revision=int(revision) if revision is not None and str(revision).isdigit() else None,
        definition=json.loads(definition) if isinstance(definition, str) else None,
        rendered=annotations.get(RENDERED_ANNOTATION),
    )


class Step(StrEnum):
    """What `pulumi up` does to a run."""

    SUBMIT = "submit"  # the stack has not submitted it
    KEEP = "keep"  # submitted: left as it is
    REPLACE = "replace"  # submitted, and its revision raised: replaced with its current definition


def _leaves(value: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(value, Mapping) and value:
        for key in sorted(value):
            yield from _leaves(value[key], f"{path}.{key}" if path else str(key))
    else:
        yield path, value


def changes(before: Definition, after: Definition) -> list[tuple[str, Any, Any]]:
    """(key, submitted value, current value) of every dotted key that differs; None where absent."""
    old, new = dict(_leaves(before)), dict(_leaves(after))
    keys = sorted(old.keys() | new.keys())
    return [(key, old.get(key), new.get(key)) for key in keys if old.get(key) != new.get(key)]


def _change(key: str, before: Any, after: Any) -> str:
    if before is None:
        return f"{key} set to {json.dumps(after)}"
    if after is None:
        return f"{key} {json.dumps(before)} removed"
    return f"{key} {json.dumps(before)} → {json.dumps(after)}"


def step_of(name: str, revision: int, definition: Definition, submitted: Submitted | None) -> Step:
    """What becomes of the run `name` at `revision` with `definition`, given its JobSet as the
    state records it. Raises RuleError, keyed relative to the run, for a lowered revision and for a
    changed definition at the submitted revision."""
    if submitted is None:
        return Step.SUBMIT
    if submitted.revision is None:
        # Submitted before revisions were recorded: kept, its trigger recorded by this update.
        return Step.KEEP
    if revision < submitted.revision:
        why = f"is below run {name}'s submitted revision {submitted.revision}: a revision only rises"
        raise RuleError("revision", revision, why)
    if revision > submitted.revision:
        return Step.REPLACE
    found = changes(submitted.definition or {}, definition)
    if found:
        key, _, value = found[0]
        listed = "; ".join(_change(*change) for change in found)
        raise RuleError(
            key,
            value,
            f"changes run {name}, submitted at revision {revision} ({listed}): raise revision to {revision + 1} to "
            "replace the run with this definition (its pods stop, and the new JobSet resumes from its checkpoints), "
            "or put the submitted values back",
        )
    return Step.KEEP


def check_unrecorded(name: str, definition: Definition, found: Submitted) -> None:
    """A JobSet of the run's name, marked with this stack, that the stack's state does not hold:
    an interrupted `up` submitted it. The next `up` applies over it, which takes it where it runs
    the same definition; where it runs another, the JobSet webhook would refuse that apply (a
    JobSet's replicated jobs cannot change), so it is refused here, by key, before anything."""
    found_changes = changes(found.definition or {}, definition)
    if not found_changes:
        return
    key, _, value = found_changes[0]
    listed = "; ".join(_change(*change) for change in found_changes)
    where = f"{found.namespace}/{found.jobset}"
    raise RuleError(
        key,
        value,
        f"run {name}'s JobSet {where} is on the cluster, marked with this stack, and its state does not hold it (an "
        f"interrupted `pulumi up` submitted it); it runs another definition ({listed}): put those values back to "
        f"take it over, or delete it first (kubectl -n {found.namespace} delete jobset {found.jobset})",
    )


def replace_notice(name: str, submitted: Submitted, revision: int) -> str:
    """What `preview` and `up` say of a run they replace."""
    return (
        f"run {name}: revision {submitted.revision} → {revision} replaces JobSet {submitted.namespace}/"
        f"{submitted.jobset}: its pods stop, and the new JobSet resumes from the run's checkpoints"
    )


def kept_notice(name: str, submitted: Submitted, rendered: str) -> str | None:
    """What `preview` and `up` say of a submitted run that this version of the program renders
    otherwise (launcher, platform settings), or that an earlier nemo-gke submitted; None when
    nothing would differ."""
    if submitted.revision is None:
        return (
            f"run {name}: JobSet {submitted.namespace}/{submitted.jobset} was submitted by an earlier nemo-gke, which "
            "recorded no revision; it is kept as it is, and raising its revision in a later update replaces it"
        )
    if submitted.rendered == rendered:
        return None
    return (
        f"run {name}: JobSet {submitted.namespace}/{submitted.jobset} is kept as submitted at revision "
        f"{submitted.revision}; this version of the platform renders the run otherwise, which reaches it only when its "
        "revision is raised"
    )
