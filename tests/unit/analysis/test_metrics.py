"""Step time, TFLOPS per GPU and MFU: the shared real log, and generated logs with known answers.

Expected FLOPs are worked out here from the published formulas' terms, not by calling
`Architecture.flops_per_sample`, so a slip in either shows up as a mismatch.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from analysis.errors import AnalysisError
from analysis.logs import LogFormat, StepRange, read_log
from analysis.metrics import compute, model_flops
from facts.machines import Precision
from facts.models import MODELS
from tests.unit.analysis.logs_for_tests import (
    GPT_PARAMETERS,
    LLAMA_PARAMETERS,
    SHARED_LOG,
    dllogger_line,
    needs_shared_log,
    nemo1_update,
    nemo2_line,
    step_data,
    write_dllogger,
    write_restarted_dllogger,
)

GPT2_VOCAB = 50257
LLAMA3_VOCAB = 128256
H100_BF16, H100_FP8 = 989.0, 1978.0  # gpu-recipes data_defs.py, dense

# Steps 0..39. Steps 10 and 30 (the window's ends) are 4 s and 6 s, everything between is 2 s,
# and their neighbours 9 and 31 are 1000 s: an exclusive or off-by-one window is visibly wrong.
WINDOW = StepRange(10, 30)
STEP_TIMES = [50.0] * 9 + [1000.0, 4.0] + [2.0] * 19 + [6.0, 1000.0] + [50.0] * 8
WINDOW_MEAN = (19 * 2.0 + 4.0 + 6.0) / 21


def megatron_gpt_flops(layers: int, hidden: int, vocab: int, seq: int) -> float:
    """Narayanan et al. 2021, eq. 3 without recomputation: 72·L·s·h²·(1 + s/6h + V/12Lh)."""
    return 72 * layers * seq * hidden**2 * (1 + seq / (6 * hidden) + vocab / (12 * layers * hidden))


def llama_flops(*, layers: int, hidden: int, heads: int, kv_heads: int, ffn: int, vocab: int, seq: int) -> float:
    """Forward matmul FLOPs term by term (2 per multiply-add), times 3 for forward + backward."""
    head_dim = hidden // heads
    query = 2 * seq * hidden * hidden
    keys_values = 2 * (2 * seq * hidden * kv_heads * head_dim)
    scores = 2 * seq * seq * hidden
    weighted_values = 2 * seq * seq * hidden
    output = 2 * seq * hidden * hidden
    gate_up_down = 3 * (2 * seq * hidden * ffn)
    logits = 2 * seq * hidden * vocab
    per_layer = query + keys_values + scores + weighted_values + output + gate_up_down
    return 3 * (layers * per_layer + logits)


# ---------------------------------------------------------------------------- the shared log


@needs_shared_log
def test_shared_log_reproduces_the_published_figures() -> None:
    """gpu-recipes' example: 25.397 s, 692.98 TFLOPS/GPU, MFU 35.03 % (256 H100, GBS 2048, FP8)."""
    log = read_log(SHARED_LOG, WINDOW)
    flops = model_flops(log.parameters)
    result = compute(
        log, WINDOW, flops, gpus=256, global_batch_size=2048, accelerator_name="h100", precision=Precision.FP8
    )

    assert log.format is LogFormat.DLLOGGER
    assert result.steps_averaged == 21
    assert result.step_time_s == pytest.approx(25.397, abs=0.0005)
    assert result.tflops_per_gpu == pytest.approx(692.98, rel=0.005)
    assert result.mfu == pytest.approx(0.3503, rel=0.005)
    assert result.peak_tflops == H100_FP8
    assert flops.seq_length == 2048
    assert flops.flops_per_sample == pytest.approx(megatron_gpt_flops(96, 12288, GPT2_VOCAB, 2048), rel=1e-12)
    assert result.tokens_per_s == pytest.approx(2048 * 2048 / result.step_time_s, rel=1e-12)


