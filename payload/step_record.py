"""What the Megatron-Bridge and NeMo 2 launchers write for the platform, imported from beside them
in the run's ConfigMap: the line a run prints after each step past its warm-up, for the log-based
step metrics (planners.monitoring.step_metrics), one JSON object on one line of stdout with the
run's fixed fields and the names its settings (`stepRecord`) give the step and its seconds; and
the name of the DLLogger record of a checkpoint load."""

import json

# The DLLogger `step` of a checkpoint load's record, {"started": <epoch s>, "seconds": <s>}: how
# `python -m analysis goodput --log` tells a restart's restore from the rest of its start
# (analysis.startup.CHECKPOINT_LOAD).
CHECKPOINT_LOAD = "CHECKPOINT_LOAD"


class StepRecords:
    """One process's records: none for its first `warmupSteps` steps (compilation and warm-up, again
    after every restart), and none without a `stepRecord` in the settings."""

    def __init__(self, record=None):
        self.record = record
        self.steps = 0

    def after(self, step, seconds):
        """The record of step `step` (its index, from 0), done in `seconds`; None while warming up."""
        self.steps += 1
        if not self.record or self.steps <= self.record["warmupSteps"]:
            return None
        record = self.record
        return json.dumps({**record["fields"], record["stepField"]: step, record["secondsField"]: round(seconds, 4)})
