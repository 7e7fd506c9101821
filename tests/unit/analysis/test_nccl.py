"""`python -m analysis nccl`: nccl-tests output with known answers, published outputs, the
published figures themselves, and hostile input (exit 2, one error line)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from analysis.__main__ import main
from analysis.nccl import COLLECTIVES
from analysis.samples import Half, NcclRun, at_bandwidth
from facts.machines import MACHINE_TYPES, GpuDirect
from facts.nccl import BENCHMARKS, PUBLISHED
from tests.unit.analysis.logs_for_tests import ROOT
from tests.unit.analysis.nccl_logs_for_tests import CTK_RDMA, CTK_TCPX, OLD_FORMAT, powers_of_two, shaped_like

MiB, GiB = 1 << 20, 1 << 30
TCPX_SIZES = powers_of_two(MiB, 512 * MiB)  # -b 1M -e 512M -f 2
RDMA_SIZES = powers_of_two(1024, 8 * GiB)  # -b 1K -e 8G -f 2


def write(tmp_path: Path, *tests: NcclRun | str, name: str = "nccl.log") -> Path:
    """The tests' output one after another, or text as it is."""
    lines: list[str] = []
    for test in tests:
        lines += test.lines() if isinstance(test, NcclRun) else test.splitlines()
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return path


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, object]]:
    code = main(["nccl", *argv, "--json"])
    captured = capsys.readouterr()
    assert captured.err == ""
    return code, json.loads(captured.out)


def assert_refused(captured: pytest.CaptureResult[str], pattern: str) -> None:
    assert captured.out == ""
    assert captured.err.startswith("error: ") and captured.err.count("\n") == 1, captured.err
    assert re.search(pattern, captured.err), captured.err


# ---------------------------------------------------------------------------- known answers