@needs_shared_log
def test_the_catalogs_gpt3_step_time_is_the_recipes_own_mean_of_steps_10_to_30() -> None:
    """The summary's published step time for GPT-3 175B on 32 A3 Mega nodes is what the recipe's
    method gives on its published log (the mean of steps 10-30), not one line of it."""
    (published,) = MODELS["gpt3-175b"].step_times
    log = read_log(SHARED_LOG, WINDOW)
    result = compute(
        log, WINDOW, model_flops(log.parameters), gpus=256, global_batch_size=2048, accelerator_name="h100",
        precision=Precision.FP8,
    )  # fmt: skip
    assert published.seconds == pytest.approx(result.step_time_s, abs=0.0005)
    assert (published.nodes, published.global_batch_size, published.fp8) == (32, 2048, True)


@needs_shared_log
def test_shared_log_has_every_step_and_the_parameter_record() -> None:
    log = read_log(SHARED_LOG)
    assert list(log.records) == list(range(50))
    assert log.steps_in_file == StepRange(0, 49)
    assert log.parameters is not None and log.parameters["cfg/num_layers"] == 96
    assert log.records[0]["train_step_timing in s"] == pytest.approx(107.35, abs=0.01)


@needs_shared_log
def test_a_window_reads_only_its_steps_but_knows_the_whole_range() -> None:
    log = read_log(SHARED_LOG, StepRange(45, 47))
    assert list(log.records) == [45, 46, 47]
    assert log.steps_in_file == StepRange(0, 49)


# ---------------------------------------------------------------------------- FLOPs from the config


def test_gpt_shape_from_the_parameter_record(tmp_path: Path) -> None:
    """MHA, FFN null → 4h, GPT-2 tokenizer → 50257, encoder_seq_length over data/seq_length."""
    log = read_log(write_dllogger(tmp_path / "gpt.json", STEP_TIMES, GPT_PARAMETERS))
    flops = model_flops(log.parameters)
    assert flops.seq_length == 128
    assert flops.architecture is not None
    assert (flops.architecture.ffn_hidden, flops.architecture.kv_heads, flops.architecture.gated_mlp) == (256, 4, False)
    assert flops.flops_per_sample == pytest.approx(megatron_gpt_flops(2, 64, GPT2_VOCAB, 128), rel=1e-12)


def test_llama_shape_from_the_parameter_record(tmp_path: Path) -> None:
    """GQA (2 query groups), SwiGLU from `activation`, Llama-3 tokenizer → 128256."""
    log = read_log(write_dllogger(tmp_path / "llama.json", STEP_TIMES, LLAMA_PARAMETERS))
    flops = model_flops(log.parameters)
    expected = llama_flops(layers=3, hidden=256, heads=8, kv_heads=2, ffn=688, vocab=LLAMA3_VOCAB, seq=512)
    assert flops.flops_per_sample == pytest.approx(expected, rel=1e-12)
    assert flops.architecture is not None
    assert (flops.architecture.kv_heads, flops.architecture.gated_mlp, flops.architecture.vocab_size) == (
        2,
        True,
        LLAMA3_VOCAB,
    )


def test_gated_mlp_from_nemo2_flag_and_activation_names(tmp_path: Path) -> None:
    """NeMo 2 configs say `gated_linear_unit: true`; NeMo 1 names the activation (swiglu, geglu...)."""
    plain = {k: v for k, v in LLAMA_PARAMETERS.items() if k != "cfg/activation"}
    for extra, gated in (({}, False), ({"cfg/gated_linear_unit": True}, True), ({"cfg/activation": "swiglu"}, True)):
        log = read_log(write_dllogger(tmp_path / "llama.json", STEP_TIMES, {**plain, **extra}))
        architecture = model_flops(log.parameters).architecture
        assert architecture is not None and architecture.gated_mlp is gated, extra


def test_explicit_vocab_and_padded_vocab_keys(tmp_path: Path) -> None:
    padded = {**GPT_PARAMETERS, "cfg/padded_vocab_size": 50304}
    log = read_log(write_dllogger(tmp_path / "padded.json", STEP_TIMES, padded))
    assert model_flops(log.parameters).flops_per_sample == pytest.approx(megatron_gpt_flops(2, 64, 50304, 128))
    overridden = model_flops(log.parameters, vocab_size=1000, seq_length=64)
    assert overridden.flops_per_sample == pytest.approx(megatron_gpt_flops(2, 64, 1000, 64))


