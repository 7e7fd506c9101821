"""`python -m analysis metrics`: output, exit codes, and every kind of bad input → exit 2 with a message."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from analysis.__main__ import main
from tests.analysis.logs_for_tests import (
    GPT_PARAMETERS,
    ROOT,
    SHARED_LOG,
    dllogger_line,
    needs_shared_log,
    nemo2_line,
    step_data,
    valid_gpt_log,
    write_dllogger,
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
    "a foreign line": (
        _lines(dllogger_line("PARAMETER", GPT_PARAMETERS), "Traceback (most recent call last):"),
        [],
        r":2: not a DLLogger record",
    ),
    "window after the last step": (
        _lines(dllogger_line("PARAMETER", GPT_PARAMETERS), *(dllogger_line(s, step_data(s, 3.0)) for s in range(5))),
        [],
        r"no 'train_step_timing in s' values for steps 10–30 .*the log has steps 0–4",
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
        r"unknown accelerator 'tpu-v9'; known: h100, h200, b200, a100",
    ),
    "no fp8 peak": (None, ["--accelerator", "a100"], "a100 has no published dense fp8 peak"),
    "unknown model": (None, ["--model", "gpt-9"], r"unknown model 'gpt-9'; known: gpt-5b, gpt3-175b, llama3.1-8b"),
    "start after end": (None, ["--start-step", "31", "--end-step", "30"], "start step 31 is after its end step 30"),
}


@pytest.mark.parametrize("case", HOSTILE_LOGS)
def test_bad_input_exits_2_with_a_message(tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str) -> None:
    text, extra, message = HOSTILE_LOGS[case]
    log = valid_gpt_log(tmp_path) if text is None else _write(tmp_path, "log.json", text)
    argv = ["metrics", "--log", str(log), *RUN, *extra]
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