def test_a_16_rank_all_reduce_worked_by_hand(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """all_reduce's busbw is algbw × 2(n − 1)/n = × 1.875 at 16 ranks.
    1 GiB in 10,737.41824 µs is 100 GB/s algbw, 187.5 busbw; in 8,589.934592 µs, 125 and 234.375.
    256 MiB in 2,684.35456 µs is 100 and 187.5 again. Average of the four busbw: 199.21875."""
    test = NcclRun(
        "all_reduce",
        16,
        [(GiB, Half(10737.41824), Half(8589.934592)), (256 * MiB, Half(2684.35456), Half(2684.35456))],
    )
    code, report = run_json(capsys, "--log", str(write(tmp_path, test)))
    assert code == 0 and report["verdict"] is None and report["bandwidth_verdict"] is None
    (result,) = report["tests"]  # type: ignore[misc]
    assert (result["collective"], result["collective_source"], result["ranks"]) == ("all_reduce", "log", 16)
    assert result["hosts"] == ["nccl-host-1", "nccl-host-2"]
    assert result["devices"] == ["NVIDIA H100 80GB HBM3"]
    first, second = result["rows"]
    assert (first["size_bytes"], first["count"], first["redop"]) == (GiB, GiB // 4, "sum")
    assert first["out_of_place"] == {"time_us": 10737.4, "algbw_gbps": 100.0, "busbw_gbps": 187.5, "wrong": 0}
    assert (first["in_place"]["algbw_gbps"], first["in_place"]["busbw_gbps"]) == (125.0, 234.38)  # 234.375 printed
    assert second["out_of_place"]["busbw_gbps"] == second["in_place"]["busbw_gbps"] == 187.5
    assert result["avg_busbw_gbps"] == pytest.approx(199.219)  # %g of 199.21875... printed rounded
    assert (result["data_checked"], result["wrong_elements"], result["out_of_bounds"]) == (True, 0, 0)


def test_the_table_shows_every_size_both_ways(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    test = NcclRun("all_gather", 16, [(MiB, at_bandwidth(MiB, 16.0), at_bandwidth(MiB, 32.0))])
    assert main(["nccl", "--log", str(write(tmp_path, test))]) == 0
    out = capsys.readouterr().out
    assert "test 1 (all_gather_perf, 16 GPUs on 2 nodes, line 24), collective named by the log" in out
    # 16 and 32 GB/s algbw × 15/16: 15 and 30 GB/s busbw.
    assert re.search(r"\n\s+1048576\s+1 MiB\s+15\.00\s+30\.00\n", out)
    assert "average busbw 22.5 GB/s" in out
    assert out.rstrip().endswith(
        "verdict: none: no bandwidth verdict without --expect (a GPUDirect flavour or a machine type); "
        "data checked: 0 wrong elements"
    )
    assert "PASS" not in out


@pytest.mark.parametrize("expect", ["tcpx", "rdma"])
def test_the_published_outputs_pass_their_own_mark(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], expect: str
) -> None:
    """Cluster Toolkit's example outputs, as printed (TCPX: data unchecked, an NCCL line first).
    They name neither the collective nor the ranks: --collective, and the size column gives 16."""
    text = CTK_TCPX if expect == "tcpx" else CTK_RDMA
    path = write(tmp_path, text)
    code, report = run_json(capsys, "--log", str(path), "--collective", "all_gather", "--expect", expect)
    assert code == 0 and report["verdict"] == report["bandwidth_verdict"] == "PASS"
    (result,) = report["tests"]  # type: ignore[misc]
    assert (result["ranks"], result["collective_source"]) == (16, "--collective")
    assert result["data_checked"] is (expect == "rdma")
    published = PUBLISHED[GpuDirect(expect)]
    assert result["avg_busbw_gbps"] == published.example_avg
    sizes = sorted(set(published.sizes))
    assert result["comparison"] == {
        "average_busbw_gbps": published.example_avg,
        "average_source": "log",
        "min_avg_busbw_gbps": published.min_avg_busbw,
        "pass_mark_gbps": published.min_avg_busbw,  # the published sweep: the mark as published
        "sizes_compared_bytes": sizes,
        "example_mean_busbw_gbps": pytest.approx(published.example_avg, abs=0.005),
        "published_sizes_not_run_bytes": [],
        "sizes_not_published_bytes": [],
        "passed": True,
    }
    assert [
        (r["size_bytes"], r["out_of_place"]["busbw_gbps"], r["in_place"]["busbw_gbps"]) for r in result["rows"]
    ] == [*published.example_rows]
    assert report["expected"]["min_avg_source"] == published.min_avg_source  # type: ignore[index]


def test_without_the_collective_the_published_output_is_read_but_not_compared(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, CTK_TCPX)
    assert main(["nccl", "--log", str(path)]) == 0
    out = capsys.readouterr().out
    assert "data not checked (#wrong N/A: nccl-tests ran with -c 0), 0 out-of-bounds values" in out
    assert main(["nccl", "--log", str(path), "--expect", "tcpx"]) == 2
    assert_refused(capsys.readouterr(), r"does not say which collective it ran \(pass --collective\)")


def test_the_collective_comes_from_the_fabric_checks_file_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The fabric check writes each collective's output to <collective>.log: a log that does not
    name its collective is judged by that name; --collective still wins over it."""
    code, report = run_json(capsys, "--log", str(write(tmp_path, CTK_TCPX, name="all_gather.log")), "--expect", "tcpx")
    assert (code, report["verdict"]) == (0, "PASS")
    assert report["tests"][0]["collective_source"] == "file name"  # type: ignore[index]
    assert main(["nccl", "--log", str(tmp_path / "all_gather.log")]) == 0
    assert "collective from the file name (the fabric check's <collective>.log)" in capsys.readouterr().out
    renamed = write(tmp_path, CTK_TCPX, name="all_reduce.log")
    code, report = run_json(capsys, "--log", str(renamed), "--collective", "all_gather", "--expect", "tcpx")
    assert report["tests"][0]["collective_source"] == "--collective"  # type: ignore[index]


def test_the_fabric_check_writes_the_file_names_read() -> None:
    """The name the inference reads is the one payload/nccl_test.sh writes."""
    script = (ROOT / "payload" / "nccl_test.sh").read_text()
    assert 'tee "${NCCL_TEST_DIR}/${collective}.log"' in script


def test_the_oldest_format_is_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """2019's nccl-tests: no root column, `res`, times in ms, MPI's rank lines inside the table."""
    path = write(tmp_path, "mpirun -np 2 /nccl-tests/build/all_reduce_perf -b 1M -e 1G -f 2 -g 1 -c 0\n" + OLD_FORMAT)
    code, report = run_json(capsys, "--log", str(path))
    assert code == 0
    (result,) = report["tests"]  # type: ignore[misc]
    assert (result["collective"], result["collective_source"], result["ranks"]) == (
        "all_reduce",
        "command line in the log",
        2,
    )
    assert [row["root"] for row in result["rows"]] == [None, None]
    assert result["avg_busbw_gbps"] == 0.4575


# ---------------------------------------------------------------------------- real logs' noise


def _prefixed(lines: Sequence[str], prefix: str) -> list[str]:
    return [f"{prefix}{line}" for line in lines]


@pytest.mark.parametrize(
    "prefix",
    ["", "[pod/ag-2-fz9fs-w-0-0-kkd5t/nccl-test] ", "2026-11-22T10:00:00.123456789Z ", "[1,0]<stdout>:"],
    ids=["bare", "kubectl --prefix", "kubectl --timestamps", "mpirun --tag-output"],
)
def test_several_tests_with_prefixes_and_foreign_lines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], prefix: str
) -> None:
    """A launcher's output, `bash -x`'s command line, NCCL INFO lines inside the table, then a
    second test the log names only by its command line (an nccl-tests before 2.16)."""
    gather = shaped_like(TCPX_SIZES, 40.0)
    reduce = NcclRun("all_reduce", 16, [(MiB, Half(100.0), Half(100.0))], name_line=False)
    gather_lines = gather.lines()
    gather_lines.insert(28, "nccl-test-host-1:166:207 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC")
    lines = [
        "Running the test with the following parameters:",
        "  Benchmark: all_gather",
        *gather_lines,
        "+ mpirun --hostfile /tmp/hostfile /third_party/nccl-tests/build/all_reduce_perf -b 1M -e 1M",
        "10 GPUs idle",  # digits outside a table are not a row
        *reduce.lines(),
        "Job done",
    ]
    path = tmp_path / "nccl.log"
    path.write_text("\n".join(_prefixed(lines, prefix)) + "\n")
    code, report = run_json(capsys, "--log", str(path), "--expect", "tcpx")
    assert code == 0
    first, second = report["tests"]  # type: ignore[misc]
    assert (first["collective"], first["collective_source"], first["ranks"]) == ("all_gather", "log", 16)
    assert (second["collective"], second["collective_source"]) == ("all_reduce", "command line in the log")
    assert first["comparison"]["passed"] is True
    assert first["comparison"]["average_busbw_gbps"] == pytest.approx(37.5)  # 40 × 15/16
    assert second["comparison"] is None
    assert second["not_compared"] == "ran all_reduce_perf"
    # 1 MiB in 100 µs: 10.49 GB/s algbw, × 1.875.
    assert second["rows"][0]["out_of_place"]["busbw_gbps"] == pytest.approx(19.66)


# ---------------------------------------------------------------------------- the verdict


def test_a_run_below_the_pass_mark_fails_with_exit_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """TCPX's mark is 25 GB/s average busbw: 24 GB/s algbw is 22.5 busbw, under it."""
    path = write(tmp_path, shaped_like(TCPX_SIZES, 24.0))
    assert main(["nccl", "--log", str(path), "--expect", "tcpx"]) == 1
    captured = capsys.readouterr()
    assert captured.err == ""
    assert (
        "  FAIL: test 1 (all_gather_perf, 16 GPUs on 2 nodes, line 24): 22.50 GB/s (the log's average) < 25 GB/s"
        in (captured.out)
    )
    assert "FAIL: test 1 (all_gather_perf, 16 GPUs on 2 nodes, line 24): average busbw 22.50 GB/s is below the 25" in (
        captured.out
    )
    assert captured.out.rstrip().endswith("verdict: FAIL")
    code, report = run_json(capsys, "--log", str(path), "--expect", "tcpx")
    assert code == 1 and report["verdict"] == report["bandwidth_verdict"] == "FAIL"
    assert len(report["failures"]) == 1  # type: ignore[arg-type]


def test_each_figure_is_printed_with_its_source(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, shaped_like(RDMA_SIZES, 160.0, device="NVIDIA H200"))
    assert main(["nccl", "--log", str(path), "--expect", "rdma"]) == 0
    out = capsys.readouterr().out
    published = PUBLISHED[GpuDirect.RDMA]
    assert "expected for rdma (a3-ultragpu-8g, a4-highgpu-8g): all_gather_perf on 2 nodes × 8 GPUs, float" in out
    assert f"pass mark: average busbw ≥ 100 GB/s — {published.min_avg_source}" in out
    assert published.sizes_source in out and published.example_source in out
    assert "not published: no published example output for a4-highgpu-8g" in out
    # The example's busbw beside the run's, at the same size.
    assert re.search(r"8589934592\s+8 GiB\s+150\.00\s+150\.00\s+328\.85, 335\.67", out)


@pytest.mark.parametrize(("wrong", "bounds"), [(3, 0), (0, 2), (1_000_000, 0)])
def test_wrong_data_always_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str], wrong: int, bounds: int) -> None:
    """#wrong other than 0 or out-of-bounds values: FAIL with or without --expect, whatever the bandwidth."""
    test = shaped_like(TCPX_SIZES, 80.0, out_of_bounds=bounds)
    size, oop, ip = test.rows[3]
    test.rows[3] = (size, oop, Half(ip.time_us, wrong))  # type: ignore[index]
    path = write(tmp_path, test)
    for extra in ([], ["--expect", "tcpx"]):
        assert main(["nccl", "--log", str(path), *extra]) == 1
        out = capsys.readouterr().out
        assert out.rstrip().endswith("verdict: FAIL")
        if wrong:
            assert f"{wrong} wrong elements: {wrong} in-place at 8 MiB (line 29)" in out
        if bounds:
            assert f"{bounds} out-of-bounds values" in out


