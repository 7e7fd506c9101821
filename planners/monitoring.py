"""The GPU dashboard and alert policies of an environment, as the Cloud Monitoring APIs take
them (facts.monitoring). Pure: tests read the layout and the conditions directly."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from facts.kubernetes import TRAINING_CONTAINER
from facts.monitoring import (
    AUTO_CLOSE_S,
    CLUSTER_LABEL,
    DCGM,
    HOSTNAME_LABEL,
    K8S_CONTAINER,
    MODEL_LABEL,
    MOSAIC_COLUMNS,
    PROMETHEUS_TARGET,
    RESTART_COUNT,
    XID_FIELD,
)
from planners.pools import GpuPoolExport

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


def _chart(
    title: str, filter_: str, *, aligner: str, reducer: str, group_by: Sequence[str], unit: str
) -> dict[str, Any]:
    return {
        "title": title,
        "xyChart": {
            "dataSets": [
                {
                    "timeSeriesQuery": {
                        "timeSeriesFilter": {
                            "filter": filter_,
                            "aggregation": {
                                "alignmentPeriod": ALIGNMENT,
                                "perSeriesAligner": aligner,
                                "crossSeriesReducer": reducer,
                                "groupByFields": list(group_by),
                            },
                        },
                        "unitOverride": unit,
                    },
                    "plotType": "LINE",
                    "targetAxis": "Y1",
                }
            ],
            "chartOptions": {"mode": "COLOR"},
            "yAxis": {"scale": "LINEAR"},
        },
    }


def gpu_dashboard(cluster: str, namespace: str, pools: Sequence[GpuPoolExport]) -> dict[str, Any]:
    """One dashboard per environment: each DCGM signal per GPU model and per node, then the
    training containers' restarts."""
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
