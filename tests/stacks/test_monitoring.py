"""The GPU dashboard and alert policies: every metric they name is one GKE exports, the layout
is what the Dashboards API takes, and the alerts fire on what they say (facts/monitoring.py)."""

from __future__ import annotations

import json
import re
from typing import Any

import promql_parser
import pytest

import payload
from facts.kubernetes import TRAINING_CONTAINER
from facts.monitoring import (
    ALIGNERS,
    CLUSTER_LABEL,
    DCGM,
    EXPECTED_FIELD,
    FIRST_STEPS_UNREPORTED,
    MOSAIC_COLUMNS,
    PROMQL_DURATION_STEP_S,
    PROMQL_EVALUATION_STEP_S,
    RECORD_FIELD,
    REDUCERS,
    RESTART_COUNT,
    RUN_FIELD,
    SECONDS_FIELD,
    STEP_FIELD,
    STEP_RECORD,
    XID_FIELD,
)
from harness.runner import StackRun, stack_with
from planners.runtimes import bridge, nemo2
from planners.workload import LIGHTNING_STEP_LOG, RUN_SETTINGS, STEP_RECORD_MODULE
from tests.conftest import issue_for, rejected

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


def data_sets(layout: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        data_set["timeSeriesQuery"]
        for tile in layout["mosaicLayout"]["tiles"]
        for data_set in tile["widget"].get("xyChart", {}).get("dataSets", [])
    ]