@pytest.mark.parametrize("checked", [True, False])
def test_without_expect_there_is_no_verdict_on_the_bandwidth(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], checked: bool
) -> None:
    """Correct data is not a passing network: without --expect nothing judged the bandwidth,
    and a run at 1 GB/s must not read PASS."""
    wrong = 0 if checked else None
    test = NcclRun(
        "all_gather", 16, [(s, at_bandwidth(s, 1.0, wrong), at_bandwidth(s, 1.0, wrong)) for s in TCPX_SIZES]
    )
    path = write(tmp_path, test)
    assert main(["nccl", "--log", str(path)]) == 0
    out = capsys.readouterr().out
    assert "PASS" not in out
    data = "data checked: 0 wrong elements" if checked else "data not checked (nccl-tests ran with -c 0)"
    assert out.rstrip().splitlines()[-1] == (
        f"verdict: none: no bandwidth verdict without --expect (a GPUDirect flavour or a machine type); {data}"
    )
    code, report = run_json(capsys, "--log", str(path))
    assert (code, report["verdict"], report["bandwidth_verdict"], report["failures"]) == (0, None, None, [])


def test_unchecked_data_is_said_not_failed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    test = NcclRun("all_gather", 16, [(size, Half(size / 50e3, None), Half(size / 50e3, None)) for size in TCPX_SIZES])
    code, report = run_json(capsys, "--log", str(write(tmp_path, test)), "--expect", "tcpx")
    assert code == 0
    assert report["tests"][0]["data_checked"] is False  # type: ignore[index]


