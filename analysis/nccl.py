"""Read nccl-tests output (all_gather_perf, all_reduce_perf, ...) and judge it.

The format is nccl-tests' own (NVIDIA/nccl-tests src/util.cu and src/common.cu@a0b82b2;
older releases print the same table). One test is a preamble, a table and a footer:

    # Collective test starting: all_gather_perf            (v2.16 and later)
    # nThread 1 nGpus 1 minBytes 1048576 maxBytes 536870912 step: 2(factor) warmup iters: 5 ...
    #  Rank  0 Group  0 Pid    166 on nccl-host-1 device  0 [0000:04:00] NVIDIA H100 80GB HBM3
    #                                                    out-of-place                       in-place
    #       size         count      type   redop    root     time   algbw   busbw #wrong     time ...
    #        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us) ...
         1048576         16384     float    none      -1    996.7    1.05    0.99    N/A   1007.1 ...
    # Out of bounds values : 0 OK
    # Avg bus bandwidth    : 30.9622

A log may hold several tests one after another, and lines from elsewhere: NCCL's own
`host:pid:tid [dev] NCCL INFO` lines, the launcher's output, the `mpirun` or `bash -x`
command line. Lines may carry a prefix: `kubectl logs --prefix` (`[pod/name/container] `),
`kubectl logs --timestamps` (an RFC 3339 time) and `mpirun --tag-output` (`[1,0]<stdout>:`).

The collective comes from the `Collective test starting` line, else from the last mention of a
benchmark binary (`all_gather_perf`, the gpu-recipes launchers' `Benchmark: all_gather`) before
the test, else from `--collective`, else from the file name the fabric check writes
(`<collective>.log`, payload/nccl_test.sh). The GPU count is the number of `#  Rank` lines (the hosts
named there give the node count); for the collectives whose size column counts every rank's
share, size / (count × type size) gives it too.

A table whose numbers cannot be true is refused (AnalysisError naming the line): a truncated
or unreadable row, a NaN, infinite or negative time or bandwidth, a count that does not match
the size, a busbw that is not algbw × the collective's factor, an algbw that is not size / time,
and an `Avg bus bandwidth` that is not the mean of the table's busbw values (rows lost or
altered). `#wrong` other than 0, or `Out of bounds values` other than 0, is a FAIL, not an
error: the log is readable and says the data was wrong. `N/A` means nccl-tests did not check
the data (`-c 0`); the report says so.

Only a published figure (`--expect`, a GPUDirect flavour or a machine type) judges the
bandwidth: without one the verdict is none, unless the data was wrong (FAIL). Correct data
alone is never a PASS. With one, a test of the published collective, GPU count, node count,
GPU model and data type is judged when its sweep reaches the largest published size: the
exact published sweep by its own average, any other at the sizes both ran (`Comparison`).
"""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from analysis.errors import AnalysisError
from analysis.streams import Lines
from facts.machines import MACHINE_TYPES
from facts.nccl import BENCHMARKS, PUBLISHED, PublishedRun

# Bytes per element of nccl-tests' data types (NVIDIA/nccl-tests src/common.cu@a0b82b2
# test_typenames; `char` and `int` are the NCCL 1 names).
TYPE_SIZES: Mapping[str, int] = {
    "int8": 1, "uint8": 1, "int32": 4, "uint32": 4, "int64": 8, "uint64": 8, "half": 2, "float": 4,
    "double": 8, "bfloat16": 2, "f8e4m3": 1, "f8e5m2": 1, "char": 1, "int": 4,
}  # fmt: skip
# The redop column: the reductions (test_opnames), or `none` for the collectives without one.
REDUCTIONS = ("sum", "prod", "max", "min", "avg", "mulsum")
_REDOPS = frozenset((*REDUCTIONS, "none"))


@dataclass(frozen=True)
class Collective:
    """What nccl-tests prints for one benchmark (src/<name>.cu@a0b82b2, *GetCollByteCount and *GetBw)."""

    name: str
    reduces: bool
    # The size column is count × type size × ranks (True) or count × type size (False).
    size_counts_every_rank: bool

    def bus_factor(self, ranks: int) -> float:
        """busbw / algbw at `ranks` ranks."""
        if self.name == "all_reduce":
            return 2 * (ranks - 1) / ranks
        if self.name in ("all_gather", "reduce_scatter", "alltoall", "gather", "scatter"):
            return (ranks - 1) / ranks
        return 1.0  # broadcast, reduce, sendrecv


COLLECTIVES: Mapping[str, Collective] = {
    c.name: c
    for c in (
        Collective("all_gather", reduces=False, size_counts_every_rank=True),
        Collective("all_reduce", reduces=True, size_counts_every_rank=False),
        Collective("alltoall", reduces=False, size_counts_every_rank=True),
        Collective("broadcast", reduces=False, size_counts_every_rank=False),
        Collective("gather", reduces=False, size_counts_every_rank=True),
        Collective("reduce", reduces=True, size_counts_every_rank=False),
        Collective("reduce_scatter", reduces=True, size_counts_every_rank=True),
        Collective("scatter", reduces=False, size_counts_every_rank=True),
        Collective("sendrecv", reduces=True, size_counts_every_rank=False),
    )
}

