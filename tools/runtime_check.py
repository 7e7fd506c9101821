"""The Megatron-Bridge launcher's configuration step against the real, pinned library.

    python -m tools.runtime_check --python .venv-runtime/bin/python     (make runtime-check)

For every Megatron-Bridge run the shipped stacks define and every catalog model on every machine
whose recipe is Megatron-Bridge's, writes the settings the program would ship
(planners.runtimes.bridge.settings) and runs `payload/megatron_bridge_pretrain.py --check` with the
given interpreter, whose environment holds megatron-bridge and megatron-core at the versions
NeMo 26.02 ships (facts.versions.MEGATRON_BRIDGE, MEGATRON_CORE; requirements-runtime.txt): the
launcher builds the ConfigContainer with the library's own classes and runs its `validate()`
for the run's world size. No GPU and no training step; GPU-only packages the library imports at
module level are stood in for (tools/runtime_stub.py). Then it shows the check can fail: a copy
of the launcher with one field renamed must be refused. Exit code 1 on any failure.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from facts.kubernetes import PROGRAM_ERROR_EXIT_CODE, workload_file_key
from facts.machines import MACHINE_TYPES, MachineType
from facts.models import MODELS, Framework, RunSettings
from harness.runner import ROOT, run_stack, stack_names
from planners import workload
from planners.runs import ProfileWindow, RunSpec, Tokenizer
from planners.runtimes import bridge
from tools import gpu_train

LAUNCHER = ROOT / "payload" / bridge.SCRIPT
STUB = Path(__file__).with_name("runtime_stub.py")
# A field the launcher sets, and a misspelling the library must refuse.
RENAMED = ("train_iters=steps,", "train_iter=steps,")


def _fewest_nodes(settings: RunSettings, machine: MachineType) -> int:
    step = math.lcm(settings.gpu_multiple, machine.gpus) // machine.gpus
    nodes = step
    while settings.global_batch_size % (nodes * machine.gpus // settings.model_parallel * settings.micro_batch_size):
        nodes += step
    return nodes


def smallest_run(model: str, machine: MachineType) -> RunSpec:
    """The model's recipe on the machine at the fewest nodes its layout and batch allow."""
    settings = MODELS[model].recipe_on(machine.name).settings()
    nodes = _fewest_nodes(settings, machine)
    tokenizer = Tokenizer("huggingface", "", None)
    return RunSpec(
        f"{model}-{machine.name}", model, "gpu", nodes, settings, tokenizer, "normal", machine_type=machine.name
    )


# A case: its name, the settings the program ships, the GPU the check stands in for the
# validations that ask the device ("<major>.<minor> <name>"; None: tools/runtime_stub.py's default),
# and whether make gpu-train's worker replaces what needs Transformer Engine (gpu_worker.TE_FREE).
Case = tuple[str, dict[str, Any], str | None, bool]


def gpu_of(machine: MachineType) -> str:
    major, minor = machine.accelerator.compute_capability
    return f"{major}.{minor} NVIDIA {machine.accelerator.name}"


def _case(name: str, run: RunSpec, machine: MachineType) -> Case:
    """The settings the program would ship for `run`, checked on the machine's GPU."""
    paths = workload.run_paths(run, "/nfs/experiments", "/checkpoints", "/data")
    return name, bridge.settings(run, paths, machine), gpu_of(machine), False


