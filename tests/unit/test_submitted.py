"""What `pulumi up` does to a submitted run (planners.submitted), from what the state records."""

from __future__ import annotations

import pytest

from components.training import TrainingRun
from facts.errors import RuleError
from facts.kubernetes import DEFINITION_ANNOTATION, RENDERED_ANNOTATION, REVISION_ANNOTATION
from planners.submitted import (
    ENCRYPTED,
    RunStep,
    Submitted,
    changes,
    check_unrecorded,
    encoded,
    live_of,
    recorded_of,
    shown,
    step_of,
    submission,
)
from stacks.recorded import READ_RETRY_WAITS_S, READ_STACK_RESOURCES, TORN_CHECKPOINT_READ, read_retrying_torn, runs_of

DEFINITION = {"name": "llama", "model": "llama3-8b", "nodes": 2, "env": {"A": "1"}}
SUBMITTED = Submitted("llama", "nemo", revision=2, definition=DEFINITION, rendered="abc123")


def test_the_state_records_a_run_by_its_training_run_s_outputs() -> None:
    outputs = {
        "run": "llama",
        "jobset": "llama",
        "namespace": "nemo",
        "revision": 2.0,  # the wire carries every number as a float
        "definition": encoded(DEFINITION),
        "rendered": "abc123",
        "log_dir": "/nfs/llama",
    }
    resources = {
        "urn:pulumi:s::nemo-gke::nemo:training:TrainingLayer$nemo:training:TrainingRun::training-llama": {
            "type": TrainingRun.TYPE,
            "outputs": outputs,
        },
        # An earlier nemo-gke's: no run name, revision or definition among its outputs.
        "urn:pulumi:s::nemo-gke::nemo:training:TrainingLayer$nemo:training:TrainingRun::training-old": {
            "type": TrainingRun.TYPE,
            "outputs": {"jobset": "old-0a1b2c", "log_dir": "/nfs/old"},
        },
        "urn:pulumi:s::nemo-gke::kubernetes:core/v1:ConfigMap::training-llama-workload": {
            "type": "kubernetes:core/v1:ConfigMap",
            "outputs": {"metadata": {"name": "llama-workload"}},
        },
        "urn:pulumi:s::nemo-gke::kubernetes:jobset.x-k8s.io/v1alpha2:JobSet::training-llama-jobset": {
            "type": "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet",
            "outputs": {"metadata": {"name": "llama"}},
        },
    }
    # The old run's JobSet is not in the state (an interrupted `up` may have created it).
    old = Submitted("old-0a1b2c", jobset_recorded=False)
    assert runs_of(resources, "training") == {"llama": SUBMITTED, "old": old}
    assert recorded_of(outputs) == SUBMITTED


def test_a_jobset_on_the_cluster_shows_what_it_was_submitted_with() -> None:
    annotations = {REVISION_ANNOTATION: "2", DEFINITION_ANNOTATION: encoded(DEFINITION), RENDERED_ANNOTATION: "abc123"}
    jobset = {"metadata": {"name": "llama", "namespace": "nemo", "annotations": annotations}}
    assert live_of(jobset) == SUBMITTED
    assert live_of({"metadata": {"name": "llama", "namespace": "nemo"}}) == Submitted("llama", "nemo")


def test_a_run_is_submitted_kept_or_replaced_by_its_revision() -> None:
    assert step_of("llama", 1, DEFINITION, None) is RunStep.SUBMIT
    assert step_of("llama", 2, DEFINITION, SUBMITTED) is RunStep.KEEP
    assert step_of("llama", 3, {**DEFINITION, "nodes": 4}, SUBMITTED) is RunStep.REPLACE
    # Recorded by an earlier nemo-gke: kept, whatever it says now; this `up` records its revision.
    assert step_of("llama", 1, {"other": True}, Submitted("llama-0a1b2c")) is RunStep.KEEP


def test_a_changed_definition_at_the_submitted_revision_is_refused_naming_every_change() -> None:
    changed = {**DEFINITION, "nodes": 4, "env": {"B": "2"}, "steps": 9}
    with pytest.raises(RuleError) as refused:
        step_of("llama", 2, changed, SUBMITTED)
    assert (refused.value.key, refused.value.value) == ("env.A", None)
    assert str(refused.value).startswith(
        'changes run llama, submitted at revision 2 (env.A "1" removed; env.B set to "2"; nodes 2 → 4; '
        "steps set to 9): raise revision to 3 to replace the run"
    )


def test_an_encrypted_env_change_is_refused_by_name_without_its_value() -> None:
    with pytest.raises(RuleError) as refused:
        step_of("llama", 2, {**DEFINITION, "env": {"A": "2"}}, SUBMITTED, secret_env=True)
    assert (refused.value.key, refused.value.value) == ("env.A", ENCRYPTED)
    assert f"(env.A {ENCRYPTED} → {ENCRYPTED})" in str(refused.value) and '"2"' not in str(refused.value)
    # The values are compared, not how they are shown: encrypting them changes nothing.
    assert step_of("llama", 2, DEFINITION, SUBMITTED, secret_env=True) is RunStep.KEEP


