"""Published nccl-tests results for each GPUDirect flavour, and the pass marks their publishers test against.

One record per flavour (`facts.machines.GpuDirect`), each figure with its public source. The
pass mark (`min_avg_busbw`) is the one Google's Cluster Toolkit daily tests apply to
`# Avg bus bandwidth` after running the toolkit's own example NCCL test on 2 nodes; that
average is over the message sizes the example runs, so it only judges a run over the same
sizes. The example output is one published run of that test: shown beside a run's figures, it
is a reference, not a pass mark.

Sources are pinned to the commits of the mirrors this was read from:
GoogleCloudPlatform/cluster-toolkit@1047080 (CTK), GoogleCloudPlatform/container-engine-accelerators@992db81
(CEA). Nothing here comes from AI-Hypercomputer/gpu-recipes: its nccl-tests recipes
(training/a3ultra/nccl-tests, src/helm-charts/a3mega/nccl-tests) publish no results.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from facts.machines import GpuDirect

# nccl-tests' benchmarks, `<name>_perf` (NVIDIA/nccl-tests src/*.cu@a0b82b2).
BENCHMARKS = (
    "all_gather", "all_reduce", "alltoall", "alltoallv", "broadcast", "gather", "hypercube", "reduce",
    "reduce_scatter", "scatter", "sendrecv",
)  # fmt: skip

_CTK = "GoogleCloudPlatform/cluster-toolkit"
_CTK_TESTS = f"{_CTK}:tools/cloud-build/daily-tests/ansible_playbooks/test-validation"
_CEA = "GoogleCloudPlatform/container-engine-accelerators"


@dataclass(frozen=True)
class PublishedRun:
    """A published nccl-tests run on one GPUDirect flavour."""

    gpudirect: GpuDirect
    # Machine types (facts.machines.MACHINE_TYPES) the figures were published for.
    machines: tuple[str, ...]
    # nccl-tests benchmark without `_perf`: the run used `all_gather_perf`.
    collective: str
    nodes: int
    gpus_per_node: int
    # nccl-tests' data type of the run (`-d`, default float).
    data_type: str
    # The published output's rows: (size in bytes, out-of-place busbw, in-place busbw), GB/s.
    example_rows: tuple[tuple[int, float, float], ...]
    # The output's `# Avg bus bandwidth`, GB/s.
    example_avg: float
    example_source: str
    # Where the message sizes come from (the command that produced the rows).
    sizes_source: str
    # The publisher's pass mark for `# Avg bus bandwidth` over those sizes, GB/s.
    min_avg_busbw: float
    min_avg_source: str
    # What the sources do not cover, said in the output.
    gaps: str = ""

    @property
    def sizes(self) -> tuple[int, ...]:
        return tuple(size for size, _, _ in self.example_rows)

    @property
    def ranks(self) -> int:
        return self.nodes * self.gpus_per_node


def _rows(text: str) -> tuple[tuple[int, float, float], ...]:
    """`size oop ip` triples, whitespace-separated, as copied from a published table."""
    numbers = text.split()
    return tuple((int(numbers[i]), float(numbers[i + 1]), float(numbers[i + 2])) for i in range(0, len(numbers), 3))


PUBLISHED: Mapping[GpuDirect, PublishedRun] = {
    run.gpudirect: run
    for run in (
        PublishedRun(
            GpuDirect.TCPX,
            machines=("a3-highgpu-8g",),
            collective="all_gather",
            nodes=2,
            gpus_per_node=8,
            data_type="float",
            # CTK examples/gke-a3-highgpu/multi-node-test-plan.md@1047080, "Step 4", example output.
            example_rows=_rows(
                """
                1048576 0.99 0.98      2097152 1.99 2.02      4194304 4.17 4.20      8388608 7.81 7.72
                16777216 14.79 14.87   33554432 28.18 25.78   67108864 47.14 46.28   134217728 64.83 64.83
                268435456 69.44 70.99  536870912 70.90 71.35
                """
            ),
            example_avg=30.9622,
            example_source=f"{_CTK}:examples/gke-a3-highgpu/multi-node-test-plan.md@1047080 (example output)",
            sizes_source=(
                f"{_CTK}:examples/gke-a3-highgpu/nccl-config.yaml@1047080 and {_CEA}:gpudirect-tcpx/nccl-config.yaml"
                "@992db81 (allgather.sh: run-allgather.sh 8 eth1,eth2,eth3,eth4 1M 512M; -b 1M -e 512M -f 2 -c 0)"
            ),
            min_avg_busbw=25.0,
            min_avg_source=f"{_CTK_TESTS}/test-gke-a3-high.yml@1047080 (average bus bandwidth >= 25 GB/s)",
        ),
        PublishedRun(
            GpuDirect.TCPXO,
            machines=("a3-megagpu-8g",),
            collective="all_gather",
            nodes=2,
            gpus_per_node=8,
            data_type="float",
            # CTK examples/gke-a3-megagpu/README.md@1047080, step 5, example output. The five
            # 0-byte rows are -b 8 .. 128 B rounded down to whole 16-byte chunks per rank.
            example_rows=_rows(
                """
                0 0.00 0.00  0 0.00 0.00  0 0.00 0.00  0 0.00 0.00  0 0.00 0.00
                256 0.00 0.00  512 0.01 0.01  1024 0.01 0.01  2048 0.02 0.02  4096 0.04 0.05  8192 0.09 0.09
                16384 0.18 0.18  32768 0.33 0.32  65536 0.63 0.66  131072 1.25 1.09  262144 1.90 1.89
                524288 3.90 3.87  1048576 7.34 7.62  2097152 14.42 14.69  4194304 26.49 26.49
                8388608 47.34 48.81  16777216 79.49 80.09  33554432 108.27 110.72  67108864 121.49 141.61
                134217728 156.00 159.14  268435456 166.55 166.94  536870912 174.76 175.23
                1073741824 182.00 183.38  2147483648 186.07 186.32  4294967296 187.89 188.04
                8589934592 188.73 188.90
                """
            ),
            example_avg=53.8932,
            example_source=f"{_CTK}:examples/gke-a3-megagpu/README.md@1047080 (example output)",
            sizes_source=(
                f"the example output's rows; the command is {_CEA}:gpudirect-tcpxo/nccl-test-latest.yaml@992db81's "
                "allgather.sh (BENCHMARK=all_gather_perf NHOSTS=2 demo-run-nccl-test-tcpxo-via-mpi.sh, a script "
                "inside the plugin image whose arguments are not published)"
            ),
            min_avg_busbw=30.0,
            min_avg_source=f"{_CTK_TESTS}/test-gke-a3-mega.yml@1047080 (average bus bandwidth >= 30 GB/s)",
        ),
        PublishedRun(
            GpuDirect.RDMA,
            machines=("a3-ultragpu-8g", "a4-highgpu-8g"),
            collective="all_gather",
            nodes=2,
            gpus_per_node=8,
            data_type="float",
            # CTK examples/gke-consumption-options/dws-flex-start/README.md@1047080 (an
            # a3-ultragpu-8g cluster, gke-a3-ultragpu.yaml), example output.
            example_rows=_rows(
                """
                1024 0.02 0.02  2048 0.03 0.03  4096 0.07 0.07  8192 0.14 0.14  16384 0.27 0.27
                32768 0.53 0.54  65536 1.04 1.04  131072 2.06 1.93  262144 3.85 3.86  524288 7.58 7.63
                1048576 12.33 12.82  2097152 25.07 24.87  4194304 47.26 48.39  8388608 83.35 79.38
                16777216 128.02 129.21  33554432 170.80 176.60  67108864 213.51 226.52  134217728 254.00 257.43
                268435456 286.80 292.17  536870912 316.60 319.33  1073741824 324.13 327.98
                2147483648 326.74 331.64  4294967296 327.22 334.08  8589934592 328.85 335.67
                """
            ),
            example_avg=120.248,
            example_source=(
                f"{_CTK}:examples/gke-consumption-options/dws-flex-start/README.md@1047080 "
                "(example output, a3-ultragpu-8g)"
            ),
            sizes_source=(
                f"{_CTK}:examples/gke-a3-ultragpu/nccl-jobset-example.yaml and examples/gke-a4/nccl-jobset-example.yaml"
                "@1047080 (all_gather_perf -b 1K -e 8G -f 2 -g 1 -w 5 --iters 100 -c 1)"
            ),
            min_avg_busbw=100.0,
            min_avg_source=(
                f"{_CTK_TESTS}/test-gke-a3-ultra.yml and test-gke-a4.yml@1047080 "
                "(average bus bandwidth >= 100 GB/s; both on 2 nodes, the A3 Ultra one after setting the example's "
                "N_NODES=4 to 2)"
            ),
            gaps="no published example output for a4-highgpu-8g: its pass mark is the same, its example is not",
        ),
    )
}


@dataclass(frozen=True)
class NcclTestLaunch:
    """How the flavour's documented NCCL test runs nccl-tests in its image (the machine's
    `GpuDirectStack.nccl_test_image`, which holds the nccl-tests binaries, MPI and an ssh server
    on port 222): how a pod starts that server, and the command each MPI rank runs (`{bench}` is
    `<collective>_perf`), over the published sizes."""

    sshd: str
    rank_command: tuple[str, ...]
    begin: str
    end: str
    source: str


NCCL_TEST_LAUNCH: Mapping[GpuDirect, NcclTestLaunch] = {
    GpuDirect.TCPX: NcclTestLaunch(
        sshd="service ssh restart",
        # CPU cores of the NICs' NUMA nodes on an a3-highgpu-8g.
        rank_command=("taskset", "-c", "0-7,104-111,52-59,156-163", "/third_party/nccl-tests-mpi/build/{bench}"),
        begin="1M",
        end="512M",
        source=f"{_CEA}:gpudirect-tcpx/nccl-test-latest.yaml and nccl-config.yaml (run-nccl.sh, allgather.sh)@992db81",
    ),
    GpuDirect.TCPXO: NcclTestLaunch(
        sshd="service ssh restart",
        # The benchmark binaries every plugin image since v1.0.0 carries (the pods' is v1.0.7), on
        # the NICs' cores; the plugin's NCCL profile is sourced by nccl_init.sh before mpirun.
        rank_command=("taskset", "-c", "32-63", "/third_party/nccl-tests-mpi/build/{bench}"),
        begin="8",
        end="8G",
        source=(
            f"{_CEA}:gpudirect-tcpxo/nccl-test.yaml@4aeee0d (v1.0.7); AI-Hypercomputer/gpu-recipes:"
            "src/helm-charts/a3mega/nccl-tests/run_test.sh@2e1fd5e (run_test_mega: /third_party/nccl-tests-mpi/build)"
        ),
    ),
    GpuDirect.RDMA: NcclTestLaunch(
        sshd="/scripts/container_entry.sh daemon &",
        rank_command=("/third_party/nccl-tests/build/{bench}",),
        begin="1K",
        end="8G",
        source=(
            f"{_CEA}:gpudirect-rdma/nccl-test.yaml@992db81; {_CTK}:examples/gke-a3-ultragpu/nccl-jobset-example.yaml"
            "@1047080"
        ),
    ),
}
