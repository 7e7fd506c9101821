"""Read an input in bounded time and memory, whatever it is: a file, a pipe, a FIFO, a device.

The input is read in chunks and cut into lines at newlines, and each line into its updates
at carriage returns (tqdm redraws a progress bar with them, so one NeMo 1.x line can hold a
whole epoch). Three limits turn an input that is not a log (/dev/zero, /dev/urandom, a FIFO
nothing writes to) into an error instead of a hang or an exhausted memory:

- `MAX_LINE_BYTES`: no update is longer; the longest real one, a DLLogger PARAMETER
  record, is a few KiB;
- `MAX_GAP_BYTES`: a log shows a record of its kind at least this often, the first one
  within this many bytes of its start; the start-up output of NeMo and NCCL before a
  record is far shorter;
- `IDLE_TIMEOUT_S`: a pipe, FIFO or device delivers data at least this often; a FIFO that
  no writer opens is refused after it. `kubectl logs` and `gcloud storage cat` deliver within
  seconds; a producer that needs longer (a `gcloud logging read` query) writes a file first.
  Regular files never wait.
"""

from __future__ import annotations

import os
import select
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from types import TracebackType

from analysis.errors import AnalysisError

MAX_LINE_BYTES = 1 << 20
MAX_GAP_BYTES = 64 << 20
IDLE_TIMEOUT_S = 10.0
_CHUNK_BYTES = 1 << 20


def _mib(size: int) -> str:
    return f"{size / (1 << 20):g} MiB"


class Lines:
    """(line number, update) pairs of an input, numbered by newlines, each decoded from UTF-8.

    `what` names the kind of input for messages ("a training log (...)"); `is_record` says
    whether an update is a record of that kind. Use as a context manager: leaving it closes
    the input, so a writer on the other end of a pipe stops at once.
    """

    def __init__(self, path: Path, what: str, is_record: Callable[[str], bool], *, strict_utf8: bool = False) -> None:
        self.path = path
        self._what = what
        self._is_record = is_record
        self._errors = "strict" if strict_utf8 else "replace"
        try:
            # Non-blocking: opening a FIFO would otherwise wait for a writer, without a limit.
            self._fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        except FileNotFoundError:
            raise AnalysisError(f"{path} does not exist") from None
        except OSError as e:
            raise AnalysisError(f"cannot read {path}: {e.strerror or e}") from None
        self._waits = not stat.S_ISREG(os.fstat(self._fd).st_mode)

    def __enter__(self) -> Lines:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        os.close(self._fd)

    def __iter__(self) -> Iterator[tuple[int, str]]:
        gap = 0
        for number, raw in self._updates():
            try:
                text = raw.decode("utf-8", self._errors)
            except UnicodeDecodeError:
                raise AnalysisError(f"{self.path}:{number}: not UTF-8 text: not {self._what}") from None
            if self._is_record(text):
                gap = 0
            else:
                gap += len(raw) + 1
                if gap > MAX_GAP_BYTES:
                    raise AnalysisError(
                        f"{self.path}: {_mib(MAX_GAP_BYTES)} without a record (up to line {number}): not {self._what}"
                    )
            yield number, text

    def _updates(self) -> Iterator[tuple[int, bytes]]:
        number = 1
        tail = b""  # the update in progress: the rest of the last chunk after its last line break
        for chunk in self._chunks():
            lines = (tail + chunk).split(b"\n")
            tail = lines.pop()
            for line in lines:
                for update in line.split(b"\r") if b"\r" in line else (line,):
                    self._check_length(number, update)
                    yield number, update
                number += 1
            if b"\r" in tail:
                *done, tail = tail.split(b"\r")
                for update in done:
                    self._check_length(number, update)
                    yield number, update
            self._check_length(number, tail)
        if tail:
            yield number, tail

    def _check_length(self, number: int, update: bytes) -> None:
        if len(update) > MAX_LINE_BYTES:
            raise AnalysisError(
                f"{self.path}:{number}: a line longer than {_mib(MAX_LINE_BYTES)} without a line break: "
                f"not {self._what}"
            )

    def _chunks(self) -> Iterator[bytes]:
        while True:
            if self._waits and not select.select([self._fd], [], [], IDLE_TIMEOUT_S)[0]:
                raise AnalysisError(
                    f"{self.path}: no data for {IDLE_TIMEOUT_S:g} s: a pipe, FIFO or device must deliver "
                    f"{self._what} (a FIFO that nothing writes to is refused)"
                )
            try:
                chunk = os.read(self._fd, _CHUNK_BYTES)
            except BlockingIOError:
                continue
            except OSError as e:
                raise AnalysisError(f"cannot read {self.path}: {e.strerror or e}") from None
            if not chunk:
                return
            yield chunk
