"""The launcher trains for real on this machine's GPU: a small model on generated data.

    python -m tools.gpu_train --python PYTHON [--steps 30] [--layers 4] [--out build/gpu-train]
    (make gpu-train: needs one NVIDIA GPU and the runtime environment of make runtime-check)

Takes the catalog's Llama 3 8B recipe for the machine type of the GPU found here, fits it to one
GPU (no model parallelism, `--layers` of its 32 layers, sequence `--seq-length`, global batch
`--global-batch-size` of micro-batches of one, BF16, no checkpoint), writes the settings the
program's planner ships for it (planners.runtimes.bridge.settings) and runs
payload/megatron_bridge_pretrain.py under torchrun through tools/gpu_worker.py, on Megatron Core
without Transformer Engine (what that replaces: gpu_worker.TE_FREE). Then reads the run's DLLogger
log with `python -m analysis metrics` and prints its step time, TFLOPS per GPU and MFU beside the
figure NVIDIA publishes for the recipe's model on the machine type, and the layout planner's memory
per GPU beside the allocator's peak (MEMORY_TOLERANCE). Writes the settings, the log
and the report (report.json) under `--out`. Exit code 1 when the run or its report fails, 2 on
a bad flag or with no GPU; 1 also when the memory prediction misses.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from analysis.__main__ import main as analysis_main
from facts.machines import MACHINE_TYPES, MachineType, Precision
from facts.models import MODELS
from planners import workload
from planners.layout import GB, Layout, Memory, memory
from planners.runs import RunSpec, Tokenizer
from planners.runtimes import bridge
from tools import parity
from tools.cli import at_least

ROOT = Path(__file__).resolve().parent.parent
LAUNCHER = ROOT / "payload" / bridge.SCRIPT
WORKER = Path(__file__).with_name("gpu_worker.py")
MODEL = "llama3-8b"
# The step window `python -m analysis metrics` averages: the first steps compile and warm up.
FIRST_STEP_AVERAGED = 10
# How much slower than NVIDIA's configuration of the same slice the launcher's may train (issue
# 35 §4), and the variable tools/gpu_worker.py reads NVIDIA's reference from.
PARITY_TOLERANCE = 0.03
NVIDIA_REFERENCE = "NEMO_NVIDIA_REFERENCE"
# How far the layout planner's memory per GPU may be from the allocator's peak (issue 39), and
# the variable tools/gpu_worker.py writes the allocator's figures to (the worker runs in the
# runtime environment and is not imported here).
MEMORY_TOLERANCE = 0.10
MEMORY_FILE = "NEMO_GPU_MEMORY"
# gpu_worker.TE_FREE turns the precision-aware optimizer off (it needs Transformer Engine).
PRECISION_AWARE = False


class Refused(Exception):
    """A flag or a machine this check cannot run with: one line, exit code 2."""


def _gpu(python: str) -> str:
    """The name of the first CUDA device the runtime interpreter sees, or "" where it sees none."""
    probe = "import torch; print(torch.cuda.get_device_name(0) if torch.cuda.is_available() else '')"
    try:
        done = subprocess.run([python, "-c", probe], capture_output=True, text=True, check=False)
    except OSError as error:
        raise Refused(f"--python {python}: {error.strerror}") from None
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines() or [f"exit {done.returncode}"]
        raise Refused(f"--python {python}: cannot import torch: {lines[-1]}")
    return done.stdout.strip()


def machine_of(gpu_name: str) -> MachineType:
    """The catalog's machine type of eight such GPUs (the recipes' machines) for a device name
    such as "NVIDIA H200" or "NVIDIA H100 80GB HBM3"."""
    words = gpu_name.lower().split()
    for machine in sorted(MACHINE_TYPES.values(), key=lambda m: -m.gpus):
        if machine.accelerator.name in words and machine.gpudirect_stack is not None:
            return machine
    known = ", ".join(sorted({m.accelerator.name for m in MACHINE_TYPES.values()}))
    raise Refused(f"the GPU here is {gpu_name!r}, which no catalog machine has (they have: {known})")


def one_gpu_run(machine: MachineType, *, steps: int, layers: int, seq_length: int, global_batch_size: int) -> RunSpec:
    """The model's recipe on the machine type, fitted to one GPU."""
    recipe_settings = MODELS[MODEL].recipe_on(machine.name).settings()
    settings = dataclasses.replace(
        recipe_settings,
        steps=steps,
        global_batch_size=global_batch_size,
        micro_batch_size=1,
        tensor_parallel=1,
        pipeline_parallel=1,
        virtual_pipeline=None,
        context_parallel=1,
        sequence_length=seq_length,
        fp8=False,
        # A few layers need no recomputation (the recipe's count is of its 32).
        recompute_layers=None,
    )
    return RunSpec(
        f"{MODEL}-{layers}-layers-one-gpu",
        MODEL,
        "gpu",
        1,
        settings,
        Tokenizer("huggingface", "", None),
        "normal",
        checkpoint=False,
        overrides={"model.num_layers": layers},
        machine_type=machine.name,
    )


