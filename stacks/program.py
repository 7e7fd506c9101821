"""The program: read the stack config once, deploy the layers it names, export their outputs."""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_gcp as gcp

from stacks import bootstrap, cluster, platform, training
from stacks.config import Layer, StackConfig, read_stack_config
from stacks.upstream import Upstream


def run() -> None:
    cfg = read_stack_config()  # raises ConfigError before any resource exists
    for key, value in deploy(cfg).items():
        pulumi.export(key, value)


def gcp_provider(cfg: StackConfig) -> gcp.Provider:
    """One explicit provider per stack: the project and region come from validated config,
    never from ambient gcloud settings."""
    return gcp.Provider(
        "gcp",
        project=cfg.project,
        region=cfg.region,
        zone=cfg.zone,
        default_labels={**cfg.labels, "managed-by": "pulumi", "nemo-gke-stack": pulumi.get_stack().lower()},
    )


def deploy(cfg: StackConfig) -> dict[str, Any]:
    """Create the stack's layers; everything that can be checked is checked before the first
    resource is registered, including runs against an upstream environment."""
    if cfg.deploys(Layer.BOOTSTRAP):
        return bootstrap.build(cfg, pulumi.ResourceOptions(providers={"gcp": gcp_provider(cfg)}))

    upstream = Upstream(cfg.upstream_stack_name) if cfg.upstream_stack_name else None
    cluster_facts = (
        cluster.cluster_facts(cfg)
        if cfg.deploys(Layer.CLUSTER)
        else _need(upstream).facts("cluster", cluster.ClusterFacts)
    )
    platform_facts = (
        platform.platform_facts(cfg, cluster_facts)
        if cfg.deploys(Layer.PLATFORM)
        else _need(upstream).facts("platform", platform.PlatformFacts)
    )
    if cfg.deploys(Layer.TRAINING):
        training.check_runs(cfg, platform_facts)

    opts = pulumi.ResourceOptions(providers={"gcp": gcp_provider(cfg)})
    exports: dict[str, Any] = {}
    if cfg.deploys(Layer.CLUSTER):
        cluster_outputs, cluster_exports = cluster.build(cfg, cluster_facts, opts)
        exports.update(cluster_exports)
    else:
        cluster_outputs = cluster.from_upstream(cluster_facts, _need(upstream).secret("kubeconfig"))
    if cfg.deploys(Layer.PLATFORM):
        platform_outputs, platform_exports = platform.build(cfg, cluster_outputs, platform_facts, opts)
        exports.update(platform_exports)
    else:
        platform_outputs = platform.PlatformOutputs(facts=platform_facts)
    if cfg.deploys(Layer.TRAINING):
        exports.update(training.build(cfg, cluster_outputs, platform_outputs, opts))
    return exports


def _need(upstream: Upstream | None) -> Upstream:
    assert upstream is not None, "the config requires upstreamStack whenever a layer comes from elsewhere"
    return upstream
