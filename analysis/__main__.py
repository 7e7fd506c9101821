"""`python -m analysis {metrics,plot,goodput}`: the command line.

Exit codes: 0 done, 2 bad input (argparse errors included), with `error: <message>` on stderr.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path

from analysis.errors import AnalysisError
from analysis.goodput import GoodputReport, compute_goodput, read_events
from analysis.logs import StepRange, TrainingLog, read_log
from analysis.metrics import RunMetrics, compute, model_flops
from facts.machines import ACCELERATORS, Precision
from facts.models import MODELS

EXIT_BAD_INPUT = 2


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {value}")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text}")
    return value


def _add_window(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--start-step", type=int, default=10, metavar="N", help="first step averaged (default 10)")
    parser.add_argument(
        "--end-step", type=int, default=30, metavar="N", help="last step averaged, inclusive (default 30)"
    )


def _add_throughput(parser: argparse.ArgumentParser, *, required: bool) -> None:
    group = parser.add_argument_group("throughput" + ("" if required else " (all four, or none)"))
    group.add_argument("--gpus", type=_positive_int, required=required, metavar="N", help="GPUs in the run")
    group.add_argument(
        "--global-batch-size", type=_positive_int, required=required, metavar="N", help="samples per step"
    )
    group.add_argument("--accelerator", required=required, metavar="NAME", help=f"GPU model: {', '.join(ACCELERATORS)}")
    group.add_argument("--precision", choices=[p.value for p in Precision], required=required)
    model = parser.add_argument_group("model FLOPs (default: the DLLogger PARAMETER record)")
    model.add_argument("--model", metavar="NAME", help=f"catalog model: {', '.join(MODELS)}")
    model.add_argument("--model-flops-per-sample", type=_positive_float, metavar="FLOPS", help="e.g. 2.2e15")
    model.add_argument("--seq-length", type=_positive_int, metavar="N", help="override the sequence length")
    model.add_argument("--vocab-size", type=_positive_int, metavar="N", help="override or supply the vocabulary size")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m analysis", description="Training analytics for NeMo runs. Exit code 2 means bad input."
    )
    commands = parser.add_subparsers(dest="command", required=True)

    metrics = commands.add_parser("metrics", help="step time, tokens/s, TFLOPS per GPU and MFU from a NeMo log")
    metrics.add_argument(
        "--log", type=Path, required=True, metavar="FILE", help="DLLogger JSON lines or a NeMo text log"
    )
    _add_window(metrics)
    _add_throughput(metrics, required=True)
    metrics.add_argument("--json", action="store_true", help="print one JSON object")

    plot = commands.add_parser("plot", help="loss and step time against step, as a PNG")
    plot.add_argument("--log", type=Path, required=True, metavar="FILE", help="DLLogger JSON lines or a NeMo text log")
    plot.add_argument("--out", type=Path, required=True, metavar="FILE.png", help="PNG file to write")
    _add_window(plot)
    _add_throughput(plot, required=False)

    goodput = commands.add_parser("goodput", help="goodput of a run from its JSON-lines event log")
    goodput.add_argument(
        "--events", type=Path, required=True, metavar="FILE", help="events.jsonl written by the training pods"
    )
    goodput.add_argument(
        "--reference-step-time",
        type=float,
        required=True,
        metavar="SECONDS",
        help="step time of an undisturbed run, e.g. from `metrics`",
    )
    goodput.add_argument("--run", metavar="NAME", help="run to report when the file holds several")
    goodput.add_argument("--json", action="store_true", help="print one JSON object")
    return parser


def _run_metrics(args: argparse.Namespace, log: TrainingLog, window: StepRange) -> RunMetrics:
    model = model_flops(
        log.parameters,
        model=args.model,
        flops_per_sample=args.model_flops_per_sample,
        seq_length=args.seq_length,
        vocab_size=args.vocab_size,
    )
    return compute(
        log,
        window,
        model,
        gpus=args.gpus,
        global_batch_size=args.global_batch_size,
        accelerator_name=args.accelerator,
        precision=Precision(args.precision),
    )


def _metrics_table(log: TrainingLog, result: RunMetrics) -> str:
    window = result.window
    expected = window.end - window.start + 1
    tokens = f"{result.tokens_per_s:,.0f}" if result.tokens_per_s is not None else "n/a (pass --seq-length)"
    seq = result.model.seq_length if result.model.seq_length is not None else "unknown"
    rows = [
        ("log", f"{log.path} ({log.format.value}, steps {log.steps_in_file})"),
        ("model", result.model.describe()),
        ("model FLOPs", f"{result.model.flops_per_sample:.4e} per sample, sequence length {seq}"),
        ("window", f"steps {window}, {result.steps_averaged} of {expected} steps averaged"),
        ("step time", f"{result.step_time_s:.3f} s"),
        ("throughput", f"{tokens} tokens/s, {result.samples_per_s:,.2f} samples/s"),
        ("TFLOPS/GPU", f"{result.tflops_per_gpu:.1f} ({result.gpus} GPUs, global batch {result.global_batch_size})"),
        (
            "MFU",
            f"{result.mfu:.2%} of {result.peak_tflops:g} TFLOPS "
            f"({result.accelerator} dense {result.precision.value} peak)",
        ),
    ]
    return "\n".join(f"{name:<12} {value}" for name, value in rows)


def _goodput_table(report: GoodputReport) -> str:
    saved = "none" if report.max_saved_step is None else str(report.max_saved_step)
    rows = [
        ("run", report.run),
        ("events", f"{report.events}, {report.first_event.isoformat()} → {report.last_event.isoformat()}"),
        ("runtime", f"{report.total_runtime_s:,.0f} s ({report.total_runtime_s / 3600:.2f} h)"),
        ("progress", f"{report.step_progress} steps (from step {report.start_step} to saved step {saved})"),
        ("effective", f"{report.effective_time_s:,.0f} s at {report.reference_step_time_s:g} s per step"),
        ("goodput", f"{report.goodput_percent:.1f} %"),
        ("starts", f"{report.job_starts} ({report.restarts} restart{'' if report.restarts == 1 else 's'})"),
        ("checkpoints", f"{report.checkpoints_saved} saved, {report.checkpoints_loaded} loaded"),
    ]
    return "\n".join(f"{name:<12} {value}" for name, value in rows)


def _metrics(args: argparse.Namespace) -> None:
    window = StepRange(args.start_step, args.end_step)
    log = read_log(args.log, window)
    result = _run_metrics(args, log, window)
    print(json.dumps(result.as_json(), indent=2) if args.json else _metrics_table(log, result))


def _plot(args: argparse.Namespace) -> None:
    window = StepRange(args.start_step, args.end_step)
    throughput = (args.gpus, args.global_batch_size, args.accelerator, args.precision)
    if any(value is not None for value in throughput) and None in throughput:
        raise AnalysisError(
            "plot shows TFLOPS/GPU and MFU only with all of --gpus, --global-batch-size, --accelerator and --precision"
        )
    # Deferred: matplotlib takes longer to import than `metrics` takes to run.
    from analysis.plot import build_figure, write_png  # noqa: PLC0415

    log = read_log(args.log)
    result = None if throughput[0] is None else _run_metrics(args, log, window)
    write_png(build_figure(log, window, result), args.out)
    print(f"wrote {args.out}")


def _goodput(args: argparse.Namespace) -> None:
    report = compute_goodput(read_events(args.events), args.reference_step_time, args.run)
    print(json.dumps(report.as_json(), indent=2) if args.json else _goodput_table(report))


_COMMANDS = {"metrics": _metrics, "plot": _plot, "goodput": _goodput}


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        _COMMANDS[args.command](args)
    except AnalysisError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    return 0


if __name__ == "__main__":
    sys.exit(main())
