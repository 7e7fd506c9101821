"""Kubernetes objects the SDK has no typed class for."""

from __future__ import annotations

from collections.abc import Mapping
from importlib.metadata import version
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from facts.versions import HelmChart


class KubernetesObject(pulumi.CustomResource):
    """Any Kubernetes object given as a manifest. `apiextensions.CustomResource` only carries
    `spec`; kinds such as Kueue's WorkloadPriorityClass keep their fields at the top level."""

    def __init__(
        self, resource_name: str, manifest: dict[str, Any], opts: pulumi.ResourceOptions | None = None
    ) -> None:
        opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(version=version("pulumi_kubernetes")))
        super().__init__(f"kubernetes:{manifest['apiVersion']}:{manifest['kind']}", resource_name, dict(manifest), opts)


def pinned_release(
    name: str,
    chart: HelmChart,
    namespace: k8s.core.v1.Namespace,
    values: Mapping[str, Any],
    opts: pulumi.ResourceOptions,
    *,
    skip_crds: bool = False,
) -> k8s.helm.v3.Release:
    """A pinned OCI chart, awaited until its workloads are ready."""
    return k8s.helm.v3.Release(
        name,
        name=chart.name,
        chart=chart.ref,
        version=chart.version,
        namespace=namespace.metadata.name,
        values=dict(values),
        skip_crds=skip_crds,
        skip_await=False,
        timeout=600,
        opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[namespace])),
    )


def owned_namespace(name: str, namespace: str, parent: pulumi.Resource) -> k8s.core.v1.Namespace:
    return k8s.core.v1.Namespace(name, metadata={"name": namespace}, opts=pulumi.ResourceOptions(parent=parent))