def test_a_run_over_more_sizes_is_judged_on_the_published_ones(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """1 KiB–16 GiB at 112 GB/s algbw (105 busbw), but 16 GiB at 16 GB/s (15 busbw): the log's own
    average, (24 × 105 + 15) / 25 = 101.4, counts the extra size; over the published 1 KiB–8 GiB
    the mean is 105."""
    test = shaped_like(RDMA_SIZES, 112.0, device="NVIDIA B200")
    test.rows = [*test.rows, (16 * GiB, at_bandwidth(16 * GiB, 16.0), at_bandwidth(16 * GiB, 16.0))]
    code, report = run_json(capsys, "--log", str(write(tmp_path, test)), "--expect", "rdma")
    assert code == 0
    result = report["tests"][0]  # type: ignore[index]
    assert result["avg_busbw_gbps"] == pytest.approx(101.4)
    comparison = result["comparison"]
    assert comparison["average_source"] == "rows"
    assert comparison["average_busbw_gbps"] == pytest.approx(105.0)
    assert comparison["sizes_compared_bytes"] == RDMA_SIZES
    assert comparison["pass_mark_gbps"] == pytest.approx(100.0)  # every published size: the mark itself
    assert (comparison["published_sizes_not_run_bytes"], comparison["sizes_not_published_bytes"]) == ([], [16 * GiB])


def _example_busbw(flavour: GpuDirect, sizes: Sequence[int]) -> tuple[float, float]:
    """The published example's mean busbw at `sizes` (out-of-place and in-place), and over all its rows."""
    rows = PUBLISHED[flavour].example_rows
    at = [(oop + ip) / 2 for size, oop, ip in rows if size in sizes]
    every = [bw for _, oop, ip in rows for bw in (oop, ip)]
    return sum(at) / len(at), sum(every) / len(every)


@pytest.mark.parametrize(("busbw", "verdict"), [(300.0, "PASS"), (250.0, "FAIL")])
def test_a_sweep_of_the_large_messages_only_is_judged_at_the_sizes_both_ran(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], busbw: float, verdict: str
) -> None:
    """-b 1G -e 8G on A3 Ultra: the published average counts 1 KiB–512 MiB too, so it is no
    mark for these four sizes; the mark scaled by the published example's busbw at them is:
    100 GB/s × (the example's mean there) / (its mean over all its sizes) ≈ 274 GB/s."""
    sizes = [GiB, 2 * GiB, 4 * GiB, 8 * GiB]
    path = write(tmp_path, shaped_like(sizes, busbw * 16 / 15, device="NVIDIA H200"))
    there, overall = _example_busbw(GpuDirect.RDMA, sizes)
    mark = 100.0 * there / overall
    code, report = run_json(capsys, "--log", str(path), "--expect", "rdma")
    assert (code, report["verdict"]) == ((0, "PASS") if verdict == "PASS" else (1, "FAIL"))
    comparison = report["tests"][0]["comparison"]  # type: ignore[index]
    assert comparison["average_busbw_gbps"] == pytest.approx(busbw, abs=0.01)
    assert comparison["pass_mark_gbps"] == pytest.approx(mark)
    assert comparison["example_mean_busbw_gbps"] == pytest.approx(there)
    assert comparison["sizes_compared_bytes"] == sizes
    assert comparison["published_sizes_not_run_bytes"] == RDMA_SIZES[:-4]
    assert main(["nccl", "--log", str(path), "--expect", "rdma"]) == code
    out = capsys.readouterr().out
    sign = "≥" if verdict == "PASS" else "<"
    assert (
        f"  {verdict}: test 1 (all_gather_perf, 16 GPUs on 2 nodes, line 24): {busbw:.2f} GB/s (mean busbw at the "
        f"4 sizes both ran) {sign} {mark:.2f} GB/s (the pass mark scaled to those sizes)\n"
        "    compared at: 1 GiB, 2 GiB, 4 GiB, 8 GiB\n"
        f"    pass mark: 100 GB/s × {there:.2f} / {overall:.2f} GB/s, the published example's mean busbw at these "
        "sizes over its mean at all of them\n"
        "    published sizes not run: 1 KiB–512 MiB (20 sizes)\n"
    ) in out