def catalog_cases() -> list[Case]:
    cases: list[Case] = []
    for model, spec in MODELS.items():
        # The machines multi-node training runs on: each with its GPUDirect stack.
        for machine in MACHINE_TYPES.values():
            if (
                machine.gpudirect_stack is None
                or spec.recipe_on(machine.name).framework is not Framework.MEGATRON_BRIDGE
            ):
                continue
            run = smallest_run(model, machine)
            cases.append(_case(f"{model} on {machine.name} ({run.nodes} nodes)", run, machine))
    # Every optional setting at once: real data with its tokenizer folder, a profile window.
    machine = MACHINE_TYPES["a3-ultragpu-8g"]
    run = dataclasses.replace(
        smallest_run("llama3-8b", machine),
        dataset_prefix="datasets/wiki/wiki_text_document",
        tokenizer=Tokenizer("huggingface", "meta-llama/Meta-Llama-3-8B", "tokenizers/llama3"),
        profile=ProfileWindow(10, 12),
        # One the mixed-precision recipe would otherwise set back (grad_reduce_in_fp32).
        overrides={"ddp.grad_reduce_in_fp32": True, "train.eval_iters": 0},
    )
    cases.append(_case("llama3-8b with real data, a profile and overrides", run, machine))
    # An override the expert all-to-all overlap's configuration would otherwise set back.
    run = dataclasses.replace(smallest_run("qwen3-30b-a3b", machine), overrides={"ddp.overlap_grad_reduce": False})
    cases.append(_case("qwen3-30b-a3b with an override of an overlapped field", run, machine))
    # make gpu-train's run, as its worker trains it: one GPU, no Transformer Engine.
    gpu_run = gpu_train.one_gpu_run(machine, steps=30, layers=4, seq_length=4096, global_batch_size=8)
    gpu_settings = gpu_train.one_gpu_settings(gpu_run, machine, Path("/tmp/gpu-train"))
    cases.append(("make gpu-train's run without Transformer Engine", gpu_settings, gpu_of(machine), True))
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