@pytest.mark.parametrize(
    ("model", "published"),
    [
        # gpu-recipes training_metrics MODEL_FLOPS_PER_SAMPLE, an independent table.
        ("gpt3-175b", 2.2e15),
        ("llama3.1-8b", 4.74e14),
        ("llama3.1-70b", 3.94e15),  # the table's llama3-70b: same shape
    ],
)
def test_catalog_models_agree_with_the_public_table(model: str, published: float) -> None:
    assert model_flops(None, model=model).flops_per_sample == pytest.approx(published, rel=0.005)


def test_precedence_flops_figure_or_model_then_record(tmp_path: Path) -> None:
    log = read_log(write_dllogger(tmp_path / "gpt.json", STEP_TIMES, GPT_PARAMETERS))
    figure = model_flops(log.parameters, flops_per_sample=1.5e12)
    assert (figure.flops_per_sample, figure.source) == (1.5e12, "--model-flops-per-sample")
    assert figure.seq_length == 128  # the record says how long a sample is
    assert model_flops(None, flops_per_sample=1.5e12).seq_length is None  # nothing does
    catalog = model_flops(None, model="gpt-5b")
    assert catalog.flops_per_sample == pytest.approx(megatron_gpt_flops(24, 4096, GPT2_VOCAB, 2048))
    assert model_flops(None, model="gpt-5b", seq_length=1024).flops_per_sample == pytest.approx(
        megatron_gpt_flops(24, 4096, GPT2_VOCAB, 1024)
    )


def test_missing_model_parameters_name_what_is_missing(tmp_path: Path) -> None:
    lacking = {k: v for k, v in GPT_PARAMETERS.items() if k not in {"cfg/hidden_size", "cfg/tokenizer/type"}}
    log = read_log(write_dllogger(tmp_path / "lacking.json", STEP_TIMES, lacking))
    with pytest.raises(AnalysisError, match=r"lacks hidden_size, vocabulary size .*--model \(gpt-5b, gpt3-175b"):
        model_flops(log.parameters)


# ---------------------------------------------------------------------------- throughput


@pytest.mark.parametrize(("shape", "parameters"), [("gpt", GPT_PARAMETERS), ("llama", LLAMA_PARAMETERS)])
def test_generated_dllogger_known_answer(tmp_path: Path, shape: str, parameters: dict[str, object]) -> None:
    log = read_log(write_dllogger(tmp_path / f"{shape}.json", STEP_TIMES, parameters), WINDOW)
    flops = model_flops(log.parameters)
    result = compute(
        log, WINDOW, flops, gpus=8, global_batch_size=16, accelerator_name="h100", precision=Precision.BF16
    )

    per_sample = (
        megatron_gpt_flops(2, 64, GPT2_VOCAB, 128)
        if shape == "gpt"
        else llama_flops(layers=3, hidden=256, heads=8, kv_heads=2, ffn=688, vocab=LLAMA3_VOCAB, seq=512)
    )
    seq = 128 if shape == "gpt" else 512
    assert result.steps_averaged == 21
    assert result.step_time_s == pytest.approx(WINDOW_MEAN, rel=1e-12)
    assert result.tokens_per_s == pytest.approx(16 * seq / WINDOW_MEAN, rel=1e-12)
    assert result.tflops_per_gpu == pytest.approx(per_sample * 16 / WINDOW_MEAN / 8 / 1e12, rel=1e-12)
    assert result.mfu == pytest.approx(result.tflops_per_gpu / H100_BF16, rel=1e-12)
    # As NVIDIA's tables count: attention's scores (4·s²·heads·head_dim a layer, forward) halved.
    layers, hidden, s = (2, 64, 128) if shape == "gpt" else (3, 256, 512)
    scores = 3 * layers * 4 * s * s * hidden
    assert result.tflops_per_gpu_causal == pytest.approx(
        (per_sample - scores / 2) * 16 / WINDOW_MEAN / 8 / 1e12, rel=1e-12
    )
    assert result.mfu_causal == pytest.approx(result.tflops_per_gpu_causal / H100_BF16, rel=1e-12)


