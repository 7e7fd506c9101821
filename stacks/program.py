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
    opts = pulumi.ResourceOptions(providers={"gcp": gcp_provider(cfg)})
    if cfg.deploys(Layer.BOOTSTRAP):
        return bootstrap.build(cfg, opts)

    exports: dict[str, Any] = {}
    upstream = Upstream(cfg.upstream_stack_name) if cfg.upstream_stack_name else None
    if cfg.deploys(Layer.CLUSTER):
        cluster_outputs, cluster_exports = cluster.build(cfg, opts)
        exports.update(cluster_exports)
    else:
        assert upstream is not None
        cluster_outputs = cluster.from_upstream(upstream.plain("cluster"), upstream.secret("kubeconfig"))
    if cfg.deploys(Layer.PLATFORM):
        platform_outputs, platform_exports = platform.build(cfg, cluster_outputs, opts)
        exports.update(platform_exports)
    else:
        assert upstream is not None
        platform_outputs = platform.from_upstream(upstream.plain("platform"))
    if cfg.deploys(Layer.TRAINING):
        exports.update(training.build(cfg, cluster_outputs, platform_outputs, opts))
    return exports
