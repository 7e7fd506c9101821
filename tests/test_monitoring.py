"""The GPU dashboard and alert policies: every metric they name is one GKE exports, the layout
is what the Dashboards API takes, and the alerts fire on what they say (facts/monitoring.py)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from facts.monitoring import ALIGNERS, DCGM, MOSAIC_COLUMNS, REDUCERS, RESTART_COUNT
from tests.conftest import issue_for, rejected
from tools.runner import StackRun, stack_with

DASHBOARD = "gcp:monitoring/dashboard:Dashboard"
ALERT = "gcp:monitoring/alertPolicy:AlertPolicy"
CHANNEL = "gcp:monitoring/notificationChannel:NotificationChannel"
KNOWN_TYPES = {m.metric_type for m in DCGM.values()} | {RESTART_COUNT}
# Labels each monitored resource type has, and those the DCGM exporter puts on its series.
RESOURCE_LABELS = {
    "prometheus_target": {"project_id", "location", "cluster", "namespace", "job", "instance"},
    "k8s_container": {"project_id", "location", "cluster_name", "namespace_name", "pod_name", "container_name"},
}
DCGM_LABELS = {"gpu", "UUID", "device", "modelName", "Hostname"}


def dashboard(run: StackRun) -> dict[str, Any]:
    (resource,) = run.of_type(DASHBOARD)
    return json.loads(resource.inputs["dashboardJson"])


def filters_of(layout: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    found = []
    for tile in layout["mosaicLayout"]["tiles"]:
        for data_set in tile["widget"].get("xyChart", {}).get("dataSets", []):
            query = data_set["timeSeriesQuery"]["timeSeriesFilter"]
            found.append((query["filter"], query["aggregation"]))
    return found


def check_filter(filter_: str, group_by: list[str]) -> None:
    """A Monitoring filter of one known metric type on its resource type, grouped and narrowed
    only by labels that resource type or the DCGM series have."""
    (metric,) = re.findall(r'metric\.type="([^"]+)"', filter_)
    assert metric in KNOWN_TYPES, metric
    (resource,) = re.findall(r'resource\.type="([^"]+)"', filter_)
    labels = re.findall(r'resource\.label\."([^"]+)"', filter_ + " ".join(group_by))
    assert set(labels) <= RESOURCE_LABELS[resource], labels
    assert set(re.findall(r'metric\.label\."([^"]+)"', " ".join(group_by))) <= DCGM_LABELS
    if metric.startswith("prometheus.googleapis.com/"):
        # How Managed Service for Prometheus names a DCGM gauge (ai-on-gke's GKE dashboards).
        assert re.fullmatch(r"prometheus\.googleapis\.com/DCGM_FI_[A-Z_]+/gauge", metric), metric
        assert resource == "prometheus_target"


@pytest.mark.parametrize("stack", ["dev", "a3mega", "a3ultra"])
def test_the_dashboard_names_only_metrics_gke_exports(render: Any, stack: str) -> None:
    run = render(stack)
    layout = dashboard(run)
    filters = filters_of(layout)
    named = {re.findall(r'metric\.type="([^"]+)"', f)[0] for f, _ in filters}
    wanted = {"GPU_UTIL", "SM_ACTIVE", "TENSOR_ACTIVE", "FB_USED", "NVLINK_TX", "NVLINK_RX", "PCIE_TX", "PCIE_RX"}
    assert all(any(w in n for n in named) for w in wanted), named
    assert RESTART_COUNT in named
    cluster = run.exports["cluster"]["name"]
    for filter_, aggregation in filters:
        check_filter(filter_, aggregation["groupByFields"])
        assert f'"{cluster}"' in filter_, "every chart is of this environment's cluster"


def test_the_layout_is_what_the_dashboards_api_takes(render: Any) -> None:
    """projects.dashboards: a mosaic of 48 columns whose tiles lie inside it without overlap,
    each widget of one kind, aggregations with the API's aligners and reducers."""
    layout = dashboard(render("a3ultra"))
    assert set(layout) == {"displayName", "mosaicLayout"}
    mosaic = layout["mosaicLayout"]
    assert mosaic["columns"] == MOSAIC_COLUMNS
    cells: set[tuple[int, int]] = set()
    for tile in mosaic["tiles"]:
        assert tile["xPos"] >= 0 and tile["xPos"] + tile["width"] <= MOSAIC_COLUMNS
        area = {
            (x, y)
            for x in range(tile["xPos"], tile["xPos"] + tile["width"])
            for y in range(tile["yPos"], tile["yPos"] + tile["height"])
        }
        assert not area & cells, "tiles overlap"
        cells |= area
        kinds = set(tile["widget"]) - {"title"}
        assert len(kinds) == 1 and kinds <= {"xyChart", "text"}
    for _, aggregation in filters_of(layout):
        assert re.fullmatch(r"[1-9][0-9]*s", aggregation["alignmentPeriod"])
        assert aggregation["perSeriesAligner"] in ALIGNERS
        assert aggregation["crossSeriesReducer"] in REDUCERS


