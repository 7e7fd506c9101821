"""What Cloud Monitoring holds about GPUs on GKE, and what the Dashboards and Alerting APIs take.

DCGM metrics: with the DCGM package enabled, GKE runs NVIDIA's dcgm-exporter and sends its series
to Managed Service for Prometheus, where each DCGM field is the metric type
`prometheus.googleapis.com/<FIELD>/gauge` on resource `prometheus_target`
(https://cloud.google.com/kubernetes-engine/docs/how-to/dcgm-metrics; the naming as used by
GoogleCloudPlatform/ai-on-gke benchmarks/benchmark/tools/locust-load-inference/sample-dashboards/
tgi-dashboard.yaml@1892f977). Field names and kinds: NVIDIA/dcgm-exporter
etc/dcp-metrics-included.csv (each a gauge: utilisations in % or ratios, memory in MiB, link
throughput in bytes per second, the last XID seen).

In PromQL a Managed Service for Prometheus series keeps its exporter name, and the labels of its
`prometheus_target` resource (`cluster`, `location`, `namespace`, ...) are plain labels
(https://cloud.google.com/monitoring/promql/promql-mapping).
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

    @property
    def promql_name(self) -> str:
        return self.field


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

# The prometheus_target label naming the GKE cluster a series comes from.
CLUSTER_LABEL = "cluster"

# The last-XID gauge keeps its value until the driver is reset or the exporter restarts
# (NVIDIA/dcgm-exporter#500, NVIDIA/DCGM#277), and exporters from 3.3.6-3.4.2 put the code in an
# `err_code` label (NVIDIA/dcgm-exporter#309), so a new XID may be a new series rather than a new value.
XID_FIELD = "DCGM_FI_DEV_XID_ERRORS"

# GKE system metric: container restarts (https://cloud.google.com/monitoring/api/metrics_kubernetes).
RESTART_COUNT = "kubernetes.io/container/restart_count"
K8S_CONTAINER = "k8s_container"

# Dashboards API (projects.dashboards): a mosaic layout is 48 columns wide.
# https://cloud.google.com/monitoring/api/ref_v3/rest/v1/projects.dashboards#mosaiclayout
MOSAIC_COLUMNS = 48
ALIGNERS = frozenset({"ALIGN_MEAN", "ALIGN_MAX", "ALIGN_DELTA", "ALIGN_RATE", "ALIGN_NONE"})
REDUCERS = frozenset({"REDUCE_MEAN", "REDUCE_MAX", "REDUCE_SUM", "REDUCE_COUNT", "REDUCE_NONE"})

# Alerting API, PrometheusQueryLanguageCondition (https://cloud.google.com/monitoring/promql/create-promql-alerts,
# pulumi-gcp AlertPolicyConditionConditionPrometheusQueryLanguageArgs): a policy with a PromQL
# condition has only that one; `duration` is a whole number of minutes, in seconds;
# `evaluationInterval` a positive multiple of 30 s. `disableMetricValidation` lets the condition
# name a metric no sample has created yet: otherwise creating the policy fails with 404 until one
# arrives (hashicorp/terraform-provider-google#11102, #20491; GoogleCloudPlatform/magic-modules#12438).
PROMQL_DURATION_STEP_S = 60
PROMQL_EVALUATION_STEP_S = 30
# AlertStrategy.autoClose: "if an alert policy that was active has no data for this long, any open
# incidents will close" (projects.alertPolicies#AlertStrategy; pulumi-gcp AlertPolicyAlertStrategyArgs).
# Without it an incident whose series went away (a node deleted) stays open.
AUTO_CLOSE_S = 1800

# A run's step record: after each step past its warm-up, the Megatron-Bridge launcher's last rank
# prints one JSON object on one line of the training container's stdout
# (payload/megatron_bridge_pretrain.py, step_record), which GKE's logging agent stores as the log
# entry's jsonPayload (https://cloud.google.com/logging/docs/structured-logging, "Built-in logging
# agents"). STEP_RECORD is its `record` field; the others are the run's name, the step, its
# seconds and the seconds the run's plan expects of a step (absent where the plan has none).
STEP_RECORD = "nemo-gke.io/step"
RECORD_FIELD = "record"
RUN_FIELD = "run"
STEP_FIELD = "step"
SECONDS_FIELD = "stepTimeS"
EXPECTED_FIELD = "expectedStepTimeS"
# Steps of a process before it reports: compilation, CUDA graph capture and the first
# collectives' setup make a start's first steps slower than the run's pace (the default window of
# `python -m analysis metrics` starts after as many).
FIRST_STEPS_UNREPORTED = 10
# Log-based metrics (logging.googleapis.com/user/<name>, https://cloud.google.com/logging/docs/
# logs-based-metrics; pulumi-gcp logging.Metric): a DISTRIBUTION of a value extracted from each
# matching entry, DELTA, with labels extracted from it. In PromQL their names follow
# https://cloud.google.com/monitoring/promql/promql-mapping: the first "/" becomes ":", every
# other character outside [A-Za-z0-9_] "_", and a distribution is read through its _sum and
# _count series; a resource label (k8s_container's namespace_name) is a plain label.
LOG_METRIC_PREFIX = "logging.googleapis.com/user/"
NAMESPACE_LABEL = "namespace_name"