# BENCHMARKS also names alltoallv and hypercube, which are not checked: alltoallv's size and
# algbw follow its generated pattern, and hypercube prints an empty redop column.
_NAMES = "|".join(sorted(BENCHMARKS, key=len, reverse=True))
_STARTING = re.compile(r"^Collective test starting:\s*(\S+)")
_PROGRAM = re.compile(rf"(?<![\w])({_NAMES})_perf(?:_mpi)?(?![\w])")
_BENCHMARK = re.compile(rf"\bBenchmark:\s*({_NAMES})\b")
_RANK = re.compile(r"^Rank\s+(\d+)\b(?:.*?\bon\s+(\S+)\s+device\s+\d+\s+\[[^\]]*\]\s+(.+?))?\s*$")
_OUT_OF_BOUNDS = re.compile(r"^Out of bounds values\s*:\s*(\S+)")
_AVERAGE = re.compile(r"^Avg bus bandwidth\s*:\s*(\S*)")
_MEASURES = ("time", "algbw", "busbw")
# Prefixes other tools put before nccl-tests' lines (see the module docstring).
_PREFIX_TOKEN = re.compile(
    r"\[[^\s\]]*\]:?|\[\d+,\d+\]<\w+>:|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)"
)
_MPIRUN_TAG = re.compile(r"^\[\d+,\d+\]<\w+>:(?=\S)")
_GB = 1e9


@dataclass(frozen=True)
class Measurement:
    """One half of a row: out-of-place or in-place."""

    time_us: float
    algbw: float
    busbw: float
    # None: `N/A`, nccl-tests did not check the data.
    wrong: int | None
    # Half the last printed digit of time, algbw and busbw: the most rounding moved them.
    precision: tuple[float, float, float] = (0.0, 0.0, 0.0)


@dataclass(frozen=True)
class Row:
    line: int
    size: int
    count: int
    type: str
    redop: str
    root: int | None
    out_of_place: Measurement
    in_place: Measurement


@dataclass(frozen=True)
class NcclTest:
    number: int
    collective: str | None
    # Where the collective's name came from: "log", "command line in the log", "--collective", "".
    collective_source: str
    ranks: int | None
    hosts: tuple[str, ...]
    devices: tuple[str, ...]
    header_line: int
    rows: tuple[Row, ...]
    out_of_bounds: int | None
    avg_busbw: float
    avg_line: int

    @property
    def data_checked(self) -> bool:
        return any(m.wrong is not None for row in self.rows for m in (row.out_of_place, row.in_place))

    @property
    def wrong(self) -> int:
        return sum(m.wrong or 0 for row in self.rows for m in (row.out_of_place, row.in_place))

    @property
    def benchmark(self) -> str:
        return f"{self.collective}_perf" if self.collective else "a collective the log does not name"

    def describe(self) -> str:
        gpus = f"{self.ranks} GPUs" if self.ranks is not None else "an unknown number of GPUs"
        nodes = f" on {len(self.hosts)} node{'' if len(self.hosts) == 1 else 's'}" if self.hosts else ""
        return f"test {self.number} ({self.benchmark}, {gpus}{nodes}, line {self.header_line})"


@dataclass
class _Table:
    """A test being read."""

    header_line: int
    layout: _Layout
    preamble: _Preamble
    rows: list[Row] = field(default_factory=list)
    out_of_bounds: int | None = None
    # Seconds per unit of the time column, from the units line ("(us)", older "(ms)"); None: unknown.
    time_unit: float | None = None


@dataclass
class _Preamble:
    """What the lines before a table say about it."""

    named: str | None = None
    mentioned: str | None = None
    ranks: dict[int, tuple[str | None, str | None]] = field(default_factory=dict)


@dataclass(frozen=True)
class _Layout:
    """Column positions of a table, from its header line."""

    columns: int
    has_root: bool
    cputime: bool
    timestamp: bool
    # Index of `time` (then algbw, busbw, #wrong) for out-of-place and in-place.
    out_of_place: int
    in_place: int


# ---------------------------------------------------------------------------- reading


def read_nccl_log(path: Path, collective: str | None = None) -> list[NcclTest]:
    """Every test in the log, checked; `collective` names those the log does not name.
    The input is read within the limits of `analysis.streams`."""
    with Lines(path, "nccl-tests output", _is_record) as lines:
        tests, blank = _parse(path, lines, collective, _collective_named_by(path))
    if blank:
        raise AnalysisError(f"{path} is empty")
    if not tests:
        raise AnalysisError(
            f"{path} has no nccl-tests results table (a '#  size  count  type ...' header, rows and "
            "'# Avg bus bandwidth'); is it the output of an nccl-tests benchmark such as all_gather_perf?"
        )
    return tests


def _collective_named_by(path: Path) -> str | None:
    """The collective of a fabric check's output file: scripts/nccl_test.sh writes <collective>.log."""
    return path.stem if path.suffix == ".log" and path.stem in BENCHMARKS else None


def _is_record(line: str) -> bool:
    """A table's header or footer: a log shows one at least every `streams.MAX_GAP_BYTES`."""
    return "busbw" in line or "Avg bus bandwidth" in line