def with_alerts(stack: str, **alerts: Any) -> dict[str, Any]:
    return stack_with(stack, monitoring={"alerts": {"enabled": True, **alerts}})


def test_alerts_are_off_by_default(render: Any) -> None:
    run = render("a3ultra")
    assert not run.of_type(ALERT) and not run.of_type(CHANNEL)


def test_alerts_fire_on_xid_errors_and_on_missing_gpus_of_fixed_pools(render: Any) -> None:
    """a3ultra: one pool of 72 fixed nodes → an XID alert (the last XID above 0) and a GPU count
    below 576 for 10 minutes; both to the email channel created and the existing one."""
    existing = "projects/my-project/notificationChannels/123"
    run = render("a3ultra", values=with_alerts("a3ultra", email="oncall@example.com", notificationChannels=[existing]))
    (channel,) = run.of_type(CHANNEL)
    assert channel.inputs["labels"] == {"email_address": "oncall@example.com"}
    policies = {p.inputs["displayName"].split(": ", 1)[1]: p.inputs for p in run.of_type(ALERT)}
    assert set(policies) == {"GPU XID error", "GPU nodes missing"}
    xid = policies["GPU XID error"]["conditions"][0]["conditionThreshold"]
    assert "DCGM_FI_DEV_XID_ERRORS" in xid["filter"]
    assert (xid["comparison"], xid["thresholdValue"]) == ("COMPARISON_GT", 0)
    lost = policies["GPU nodes missing"]["conditions"][0]["conditionThreshold"]
    assert (lost["comparison"], lost["thresholdValue"], lost["duration"]) == ("COMPARISON_LT", 576, "600s")
    assert lost["aggregations"] == [
        {"alignmentPeriod": "60s", "perSeriesAligner": "ALIGN_MEAN", "crossSeriesReducer": "REDUCE_COUNT"}
    ]
    for policy in policies.values():
        assert len(policy["notificationChannels"]) == 2 and existing in policy["notificationChannels"]
        (condition,) = policy["conditions"]
        threshold = condition["conditionThreshold"]
        check_filter(threshold["filter"], [])
        assert int(threshold["duration"].rstrip("s")) % 60 == 0


def test_pools_that_scale_get_no_missing_gpu_alert(render: Any) -> None:
    """Flex-start pools scale from zero on purpose: only the XID alert."""
    run = render("a3ultra-flex", values=with_alerts("a3ultra-flex", email="oncall@example.com"))
    assert [p.inputs["displayName"] for p in run.of_type(ALERT)] == ["nemo-flex: GPU XID error"]


@pytest.mark.parametrize(
    ("alerts", "key", "words"),
    [
        ({}, "monitoring.alerts.enabled", "needs somewhere to send alerts"),
        ({"notificationChannels": ["oncall"]}, "monitoring.alerts.notificationChannels[0]", "projects/<project>"),
        ({"email": "not-an-address"}, "monitoring.alerts.email", "email address"),
    ],
)
def test_bad_alert_settings_are_refused(alerts: dict[str, Any], key: str, words: str) -> None:
    message = issue_for(rejected(with_alerts("dev", **alerts)), key)
    assert words in message
