"""nccl-tests output for the `nccl` tests: runs shaped for them (written with
`analysis.samples.NcclRun`, from nccl-tests' format), and published outputs to read.
"""

from __future__ import annotations

from collections.abc import Sequence

from analysis.samples import NcclRun, at_bandwidth


def shaped_like(sizes: Sequence[int], algbw_gbps: float, collective: str = "all_gather", **kwargs: object) -> NcclRun:
    """A test over `sizes` at one algbw."""
    rows = [(size, at_bandwidth(size, algbw_gbps), at_bandwidth(size, algbw_gbps)) for size in sizes]
    return NcclRun(collective, 16, rows, **kwargs)  # type: ignore[arg-type]


def powers_of_two(first: int, last: int) -> list[int]:
    sizes, size = [], first
    while size <= last:
        sizes.append(size)
        size *= 2
    return sizes


# Published example outputs, as printed (Cluster Toolkit READMEs @1047080): the TCPX one with
# the NCCL line before it, the RDMA one from the dws-flex-start example.
CTK_TCPX = """\
nccl-test-host-1:166:207 [0] NCCL INFO NCCL_P2P_PXN_LEVEL set by environment to 0.
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
     1048576         16384     float    none      -1    996.7    1.05    0.99    N/A   1007.1    1.04    0.98    N/A
     2097152         32768     float    none      -1    988.6    2.12    1.99    N/A    973.5    2.15    2.02    N/A
     4194304         65536     float    none      -1    942.9    4.45    4.17    N/A    935.8    4.48    4.20    N/A
     8388608        131072     float    none      -1   1007.2    8.33    7.81    N/A   1018.2    8.24    7.72    N/A
    16777216        262144     float    none      -1   1063.4   15.78   14.79    N/A   1057.9   15.86   14.87    N/A
    33554432        524288     float    none      -1   1116.5   30.05   28.18    N/A   1220.1   27.50   25.78    N/A
    67108864       1048576     float    none      -1   1334.7   50.28   47.14    N/A   1359.5   49.36   46.28    N/A
   134217728       2097152     float    none      -1   1940.8   69.15   64.83    N/A   1940.9   69.15   64.83    N/A
   268435456       4194304     float    none      -1   3624.3   74.07   69.44    N/A   3545.2   75.72   70.99    N/A
   536870912       8388608     float    none      -1   7098.6   75.63   70.90    N/A   7054.3   76.11   71.35    N/A
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 30.9622
"""

CTK_RDMA = """\
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
        1024            16     float    none      -1    54.07    0.02    0.02      0    55.80    0.02    0.02      0
        2048            32     float    none      -1    55.46    0.04    0.03      0    55.31    0.04    0.03      0
        4096            64     float    none      -1    55.59    0.07    0.07      0    55.38    0.07    0.07      0
        8192           128     float    none      -1    56.05    0.15    0.14      0    55.92    0.15    0.14      0
       16384           256     float    none      -1    57.08    0.29    0.27      0    57.75    0.28    0.27      0
       32768           512     float    none      -1    57.49    0.57    0.53      0    57.22    0.57    0.54      0
       65536          1024     float    none      -1    59.20    1.11    1.04      0    59.20    1.11    1.04      0
      131072          2048     float    none      -1    59.58    2.20    2.06      0    63.57    2.06    1.93      0
      262144          4096     float    none      -1    63.87    4.10    3.85      0    63.61    4.12    3.86      0
      524288          8192     float    none      -1    64.83    8.09    7.58      0    64.40    8.14    7.63      0
     1048576         16384     float    none      -1    79.74   13.15   12.33      0    76.66   13.68   12.82      0
     2097152         32768     float    none      -1    78.41   26.74   25.07      0    79.05   26.53   24.87      0
     4194304         65536     float    none      -1    83.21   50.41   47.26      0    81.25   51.62   48.39      0
     8388608        131072     float    none      -1    94.35   88.91   83.35      0    99.07   84.68   79.38      0
    16777216        262144     float    none      -1    122.9  136.55  128.02      0    121.7  137.83  129.21      0
    33554432        524288     float    none      -1    184.2  182.19  170.80      0    178.1  188.38  176.60      0
    67108864       1048576     float    none      -1    294.7  227.75  213.51      0    277.7  241.62  226.52      0
   134217728       2097152     float    none      -1    495.4  270.94  254.00      0    488.8  274.60  257.43      0
   268435456       4194304     float    none      -1    877.5  305.92  286.80      0    861.3  311.65  292.17      0
   536870912       8388608     float    none      -1   1589.8  337.71  316.60      0   1576.2  340.61  319.33      0
  1073741824      16777216     float    none      -1   3105.7  345.74  324.13      0   3069.2  349.85  327.98      0
  2147483648      33554432     float    none      -1   6161.7  348.52  326.74      0   6070.7  353.75  331.64      0
  4294967296      67108864     float    none      -1    12305  349.03  327.22      0    12053  356.35  334.08      0
  8589934592     134217728     float    none      -1    24489  350.77  328.85      0    23991  358.05  335.67      0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 120.248
"""

# nccl-tests from 2019, as a public gist prints it (gist.github.com/cswinter/3bc2cbcc7c947e4a2736188dd6e74240):
# no root column, `bytes N type op`, `res` for #wrong, times in ms, the rank lines inside the table.
OLD_FORMAT = """\
nThread 1 nGpus 1 minBytes 1048576 maxBytes 1073741824 step: 2(factor) warmup iters: 5 iters: 20 validation: 0
NCCL version 2.4.7ms0+cuda10.0
# NCCL Tests compiled with NCCL 2.4
# Using devices
# Rank 0 on managed-worker-3jq5 device 0 [0x00] Tesla V100-SXM2-16GB
# out-of-place in-place
# bytes N type op time algbw busbw res time algbw busbw res
# Rank 1 on managed-worker-0khr device 0 [0x00] Tesla V100-SXM2-16GB
1048576 262144 float sum 2.059 0.51 0.51 N/A 3.314 0.32 0.32 N/A
2097152 524288 float sum 3.047 0.69 0.69 N/A 6.873 0.31 0.31 N/A
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 0.4575
"""
