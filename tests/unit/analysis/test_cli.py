"""`python -m analysis metrics`: output, exit codes, and every kind of bad input → exit 2 with a message."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from analysis.__main__ import main
from facts.models import MODELS
from tests.unit.analysis.logs_for_tests import (
    GPT_PARAMETERS,
    ROOT,
    SHARED_LOG,
    dllogger_line,
    needs_shared_log,
    nemo1_update,
    nemo2_line,
    step_data,
    valid_gpt_log,
    write_dllogger,
    write_restarted_dllogger,
)

RUN = ["--gpus", "256", "--global-batch-size", "2048", "--accelerator", "h100", "--precision", "fp8"]
STEP_TIMES = [3.0] * 40


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "analysis", *args], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False
    )


@needs_shared_log
def test_json_output_end_to_end() -> None:
    """The real entry point prints exactly one JSON object with the published figures."""
    done = run_cli("metrics", "--log", str(SHARED_LOG), *RUN, "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)  # fails on anything but one JSON document
    assert isinstance(result, dict)
    assert result["step_time_s"] == pytest.approx(25.397, abs=0.0005)
    assert result["tflops_per_gpu"] == pytest.approx(692.98, rel=0.005)
    assert result["mfu"] == pytest.approx(0.3503, rel=0.005)
    assert result["tokens_per_s"] == pytest.approx(2048 * 2048 / result["step_time_s"])
    assert result["steps_averaged"] == 21
    assert result["window"] == {"start_step": 10, "end_step": 30}
    assert (result["accelerator"], result["precision"], result["peak_tflops"]) == ("h100", "fp8", 1978.0)
    assert result["model_source"] == "DLLogger PARAMETER record"


@needs_shared_log
def test_table_output(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["metrics", "--log", str(SHARED_LOG), *RUN]) == 0
    out = capsys.readouterr().out
    assert "25.397 s" in out
    assert "694.4" in out
    assert "35.10% of 1978 TFLOPS" in out
    assert "21 of 21 steps averaged" in out


def test_model_flags_reach_the_result(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "nemo2.log"
    log.write_text("\n".join(nemo2_line(step, 40, "4.000") for step in range(40)))
    argv = ["metrics", "--log", str(log), "--gpus", "8", "--global-batch-size", "32", "--accelerator", "H100"]
    assert main([*argv, "--precision", "bf16", "--model-flops-per-sample", "4e14", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["tflops_per_gpu"] == pytest.approx(4e14 * 32 / 4.0 / 8 / 1e12)
    assert result["seq_length"] is None and result["tokens_per_s"] is None  # nothing says how long a sample is
    assert main([*argv, "--precision", "bf16", "--model", "llama3.1-8b", "--seq-length", "4096", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["model_source"] == "catalog model llama3.1-8b"
    assert result["tokens_per_s"] == pytest.approx(32 * 4096 / 4.0)


# ---------------------------------------------------------------------------- hostile input


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _lines(*lines: str) -> str:
    return "\n".join(lines) + "\n"


def _gpt_log(step_times: list[float], parameters: dict[str, object] = GPT_PARAMETERS) -> str:
    """The text of a DLLogger log: PARAMETER record, then steps 0.. with these timings."""
    return _lines(
        dllogger_line("PARAMETER", parameters), *(dllogger_line(s, step_data(s, t)) for s, t in enumerate(step_times))
    )


def _with_step_20(raw_value: str) -> str:
    """A 40-step GPT log whose step 20 carries `raw_value`, verbatim, as its step time."""
    step_20 = dllogger_line(20, step_data(20, 3.0)).replace(
        '"train_step_timing in s": 3.0', f'"train_step_timing in s": {raw_value}'
    )
    lines = _gpt_log([3.0] * 40).splitlines()
    lines[21] = step_20
    return _lines(*lines)


TP4_PP8 = {**GPT_PARAMETERS, "cfg/tensor_model_parallel_size": 4, "cfg/pipeline_model_parallel_size": 8}


# case → (log text, or None for the shared log; extra arguments; pattern the message must match)
HOSTILE_LOGS: dict[str, tuple[str | None, list[str], str]] = {
    "empty": ("", [], "is empty"),
    "blank lines": ("\n  \n\n", [], "is empty"),
    "no step timings": ("hello\nworld\n", [], "has no training steps"),
    "truncated JSON in the window": (
        _lines(dllogger_line("PARAMETER", GPT_PARAMETERS), *(dllogger_line(s, step_data(s, 3.0)) for s in range(15)))
        + dllogger_line(15, step_data(15, 3.0))[:-20],
        [],
        r":17: malformed DLLogger JSON",
    ),
    # Two runs' logs in one file: the last record's configuration won, silently (MFU 87.5 % for 44.6 %).
    "two runs' parameters": (
        _lines(
            dllogger_line("PARAMETER", GPT_PARAMETERS),
            dllogger_line("PARAMETER", {**GPT_PARAMETERS, "cfg/hidden_size": 128}),
            *(dllogger_line(s, step_data(s, 3.0)) for s in range(40)),
        ),
        [],
        r":2: PARAMETER record says cfg/hidden_size = 128, and line 1 said 64: the log holds two runs'",
    ),
    "a foreign line": (
        _lines(dllogger_line("PARAMETER", GPT_PARAMETERS), "Traceback (most recent call last):"),
        [],
        r":2: not a DLLogger record",
    ),
    "window after the last step": (
        _lines(dllogger_line("PARAMETER", GPT_PARAMETERS), *(dllogger_line(s, step_data(s, 3.0)) for s in range(5))),
        [],
        r"^error: --start-step 10 is past the log's last step 4 \(the log has steps 0–4\)$",
    ),
    "steps without timings": (
        _lines(dllogger_line("PARAMETER", GPT_PARAMETERS), *(dllogger_line(s, {"lr": 0.1}) for s in range(40))),
        [],
        "no 'train_step_timing in s' values",
    ),
    "text log without a model": (_lines(*(nemo2_line(s, 40, "3.0") for s in range(40))), [], "no model configuration"),
    "text timing without a step": ("train_step_timing in s: 3.0\n", [], r":1: 'train_step_timing in s' without a step"),
    "text timing without a value": (
        "Training epoch 0, iteration 3/9 | train_step_timing in s: soon\n",
        [],
        r":1: cannot read the value",
    ),
    "missing model parameters": (
        _lines(
            dllogger_line("PARAMETER", {"cfg/num_layers": 2, "cfg/tokenizer/type": "GPT2BPETokenizer"}),
            *(dllogger_line(s, step_data(s, 3.0)) for s in range(40)),
        ),
        [],
        r"PARAMETER record lacks hidden_size, num_attention_heads, encoder_seq_length or seq_length; pass --model",
    ),
    "unknown vocabulary": (
        _lines(
            dllogger_line("PARAMETER", {**GPT_PARAMETERS, "cfg/tokenizer/type": "SentencePiece"}),
            *(dllogger_line(s, step_data(s, 3.0)) for s in range(40)),
        ),
        [],
        r"lacks vocabulary size .*--vocab-size",
    ),
    "inconsistent shape": (
        _lines(
            dllogger_line("PARAMETER", {**GPT_PARAMETERS, "cfg/num_query_groups": 3}),
            *(dllogger_line(s, step_data(s, 3.0)) for s in range(40)),
        ),
        [],
        "shape is inconsistent",
    ),
    "unknown accelerator": (
        None,
        ["--accelerator", "tpu-v9"],
        r"unknown accelerator 'tpu-v9'; known: h100, h200, b200, gb200, a100",
    ),
    "no fp8 peak": (None, ["--accelerator", "a100"], "a100 has no published dense fp8 peak"),
    "unknown model": (None, ["--model", "gpt-9"], r"unknown model 'gpt-9'; known: gpt-5b, gpt3-175b, llama3.1-8b"),
    "start after end": (
        None,
        ["--start-step", "31", "--end-step", "30"],
        r"^error: --end-step 30 is before --start-step 31",
    ),
    # Requirement 1: step times and figures that cannot be physical.
    "NaN step time in the window": (_with_step_20("NaN"), [], r"'train_step_timing in s' of step 20 is not a number"),
    "negative step time in the window": (
        _gpt_log([3.0] * 20 + [-1.0] + [3.0] * 19),
        [],
        r"step 20 is -1 s; it must be positive",
    ),
    "zero step time in the window": (
        _gpt_log([3.0] * 20 + [0.0] + [3.0] * 19),
        [],
        r"step 20 is 0 s; it must be positive",
    ),
    "infinite step time in a text log": (
        _lines(*(nemo2_line(s, 40, "inf" if s == 15 else "3.0") for s in range(40))),
        ["--model", "gpt-5b"],
        r"step 15 is infinite",
    ),
    "MFU above 100 %": (
        None,
        ["--model-flops-per-sample", "1e20"],
        r"MFU comes out at [\d,.]+%, above 100 % of the h100",
    ),
    "tokens/s beyond a float (a subnormal step time)": (
        _gpt_log([1e-310] * 40),
        [],
        r"samples/s comes out as inf \(an overflow\)",
    ),
    # Requirement 2: overflow.
    "step time of 1e308": (_gpt_log([1e308] * 40), [], r"step 10 is 1e\+308 s, more than a year"),
    "one step time of 1e308": (_gpt_log([3.0] * 20 + [1e308] + [3.0] * 19), [], r"step 20 is 1e\+308 s"),
    "an integer step time beyond a float": (_with_step_20("1" + "0" * 400), [], r"step 20 is infinite"),
    "a 5000-digit step time": (_with_step_20("1" * 5000), [], r":22: unreadable DLLogger JSON"),
    "TFLOPS beyond a float": (None, ["--model-flops-per-sample", "1e308"], r"TFLOPS per GPU comes out as inf"),
    "global batch beyond a float": (None, ["--global-batch-size", "1" + "0" * 400], "the throughput overflows"),
    "sequence length beyond a float": (
        _lines(*(nemo2_line(s, 40, "3.0") for s in range(40))),
        ["--model", "gpt-5b", "--seq-length", "1" + "0" * 200],
        r"model FLOPs per sample overflow .* sequence length a 201-digit number",
    ),
    # Requirement 3: the options against the log's DLLogger PARAMETER record.
    "global batch disagrees with the record": (
        _gpt_log([3.0] * 40, {**GPT_PARAMETERS, "cfg/global_batch_size": 1024}),
        [],
        r"--global-batch-size 2048 disagrees with the log's DLLogger PARAMETER record \(global_batch_size 1024\)",
    ),
    "GPUs disagree with the record's nodes × devices": (
        _gpt_log([3.0] * 40, {**GPT_PARAMETERS, "trainer/num_nodes": 16, "trainer/devices": 8}),
        [],
        r"--gpus 256 disagrees .*num_nodes 16 × devices 8 = 128 GPUs",
    ),
    "GPUs not a multiple of the record's model-parallel size": (
        _gpt_log([3.0] * 40, TP4_PP8),
        ["--gpus", "100"],
        r"--gpus 100 disagrees .*tensor 4 × pipeline 8 × context 1 = 32 GPUs, and 100 is not a multiple",
    ),
    "GPUs that cannot make the global batch": (
        _gpt_log([3.0] * 40, TP4_PP8),
        ["--gpus", "384"],
        r"12 data-parallel replicas .* micro batch 1 cannot make a global batch of 2048",
    ),
}


@pytest.mark.parametrize("output", [[], ["--json"]], ids=["table", "json"])
@pytest.mark.parametrize("case", HOSTILE_LOGS)
def test_bad_input_exits_2_with_a_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str, output: list[str]
) -> None:
    text, extra, message = HOSTILE_LOGS[case]
    log = valid_gpt_log(tmp_path) if text is None else _write(tmp_path, "log.json", text)
    argv = ["metrics", "--log", str(log), *RUN, *extra, *output]
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("error: ")
    assert captured.err.count("\n") == 1  # one line, no traceback
    assert re.search(message, captured.err), captured.err


def test_missing_and_unreadable_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["metrics", "--log", str(tmp_path / "nope.json"), *RUN]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["metrics", "--log", str(tmp_path), *RUN]) == 2
    assert "cannot read" in capsys.readouterr().err


@pytest.mark.parametrize(
    "extra",
    [
        ["--gpus", "0"],
        ["--gpus", "-8"],
        ["--global-batch-size", "0"],
        ["--global-batch-size", "many"],
        ["--precision", "fp4"],
        ["--model-flops-per-sample", "-1"],
        ["--model-flops-per-sample", "nan"],
        ["--seq-length", "0"],
    ],
)
def test_bad_numbers_are_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["metrics", "--log", str(valid_gpt_log(tmp_path)), *RUN, *extra])
    assert exit_info.value.code == 2
    assert f"argument {extra[0]}" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("text", "extra", "message"),
    [
        ("", [], "is empty"),
        ('DLLL {"step": 12, "data": \n', ["--start-step", "0"], ":1: malformed DLLogger JSON"),
        (None, ["--gpus", "0"], "argument --gpus: must be positive"),
        (None, ["--accelerator", "v5p"], "unknown accelerator 'v5p'"),
        (_gpt_log([1e308] * 40), ["--json"], "more than a year"),
        (None, ["--global-batch-size", "1" + "0" * 400], "the throughput overflows"),
        (
            _lines(*(nemo2_line(s, 40, "3.0") for s in range(40))),
            ["--model", "gpt-5b", "--seq-length", "1" + "0" * 200],
            "model FLOPs per sample overflow",
        ),
        (None, ["--model-flops-per-sample", "1e308", "--json"], "TFLOPS per GPU comes out as inf"),
    ],
)
def test_real_entry_point_exits_2_without_a_traceback(
    tmp_path: Path, text: str | None, extra: list[str], message: str
) -> None:
    log = valid_gpt_log(tmp_path) if text is None else _write(tmp_path, "log.json", text)
    done = run_cli("metrics", "--log", str(log), *RUN, *extra)
    assert done.returncode == 2
    assert done.stdout == ""
    assert message in done.stderr
    assert "Traceback" not in done.stderr


def test_generated_log_through_the_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = write_dllogger(tmp_path / "gpt.json", STEP_TIMES, GPT_PARAMETERS)
    argv = ["metrics", "--log", str(log), "--gpus", "2", "--global-batch-size", "8", "--accelerator", "b200"]
    assert main([*argv, "--precision", "bf16", "--start-step", "0", "--end-step", "39", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["steps_averaged"] == 40
    assert result["step_time_s"] == pytest.approx(3.0)
    assert result["peak_tflops"] == 2250.0


def assert_refused(captured: pytest.CaptureResult[str], pattern: str) -> None:
    """Exit 2's other half: nothing on stdout, one `error:` line on stderr matching `pattern`."""
    assert captured.out == ""
    assert captured.err.startswith("error: ")
    assert captured.err.count("\n") == 1, captured.err
    assert re.search(pattern, captured.err), captured.err


