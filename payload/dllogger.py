"""The part of NVIDIA's `dllogger` API that NeMo's DLLogger calls, for images without the package.

NeMo (`nemo/utils/loggers/dllogger.py`) uses `Verbosity`, `JSONStreamBackend(verbosity, file)`,
`StdOutBackend(verbosity)`, `init(backends=...)`, `log(step=..., data=...)` and `flush()`.
Records are written as dllogger writes them, one per line:

    DLLL {"timestamp": "<epoch s>", "datetime": "<local time>", "elapsedtime": "<s since init>",
          "type": "LOG", "step": <int | "PARAMETER" | [...]>, "data": {...}}

which is what `python -m analysis` reads. The JSON file is appended to, never truncated, so a
restarted run adds to the log of its earlier attempts (the analytics keep each step's last
record).
"""

import datetime
import json
import sys
import time
from enum import IntEnum


class Verbosity(IntEnum):
    OFF = -1
    DEFAULT = 0
    VERBOSE = 1


class _Backend:
    def __init__(self, verbosity):
        self.verbosity = verbosity

    def write(self, line):
        raise NotImplementedError

    def flush(self):
        pass


class JSONStreamBackend(_Backend):
    def __init__(self, verbosity, filename, append=True):
        super().__init__(verbosity)
        self._file = open(filename, "a" if append else "w", buffering=1)  # noqa: SIM115 - open for the run

    def write(self, line):
        self._file.write(line + "\n")

    def flush(self):
        self._file.flush()


class StdOutBackend(_Backend):
    def write(self, line):
        sys.stdout.write(line + "\n")

    def flush(self):
        sys.stdout.flush()


_state = {"backends": [], "started": time.time()}


def init(backends):
    _state.update(backends=list(backends), started=time.time())


def _record(step, data):
    now = time.time()
    return "DLLL " + json.dumps(
        {
            "timestamp": str(now),
            "datetime": str(datetime.datetime.fromtimestamp(now)),
            "elapsedtime": str(now - _state["started"]),
            "type": "LOG",
            "step": list(step) if isinstance(step, tuple) else step,
            "data": data,
        },
        default=str,
    )


def log(step, data, verbosity=Verbosity.DEFAULT):
    line = _record(step, data)
    for backend in _state["backends"]:
        if verbosity <= backend.verbosity:
            backend.write(line)


def flush():
    for backend in _state["backends"]:
        backend.flush()
