"""`existingCluster`: a stack that puts the platform and the runs on a cluster it did not create.

Such a stack deploys no cluster layer and creates no Google Cloud resource: it reaches the
cluster through a kubeconfig, and learns its GPU nodes from the pools described here.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from config.base import Model, check_name
from facts.errors import RuleError
from facts.kubernetes import dns_label_problem, label_key_problem
from facts.machines import MACHINE_TYPES


class TaintConfig(Model):
    key: str = Field(description="Taint key, e.g. nvidia.com/gpu.")
    value: str = Field("", description="Taint value (pods tolerate any value of the key).")
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] = Field("NoSchedule", description="Effect.")

    @model_validator(mode="after")
    def _check(self) -> TaintConfig:
        problem = label_key_problem(self.key)
        if problem:
            raise RuleError("key", self.key, problem)
        return self


class ExistingPoolConfig(Model):
    """GPU nodes of the cluster that runs may use: Kueue gets a flavor and a quota for them."""

    name: str = Field(description="Name of the pool here (its Kueue flavor and the runs' `pool`).")
    machine_type: str = Field(description="A machine type of the catalog: GPUs, CPUs and memory per node.")
    nodes: int = Field(ge=1, le=1000, description="Nodes of the pool the queue may use.")
    node_labels: dict[str, str] = Field(
        description="Labels that select the pool's nodes (e.g. cloud.google.com/gke-nodepool: a3-ultra)."
    )
    taints: tuple[TaintConfig, ...] = Field((), description="Taints on the nodes; runs tolerate them.")
    topology_labels: bool = Field(
        False,
        description="The nodes carry GKE's cloud.google.com/gce-topology-{block,subblock,host} labels "
        "(compact placement or a dense reservation): runs are placed by topology.",
    )

    @model_validator(mode="after")
    def _check(self) -> ExistingPoolConfig:
        check_name("name", self.name, 40)
        if self.machine_type not in MACHINE_TYPES:
            raise RuleError(
                "machineType", self.machine_type, f"is not in the catalog; known: {', '.join(MACHINE_TYPES)}"
            )
        if not self.node_labels:
            raise RuleError("nodeLabels", {}, "must select the pool's nodes with at least one label")
        for key in self.node_labels:
            problem = label_key_problem(key)
            if problem:
                raise RuleError(f"nodeLabels.{key}", key, problem)
        return self


class ExistingClusterConfig(Model):
    """The cluster to use: how to reach it and which of its nodes are GPU pools."""

    name: str = Field(description="A name for the cluster in outputs and dashboards.")
    kubeconfig: str | None = Field(
        None, description="Kubeconfig contents (`pulumi config set --secret`). Exclusive with kubeconfigPath."
    )
    kubeconfig_path: str | None = Field(None, description="Path of a kubeconfig file on the machine running Pulumi.")
    context: str | None = Field(None, description="Context of the kubeconfig. Default: its current context.")
    gpu_pools: tuple[ExistingPoolConfig, ...] = Field(min_length=1, description="The cluster's GPU pools to use.")
    system_node_labels: dict[str, str] = Field(
        {"kubernetes.io/os": "linux"},
        min_length=1,
        description="Labels of the nodes Kueue, JobSet and TensorBoard run on (GPU nodes are tainted, so any "
        "untainted Linux node by default).",
    )
    storage_class: str = Field(
        description="A ReadWriteMany StorageClass of the cluster: the shared, data and checkpoint claims use it."
    )
    storage_gib: int = Field(1024, ge=1, le=1_000_000, description="Size of each of the three claims.")

    @model_validator(mode="after")
    def _check(self) -> ExistingClusterConfig:
        check_name("name", self.name, 40)
        if (self.kubeconfig is None) == (self.kubeconfig_path is None):
            raise RuleError("kubeconfig", None, "set exactly one of kubeconfig (secret) and kubeconfigPath")
        names = [p.name for p in self.gpu_pools]
        for i, name in enumerate(names):
            if names.index(name) != i:
                raise RuleError(f"gpuPools[{i}].name", name, "must be unique")
        problem = dns_label_problem(self.storage_class)
        if problem:
            raise RuleError("storageClass", self.storage_class, problem)
        return self
