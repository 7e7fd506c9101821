"""Propose a training layout: `python -m tools.layout MODEL --machine M --nodes N [--global-batch-size B]
[--sequence-length S] [--precision bf16|fp8] [--region R] [--top K]`.

Enumerates the layouts Megatron Core accepts for the model on those GPUs (the rules the stack's
config check applies), drops those that do not fit the GPUs' memory even with recomputation, and
prints the fastest, each with its memory per GPU, predicted step time, TFLOPS per GPU, MFU and
on-demand cost per step, and where the model's recipe on the machine ranks (planners.layout).
Unset options are the recipe's.

Exit codes: 0 printed, 2 a bad option or no layout that fits (one line naming the option).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from facts import pricing
from facts.errors import RuleError
from facts.machines import MACHINE_TYPES, Precision
from facts.models import MODELS
from planners.layout import LEAVE_ONE_OUT_BOUND, TOP, LayoutRequest, Proposal, calibration, leave_one_out
from tools.cli import at_least

DEFAULT_REGION = "us-central1"
PROG = "python -m tools.layout"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    parser.add_argument("model", help=f"a catalog model: {', '.join(MODELS)}")
    parser.add_argument("--machine", required=True, help="a catalog machine type (a4-highgpu-8g, ...)")
    parser.add_argument("--nodes", required=True, type=at_least(1), help="nodes of the machine")
    parser.add_argument("--global-batch-size", type=at_least(1), help="samples per step (default: the recipe's)")
    parser.add_argument("--sequence-length", type=at_least(1), help="tokens per sample (default: the recipe's)")
    parser.add_argument("--precision", choices=[p.value for p in Precision], help="default: the recipe's")
    parser.add_argument("--region", default=DEFAULT_REGION, help=f"prices from (default {DEFAULT_REGION})")
    parser.add_argument("--top", type=at_least(1), default=TOP, help=f"layouts to print (default {TOP})")
    return parser


_FLAGS = {
    "model": "MODEL",
    "machine": "--machine",
    "nodes": "--nodes",
    "globalBatchSize": "--global-batch-size",
    "sequenceLength": "--sequence-length",
    "precision": "--precision",
}


def _cost(proposal: Proposal, machine: str, nodes: int, region: str) -> str:
    price = pricing.on_demand_usd_per_hour(machine, region)
    if price is None:
        return "not priced"
    return f"{price * nodes * proposal.step_seconds / 3600:.3f} USD"


def _row(rank: int | str, p: Proposal, hbm_gb: int, cost: str) -> str:
    used = p.memory.peak / 1e9
    return (
        f"| {rank} | {p.layout.describe} | {used:.0f} of {hbm_gb} GB | {p.step_seconds:.2f} s | "
        f"{p.tflops_per_gpu:.0f} | {p.mfu:.1%} | {cost} |"
    )


def report(args: argparse.Namespace) -> list[str]:
    """The proposals as lines of Markdown; RuleError for a request no layout meets."""
    precision = Precision(args.precision) if args.precision else None
    request = LayoutRequest.of(
        args.model,
        args.machine,
        args.nodes,
        global_batch_size=args.global_batch_size,
        sequence_length=args.sequence_length,
        precision=precision,
    )
    proposals = request.plan()
    spec, machine = MODELS[args.model], MACHINE_TYPES[args.machine]
    first = proposals[0].layout
    gpus = args.nodes * machine.gpus
    hbm = machine.accelerator.memory_gb
    lines = [
        f"{spec.name} on {args.nodes} × {machine.name} ({gpus} {machine.accelerator.name.upper()}), global batch "
        f"{first.global_batch_size}, {first.sequence_length} tokens, {first.precision.value.upper()}: "
        f"{len(proposals)} layouts fit; the fastest {min(args.top, len(proposals))}:",
        "",
        f"| # | Layout | Memory per GPU | Step | TFLOPS per GPU | MFU | Per step, on demand in {args.region} |",
        "|---:|---|---:|---:|---:|---:|---|",
    ]
    lines += [
        _row(rank, p, hbm, _cost(p, machine.name, args.nodes, args.region))
        for rank, p in enumerate(proposals[: args.top], 1)
    ]
    lines.append("\n" + _recipe_line(request, proposals))
    held_out = leave_one_out()
    within = sum(abs(h.error) <= LEAVE_ONE_OUT_BOUND for h in held_out)
    lines.append(
        f"Predicted by a model fitted on {len(calibration().rows)} of NVIDIA's published rows; each held out, "
        f"{within} of {len(held_out)} come within {LEAVE_ONE_OUT_BOUND:.0%} (docs/training.md, Layouts)."
    )
    return lines


def _recipe_line(request: LayoutRequest, proposals: list[Proposal]) -> str:
    """Where the model's recipe on the machine stands among the proposals, or why it is not one."""
    recipe, target = request.recipe_layout, request.target
    if not target.valid(recipe):
        return f"The recipe's layout ({recipe.describe}) is not one of these GPUs at this batch and sequence."
    fitting = target.fitted(recipe)
    if fitting is None:
        return f"The recipe's layout ({recipe.describe}) does not fit these GPUs, even with recomputation."
    own = target.predict(fitting)
    rank = 1 + sum(p.step_seconds < own.step_seconds for p in proposals)
    slower = own.step_seconds / proposals[0].step_seconds - 1
    return f"The recipe's layout ({fitting.describe}) ranks {rank}, predicted {slower:.1%} slower."


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        lines = report(args)
    except RuleError as error:
        print(f"{PROG}: {_FLAGS.get(error.key, error.key)} {error.value}: {error}", file=sys.stderr)
        return 2
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