def shipped_cases() -> list[Case]:
    """The settings every shipped stack's Megatron-Bridge runs ship in their ConfigMaps."""
    cases: list[Case] = []
    for stack in stack_names():
        run = run_stack(stack)
        for resource in run.of_type("kubernetes:core/v1:ConfigMap"):
            data = run.manifest(resource).get("data", {})
            if bridge.SCRIPT in data:
                cases.append((f"{stack}: {resource.name}", json.loads(data[workload.RUN_SETTINGS]), None, False))
        # A run a MultiKueue manager dispatches carries its files in its pod template's annotations.
        for resource in run.of_type("kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"):
            template = run.manifest(resource)["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
            annotations = template["metadata"].get("annotations", {})
            if workload_file_key(bridge.SCRIPT) in annotations:
                settings = json.loads(annotations[workload_file_key(workload.RUN_SETTINGS)])
                cases.append((f"{stack}: {resource.name}", settings, None, False))
    return cases


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
from megatron.bridge.training.callbacks import normalize_callbacks, should_fire
from megatron.bridge.training.config import runtime_config_update
# The step log's hooks are events the library fires (pretrain() registers callbacks so).
manager = normalize_callbacks([launcher["StepLog"]("dllogger.json")])
for event in ("on_train_start", "on_train_step_start", "on_train_step_end"):
    assert should_fire(manager, event), f"the launcher's StepLog does not handle {event}"
for path in sys.argv[3:]:
    with open(path) as f:
        settings = json.load(f)
    os.environ["WORLD_SIZE"] = str(settings["worldSize"])
    if os.path.exists(path + ".gpu"):
        with open(path + ".gpu") as f:
            os.environ["NEMO_CHECK_GPU"] = f.read()
    else:
        os.environ.pop("NEMO_CHECK_GPU", None)
    try:
        cfg = launcher["config"](settings)
        replaced = {}
        if os.path.exists(path + ".te-free"):
            import gpu_worker
            cfg, replaced = gpu_worker.without_transformer_engine(cfg, launcher["_set"]), gpu_worker.TE_FREE
        runtime_config_update(cfg)
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
        # What NVIDIA's recipes get from their CommOverlapConfig's setup (training/comm_overlap.py):
        # with data parallelism, 128 MiB gradient buckets; with a virtual pipeline, the P2P
        # overlap, and with both, the parameter gather aligned across the pipeline.
        m, dp = cfg.model, cfg.data_parallel_size
        interleaved = m.pipeline_model_parallel_size > 1 and (m.virtual_pipeline_model_parallel_size or 1) > 1
        wanted = {
            "ddp.bucket_size": 128 * 1024 * 1024 if dp > 1 else None,
            "model.overlap_p2p_comm": interleaved,
            "ddp.align_param_gather": dp > 1 and interleaved,
        }
        for key, value in wanted.items() if settings["commOverlapSetup"] else ():
            section, field = key.split(".")
            found = getattr(getattr(cfg, section), field)
            assert found == value, f"{key} is {found!r}, where NVIDIA's recipes derive {value!r}"
        result = {"ok": True}
    except Exception as error:
        result = {"ok": False, "error": f"{type(error).__name__}: {error}"}
    # The launcher's own check, as launch.sh runs it: its exit code.
    os.environ["NEMO_RUN_SETTINGS"] = path
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        try:
            result["exit"] = launcher["main"](["--check"])
        except Exception as error:
            result["exit"] = f"raised {type(error).__name__}: {error}"
    print(json.dumps(result), flush=True)
"""


def check(python: str, launcher: Path, cases: list[Case], folder: Path) -> list[str | None]:
    """For each case, None where its configuration builds and validates and the launcher's check
    exits 0, else the library's error; where the configuration is refused, the launcher's check
    must exit PROGRAM_ERROR_EXIT_CODE (what launch.sh and the JobSet fail on), or that is the error."""
    files = []
    for i, (_, settings, gpu, te_free) in enumerate(cases):
        path = folder / f"case-{i}.json"
        path.write_text(json.dumps(settings))
        if gpu:
            Path(f"{path}.gpu").write_text(gpu)
        if te_free:
            Path(f"{path}.te-free").touch()
        files.append(str(path))
    env = {**os.environ, "PYTHONPATH": str(LAUNCHER.parent), "CUDA_VISIBLE_DEVICES": ""}
    command = [python, "-c", _CHECKER, str(STUB.parent), str(launcher), *files]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    results = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    if len(results) != len(cases):
        lines = [line for line in done.stderr.splitlines() if line.strip()] or [f"exit {done.returncode}"]
        return [lines[-1]] * len(cases)
    return [_verdict(r) for r in results]


def _verdict(result: dict[str, Any]) -> str | None:
    exit_code = result["exit"]
    if result["ok"]:
        return None if exit_code == 0 else f"the launcher's --check exits {exit_code!r} on a valid configuration"
    if exit_code != PROGRAM_ERROR_EXIT_CODE:
        return f"the launcher's --check exits {exit_code!r}, not {PROGRAM_ERROR_EXIT_CODE}, on: {result['error']}"
    return str(result["error"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.runtime_check", description=__doc__.split("\n\n")[0])
    parser.add_argument("--python", required=True, help="interpreter of the runtime environment (make runtime-check)")
    args = parser.parse_args(argv)
    shipped = shipped_cases()
    if not shipped:
        print("runtime check: no shipped stack runs Megatron-Bridge: nothing shipped would be checked", file=sys.stderr)
        return 1
    cases = shipped + catalog_cases()
    print(f"runtime check: {len(shipped)} shipped Megatron-Bridge runs, {len(cases) - len(shipped)} catalog cases")
    with tempfile.TemporaryDirectory() as folder:
        started = time.monotonic()
        errors = check(args.python, LAUNCHER, cases, Path(folder))
        for (name, *_), error in zip(cases, errors, strict=True):
            print(f"  {name}: {'ok' if error is None else f'FAILED: {error}'}")
        print(f"  ({time.monotonic() - started:.1f} s, the library's import included)")
        failures = sum(error is not None for error in errors)
        text = LAUNCHER.read_text()
        if RENAMED[0] not in text:
            print(f"runtime check: the launcher no longer sets {RENAMED[0]!r}: update RENAMED", file=sys.stderr)
            return 1
        broken = Path(folder) / "broken" / LAUNCHER.name
        broken.parent.mkdir()
        broken.write_text(text.replace(*RENAMED))
        (refused,) = check(args.python, broken, [cases[-1]], Path(folder))
        if refused is None:
            print(f"runtime check: a launcher calling {RENAMED[1]!r} passed: the check cannot fail", file=sys.stderr)
            return 1
        if "--check exits" in refused:
            print(f"runtime check: {refused}", file=sys.stderr)
            return 1
        print(f"  a launcher with {RENAMED[0]!r} renamed is refused: {refused}")
    print(f"runtime check: {len(cases) - failures} of {len(cases)} configurations build and validate")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
