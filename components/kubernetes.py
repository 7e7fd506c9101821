"""Kubernetes objects the SDK has no typed class for."""

from __future__ import annotations

from importlib.metadata import version
from typing import Any

import pulumi


class KubernetesObject(pulumi.CustomResource):
    """Any Kubernetes object given as a manifest. `apiextensions.CustomResource` only carries
    `spec`; kinds such as Kueue's WorkloadPriorityClass keep their fields at the top level."""

    def __init__(
        self, resource_name: str, manifest: dict[str, Any], opts: pulumi.ResourceOptions | None = None
    ) -> None:
        opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(version=version("pulumi_kubernetes")))
        super().__init__(f"kubernetes:{manifest['apiVersion']}:{manifest['kind']}", resource_name, dict(manifest), opts)
