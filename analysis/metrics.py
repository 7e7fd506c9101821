"""Throughput of a training run: mean step time over a window, tokens/s, TFLOPS per GPU, MFU.

    step time      = mean of `train_step_timing in s` over steps start..end (both inclusive)
    TFLOPS per GPU = model FLOPs per sample × global batch size / step time / GPUs / 1e12
    MFU            = TFLOPS per GPU / the accelerator's dense peak at the run's precision
    (both also as NVIDIA's tables count, attention's scores over the causal half, where the
    model's shape is known)

Model FLOPs per sample come from the model's shape through
`components.models.Architecture.flops_per_sample` (Megatron's GPT count, and the Llama form
with grouped-query attention and SwiGLU), never from a table of per-model constants. The
FLOPs come from `--model-flops-per-sample` or a catalog `--model` (never both), else from
the shape in the DLLogger PARAMETER record; a `--model` whose shape the record contradicts
is refused.

Results that cannot be physical are refused (AnalysisError), never printed:

- every step time in the window must be a positive, finite number of seconds, at most a year;
- tokens/s, TFLOPS per GPU and MFU must be finite (an overflow is refused, not printed as inf);
- MFU must not exceed 100 %: no run beats its accelerator's peak.

A run whose loss turns NaN or infinite failed at that step (`TrainingLog.loss_failure`):
its figures are still computed, and the result carries the failure.

`check_against_record` refuses a `--global-batch-size` or `--gpus` the log's PARAMETER record
contradicts; `sequence_length_for` takes the record's sequence length over a catalog model's.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from analysis.errors import AnalysisError
from analysis.logs import LOSS, STEP_TIME, StepRange, TrainingLog
from facts.machines import ACCELERATORS, Accelerator, Precision
from facts.models import MODELS, Architecture, ModelSpec, model_spec

# A step time above this is not a training step (and sums of such values overflow).
MAX_STEP_TIME_S = 365.25 * 24 * 3600

# Tokenizers whose vocabulary a catalog model already records: (pattern, catalog model).
_TOKENIZER_VOCABS = (
    (re.compile(r"gpt-?2", re.IGNORECASE), "gpt3-175b"),
    (re.compile(r"llama[-_ ]?3(?!\d)", re.IGNORECASE), "llama3.1-8b"),
)


@dataclass(frozen=True)
class ModelFlops:
    """FLOPs to train on one sample, and where they came from."""

    flops_per_sample: float
    # Tokens per sample; None when only a FLOPs figure was given and nothing says the length.
    seq_length: int | None
    source: str
    architecture: Architecture | None = None
    # The same with attention's scores over the causal half, as NVIDIA's published TFLOPS count
    # them (Architecture.flops_per_sample causal); None when only a FLOPs figure was given.
    causal_flops_per_sample: float | None = None

    def describe(self) -> str:
        a = self.architecture
        if a is None:
            return f"{self.flops_per_sample:.4e} FLOPs per sample ({self.source})"
        style = "Llama-style" if a.gated_mlp or a.kv_heads != a.heads else "GPT-style"
        return (
            f"{style}: {a.layers} layers, hidden {a.hidden}, {a.heads} heads ({a.kv_heads} KV), "
            f"FFN {a.ffn_hidden}{' SwiGLU' if a.gated_mlp else ''}, vocab {a.vocab_size} ({self.source})"
        )


@dataclass(frozen=True)
class RunMetrics:
    step_time_s: float
    steps_averaged: int
    window: StepRange
    samples_per_s: float
    tokens_per_s: float | None
    tflops_per_gpu: float
    mfu: float
    peak_tflops: float
    model: ModelFlops
    # TFLOPS per GPU and MFU as NVIDIA's tables count (causal attention), where the shape is known.
    tflops_per_gpu_causal: float | None
    mfu_causal: float | None
    global_batch_size: int
    gpus: int
    accelerator: str
    precision: Precision
    # Steps of the window a restarted run logged more than once (their last attempt counted),
    # and how many steps the whole log repeats.
    duplicate_steps: tuple[int, ...] = ()
    duplicate_steps_in_log: int = 0
    # Where the run failed (`TrainingLog.loss_failure`), anywhere in the log.
    loss_failure: tuple[int, float] | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "step_time_s": self.step_time_s,
            "tokens_per_s": self.tokens_per_s,
            "samples_per_s": self.samples_per_s,
            "tflops_per_gpu": self.tflops_per_gpu,
            "mfu": self.mfu,
            "tflops_per_gpu_causal": self.tflops_per_gpu_causal,
            "mfu_causal": self.mfu_causal,
            "steps_averaged": self.steps_averaged,
            "window": {"start_step": self.window.start, "end_step": self.window.end},
            "model_flops_per_sample": self.model.flops_per_sample,
            "model_source": self.model.source,
            "seq_length": self.model.seq_length,
            "peak_tflops": self.peak_tflops,
            "global_batch_size": self.global_batch_size,
            "gpus": self.gpus,
            "accelerator": self.accelerator,
            "precision": self.precision.value,
            "duplicate_steps": list(self.duplicate_steps),
            "duplicate_steps_in_log": self.duplicate_steps_in_log,
            "failed_at_step": None if self.loss_failure is None else self.loss_failure[0],
            "failure": None if self.loss_failure is None else loss_failure_text(self.loss_failure),
        }


def loss_failure_text(failure: tuple[int, float]) -> str:
    """`reduced_train_loss is NaN at step 35`."""
    step, loss = failure
    return f"{LOSS} is {non_finite(loss)} at step {step}"


def non_finite(value: float) -> str:
    """What a value that is not finite is, in a message."""
    return "NaN" if math.isnan(value) else "infinite" if value > 0 else "minus infinite"


def accelerator(name: str) -> Accelerator:
    try:
        return ACCELERATORS[name.lower()]
    except KeyError:
        raise AnalysisError(f"unknown accelerator {name!r}; known: {', '.join(ACCELERATORS)}") from None


def average_step_time(log: TrainingLog, window: StepRange) -> tuple[float, int]:
    """Mean step time over the window's steps that logged one, and how many did.

    The one check of a log's step times, shared by `metrics` and `plot`: the window must lie
    within the log's steps, and every step time in it must be a positive, finite number of
    seconds, at most `MAX_STEP_TIME_S`.
    """
    check_window(log, window)
    timed = [(step, data[STEP_TIME]) for step, data in log.records.items() if step in window and STEP_TIME in data]
    if not timed:
        has = f"steps {log.steps_in_file}" if log.steps_in_file else "no steps"
        raise AnalysisError(f"no '{STEP_TIME}' values for steps {window} in {log.path} (the log has {has})")
    for step, seconds in timed:
        if math.isnan(seconds):
            problem = "is not a number (NaN)"
        elif math.isinf(seconds):
            problem = f"is {'' if seconds > 0 else 'minus '}infinite"
        elif seconds <= 0:
            problem = f"is {seconds:g} s; it must be positive"
        elif seconds > MAX_STEP_TIME_S:
            problem = f"is {seconds:g} s, more than a year: not a real step"
        else:
            continue
        raise AnalysisError(f"{log.path}: the '{STEP_TIME}' of step {step} {problem}")
    times = [seconds for _, seconds in timed]
    return statistics.fmean(times), len(times)


def check_window(log: TrainingLog, window: StepRange) -> None:
    """Refuse a window that reaches outside the log's steps: what it asks for was not logged."""
    steps = log.steps_in_file
    if steps is None:
        return
    if window.start > steps.end:
        raise AnalysisError(
            f"--start-step {_n(window.start)} is past the log's last step {steps.end} (the log has steps {steps})"
        )
    if window.start < steps.start:
        raise AnalysisError(
            f"--start-step {window.start} is before the log's first step {steps.start} (the log has steps {steps})"
        )
    if window.end > steps.end:
        raise AnalysisError(
            f"--end-step {_n(window.end)} is past the log's last step {steps.end} (the log has steps {steps}); "
            f"the window must lie within them"
        )


