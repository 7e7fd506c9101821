"""The Megatron-Bridge launcher's configuration step against the real, pinned library.

    python -m tools.runtime_check --python .venv-runtime/bin/python     (make runtime-check)

For every Megatron-Bridge run the shipped stacks define and every catalog model on every machine
whose recipe is Megatron-Bridge's, writes the settings the program would ship
(planners.runtimes.bridge.settings) and runs `payload/megatron_bridge_pretrain.py --check` with the
given interpreter, whose environment holds megatron-bridge and megatron-core at the versions
NeMo 26.02 ships (facts.versions.MEGATRON_BRIDGE, MEGATRON_CORE; requirements-runtime.txt): the
launcher builds the ConfigContainer with the library's own classes and runs its `validate()`
for the run's world size. Each catalog case is also built the way Megatron-Bridge's performance
scripts build it (tools/nvidia_path.py) and compared with the launcher's field by field, and its
environment with theirs variable by variable; a difference tools/parity.py does not list fails it.
The line the launcher prints as a step's record must be one the platform's log-based metrics read
(planners.monitoring.step_record_problems), and a checkpoint load timed as the library's setup()
times it must reach the DLLogger file as `python -m analysis goodput` reads it. No GPU and no
training step; GPU-only packages the library imports at module level are stood in for
(tools/runtime_stub.py). Then it shows the check can fail: a copy of the launcher with one field
renamed must be refused, one whose step record lacks the run's fields too, one that records no
checkpoint load too, and one without its CommOverlapConfig must differ from NVIDIA's in unlisted
fields. Exit code 1 on any failure.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any, NamedTuple

from analysis.errors import AnalysisError
from analysis.startup import read_checkpoint_loads
from facts.kubernetes import PROGRAM_ERROR_EXIT_CODE, workload_file_key
from facts.machines import MACHINE_TYPES, MachineType
from facts.models import MODELS, Framework, RunSettings
from harness.runner import ROOT, run_stack, stack_names
from planners import workload
from planners.monitoring import step_record_problems
from planners.runs import ProfileWindow, RunSpec, Tokenizer
from planners.runtimes import bridge, nemo2
from tools import gpu_train, parity

LAUNCHER = ROOT / "payload" / bridge.SCRIPT
STUB = Path(__file__).with_name("runtime_stub.py")
# A field the launcher sets, and a misspelling the library must refuse.
RENAMED = ("train_iters=steps,", "train_iter=steps,")
# The launcher's condition for building a CommOverlapConfig, and one that never does: the check's
# comparison must then find fields NVIDIA's configuration has and DIFFERENCES does not list, on
# the catalog case named OVERLAP_CASE (the one the review found without the overlap).
NO_OVERLAP = ('if settings["commOverlapSetup"] or settings["tpOverlap"]', "if False")
OVERLAP_CASE = "llama3-70b on a4-highgpu-8g"
# The module that writes the launchers' step records (payload/step_record.py), and its record
# without the run's fixed fields: the log-based metrics would read nothing of it
# (planners.monitoring.step_record_problems).
RECORD_MODULE = LAUNCHER.with_name("step_record.py")
NO_RECORD = ('{**record["fields"], ', "{")
# How long the stood-in checkpoint load of the step log's check takes, and a launcher that never
# records a load.
LOAD_S = 0.2
NO_LOAD_TIMING = ("if LOAD_TIMER in names:", "if False:")
# The NeMo 2 launcher's callback, and one that never times a load.
LIGHTNING_STEP_LOG = LAUNCHER.with_name("lightning_step_log.py")
NO_LIGHTNING_LOAD_TIMING = ("strategy.load_checkpoint = timed", "strategy.load_checkpoint = load")
# How many of the broken launcher's differences the check prints.
SHOWN = 6


def _fewest_nodes(settings: RunSettings, machine: MachineType, data_parallel: int = 1) -> int:
    """The fewest nodes the layout and batch allow with at least `data_parallel` model replicas."""
    step = math.lcm(settings.gpu_multiple, machine.gpus) // machine.gpus
    nodes = step
    while nodes * machine.gpus // settings.model_parallel < data_parallel or settings.global_batch_size % (
        nodes * machine.gpus // settings.model_parallel * settings.micro_batch_size
    ):
        nodes += step
    return nodes


def smallest_run(model: str, machine: MachineType, data_parallel: int = 1) -> RunSpec:
    """The model's recipe on the machine at the fewest nodes its layout and batch allow, with at
    least `data_parallel` model replicas."""
    settings = MODELS[model].recipe_on(machine.name).settings()
    nodes = _fewest_nodes(settings, machine, data_parallel)
    tokenizer = Tokenizer("huggingface", "", None)
    return RunSpec(
        f"{model}-{machine.name}", model, "gpu", nodes, settings, tokenizer, "normal", machine_type=machine.name
    )


class Case(NamedTuple):
    """A configuration to check: its name, the settings the program ships, the GPU the check
    stands in for the validations that ask the device ("<major>.<minor> <name>"; None:
    tools/runtime_stub.py's default), whether make gpu-train's worker replaces what needs
    Transformer Engine (gpu_worker.TE_FREE), for a catalog recipe, what builds NVIDIA's own
    configuration of it (tools/parity.py reference) and how the run's environment differs from
    NVIDIA's (tools/parity.py env_differences), and for settings that must be refused, how."""

    name: str
    settings: dict[str, Any]
    gpu: str | None
    te_free: bool = False
    reference: dict[str, str | None] | None = None
    env_differences: Mapping[str, tuple[str | None, str | None]] = MappingProxyType({})
    # Settings the planner refuses, fed to the library directly: what the library's refusal
    # must say (and the launcher's check must exit PROGRAM_ERROR_EXIT_CODE on it).
    refused: str | None = None


def gpu_of(machine: MachineType) -> str:
    major, minor = machine.accelerator.compute_capability
    return f"{major}.{minor} NVIDIA {machine.accelerator.name}"


def _case(name: str, run: RunSpec, machine: MachineType, compared: bool = False) -> Case:
    """The settings the program would ship for `run`, checked on the machine's GPU; `compared`:
    and compared with NVIDIA's configuration and environment for them."""
    paths = workload.run_paths(run, "/nfs/experiments", "/checkpoints", "/data")
    settings = bridge.settings(run, paths, machine)
    if not compared:
        return Case(name, settings, gpu_of(machine))
    env = parity.env_differences(parity.run_env(run, machine, paths), parity.nvidia_env(run, machine))
    return Case(name, settings, gpu_of(machine), reference=parity.reference(run, machine), env_differences=env)


def bridge_recipes() -> list[tuple[str, MachineType]]:
    """Every catalog model on every machine multi-node training runs on (each with its GPUDirect
    stack) where the model's recipe is Megatron-Bridge's."""
    return [
        (model, machine)
        for model, spec in MODELS.items()
        for machine in MACHINE_TYPES.values()
        if machine.gpudirect_stack is not None and spec.recipe_on(machine.name).framework is Framework.MEGATRON_BRIDGE
    ]


def catalog_cases() -> list[Case]:
    cases: list[Case] = []
    for model, machine in bridge_recipes():
        # At its fewest nodes, and with data parallelism, whose gradient buckets, parameter
        # gather and optimizer overlap the library derives only with two replicas or more.
        fewest, replicated = (smallest_run(model, machine, data_parallel) for data_parallel in (1, 2))
        for run in (fewest,) if replicated.nodes == fewest.nodes else (fewest, replicated):
            cases.append(_case(f"{model} on {machine.name} ({run.nodes} nodes)", run, machine, compared=True))
    # Every optional setting at once: real data with its tokenizer folder, a profile window,
    # straggler reports.
    machine = MACHINE_TYPES["a3-ultragpu-8g"]
    run = dataclasses.replace(
        smallest_run("llama3-8b", machine),
        dataset_prefix="datasets/wiki/wiki_text_document",
        tokenizer=Tokenizer("huggingface", "meta-llama/Meta-Llama-3-8B", "tokenizers/llama3"),
        profile=ProfileWindow(10, 12),
        stragglers=True,
        # Saves in the training loop, not only after it.
        checkpoint_interval_steps=10,
        # One the mixed-precision recipe would otherwise set back (grad_reduce_in_fp32).
        overrides={"ddp.grad_reduce_in_fp32": True, "train.eval_iters": 0},
    )
    cases.append(
        _case(
            "llama3-8b with real data, a profile, straggler reports, checkpoints every 10 steps and overrides",
            run,
            machine,
        )
    )
    # An override the expert all-to-all overlap's configuration would otherwise set back.
    run = dataclasses.replace(smallest_run("qwen3-30b-a3b", machine), overrides={"ddp.overlap_grad_reduce": False})
    cases.append(_case("qwen3-30b-a3b with an override of an overlapped field", run, machine))
    # make gpu-train's run, as its worker trains it: one GPU, no Transformer Engine.
    gpu_run = gpu_train.one_gpu_run(machine, steps=30, layers=4, seq_length=4096, global_batch_size=8)
    gpu_settings = gpu_train.one_gpu_settings(gpu_run, machine, Path("/tmp/gpu-train"))
    cases.append(Case("make gpu-train's run without Transformer Engine", gpu_settings, gpu_of(machine), te_free=True))
    # Every uneven pipeline split a recipe names, each validated by the library.
    for model, spec in MODELS.items():
        for pipeline, virtual in spec.recipe.pipeline_layouts:
            settings = dataclasses.replace(
                spec.recipe.settings(), pipeline_parallel=pipeline, virtual_pipeline=virtual if virtual > 1 else None
            )
            nodes = _fewest_nodes(settings, machine)
            run = dataclasses.replace(smallest_run(model, machine), settings=settings, nodes=nodes)
            cases.append(_case(f"{model} at pipeline {pipeline} x virtual {virtual} ({nodes} nodes)", run, machine))
    return cases


def refused_cases() -> list[Case]:
    """What the planner refuses by key (planners.runs.check_run; tests/unit/test_runs.py and
    tests/stacks/test_training.py), written straight into the settings the library reads: the
    library refuses it too, before any GPU work, and the launcher's check exits on it."""
    machine = MACHINE_TYPES["a3-ultragpu-8g"]
    run = smallest_run("llama3-8b", machine)
    base = _case("", run, machine)
    batch = copy.deepcopy(base.settings)
    # One node of TP1: 8 replicas, whose micro-batches of one do not divide 130.
    batch["train"]["global_batch_size"] = 130
    split = copy.deepcopy(base.settings)
    # Context parallelism cuts a sequence in 2 × CP chunks: 8190 tokens do not cut in 4.
    split["model"]["context_parallel_size"] = 2
    split["model"]["seq_length"] = split["dataset"]["seq_length"] = 8190
    return [
        Case(
            "a global batch the replicas' micro-batches do not divide (globalBatchSize)",
            batch,
            base.gpu,
            refused="global batch size (130) is not divisible by micro batch size (1) times data parallel size (8)",
        ),
        Case(
            "a sequence context parallelism cannot cut (sequenceLength)",
            split,
            base.gpu,
            refused="Sequence length must be divisible by 2 * context parallel size",
        ),
    ]


def shipped_settings() -> dict[str, list[tuple[str, dict[str, Any]]]]:
    """The settings every shipped stack's runs ship, by their launcher (bridge.SCRIPT,
    nemo2.SCRIPT), each named after its stack and ConfigMap or JobSet."""
    found: dict[str, list[tuple[str, dict[str, Any]]]] = {bridge.SCRIPT: [], nemo2.SCRIPT: []}
    for stack in stack_names():
        run = run_stack(stack)
        for resource in run.of_type("kubernetes:core/v1:ConfigMap"):
            data = run.manifest(resource).get("data", {})
            for script, settings in found.items():
                if script in data:
                    settings.append((f"{stack}: {resource.name}", json.loads(data[workload.RUN_SETTINGS])))
        # A run a MultiKueue manager dispatches carries its files in its pod template's annotations.
        for resource in run.of_type("kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"):
            template = run.manifest(resource)["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
            annotations = template["metadata"].get("annotations", {})
            for script, settings in found.items():
                if workload_file_key(script) in annotations:
                    shipped = json.loads(annotations[workload_file_key(workload.RUN_SETTINGS)])
                    settings.append((f"{stack}: {resource.name}", shipped))
    return found


def shipped_cases(shipped: dict[str, list[tuple[str, dict[str, Any]]]]) -> list[Case]:
    """The settings the shipped stacks' Megatron-Bridge runs ship."""
    return [Case(name, settings, None) for name, settings in shipped[bridge.SCRIPT]]


# Run by the runtime environment's interpreter: the launcher loaded once (its module-level imports
# are the slow part) and its step log registered with the library's callback manager, then each
# case's configuration built by the launcher's own `config` and completed and validated as
# `pretrain` does first; one JSON line per case.
_CHECKER = """
import contextlib, io, json, os, runpy, sys
sys.path.insert(0, sys.argv[1])
import runtime_stub
runtime_stub.install()
runtime_stub.answer_device_questions()
launcher = runpy.run_path(sys.argv[2], run_name="launcher")
import nvidia_path, step_record
from megatron.bridge.training.callbacks import normalize_callbacks, should_fire
first_steps = launcher["first_steps_of_pretrain"]
# The step log's hooks are events the library fires (pretrain() registers callbacks so).
manager = normalize_callbacks([launcher["StepLog"]("dllogger.json")])
for event in ("on_train_start", "on_train_step_start", "on_train_step_end"):
    assert should_fire(manager, event), f"the launcher's StepLog does not handle {event}"
for path in sys.argv[3:]:
    with open(path) as f:
        case = json.load(f)
    settings = case["settings"]
    os.environ["WORLD_SIZE"] = str(settings["worldSize"])
    if case["gpu"]:
        os.environ["NEMO_CHECK_GPU"] = case["gpu"]
    else:
        os.environ.pop("NEMO_CHECK_GPU", None)
    result = {}
    try:
        cfg = launcher["config"](settings)
        replaced = {}
        if case["teFree"]:
            import gpu_worker
            cfg, replaced = gpu_worker.without_transformer_engine(cfg, launcher["_set"]), gpu_worker.TE_FREE
        first_steps(cfg)
        if settings.get("straggler"):
            assert cfg.straggler is not None and cfg.straggler.log_straggler, "straggler reports not configured"
        # NVIDIA's configuration for the same model, GPU, precision and layout, completed the same
        # way: every field that differs, as (the launcher's, NVIDIA's).
        if case["reference"]:
            nvidia = nvidia_path.config(settings, case["reference"])
            first_steps(nvidia)
            ours, theirs = nvidia_path.fields(cfg), nvidia_path.fields(nvidia)
            result["differences"] = {
                field: [ours.get(field), theirs.get(field)]
                for field in sorted(set(ours) | set(theirs))
                if ours.get(field) != theirs.get(field)
            }
        # Every recipe field and override keeps its value through what pretrain() derives (a
        # pipeline layout becomes the library's own object, which it has validated).
        for key, value in {**settings["recipeFields"], **settings["overrides"]}.items():
            target = cfg
            for part in key.split("."):
                target = getattr(target, part)
            if key == "model.pipeline_model_parallel_layout" or key in replaced:
                continue
            value = launcher["decoded"](value)
            assert target == value, f"{key}={value!r} became {target!r}"
        result["ok"] = True
    except Exception as error:
        result |= {"ok": False, "error": f"{type(error).__name__}: {error}"}
    # The line its last rank prints after a step past its warm-up (step 11, 1.25 s).
    if settings.get("stepRecord"):
        result["stepRecord"] = step_record.StepRecords({**settings["stepRecord"], "warmupSteps": 0}).after(11, 1.25)
    # The launcher's own check, as launch.sh runs it: its exit code.
    os.environ["NEMO_RUN_SETTINGS"] = path + ".settings"
    with open(os.environ["NEMO_RUN_SETTINGS"], "w") as f:
        json.dump(settings, f)
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        try:
            result["exit"] = launcher["main"](["--check"])
        except Exception as error:
            result["exit"] = f"raised {type(error).__name__}: {error}"
    print(json.dumps(result), flush=True)
"""


class Verdict(NamedTuple):
    """A case's outcome: None where its configuration builds and validates and the launcher's
    check exits 0, else the error; and where it is compared with NVIDIA's, the fields and
    variables that differ (`env:NAME` for a variable), as (the launcher's, NVIDIA's)."""

    error: str | None
    differences: Mapping[str, tuple[Any, Any]]


def check(python: str, launcher: Path, cases: list[Case], folder: Path) -> list[Verdict]:
    """Each case's verdict. Where the configuration is refused, the launcher's check must exit
    PROGRAM_ERROR_EXIT_CODE (what launch.sh and the JobSet fail on), or that is the error."""
    files = []
    for i, case in enumerate(cases):
        path = folder / f"case-{i}.json"
        path.write_text(
            json.dumps(
                {"settings": case.settings, "gpu": case.gpu, "teFree": case.te_free, "reference": case.reference}
            )
        )
        files.append(str(path))
    env = {**os.environ, "PYTHONPATH": _payload_path(launcher.parent), "CUDA_VISIBLE_DEVICES": ""}
    command = [python, "-c", _CHECKER, str(STUB.parent), str(launcher), *files]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    results = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    if len(results) != len(cases):
        return [Verdict(_last_error(done), {})] * len(cases)
    return [
        Verdict(_error(result, case), {**result.get("differences", {}), **case.env_differences})
        for case, result in zip(cases, results, strict=True)
    ]


def _error(result: dict[str, Any], case: Case) -> str | None:
    exit_code = result["exit"]
    if result["ok"]:
        if "stepRecord" not in result:
            return "the launcher's settings carry no step record"
        if problems := step_record_problems(result["stepRecord"], case.settings["runName"]):
            return "the launcher's step record: " + "; ".join(problems)
        return None if exit_code == 0 else f"the launcher's --check exits {exit_code!r} on a valid configuration"
    if exit_code != PROGRAM_ERROR_EXIT_CODE:
        return f"the launcher's --check exits {exit_code!r}, not {PROGRAM_ERROR_EXIT_CODE}, on: {result['error']}"
    return str(result["error"])


def _unlisted(case: Case, verdict: Verdict) -> list[str]:
    unlisted = parity.unlisted(verdict.differences, case.name)
    return [
        f"{field}: {_shown(ours)} here, {_shown(nvidia)} in NVIDIA's"
        for field, (ours, nvidia) in verdict.differences.items()
        if field in unlisted
    ]


def _shown(value: Any) -> str:
    return "unset" if value is None else str(value)


# Run by the runtime environment's interpreter: the launcher's step log through the hooks the
# library calls, for `warmupSteps` + 2 steps on one CPU rank (gloo; no GPU, so the step's CUDA
# synchronisation is a no-op here), each step 10 ms, printing what the launcher printed; before
# them, one checkpoint load of LOAD_S timed by Megatron Core's timers as the library's setup()
# times it, whose calls the library's source must still make (the load itself stood in for: no
# checkpoint, no GPU).
_STEP_LOG = """
import contextlib, io, json, os, runpy, sys, time, types
sys.path.insert(0, sys.argv[1])
import gpu_worker, runtime_stub
runtime_stub.install((*runtime_stub.STUBBED, *gpu_worker.UNUSED_BY_THIS_RUN))
launcher = runpy.run_path(sys.argv[2], run_name="launcher")
import torch
torch.distributed.init_process_group("gloo", rank=0, world_size=1, store=torch.distributed.HashStore())
torch.cuda.synchronize = lambda: None
torch.cuda.current_device = lambda: "cpu"  # where Megatron Core's timers gather their times
record = json.loads(sys.argv[3])
log = launcher["StepLog"](sys.argv[4], record)
import inspect
from megatron.bridge.training import setup as training_setup
from megatron.core.timers import Timers
source = inspect.getsource(training_setup.setup)
for call in ('timers("load-checkpoint", log_level=0).start(barrier=True)',
             'timers("load-checkpoint").stop(barrier=True)', 'timers.log(["load-checkpoint"])'):
    assert call in source, f"the library's setup() no longer makes the call the launcher's load timing reads: {call}"
launcher["time_checkpoint_loads"](log, Timers)
timers = Timers(0, "minmax")
timers("load-checkpoint", log_level=0).start(barrier=True)
time.sleep(float(sys.argv[5]))
timers("load-checkpoint").stop(barrier=True)
timers.log(["load-checkpoint"])
train_state = types.SimpleNamespace(step=0)
context = types.SimpleNamespace(state=types.SimpleNamespace(train_state=train_state), loss_dict={"lm loss": 2.5})
printed = io.StringIO()
with contextlib.redirect_stdout(printed):
    log.on_train_start(context)
    for step in range(record["warmupSteps"] + 2):
        train_state.step = step
        log.on_train_step_start(context)
        time.sleep(0.01)
        log.on_train_step_end(context)
sys.stdout.write(printed.getvalue())
"""


def _last_error(done: subprocess.CompletedProcess[str]) -> str:
    """What a failed check process said last on stderr, or its exit status."""
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    return lines[-1] if lines else f"exit {done.returncode}"


def _payload_path(modules: Path) -> str:
    """`modules` first, then the payload's folder: a copy there of a launcher, or of a module it
    imports (step_record.py), shadows the shipped one."""
    return os.pathsep.join(dict.fromkeys((str(modules), str(LAUNCHER.parent))))


def _step_log_reports(python: str, folder: Path, case: Case, launcher: Path = LAUNCHER) -> str | None:
    """The launcher's step log prints a record the step metrics read after each step past the
    warm-up, and none before, and its DLLogger file holds the checkpoint load's record as
    `python -m analysis goodput` reads it: None, or what it did instead."""
    record = case.settings["stepRecord"]
    dllogger = folder / "steps.json"
    dllogger.unlink(missing_ok=True)  # DLLogger appends: only this launcher's records
    command = [python, "-c", _STEP_LOG, str(STUB.parent), str(launcher), json.dumps(record), str(dllogger), str(LOAD_S)]
    env = {**os.environ, "PYTHONPATH": _payload_path(launcher.parent), "CUDA_VISIBLE_DEVICES": ""}
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        return f"the launcher's step log failed: {_last_error(done)}"
    if unread := _records_problem(done.stdout, record, case.settings["runName"]):
        return unread
    warmup = record["warmupSteps"]
    last = done.stdout.strip().splitlines()[-1]
    print(f"  the launcher's step log reports steps {warmup} and {warmup + 1}, past its warm-up: {last}")
    try:
        loads = read_checkpoint_loads(dllogger)
    except AnalysisError as error:
        return f"the launcher's checkpoint load record: {error}"
    if len(loads) != 1 or not LOAD_S <= loads[0].seconds < LOAD_S + 1:
        return f"a checkpoint load of {LOAD_S} s timed as the library times it was logged as {loads!r}"
    print(f"  the launcher logs a checkpoint load of {LOAD_S} s timed as the library times it: {loads[0].seconds} s")
    return None


def _records_problem(stdout: str, record: dict[str, Any], run: str) -> str | None:
    """What keeps a process's output from holding the step records of steps `warmupSteps` and the
    one after, and none before, each one the step metrics read; None where it holds them."""
    printed = [line for line in stdout.splitlines() if line.startswith("{")]
    warmup = record["warmupSteps"]
    steps = [json.loads(line).get(record["stepField"]) for line in printed]
    if steps != [warmup, warmup + 1]:
        return (
            f"after {warmup + 2} steps the step log printed {printed!r}, "
            f"not the records of steps {warmup} and {warmup + 1}"
        )
    for line in printed:
        if problems := step_record_problems(line, run):
            return "the launcher's step record: " + "; ".join(problems)
    return None


# Run by the runtime environment's interpreter: the NeMo 2 launcher's callback in a real Lightning
# Trainer (the release NeMo 2.1 and 2.4 pin at most, requirements-runtime.txt) on the CPU, with the DLLogger file
# opened as NeMo's DLLogger opens it: `warmupSteps` + 2 steps of a one-layer model, printing what the
# callback printed; then the run resumed from its checkpoint for 2 more steps, as a restart is.
_LIGHTNING_STEP_LOG = """
import contextlib, io, json, sys, warnings
warnings.simplefilter("ignore")
import torch
import dllogger
import lightning.pytorch as pl
from lightning_step_log import StepLog
record, folder = json.loads(sys.argv[1]), sys.argv[2]
steps = record["warmupSteps"] + 2
dllogger.init(backends=[dllogger.JSONStreamBackend(dllogger.Verbosity.VERBOSE, f"{folder}/dllogger.json")])

class Model(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(4, 1)
    def training_step(self, batch, batch_idx):
        return self.layer(batch).sum()
    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)
    def train_dataloader(self):
        return torch.utils.data.DataLoader(torch.randn(4 * (steps + 2), 4), batch_size=4)

def trainer(max_steps):
    return pl.Trainer(accelerator="cpu", devices=1, max_steps=max_steps, logger=False, enable_checkpointing=False,
                      enable_progress_bar=False, enable_model_summary=False, callbacks=[StepLog(record)])

printed = io.StringIO()
with contextlib.redirect_stdout(printed):
    first = trainer(steps)
    first.fit(Model())
    first.save_checkpoint(f"{folder}/last.ckpt")
    trainer(steps + 2).fit(Model(), ckpt_path=f"{folder}/last.ckpt")
sys.stdout.write(printed.getvalue())
"""


def _lightning_step_log_reports(
    python: str, name: str, settings: dict[str, Any], scratch: Path, modules: Path = LAUNCHER.parent
) -> str | None:
    """The NeMo 2 launcher's callback, in a real Lightning Trainer, prints the records of a shipped
    NeMo 2 run's settings after each step past the warm-up and none before, and writes the load of
    the checkpoint a resumed run starts from, and no other, to the DLLogger file as `python -m
    analysis goodput` reads it: None, or what it did instead. `modules` may hold a copy of its
    modules that shadows the payload's."""
    record = settings["stepRecord"]
    scratch.mkdir(parents=True, exist_ok=True)
    (scratch / "dllogger.json").unlink(missing_ok=True)  # DLLogger appends: only this run's records
    env = {**os.environ, "PYTHONPATH": _payload_path(modules), "CUDA_VISIBLE_DEVICES": ""}
    command = [python, "-c", _LIGHTNING_STEP_LOG, json.dumps(record), str(scratch)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        return f"{name}: the NeMo 2 step log failed: {_last_error(done)}"
    if unread := _records_problem(done.stdout, record, settings["runName"]):
        return f"{name}: {unread}"
    last = done.stdout.strip().splitlines()[-1]
    print(f"  {name}: the NeMo 2 launcher's Lightning callback reports steps past its warm-up: {last}")
    try:
        loads = read_checkpoint_loads(scratch / "dllogger.json")
    except AnalysisError as error:
        return f"{name}: the NeMo 2 launcher's checkpoint load record: {error}"
    if len(loads) != 1:
        return f"{name}: a NeMo 2 run resumed once from a checkpoint logged its loads as {loads!r}"
    print(f"  {name}: the NeMo 2 launcher logs the resumed run's checkpoint load: {loads[0].seconds} s")
    return None


def _nemo2_step_logs_report(python: str, runs: list[tuple[str, dict[str, Any]]], folder: Path) -> str | None:
    """Every shipped NeMo 2 run's settings carry a step record, and the launcher's callback prints
    the first run's as the step metrics read it (one Trainer: the callback does the same for every
    run). None, or what is missing."""
    if not runs:
        return "no shipped stack runs NeMo 2: its step log would not be checked"
    for name, settings in runs:
        if not settings.get("stepRecord"):
            return f"{name}: the NeMo 2 run's settings carry no step record"
    name, settings = runs[0]
    return _lightning_step_log_reports(python, name, settings, folder / "nemo2")


def _can_fail(python: str, folder: Path, cases: list[Case], nemo2_run: tuple[str, dict[str, Any]]) -> str | None:
    """The check fails a launcher with one field renamed, one whose step record lacks the run's
    fields and one that records no checkpoint load, and a launcher that leaves the communication
    overlap's configuration out differs from NVIDIA's in unlisted fields. None, or why the check
    could not fail."""
    text, records = LAUNCHER.read_text(), RECORD_MODULE.read_text()
    edits = (
        (RENAMED, "RENAMED", text),
        (NO_OVERLAP, "NO_OVERLAP", text),
        (NO_RECORD, "NO_RECORD", records),
        (NO_LOAD_TIMING, "NO_LOAD_TIMING", text),
        (NO_LIGHTNING_LOAD_TIMING, "NO_LIGHTNING_LOAD_TIMING", LIGHTNING_STEP_LOG.read_text()),
    )
    for edit, name, source in edits:
        if edit[0] not in source:
            return f"the payload no longer has {edit[0]!r}: update {name}"
    broken = folder / "broken" / LAUNCHER.name
    broken.parent.mkdir()
    broken.write_text(text.replace(*RENAMED))
    valid = next(case for case in reversed(cases) if case.refused is None)
    (refused,) = check(python, broken, [valid], folder)
    if refused.error is None:
        return f"a launcher calling {RENAMED[1]!r} passed: the check cannot fail"
    if "--check exits" in refused.error:
        return refused.error
    print(f"  a launcher with {RENAMED[0]!r} renamed is refused: {refused.error}")
    broken.write_text(text)
    broken_records = broken.with_name(RECORD_MODULE.name)
    broken_records.write_text(records.replace(*NO_RECORD))
    (unread,) = check(python, broken, [valid], folder)
    if unread.error is None or "step record" not in unread.error:
        return f"a launcher whose step record lacks the run's fields passed: {unread.error}"
    print(f"  a launcher whose step record lacks the run's fields is refused: {unread.error}")
    nemo2_name, nemo2_settings = nemo2_run
    unread_nemo2 = _lightning_step_log_reports(python, nemo2_name, nemo2_settings, folder / "nemo2", broken.parent)
    if unread_nemo2 is None or "step record" not in unread_nemo2:
        return f"a NeMo 2 step log whose record lacks the run's fields passed: {unread_nemo2}"
    print(f"  a NeMo 2 step log whose record lacks the run's fields is refused: {unread_nemo2}")
    broken_records.unlink()
    untimed_log = broken.with_name(LIGHTNING_STEP_LOG.name)
    untimed_log.write_text(LIGHTNING_STEP_LOG.read_text().replace(*NO_LIGHTNING_LOAD_TIMING))
    untimed_nemo2 = _lightning_step_log_reports(python, nemo2_name, nemo2_settings, folder / "nemo2", broken.parent)
    if untimed_nemo2 is None or "checkpoint" not in untimed_nemo2:
        return f"a NeMo 2 step log that records no checkpoint load passed: {untimed_nemo2}"
    print(f"  a NeMo 2 step log that records no checkpoint load is refused: {untimed_nemo2}")
    untimed_log.unlink()
    broken.write_text(text.replace(*NO_LOAD_TIMING))
    untimed = _step_log_reports(python, folder, cases[0], broken)
    if untimed is None or "checkpoint load" not in untimed:
        return f"a launcher that records no checkpoint load passed: {untimed}"
    print(f"  a launcher that records no checkpoint load is refused: {untimed}")
    broken.write_text(text.replace(*NO_OVERLAP))
    compared = next(case for case in cases if case.name.startswith(OVERLAP_CASE))
    (without,) = check(python, broken, [compared], folder)
    # What the missing configuration changes in the model and DDP first, then its own fields.
    unlisted = sorted(_unlisted(compared, without), key=lambda line: (line.startswith("comm_overlap"), line))
    if without.error is not None or not unlisted:
        return f"a launcher without its CommOverlapConfig passed the comparison on {compared.name}: it cannot fail"
    print(f"  a launcher without its CommOverlapConfig differs on {compared.name} in {len(unlisted)} unlisted fields:")
    for line in unlisted[:SHOWN]:
        print(f"    {line}")
    if len(unlisted) > SHOWN:
        print(f"    ... and {len(unlisted) - SHOWN} more")
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.runtime_check", description=__doc__.split("\n\n")[0])
    parser.add_argument("--python", required=True, help="interpreter of the runtime environment (make runtime-check)")
    args = parser.parse_args(argv)
    settings = shipped_settings()
    shipped = shipped_cases(settings)
    if not shipped:
        print("runtime check: no shipped stack runs Megatron-Bridge: nothing shipped would be checked", file=sys.stderr)
        return 1
    cases = shipped + catalog_cases() + refused_cases()
    compared = [case for case in cases if case.reference]
    print(
        f"runtime check: {len(shipped)} shipped Megatron-Bridge runs, {len(cases) - len(shipped)} catalog cases, "
        f"{len(compared)} compared with NVIDIA's configuration ({parity.SOURCE})"
    )
    with tempfile.TemporaryDirectory() as folder:
        started = time.monotonic()
        verdicts = check(args.python, LAUNCHER, cases, Path(folder))
        failures = 0
        for case, verdict in zip(cases, verdicts, strict=True):
            if case.refused is not None:
                as_expected = verdict.error is not None and case.refused in verdict.error
                failures += not as_expected
                said = "accepted" if verdict.error is None else verdict.error
                print(f"  {case.name}: {'refused by the library' if as_expected else 'FAILED: ' + said}")
                continue
            unlisted = _unlisted(case, verdict)
            failures += verdict.error is not None or bool(unlisted)
            if verdict.error is not None:
                print(f"  {case.name}: FAILED: {verdict.error}")
            elif unlisted:
                print(
                    f"  {case.name}: FAILED: {len(unlisted)} differences from NVIDIA's that DIFFERENCES does not list:"
                )
                for line in unlisted:
                    print(f"    {line}")
            else:
                env = sum(field.startswith("env:") for field in verdict.differences)
                fields = len(verdict.differences) - env
                listed = (
                    f" (differs from NVIDIA's as listed: {fields} fields, {env} variables)" if case.reference else ""
                )
                print(f"  {case.name}: ok{listed}")
        print(f"  ({time.monotonic() - started:.1f} s, the library's import included)")
        stale = parity.unused({case.name: verdict.differences for case, verdict in zip(cases, verdicts, strict=True)})
        for difference in stale:
            print(f"runtime check: no case differs in {difference.fields}: remove it from DIFFERENCES", file=sys.stderr)
        nemo2_runs = settings[nemo2.SCRIPT]
        unreported = _step_log_reports(args.python, Path(folder), shipped[0]) or _nemo2_step_logs_report(
            args.python, nemo2_runs, Path(folder)
        )
        if unreported:
            print(f"runtime check: {unreported}", file=sys.stderr)
            return 1
        cannot_fail = _can_fail(args.python, Path(folder), cases, nemo2_runs[0])
        if cannot_fail:
            print(f"runtime check: {cannot_fail}", file=sys.stderr)
            return 1
    print(
        f"runtime check: {len(cases) - failures} of {len(cases)} cases as expected: configurations that build, "
        "validate and match NVIDIA's, and refusals the library makes too"
    )
    return 1 if failures or stale else 0


if __name__ == "__main__":
    sys.exit(main())