def _parse(
    path: Path, lines: Iterable[tuple[int, str]], collective: str | None, file_collective: str | None
) -> tuple[list[NcclTest], bool]:
    """The tests, and whether the input was blank."""
    tests: list[NcclTest] = []
    preamble = _Preamble()
    table: _Table | None = None
    blank = True
    for number, raw in lines:
        where = f"{path}:{number}"
        blank = blank and not raw.strip()
        content = _content(raw)
        if not content:
            continue
        if content[0].startswith("#"):
            comment = " ".join(content)[1:].strip()
            if table is None:
                layout = _layout(where, comment)
                if layout is not None:
                    # Tables with a root column (nccl-tests 2.x) print µs; the oldest, ms or µs.
                    table = _Table(number, layout, preamble, time_unit=1e-6 if layout.has_root else None)
                else:
                    _read_preamble(comment, preamble)
                continue
            if _layout(where, comment) is not None:
                raise AnalysisError(
                    f"{where}: a results table starts before the one at line {table.header_line} ends "
                    "('# Avg bus bandwidth' missing): is the log truncated?"
                )
            if (match := _RANK.match(comment)) and not table.rows:
                # MPI may print other processes' device lines after the header.
                table.preamble.ranks[int(match.group(1))] = (match.group(2), match.group(3))
            elif not table.rows and comment.startswith("("):
                table.time_unit = 1e-6 if "(us)" in comment else 1e-3 if "(ms)" in comment else None
            elif match := _OUT_OF_BOUNDS.match(comment):
                table.out_of_bounds = _count(where, "Out of bounds values", match.group(1))
            elif match := _AVERAGE.match(comment):
                average = (_number(where, "Avg bus bandwidth", match.group(1)), _precision(match.group(1)))
                tests.append(
                    _finish(
                        path,
                        len(tests) + 1,
                        table,
                        average=average,
                        avg_line=number,
                        named=(collective, file_collective),
                    )
                )
                table, preamble = None, _Preamble()
            continue
        if table is None:
            # The substring tests first: the patterns are slow on long lines of other output.
            if "_perf" in raw or "Benchmark:" in raw:
                text = " ".join(content)
                named = _PROGRAM.findall(text) or _BENCHMARK.findall(text)
                if named:
                    preamble.mentioned = named[-1]
            continue
        if content[0].isdigit() or _looks_like_a_row(content):
            table.rows.append(_row(where, number, content, table.layout))
    if table is not None:
        raise AnalysisError(
            f"{path}: the results table at line {table.header_line} has no '# Avg bus bandwidth' line after it: "
            "the log is truncated"
        )
    return tests, blank


def _content(line: str) -> list[str]:
    """The line's tokens without the prefixes other tools put before nccl-tests' output."""
    tokens = line.split()
    while tokens and _PREFIX_TOKEN.fullmatch(tokens[0]):
        tokens.pop(0)
    if tokens and (tag := _MPIRUN_TAG.match(tokens[0])):
        tokens[0] = tokens[0][tag.end() :]
    return tokens


def _looks_like_a_row(tokens: Sequence[str]) -> bool:
    """A data type followed by a redop: a row, whatever went wrong before them."""
    return any(a in TYPE_SIZES and b in _REDOPS for a, b in itertools.pairwise(tokens))


def _read_preamble(comment: str, preamble: _Preamble) -> None:
    if match := _STARTING.match(comment):
        program = Path(match.group(1)).name
        found = _PROGRAM.search(program)
        preamble.named = found.group(1) if found else program
    elif match := _RANK.match(comment):
        preamble.ranks[int(match.group(1))] = (match.group(2), match.group(3))
    elif comment.startswith("nThread"):
        preamble.ranks.clear()  # a new test's device report follows


def _layout(where: str, comment: str) -> _Layout | None:
    """The table's columns when `comment` is its header line, else None."""
    words = comment.split()
    if len(words) < 2 or words[0] not in ("size", "bytes") or words[1] not in ("count", "N"):
        return None
    algbw = [i for i, word in enumerate(words) if word == "algbw"]
    # `#wrong` is `res` in the oldest releases.
    groups = [words[i + 1 : i + 3] for i in algbw]
    if len(algbw) != 2 or any(group not in (["busbw", "#wrong"], ["busbw", "res"]) for group in groups):
        raise AnalysisError(f"{where}: an nccl-tests table header without two time, algbw, busbw, #wrong groups")
    timestamp = words[-1] == "timestamp"
    return _Layout(
        columns=len(words) - (1 if timestamp else 0),
        has_root="root" in words[: algbw[0]],
        cputime=words[algbw[0] - 1] == "cputime",
        timestamp=timestamp,
        out_of_place=algbw[0] - 1,
        in_place=algbw[1] - 1,
    )


def _row(where: str, number: int, tokens: Sequence[str], layout: _Layout) -> Row:
    if len(tokens) < layout.columns or (len(tokens) > layout.columns and not layout.timestamp):
        raise AnalysisError(
            f"{where}: a results row has {len(tokens)} fields, the table's header {layout.columns}: "
            "a truncated or garbled line"
        )
    size = _count(where, "size", tokens[0])
    count = _count(where, "count", tokens[1])
    data_type, redop = tokens[2], tokens[3]
    if data_type not in TYPE_SIZES:
        raise AnalysisError(f"{where}: unknown data type {data_type!r}; nccl-tests prints {', '.join(TYPE_SIZES)}")
    if redop not in _REDOPS:
        raise AnalysisError(f"{where}: unknown redop {redop!r}; nccl-tests prints {', '.join(sorted(_REDOPS))}")
    root = None
    if layout.has_root:
        try:
            root = int(tokens[4])
        except ValueError:
            raise AnalysisError(f"{where}: root {tokens[4]!r} is not an integer") from None
    return Row(
        line=number,
        size=size,
        count=count,
        type=data_type,
        redop=redop,
        root=root,
        out_of_place=_measurement(where, "out-of-place", tokens[layout.out_of_place : layout.out_of_place + 4]),
        in_place=_measurement(where, "in-place", tokens[layout.in_place : layout.in_place + 4]),
    )


