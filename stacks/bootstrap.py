"""Bootstrap layer: APIs, the self-managed Pulumi backend and the image registry.

It runs as its own stack (on a local or other existing backend) because it creates the
backend every other stack stores its state in.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pulumi

from components.backend import StateBackend, StateBackendArgs
from components.project import PLATFORM_APIS, ProjectServices, ProjectServicesArgs
from components.registry import ImageRegistry, ImageRegistryArgs
from config.stack import StackConfig
from facts.project import project_advice
from planners.summary import plan_summary


@dataclass(frozen=True)
class BootstrapLayerArgs:
    config: StackConfig
    # Labels of every labelled GCP resource.
    labels: Mapping[str, str]


class BootstrapLayer(pulumi.ComponentResource):
    TYPE = "nemo:bootstrap:BootstrapLayer"

    backend_url: pulumi.Output[str]
    secrets_provider: pulumi.Output[str]
    image_repository: pulumi.Output[str]

    def __init__(self, name: str, args: BootstrapLayerArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(self.TYPE, name, None, opts)
        cfg, boot = args.config, args.config.bootstrap
        advice = project_advice(cfg.gcp_project)
        if advice:
            pulumi.log.warn(advice, resource=self)
        services = ProjectServices(
            f"{name}-services",
            ProjectServicesArgs(project=cfg.gcp_project, services=[*PLATFORM_APIS, *boot.extra_services]),
            opts=pulumi.ResourceOptions(parent=self),
        )
        after_apis = pulumi.ResourceOptions(parent=self, depends_on=[services])
        backend = StateBackend(
            f"{name}-backend",
            StateBackendArgs(
                project=cfg.gcp_project,
                region=cfg.region,
                bucket=boot.state_bucket or f"{cfg.gcp_project}-pulumi-state",
                key_ring=boot.key_ring,
                crypto_key=boot.crypto_key,
                key_rotation_days=boot.key_rotation_days,
                operators=boot.operators,
                protect=cfg.production,
                labels=args.labels,
            ),
            opts=after_apis,
        )
        registry = ImageRegistry(
            f"{name}-registry",
            ImageRegistryArgs(
                project=cfg.gcp_project, region=cfg.region, repository_id=boot.artifact_repository, labels=args.labels
            ),
            opts=after_apis,
        )
        self.backend_url = backend.backend_url
        self.secrets_provider = backend.secrets_provider
        self.image_repository = registry.url
        self.register_outputs({"backend_url": self.backend_url, "secrets_provider": self.secrets_provider})


def build(cfg: StackConfig, labels: Mapping[str, str], opts: pulumi.ResourceOptions) -> dict[str, Any]:
    """Create the layer; return the stack outputs the other stacks are set up with."""
    layer = BootstrapLayer("bootstrap", BootstrapLayerArgs(config=cfg, labels=labels), opts)
    return {
        "backendUrl": layer.backend_url,
        "secretsProvider": layer.secrets_provider,
        "loginCommand": pulumi.Output.concat("pulumi login ", layer.backend_url),
        "stackInitCommand": pulumi.Output.concat("pulumi stack init dev --secrets-provider ", layer.secrets_provider),
        "imageRepository": layer.image_repository,
        # No node pool to price, but the same verdict: a placeholder project stops `up`.
        "summary": plan_summary(cfg.gcp_project, cfg.region, cfg.zone, [], []).as_output(),
    }
