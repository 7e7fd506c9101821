"""The environment's GPU dashboard and alert policies in Cloud Monitoring (planners.monitoring
decides their content)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_gcp as gcp

from facts.errors import require
from facts.monitoring import PROMQL_DURATION_STEP_S, PROMQL_EVALUATION_STEP_S
from planners.monitoring import RUN_LABEL, STEP_BUCKETS, AlertCondition, LogMetric


@dataclass(frozen=True)
class GpuMonitoringArgs:
    project: str
    # The Dashboards API JSON (planners.monitoring.gpu_dashboard); None: no dashboard.
    dashboard: Mapping[str, Any] | None
    alerts: Sequence[AlertCondition] = ()
    # Log-based metrics the dashboard and the alerts read (planners.monitoring.step_metrics).
    log_metrics: Sequence[LogMetric] = ()
    # Existing notification channels, and an address to create an email channel for.
    notification_channels: Sequence[str] = ()
    email: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.alerts:
            require(
                bool(self.notification_channels) or self.email is not None,
                "notification_channels",
                list(self.notification_channels),
                "alerts need a channel or an email address",
            )
        for i, alert in enumerate(self.alerts):
            require(
                alert.duration_s >= 0 and alert.duration_s % PROMQL_DURATION_STEP_S == 0,
                f"alerts[{i}].duration_s",
                alert.duration_s,
                "must be a whole number of minutes",
            )
            require(
                alert.evaluation_interval_s > 0 and alert.evaluation_interval_s % PROMQL_EVALUATION_STEP_S == 0,
                f"alerts[{i}].evaluation_interval_s",
                alert.evaluation_interval_s,
                f"must be a positive multiple of {PROMQL_EVALUATION_STEP_S} s",
            )
            require(alert.auto_close_s > 0, f"alerts[{i}].auto_close_s", alert.auto_close_s, "must be positive")
        if self.dashboard is not None:
            require("mosaicLayout" in self.dashboard, "dashboard", "layout", "must be a mosaic layout")


class GpuMonitoring(pulumi.ComponentResource):
    TYPE = "nemo:monitoring:GpuMonitoring"

    dashboard_id: pulumi.Output[str] | None

    def __init__(self, name: str, args: GpuMonitoringArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(self.TYPE, name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        self.dashboard_id = None
        if args.dashboard is not None:
            dashboard = gcp.monitoring.Dashboard(
                f"{name}-dashboard",
                project=args.project,
                dashboard_json=json.dumps(args.dashboard, sort_keys=True),
                opts=child,
            )
            self.dashboard_id = dashboard.id
        for metric in args.log_metrics:
            gcp.logging.Metric(
                f"{name}-{metric.key}",
                project=args.project,
                name=metric.name,
                description=metric.display_name,
                filter=metric.filter,
                metric_descriptor={
                    "metric_kind": "DELTA",
                    "value_type": "DISTRIBUTION",
                    "unit": metric.unit,
                    "display_name": metric.display_name,
                    "labels": [{"key": RUN_LABEL, "value_type": "STRING", "description": "The run's name."}],
                },
                value_extractor=metric.value_extractor,
                label_extractors=dict(metric.label_extractors),
                bucket_options={"exponential_buckets": dict(STEP_BUCKETS)},
                opts=child,
            )
        channels: list[pulumi.Input[str]] = list(args.notification_channels)
        if args.alerts and args.email is not None:
            channels.append(
                gcp.monitoring.NotificationChannel(
                    f"{name}-email",
                    project=args.project,
                    type="email",
                    display_name=f"nemo-gke alerts to {args.email}",
                    labels={"email_address": args.email},
                    user_labels=dict(args.labels),
                    opts=child,
                ).name
            )
        for alert in args.alerts:
            gcp.monitoring.AlertPolicy(
                f"{name}-{alert.name}",
                project=args.project,
                display_name=alert.display_name,
                combiner="OR",
                severity="ERROR",
                conditions=[
                    {
                        "display_name": alert.display_name,
                        "condition_prometheus_query_language": {
                            "query": alert.query,
                            "duration": f"{alert.duration_s}s",
                            "evaluation_interval": f"{alert.evaluation_interval_s}s",
                            # The metrics may have no sample yet (a pool of 0 nodes, a cluster
                            # still starting): the policy is created all the same.
                            "disable_metric_validation": True,
                        },
                    }
                ],
                alert_strategy={"auto_close": f"{alert.auto_close_s}s"},
                notification_channels=channels,
                documentation={"content": alert.documentation, "mime_type": "text/markdown"},
                user_labels=dict(args.labels),
                opts=child,
            )
        self.register_outputs({"dashboard": self.dashboard_id})
