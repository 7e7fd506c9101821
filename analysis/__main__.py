"""`python -m analysis {metrics,plot,goodput,nccl,stragglers}`: the command line.

Exit codes: 0 done; 1 FAIL, its report printed (`nccl`: wrong data or a bandwidth below the
pass mark; `metrics` and `plot`: a run whose loss turned NaN or infinite); 2 bad input (usage
errors included): then exactly one line, `error: <message>`, on stderr and nothing on stdout.
A run that does not fail on its input may print `note:` and `warning:` lines on stderr
(repeated steps, a sequence length taken from the log), never when it does.

`plot` validates exactly as `metrics` does: the same reading of the log, the same step-time
checks over the window and, when the throughput options are given, the same computation.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from analysis.badput import badput, badput_table
from analysis.errors import AnalysisError
from analysis.goodput import GoodputReport, compute_goodput, read_event_log
from analysis.logs import LOSS, StepRange, TrainingLog, read_log
from analysis.metrics import (
    RunMetrics,
    average_step_time,
    check_against_record,
    compute,
    model_flops,
    non_finite,
    sequence_length_for,
)
from analysis.plan import RunPlan, against, read_plan
from analysis.podstarts import admissions, node_pod_starts, read_pod_events
from analysis.startup import AttemptStartup, attempt_starts, read_startup_records, startup
from analysis.stragglers import find_stragglers, read_reports
from analysis.stragglers import report_table as stragglers_table
from facts.machines import ACCELERATORS, Precision
from facts.models import MODELS
from facts.nccl import BENCHMARKS, PUBLISHED

if TYPE_CHECKING:
    from analysis.nccl import Expectation

EXIT_FAIL = 1
EXIT_BAD_INPUT = 2


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {value}")
    return value


def _step(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a step number, 0 or more, got {value}")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text}")
    return value


def _expectation(text: str) -> Expectation:
    from analysis.nccl import expectation  # noqa: PLC0415 - deferred, as in `_nccl`

    try:
        return expectation(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _png_path(text: str) -> Path:
    path = Path(text)
    if path.suffix.lower() != ".png":
        raise argparse.ArgumentTypeError(f"the plot is a PNG: the file name must end in .png, got {text!r}")
    return path


class _Parser(argparse.ArgumentParser):
    """Usage errors as one `error:` line (exit 2), like every other bad input."""

    def error(self, message: str) -> NoReturn:
        one_line = " ".join(message.split())
        self.exit(EXIT_BAD_INPUT, f"error: {one_line} (see {self.prog} --help)\n")


def _add_window(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--start-step", type=_step, default=10, metavar="N", help="first step averaged (default 10)")
    parser.add_argument(
        "--end-step", type=_step, default=30, metavar="N", help="last step averaged, inclusive (default 30)"
    )


def _window(args: argparse.Namespace) -> StepRange:
    """The window the options ask for; `average_step_time` checks it lies within the log."""
    if args.end_step < args.start_step:
        raise AnalysisError(
            f"--end-step {args.end_step} is before --start-step {args.start_step}; the window is the steps "
            "from --start-step to --end-step, both included"
        )
    return StepRange(args.start_step, args.end_step)


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
    parser = _Parser(
        prog="python -m analysis", description="Training analytics for NeMo runs. Exit code 2 means bad input."
    )
    commands = parser.add_subparsers(dest="command", required=True)

    metrics = commands.add_parser("metrics", help="step time, tokens/s, TFLOPS per GPU and MFU from a NeMo log")
    metrics.add_argument(
        "--log", type=Path, required=True, metavar="FILE", help="DLLogger JSON lines or a NeMo text log"
    )
    _add_window(metrics)
    _add_throughput(metrics, required=False)
    metrics.add_argument(
        "--plan",
        type=Path,
        metavar="FILE",
        help="the stack's outputs (pulumi stack output --json, or a render's outputs.json) or a run's plan: the "
        "throughput options' values and the step times the run is held to, predicted and published",
    )
    metrics.add_argument("--run", metavar="NAME", help="the run of --plan's outputs (default: their only one)")
    metrics.add_argument("--json", action="store_true", help="print one JSON object")

    plot = commands.add_parser("plot", help="loss and step time against step, as a PNG")
    plot.add_argument("--log", type=Path, required=True, metavar="FILE", help="DLLogger JSON lines or a NeMo text log")
    plot.add_argument("--out", type=_png_path, required=True, metavar="FILE.png", help="PNG file to write")
    _add_window(plot)
    _add_throughput(plot, required=False)

    goodput = commands.add_parser(
        "goodput", help="goodput of a run from its event log: the gpu-recipes resiliency-metrics figures"
    )
    goodput.add_argument(
        "--events",
        type=Path,
        required=True,
        metavar="FILE",
        help="events.jsonl written by the training pods, or a Cloud Logging export of the events (JSON)",
    )
    goodput.add_argument(
        "--reference-step-time",
        type=float,
        required=True,
        metavar="SECONDS",
        help="step time of an undisturbed run, e.g. from `metrics`",
    )
    goodput.add_argument("--run", metavar="NAME", help="run to report when the file holds several")
    goodput.add_argument(
        "--log",
        type=Path,
        metavar="FILE",
        help="the run's DLLogger log: adds each attempt's time to its first step and to steady state",
    )
    goodput.add_argument(
        "--pod-events",
        type=Path,
        metavar="FILE",
        help="with --log: the Kubernetes events of the run's namespace (`kubectl get events -o json`, or "
        "their Cloud Logging export): splits each wait between attempts into queue, nodes, image pull, "
        "preflight and pod start",
    )
    goodput.add_argument("--json", action="store_true", help="print one JSON object")

    nccl = commands.add_parser(
        "nccl", help="bus bandwidth from nccl-tests output, against the published figure of a GPUDirect flavour"
    )
    nccl.add_argument(
        "--log", type=Path, required=True, metavar="FILE", help="output of all_gather_perf etc. (kubectl logs)"
    )
    nccl.add_argument(
        "--expect",
        type=_expectation,
        metavar="FLAVOUR|MACHINE",
        help=f"judge the bandwidth by the published figure of a GPUDirect flavour ({', '.join(PUBLISHED)}) or of "
        "a machine type's (exit 1 below it); without it there is no bandwidth verdict",
    )
    nccl.add_argument(
        "--collective",
        choices=BENCHMARKS,
        help="the benchmark, for tests the log does not name (nccl-tests before 2.16 print no name); "
        "else the file name, when it is a fabric check's <collective>.log",
    )
    nccl.add_argument("--json", action="store_true", help="print one JSON object")

    stragglers = commands.add_parser(
        "stragglers", help="slow ranks and their nodes from Megatron Core's straggler reports (stragglers: true)"
    )
    stragglers.add_argument(
        "--log", type=Path, required=True, metavar="FILE", help="rank 0's output: the run's logs/node-0.log"
    )
    stragglers.add_argument(
        "--gpus-per-node",
        type=_positive_int,
        required=True,
        metavar="N",
        help="GPUs per node of the run's machine (8 on A3 and A4, 4 on A4X)",
    )
    stragglers.add_argument("--json", action="store_true", help="print one JSON object")
    return parser


def _run_metrics(args: argparse.Namespace, log: TrainingLog, window: StepRange, notes: list[str]) -> RunMetrics:
    """The throughput figures, refusing options the log's PARAMETER record contradicts."""
    check_against_record(log.parameters, gpus=args.gpus, global_batch_size=args.global_batch_size)
    seq_length, warning = sequence_length_for(log.parameters, model=args.model, seq_length=args.seq_length)
    if warning:
        notes.append(f"warning: {warning}")
    model = model_flops(
        log.parameters,
        model=args.model,
        flops_per_sample=args.model_flops_per_sample,
        seq_length=seq_length,
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


def _log_notes(log: TrainingLog, window: StepRange, used: str) -> list[str]:
    notes = []
    if log.repeated_steps:
        inside = sum(1 for step in log.repeated_steps if step in window)
        count = len(log.repeated_steps)
        notes.append(
            f"note: {log.path} logs {count} step{'' if count == 1 else 's'} more than once "
            f"({_ranges(log.repeated_steps)}; a restarted run repeats the steps after its checkpoint): "
            f"the last attempt of each is {used}; {inside} of them in the window {window}"
        )
    if log.unreadable_lines:
        count = len(log.unreadable_lines)
        notes.append(
            f"note: {log.path} has {count} unreadable record{'' if count == 1 else 's'} outside the window "
            f"(line {_ranges(log.unreadable_lines)}), not drawn; metrics does not read them"
        )
    return notes


def _ranges(numbers: Sequence[int], limit: int = 5) -> str:
    """`20–25, 30, 40–42`: sorted numbers as ranges, the first `limit` of them."""
    spans: list[list[int]] = []
    for n in numbers:
        if spans and n == spans[-1][1] + 1:
            spans[-1][1] = n
        else:
            spans.append([n, n])
    shown = [f"{a}–{b}" if a != b else str(a) for a, b in spans[:limit]]
    return ", ".join(shown) + (", …" if len(spans) > limit else "")


def _metrics_table(log: TrainingLog, result: RunMetrics) -> str:
    window = result.window
    expected = window.end - window.start + 1
    tokens = f"{result.tokens_per_s:,.0f}" if result.tokens_per_s is not None else "n/a (pass --seq-length)"
    seq = result.model.seq_length if result.model.seq_length is not None else "unknown"
    rows = [
        ("log", f"{log.path} ({log.format.value}, steps {log.steps_in_file})"),
        ("run", _run_status(log)),
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
    if result.tflops_per_gpu_causal is not None and result.mfu_causal is not None:
        rows.append(
            (
                "as NVIDIA",
                f"{result.tflops_per_gpu_causal:.1f} TFLOPS/GPU, MFU {result.mfu_causal:.2%} "
                "(attention counted over the causal half, as NVIDIA's published tables)",
            )
        )
    return "\n".join(f"{name:<12} {value}" for name, value in rows)


def _run_status(log: TrainingLog) -> str:
    if log.loss_failure is not None:
        step, loss = log.loss_failure
        return f"FAILED at step {step}: {LOSS} is {non_finite(loss)}"
    if log.loss_logged:
        return f"{LOSS} finite at every step that logs it"
    return f"no {LOSS} in the log: divergence not checked"


def _goodput_table(report: GoodputReport) -> str:
    """The calculator's table (its labels, its rounding: hours and percent to 2 decimals), then
    where the figures come from."""

    def optional(value: int | None) -> str:
        return "none" if value is None else str(value)

    rows = [
        ("Total Events", str(report.total_events)),
        ("Job Started Count", str(report.job_starts)),
        ("Checkpoints Loaded", str(report.checkpoints_loaded)),
        ("Checkpoints Saved", str(report.checkpoints_saved)),
        ("Total Runtime (hours)", f"{report.total_runtime_s / 3600:.2f}"),
        ("Min Loaded Step", optional(report.min_loaded_step)),
        ("Max Saved Step", optional(report.max_saved_step)),
        ("Step Difference", optional(report.step_difference)),
        ("Effective Computation Time (hours)", f"{report.effective_time_s / 3600:.2f}"),
        ("Goodput Percentage", f"{report.goodput_percent:.2f}%"),
    ]
    restarts = f"{report.restarts} restart{'' if report.restarts == 1 else 's'}"
    context = [
        f"run {report.run}: {report.events} event records, "
        f"{report.first_event.isoformat()} → {report.last_event.isoformat()}, {restarts}",
        f"runtime {report.total_runtime_s:,.0f} s; effective {report.step_progress} steps × "
        f"{report.reference_step_time_s:g} s = {report.effective_time_s:,.0f} s",
    ]
    return "\n".join([*(f"{name:<36} {value}" for name, value in rows), "", *context])


def _json(report: dict[str, Any]) -> str:
    try:
        return json.dumps(report, indent=2, allow_nan=False)
    except ValueError:  # the checks refuse non-finite figures first; this is the last guard
        raise AnalysisError("a figure is not a finite number; nothing printed") from None


_THROUGHPUT = {"gpus": "--gpus", "global_batch_size": "--global-batch-size", "accelerator": "--accelerator",
               "precision": "--precision"}  # fmt: skip


def _from_plan(args: argparse.Namespace) -> RunPlan | None:
    """The run's plan, whose values fill the throughput options left out (an option given must
    agree with it), and later the model where the log records none. Without a plan, all four
    options."""
    if args.plan is None:
        if args.run is not None:
            raise AnalysisError("--run names a run of --plan's outputs: give --plan too")
        missing = [flag for name, flag in _THROUGHPUT.items() if getattr(args, name) is None]
        if missing:
            raise AnalysisError(f"metrics needs {', '.join(missing)} (or --plan FILE, the run's plan)")
        return None
    plan = read_plan(args.plan, args.run)
    values = {"gpus": plan.gpus, "global_batch_size": plan.global_batch_size, "accelerator": plan.accelerator,
              "precision": plan.precision.value}  # fmt: skip
    for name, value in values.items():
        given = getattr(args, name)
        if isinstance(given, str):
            given = given.lower()
        if given is not None and given != value:
            raise AnalysisError(f"{_THROUGHPUT[name]} {given} disagrees with the plan's {value} ({plan.path})")
        setattr(args, name, value)
    return plan


def _metrics(args: argparse.Namespace) -> tuple[str, list[str], int]:
    window = _window(args)
    plan = _from_plan(args)
    log = read_log(args.log, window)
    # The plan's model and sequence where the log records no shape of its own.
    if plan and log.parameters is None and args.model is None and args.model_flops_per_sample is None:
        args.model = plan.model if plan.model in MODELS else None
        if args.model is not None and args.seq_length is None:
            args.seq_length = plan.sequence_length
    notes = _log_notes(log, window, "averaged")
    result = _run_metrics(args, log, window, notes)
    references = against(plan, result.step_time_s) if plan else []
    code = EXIT_FAIL if log.loss_failure else 0
    if args.json:
        report = result.as_json()
        if plan is not None:
            report["against"] = {r.what: r.as_json() for r in references}
        return _json(report), notes, code
    table = _metrics_table(log, result)
    if plan is not None:
        lines = [f"{'against':<12} {r.sentence()}" for r in references] or [
            f"{'against':<12} nothing: the plan holds no predicted or published step time"
        ]
        table = "\n".join([table, *lines])
    return table, notes, code


_MODEL_OPTIONS = ("model", "model_flops_per_sample", "seq_length", "vocab_size")


def _plot(args: argparse.Namespace) -> tuple[str, list[str], int]:
    window = _window(args)
    throughput = (args.gpus, args.global_batch_size, args.accelerator, args.precision)
    if any(value is not None for value in throughput) and None in throughput:
        raise AnalysisError(
            "plot shows TFLOPS/GPU and MFU only with all of --gpus, --global-batch-size, --accelerator and --precision"
        )
    if throughput[0] is None and any(getattr(args, name) is not None for name in _MODEL_OPTIONS):
        raise AnalysisError(
            "plot uses --model, --model-flops-per-sample, --seq-length and --vocab-size only with "
            "--gpus, --global-batch-size, --accelerator and --precision"
        )
    _check_plot_target(args.out, args.log)
    # Deferred: matplotlib takes longer to import than `metrics` takes to run.
    from analysis.plot import build_figure, write_png  # noqa: PLC0415

    # The records outside the window too, to draw them; the checks are those of `metrics`.
    log = read_log(args.log, window, beyond_window=True)
    notes = _log_notes(log, window, "drawn")
    if throughput[0] is None:
        average_step_time(log, window)
        result = None
    else:
        result = _run_metrics(args, log, window, notes)
    write_png(build_figure(log, window, result), args.out)
    if log.loss_failure is None:
        return f"wrote {args.out}", notes, 0
    return f"wrote {args.out}\nrun {_run_status(log)}", notes, EXIT_FAIL


def _goodput(args: argparse.Namespace) -> tuple[str, list[str], int]:
    if args.pod_events is not None and args.log is None:
        raise AnalysisError("--pod-events: needs --log, whose badput it splits")
    log = read_event_log(args.events)
    report = compute_goodput(log.events, args.reference_step_time, args.run)
    notes = []
    if log.skipped_entries:
        count = log.skipped_entries
        notes.append(
            f"note: {log.path}: {count} log entr{'y' if count == 1 else 'ies'} without a goodput event skipped"
        )
    if log.duplicate_entries:
        count = log.duplicate_entries
        notes.append(
            f"note: {log.path}: {count} log entr{'y' if count == 1 else 'ies'} exported more than once "
            "(same logName and insertId) counted once"
        )
    if report.min_loaded_step is None:
        notes.append(
            f"warning: run {report.run!r} has no checkpoint_loaded event: like the gpu-recipes calculator, "
            "goodput counts no progress without one (the pods write one at every start, step 0 for a fresh run)"
        )
    if args.log is None:
        return (_json(report.as_json()) if args.json else _goodput_table(report)), notes, 0
    records, loads = read_startup_records(args.log)
    starts = attempt_starts(log.events, report.run)
    attempts = startup(starts, records)
    kube_events = read_pod_events(args.pod_events) if args.pod_events else []
    node_pods = node_pod_starts(kube_events, report.run)
    if args.pod_events and not node_pods:
        notes.append(f"note: {args.pod_events}: no event of a pod of run {report.run!r}'s node 0: waiting not split")
    if early := sum(load.time < starts[0] for load in loads):
        notes.append(
            f"note: {args.log}: {early} checkpoint load record{'s' if early > 1 else ''} logged before the run's "
            "first job_started: not counted (a log of an earlier run?)"
        )
    admitted = admissions(kube_events, report.run)
    lost = badput(log.events, records, report, node_pods=node_pods, admitted=admitted, loads=loads)
    if args.json:
        return (
            _json({**report.as_json(), "startup": [a.as_json() for a in attempts], "badput": lost.as_json()}),
            notes,
            0,
        )
    return f"{_goodput_table(report)}\n\n{_startup_table(attempts)}\n\n{badput_table(lost)}", notes, 0


def _startup_table(attempts: list[AttemptStartup]) -> str:
    """Each attempt's start-up (analysis.startup): seconds to its first step and to steady state."""

    def seconds(value: float | None) -> str:
        return "-" if value is None else f"{value:,.0f} s"

    lines = [
        f"{'Attempt':<8} {'Started':<26} {'First step':>10} {'To first step':>14} {'Steady from':>12} {'To steady':>10}"
    ]
    for a in attempts:
        first = "-" if a.first_step is None else str(a.first_step)
        steady = "-" if a.steady_step is None else str(a.steady_step)
        lines.append(
            f"{a.attempt:<8} {a.started.isoformat():<26} {first:>10} {seconds(a.to_first_step_s):>14} "
            f"{steady:>12} {seconds(a.to_steady_s):>10}"
        )
    return "\n".join(lines)


def _nccl(args: argparse.Namespace) -> tuple[str, list[str], int]:
    # Deferred, like matplotlib: the other commands need none of it.
    from analysis.nccl import judge, read_nccl_log, report_json, report_table  # noqa: PLC0415

    tests = read_nccl_log(args.log, args.collective)
    verdict = judge(tests, args.expect)
    output = _json(report_json(verdict)) if args.json else report_table(verdict)
    return output, [], EXIT_FAIL if verdict.failures else 0


def _stragglers(args: argparse.Namespace) -> tuple[str, list[str], int]:
    found = find_stragglers(read_reports(args.log), args.gpus_per_node)
    return (_json(found.as_json()) if args.json else stragglers_table(found)), [], 0


_COMMANDS = {"metrics": _metrics, "plot": _plot, "goodput": _goodput, "nccl": _nccl, "stragglers": _stragglers}


# The first bytes of every PNG file (PNG specification, 5.2 "PNG signature").
_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _check_plot_target(out: Path, log: Path) -> None:
    """`--out` replaces only a plot: never the log it reads, nor a file that is not a PNG."""
    if out.exists() and log.exists() and out.resolve() == log.resolve():
        raise AnalysisError(f"--out {out} is the log being read: write the plot to another file")
    if out.is_dir():
        raise AnalysisError(f"--out {out} is a folder: name the PNG file to write")
    if out.exists():
        with out.open("rb") as existing:
            if existing.read(len(_PNG_SIGNATURE)) != _PNG_SIGNATURE:
                raise AnalysisError(f"--out {out} exists and is not a PNG: the plot replaces only a plot")


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        output, notes, code = _COMMANDS[args.command](args)
    except AnalysisError as e:
        print(f"error: {' '.join(str(e).split())}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except OverflowError as e:  # the checks catch overflows first; this keeps any other one to one line
        print(f"error: a figure overflows ({e}); the input holds numbers beyond any real run", file=sys.stderr)
        return EXIT_BAD_INPUT
    for note in notes:
        print(note, file=sys.stderr)
    print(output)
    return code


if __name__ == "__main__":
    sys.exit(main())