def one_gpu_settings(run: RunSpec, machine: MachineType, out: Path) -> dict[str, Any]:
    """What the planner ships for the run, on one GPU with its files under `out`."""
    paths = workload.run_paths(run, str(out / "experiments"), str(out / "checkpoints"), str(out / "data"), gke=False)
    settings = bridge.settings(run, paths, machine)
    settings["worldSize"] = 1
    # Nor selective recomputation, which the recipe keeps apart from the run's settings.
    settings["recomputeModules"] = []
    settings["dlloggerFile"] = str(out / "dllogger.json")
    return settings


def flops_per_sample(layers: int, seq_length: int) -> float:
    """Model FLOPs of one sample of the fitted model (the catalog architecture, `layers` deep)."""
    architecture = dataclasses.replace(MODELS[MODEL].architecture, layers=layers)
    return architecture.flops_per_sample(seq_length)


def predicted_memory(run: RunSpec, layers: int) -> Memory:
    """What the layout planner says a GPU of the fitted run holds at most: one GPU, BF16, Megatron
    Core's local layers without fusions, and the optimizer gpu_worker.TE_FREE leaves."""
    architecture = dataclasses.replace(MODELS[MODEL].architecture, layers=layers)
    return memory(architecture, Layout.of_settings(run.settings), 1, (), PRECISION_AWARE, fused_kernels=False)


def measured_memory(steps: list[dict[str, Any]]) -> dict[str, float]:
    """The allocator's figures of the run (gpu_worker.measure_memory), GB: its peak over every
    step, forward and backward or the optimizer's step, and what stays allocated after a step
    (weights, gradients and optimizer state)."""
    peaks = [max(s.get("forward_backward_peak", 0), s["optimizer_peak"]) for s in steps]
    return {
        "peak_gb": max(peaks) / GB,
        "peak_step": steps[peaks.index(max(peaks))]["step"],
        "forward_backward_peak_gb": max(s.get("forward_backward_peak", 0) for s in steps) / GB,
        "optimizer_peak_gb": max(s["optimizer_peak"] for s in steps) / GB,
        "allocated_after_step_gb": steps[-1]["allocated_at_end"] / GB,
    }


def compare_memory(predicted: Memory, measured: dict[str, float]) -> dict[str, Any]:
    """The prediction beside the allocator: the peak of the forward and backward passes, and what
    stays allocated after a step, each within MEMORY_TOLERANCE. The run's peak may be the
    optimizer's step instead, where torch's AdamW, which stands in for Transformer Engine's fused
    one here, adds temporaries the planner does not count; it is reported beside them."""
    errors = {
        "forward_backward_error": predicted.forward_backward / GB / measured["forward_backward_peak_gb"] - 1,
        "held_error": predicted.held / GB / measured["allocated_after_step_gb"] - 1,
    }
    return {
        "predicted_gb": predicted.peak / GB,
        "predicted_forward_backward_gb": predicted.forward_backward / GB,
        "predicted_held_gb": predicted.held / GB,
        "predicted_states_gb": predicted.states / GB,
        "predicted_buffers_gb": predicted.buffers / GB,
        "predicted_activations_gb": predicted.activations / GB,
        "predicted_logits_gb": predicted.logits / GB,
        "predicted_backward_transient_gb": predicted.backward_transient / GB,
        **measured,
        **errors,
        "within": all(abs(error) <= MEMORY_TOLERANCE for error in errors.values()),
    }