def test_a_sweep_past_the_published_one_names_the_sizes_left_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """-b 64M -e 1G on A3 High: compared at 64–512 MiB; 1 GiB has no published figure."""
    sizes = [64 * MiB, 128 * MiB, 256 * MiB, 512 * MiB, GiB]
    assert main(["nccl", "--log", str(write(tmp_path, shaped_like(sizes, 80.0))), "--expect", "tcpx"]) == 0
    out = capsys.readouterr().out
    assert "    compared at: 64 MiB, 128 MiB, 256 MiB, 512 MiB\n" in out
    assert "    published sizes not run: 1 MiB–32 MiB (6 sizes); sizes without a published figure: 1 GiB\n" in out


@pytest.mark.parametrize(
    ("test", "expect", "reason"),
    [
        (NcclRun("all_reduce", 16, [(MiB, Half(100.0), Half(100.0))]), "tcpx", r"ran all_reduce_perf"),
        (
            NcclRun("all_gather", 8, [(s, at_bandwidth(s, 50.0), at_bandwidth(s, 50.0)) for s in TCPX_SIZES]),
            "tcpx",
            "ran on 8 GPUs",
        ),
        (
            shaped_like(TCPX_SIZES, 50.0, hosts=[f"h{i}" for i in range(4)]),
            "tcpx",
            "ran on 4 nodes",
        ),
        (shaped_like(RDMA_SIZES, 150.0), "rdma", r"ran on NVIDIA H100 80GB HBM3, not B200 or H200"),
        (shaped_like(TCPX_SIZES[:-1], 50.0), "tcpx", r"did not run 512 MiB, the largest published size"),
        (
            shaped_like(TCPX_SIZES, 50.0, device_report=False, name_line=True),
            "tcpxo",
            r"did not run 8 GiB, the largest published size",
        ),
        (
            NcclRun(
                "all_gather",
                16,
                [(s, at_bandwidth(s, 50.0), at_bandwidth(s, 50.0)) for s in TCPX_SIZES],
                data_type="half",
            ),
            "tcpx",
            r"ran half, not float",
        ),
    ],
    ids=["collective", "GPUs", "nodes", "GPU model", "short of the large messages", "TCPXO's largest", "data type"],
)
def test_a_log_the_published_figure_does_not_cover_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], test: NcclRun, expect: str, reason: str
) -> None:
    assert main(["nccl", "--log", str(write(tmp_path, test)), "--expect", expect]) == 2
    assert_refused(capsys.readouterr(), rf"no test in the log matches the published {expect} figure .*{reason}")