def test_a_flops_figure_alone_has_no_causal_count(tmp_path: Path) -> None:
    log = read_log(write_dllogger(tmp_path / "g.json", STEP_TIMES, GPT_PARAMETERS), WINDOW)
    flops = model_flops(log.parameters, flops_per_sample=1e12)
    result = compute(
        log, WINDOW, flops, gpus=8, global_batch_size=16, accelerator_name="h100", precision=Precision.BF16
    )
    assert (result.tflops_per_gpu_causal, result.mfu_causal) == (None, None)


def test_llama3_8b_counted_as_nvidia_is_its_published_744_tflops() -> None:
    """NVIDIA's 25.11 DGX-H100 Llama 3 8B row: 14 451 tokens/s per GPU, 744 TFLOP/s per GPU."""
    flops = model_flops(None, model="llama3-8b", seq_length=8192)
    assert flops.causal_flops_per_sample is not None
    assert round(flops.causal_flops_per_sample / 8192 * 14451 / 1e12) == 744


@pytest.mark.parametrize(
    ("window", "expected"),
    [
        (StepRange(10, 10), 4.0),  # a one-step window is its own step
        (StepRange(9, 10), (1000.0 + 4.0) / 2),
        (StepRange(30, 31), (6.0 + 1000.0) / 2),
        (StepRange(11, 29), 2.0),
    ],
)
def test_window_ends_are_inclusive(tmp_path: Path, window: StepRange, expected: float) -> None:
    log = read_log(write_dllogger(tmp_path / "gpt.json", STEP_TIMES, GPT_PARAMETERS), window)
    result = compute(
        log,
        window,
        model_flops(log.parameters),
        gpus=1,
        global_batch_size=1,
        accelerator_name="a100",
        precision=Precision.BF16,
    )
    assert result.step_time_s == pytest.approx(expected)
    assert result.steps_averaged == window.end - window.start + 1


def _text_log(style: str, step_times: list[float], *, global_step: bool) -> str:
    """A text log holding `step_times`; the values are formatted the way the loggers print them."""
    texts = [f"{t:.4g}" if t != 2.0 else "2.000" for t in step_times]
    texts[20] = "2e+00"  # Lightning's short form for some values
    total = len(step_times)
    noise = ["[NeMo I 2024-09-28 01:21:33 nemo_logging:349] Rank 0 has data parallel group: [0]", "Validation: 0it"]
    if style == "nemo2":
        return "\n".join([*noise, *(nemo2_line(s, total, t, global_step=global_step) for s, t in enumerate(texts))])
    # tqdm: redraws separated by carriage returns, four per physical line, one drawn twice.
    updates = [nemo1_update(s, total, t, global_step=global_step) for s, t in enumerate(texts)]
    updates.insert(16, updates[15])
    lines = ["\r".join(updates[i : i + 4]) for i in range(0, len(updates), 4)]
    return "\n".join([*noise, *lines])


@pytest.mark.parametrize("style", ["nemo1", "nemo2"])
@pytest.mark.parametrize("global_step", [True, False])
def test_generated_text_logs_known_answer(tmp_path: Path, style: str, global_step: bool) -> None:
    """gpt-5b (24 layers, hidden 4096, MHA, FFN 4h, GPT-2 vocab, seq 2048) on 16 H100 at FP8."""
    path = tmp_path / f"{style}.log"
    path.write_text(_text_log(style, STEP_TIMES, global_step=global_step))
    log = read_log(path, WINDOW)
    assert log.format is LogFormat.NEMO_TEXT
    assert log.parameters is None
    assert log.steps_in_file == StepRange(0, 39)
    flops = model_flops(log.parameters, model="gpt-5b")
    result = compute(
        log, WINDOW, flops, gpus=16, global_batch_size=256, accelerator_name="h100", precision=Precision.FP8
    )

    assert result.steps_averaged == 21
    assert result.step_time_s == pytest.approx(WINDOW_MEAN, rel=1e-12)
    expected_tflops = megatron_gpt_flops(24, 4096, GPT2_VOCAB, 2048) * 256 / WINDOW_MEAN / 16 / 1e12
    assert result.tflops_per_gpu == pytest.approx(expected_tflops, rel=1e-12)
    assert result.mfu == pytest.approx(expected_tflops / H100_FP8, rel=1e-12)


