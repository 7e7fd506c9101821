"""The GPU dashboard and alert policies of an environment, as the Cloud Monitoring APIs take
them (facts.monitoring). Pure: tests read the layout and the conditions directly."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from facts.kubernetes import TRAINING_CONTAINER
from facts.machines import MachineType
from facts.monitoring import (
    AUTO_CLOSE_S,
    CLUSTER_LABEL,
    DCGM,
    EXPECTED_FIELD,
    FIRST_STEPS_UNREPORTED,
    HOSTNAME_LABEL,
    K8S_CONTAINER,
    LOG_METRIC_PREFIX,
    MODEL_LABEL,
    MOSAIC_COLUMNS,
    NAMESPACE_LABEL,
    PROMETHEUS_TARGET,
    RECORD_FIELD,
    RESTART_COUNT,
    RUN_FIELD,
    SECONDS_FIELD,
    STEP_FIELD,
    STEP_RECORD,
    XID_FIELD,
)
from planners import layout
from planners.pools import GpuPoolExport
from planners.runs import RunSpec

# The charts, in order: each per GPU model (one per machine type, so per pool of that type)
# and per node.
DASHBOARD_METRICS = (
    "DCGM_FI_DEV_GPU_UTIL",
    "DCGM_FI_PROF_SM_ACTIVE",
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
    "DCGM_FI_DEV_FB_USED",
    "DCGM_FI_PROF_NVLINK_TX_BYTES",
    "DCGM_FI_PROF_NVLINK_RX_BYTES",
    "DCGM_FI_PROF_PCIE_TX_BYTES",
    "DCGM_FI_PROF_PCIE_RX_BYTES",
)
ALIGNMENT = "60s"
_HALF = MOSAIC_COLUMNS // 2
_HEIGHT = 16
_TEXT_HEIGHT = 4


def _tile(x: int, y: int, width: int, height: int, widget: dict[str, Any]) -> dict[str, Any]:
    """A mosaic tile without its zero coordinates: the Dashboards API returns proto3 JSON, which
    leaves out a field at its default, so a written 0 reads back absent and the provider reports
    a diff on every refresh (hashicorp/terraform-provider-google#16173)."""
    position = {key: value for key, value in (("xPos", x), ("yPos", y)) if value}
    return {**position, "width": width, "height": height, "widget": widget}


def dcgm_filter(field: str, cluster: str) -> str:
    return (
        f'metric.type="{DCGM[field].metric_type}" resource.type="{PROMETHEUS_TARGET}" '
        f'resource.label."cluster"="{cluster}"'
    )


def _xy_chart(
    title: str, queries: Sequence[dict[str, Any]], *, unit: str, threshold: float | None = None
) -> dict[str, Any]:
    """A line chart of one data set per query (a TimeSeriesQuery's source: a filter or PromQL)."""
    chart: dict[str, Any] = {
        "dataSets": [
            {"timeSeriesQuery": {**query, "unitOverride": unit}, "plotType": "LINE", "targetAxis": "Y1"}
            for query in queries
        ],
        "chartOptions": {"mode": "COLOR"},
        "yAxis": {"scale": "LINEAR"},
    }
    if threshold is not None:
        chart["thresholds"] = [{"value": threshold, "targetAxis": "Y1"}]
    return {"title": title, "xyChart": chart}


def _chart(
    title: str, filter_: str, *, aligner: str, reducer: str, group_by: Sequence[str], unit: str
) -> dict[str, Any]:
    aggregation = {
        "alignmentPeriod": ALIGNMENT,
        "perSeriesAligner": aligner,
        "crossSeriesReducer": reducer,
        "groupByFields": list(group_by),
    }
    return _xy_chart(title, [{"timeSeriesFilter": {"filter": filter_, "aggregation": aggregation}}], unit=unit)


def step_charts(steps: StepMetrics, margin: float) -> list[dict[str, Any]]:
    """Each run's measured step time beside the one its plan expects (series "measured" and
    "expected"), and their ratio with the slow-run alert's threshold."""
    series = [
        f'label_replace({metric.mean()}, "series", "{what}", "", "")'
        for what, metric in (("measured", steps.measured), ("expected", steps.expected))
    ]
    return [
        _xy_chart("Step time per run, measured and as planned", [{"prometheusQuery": q} for q in series], unit="s"),
        _xy_chart(
            "Step time over the plan's, per run",
            [{"prometheusQuery": steps.slowdown()}],
            unit="1",
            threshold=1 + margin,
        ),
    ]


def gpu_dashboard(
    cluster: str,
    namespace: str,
    pools: Sequence[GpuPoolExport],
    steps: StepMetrics,
    margin: float,
) -> dict[str, Any]:
    """One dashboard per environment: each DCGM signal per GPU model and per node, then the
    training containers' restarts, then the runs' step times against their plans (`steps`) and
    the slow-run threshold 1 + `margin`."""
    models = ", ".join(sorted({p.machine.accelerator.name for p in pools}))
    widgets: list[dict[str, Any]] = [
        {
            "title": "About",
            "text": {
                "content": f"GPU pools of `{cluster}`: "
                + ", ".join(f"{p.name} ({p.machine_type} × {p.max_nodes})" for p in pools)
                + f". DCGM series carry the GPU model ({models}) and the node, not the pool: "
                "a pool is its machine type's line.",
                "format": "MARKDOWN",
            },
        }
    ]
    for field in DASHBOARD_METRICS:
        metric = DCGM[field]
        for per, label in (("GPU model", MODEL_LABEL), ("node", HOSTNAME_LABEL)):
            widgets.append(
                _chart(
                    f"{metric.title}, per {per}",
                    dcgm_filter(field, cluster),
                    aligner="ALIGN_MEAN",
                    reducer="REDUCE_MEAN",
                    group_by=[f'metric.label."{label}"'],
                    unit=metric.unit,
                )
            )
    widgets.append(
        _chart(
            "Training container restarts",
            f'metric.type="{RESTART_COUNT}" resource.type="{K8S_CONTAINER}" '
            f'resource.label."cluster_name"="{cluster}" resource.label."namespace_name"="{namespace}" '
            f'resource.label."container_name"="{TRAINING_CONTAINER}"',
            aligner="ALIGN_DELTA",
            reducer="REDUCE_SUM",
            group_by=['resource.label."pod_name"'],
            unit="1",
        )
    )
    widgets.extend(step_charts(steps, margin))
    tiles = [
        # The text spans the width; charts go two per row below it.
        _tile(0, 0, MOSAIC_COLUMNS, _TEXT_HEIGHT, widgets[0]),
        *(
            _tile((i % 2) * _HALF, _TEXT_HEIGHT + (i // 2) * _HEIGHT, _HALF, _HEIGHT, widget)
            for i, widget in enumerate(widgets[1:])
        ),
    ]
    return {"displayName": f"GPUs of {cluster}", "mosaicLayout": {"columns": MOSAIC_COLUMNS, "tiles": tiles}}


@dataclass(frozen=True)
class AlertCondition:
    """One alert policy of one PromQL condition (facts.monitoring: the Alerting API's rules)."""

    name: str
    display_name: str
    documentation: str
    query: str
    # How long the query must hold before an incident opens, in whole minutes.
    duration_s: int
    evaluation_interval_s: int = 60
    # An incident whose condition has had no data this long closes (a node that went away).
    auto_close_s: int = AUTO_CLOSE_S


# A new XID keeps its incident open this long, then it closes unless another one arrives.
XID_WINDOW_MINUTES = 10
LOST_DURATION_S = 600


def dcgm_series(field: str, cluster: str) -> str:
    """The PromQL selector of one DCGM metric of one cluster."""
    return f'{DCGM[field].promql_name}{{{CLUSTER_LABEL}="{cluster}"}}'


def gpu_alerts(cluster: str, pools: Sequence[GpuPoolExport]) -> list[AlertCondition]:
    """A GPU reporting a new XID error, and, where every pool holds a fixed number of nodes, fewer
    GPUs reporting than the pools have, none at all included: a node lost. A pool that scales
    changes size on purpose, and its GPUs would hide another pool's loss in the count, so then
    there is no such alert.

    Both are PromQL conditions, which may name a metric no sample has created yet (a pool of 0
    nodes has never reported): a threshold condition on such a metric fails to create."""
    xid = dcgm_series(XID_FIELD, cluster)
    alerts = [
        AlertCondition(
            name="gpu-xid",
            display_name=f"{cluster}: GPU XID error",
            documentation=f"A GPU reported an XID error it had not reported {XID_WINDOW_MINUTES} minutes "
            f"before ({XID_FIELD} holds the last one; the incident closes {XID_WINDOW_MINUTES} minutes after "
            "the last new one). Check `kubectl get events --field-selector reason=XIDError` and the node's "
            "condition.",
            # The gauge keeps the last XID, so `> 0` alone would stay true until the driver is
            # reset: only a value (or series) that differs from the one a window earlier counts.
            query=f"({xid} > 0) unless ({xid} offset {XID_WINDOW_MINUTES}m == {xid})",
            duration_s=0,
        )
    ]
    fixed = [p for p in pools if p.min_nodes == p.max_nodes > 0]
    if fixed and len(fixed) == len(pools):
        gpus = sum(p.max_nodes * p.machine.gpus for p in fixed)
        util = dcgm_series("DCGM_FI_DEV_GPU_UTIL", cluster)
        alerts.append(
            AlertCondition(
                name="gpu-nodes-lost",
                display_name=f"{cluster}: GPU nodes missing",
                documentation=f"Fewer than the {gpus} GPUs of the fixed-size pools "
                f"({', '.join(p.name for p in fixed)}) reported for {LOST_DURATION_S // 60} minutes, "
                "or none at all: a node was lost or is unhealthy.",
                # A count of no series is no series, which no comparison sees: absent() answers
                # when every node is gone.
                query=f"count({util}) < {gpus} or absent({util})",
                duration_s=LOST_DURATION_S,
            )
        )
    return alerts


# The step records' metrics: a DISTRIBUTION needs buckets (bucketOptions), though only its mean is
# read: from 0.1 s by 25 %, 40 of them reach 750 s.
STEP_BUCKETS = MappingProxyType({"num_finite_buckets": 40, "growth_factor": 1.25, "scale": 0.1})
# The metric label of a record's run.
RUN_LABEL = "run"
# A run's step time is its mean over this window, and a run slower than its plan alerts once it
# has been so for this long: longer than a checkpoint's save or a restart's warm-up.
STEP_WINDOW = "10m"
SLOW_RUN_DURATION_S = 900


def promql_name(metric_type: str) -> str:
    """A Cloud Monitoring metric type as PromQL names it: the first "/" a ":", every other
    character outside [A-Za-z0-9_] a "_" (https://cloud.google.com/monitoring/promql/promql-mapping)."""
    domain, _, path = metric_type.partition("/")
    return f"{_promql_safe(domain)}:{_promql_safe(path)}"


def _promql_safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", text)


@dataclass(frozen=True)
class LogMetric:
    """A log-based DISTRIBUTION metric (facts.monitoring) of one field of a cluster's step records,
    per run."""

    # The resource's name beside its component's, and the metric's own name.
    key: str
    name: str
    display_name: str
    filter: str
    value_field: str
    unit: str = "s"

    @property
    def metric_type(self) -> str:
        return LOG_METRIC_PREFIX + self.name

    @property
    def promql_name(self) -> str:
        return promql_name(self.metric_type)

    @property
    def value_extractor(self) -> str:
        return f"EXTRACT(jsonPayload.{self.value_field})"

    @property
    def label_extractors(self) -> Mapping[str, str]:
        return MappingProxyType({RUN_LABEL: f"EXTRACT(jsonPayload.{RUN_FIELD})"})

    def mean(self, window: str = STEP_WINDOW) -> str:
        """Its mean per run over `window`, in PromQL. A log-based metric may be written against
        several monitored resource types, and PromQL must then name one (promql-mapping,
        "Specifying a monitored resource type")."""
        by = f"sum by ({NAMESPACE_LABEL}, {RUN_LABEL})"
        resource = f'{{monitored_resource="{K8S_CONTAINER}"}}'
        series = f"{self.promql_name}_sum{resource}", f"{self.promql_name}_count{resource}"
        return f"{by} (rate({series[0]}[{window}])) / {by} (rate({series[1]}[{window}]))"


@dataclass(frozen=True)
class StepMetrics:
    """The measured step times of a cluster's runs, and the step times their plans expect."""

    measured: LogMetric
    expected: LogMetric

    @property
    def metrics(self) -> tuple[LogMetric, LogMetric]:
        return self.measured, self.expected

    def slowdown(self) -> str:
        """Each run's mean step over the one its plan expects, in PromQL."""
        return f"({self.measured.mean()}) / ({self.expected.mean()})"


def step_metrics(cluster: str) -> StepMetrics:
    """The log-based metrics of the step records of the cluster's training containers. Their
    names hold the cluster's, since a project's log-based metrics share one namespace."""
    records = (
        f'resource.type="{K8S_CONTAINER}" resource.labels.cluster_name="{cluster}" '
        f'resource.labels.container_name="{TRAINING_CONTAINER}" jsonPayload.{RECORD_FIELD}="{STEP_RECORD}"'
    )
    return StepMetrics(
        measured=LogMetric(
            "step-time", f"nemo-gke/{cluster}/step-time", f"Training step time, {cluster}", records, SECONDS_FIELD
        ),
        expected=LogMetric(
            "expected-step-time",
            f"nemo-gke/{cluster}/expected-step-time",
            f"Training step time the plan expects, {cluster}",
            # A run whose plan expects no step time reports none.
            f"{records} jsonPayload.{EXPECTED_FIELD}:*",
            EXPECTED_FIELD,
        ),
    )


def step_record(run: RunSpec, machine: MachineType) -> dict[str, Any]:
    """What a Megatron-Bridge or NeMo 2 launcher's last rank prints after each step past its warm-up
    (payload/step_record.py), for the step metrics: the fixed fields, and the names it gives the
    step and its seconds."""
    fields: dict[str, Any] = {RECORD_FIELD: STEP_RECORD, RUN_FIELD: run.name}
    if (expected := layout.expected_step_seconds(run, machine)) is not None:
        fields[EXPECTED_FIELD] = round(expected, 3)
    return {
        "fields": fields,
        "stepField": STEP_FIELD,
        "secondsField": SECONDS_FIELD,
        "warmupSteps": FIRST_STEPS_UNREPORTED,
    }


def step_record_problems(line: str, run: str) -> list[str]:
    """What keeps the step metrics from reading a line a run printed as its step record: the
    filter's record field, the run label's field, and the numbers they extract."""
    try:
        entry = json.loads(line)
    except ValueError:
        return [f"not one JSON object: {line!r}"]
    if not isinstance(entry, dict):
        return [f"not one JSON object: {line!r}"]
    problems = []
    if entry.get(RECORD_FIELD) != STEP_RECORD:
        problems.append(f"{RECORD_FIELD} is {entry.get(RECORD_FIELD)!r}, not {STEP_RECORD!r}")
    if entry.get(RUN_FIELD) != run:
        problems.append(f"{RUN_FIELD} is {entry.get(RUN_FIELD)!r}, not {run!r}")
    if not isinstance(entry.get(STEP_FIELD), int):
        problems.append(f"{STEP_FIELD} is {entry.get(STEP_FIELD)!r}, not a whole number")
    # The expected step is absent where the run's plan has none.
    for name in (SECONDS_FIELD, *((EXPECTED_FIELD,) if EXPECTED_FIELD in entry else ())):
        value = entry.get(name)
        if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
            problems.append(f"{name} is {value!r}, not a positive number of seconds")
    return problems


def slow_run_alert(cluster: str, steps: StepMetrics, margin: float) -> AlertCondition:
    """A run whose mean step stays more than `margin` above the one its plan expects."""
    return AlertCondition(
        name="run-slower-than-planned",
        display_name=f"{cluster}: a run is slower than its plan",
        documentation=f"A run's mean step time over {STEP_WINDOW} stayed more than {margin:.0%} above the "
        f"step time its plan expects for {SLOW_RUN_DURATION_S // 60} minutes (NVIDIA's published step at its "
        "layout, else the layout planner's prediction: the stack output `training.runs.<run>.plan`). "
        "A straggler, a slow link or a wrong setting: compare the run with "
        "`python -m analysis metrics --plan` and look for a slow node on the GPU dashboard.",
        query=f"{steps.slowdown()} > {1 + margin:g}",
        duration_s=SLOW_RUN_DURATION_S,
    )
