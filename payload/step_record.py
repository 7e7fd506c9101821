"""The line a training run prints after each step past its warm-up, for the platform's log-based
metrics (planners.monitoring.step_metrics): one JSON object on one line of stdout, with the run's
fixed fields and the names its settings (`stepRecord`) give the step and its seconds. The
Megatron-Bridge and NeMo 2 launchers import it from beside them in the run's ConfigMap."""

import json


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