def test_records_of_one_step_are_merged(tmp_path: Path) -> None:
    """NeMo logs validation metrics for a step in a record of their own; the step keeps its timing."""
    path = write_dllogger(tmp_path / "gpt.json", STEP_TIMES, GPT_PARAMETERS)
    with path.open("a") as out:
        out.write(dllogger_line(20, {"val_loss": 5.0}) + "\n")
    log = read_log(path, WINDOW)
    assert log.records[20] == {
        "lr": 1e-4,
        "global_step": 20.0,
        "train_step_timing in s": 2.0,
        "reduced_train_loss": 8.0,
        "val_loss": 5.0,
    }
    flops = model_flops(log.parameters)
    result = compute(log, WINDOW, flops, gpus=1, global_batch_size=1, accelerator_name="h100", precision=Precision.BF16)
    assert result.steps_averaged == 21
    assert result.step_time_s == pytest.approx(WINDOW_MEAN)


def test_text_errors_name_the_physical_line(tmp_path: Path) -> None:
    """tqdm's carriage-return redraws share a line; the error names the line an editor shows."""
    good = "\r".join(nemo1_update(s, 15, "2.0") for s in range(4))
    path = tmp_path / "nemo1.log"
    path.write_text(good + "\n" + good + "\r" + nemo1_update(5, 15, "soon") + "\n")
    with pytest.raises(AnalysisError, match=r"nemo1.log:2: cannot read the value"):
        read_log(path)


def test_public_nemo1_progress_lines(tmp_path: Path) -> None:
    """Two tqdm lines seen in public NeMo 1.x logs; the step is global_step, not the bar's counter."""
    path = tmp_path / "nemo1.log"
    path.write_text(
        "Epoch 0: :  47%|████▋     | 7/15 [06:19<07:13, reduced_train_loss=11.50, global_step=5.000, "
        "consumed_samples=12288.0, train_step_timing in s=49.50]\n"
        "Epoch 0: : 100%|██████████| 100/100 [20:15<00:00, reduced_train_loss=6.370, global_step=99.00, "
        "consumed_samples=12800.0, train_step_timing in s=11.20]\n"
    )
    log = read_log(path)
    assert {step: data["train_step_timing in s"] for step, data in log.records.items()} == {5: 49.5, 99: 11.2}
    assert log.records[5]["reduced_train_loss"] == 11.5


def test_model_settings_come_from_the_shallowest_key(tmp_path: Path) -> None:
    """`cfg/seq_length` (the model's) wins over `cfg/data/seq_length`."""
    parameters = {k: v for k, v in GPT_PARAMETERS.items() if k != "cfg/encoder_seq_length"}
    parameters["cfg/seq_length"] = 128
    log = read_log(write_dllogger(tmp_path / "gpt.json", STEP_TIMES, parameters))
    assert model_flops(log.parameters).seq_length == 128


def test_records_outside_the_window_are_not_decoded(tmp_path: Path) -> None:
    """A writer killed mid-line leaves a truncated last record: the window's metrics still work,
    and reading the whole log (as `plot` does) names the broken line."""
    path = write_dllogger(tmp_path / "gpt.json", STEP_TIMES, GPT_PARAMETERS)
    path.write_text(path.read_text() + dllogger_line(40, {"train_step_timing in s": 2.0})[:-30])
    assert read_log(path, WINDOW).steps_in_file == StepRange(0, 40)
    with pytest.raises(AnalysisError, match=r"gpt.json:42: malformed DLLogger JSON"):
        read_log(path)