def _measurement(where: str, half: str, tokens: Sequence[str]) -> Measurement:
    time, algbw, busbw = (
        _number(where, f"{half} {name}", token) for name, token in zip(_MEASURES, tokens[:3], strict=True)
    )
    wrong = None if tokens[3] == "N/A" else _count(where, f"{half} #wrong", tokens[3])
    time_p, algbw_p, busbw_p = (_precision(token) for token in tokens[:3])
    return Measurement(time, algbw, busbw, wrong, (time_p, algbw_p, busbw_p))


def _precision(token: str) -> float:
    """Half the last digit `token` shows (nccl-tests prints %.2f, %.1f, %.0f or %.1e to fit a
    column, src/util.cu getFloatStr; the average with %g): the most its rounding moved it."""
    mantissa, _, exponent = token.lower().partition("e")
    decimals = len(mantissa.partition(".")[2])
    return 0.5 * 10.0 ** (int(exponent or 0) - decimals)


def _number(where: str, name: str, token: str) -> float:
    try:
        value = float(token)
    except ValueError:
        raise AnalysisError(f"{where}: {name} {token!r} is not a number") from None
    if math.isnan(value):
        raise AnalysisError(f"{where}: {name} is NaN")
    if math.isinf(value):
        raise AnalysisError(f"{where}: {name} is infinite")
    if value < 0:
        raise AnalysisError(f"{where}: {name} is {token}; it cannot be negative")
    return value


def _count(where: str, name: str, token: str) -> int:
    """A non-negative whole number; nccl-tests prints #wrong with %g (1e+06)."""
    value = _number(where, name, token)
    if value != int(value):
        raise AnalysisError(f"{where}: {name} {token!r} is not a whole number")
    return int(value)


# ---------------------------------------------------------------------------- checking a test


def _finish(
    path: Path,
    number: int,
    table: _Table,
    *,
    average: tuple[float, float],
    avg_line: int,
    named: tuple[str | None, str | None],
) -> NcclTest:
    """The checked test; `named` is the collective `--collective` and the file name give."""
    where = f"{path}:{table.header_line}"
    if not table.rows:
        raise AnalysisError(f"{where}: the results table has no rows")
    preamble = table.preamble
    option, file_name = named
    if preamble.named is not None:
        collective, source = preamble.named, "log"
    elif preamble.mentioned is not None:
        collective, source = preamble.mentioned, "command line in the log"
    elif option is not None:
        collective, source = option, "--collective"
    elif file_name is not None:
        collective, source = file_name, "file name"
    else:
        collective, source = None, ""
    ranks = _ranks(path, table, preamble)
    if collective is None or collective in COLLECTIVES:
        ranks = _check_rows(path, table, COLLECTIVES.get(collective or ""), source, ranks)
    _check_average(path, table.rows, average, avg_line)
    hosts = sorted({host for host, _ in preamble.ranks.values() if host})
    devices = sorted({device for _, device in preamble.ranks.values() if device})
    return NcclTest(
        number=number,
        collective=collective,
        collective_source=source,
        ranks=ranks,
        hosts=tuple(hosts),
        devices=tuple(devices),
        header_line=table.header_line,
        rows=tuple(table.rows),
        out_of_bounds=table.out_of_bounds,
        avg_busbw=average[0],
        avg_line=avg_line,
    )


def _ranks(path: Path, table: _Table, preamble: _Preamble) -> int | None:
    if not preamble.ranks:
        return None
    numbers = sorted(preamble.ranks)
    if numbers != list(range(len(numbers))):
        raise AnalysisError(
            f"{path}:{table.header_line}: the device report before this table lists ranks {_span(numbers)}, "
            "not 0 to n − 1: lines are missing"
        )
    return len(numbers)


def _span(numbers: Sequence[int]) -> str:
    return ", ".join(str(n) for n in numbers[:8]) + (", …" if len(numbers) > 8 else "")