@pytest.mark.parametrize(
    "extra",
    [["--gpus", "0"], ["--global-batch-size", "many"], ["--precision", "fp4"], ["--model-flops-per-sample", "nan"]],
)
def test_usage_errors_are_one_error_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["metrics", "--log", str(valid_gpt_log(tmp_path)), *RUN, *extra])
    assert exit_info.value.code == 2
    assert_refused(capsys.readouterr(), rf"^error: argument {extra[0]}: .*\(see python -m analysis metrics --help\)$")


@pytest.mark.parametrize(
    ("log_text", "extra"),
    [
        (_gpt_log([1e308] * 40), []),
        (None, ["--model-flops-per-sample", "1e308"]),
        (None, ["--global-batch-size", "9" * 4000]),
        (None, ["--gpus", "1", "--model-flops-per-sample", "1e30"]),
    ],
)
def test_overflow_is_one_error_line_through_the_real_entry_point(
    tmp_path: Path, log_text: str | None, extra: list[str]
) -> None:
    log = valid_gpt_log(tmp_path) if log_text is None else _write(tmp_path, "log.json", log_text)
    done = run_cli("metrics", "--log", str(log), *RUN, *extra, "--json")
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.startswith("error: ") and done.stderr.count("\n") == 1, done.stderr


# ---------------------------------------------------------------------------- restarted runs