def test_text_metrics_are_read_with_their_names(tmp_path: Path) -> None:
    path = tmp_path / "nemo1.log"
    path.write_text(nemo1_update(5, 15, "2e+03"))
    log = read_log(path)
    assert log.records == {
        5: {"reduced_train_loss": 9.5, "global_step": 5.0, "consumed_samples": 1536.0, "train_step_timing in s": 2000.0}
    }


# ---------------------------------------------------------------------------- repeated steps


def test_a_repeated_step_keeps_only_its_last_attempts_record(tmp_path: Path) -> None:
    """The first attempt's step 22 logged a grad_norm the restart did not: it must not leak in."""
    path = write_restarted_dllogger(tmp_path / "restarted.json", [3.0] * 26, 20, [5.0] * 20, GPT_PARAMETERS)
    lines = path.read_text().splitlines()
    lines[23] = dllogger_line(22, {**step_data(22, 3.0), "grad_norm": 7.0})  # attempt 1's step 22
    path.write_text("\n".join([*lines, dllogger_line(22, {"val_loss": 4.0})]) + "\n")
    for window in (None, WINDOW):
        log = read_log(path, window)
        assert log.repeated_steps == (20, 21, 22, 23, 24, 25)
        restart = {"lr": 1e-4, "global_step": 22.0, "train_step_timing in s": 5.0, "reduced_train_loss": 5.0 - 2.2}
        assert log.records[22] == pytest.approx({**restart, "val_loss": 4.0})
        assert log.records[19]["train_step_timing in s"] == 3.0


def test_a_step_with_a_validation_record_is_not_a_repeat(tmp_path: Path) -> None:
    path = write_dllogger(tmp_path / "gpt.json", STEP_TIMES, GPT_PARAMETERS)
    with path.open("a") as out:
        out.write(dllogger_line(20, {"val_loss": 5.0}) + "\n")
    assert read_log(path).repeated_steps == ()
    assert read_log(path, WINDOW).repeated_steps == ()


@pytest.mark.parametrize("style", ["nemo1", "nemo2"])
def test_text_logs_tell_a_restart_from_a_progress_bar_redraw(tmp_path: Path, style: str) -> None:
    """`_text_log` draws step 15 twice (a tqdm redraw, same values); a restart logs 20–25 again, slower."""
    path = tmp_path / f"{style}.log"
    first = _text_log(style, STEP_TIMES, global_step=True)
    path.write_text(first)
    assert read_log(path).repeated_steps == ()
    again = [nemo2_line(s, 40, "7.000") for s in range(20, 26)]
    if style == "nemo1":
        again = ["\r".join(nemo1_update(s, 40, "7.000") for s in range(20, 26))]
    path.write_text(first + "\n" + "\n".join(again) + "\n")
    log = read_log(path, WINDOW)
    assert log.repeated_steps == (20, 21, 22, 23, 24, 25)
    assert log.records[20]["train_step_timing in s"] == 7.0
    assert log.records[19]["train_step_timing in s"] == 2.0


def test_beyond_the_window_unreadable_records_are_listed_not_fatal(tmp_path: Path) -> None:
    """`plot` reads every record, yet refuses a log only where `metrics` would."""
    path = write_dllogger(tmp_path / "gpt.json", STEP_TIMES, GPT_PARAMETERS)
    path.write_text(path.read_text() + dllogger_line(40, {"train_step_timing in s": 2.0})[:-30])
    log = read_log(path, WINDOW, beyond_window=True)
    assert list(log.records) == list(range(40))
    assert log.unreadable_lines == (42,)
    assert read_log(path, WINDOW).unreadable_lines == ()
    broken_inside = write_dllogger(tmp_path / "inside.json", STEP_TIMES, GPT_PARAMETERS)
    lines = broken_inside.read_text().splitlines()
    lines[21] = lines[21][:-20]
    broken_inside.write_text("\n".join(lines) + "\n")
    with pytest.raises(AnalysisError, match=r"inside.json:22: malformed DLLogger JSON"):
        read_log(broken_inside, WINDOW, beyond_window=True)