def _check_rows(path: Path, table: _Table, collective: Collective | None, source: str, ranks: int | None) -> int | None:
    """Refuse rows whose numbers cannot come from nccl-tests; return the rank count, derived
    from the rows when the device report is missing."""
    claim = f" ({collective.name}, {_SOURCES[source]})" if collective else ""
    for row in table.rows:
        where = f"{path}:{row.line}"
        element = TYPE_SIZES[row.type]
        if row.count and row.size % (row.count * element):
            raise AnalysisError(
                f"{where}: size {row.size} B is not a whole number of count {row.count} × {element} B ({row.type})"
            )
        if collective is None:
            continue
        if (row.redop != "none") != collective.reduces:
            raise AnalysisError(f"{where}: redop {row.redop!r} does not fit {collective.name}{claim}")
        if (row.size == 0) != (row.count == 0):
            raise AnalysisError(f"{where}: size {row.size} B with count {row.count}: the counts are wrong{claim}")
        if not row.count:
            continue
        factor = row.size // (row.count * element)
        if not collective.size_counts_every_rank and factor != 1:
            raise AnalysisError(
                f"{where}: size {row.size} B is {factor} × count {row.count} × {element} B; {collective.name} "
                f"prints size = count × type size{claim}"
            )
        if collective.size_counts_every_rank:
            if ranks is None:
                ranks = factor
            elif factor != ranks:
                raise AnalysisError(
                    f"{where}: size {row.size} B is count {row.count} × {element} B × {factor} ranks, but the "
                    f"test ran on {ranks} ranks{claim}: the counts are wrong"
                )
    if collective is not None and ranks is not None:
        for row in table.rows:
            for half, m in _halves(row):
                _check_measurement(path, row, half, m, collective=collective, ranks=ranks, table=table, claim=claim)
    return ranks


def _measurements(rows: Iterable[Row]) -> Iterable[Measurement]:
    for row in rows:
        yield row.out_of_place
        yield row.in_place


def _check_measurement(
    path: Path, row: Row, half: str, m: Measurement, *, collective: Collective, ranks: int, table: _Table, claim: str
) -> None:
    where = f"{path}:{row.line}"
    time_p, algbw_p, busbw_p = m.precision
    factor = collective.bus_factor(ranks)
    if abs(m.busbw - m.algbw * factor) > busbw_p + factor * algbw_p + 1e-9:
        raise AnalysisError(
            f"{where}: {half} busbw {m.busbw:g} GB/s is not algbw {m.algbw:g} × {factor:.4g}, {collective.name}'s "
            f"factor at {ranks} ranks{claim}"
        )
    if table.layout.cputime or table.time_unit is None:
        return  # algbw comes from the GPU time, not the CPU time; or the time unit is unknown
    if m.time_us == 0:
        if row.size:
            raise AnalysisError(f"{where}: {half} time is 0 for {row.size} B")
        return
    # The true time lies within half a printed digit of the printed one, and so the true rate.
    fastest = row.size / ((m.time_us - time_p) * table.time_unit) / _GB if m.time_us > time_p else math.inf
    slowest = row.size / ((m.time_us + time_p) * table.time_unit) / _GB
    if not slowest - algbw_p - 1e-9 <= m.algbw <= fastest + algbw_p + 1e-9:
        rate = row.size / (m.time_us * table.time_unit) / _GB
        unit = "µs" if table.time_unit == 1e-6 else "ms"
        raise AnalysisError(
            f"{where}: {half} algbw {m.algbw:g} GB/s is not size / time = {row.size} B / {m.time_us:g} {unit} "
            f"= {rate:.4g} GB/s"
        )


def _check_average(path: Path, rows: Sequence[Row], average: tuple[float, float], line: int) -> None:
    """nccl-tests averages every busbw it printed, out-of-place and in-place (common.cu bw / bw_count)."""
    measurements = list(_measurements(rows))
    mean = sum(m.busbw for m in measurements) / len(measurements)
    tolerance = sum(m.precision[2] for m in measurements) / len(measurements) + average[1] + 1e-9
    if abs(mean - average[0]) > tolerance:
        raise AnalysisError(
            f"{path}:{line}: '# Avg bus bandwidth' says {average[0]:g} GB/s but the {len(rows)} rows above it "
            f"average {mean:.4f} GB/s: rows are missing or were altered"
        )


# ---------------------------------------------------------------------------- judging


@dataclass(frozen=True)
class Expectation:
    """What `--expect` names: a GPUDirect flavour, or a machine type (its flavour's published
    run, held to the machine's own GPU model)."""

    published: PublishedRun
    machine: str | None = None

    @property
    def name(self) -> str:
        return self.machine or self.published.gpudirect.value

    @property
    def machines(self) -> tuple[str, ...]:
        return (self.machine,) if self.machine else self.published.machines


# Machine types with a published figure: those of the flavours' published runs.
_PUBLISHED_MACHINES = {machine: run for run in PUBLISHED.values() for machine in run.machines}


def expectation(name: str) -> Expectation:
    """The published figure `name` (a flavour or a machine type) is judged by; ValueError says why none."""
    flavours = {flavour.value: run for flavour, run in PUBLISHED.items()}
    if name in flavours:
        return Expectation(flavours[name])
    if name in _PUBLISHED_MACHINES:
        return Expectation(_PUBLISHED_MACHINES[name], name)
    machines = ", ".join(_PUBLISHED_MACHINES)
    if name in MACHINE_TYPES:
        raise ValueError(
            f"{name} (GPUDirect {MACHINE_TYPES[name].gpudirect.value}) has no published nccl-tests figure; "
            f"machine types with one: {machines}"
        )
    raise ValueError(
        f"{name!r} is neither a GPUDirect flavour with a published figure ({', '.join(flavours)}) "
        f"nor a machine type with one ({machines})"
    )