def model_flops(
    parameters: Mapping[str, Any] | None,
    *,
    model: str | None = None,
    flops_per_sample: float | None = None,
    seq_length: int | None = None,
    vocab_size: int | None = None,
) -> ModelFlops:
    """Model FLOPs per sample from a figure or a catalog model (one of them), else the log's config.

    `seq_length` and `vocab_size` override what the catalog or the log says. A catalog model
    the log's config contradicts is refused: the config is what ran.
    """
    if seq_length is not None and seq_length <= 0:
        raise AnalysisError(f"sequence length must be positive, got {seq_length}")
    if vocab_size is not None and vocab_size <= 0:
        raise AnalysisError(f"vocabulary size must be positive, got {vocab_size}")
    if flops_per_sample is not None:
        if model is not None:
            raise AnalysisError(
                "--model and --model-flops-per-sample both give the model FLOPs; pass one (--seq-length says "
                "how long a sample is for tokens/s)"
            )
        if vocab_size is not None:
            raise AnalysisError(
                "--vocab-size has no effect with --model-flops-per-sample, which gives the FLOPs themselves; "
                "leave one out"
            )
        if not math.isfinite(flops_per_sample) or flops_per_sample <= 0:
            raise AnalysisError(f"model FLOPs per sample must be a positive number, got {flops_per_sample}")
        if seq_length is None and parameters:
            seq_length = _Config(parameters).seq_length()
        return ModelFlops(flops_per_sample, seq_length, "--model-flops-per-sample")
    if model is not None:
        spec = _catalog(model)
        if parameters:
            _check_model_against_record(spec, _Config(parameters))
        architecture = spec.architecture
        if vocab_size is not None:
            architecture = replace(architecture, vocab_size=vocab_size)
        length = seq_length or spec.recipe.seq_length
        return ModelFlops(
            _flops(architecture, length),
            length,
            f"catalog model {spec.name}",
            architecture,
            _flops(architecture, length, causal=True),
        )
    if not parameters:
        raise AnalysisError(
            "the log has no model configuration (no DLLogger PARAMETER record); pass --model "
            f"({', '.join(MODELS)}) or --model-flops-per-sample"
        )
    architecture, length = _Config(parameters).architecture(seq_length, vocab_size)
    return ModelFlops(
        _flops(architecture, length),
        length,
        "DLLogger PARAMETER record",
        architecture,
        _flops(architecture, length, causal=True),
    )


