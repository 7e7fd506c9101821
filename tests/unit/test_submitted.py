"""What `pulumi up` does to a submitted run (planners.submitted), from the JobSet the state records."""

from __future__ import annotations

import pytest

from facts.errors import RuleError
from facts.kubernetes import DEFINITION_ANNOTATION, RENDERED_ANNOTATION, REVISION_ANNOTATION, RUN_LABEL
from planners.submitted import Step, Submitted, changes, encoded, kept_notice, step_of, submitted_of
from stacks.recorded import JOBSET_TYPE, runs_of

DEFINITION = {"name": "llama", "model": "llama3-8b", "nodes": 2, "env": {"A": "1"}}
SUBMITTED = Submitted("llama", "nemo", revision=2, definition=DEFINITION, rendered="abc123")


def jobset(annotations: dict[str, str], labels: dict[str, str] | None = None) -> dict[str, object]:
    metadata = {"name": "llama", "namespace": "nemo", "annotations": annotations, "labels": labels or {}}
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": metadata}


def test_a_recorded_jobset_reads_back_as_it_was_submitted() -> None:
    recorded = jobset(
        {REVISION_ANNOTATION: "2", DEFINITION_ANNOTATION: encoded(DEFINITION), RENDERED_ANNOTATION: "abc123"}
    )
    assert submitted_of(recorded) == SUBMITTED
    # An earlier nemo-gke's JobSet records nothing of it.
    assert submitted_of(jobset({})) == Submitted("llama", "nemo")


def test_the_state_names_runs_by_their_label_and_not_fabric_checks() -> None:
    resources = {
        "urn:run": {"type": JOBSET_TYPE, "outputs": jobset({REVISION_ANNOTATION: "1"}, {RUN_LABEL: "llama"})},
        "urn:check": {"type": JOBSET_TYPE, "outputs": jobset({}, {"nemo-gke/fabric-check": "nccl"})},
        "urn:map": {"type": "kubernetes:core/v1:ConfigMap", "outputs": {"metadata": {"labels": {RUN_LABEL: "x"}}}},
    }
    assert runs_of(resources) == {"llama": Submitted("llama", "nemo", revision=1)}


def test_a_run_is_submitted_kept_or_replaced_by_its_revision() -> None:
    assert step_of("llama", 1, DEFINITION, None) is Step.SUBMIT
    assert step_of("llama", 2, DEFINITION, SUBMITTED) is Step.KEEP
    assert step_of("llama", 3, {**DEFINITION, "nodes": 4}, SUBMITTED) is Step.REPLACE
    # Before revisions were recorded: kept, whatever it says now.
    assert step_of("llama", 1, {"other": True}, Submitted("llama-0a1b2c", "nemo")) is Step.KEEP


def test_a_changed_definition_at_the_submitted_revision_is_refused_naming_every_change() -> None:
    changed = {**DEFINITION, "nodes": 4, "env": {"B": "2"}, "steps": 9}
    with pytest.raises(RuleError) as refused:
        step_of("llama", 2, changed, SUBMITTED)
    assert (refused.value.key, refused.value.value) == ("env.A", None)
    assert str(refused.value).startswith(
        'changes run llama, submitted at revision 2 (env.A "1" removed; env.B set to "2"; nodes 2 → 4; '
        "steps set to 9): raise revision to 3 to replace the run"
    )


def test_a_lowered_revision_is_refused() -> None:
    with pytest.raises(RuleError) as refused:
        step_of("llama", 1, DEFINITION, SUBMITTED)
    assert (refused.value.key, refused.value.value) == ("revision", 1)
    assert str(refused.value) == "is below run llama's submitted revision 2: a revision only rises"


def test_changes_compare_nested_keys_and_lists_whole() -> None:
    before = {"checkpoint": {"intervalSteps": 10}, "overrides": {"a.b": 1}, "allowEnvOverrides": ["X"]}
    after = {"checkpoint": {"intervalSteps": 20}, "overrides": {"a.b": 1}, "allowEnvOverrides": ["X", "Y"]}
    assert changes(before, after) == [
        ("allowEnvOverrides", ["X"], ["X", "Y"]),
        ("checkpoint.intervalSteps", 10, 20),
    ]
    assert changes(before, before) == []


def test_a_kept_run_is_mentioned_only_where_this_version_renders_it_otherwise() -> None:
    assert kept_notice("llama", SUBMITTED, "abc123") is None
    notice = kept_notice("llama", SUBMITTED, "def456")
    assert notice is not None and notice.startswith("run llama: JobSet nemo/llama is kept as submitted at revision 2")
    earlier = kept_notice("llama", Submitted("llama-0a1b2c", "nemo"), "def456")
    assert earlier is not None and "llama-0a1b2c was submitted by an earlier nemo-gke" in earlier
