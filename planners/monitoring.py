"""The GPU dashboard and alert policies of an environment, as the Cloud Monitoring APIs take
them (facts.monitoring). Pure: tests read the layout and the conditions directly."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from facts.kubernetes import TRAINING_CONTAINER
from facts.monitoring import (
    DCGM,
    HOSTNAME_LABEL,
    K8S_CONTAINER,
    MODEL_LABEL,
    MOSAIC_COLUMNS,
    PROMETHEUS_TARGET,
    RESTART_COUNT,
)
from planners.pools import PoolFacts

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


def gpu_dashboard(cluster: str, namespace: str, pools: Sequence[PoolFacts]) -> dict[str, Any]:
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
    tiles = []
    for i, widget in enumerate(widgets):
        # The text spans the width; charts go two per row below it.
        if i == 0:
            tiles.append({"xPos": 0, "yPos": 0, "width": MOSAIC_COLUMNS, "height": 4, "widget": widget})
            continue
        row, column = divmod(i - 1, 2)
        tiles.append(
            {"xPos": column * _HALF, "yPos": 4 + row * _HEIGHT, "width": _HALF, "height": _HEIGHT, "widget": widget}
        )
    return {"displayName": f"GPUs of {cluster}", "mosaicLayout": {"columns": MOSAIC_COLUMNS, "tiles": tiles}}


@dataclass(frozen=True)
class AlertCondition:
    """One alert policy of one threshold condition, in the pulumi-gcp AlertPolicy's terms."""

    name: str
    display_name: str
    documentation: str
    filter: str
    comparison: str
    threshold: float
    duration: str
    aligner: str
    reducer: str | None = None


def gpu_alerts(cluster: str, pools: Sequence[PoolFacts]) -> list[AlertCondition]:
    """A GPU reporting an XID error, and, where every pool holds a fixed number of nodes, fewer
    GPUs reporting than the pools have: a node lost. A pool that scales changes size on purpose,
    and its GPUs would hide another pool's loss in the count, so then there is no such alert."""
    alerts = [
        AlertCondition(
            name="gpu-xid",
            display_name=f"{cluster}: GPU XID error",
            documentation="A GPU reported an XID error (DCGM_FI_DEV_XID_ERRORS holds the last one). "
            "Check `kubectl get events --field-selector reason=XIDError` and the node's condition.",
            filter=dcgm_filter("DCGM_FI_DEV_XID_ERRORS", cluster),
            comparison="COMPARISON_GT",
            threshold=0,
            duration="0s",
            aligner="ALIGN_MAX",
        )
    ]
    fixed = [p for p in pools if p.min_nodes == p.max_nodes > 0]
    if fixed and len(fixed) == len(pools):
        gpus = sum(p.max_nodes * p.machine.gpus for p in fixed)
        alerts.append(
            AlertCondition(
                name="gpu-nodes-lost",
                display_name=f"{cluster}: GPU nodes missing",
                documentation=f"Fewer than the {gpus} GPUs of the fixed-size pools "
                f"({', '.join(p.name for p in fixed)}) reported for 10 minutes: a node was lost or is unhealthy.",
                filter=dcgm_filter("DCGM_FI_DEV_GPU_UTIL", cluster),
                comparison="COMPARISON_LT",
                threshold=gpus,
                duration="600s",
                aligner="ALIGN_MEAN",
                reducer="REDUCE_COUNT",
            )
        )
    return alerts