def _check_model_against_record(spec: ModelSpec, config: _Config) -> None:
    """Refuse a catalog model whose shape the record's contradicts (the sequence length may differ:
    `sequence_length_for` takes the record's, and the vocabulary is padded)."""
    a = spec.architecture
    shape = {
        "num_layers": a.layers,
        "hidden_size": a.hidden,
        "num_attention_heads": a.heads,
        "num_query_groups": a.kv_heads,
        "ffn_hidden_size": a.ffn_hidden,
    }
    contradicted = [
        f"{key} {int(logged)} ({spec.name}: {catalog})"
        for key, catalog in shape.items()
        for logged in [config.get(key)]
        if _is_positive_int(logged) and int(logged) != catalog
    ]
    if contradicted:
        raise AnalysisError(
            f"--model {spec.name} contradicts the log's DLLogger PARAMETER record: {', '.join(contradicted)}; "
            "leave --model out to use the record's shape"
        )


def _flops(architecture: Architecture, seq_length: int, causal: bool = False) -> float:
    """FLOPs per sample, refusing a shape so large that the count overflows."""
    try:
        flops = architecture.flops_per_sample(seq_length, causal=causal)
    except OverflowError:
        flops = math.inf
    if not math.isfinite(flops):
        raise AnalysisError(
            f"model FLOPs per sample overflow for {_n(architecture.layers)} layers, hidden "
            f"{_n(architecture.hidden)}, vocabulary {_n(architecture.vocab_size)} and sequence length "
            f"{_n(seq_length)}: no real model is that large"
        )
    return flops


def _catalog(name: str) -> ModelSpec:
    try:
        return model_spec(name)
    except ValueError as e:
        raise AnalysisError(str(e)) from None


