"""The platform's step record for NeMo 2 runs: a Lightning callback that `nemo2_pretrain.py` adds
to the recipe's trainer. NeMo 2 trains one global batch per Lightning batch (its Megatron strategy
runs the micro-batches inside `training_step`) and times its own `train_step_timing` between the
same two hooks (nemo/utils/exp_manager.py TimingCallback, nemo_toolkit 2.4.0)."""

import time

import torch
from lightning.pytorch.callbacks import Callback
from step_record import StepRecords


class StepRecordCallback(Callback):
    """Prints, on the last rank, each step's record past the warm-up (step_record)."""

    def __init__(self, record):
        self.records = StepRecords(record)
        self.step = None
        self.started = None

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        # The steps done before this one: its index, from 0, as the step records count.
        self.step, self.started = trainer.global_step, time.monotonic()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if trainer.global_rank != trainer.world_size - 1 or self.started is None:
            return
        # The step's GPU work done before the clock is read, so a step is timed whole.
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        line = self.records.after(self.step, time.monotonic() - self.started)
        if line is not None:
            print(line, flush=True)