def test_a_lowered_revision_is_refused() -> None:
    with pytest.raises(RuleError) as refused:
        step_of("llama", 1, DEFINITION, SUBMITTED)
    assert (refused.value.key, refused.value.value) == ("revision", 1)
    assert str(refused.value) == "is below run llama's submitted revision 2: a revision only rises"


def test_changes_compare_nested_keys_and_lists_whole_and_an_empty_mapping_says_nothing() -> None:
    before = {"checkpoint": {"intervalSteps": 10}, "overrides": {"a.b": 1}, "allowEnvOverrides": ["X"]}
    after = {"checkpoint": {"intervalSteps": 20}, "overrides": {"a.b": 1}, "allowEnvOverrides": ["X", "Y"]}
    assert changes(before, after) == [
        ("allowEnvOverrides", ["X"], ["X", "Y"]),
        ("checkpoint.intervalSteps", 10, 20),
    ]
    assert changes(before, before) == []
    assert changes(before, {**before, "env": {}}) == []


def test_a_jobset_an_interrupted_up_left_is_taken_with_its_definition_and_refused_with_another() -> None:
    found = Submitted("llama", "nemo", revision=1, definition=shown(DEFINITION, True))
    check_unrecorded("llama", 1, "llama", DEFINITION, found, secret_env=True)
    with pytest.raises(RuleError) as refused:
        check_unrecorded("llama", 1, "llama", {**DEFINITION, "nodes": 4}, found, secret_env=True)
    assert refused.value.key == "nodes" and "kubectl -n nemo delete jobset llama" in str(refused.value)
    # A revision raised since would submit its JobSet beside it: two of one run.
    with pytest.raises(RuleError) as refused:
        check_unrecorded("llama", 2, "llama-r2", DEFINITION, found, secret_env=True)
    assert (refused.value.key, refused.value.value) == ("revision", 2)
    assert "this `up` would submit llama-r2 beside it; put revision 1 back to take it over" in str(refused.value)


def test_what_up_says_of_a_run_it_keeps_or_replaces() -> None:
    kept = submission("llama", revision=2, jobset="llama-r2", rendered="abc123", step=RunStep.KEEP, submitted=SUBMITTED)
    assert kept.jobset == "llama" and kept.notice is None and kept.warning is None
    later = submission(
        "llama", revision=2, jobset="llama-r2", rendered="def456", step=RunStep.KEEP, submitted=SUBMITTED
    )
    assert later.rendered == "abc123" and later.notice is not None
    assert later.notice.startswith("run llama: JobSet nemo/llama is kept as submitted at revision 2")
    replaced = submission(
        "llama", revision=3, jobset="llama-r3", rendered="def456", step=RunStep.REPLACE, submitted=SUBMITTED
    )
    assert replaced.jobset == "llama-r3" and replaced.rendered == "def456"
    assert replaced.warning == (
        "run llama: revision 2 → 3 replaces JobSet nemo/llama with llama-r3: its pods stop, and the new JobSet "
        "resumes from the run's checkpoints"
    )
    earlier = submission(
        "old", revision=1, jobset="old", rendered="def456", step=RunStep.KEEP, submitted=Submitted("old-0a1b2c")
    )
    assert earlier.jobset == "old-0a1b2c" and earlier.rendered is None
    assert earlier.notice is not None and "old-0a1b2c was submitted by an earlier nemo-gke" in earlier.notice


def test_a_read_of_the_state_that_met_a_torn_checkpoint_is_tried_again() -> None:
    """On a file backend the read can meet the checkpoint's sidecar half written by the engine's
    own save (stacks.recorded): the invoke fails with EOF once, and the next try reads the state."""
    tries: list[int] = []
    waits: list[float] = []

    def read() -> str:
        tries.append(1)
        if len(tries) < 3:
            raise Exception(  # what pulumi.runtime.invoke raises (pulumi/runtime/invoke.py)
                f"invoke of {READ_STACK_RESOURCES} failed: invocation of {READ_STACK_RESOURCES} returned an error: "
                f"{TORN_CHECKPOINT_READ}"
            )
        return "state"

    assert read_retrying_torn(read, sleep=waits.append) == "state"
    assert len(tries) == 3 and waits == list(READ_RETRY_WAITS_S[:2])


def test_a_read_of_the_state_that_keeps_failing_or_fails_otherwise_raises() -> None:
    waits: list[float] = []

    def torn() -> str:
        raise Exception(TORN_CHECKPOINT_READ)

    def denied() -> str:
        raise Exception("failed to load checkpoint: permission denied")

    with pytest.raises(Exception, match="EOF"):
        read_retrying_torn(torn, sleep=waits.append)
    assert waits == list(READ_RETRY_WAITS_S)
    waits.clear()
    with pytest.raises(Exception, match="permission denied"):
        read_retrying_torn(denied, sleep=waits.append)
    assert waits == []