class _Config:
    """The model settings inside a flattened NeMo config (`cfg/num_layers`, `cfg/tokenizer/type`, ...)."""

    def __init__(self, parameters: Mapping[str, Any]) -> None:
        self._parameters = parameters

    def get(self, *names: str) -> Any:
        """The first non-null value among `names`; each matches a key equal to it or ending in `/name`,
        the shallowest such key winning (`cfg/seq_length` before `cfg/data/seq_length`)."""
        for name in names:
            keys = [k for k in self._parameters if k == name or k.endswith("/" + name)]
            for key in sorted(keys, key=lambda k: k.count("/")):
                if self._parameters[key] is not None:
                    return self._parameters[key]
        return None

    def seq_length(self) -> int | None:
        value = self.get("encoder_seq_length", "seq_length")
        return int(value) if _is_positive_int(value) else None

    def vocab_size(self) -> int | None:
        value = self.get("padded_vocab_size", "vocab_size")
        if _is_positive_int(value):
            return int(value)
        names = " ".join(str(self.get(key) or "") for key in ("tokenizer/type", "tokenizer/model"))
        for pattern, model in _TOKENIZER_VOCABS:
            if pattern.search(names):
                return MODELS[model].architecture.vocab_size
        return None

    def gated_mlp(self) -> bool:
        if self.get("gated_linear_unit") is True:
            return True
        return any(
            "glu" in str(value).lower()
            for key, value in self._parameters.items()
            if key.rsplit("/", 1)[-1] == "activation"
        )

    def architecture(self, seq_length: int | None, vocab_size: int | None) -> tuple[Architecture, int]:
        vocab_key = "vocabulary size (padded_vocab_size, vocab_size or a known tokenizer)"
        wanted = {
            "num_layers": self.get("num_layers"),
            "hidden_size": self.get("hidden_size"),
            "num_attention_heads": self.get("num_attention_heads"),
            "encoder_seq_length or seq_length": seq_length or self.seq_length(),
            vocab_key: vocab_size or self.vocab_size(),
        }
        missing = [name for name, value in wanted.items() if not _is_positive_int(value)]
        if missing:
            also = " (or add --vocab-size)" if vocab_key in missing else ""
            raise AnalysisError(
                f"the DLLogger PARAMETER record lacks {', '.join(missing)}; pass --model "
                f"({', '.join(MODELS)}) or --model-flops-per-sample{also}"
            )
        layers, hidden, heads, length, vocab = (int(v) for v in wanted.values())
        optional = {
            "num_query_groups": self.get("num_query_groups") or heads,
            "ffn_hidden_size": self.get("ffn_hidden_size") or 4 * hidden,
        }
        for name, value in optional.items():
            if not _is_positive_int(value):
                raise AnalysisError(f"the DLLogger PARAMETER record has an invalid {name}: {value!r}")
        kv_heads, ffn = (int(v) for v in optional.values())
        if hidden % heads or heads % kv_heads:
            raise AnalysisError(
                f"the DLLogger PARAMETER record's shape is inconsistent: hidden_size {hidden}, "
                f"num_attention_heads {heads}, num_query_groups {kv_heads}"
            )
        positions = self.get("max_position_embeddings")
        architecture = Architecture(
            layers=layers,
            hidden=hidden,
            heads=heads,
            kv_heads=kv_heads,
            ffn_hidden=ffn,
            vocab_size=vocab,
            max_positions=int(positions) if _is_positive_int(positions) else length,
            gated_mlp=self.gated_mlp(),
        )
        return architecture, length


def _n(value: int | None) -> str:
    """An integer for a message: absurd ones (a 400-digit --gpus) by their length."""
    text = str(value)
    return text if len(text) <= 15 else f"a {len(text)}-digit number"


