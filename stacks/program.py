"""The program: read the stack config once, deploy the layers it names, export their outputs."""

from __future__ import annotations

import re
from typing import Any

import pulumi
import pulumi_gcp as gcp

from config.loader import ConfigError, misspelt_keys, parse_stack_config
from config.stack import Layer, StackConfig
from planners.summary import plan_summary
from stacks import bootstrap, cluster, existing, platform, training
from stacks.contract import ClusterFacts, PlatformFacts
from stacks.kubeapi import CrdReader
from stacks.kubeapi import read_crds as read_cluster_crds
from stacks.upstream import Upstream


class InvalidStackConfig(pulumi.RunError, ConfigError):
    """A ConfigError as Pulumi reports a RunError: its message, one line per bad key, no traceback."""


def stack_config_values() -> dict[str, str]:
    """Every config value of this stack, as the Python language host hands them to the program
    (the PULUMI_CONFIG environment variable): unknown keys are reported, not ignored."""
    return {str(key): str(value) for key, value in pulumi.runtime.get_config_env().items()}


def run(read_crds: CrdReader = read_cluster_crds) -> None:
    """The program. `read_crds` reads an existing cluster's CRDs (the render passes a stand-in)."""
    values = stack_config_values()
    for warning in misspelt_keys(values):
        pulumi.log.warn(warning)
    try:
        cfg = parse_stack_config(values, pulumi.get_stack())
        exports = deploy(cfg, read_crds)
    except ConfigError as error:
        raise InvalidStackConfig(error.issues) from None
    for key, value in exports.items():
        pulumi.export(key, value)


def stack_labels(cfg: StackConfig) -> dict[str, str]:
    """The labels of every labelled GCP resource of the stack, and the GCP provider's defaults."""
    stack = re.sub(r"[^a-z0-9_-]", "-", pulumi.get_stack().lower())[:63]
    return {**cfg.labels, "managed-by": "pulumi", "nemo-gke-stack": stack}


def gcp_provider(cfg: StackConfig) -> gcp.Provider:
    """One explicit provider per stack: the project and region come from validated config,
    never from ambient gcloud settings."""
    return gcp.Provider("gcp", project=cfg.project, region=cfg.region, zone=cfg.zone, default_labels=stack_labels(cfg))


def deploy(cfg: StackConfig, read_crds: CrdReader) -> dict[str, Any]:
    """Create the stack's layers; everything that can be checked is checked before the first
    resource is registered, including runs against an upstream environment."""
    labels = stack_labels(cfg)
    if cfg.deploys(Layer.BOOTSTRAP):
        return bootstrap.build(cfg, labels, pulumi.ResourceOptions(providers={"gcp": gcp_provider(cfg)}))

    upstream = Upstream(cfg.upstream_stack_name) if cfg.upstream_stack_name else None
    if cfg.existing_cluster is not None:
        cluster_facts = existing.cluster_facts(cfg.existing_cluster, cfg.production)
    elif cfg.deploys(Layer.CLUSTER):
        cluster_facts = cluster.cluster_facts(cfg)
    else:
        cluster_facts = _need(upstream).facts("cluster", ClusterFacts)
    if cfg.deploys(Layer.PLATFORM):
        platform.check_platform(cfg, cluster_facts)
        if cfg.existing_cluster is not None and not cfg.kueue.install:
            existing.check_controllers(cfg.existing_cluster, read_crds)
    platform_facts = (
        platform.platform_facts(cfg, cluster_facts)
        if cfg.deploys(Layer.PLATFORM)
        else _need(upstream).facts("platform", PlatformFacts)
    )
    runs = []
    if cfg.deploys(Layer.TRAINING):
        training.check_runs(cfg, cluster_facts, platform_facts)
        runs = [training.run_spec(run, platform_facts) for run in cfg.training.runs]
    summary = plan_summary(
        cluster_facts.project, cluster_facts.region, cluster_facts.zone, cluster_facts.gpu_pools, runs
    )

    # A stack on an existing cluster has no Google Cloud resource, so no Google Cloud provider.
    gke = cfg.existing_cluster is None and cluster_facts.gke
    opts = pulumi.ResourceOptions(providers={"gcp": gcp_provider(cfg)} if gke else {})
    exports: dict[str, Any] = {}
    if cfg.existing_cluster is not None:
        cluster_outputs = existing.connect(cfg.existing_cluster, cluster_facts)
        exports.update(cluster=cluster_facts.to_plain(), kubeconfig=cluster_outputs.kubeconfig)
    elif cfg.deploys(Layer.CLUSTER):
        cluster_outputs, cluster_exports = cluster.build(cfg, cluster_facts, labels, opts)
        exports.update(cluster_exports)
    else:
        cluster_outputs = cluster.from_upstream(cluster_facts, _need(upstream).secret("kubeconfig"))
    if cfg.deploys(Layer.PLATFORM):
        platform_outputs, platform_exports = platform.build(cfg, cluster_outputs, platform_facts, labels, opts)
        exports.update(platform_exports)
    else:
        platform_outputs = platform.PlatformOutputs(facts=platform_facts)
    if cfg.deploys(Layer.TRAINING):
        exports.update(training.build(cfg, cluster_outputs, platform_outputs, opts))
    exports["summary"] = summary.as_output()
    return exports


def _need(upstream: Upstream | None) -> Upstream:
    if upstream is None:
        raise ValueError("a layer comes from an upstream stack, but none is configured (config.stack checks this)")
    return upstream