def test_a_restarted_runs_repeated_steps_count_once_from_the_last_attempt(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Attempt 1 logs steps 0–25 at 3 s and dies; attempt 2 resumes at step 20 and logs 20–39 at 5 s."""
    log = write_restarted_dllogger(tmp_path / "restarted.json", [3.0] * 26, 20, [5.0] * 20, GPT_PARAMETERS)
    assert main(["metrics", "--log", str(log), *RUN, "--json"]) == 0
    captured = capsys.readouterr()
    result = json.loads(captured.out)
    assert result["steps_averaged"] == 21
    assert result["step_time_s"] == pytest.approx((10 * 3.0 + 11 * 5.0) / 21)
    assert result["duplicate_steps"] == [20, 21, 22, 23, 24, 25]
    assert result["duplicate_steps_in_log"] == 6
    assert captured.err.startswith("note: ") and captured.err.count("\n") == 1
    assert "6 steps more than once (20–25" in captured.err
    assert "the last attempt of each is averaged; 6 of them in the window 10–30" in captured.err


def test_repeated_steps_outside_the_window_are_reported_too(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Records outside the window are never decoded, yet their repeats are found."""
    log = write_restarted_dllogger(tmp_path / "restarted.json", [3.0] * 38, 35, [3.0] * 5, GPT_PARAMETERS)
    assert main(["metrics", "--log", str(log), *RUN, "--json"]) == 0
    captured = capsys.readouterr()
    result = json.loads(captured.out)
    assert (result["duplicate_steps"], result["duplicate_steps_in_log"]) == ([], 3)  # 35–37, logged again
    assert "3 steps more than once (35–37" in captured.err and "0 of them in the window" in captured.err


def test_a_log_without_repeats_reports_none(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["metrics", "--log", str(valid_gpt_log(tmp_path)), *RUN, "--json"]) == 0
    captured = capsys.readouterr()
    assert captured.err == ""
    result = json.loads(captured.out)
    assert (result["duplicate_steps"], result["duplicate_steps_in_log"]) == ([], 0)


def test_notes_are_not_printed_when_the_run_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = write_restarted_dllogger(tmp_path / "restarted.json", [3.0] * 26, 20, [5.0] * 20, GPT_PARAMETERS)
    assert main(["metrics", "--log", str(log), *RUN, "--model-flops-per-sample", "1e20"]) == 2
    assert_refused(capsys.readouterr(), "MFU comes out at")


# ---------------------------------------------------------------------------- the PARAMETER record


# A record of gpt-5b's shape, run at sequence length 128 where its recipe says 2048.
_GPT_5B = MODELS["gpt-5b"].architecture
GPT_5B_PARAMETERS = {
    **GPT_PARAMETERS,
    "cfg/num_layers": _GPT_5B.layers,
    "cfg/hidden_size": _GPT_5B.hidden,
    "cfg/num_attention_heads": _GPT_5B.heads,
}


def test_a_catalog_models_sequence_length_gives_way_to_the_records_with_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """gpt-5b's recipe says 2048; the log's record says the run used 128: the log wins, and says so."""
    log = _write(tmp_path, "gpt-5b.json", _gpt_log([3.0] * 40, GPT_5B_PARAMETERS))
    assert main(["metrics", "--log", str(log), *RUN, "--model", "gpt-5b", "--json"]) == 0
    captured = capsys.readouterr()
    result = json.loads(captured.out)
    assert result["seq_length"] == 128
    assert result["tokens_per_s"] == pytest.approx(2048 * 128 / 3.0)
    shape = (24, 4096, 50257)  # gpt-5b: layers, hidden, GPT-2 vocabulary; Megatron's count at s = 128
    layers, hidden, vocab = shape
    expected = 72 * layers * 128 * hidden**2 * (1 + 128 / (6 * hidden) + vocab / (12 * layers * hidden))
    assert result["model_flops_per_sample"] == pytest.approx(expected)
    assert captured.err.count("\n") == 1
    assert captured.err.startswith("warning: the log's DLLogger PARAMETER record has sequence length 128")
    assert "catalog model gpt-5b's recipe 2048: using the log's 128" in captured.err


def test_an_explicit_sequence_length_overrides_the_record_silently(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = _write(tmp_path, "gpt-5b.json", _gpt_log([3.0] * 40, GPT_5B_PARAMETERS))
    assert main(["metrics", "--log", str(log), *RUN, "--model", "gpt-5b", "--seq-length", "1024", "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["seq_length"] == 1024
    assert captured.err == ""


def test_a_record_that_agrees_or_ramps_its_batch_up_is_accepted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    agreeing = {**TP4_PP8, "cfg/global_batch_size": 2048, "trainer/num_nodes": 32, "trainer/devices": 8}
    log = _write(tmp_path, "agrees.json", _gpt_log([3.0] * 40, agreeing))
    assert main(["metrics", "--log", str(log), *RUN, "--json"]) == 0
    assert capsys.readouterr().err == ""
    # During a batch ramp-up the record's global_batch_size is the final one, not the window's.
    ramping = {**GPT_PARAMETERS, "cfg/global_batch_size": 1024, "cfg/rampup_batch_size": [256, 128, 100000]}
    log = _write(tmp_path, "ramping.json", _gpt_log([3.0] * 40, ramping))
    assert main(["metrics", "--log", str(log), *RUN, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["global_batch_size"] == 2048


@needs_shared_log
@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--global-batch-size", "1024"], r"\(global_batch_size 2048\)"),
        (["--gpus", "100"], r"tensor 4 × pipeline 8 × context 1 = 32 GPUs"),
        (["--gpus", "384"], r"12 data-parallel replicas"),
    ],
)
def test_the_shared_logs_record_catches_wrong_options(
    capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    assert main(["metrics", "--log", str(SHARED_LOG), *RUN, *extra]) == 2
    assert_refused(capsys.readouterr(), message)


# ---------------------------------------------------------------------------- the window


@pytest.mark.parametrize("command", ["metrics", "plot"])
@pytest.mark.parametrize(
    ("window", "pattern"),
    [
        (["--start-step", "-1"], r"^error: argument --start-step: must be a step number, 0 or more, got -1 \(see "),
        (["--end-step", "-5"], r"^error: argument --end-step: must be a step number, 0 or more, got -5 \(see "),
        (["--start-step", "20", "--end-step", "19"], r"^error: --end-step 19 is before --start-step 20; "),
        (["--start-step", "40", "--end-step", "45"], r"^error: --start-step 40 is past the log's last step 39 "),
        (["--start-step", "10", "--end-step", "40"], r"^error: --end-step 40 is past the log's last step 39 "),
        (["--end-step", "9" * 53], r"^error: --end-step a 53-digit number is past the log's last step 39 "),
    ],
    ids=["negative start", "negative end", "end before start", "start past the end", "end past the end", "absurd end"],
)
def test_a_window_outside_the_log_is_refused_naming_the_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str, window: list[str], pattern: str
) -> None:
    """The log has steps 0–39: a window must lie within them, or nothing is averaged over what was asked."""
    argv = [command, "--log", str(valid_gpt_log(tmp_path)), *window]
    argv += RUN if command == "metrics" else ["--out", str(tmp_path / "run.png")]
    try:
        code = main(argv)
    except SystemExit as usage_error:
        code = usage_error.code  # type: ignore[assignment]
    assert code == 2
    assert_refused(capsys.readouterr(), pattern)


def test_a_window_before_the_logs_first_step_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A resumed run's own log starts at its checkpoint's step: the default window 10–30 is not in it."""
    log = _write(tmp_path, "resumed.json", _lines(*(dllogger_line(s, step_data(s, 3.0)) for s in range(100, 140))))
    assert main(["metrics", "--log", str(log), *RUN, "--model", "gpt-5b"]) == 2
    assert_refused(
        capsys.readouterr(), r"^error: --start-step 10 is before the log's first step 100 \(the log has steps 100–139\)"
    )


def test_a_window_at_the_logs_edges_is_accepted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = valid_gpt_log(tmp_path)
    assert main(["metrics", "--log", str(log), *RUN, "--start-step", "0", "--end-step", "39", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["steps_averaged"] == 40


# ---------------------------------------------------------------------------- a diverged run


def _diverged(loss_at: dict[int, str], steps: int = 40) -> str:
    """A GPT log whose loss at the given steps is the given JSON token (NaN, Infinity, 1e400...)."""
    lines = [dllogger_line("PARAMETER", GPT_PARAMETERS)]
    for step in range(steps):
        line = dllogger_line(step, step_data(step, 3.0, loss=5.0))
        if step in loss_at:
            line = line.replace('"reduced_train_loss": 5.0', f'"reduced_train_loss": {loss_at[step]}')
        lines.append(line)
    return _lines(*lines)


@pytest.mark.parametrize(
    ("loss_at", "step", "said"),
    [
        ({35: "NaN", 37: "NaN"}, 35, "NaN"),  # after the window: a line metrics does not decode
        ({20: "Infinity"}, 20, "infinite"),  # inside the window
        ({3: "-Infinity"}, 3, "minus infinite"),  # before it
        ({33: "1e400"}, 33, "infinite"),  # beyond a float
        ({38: "NaN", 12: "Infinity"}, 12, "infinite"),  # the first step, not the first line
    ],
    ids=["NaN after the window", "Infinity in the window", "-Infinity before it", "1e400", "the earliest"],
)
def test_a_run_whose_loss_turns_non_finite_is_reported_failed_at_that_step(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], loss_at: dict[int, str], step: int, said: str
) -> None:
    log = _write(tmp_path, "diverged.json", _diverged(loss_at))
    assert main(["metrics", "--log", str(log), *RUN]) == 1
    captured = capsys.readouterr()
    assert captured.err == ""
    assert re.search(rf"\nrun +FAILED at step {step}: reduced_train_loss is {said}\n", captured.out), captured.out
    assert "25.397" not in captured.out and "step time    3.000 s" in captured.out  # the figures are still there
    assert main(["metrics", "--log", str(log), *RUN, "--json"]) == 1
    result = json.loads(capsys.readouterr().out)
    assert result["failed_at_step"] == step
    assert result["failure"] == f"reduced_train_loss is {said} at step {step}"


@pytest.mark.parametrize(
    "line",
    [
        lambda step, loss: nemo2_line(step, 40, "3.0").replace(
            "reduced_train_loss: 11.03", f"reduced_train_loss: {loss}"
        ),
        lambda step, loss: nemo1_update(step, 40, "3.0").replace(
            f"reduced_train_loss={10 - step / 10:.3f}", f"reduced_train_loss={loss}"
        ),
    ],
    ids=["NeMo 2", "NeMo 1"],
)
@pytest.mark.parametrize(("loss", "said"), [("nan", "NaN"), ("inf", "infinite"), ("-inf", "minus infinite")])
def test_a_text_logs_non_finite_loss_fails_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], line: Any, loss: str, said: str
) -> None:
    text = _lines(*(line(step, loss if step >= 25 else "2.5") for step in range(40)))
    log = _write(tmp_path, "nemo.log", text)
    assert main(["metrics", "--log", str(log), *RUN, "--model", "gpt-5b", "--json"]) == 1
    result = json.loads(capsys.readouterr().out)
    assert (result["failed_at_step"], result["failure"]) == (25, f"reduced_train_loss is {said} at step 25")


def test_a_restart_that_redoes_the_diverged_steps_is_not_a_failure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Attempt 1's loss turns NaN at step 24 and it dies; attempt 2 resumes at step 20 and logs
    20–39 with a finite loss: the last attempt of each step is what the run did."""
    first = [dllogger_line(s, step_data(s, 3.0, loss=5.0 if s < 24 else math.nan)) for s in range(26)]
    second = [dllogger_line(s, step_data(s, 3.0, loss=4.0)) for s in range(20, 40)]
    log = _write(tmp_path, "restarted.json", _lines(dllogger_line("PARAMETER", GPT_PARAMETERS), *first, *second))
    assert main(["metrics", "--log", str(log), *RUN, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["failed_at_step"] is None


def test_a_healthy_runs_table_says_its_loss_is_finite(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["metrics", "--log", str(valid_gpt_log(tmp_path)), *RUN]) == 0
    assert "\nrun          reduced_train_loss finite at every step that logs it\n" in capsys.readouterr().out
    text_log = _write(
        tmp_path, "no-loss.log", _lines(*(f"iteration {s}/39 | train_step_timing in s: 3.0" for s in range(40)))
    )
    assert main(["metrics", "--log", str(text_log), *RUN, "--model", "gpt-5b"]) == 0
    assert "\nrun          no reduced_train_loss in the log: divergence not checked\n" in capsys.readouterr().out


def test_plot_reports_the_failure_too(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = _write(tmp_path, "diverged.json", _diverged({35: "NaN"}))
    out = tmp_path / "run.png"
    assert main(["plot", "--log", str(log), "--out", str(out)]) == 1
    assert capsys.readouterr().out == f"wrote {out}\nrun FAILED at step 35: reduced_train_loss is NaN\n"
    assert out.stat().st_size > 0


# ---------------------------------------------------------------------------- the model options


@pytest.mark.parametrize("command", ["metrics", "plot"])
def test_a_model_the_record_contradicts_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    """The record is what ran: a catalog model of another shape would give FLOPs of another model."""
    argv = [command, "--log", str(valid_gpt_log(tmp_path)), *RUN, "--model", "gpt3-175b"]
    assert main(argv + (["--out", str(tmp_path / "run.png")] if command == "plot" else [])) == 2
    assert_refused(
        capsys.readouterr(),
        r"^error: --model gpt3-175b contradicts the log's DLLogger PARAMETER record: num_layers 2 \(gpt3-175b: 96\), "
        r"hidden_size 64 \(gpt3-175b: 12288\), num_attention_heads 4 \(gpt3-175b: 96\); leave --model out",
    )


def test_a_model_the_record_agrees_with_is_accepted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = _write(tmp_path, "gpt-5b.json", _gpt_log([3.0] * 40, GPT_5B_PARAMETERS))
    assert main(["metrics", "--log", str(log), *RUN, "--model", "gpt-5b", "--seq-length", "2048", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["model_source"] == "catalog model gpt-5b"


@pytest.mark.parametrize(
    ("extra", "pattern"),
    [
        (
            ["--model", "gpt-5b", "--model-flops-per-sample", "1e15"],
            r"^error: --model and --model-flops-per-sample both give the model FLOPs; pass one",
        ),
        (
            ["--vocab-size", "32000", "--model-flops-per-sample", "1e15"],
            r"^error: --vocab-size has no effect with --model-flops-per-sample",
        ),
    ],
    ids=["--model", "--vocab-size"],
)
def test_model_options_that_contradict_each_other_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], pattern: str
) -> None:
    text_log = _write(tmp_path, "nemo2.log", _lines(*(nemo2_line(s, 40, "3.0") for s in range(40))))
    assert main(["metrics", "--log", str(text_log), *RUN, *extra]) == 2
    assert_refused(capsys.readouterr(), pattern)


def _plan(tmp_path: Path, **changes: Any) -> Path:
    """A run's plan as the stack output holds it (planners.nemo.RunPlan.to_plain), for the run
    the generated GPT logs describe."""
    plan = {
        "model": "gpt3-175b",
        "machine": "a3-megagpu-8g",
        "nodes": 32,
        "gpus": 256,
        "globalBatchSize": 2048,
        "sequenceLength": 2048,
        "precision": "fp8 (delayed scaling)",
        "publishedStepTimeS": 2.5,
        "predictedStepTimeS": 3.75,
        **changes,
    }
    path = tmp_path / "plan.json"
    path.write_text(json.dumps({"plan": {k: v for k, v in plan.items() if v is not None}}))
    return path


def test_a_plan_supplies_the_run_and_the_step_times_it_is_held_to(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """3 s steps against a 3.75 s prediction and a 2.5 s published step: 20 % faster than the
    planner said, 20 % slower than NVIDIA's row, in both directions and figures."""
    log = valid_gpt_log(tmp_path)
    assert main(["metrics", "--log", str(log), "--plan", str(_plan(tmp_path))]) == 0
    out = capsys.readouterr().out
    assert "3.75 s predicted by the layout planner: the run is 20.0% faster" in out
    assert "2.50 s published by NVIDIA at this layout: the run is 20.0% slower" in out
    assert main(["metrics", "--log", str(log), "--plan", str(_plan(tmp_path)), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["gpus"] == 256 and report["precision"] == "fp8" and report["accelerator"] == "h100"
    held = report["against"]
    assert held["predicted by the layout planner"]["measured_over_reference"] == pytest.approx(0.8)
    assert held["published by NVIDIA at this layout"]["measured_over_reference"] == pytest.approx(1.2)


def test_a_plan_without_references_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plan = _plan(tmp_path, publishedStepTimeS=None, predictedStepTimeS=None)
    assert main(["metrics", "--log", str(valid_gpt_log(tmp_path)), "--plan", str(plan)]) == 0
    assert "nothing: the plan holds no predicted or published step time" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("changes", "extra", "words"),
    [
        ({}, ["--gpus", "128"], "--gpus 128 disagrees with the plan's 256"),
        ({"machine": "a9-nothing"}, [], '`machine` "a9-nothing" is not a catalog machine'),
        ({"gpus": 0}, [], "`gpus` must be a positive whole number, got 0"),
        ({"predictedStepTimeS": "fast"}, [], "`predictedStepTimeS` must be a step time from 0.001 to"),
        ({"predictedStepTimeS": float("inf")}, [], "`predictedStepTimeS` must be a step time"),
        ({"publishedStepTimeS": float("nan")}, [], "`publishedStepTimeS` must be a step time"),
        ({"predictedStepTimeS": 1e-320}, [], "`predictedStepTimeS` must be a step time"),
        ({"precision": "int4"}, [], "`precision` must be bf16 or fp8"),
    ],
)
def test_a_bad_plan_is_one_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], changes: dict[str, Any], extra: list[str], words: str
) -> None:
    log = valid_gpt_log(tmp_path)
    assert main(["metrics", "--log", str(log), "--plan", str(_plan(tmp_path, **changes)), *extra]) == 2
    err = capsys.readouterr().err
    assert words in err and err.count("\n") == 1, err


def test_a_plan_given_as_the_engine_writes_it_and_a_gpu_in_capitals_are_accepted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Stack outputs hold numbers as floats; the accelerator's name is taken in any case."""
    plan = _plan(tmp_path, gpus=256.0, globalBatchSize=2048.0)
    log = str(valid_gpt_log(tmp_path))
    assert main(["metrics", "--log", log, "--plan", str(plan), "--accelerator", "H100"]) == 0
    assert "the run is 20.0% faster" in capsys.readouterr().out


def test_a_plan_nested_beyond_reason_is_one_error_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    assert main(["metrics", "--log", str(valid_gpt_log(tmp_path)), "--plan", str(deep)]) == 2
    err = capsys.readouterr().err
    assert "nested too deeply" in err and err.count("\n") == 1


def test_without_a_plan_every_throughput_option_is_needed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["metrics", "--log", str(valid_gpt_log(tmp_path)), "--gpus", "8"]) == 2
    assert "metrics needs --global-batch-size, --accelerator, --precision (or --plan FILE" in capsys.readouterr().err


@needs_shared_log
def test_the_a3_mega_example_is_held_to_its_plan(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The real 256-GPU GPT-3 175B log (gpu-recipes' measurement, outside the planner's fit)
    against the plan the A3 Mega example renders: the published step it was measured as, and
    the planner's prediction, which the log beats by under 10 %."""
    from harness.runner import run_stack  # noqa: PLC0415

    plan = run_stack("a3mega").exports["training"]["runs"]["gpt3-175b"]["plan"]
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    assert main(["metrics", "--log", str(SHARED_LOG), "--plan", str(path), "--json"]) == 0
    held = json.loads(capsys.readouterr().out)["against"]
    assert held["published by NVIDIA at this layout"]["measured_over_reference"] == pytest.approx(1.0, abs=0.001)
    assert 0.9 < held["predicted by the layout planner"]["measured_over_reference"] < 1.0


def test_a_stacks_outputs_name_the_run_whose_plan_is_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`pulumi stack output --json` (or a render's outputs.json) holds every run's plan under
    training.runs: --run picks one, and with one run it is the default."""
    plan = json.loads(_plan(tmp_path).read_text())
    outputs = tmp_path / "outputs.json"
    log = str(valid_gpt_log(tmp_path))
    outputs.write_text(json.dumps({"training": {"runs": {"a": plan, "b": plan}}}))
    assert main(["metrics", "--log", log, "--plan", str(outputs)]) == 2
    assert "holds runs a, b: name one with --run" in capsys.readouterr().err
    assert main(["metrics", "--log", log, "--plan", str(outputs), "--run", "c"]) == 2
    assert "--run c:" in capsys.readouterr().err
    assert main(["metrics", "--log", log, "--plan", str(outputs), "--run", "b"]) == 0
    assert "predicted by the layout planner" in capsys.readouterr().out
    outputs.write_text(json.dumps({"training": {"runs": {"a": plan}}}))
    assert main(["metrics", "--log", log, "--plan", str(outputs)]) == 0
    capsys.readouterr()
    assert main(["metrics", "--log", log, "--run", "a", *RUN]) == 2
    assert "--run names a run of --plan's outputs" in capsys.readouterr().err


def test_a_log_without_a_shape_takes_the_plans_model_and_sequence(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A NeMo 2 text log records no model: the plan's model at the plan's sequence length, not
    the model's default, gives the FLOPs."""
    log = tmp_path / "nemo2.log"
    log.write_text("\n".join(nemo2_line(step, 40, "4.000") for step in range(40)))
    changes = {"model": "llama3-8b", "machine": "a4-highgpu-8g", "gpus": 8, "globalBatchSize": 32,
               "precision": "bf16"}  # fmt: skip
    for sequence in (2048, 8192):
        plan = _plan(tmp_path, sequenceLength=sequence, **changes)
        assert main(["metrics", "--log", str(log), "--plan", str(plan), "--json"]) == 0
        result = json.loads(capsys.readouterr().out)
        assert result["seq_length"] == sequence
        assert result["model_flops_per_sample"] == pytest.approx(
            MODELS["llama3-8b"].architecture.flops_per_sample(sequence)
        )
