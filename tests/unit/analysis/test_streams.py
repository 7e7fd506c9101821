"""Inputs that are not logs (/dev/zero, endless garbage, a FIFO nothing writes to) are refused
by every command in bounded time and memory, with one error line; a log delivered through a
FIFO is read."""

from __future__ import annotations

import contextlib
import os
import re
import resource
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from types import FrameType

import pytest

from analysis import streams
from analysis.__main__ import main
from tests.unit.analysis.logs_for_tests import GPT_PARAMETERS, ROOT, dllogger_line, nemo1_update, step_data

RUN = ["--gpus", "256", "--global-batch-size", "2048", "--accelerator", "h100", "--precision", "fp8"]


def command(name: str, path: Path | str, tmp_path: Path) -> list[str]:
    """The command `name` reading `path` as its input."""
    return {
        "metrics": ["metrics", "--log", str(path), *RUN],
        "plot": ["plot", "--log", str(path), "--out", str(tmp_path / "run.png")],
        "goodput": ["goodput", "--events", str(path), "--reference-step-time", "10"],
        "nccl": ["nccl", "--log", str(path)],
    }[name]


COMMANDS = ["metrics", "plot", "goodput", "nccl"]


def assert_one_error_line(err: str, pattern: str) -> None:
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert re.search(pattern, err), err


@contextlib.contextmanager
def deadline(seconds: int) -> Iterator[None]:
    """Fail the test, instead of hanging the suite, if the block runs longer (a read that blocks included)."""

    def expire(signum: int, frame: FrameType | None) -> None:
        raise TimeoutError(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _limit_memory() -> None:
    limit = 2 << 30
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


@pytest.mark.parametrize("name", COMMANDS)
def test_dev_zero_is_refused_at_once(tmp_path: Path, name: str) -> None:
    """An endless line of NUL bytes: refused after 1 MiB, not read until memory runs out.
    The real entry point, under a memory limit and a timeout, so a regression cannot take the
    machine down with it."""
    done = subprocess.run(
        [sys.executable, "-m", "analysis", *command(name, "/dev/zero", tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        preexec_fn=_limit_memory,
    )
    assert (done.returncode, done.stdout) == (2, ""), done.stderr[-2000:]
    assert_one_error_line(done.stderr, r"^error: /dev/zero:1: a line longer than 1 MiB without a line break: not ")


class Writer(threading.Thread):
    """Writes `head`, then `body` over and over until the reader closes the FIFO (or `limit`
    bytes are out), then `stall_s` seconds holding it open before it closes it."""

    def __init__(self, fifo: Path, head: bytes, body: bytes = b"", limit: int = 256 << 20, stall_s: float = 0) -> None:
        super().__init__(daemon=True)
        self.fifo, self.head, self.body, self.limit, self.stall_s = fifo, head, body, limit, stall_s
        self.written = 0
        self.stalled = threading.Event()
        self.release = threading.Event()

    def run(self) -> None:
        with contextlib.suppress(BrokenPipeError), self.fifo.open("wb", buffering=0) as out:
            self.written += out.write(self.head)
            while self.body and self.written < self.limit:
                self.written += out.write(self.body)
            if self.stall_s:
                self.release.wait(self.stall_s)


def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "stream"
    os.mkfifo(path)
    return path


# Lines of 60 KB that are no record: for goodput, Cloud Logging entries without an event.
NOISE = {
    "metrics": b"n" * 60_000 + b"\n",
    "plot": b"n" * 60_000 + b"\n",
    "goodput": b'{"textPayload": "' + b"n" * 60_000 + b'"}\n',
    "nccl": b"n" * 60_000 + b"\n",
}


@pytest.mark.parametrize("name", COMMANDS)
def test_endless_lines_without_a_record_are_refused_after_the_gap_limit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    """A FIFO fed lines of noise, none a record of the command's input: refused once the gap
    limit (64 MiB; 4 MiB here, to keep the suite fast) passed without one, and the writer
    stops on a closed pipe well before its 256 MiB."""
    monkeypatch.setattr(streams, "MAX_GAP_BYTES", 4 << 20)
    path = fifo(tmp_path)
    writer = Writer(path, b"", body=NOISE[name])
    writer.start()
    with deadline(30):
        code = main(command(name, path, tmp_path))
    writer.join(10)
    assert code == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert_one_error_line(captured.err, rf"^error: {re.escape(str(path))}: 4 MiB without a record \(up to line \d+\)")
    assert not writer.is_alive()
    assert writer.written < streams.MAX_GAP_BYTES + 8 * streams.MAX_LINE_BYTES


@pytest.mark.parametrize("name", COMMANDS)
def test_a_fifo_nothing_writes_to_is_refused_after_the_idle_timeout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    monkeypatch.setattr(streams, "IDLE_TIMEOUT_S", 0.2)
    path = fifo(tmp_path)
    with deadline(10):
        assert main(command(name, path, tmp_path)) == 2
    assert_one_error_line(
        capsys.readouterr().err, rf"^error: {re.escape(str(path))}: no data for 0\.2 s: a pipe, FIFO or device must"
    )


def _dllogger_text(steps: int) -> bytes:
    lines = [dllogger_line("PARAMETER", GPT_PARAMETERS), *(dllogger_line(s, step_data(s, 3.0)) for s in range(steps))]
    return ("\n".join(lines) + "\n").encode()


def test_a_log_that_stops_arriving_is_refused_after_the_idle_timeout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Half a log, then the writer holds the FIFO open and writes nothing more."""
    monkeypatch.setattr(streams, "IDLE_TIMEOUT_S", 0.2)
    path = fifo(tmp_path)
    writer = Writer(path, _dllogger_text(20), stall_s=10)
    writer.start()
    with deadline(10):
        assert main(command("metrics", path, tmp_path)) == 2
    writer.release.set()
    writer.join(10)
    assert_one_error_line(capsys.readouterr().err, r"no data for 0\.2 s")


def test_a_log_through_a_fifo_is_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`--log <(kubectl logs ...)` hands the tool a pipe: a whole log through one is a log."""
    path = fifo(tmp_path)
    writer = Writer(path, _dllogger_text(40))
    writer.start()
    with deadline(10):
        assert main([*command("metrics", path, tmp_path), "--json"]) == 0
    writer.join(10)
    assert '"steps_averaged": 21' in capsys.readouterr().out


def test_a_long_progress_bar_line_is_a_log_not_an_overlong_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """NeMo 1.x redraws its tqdm bar with carriage returns: one line of 2 MiB, each update short."""

    total = 16_000
    line = "\r".join(nemo1_update(step, total, "3.000") for step in range(total))
    assert len(line) > 2 * streams.MAX_LINE_BYTES
    path = tmp_path / "nemo1.log"
    path.write_text(line + "\n")
    assert main([*command("metrics", path, tmp_path), "--model", "gpt-5b", "--json"]) == 0
    assert '"step_time_s": 3.0' in capsys.readouterr().out
