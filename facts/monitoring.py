"""What Cloud Monitoring holds about GPUs on GKE, and what the Dashboards and Alerting APIs take.

DCGM metrics: with the DCGM package enabled, GKE runs NVIDIA's dcgm-exporter and sends its series
to Managed Service for Prometheus, where each DCGM field is the metric type
`prometheus.googleapis.com/<FIELD>/gauge` on resource `prometheus_target`
(https://cloud.google.com/kubernetes-engine/docs/how-to/dcgm-metrics; the naming as used by
GoogleCloudPlatform/ai-on-gke benchmarks/benchmark/tools/locust-load-inference/sample-dashboards/
tgi-dashboard.yaml@1892f977). Field names and kinds: NVIDIA/dcgm-exporter
etc/dcp-metrics-included.csv (each a gauge: utilisations in % or ratios, memory in MiB, link
throughput in bytes per second, the last XID seen).
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType

PROMETHEUS_TARGET = "prometheus_target"
# The dcgm-exporter label naming the node a series comes from.
HOSTNAME_LABEL = "Hostname"
# The exporter's GPU model label: a pool's machines share one model.
MODEL_LABEL = "modelName"


@dataclass(frozen=True)
class DcgmMetric:
    field: str
    title: str
    unit: str

    @property
    def metric_type(self) -> str:
        return f"prometheus.googleapis.com/{self.field}/gauge"


DCGM = MappingProxyType(
    {
        m.field: m
        for m in (
            DcgmMetric("DCGM_FI_DEV_GPU_UTIL", "GPU utilisation", "%"),
            DcgmMetric("DCGM_FI_PROF_SM_ACTIVE", "SM activity", "10^2.%"),
            DcgmMetric("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "Tensor-core activity", "10^2.%"),
            DcgmMetric("DCGM_FI_DEV_FB_USED", "GPU memory used", "MiBy"),
            DcgmMetric("DCGM_FI_PROF_NVLINK_TX_BYTES", "NVLink transmit", "By/s"),
            DcgmMetric("DCGM_FI_PROF_NVLINK_RX_BYTES", "NVLink receive", "By/s"),
            DcgmMetric("DCGM_FI_PROF_PCIE_TX_BYTES", "PCIe transmit", "By/s"),
            DcgmMetric("DCGM_FI_PROF_PCIE_RX_BYTES", "PCIe receive", "By/s"),
            DcgmMetric("DCGM_FI_DEV_XID_ERRORS", "Last XID error", "1"),
        )
    }
)

# GKE system metric: container restarts (https://cloud.google.com/monitoring/api/metrics_kubernetes).
RESTART_COUNT = "kubernetes.io/container/restart_count"
K8S_CONTAINER = "k8s_container"

# Dashboards API (projects.dashboards): a mosaic layout is 48 columns wide.
# https://cloud.google.com/monitoring/api/ref_v3/rest/v1/projects.dashboards#mosaiclayout
MOSAIC_COLUMNS = 48
ALIGNERS = frozenset({"ALIGN_MEAN", "ALIGN_MAX", "ALIGN_DELTA", "ALIGN_RATE", "ALIGN_NONE"})
REDUCERS = frozenset({"REDUCE_MEAN", "REDUCE_MAX", "REDUCE_SUM", "REDUCE_COUNT", "REDUCE_NONE"})