@pytest.mark.parametrize(
    ("expect", "pattern"),
    [
        (
            "none",
            r"argument --expect: 'none' is neither a GPUDirect flavour with a published figure \(tcpx, tcpxo, rdma\) "
            r"nor a machine type with one \(a3-highgpu-8g, a3-megagpu-8g, a3-ultragpu-8g, a4-highgpu-8g\)",
        ),
        (
            "a3-highgpu-2g",
            r"argument --expect: a3-highgpu-2g \(GPUDirect none\) has no published nccl-tests figure; machine types "
            r"with one: a3-highgpu-8g, ",
        ),
    ],
)
def test_expect_takes_a_flavour_or_a_machine_type_with_a_published_figure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], expect: str, pattern: str
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["nccl", "--log", str(write(tmp_path, CTK_TCPX)), "--expect", expect])
    assert exit_info.value.code == 2
    assert_refused(capsys.readouterr(), pattern)


@pytest.mark.parametrize("machine", [name for run in PUBLISHED.values() for name in run.machines])
def test_expect_a_machine_type_judges_by_its_flavours_figure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], machine: str
) -> None:
    """a3-megagpu-8g is judged as tcpxo, a4-highgpu-8g as rdma, on the machine's own GPU model."""
    published = PUBLISHED[MACHINE_TYPES[machine].gpudirect]
    device = f"NVIDIA {MACHINE_TYPES[machine].accelerator.name.upper()}"
    path = write(tmp_path, shaped_like(published.sizes, 1.2 * published.min_avg_busbw * 16 / 15, device=device))
    code, report = run_json(capsys, "--log", str(path), "--expect", machine)
    assert (code, report["verdict"]) == (0, "PASS")
    expected = report["expected"]
    assert (expected["expect"], expected["machine"], expected["gpudirect"]) == (  # type: ignore[index]
        machine,
        machine,
        published.gpudirect.value,
    )
    assert main(["nccl", "--log", str(path), "--expect", machine]) == 0
    assert f"expected for {machine} ({published.gpudirect.value}): all_gather_perf" in capsys.readouterr().out


def test_expect_a_machine_type_holds_the_log_to_its_gpu_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """rdma's figure covers A3 Ultra (H200) and A4 (B200): naming the A4 refuses an H200 run."""
    path = write(tmp_path, shaped_like(RDMA_SIZES, 160.0, device="NVIDIA H200"))
    assert main(["nccl", "--log", str(path), "--expect", "a3-ultragpu-8g"]) == 0
    capsys.readouterr()
    assert main(["nccl", "--log", str(path), "--expect", "a4-highgpu-8g"]) == 2
    assert_refused(
        capsys.readouterr(),
        r"no test in the log matches the published a4-highgpu-8g figure .*ran on NVIDIA H200, not B200",
    )


# ---------------------------------------------------------------------------- the published figures


@pytest.mark.parametrize("flavour", list(PUBLISHED))
def test_published_figures_hold_together(flavour: GpuDirect) -> None:
    """Each record's machines use its flavour; the example's average is the mean of its rows
    (to the rounding of the printed values); the sizes are those of the command cited."""
    published = PUBLISHED[flavour]
    assert published.gpudirect is flavour
    for name in published.machines:
        assert MACHINE_TYPES[name].gpudirect is flavour
        assert MACHINE_TYPES[name].gpus == published.gpus_per_node
    values = [bw for _, oop, ip in published.example_rows for bw in (oop, ip)]
    assert sum(values) / len(values) == pytest.approx(published.example_avg, abs=0.005)
    assert published.min_avg_busbw < published.example_avg  # the example passes its own mark
    for source in (published.example_source, published.min_avg_source, published.sizes_source):
        assert re.search(r"@[0-9a-f]{7}", source), source


