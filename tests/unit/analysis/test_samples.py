"""The sample logs in examples/logs/: exactly what `python -m analysis.samples` writes, small,
with the known answers worked out here from their inputs; and every `python -m analysis`
command of the analytics docs runs as written on them and prints what the docs show."""

from __future__ import annotations

import json
import re
import shlex
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from analysis import samples
from analysis.__main__ import main
from facts.machines import ACCELERATORS, Precision
from harness.runner import run_stack
from tests.unit.analysis.logs_for_tests import ROOT
from tools.docs_commands import doc_commands, shown_pattern

LOGS = ROOT / "examples" / "logs"
DOCS = ROOT / "docs" / "analytics.md"


def test_the_committed_samples_are_what_the_generator_writes() -> None:
    """Regenerate with `python -m analysis.samples --write examples/logs`."""
    files = samples.sample_files()
    assert sorted(path.name for path in LOGS.iterdir()) == sorted(files)
    for name, text in files.items():
        assert (LOGS / name).read_text() == text, f"examples/logs/{name} is out of date"


def test_the_samples_are_small() -> None:
    sizes = {path.name: path.stat().st_size for path in LOGS.iterdir()}
    assert max(sizes.values()) < 16_000 and sum(sizes.values()) < 40_000, sizes


def test_the_generator_writes_the_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert samples.main(["--write", str(tmp_path / "logs")]) == 0
    assert capsys.readouterr().out == f"wrote {len(samples.sample_files())} files to {tmp_path / 'logs'}\n"
    assert {path.name: path.read_text() for path in (tmp_path / "logs").iterdir()} == samples.sample_files()