def published(machine: MachineType) -> dict[str, Any] | None:
    """NVIDIA's figure for the recipe's model on the machine type: TFLOPS per GPU and MFU, as
    this project's analytics count them (full attention, as the run's figures here) and as
    NVIDIA's table does (the causal half of attention: its row's own TFLOPS)."""
    spec = MODELS[MODEL]
    times = [t for t in spec.step_times if t.machine_type == machine.name]
    if not times:
        return None
    time = times[0]
    seq_length = spec.recipe_on(machine.name).settings().sequence_length
    gpus = time.nodes * machine.gpus
    precision = Precision.FP8 if time.fp8 else Precision.BF16
    peak = machine.accelerator.peak_tflops(precision)
    figures: dict[str, Any] = {"precision": precision.value, "source": time.source}
    for suffix, causal in (("", False), ("_causal", True)):
        flops = spec.architecture.flops_per_sample(seq_length, causal=causal)
        tflops = flops * time.global_batch_size / time.seconds / gpus / 1e12
        figures |= {f"tflops_per_gpu{suffix}": tflops, f"mfu{suffix}": tflops / peak}
    return figures


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tools.gpu_train", description=__doc__.split("\n\n")[0])
    parser.add_argument("--python", required=True, help="interpreter with torch (CUDA), megatron-bridge, megatron-core")
    parser.add_argument("--steps", type=at_least(FIRST_STEP_AVERAGED + 5), default=30, help="training steps")
    parser.add_argument("--layers", type=at_least(1), default=4, help="transformer layers of Llama 3 8B's 32 kept")
    parser.add_argument("--seq-length", type=at_least(128), default=4096, help="tokens per sample")
    parser.add_argument("--global-batch-size", type=at_least(1), default=8, help="samples per step")
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "gpu-train", help="folder for its files")
    parser.add_argument(
        "--against-nvidia",
        action="store_true",
        help="also train NVIDIA's configuration of the same slice and compare step times (make gpu-parity)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.layers > MODELS[MODEL].architecture.layers:
            raise Refused(f"--layers: {MODEL} has {MODELS[MODEL].architecture.layers} layers, not {args.layers}")
        gpu = _gpu(args.python)
        if not gpu:
            raise Refused(f"make gpu-train needs an NVIDIA GPU: torch under --python {args.python} sees none")
        machine = machine_of(gpu)
    except Refused as refusal:
        print(f"gpu-train: {refusal}", file=sys.stderr)
        return 2
    return train(args, gpu, machine)


def train(args: argparse.Namespace, gpu: str, machine: MachineType) -> int:
    """The run on the GPU, then its report; with --against-nvidia, NVIDIA's configuration of the
    same slice too, and the ratio of their step times. 1 where a run or its report fails, or the
    launcher is more than PARITY_TOLERANCE slower."""
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    run = one_gpu_run(
        machine,
        steps=args.steps,
        layers=args.layers,
        seq_length=args.seq_length,
        global_batch_size=args.global_batch_size,
    )
    settings = one_gpu_settings(run, machine, out)
    print(f"gpu-train: {gpu} ({machine.name}'s GPU): {run.name}, {args.steps} steps on generated data")
    ours = _train_and_read(args, machine, settings, out, None)
    if ours is None:
        return 1
    status = 0
    if steps := _memory_steps(out / "memory.json"):
        compared = compare_memory(predicted_memory(run, args.layers), measured_memory(steps))
        verdict = "within" if compared["within"] else "OUTSIDE"
        print(
            f"gpu-train: memory per GPU, the layout planner against torch's allocator: forward and backward "
            f"{compared['predicted_forward_backward_gb']:.1f} GB against {compared['forward_backward_peak_gb']:.1f} "
            f"({compared['forward_backward_error']:+.1%}), after a step {compared['predicted_held_gb']:.1f} GB "
            f"against {compared['allocated_after_step_gb']:.1f} ({compared['held_error']:+.1%}): {verdict} "
            f"{MEMORY_TOLERANCE:.0%}; the run's peak {compared['peak_gb']:.1f} GB (step {compared['peak_step']}), "
            f"the planner's {compared['predicted_gb']:.1f} GB"
        )
        ours["memory"] = compared
        status = 0 if compared["within"] else 1
    else:
        print("gpu-train: the worker wrote no memory figures", file=sys.stderr)
        status = 1
    reference = published(machine)
    if reference:
        print(
            f"published, {MODEL} on {machine.name} ({reference['precision']}, the full model and its layout): "
            f"{reference['tflops_per_gpu']:.0f} TFLOPS per GPU, MFU {reference['mfu']:.1%} counted as above; "
            f"{reference['tflops_per_gpu_causal']:.0f}, {reference['mfu_causal']:.1%} as NVIDIA counts "
            f"(causal attention) ({reference['source']})"
        )
    report: dict[str, Any] = {"gpu": gpu, "machine": machine.name, "run": ours, "published": reference}
    if args.against_nvidia:
        nvidia = _train_and_read(args, machine, settings, out, parity.reference(run, machine))
        if nvidia is None:
            return 1
        ratio = ours["step_time_s"] / nvidia["step_time_s"]
        verdict = "within" if ratio <= 1 + PARITY_TOLERANCE else "OUTSIDE"
        print(
            f"gpu-train: the launcher's step {ours['step_time_s']:.4f} s, NVIDIA's configuration's "
            f"{nvidia['step_time_s']:.4f} s: ratio {ratio:.3f}, {verdict} {PARITY_TOLERANCE:.0%}"
        )
        report |= {"nvidia": nvidia, "ratio": ratio}
        status = status or (0 if verdict == "within" else 1)
    (out / "report.json").write_text(json.dumps(report, indent=1))
    return status


def _train_and_read(
    args: argparse.Namespace,
    machine: MachineType,
    settings: dict[str, Any],
    out: Path,
    nvidia: dict[str, str | None] | None,
) -> dict[str, Any] | None:
    """Trains the slice under torchrun through tools/gpu_worker.py, the launcher's configuration
    or (`nvidia`: tools/parity.py reference) NVIDIA's, and reads its step log with `python -m
    analysis metrics`: its figures, or None where the run or the reading fails."""
    who, suffix = ("nvidia", "-nvidia") if nvidia else ("launcher", "")
    log = out / f"dllogger{suffix}.json"
    log.unlink(missing_ok=True)
    settings_file = out / f"settings{suffix}.json"
    settings_file.write_text(json.dumps({**settings, "dlloggerFile": str(log)}, indent=1))
    python_path = os.pathsep.join(filter(None, (str(LAUNCHER.parent), os.environ.get("PYTHONPATH"))))
    memory_file = out / f"memory{suffix}.json"
    memory_file.unlink(missing_ok=True)
    env = {
        **os.environ,
        "NEMO_RUN_SETTINGS": str(settings_file),
        "PYTHONPATH": python_path,
        MEMORY_FILE: str(memory_file),
    }
    if nvidia:
        env[NVIDIA_REFERENCE] = json.dumps(nvidia)
    command = [args.python, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "1"]
    trained = subprocess.run([*command, str(WORKER), str(LAUNCHER)], env=env, check=False)
    if trained.returncode != 0:
        print(f"gpu-train: the {who}'s run exited {trained.returncode}", file=sys.stderr)
        return None
    metrics_args = [
        "metrics",
        "--log",
        str(log),
        "--start-step",
        str(FIRST_STEP_AVERAGED),
        "--end-step",
        str(args.steps - 1),
        "--gpus",
        "1",
        "--global-batch-size",
        str(args.global_batch_size),
        "--accelerator",
        machine.accelerator.name,
        "--precision",
        "bf16",
        "--model-flops-per-sample",
        f"{flops_per_sample(args.layers, args.seq_length):.6g}",
        "--seq-length",
        str(args.seq_length),
    ]
    print(f"{who}: python -m analysis " + " ".join(metrics_args))
    if analysis_main(metrics_args) != 0:
        return None
    figures = io.StringIO()
    with contextlib.redirect_stdout(figures):
        analysis_main([*metrics_args, "--json"])
    read: dict[str, Any] = json.loads(figures.getvalue())
    return read


def _memory_steps(path: Path) -> list[dict[str, Any]]:
    try:
        steps = json.loads(path.read_text())
    except (OSError, ValueError):
        return []
    return steps if isinstance(steps, list) else []


if __name__ == "__main__":
    sys.exit(main())