def filters_of(layout: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The Monitoring filters of the charts that have one (the others are PromQL)."""
    return [
        (query["timeSeriesFilter"]["filter"], query["timeSeriesFilter"]["aggregation"])
        for query in data_sets(layout)
        if "timeSeriesFilter" in query
    ]


def promql_of(layout: dict[str, Any]) -> list[str]:
    return [query["prometheusQuery"] for query in data_sets(layout) if "prometheusQuery" in query]


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
        x, y = tile.get("xPos", 0), tile.get("yPos", 0)
        assert x >= 0 and x + tile["width"] <= MOSAIC_COLUMNS
        area = {(i, j) for i in range(x, x + tile["width"]) for j in range(y, y + tile["height"])}
        assert not area & cells, "tiles overlap"
        cells |= area
        kinds = set(tile["widget"]) - {"title"}
        assert len(kinds) == 1 and kinds <= {"xyChart", "text"}
    for _, aggregation in filters_of(layout):
        assert re.fullmatch(r"[1-9][0-9]*s", aggregation["alignmentPeriod"])
        assert aggregation["perSeriesAligner"] in ALIGNERS
        assert aggregation["crossSeriesReducer"] in REDUCERS


def proto3_defaults(value: Any, path: str = "") -> list[str]:
    """Where `value` holds a field at its proto3 default: 0, false, "", [] or {}."""
    if isinstance(value, dict):
        found = [f"{path}.{k}" for k, v in value.items() if v in (0, "", [], {}) and v is not None]
        return found + [p for k, v in value.items() for p in proto3_defaults(v, f"{path}.{k}")]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in proto3_defaults(v, f"{path}[{i}]")]
    return []


@pytest.mark.parametrize("stack", ["dev", "a3ultra"])
def test_the_dashboard_writes_no_field_the_api_reads_back_missing(render: Any, stack: str) -> None:
    """The Dashboards API answers in proto3 JSON, which leaves out every field at its default
    (0, false, empty): a zero `xPos` written is absent when read, and the provider reports a
    diff on every refresh (hashicorp/terraform-provider-google#16173)."""
    assert proto3_defaults(dashboard(render(stack))) == []


def with_alerts(stack: str, **alerts: Any) -> dict[str, Any]:
    return stack_with(stack, monitoring={"alerts": {"enabled": True, **alerts}})


def test_alerts_are_off_by_default(render: Any) -> None:
    run = render("a3ultra")
    assert not run.of_type(ALERT) and not run.of_type(CHANNEL)


def policies_of(run: StackRun) -> dict[str, dict[str, Any]]:
    return {p.inputs["displayName"].split(": ", 1)[1]: p.inputs for p in run.of_type(ALERT)}


def promql(policy: dict[str, Any]) -> dict[str, Any]:
    (condition,) = policy["conditions"]
    query: dict[str, Any] = condition["conditionPrometheusQueryLanguage"]
    return query


def test_alerts_fire_on_xid_errors_and_on_missing_gpus_of_fixed_pools(render: Any) -> None:
    """a3ultra: one pool of 72 fixed nodes → an XID alert and a GPU count below 576 (or none)
    for 10 minutes; both to the email channel created and the existing one."""
    existing = "projects/my-project/notificationChannels/123"
    run = render("a3ultra", values=with_alerts("a3ultra", email="oncall@example.com", notificationChannels=[existing]))
    (channel,) = run.of_type(CHANNEL)
    assert channel.inputs["labels"] == {"email_address": "oncall@example.com"}
    policies = policies_of(run)
    assert set(policies) == {"GPU XID error", "GPU nodes missing", "a run is slower than its plan"}
    assert XID_FIELD in promql(policies["GPU XID error"])["query"]
    lost = promql(policies["GPU nodes missing"])
    assert "< 576" in lost["query"] and lost["duration"] == "600s"
    for policy in policies.values():
        assert len(policy["notificationChannels"]) == 2 and existing in policy["notificationChannels"]


# Stacks with alerts on: fixed pools (a3ultra), and pools of 0 nodes that scale up on demand
# (a3ultra-flex), whose DCGM metrics have no sample when the policies are created.
ALERT_STACKS = ["a3ultra", "a3ultra-flex"]


@pytest.mark.parametrize("stack", ALERT_STACKS)
def test_the_first_up_creates_the_alerts_before_any_gpu_has_reported(render: Any, stack: str) -> None:
    """A threshold (or absence) condition on a metric with no sample yet fails to create with
    404 (hashicorp/terraform-provider-google#11102): a DCGM metric exists once a GPU node has
    reported, never for a pool of 0 nodes. A PromQL condition with disableMetricValidation is
    created without the metric (terraform-provider-google#20491)."""
    run = render(stack, values=with_alerts(stack, email="oncall@example.com"))
    assert run.of_type(ALERT)
    for policy in run.of_type(ALERT):
        (condition,) = policy.inputs["conditions"]
        assert set(condition) == {"displayName", "conditionPrometheusQueryLanguage"}, policy.name
        assert condition["conditionPrometheusQueryLanguage"]["disableMetricValidation"] is True, policy.name


@pytest.mark.parametrize("stack", ALERT_STACKS)
def test_the_promql_conditions_are_what_the_alerting_api_takes(render: Any, stack: str) -> None:
    """One PromQL condition per policy, its duration in whole minutes and its evaluation
    interval a multiple of 30 s (Cloud Monitoring, create-promql-alerts); every DCGM series it
    reads is of this environment's cluster, by its PromQL label."""
    run = render(stack, values=with_alerts(stack, email="oncall@example.com"))
    cluster = run.exports["cluster"]["name"]
    for policy in run.of_type(ALERT):
        query = promql(policy.inputs)
        assert int(query["duration"].rstrip("s")) % PROMQL_DURATION_STEP_S == 0
        assert int(query["evaluationInterval"].rstrip("s")) % PROMQL_EVALUATION_STEP_S == 0
        selectors = re.findall(r"\b(DCGM_FI_[A-Z_]+)(\{[^}]*\})?", query["query"])
        for name, labels in selectors:
            assert name in DCGM and labels == f'{{{CLUSTER_LABEL}="{cluster}"}}', (name, labels)
        # Otherwise it reads only this cluster's log-based metrics, which the stack creates.
        assert selectors or log_metric_series(query["query"]) <= rendered_log_metrics(run), query["query"]


def test_the_xid_alert_closes_once_no_new_xid_arrives(render: Any) -> None:
    """DCGM_FI_DEV_XID_ERRORS keeps the last XID until the driver is reset
    (NVIDIA/dcgm-exporter#500, NVIDIA/DCGM#277): `> 0` alone stays true, and its incident never
    closes. The condition holds only while the value (or, with the exporter's err_code label, the
    series) differs from the one a window earlier, and an incident whose node went away closes
    on the policy's autoClose."""
    run = render("a3ultra", values=with_alerts("a3ultra", email="oncall@example.com"))
    xid = policies_of(run)["GPU XID error"]
    query = promql(xid)["query"]
    window = re.search(r"offset (\d+)m", query)
    assert window and " unless " in query, query
    assert re.search(rf"{XID_FIELD}\{{[^}}]*\}} offset {window[1]}m == {XID_FIELD}", query), query
    assert int(xid["alertStrategy"]["autoClose"].rstrip("s")) > 0


def test_losing_every_gpu_node_fires(render: Any) -> None:
    """A count of series is no series at all once every node is gone, and no comparison sees
    it: a threshold never fires on data that stopped (Cloud Monitoring, "Behavior of
    metric-based alerting policies", partial metric data). The condition also holds when the
    GPU series are absent (PromQL absent())."""
    run = render("a3ultra", values=with_alerts("a3ultra", email="oncall@example.com"))
    query = promql(policies_of(run)["GPU nodes missing"])["query"]
    counted = re.search(r"count\(([^)]*)\) < \d+", query)
    assert counted and f" or absent({counted[1]})" in query, query


def test_pools_that_scale_get_no_missing_gpu_alert(render: Any) -> None:
    """Flex-start pools scale from zero on purpose: no missing-GPU alert."""
    run = render("a3ultra-flex", values=with_alerts("a3ultra-flex", email="oncall@example.com"))
    assert sorted(p.inputs["displayName"] for p in run.of_type(ALERT)) == [
        "nemo-flex: GPU XID error",
        "nemo-flex: a run is slower than its plan",
    ]


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


LOG_METRIC = "gcp:logging/metric:Metric"


def log_metric_series(query: str) -> set[str]:
    """The log-based metrics a PromQL query reads, by their PromQL names (through _sum and _count)."""
    series = set(re.findall(r"\b(logging_googleapis_com:user_[A-Za-z0-9_]+?)_(?:sum|count)\b", query))
    assert series, query
    return series


def rendered_log_metrics(run: StackRun) -> set[str]:
    """PromQL names of the stack's log-based metrics, by the naming rule Google states
    (https://cloud.google.com/monitoring/promql/promql-mapping), worked here apart from
    planners.monitoring.promql_name."""
    return {
        "logging_googleapis_com:user_" + re.sub(r"[^A-Za-z0-9_]", "_", m.inputs["name"])
        for m in run.of_type(LOG_METRIC)
    }


def test_the_step_metrics_read_the_launchers_step_records(render: Any) -> None:
    """Two log-based metrics per GKE cluster: each run's step seconds and the seconds its plan
    expects, from the JSON line the Megatron-Bridge launcher prints (its jsonPayload), of this
    cluster's training containers, per run; DISTRIBUTION with buckets, as the Logging API needs."""
    run = render("a4")
    cluster = run.exports["cluster"]["name"]
    metrics = {m.inputs["name"]: m.inputs for m in run.of_type(LOG_METRIC)}
    assert set(metrics) == {f"nemo-gke/{cluster}/step-time", f"nemo-gke/{cluster}/expected-step-time"}
    fields = {"step-time": SECONDS_FIELD, "expected-step-time": EXPECTED_FIELD}
    for name, metric in metrics.items():
        assert f'resource.labels.cluster_name="{cluster}"' in metric["filter"]
        assert f'resource.labels.container_name="{TRAINING_CONTAINER}"' in metric["filter"]
        assert f'jsonPayload.{RECORD_FIELD}="{STEP_RECORD}"' in metric["filter"]
        assert metric["valueExtractor"] == f"EXTRACT(jsonPayload.{fields[name.rsplit('/', 1)[1]]})"
        assert metric["labelExtractors"] == {"run": f"EXTRACT(jsonPayload.{RUN_FIELD})"}
        descriptor = metric["metricDescriptor"]
        assert (descriptor["metricKind"], descriptor["valueType"], descriptor["unit"]) == ("DELTA", "DISTRIBUTION", "s")
        assert [label["key"] for label in descriptor["labels"]] == list(metric["labelExtractors"])
        assert metric["bucketOptions"]["exponentialBuckets"]["numFiniteBuckets"] > 0
    # A run whose plan expects nothing reports no expected step.
    assert f"jsonPayload.{EXPECTED_FIELD}:*" in metrics[f"nemo-gke/{cluster}/expected-step-time"]["filter"]


@pytest.mark.parametrize(
    ("stack", "launcher", "modules"),
    [
        ("a4", bridge.SCRIPT, {STEP_RECORD_MODULE}),
        ("a3ultra", nemo2.SCRIPT, {STEP_RECORD_MODULE, LIGHTNING_STEP_LOG}),
    ],
)
def test_each_run_reports_the_step_its_plan_expects(render: Any, stack: str, launcher: str, modules: set[str]) -> None:
    """The launcher's step record carries the run's name and the step time the go/no-go prices it
    at: NVIDIA's published step at its layout, else the layout planner's prediction. Megatron-Bridge
    and NeMo 2 runs print it, with the modules that do shipped beside the launcher."""
    run = render(stack)
    plans = run.exports["training"]["runs"]
    checked = 0
    for config_map in run.of_type("kubernetes:core/v1:ConfigMap"):
        data = run.manifest(config_map).get("data", {})
        if launcher not in data:
            continue
        assert {name: data.get(name) for name in modules} == {name: payload.text(name) for name in modules}
        settings = json.loads(data[RUN_SETTINGS])
        record, plan = settings["stepRecord"], plans[settings["runName"]]["plan"]
        expected = plan["publishedStepTimeS"] or plan["predictedStepTimeS"]
        assert record["fields"] == {
            RECORD_FIELD: STEP_RECORD,
            RUN_FIELD: settings["runName"],
            EXPECTED_FIELD: pytest.approx(expected, abs=1e-3),
        }
        assert (record["stepField"], record["secondsField"]) == (STEP_FIELD, SECONDS_FIELD)
        assert record["warmupSteps"] == FIRST_STEPS_UNREPORTED
        checked += 1
    assert checked, f"the {stack} stack runs {launcher}"


@pytest.mark.parametrize(("margin", "threshold"), [(None, "1.2"), (0.5, "1.5")])
def test_a_run_slower_than_its_plan_alerts_past_the_margin(render: Any, margin: float | None, threshold: str) -> None:
    """The alert compares each run's mean step with the one its plan expects, matched by namespace
    and run, and fires above 1 + margin for 15 minutes; the dashboard draws both and the line."""
    alerts = {"email": "oncall@example.com", **({"stepTimeMargin": margin} if margin is not None else {})}
    run = render("a4", values=with_alerts("a4", **alerts))
    query = promql(policies_of(run)["a run is slower than its plan"])
    measured, expected = sorted(log_metric_series(query["query"]), key=lambda name: "expected" in name)
    k8s = re.escape('{monitored_resource="k8s_container"}')
    assert re.fullmatch(
        rf"\(sum by \(namespace_name, run\) \(rate\({measured}_sum{k8s}\[10m\]\)\) / "
        rf"sum by \(namespace_name, run\) \(rate\({measured}_count{k8s}\[10m\]\)\)\) / "
        rf"\(sum by \(namespace_name, run\) \(rate\({expected}_sum{k8s}\[10m\]\)\) / "
        rf"sum by \(namespace_name, run\) \(rate\({expected}_count{k8s}\[10m\]\)\)\) > {re.escape(threshold)}",
        query["query"],
    ), query["query"]
    assert query["duration"] == "900s"
    layout = dashboard(run)
    charts = [q for q in promql_of(layout) if log_metric_series(q) <= rendered_log_metrics(run)]
    assert len(charts) == 3, promql_of(layout)
    thresholds = [
        t["value"]
        for tile in layout["mosaicLayout"]["tiles"]
        for t in tile["widget"].get("xyChart", {}).get("thresholds", [])
    ]
    assert thresholds == [float(threshold)]


@pytest.mark.parametrize("margin", [0, -0.1, 5.5, "fast"])
def test_a_margin_that_is_no_fraction_above_zero_is_refused(margin: Any) -> None:
    message = issue_for(
        rejected(with_alerts("dev", email="oncall@example.com", stepTimeMargin=margin)),
        "monitoring.alerts.stepTimeMargin",
    )
    assert "stepTimeMargin" in message


@pytest.mark.parametrize("stack", ALERT_STACKS)
def test_every_promql_query_parses_and_type_checks_as_prometheus_does(render: Any, stack: str) -> None:
    """Cloud Monitoring runs PromQL as Prometheus defines it (create-promql-alerts): each query
    of the dashboard and the alerts is parsed, and its functions and operators type-checked, by a
    port of Prometheus's own parser, which refuses a range function on an instant vector (last
    assertion). The live API is not reached: no credentials here."""
    run = render(stack, values=with_alerts(stack, email="oncall@example.com"))
    queries = promql_of(dashboard(run)) + [promql(policy.inputs)["query"] for policy in run.of_type(ALERT)]
    assert len(queries) > len(run.of_type(ALERT))
    for query in queries:
        promql_parser.parse(query)
    # The step-time chart's query without its range: rate() of an instant vector is refused.
    with pytest.raises(ValueError, match="expected type matrix in call to function 'rate'"):
        promql_parser.parse(re.sub(r"\[\d+m\]", "", queries[0]))
