"""The platform's records of a NeMo 2 run, from a Lightning callback that `nemo2_pretrain.py` adds
to the recipe's trainer: each step's record (step_record) and each checkpoint load's time in the
run's DLLogger file, as the Megatron-Bridge launcher writes them.

NeMo 2 trains one global batch per Lightning batch (its Megatron strategy runs the micro-batches
inside `training_step`) and times its own `train_step_timing` between the same two hooks
(nemo/utils/exp_manager.py TimingCallback, nemo_toolkit 2.1.0 and 2.4.0). A resumed run's checkpoint is read
by the trainer's strategy, after the callbacks' `setup` and before `on_train_start`
(lightning/pytorch/trainer/trainer.py `_run`, connectors/checkpoint_connector.py `resume_start`,
Lightning 2.4.0); NeMo's MegatronStrategy reads its distributed checkpoint there
(nemo/lightning/pytorch/strategies/megatron_strategy.py `load_checkpoint`)."""

import time

import dllogger
import torch
from lightning.pytorch.callbacks import Callback
from step_record import CHECKPOINT_LOAD, StepRecords


class StepLog(Callback):
    """Prints, on the last rank, each step's record past the warm-up, and writes, on rank 0 (whose
    DLLogger NeMo's own logger writes through), each checkpoint load's record, until every rank has
    loaded."""

    def __init__(self, record):
        self.records = StepRecords(record)
        self.step = None
        self.started = None
        # (epoch seconds at its start, seconds) of each checkpoint load before training started.
        self.loads = []
        self.timed = False

    def setup(self, trainer, pl_module, stage):
        if self.timed:
            return
        self.timed = True
        strategy = trainer.strategy
        load = strategy.load_checkpoint

        def timed(*args, **kwargs):
            started, clock = time.time(), time.monotonic()
            loaded = load(*args, **kwargs)
            # Every rank loads (a distributed checkpoint is read collectively): the load is whole
            # once the slowest rank is done, as Megatron-Bridge's barriered timer counts it. NeMo
            # waits so after its own selective restore (megatron_strategy.py, restore_end).
            strategy.barrier("checkpoint loaded")
            self.loads.append((started, time.monotonic() - clock))
            return loaded

        strategy.load_checkpoint = timed

    def on_train_start(self, trainer, pl_module):
        if trainer.global_rank == 0 and self.loads:
            for started, seconds in self.loads:
                dllogger.log(step=CHECKPOINT_LOAD, data={"started": started, "seconds": round(seconds, 3)})
            dllogger.flush()
        # Written once: a training restarted in this process logs only its own loads.
        self.loads.clear()

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