@dataclass(frozen=True)
class Comparison:
    """A test against the published run of a GPUDirect flavour.

    The pass mark is an average over the published sizes. A test that ran exactly those is
    judged by its own `# Avg bus bandwidth` against it. Any other sweep that reaches the
    largest published size is judged at the sizes both ran: its mean busbw there against the
    mark scaled by the published example, mark × (the example's mean busbw at those sizes) /
    (its mean over all its rows), which is the mark itself when they are all the sizes.
    """

    test: NcclTest
    published: PublishedRun
    average: float
    # "log" when the test ran exactly the published sizes (its printed average), else "rows".
    average_source: str
    mark: float
    # The sizes compared (0 B excepted): both ran them.
    sizes: tuple[int, ...]
    # The published example's mean busbw at `sizes`, and over all its rows (its printed
    # average, to rounding).
    example_mean: float
    example_overall: float
    # Sizes the test ran that the published run did not.
    unpublished: tuple[int, ...] = ()

    @property
    def passed(self) -> bool:
        return self.average >= self.mark

    @property
    def not_run(self) -> tuple[int, ...]:
        """Published sizes the test did not run."""
        ran = {row.size for row in self.test.rows}
        return tuple(sorted({size for size in self.published.sizes if size not in ran}))


@dataclass(frozen=True)
class Verdict:
    tests: tuple[NcclTest, ...]
    expect: Expectation | None
    comparisons: tuple[Comparison, ...]
    # Tests the published run does not cover, and why.
    unmatched: tuple[tuple[NcclTest, str], ...]
    failures: tuple[str, ...]

    @property
    def bandwidth(self) -> str | None:
        """PASS or FAIL against the published figure; None without one to judge by (no --expect)."""
        if self.expect is None:
            return None
        return "PASS" if all(c.passed for c in self.comparisons) else "FAIL"

    @property
    def outcome(self) -> str | None:
        """FAIL on any failure; PASS only when the bandwidth was judged and passed; else None:
        correct data alone is no verdict on the network."""
        return "FAIL" if self.failures else self.bandwidth


def judge(tests: Sequence[NcclTest], expect: Expectation | None) -> Verdict:
    failures = [reason for test in tests for reason in _data_failures(test)]
    comparisons: list[Comparison] = []
    unmatched: list[tuple[NcclTest, str]] = []
    if expect is not None:
        published = expect.published
        for test in tests:
            reason = _mismatch(test, expect)
            if reason:
                unmatched.append((test, reason))
            else:
                comparisons.append(_compare(test, published))
        if not comparisons:
            reasons = "; ".join(f"{test.describe()} {reason}" for test, reason in unmatched)
            raise AnalysisError(
                f"no test in the log matches the published {expect.name} figure "
                f"({published.collective}_perf on {published.nodes} nodes × {published.gpus_per_node} GPUs, "
                f"{_size(published.sizes[0])}–{_size(published.sizes[-1])}): {reasons}"
            )
        failures += [_shortfall(c, expect) for c in comparisons if not c.passed]
    return Verdict(tuple(tests), expect, tuple(comparisons), tuple(unmatched), tuple(failures))


def _shortfall(c: Comparison, expect: Expectation) -> str:
    mark = c.published.min_avg_busbw
    if c.average_source == "log":
        return (
            f"{c.test.describe()}: average busbw {c.average:.2f} GB/s is below the {mark:g} GB/s pass mark "
            f"for {expect.name}"
        )
    return (
        f"{c.test.describe()}: mean busbw {c.average:.2f} GB/s at the {len(c.sizes)} sizes both ran is below "
        f"{c.mark:.2f} GB/s, the {mark:g} GB/s pass mark for {expect.name} scaled to those sizes"
    )


def _data_failures(test: NcclTest) -> list[str]:
    failures = []
    wrong = [(row, half, m.wrong) for row in test.rows for half, m in _halves(row) if m.wrong]
    if wrong:
        row, half, count = wrong[0]
        more = f" and {len(wrong) - 1} more" if len(wrong) > 1 else ""
        failures.append(
            f"{test.describe()}: {test.wrong} wrong elements: {count} {half} at {_size(row.size)} "
            f"(line {row.line}){more}"
        )
    if test.out_of_bounds:
        failures.append(f"{test.describe()}: {test.out_of_bounds} out-of-bounds values")
    return failures


def _halves(row: Row) -> tuple[tuple[str, Measurement], tuple[str, Measurement]]:
    return (("out-of-place", row.out_of_place), ("in-place", row.in_place))


def _mismatch(test: NcclTest, expect: Expectation) -> str:
    """Why the published run does not judge this test ("" when it does)."""
    published = expect.published
    if test.collective is None:
        return "does not say which collective it ran (pass --collective)"
    if test.collective != published.collective:
        return f"ran {test.collective}_perf"
    if test.ranks is None:
        return "does not say how many GPUs ran it (no '#  Rank' lines)"
    if test.ranks != published.ranks:
        return f"ran on {test.ranks} GPUs"
    if test.hosts and len(test.hosts) != published.nodes:
        return f"ran on {len(test.hosts)} nodes"
    accelerators = {MACHINE_TYPES[m].accelerator.name for m in expect.machines}
    strangers = [d for d in test.devices if not any(a.upper() in d.upper() for a in accelerators)]
    if strangers:
        return f"ran on {', '.join(strangers)}, not {' or '.join(sorted(a.upper() for a in accelerators))}"
    largest = published.sizes[-1]
    if all(row.size != largest for row in test.rows):
        return (
            f"did not run {_size(largest)}, the largest published size: the pass mark judges a sweep up to the "
            "large messages"
        )
    types = {row.type for row in test.rows if row.size in _shared_sizes(test, published)}
    if types != {published.data_type}:
        return f"ran {', '.join(sorted(types))}, not {published.data_type}"
    return ""