# ---------------------------------------------------------------------------- known answers


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, object]]:
    code = main([*argv, "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_the_dllogger_samples_known_answer(capsys: pytest.CaptureFixture[str]) -> None:
    """gpt-5b: 24 layers, hidden 4096, GPT-2 vocabulary 50257, sequence 2048; Megatron's count
    72·L·s·h²·(1 + s/6h + V/12Lh) per sample; 2048 samples in 19.4 s on 16 GPUs."""
    layers, hidden, vocab, seq = 24, 4096, 50257, 2048
    flops = 72 * layers * seq * hidden**2 * (1 + seq / (6 * hidden) + vocab / (12 * layers * hidden))
    tflops = flops * 2048 / 19.4 / 16 / 1e12
    peak = ACCELERATORS["h100"].peak_tflops(Precision.BF16)
    code, result = _run(capsys, "metrics", "--log", str(LOGS / "dllogger.json"), *samples.METRICS_OPTIONS)
    assert code == 0
    assert result["step_time_s"] == pytest.approx(19.4, rel=1e-12)
    assert result["steps_averaged"] == 21
    assert result["tokens_per_s"] == pytest.approx(2048 * seq / 19.4)
    assert result["tflops_per_gpu"] == pytest.approx(tflops)
    assert result["mfu"] == pytest.approx(tflops / peak)
    assert (result["failed_at_step"], result["failure"]) == (None, None)

    code, result = _run(capsys, "metrics", "--log", str(LOGS / "diverged.json"), *samples.METRICS_OPTIONS)
    assert code == 1
    assert (result["failed_at_step"], result["failure"]) == (35, "reduced_train_loss is NaN at step 35")
    assert result["tflops_per_gpu"] == pytest.approx(tflops)


def test_the_goodput_samples_known_answer(capsys: pytest.CaptureFixture[str]) -> None:
    """10:00 → 12:35 is 9300 s; checkpoints from step 0 to 400 at 19.4 s a step keep 7760 s."""
    code, report = _run(capsys, "goodput", "--events", str(LOGS / "events.jsonl"), "--reference-step-time", "19.4")
    assert code == 0
    assert report["total_runtime_s"] == 9300
    assert report["step_progress"] == 400
    assert report["goodput_percent"] == pytest.approx(400 * 19.4 / 9300 * 100)
    assert (report["job_starts"], report["restarts"], report["checkpoints_saved"]) == (2, 1, 4)


def test_the_nccl_samples_known_answer(capsys: pytest.CaptureFixture[str]) -> None:
    """Each size s takes 50 µs + s / 360 GB/s; busbw = s / time × 15/16 at 16 ranks; nccl-tests
    averages both halves of the 24 sizes 1 KiB–8 GiB."""
    sizes = [1024 << k for k in range(24)]
    busbw = [size / (50e-6 + size / 360e9) / 1e9 * 15 / 16 for size in sizes]
    average = sum(busbw) / len(busbw)
    log = str(LOGS / "all_gather.log")
    code, report = _run(capsys, "nccl", "--log", log)
    assert (code, report["verdict"], report["bandwidth_verdict"]) == (0, None, None)
    (test,) = report["tests"]  # type: ignore[misc]
    assert test["avg_busbw_gbps"] == pytest.approx(average, abs=0.0005)
    assert (test["ranks"], test["hosts"], test["devices"]) == (
        16,
        ["fabric-nccl-0-0", "fabric-nccl-0-1"],
        ["NVIDIA H200"],
    )
    for expect in ("rdma", "a3-ultragpu-8g"):
        code, report = _run(capsys, "nccl", "--log", log, "--expect", expect)
        assert (code, report["verdict"]) == (0, "PASS")
        assert report["tests"][0]["comparison"]["average_busbw_gbps"] == pytest.approx(average, abs=0.0005)  # type: ignore[index]


# ---------------------------------------------------------------------------- the docs


@dataclass(frozen=True)
class ConsoleCommand:
    line: int
    argv: list[str]
    exit_code: int
    # What the docs show it printing (stderr, then stdout), as tools.docs_commands.shown_pattern reads it.
    shown: tuple[str, ...]


def console_commands(text: str) -> Iterator[ConsoleCommand]:
    """The `$ python -m analysis…` commands of the page's console blocks, read as `make docs-check` reads them."""
    for command in doc_commands(text):
        if command.shown is not None:
            argv = shlex.split(command.text.partition("#")[0])
            yield ConsoleCommand(command.line, argv, command.exit_code, command.shown)


COMMANDS = list(console_commands(DOCS.read_text()))


def test_the_docs_show_each_command() -> None:
    names = {" ".join(c.argv[:5]) for c in COMMANDS}
    assert {
        "python -m analysis.samples --write examples/logs",
        "python -m analysis metrics --log",
        "python -m analysis plot --log",
        "python -m analysis goodput --events",
        "python -m analysis nccl --log",
    } <= names
    assert len(COMMANDS) >= 10


@pytest.mark.parametrize("command", COMMANDS, ids=[f"line {c.line}" for c in COMMANDS])
def test_each_command_of_the_docs_runs_as_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, command: ConsoleCommand
) -> None:
    """From a copy of the repository's examples/logs, so what a command writes stays out of the checkout."""
    shutil.copytree(LOGS, tmp_path / "examples" / "logs")
    monkeypatch.chdir(tmp_path)
    program, argv = command.argv[:3], command.argv[3:]
    if "--plan" in argv:
        # The render the docs run first (`python -m tools.render --stack <stack>`) writes the outputs.
        outputs = Path(argv[argv.index("--plan") + 1])
        outputs.parent.mkdir(parents=True)
        outputs.write_text(json.dumps(run_stack(outputs.parent.name).exports))
    entry = {"python -m analysis": main, "python -m analysis.samples": samples.main}[" ".join(program)]
    try:
        code = entry(argv)
    except SystemExit as usage_error:
        code = usage_error.code  # type: ignore[assignment]
    captured = capsys.readouterr()
    assert code == command.exit_code, captured.err
    printed = captured.err + captured.out
    assert re.fullmatch(shown_pattern(command.shown), printed.rstrip("\n") + "\n" if command.shown else printed), (
        f"line {command.line}: prints\n{printed}"
    )