def test_published_sizes_are_the_cited_commands() -> None:
    assert PUBLISHED[GpuDirect.TCPX].sizes == tuple(TCPX_SIZES)  # -b 1M -e 512M -f 2
    assert PUBLISHED[GpuDirect.RDMA].sizes == tuple(RDMA_SIZES)  # -b 1K -e 8G -f 2
    # TCPXO's example: -b 8 to 128 B round down to 0 at 16 ranks (16-byte chunks), then 256 B–8 GiB.
    assert PUBLISHED[GpuDirect.TCPXO].sizes == (0,) * 5 + tuple(powers_of_two(256, 8 * GiB))
    assert {p.min_avg_busbw for p in PUBLISHED.values()} == {25.0, 30.0, 100.0}


# ---------------------------------------------------------------------------- hostile input


# The good test: all_gather on 16 ranks over TCPX's sizes at 50 GB/s algbw (46.875 busbw).
# Its output: lines 1–5 preamble, 6–21 the 16 rank lines, 22–23, the header at line 24, units
# at 25, the ten rows at lines 26–35, out-of-bounds at 36, the average at 37.
FIRST_ROW = 25  # index of the first row


def _good() -> NcclRun:
    return shaped_like(TCPX_SIZES, 50.0)


def _text(lines: Sequence[str]) -> str:
    return "\n".join(lines) + "\n"


def _with_line(index: int, replace: str | None) -> str:
    """The good test's output with line `index` (0-based) replaced, or dropped when None."""
    lines = _good().lines()
    if replace is None:
        del lines[index]
    else:
        lines[index] = replace
    return _text(lines)


def _with_row_value(row: int, column: int, value: str) -> str:
    """The good test with one field of row `row` (0-based) set to `value`."""
    lines = _good().lines()
    fields = lines[FIRST_ROW + row].split()
    fields[column] = value
    lines[FIRST_ROW + row] = "  ".join(fields)
    return _text(lines)


def _impossible(**printed: float) -> str:
    """The good test with row 5 (32 MiB, line 31) printing other bandwidths than its time gives."""
    test = _good()
    size, oop, ip = test.rows[5]
    test.rows[5] = (size, Half(oop.time_us, 0, **printed), ip)  # type: ignore[index]
    return _text(test.lines())


def _row_lost() -> str:
    """Row 9 (512 MiB) at 20 GB/s algbw out-of-place, its line then lost: the footer's average
    (18 × 46.875 + 18.75 + 46.875) / 20 = 45.4688 no longer fits the 9 rows left (46.875)."""
    test = _good()
    size, _, ip = test.rows[9]
    test.rows[9] = (size, at_bandwidth(size, 20.0), ip)  # type: ignore[index]
    lines = test.lines()
    del lines[FIRST_ROW + 9]
    return _text(lines)