def _shared_sizes(test: NcclTest, published: PublishedRun) -> list[int]:
    """The message sizes both ran, ascending; 0 B rows (rounded-down small sizes) carry no bandwidth."""
    return sorted({row.size for row in test.rows} & set(published.sizes) - {0})


def _compare(test: NcclTest, published: PublishedRun) -> Comparison:
    """The exact published sweep by its log's average against the pass mark; any other sweep by
    its mean busbw at the sizes both ran against the mark scaled to them (see `Comparison`)."""
    every = [bw for _, oop, ip in published.example_rows for bw in (oop, ip)]
    example_overall = sum(every) / len(every)
    ran = Counter(row.size for row in test.rows)
    shared = _shared_sizes(test, published)
    others = sorted(ran.keys() - set(published.sizes))
    if ran == Counter(published.sizes):
        return Comparison(
            test,
            published,
            average=test.avg_busbw,
            average_source="log",
            mark=published.min_avg_busbw,
            sizes=tuple(shared),
            example_mean=example_overall,
            example_overall=example_overall,
        )
    at_run = [_mean([m.busbw for row in test.rows if row.size == size for _, m in _halves(row)]) for size in shared]
    example_mean = _mean([(oop + ip) / 2 for size, oop, ip in published.example_rows if size in shared])
    return Comparison(
        test,
        published,
        average=_mean(at_run),
        average_source="rows",
        mark=published.min_avg_busbw * example_mean / example_overall,
        sizes=tuple(shared),
        example_mean=example_mean,
        example_overall=example_overall,
        unpublished=tuple(others),
    )


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def _size(size: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale and size % scale == 0:
            return f"{size // scale} {unit}"
    return f"{size} B"


def _sizes(sizes: Sequence[int]) -> str:
    """Up to four sizes by name; more as their span and count."""
    if len(sizes) <= 4:
        return ", ".join(_size(s) for s in sizes)
    return f"{_size(sizes[0])}–{_size(sizes[-1])} ({len(sizes)} sizes)"


# ---------------------------------------------------------------------------- output


def report_table(verdict: Verdict) -> str:
    lines: list[str] = []
    examples = {c.test.number: c.published for c in verdict.comparisons}
    for test in verdict.tests:
        lines += _test_lines(test, examples.get(test.number))
        lines.append("")
    if verdict.expect is not None:
        lines += _expectation_lines(verdict, verdict.expect)
        lines.append("")
    for failure in verdict.failures:
        lines.append(f"FAIL: {failure}")
    if verdict.outcome is None:
        lines.append(
            "verdict: none: no bandwidth verdict without --expect (a GPUDirect flavour or a machine type); "
            f"{_data_summary(verdict.tests)}"
        )
    else:
        lines.append(f"verdict: {verdict.outcome}")
    return "\n".join(lines)


def _data_summary(tests: Sequence[NcclTest]) -> str:
    checked = [test for test in tests if test.data_checked]
    wrong = sum(test.wrong for test in checked)
    if not checked:
        return "data not checked (nccl-tests ran with -c 0)"
    if len(checked) < len(tests):
        return f"data checked in {len(checked)} of {len(tests)} tests: {wrong} wrong elements"
    return f"data checked: {wrong} wrong elements"


_SOURCES = {
    "log": "named by the log",
    "command line in the log": "from the command line in the log",
    "--collective": "from --collective",
    "file name": "from the file name (the fabric check's <collective>.log)",
}


def _test_lines(test: NcclTest, published: PublishedRun | None) -> list[str]:
    source = f", collective {_SOURCES[test.collective_source]}" if test.collective_source else ""
    check = (
        f"data checked: {test.wrong} wrong elements"
        if test.data_checked
        else "data not checked (#wrong N/A: nccl-tests ran with -c 0)"
    )
    bounds = "" if test.out_of_bounds is None else f", {test.out_of_bounds} out-of-bounds values"
    head = f"{test.describe()}{source}"
    devices = f"GPUs: {', '.join(test.devices)}" if test.devices else ""
    lines = [head, *([f"  {devices}"] if devices else []), f"  {check}{bounds}"]
    reference = {}
    if published is not None:
        reference = {size: (oop, ip) for size, oop, ip in published.example_rows}
    header = f"  {'size (B)':>13} {'':>8}  {'busbw out-of-place':>18}  {'in-place':>8}  (GB/s)"
    if reference:
        header += "   published example (out-of-place, in-place)"
    lines.append(header)
    for row in test.rows:
        text = f"  {row.size:>13} {_size(row.size):>8}  {row.out_of_place.busbw:>18.2f}  {row.in_place.busbw:>8.2f}"
        if row.size in reference:
            oop, ip = reference[row.size]
            text += f"   {oop:.2f}, {ip:.2f}"
        lines.append(text)
    lines.append(f"  average busbw {test.avg_busbw:g} GB/s ('# Avg bus bandwidth', line {test.avg_line})")
    return lines


def _expectation_lines(verdict: Verdict, expect: Expectation) -> list[str]:
    published = expect.published
    named = (
        f"{expect.machine} ({published.gpudirect.value})"
        if expect.machine
        else (f"{published.gpudirect.value} ({', '.join(published.machines)})")
    )
    lines = [
        f"expected for {named}: {published.collective}_perf on "
        f"{published.nodes} nodes × {published.gpus_per_node} GPUs, {published.data_type}, "
        f"{_size(published.sizes[0])}–{_size(published.sizes[-1])} ({len(published.sizes)} sizes)",
        f"  pass mark: average busbw ≥ {published.min_avg_busbw:g} GB/s — {published.min_avg_source}",
        f"  sizes: {published.sizes_source}",
        f"  published example: average {published.example_avg:g} GB/s, largest size "
        f"{_size(published.sizes[-1])} {published.example_rows[-1][1]:.2f} / {published.example_rows[-1][2]:.2f} GB/s"
        f" — {published.example_source}",
    ]
    if published.gaps:
        lines.append(f"  not published: {published.gaps}")
    for c in verdict.comparisons:
        outcome = "PASS" if c.passed else "FAIL"
        sign = "≥" if c.passed else "<"
        if c.average_source == "log":
            lines.append(
                f"  {outcome}: {c.test.describe()}: {c.average:.2f} GB/s (the log's average) {sign} {c.mark:g} GB/s"
            )
            continue
        lines += [
            f"  {outcome}: {c.test.describe()}: {c.average:.2f} GB/s (mean busbw at the {len(c.sizes)} sizes both "
            f"ran) {sign} {c.mark:.2f} GB/s (the pass mark scaled to those sizes)",
            f"    compared at: {_sizes(c.sizes)}",
            f"    pass mark: {published.min_avg_busbw:g} GB/s × {c.example_mean:.2f} / {c.example_overall:.2f} GB/s, "
            "the published example's mean busbw at these sizes over its mean at all of them",
        ]
        left_out = [
            f"{what}: {_sizes(sizes)}"
            for what, sizes in (
                ("published sizes not run", c.not_run),
                ("sizes without a published figure", c.unpublished),
            )
            if sizes
        ]
        if left_out:
            lines.append(f"    {'; '.join(left_out)}")
    for test, reason in verdict.unmatched:
        lines.append(f"  no published figure for {test.describe()}: it {reason}")
    return lines


def report_json(verdict: Verdict) -> dict[str, Any]:
    expect = verdict.expect
    comparisons = {c.test.number: c for c in verdict.comparisons}
    unmatched = {test.number: reason for test, reason in verdict.unmatched}
    return {
        "verdict": verdict.outcome,
        "bandwidth_verdict": verdict.bandwidth,
        "failures": list(verdict.failures),
        "tests": [_test_json(test, comparisons.get(test.number), unmatched.get(test.number)) for test in verdict.tests],
        "expected": None if expect is None else _published_json(expect),
    }


def _test_json(test: NcclTest, comparison: Comparison | None, unmatched: str | None) -> dict[str, Any]:
    return {
        "number": test.number,
        "collective": test.collective,
        "collective_source": test.collective_source or None,
        "ranks": test.ranks,
        "hosts": list(test.hosts),
        "devices": list(test.devices),
        "header_line": test.header_line,
        "data_checked": test.data_checked,
        "wrong_elements": test.wrong,
        "out_of_bounds": test.out_of_bounds,
        "avg_busbw_gbps": test.avg_busbw,
        "rows": [
            {
                "line": row.line,
                "size_bytes": row.size,
                "count": row.count,
                "type": row.type,
                "redop": row.redop,
                "root": row.root,
                **{
                    key: {"time_us": m.time_us, "algbw_gbps": m.algbw, "busbw_gbps": m.busbw, "wrong": m.wrong}
                    for key, m in (("out_of_place", row.out_of_place), ("in_place", row.in_place))
                },
            }
            for row in test.rows
        ],
        "comparison": None
        if comparison is None
        else {
            "average_busbw_gbps": comparison.average,
            "average_source": comparison.average_source,
            "min_avg_busbw_gbps": comparison.published.min_avg_busbw,
            "pass_mark_gbps": comparison.mark,
            "sizes_compared_bytes": list(comparison.sizes),
            "example_mean_busbw_gbps": comparison.example_mean,
            "published_sizes_not_run_bytes": list(comparison.not_run),
            "sizes_not_published_bytes": list(comparison.unpublished),
            "passed": comparison.passed,
        },
        "not_compared": unmatched,
    }


def _published_json(expect: Expectation) -> dict[str, Any]:
    published = expect.published
    return {
        "expect": expect.name,
        "machine": expect.machine,
        "gpudirect": published.gpudirect.value,
        "machines": list(published.machines),
        "collective": published.collective,
        "nodes": published.nodes,
        "gpus_per_node": published.gpus_per_node,
        "data_type": published.data_type,
        "sizes_bytes": list(published.sizes),
        "sizes_source": published.sizes_source,
        "min_avg_busbw_gbps": published.min_avg_busbw,
        "min_avg_source": published.min_avg_source,
        "example_avg_busbw_gbps": published.example_avg,
        "example_busbw_gbps": [
            {"size_bytes": size, "out_of_place": oop, "in_place": ip} for size, oop, ip in published.example_rows
        ],
        "example_source": published.example_source,
        "not_published": published.gaps or None,
    }
