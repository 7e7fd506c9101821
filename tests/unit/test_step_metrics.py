"""The step records of a run and the log-based metrics that read them (planners.monitoring):
Cloud Monitoring's PromQL naming, the Logging API's metric names, and what a record must hold."""

from __future__ import annotations

import json
import re

import pytest

from facts.monitoring import EXPECTED_FIELD, RECORD_FIELD, RUN_FIELD, SECONDS_FIELD, STEP_FIELD, STEP_RECORD
from planners.monitoring import promql_name, slow_run_alert, step_metrics, step_record_problems


@pytest.mark.parametrize(
    ("metric_type", "promql"),
    [
        # The examples of https://cloud.google.com/monitoring/promql/promql-mapping.
        ("kubernetes.io/container/cpu/limit_cores", "kubernetes_io:container_cpu_limit_cores"),
        ("compute.googleapis.com/instance/cpu/utilization", "compute_googleapis_com:instance_cpu_utilization"),
        ("logging.googleapis.com/log_entry_count", "logging_googleapis_com:log_entry_count"),
        (
            "custom.googleapis.com/opencensus/opencensus.io/http/server/request_count_by_method",
            "custom_googleapis_com:opencensus_opencensus_io_http_server_request_count_by_method",
        ),
        ("agent.googleapis.com/disk/io_time", "agent_googleapis_com:disk_io_time"),
    ],
)
def test_promql_names_follow_cloud_monitorings_mapping(metric_type: str, promql: str) -> None:
    assert promql_name(metric_type) == promql


# The Logging API's rule for a log-based metric's name (projects.metrics, LogMetric.name): at most
# 100 characters of A-Z, a-z, 0-9 and _-.,+!*',()%/, not starting with "/".
METRIC_NAME = re.compile(r"[A-Za-z0-9_\-.,+!*',()%][A-Za-z0-9_\-.,+!*',()%/]{0,99}")


def test_the_metric_names_are_what_the_logging_api_takes_for_the_longest_cluster_name() -> None:
    """GKE cluster names have up to 40 characters."""
    for metric in step_metrics("c" * 40).metrics:
        assert METRIC_NAME.fullmatch(metric.name), metric.name
        assert metric.metric_type == f"logging.googleapis.com/user/{metric.name}"


def test_a_cluster_s_metrics_are_its_own() -> None:
    """A project's log-based metrics share one namespace, and a filter selects entries: two
    clusters of one project get metrics of their own, each reading its own containers."""
    one, other = step_metrics("train-a"), step_metrics("train-b")
    assert {m.name for m in one.metrics}.isdisjoint(m.name for m in other.metrics)
    for metric in one.metrics:
        assert 'resource.labels.cluster_name="train-a"' in metric.filter


def record(**changes: object) -> str:
    entry = {RECORD_FIELD: STEP_RECORD, RUN_FIELD: "llama", STEP_FIELD: 11, SECONDS_FIELD: 1.25, EXPECTED_FIELD: 1.1}
    return json.dumps({key: value for key, value in {**entry, **changes}.items() if value is not None})


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        (record(), None),
        (record(**{EXPECTED_FIELD: None}), None),
        ("step 11: 1.25 s", "not one JSON object"),
        ("[1, 2]", "not one JSON object"),
        (record(**{RECORD_FIELD: None}), f"{RECORD_FIELD} is None"),
        (record(**{RUN_FIELD: "other"}), f"{RUN_FIELD} is 'other', not 'llama'"),
        (record(**{STEP_FIELD: 11.0}), f"{STEP_FIELD} is 11.0, not a whole number"),
        (record(**{SECONDS_FIELD: None}), f"{SECONDS_FIELD} is None"),
        (record(**{SECONDS_FIELD: True}), f"{SECONDS_FIELD} is True"),
        (record(**{SECONDS_FIELD: "1.25"}), f"{SECONDS_FIELD} is '1.25'"),
        (record(**{EXPECTED_FIELD: 0}), f"{EXPECTED_FIELD} is 0"),
    ],
)
def test_what_the_metrics_cannot_read_in_a_step_record(line: str, problem: str | None) -> None:
    problems = step_record_problems(line, "llama")
    if problem is None:
        assert problems == []
    else:
        assert len(problems) == 1 and problems[0].startswith(problem), problems


def test_the_slow_run_alert_matches_runs_by_namespace_and_name() -> None:
    """Both means are summed by the same labels, so the division pairs each run's measured
    step with its own expected one (PromQL one-to-one vector matching)."""
    steps = step_metrics("train-a")
    alert = slow_run_alert("train-a", steps, 0.25)
    assert alert.query.endswith(" > 1.25")
    assert alert.query.count("sum by (namespace_name, run) ") == 4
    for metric in steps.metrics:
        for series in ("sum", "count"):
            assert f'rate({metric.promql_name}_{series}{{monitored_resource="k8s_container"}}[10m])' in alert.query
    assert "25%" in alert.documentation