GOOD = _good().lines()
HOSTILE: dict[str, tuple[str, list[str], str]] = {
    "empty": ("", [], "is empty"),
    "blank": ("\n \n\n", [], "is empty"),
    "no table": ("NCCL INFO Bootstrap : Using eth0\nall done\n", [], "has no nccl-tests results table"),
    "binary": ("\x00\x01\x02\xff\xfe", [], "has no nccl-tests results table"),
    "a header and no rows": (
        _text([*GOOD[:FIRST_ROW], *GOOD[FIRST_ROW + 10 :]]),
        [],
        r":24: the results table has no rows",
    ),
    "a truncated row": (
        _with_line(FIRST_ROW + 2, "     4194304         65536     float    none      -1    83.89"),
        [],
        r":28: a results row has 6 fields, the table's header 13: a truncated or garbled line",
    ),
    "a row of numbers only": (_with_line(FIRST_ROW + 2, "     4194304         65536"), [], r":28: a results row has 2"),
    "a non-numeric time": (_with_row_value(2, 5, "fast"), [], r":28: out-of-place time 'fast' is not a number"),
    "a non-numeric size": (_with_row_value(2, 0, "4M"), [], r":28: size '4M' is not a number"),
    "a NaN busbw": (_with_row_value(2, 7, "nan"), [], r":28: out-of-place busbw is NaN"),
    "a -nan algbw": (_with_row_value(2, 10, "-nan"), [], r":28: in-place algbw is NaN"),
    "an infinite algbw": (_with_row_value(2, 6, "inf"), [], r":28: out-of-place algbw is infinite"),
    "a negative time": (_with_row_value(2, 9, "-83.89"), [], r":28: in-place time is -83.89; it cannot be negative"),
    "a negative #wrong": (_with_row_value(2, 8, "-1"), [], r":28: out-of-place #wrong is -1; it cannot be negative"),
    "a fractional #wrong": (_with_row_value(2, 12, "0.5"), [], r":28: in-place #wrong '0.5' is not a whole number"),
    "an unknown type": (_with_row_value(2, 2, "float7"), [], r":28: unknown data type 'float7'"),
    "a count that does not fit the size": (
        _with_row_value(2, 1, "65535"),
        [],
        r":28: size 4194304 B is not a whole number of count 65535 × 4 B \(float\)",
    ),
    "a count for the wrong number of ranks": (
        _with_row_value(2, 1, "131072"),
        [],
        r":28: size 4194304 B is count 131072 × 4 B × 8 ranks, but the test ran on 16 ranks .*: the counts are wrong",
    ),
    "a redop all_gather has not": (_with_row_value(2, 3, "sum"), [], r":28: redop 'sum' does not fit all_gather"),
    "busbw not algbw × the factor": (
        _impossible(busbw=60.0),
        [],
        r":31: out-of-place busbw 60 GB/s is not algbw 50 × 0\.9375, all_gather's factor at 16 ranks",
    ),
    "algbw not size / time": (
        _impossible(algbw=80.0, busbw=75.0),
        [],
        r":31: out-of-place algbw 80 GB/s is not size / time = 33554432 B / 671\.09 µs = 50 GB/s",
    ),
    "a row lost": (
        _row_lost(),
        [],
        r":36: '# Avg bus bandwidth' says 45\.4688 GB/s but the 9 rows above it average 46\.8800 GB/s: "
        "rows are missing",
    ),
    "an average that is not the rows'": (
        _with_line(FIRST_ROW + 11, "# Avg bus bandwidth    : 47.5"),
        [],
        r":37: '# Avg bus bandwidth' says 47\.5 GB/s but the 10 rows above it average 46\.8800 GB/s",
    ),
    "a non-numeric average": (
        _with_line(FIRST_ROW + 11, "# Avg bus bandwidth    : fast"),
        [],
        r":37: Avg bus bandwidth 'fast' is not a number",
    ),
    "a truncated log": (_text(GOOD[: FIRST_ROW + 5]), [], r"line 24 has no '# Avg bus bandwidth' line after it"),
    "a second table before the first ends": (
        _text([*GOOD[: FIRST_ROW + 5], *GOOD]),
        [],
        r":54: a results table starts before the one at line 24 ends",
    ),
    "missing rank lines": (_with_line(9, None), [], r"lists ranks 0, 1, 2, 3, 5, 6, 7, 8, …, not 0 to n − 1"),
    "a header without its groups": (
        _with_line(23, "#       size         count      type   redop    root     time   algbw   busbw"),
        [],
        r":24: an nccl-tests table header without two time, algbw, busbw, #wrong groups",
    ),
    "a header cut after its second algbw": (
        _with_line(
            23, "#       size         count      type   redop    root     time   algbw   busbw #wrong  time  algbw"
        ),
        [],
        r":24: an nccl-tests table header without two time, algbw, busbw, #wrong groups",
    ),
    "a missing file": ("", ["--log", "/nonexistent/nccl.log"], "does not exist"),
}


@pytest.mark.parametrize("case", HOSTILE)
def test_hostile_input_exits_2_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str) -> None:
    text, argv, pattern = HOSTILE[case]
    path = tmp_path / "nccl.log"
    path.write_bytes(text.encode("latin-1") if case == "binary" else text.encode())
    for output in ([], ["--json"], ["--expect", "tcpx"]):
        assert main(["nccl", *(argv or ["--log", str(path)]), *output]) == 2
        assert_refused(capsys.readouterr(), pattern)


def test_the_real_entry_point_exits_1_on_fail(tmp_path: Path) -> None:
    """`python -m analysis nccl` itself: the report on stdout, nothing on stderr, exit code 1."""
    slow = write(tmp_path, shaped_like(TCPX_SIZES, 24.0))
    done = subprocess.run(
        [sys.executable, "-m", "analysis", "nccl", "--log", str(slow), "--expect", "tcpx"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stderr) == (1, "")
    assert done.stdout.rstrip().endswith("verdict: FAIL")


def test_every_benchmark_is_known() -> None:
    """The names the log and --collective may give: the checked collectives and two more."""
    assert set(BENCHMARKS) == {*COLLECTIVES, "alltoallv", "hypercube"}
    assert [g.value for g in PUBLISHED] == ["tcpx", "tcpxo", "rdma"]