def _is_positive_int(value: object) -> bool:
    """True for 12 and 12.0 (JSON may carry either), false for bools, nulls and strings."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return value > 0 and float(value).is_integer()


def compute(
    log: TrainingLog,
    window: StepRange,
    model: ModelFlops,
    *,
    gpus: int,
    global_batch_size: int,
    accelerator_name: str,
    precision: Precision,
) -> RunMetrics:
    if gpus <= 0:
        raise AnalysisError(f"the number of GPUs must be positive, got {gpus}")
    if global_batch_size <= 0:
        raise AnalysisError(f"the global batch size must be positive, got {global_batch_size}")
    chip = accelerator(accelerator_name)
    try:
        peak = chip.peak_tflops(precision)
    except ValueError as e:
        raise AnalysisError(str(e)) from None
    step_time, steps = average_step_time(log, window)
    try:
        samples_per_s = global_batch_size / step_time
        tflops = model.flops_per_sample * samples_per_s / gpus / 1e12
        tokens_per_s = samples_per_s * model.seq_length if model.seq_length else None
    except OverflowError:  # an integer option beyond a float's range
        raise AnalysisError(
            "the throughput overflows: the global batch size, the number of GPUs or the sequence length "
            "is beyond any real run"
        ) from None
    mfu = tflops / peak
    causal = model.causal_flops_per_sample
    tflops_causal = causal * samples_per_s / gpus / 1e12 if causal is not None else None
    figures = {"samples/s": samples_per_s, "tokens/s": tokens_per_s, "TFLOPS per GPU": tflops, "MFU": mfu}
    for name, value in figures.items():
        if value is not None and not math.isfinite(value):
            raise AnalysisError(
                f"{name} comes out as {value} (an overflow): a mean step time of {step_time:g} s with global "
                f"batch {_n(global_batch_size)}, {_n(gpus)} GPUs and {model.flops_per_sample:.4g} FLOPs per "
                "sample cannot be real"
            )
    if mfu > 1:
        raise AnalysisError(
            f"MFU comes out at {mfu:.1%}, above 100 % of the {chip.name}'s {peak:g} TFLOPS dense "
            f"{precision.value} peak ({tflops:,.1f} TFLOPS per GPU from a mean step time of {step_time:g} s): "
            "check --gpus, --global-batch-size, the model and the log's step times"
        )
    duplicates = tuple(step for step in log.repeated_steps if step in window)
    return RunMetrics(
        step_time_s=step_time,
        steps_averaged=steps,
        window=window,
        samples_per_s=samples_per_s,
        tokens_per_s=tokens_per_s,
        tflops_per_gpu=tflops,
        mfu=mfu,
        peak_tflops=peak,
        model=model,
        tflops_per_gpu_causal=tflops_causal,
        mfu_causal=tflops_causal / peak if tflops_causal is not None else None,
        global_batch_size=global_batch_size,
        gpus=gpus,
        accelerator=chip.name,
        precision=precision,
        duplicate_steps=duplicates,
        duplicate_steps_in_log=len(log.repeated_steps),
        loss_failure=log.loss_failure,
    )


def check_against_record(parameters: Mapping[str, Any] | None, *, gpus: int, global_batch_size: int) -> None:
    """Refuse a `--global-batch-size` or `--gpus` that the log's DLLogger PARAMETER record contradicts.

    The user states both; when the record says otherwise one of the two is wrong, and a
    figure computed from either would be published wrong, so this is an error, not a warning:

    - `global_batch_size` (`cfg/global_batch_size`) must equal `global_batch_size`, unless the
      record has a `rampup_batch_size` (the batch grows during the run);
    - `trainer/num_nodes` × `trainer/devices`, when the record has both, must equal `gpus`;
    - `gpus` must be a multiple of tensor × pipeline × context parallel sizes, and the global
      batch a multiple of micro batch × data-parallel size: Megatron refuses to start otherwise.
    """
    if not parameters:
        return
    config = _Config(parameters)
    ramp_up = config.get("rampup_batch_size") not in (None, [], "")
    logged_batch = config.get("global_batch_size")
    if _is_positive_int(logged_batch) and not ramp_up and int(logged_batch) != global_batch_size:
        raise AnalysisError(
            f"--global-batch-size {_n(global_batch_size)} disagrees with the log's DLLogger PARAMETER record "
            f"(global_batch_size {int(logged_batch)}); pass the batch the run used"
        )
    nodes, devices = config.get("trainer/num_nodes"), config.get("trainer/devices")
    if _is_positive_int(nodes) and _is_positive_int(devices) and int(nodes) * int(devices) != gpus:
        raise AnalysisError(
            f"--gpus {_n(gpus)} disagrees with the log's DLLogger PARAMETER record "
            f"(trainer num_nodes {int(nodes)} × devices {int(devices)} = {int(nodes) * int(devices)} GPUs)"
        )
    sizes = {
        name: int(value) if _is_positive_int(value) else 1
        for name in ("tensor_model_parallel_size", "pipeline_model_parallel_size", "context_parallel_size")
        for value in [config.get(name)]
    }
    tp, pp, cp = sizes.values()
    model_parallel = tp * pp * cp
    if gpus % model_parallel:
        raise AnalysisError(
            f"--gpus {_n(gpus)} disagrees with the log's DLLogger PARAMETER record: a model replica spans "
            f"tensor {tp} × pipeline {pp} × context {cp} = {model_parallel} GPUs, and {_n(gpus)} is not a "
            "multiple of it"
        )
    micro = config.get("micro_batch_size")
    data_parallel = gpus // model_parallel
    if _is_positive_int(micro) and not ramp_up and global_batch_size % (int(micro) * data_parallel):
        raise AnalysisError(
            f"--gpus {_n(gpus)} and --global-batch-size {_n(global_batch_size)} disagree with the log's "
            f"DLLogger PARAMETER record: {_n(data_parallel)} data-parallel replicas (--gpus / {model_parallel}) "
            f"with micro batch {int(micro)} cannot make a global batch of {_n(global_batch_size)}"
        )


def sequence_length_for(
    parameters: Mapping[str, Any] | None, *, model: str | None, seq_length: int | None
) -> tuple[int | None, str | None]:
    """The sequence length to pass to `model_flops` on top of `--seq-length`, and a warning if any.

    A catalog model brings its recipe's sequence length; when the log's PARAMETER record says
    the run used another, the record wins (it is what ran) and the warning says so. An explicit
    `seq_length` always wins, silently: it is there to override.
    """
    if seq_length is not None or model is None or not parameters:
        return seq_length, None
    spec = _catalog(model)
    logged, recipe = _Config(parameters).seq_length(), spec.recipe.seq_length
    if logged is None or logged == recipe:
        return None, None
    return logged, (
        f"the log's DLLogger PARAMETER record has sequence length {logged}, catalog model {spec.name}'s recipe "
        f"{recipe}: using the log's {logged} (pass --seq-length to choose)"
    )
