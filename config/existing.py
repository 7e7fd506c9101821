"""`existingCluster`: a stack that puts the platform and the runs on a cluster it did not create.

Such a stack deploys no cluster layer and creates no Google Cloud resource: it reaches the
cluster through a kubeconfig, and learns its GPU nodes from the pools described here.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from config.base import Model, check_name
from facts.errors import RuleError
from facts.kubernetes import (
    dns_label_problem,
    dns_subdomain_problem,
    label_key_problem,
    label_value_problem,
    labels_problem,
)
from facts.kueue import MAX_FLAVORS_PER_GROUP
from facts.machines import (
    ACCELERATORS,
    GPUS_PER_NODE,
    MACHINE_TYPES,
    NODE_RESERVE_MEMORY_MIB,
    NODE_RESERVE_MILLICORES,
    OtherMachine,
)

# The four keys that describe a machine outside the catalog, all or none.
_OTHER_MACHINE_KEYS = ("gpusPerNode", "accelerator", "allocatableCpus", "allocatableMemoryGib")


class TaintConfig(Model):
    key: str = Field(description="Taint key, e.g. nvidia.com/gpu.")
    value: str | None = Field(
        None,
        description="Taint value: flavors and pods tolerate this key, value and effect. Omitted: any value of "
        "the key with this effect.",
    )
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] = Field("NoSchedule", description="Effect.")

    @model_validator(mode="after")
    def _check(self) -> TaintConfig:
        problem = label_key_problem(self.key)
        if problem:
            raise RuleError("key", self.key, problem)
        problem = label_value_problem(self.value or "")
        if problem:
            raise RuleError("value", self.value, problem)
        return self


class ExistingPoolConfig(Model):
    """GPU nodes of the cluster that runs may use: Kueue gets a flavor and a quota for them."""

    name: str = Field(description="Name of the pool here (its Kueue flavor and the runs' `pool`).")
    machine_type: str = Field(
        description="A machine type of the catalog (GPUs, CPUs and memory per node); or, with gpusPerNode, the "
        "name of a machine outside it, such as OKE's BM.GPU.H100.8."
    )
    gpus_per_node: int | None = Field(
        None,
        ge=1,
        le=max(GPUS_PER_NODE),
        description="A machine outside the catalog: its GPUs per node (the nvidia.com/gpu each node offers). "
        "Goes with accelerator, allocatableCpus and allocatableMemoryGib.",
    )
    accelerator: str | None = Field(
        None,
        description=f"A machine outside the catalog: its GPU model, one of {', '.join(ACCELERATORS)} (peak "
        "throughput, memory, FP8).",
    )
    allocatable_cpus: int | None = Field(
        None,
        ge=1,
        le=4096,
        description="A machine outside the catalog: CPUs a node leaves to pods "
        "(`kubectl get node <node> -o jsonpath='{.status.allocatable.cpu}'`, whole cores).",
    )
    allocatable_memory_gib: int | None = Field(
        None,
        ge=1,
        le=65536,
        description="A machine outside the catalog: memory a node leaves to pods, in GiB "
        "(`.status.allocatable.memory`, rounded down).",
    )
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
        self._check_machine()
        if not self.node_labels:
            raise RuleError("nodeLabels", {}, "must select the pool's nodes with at least one label")
        bad = labels_problem(self.node_labels)
        if bad:
            raise RuleError(f"nodeLabels.{bad[0]}", bad[1], bad[2])
        # A node holds one taint per key and effect (k8s.io/kubernetes pkg/apis/core/validation ValidateTaints).
        seen = [(t.key, t.effect) for t in self.taints]
        for i, pair in enumerate(seen):
            if seen.index(pair) != i:
                raise RuleError(
                    f"taints[{i}]", self.taints[i].value, f"taints must be unique by key and effect: {pair}"
                )
        return self

    def _check_machine(self) -> None:
        described = dict(zip(_OTHER_MACHINE_KEYS, self._other_machine_values(), strict=True))
        given = [key for key, value in described.items() if value is not None]
        if self.machine_type in MACHINE_TYPES:
            if given:
                why = f"must be unset: the catalog describes {self.machine_type}'s nodes"
                raise RuleError(given[0], described[given[0]], why)
            return
        if not given:
            raise RuleError(
                "machineType",
                self.machine_type,
                f"is not in the catalog (known: {', '.join(MACHINE_TYPES)}); for a machine outside it, "
                f"set {', '.join(_OTHER_MACHINE_KEYS)}",
            )
        for key, value in described.items():
            if value is None:
                why = f"is required for {self.machine_type}, a machine outside the catalog (with {', '.join(given)})"
                raise RuleError(key, None, why)
        # As nodes label it (node.kubernetes.io/instance-type).
        problem = label_value_problem(self.machine_type) if self.machine_type else "must not be empty"
        if problem:
            raise RuleError("machineType", self.machine_type, problem)
        if self.accelerator not in ACCELERATORS:
            raise RuleError("accelerator", self.accelerator, f"must be one of {', '.join(ACCELERATORS)}")
        if self.gpus_per_node not in GPUS_PER_NODE:
            why = f"must be one of {', '.join(map(str, GPUS_PER_NODE))}: GPU machines hold no other count"
            raise RuleError("gpusPerNode", self.gpus_per_node, why)
        # The training pod takes a whole node but what the node's agents and the pod's sidecars need.
        reserve_cpus, reserve_gib = NODE_RESERVE_MILLICORES // 1000, NODE_RESERVE_MEMORY_MIB // 1024
        for key, value, reserve, unit in (
            ("allocatableCpus", self.allocatable_cpus, reserve_cpus, "CPUs"),
            ("allocatableMemoryGib", self.allocatable_memory_gib, reserve_gib, "GiB"),
        ):
            if value is not None and value <= reserve:
                why = f"must exceed {reserve}: {reserve} {unit} stay free for the node's agents, the pod gets the rest"
                raise RuleError(key, value, why)

    def _other_machine_values(self) -> tuple[int | str | None, ...]:
        return (self.gpus_per_node, self.accelerator, self.allocatable_cpus, self.allocatable_memory_gib)

    @property
    def other_machine(self) -> OtherMachine | None:
        """The machine outside the catalog the pool describes; None for a catalog machine."""
        gpus, accelerator = self.gpus_per_node, self.accelerator
        cpus, gib = self.allocatable_cpus, self.allocatable_memory_gib
        if gpus is None or accelerator is None or cpus is None or gib is None:
            return None
        return OtherMachine(self.machine_type, gpus, accelerator, cpus * 1000, gib * 1024)


class ExistingClaimsConfig(Model):
    """ReadWriteMany claims the cluster has already in the stack's namespace: the program reads
    them (a missing one stops `pulumi preview`) and neither creates nor deletes them."""

    shared: str | None = Field(None, description="Claim of the shared file system: experiments and logs.")
    data: str | None = Field(None, description="Claim of the training data (and tokenizers/gpt2/).")
    checkpoints: str | None = Field(None, description="Claim the runs write checkpoints to.")
    cloud_storage_fuse: bool = Field(
        False,
        description="Claims given here are Cloud Storage buckets of GKE's FUSE driver: pods carry the annotation its "
        "webhook injects the sidecar for. The buckets' IAM roles must be granted to the namespace's training and "
        "data-prep service accounts.",
    )

    @model_validator(mode="after")
    def _check(self) -> ExistingClaimsConfig:
        for key, name in self.given.items():
            problem = dns_subdomain_problem(name)
            if problem:
                raise RuleError(key, name, problem)
        if self.cloud_storage_fuse and not self.given:
            raise RuleError(
                "cloudStorageFuse", True, "names no claim: give the bucket claims (shared, data, checkpoints)"
            )
        return self

    @property
    def given(self) -> dict[str, str]:
        """The claims given, by purpose."""
        named = {"shared": self.shared, "data": self.data, "checkpoints": self.checkpoints}
        return {purpose: name for purpose, name in named.items() if name is not None}

    @property
    def names(self) -> dict[str, str]:
        """Every claim's name by purpose: the one given, else the purpose (a claim the program creates)."""
        return {purpose: self.given.get(purpose, purpose) for purpose in ("shared", "data", "checkpoints")}


class ExistingClusterConfig(Model):
    """The cluster to use: how to reach it and which of its nodes are GPU pools."""

    name: str = Field(description="A name for the cluster in outputs and dashboards.")
    kubeconfig: str | None = Field(
        None, description="Kubeconfig contents (`pulumi config set --secret`). Exclusive with kubeconfigPath."
    )
    kubeconfig_path: str | None = Field(None, description="Path of a kubeconfig file on the machine running Pulumi.")
    context: str | None = Field(None, description="Context of the kubeconfig. Default: its current context.")
    gpu_pools: tuple[ExistingPoolConfig, ...] = Field(
        max_length=MAX_FLAVORS_PER_GROUP,
        description="The cluster's GPU pools to use (at least one; none on a MultiKueue manager).",
    )
    system_node_labels: dict[str, str] = Field(
        {"kubernetes.io/os": "linux"},
        min_length=1,
        description="Labels of the nodes Kueue, JobSet and TensorBoard run on (GPU nodes are tainted, so any "
        "untainted Linux node by default).",
    )
    namespace_exists: bool = Field(
        False,
        description="The stack's `namespace` exists on the cluster already: the program reads it and neither "
        "creates nor deletes it. Needed for `claims`.",
    )
    claims: ExistingClaimsConfig = Field(
        default_factory=ExistingClaimsConfig,
        description="Existing claims to use in place of new ones of `storageClass`.",
    )
    storage_class: str | None = Field(
        None,
        description="A ReadWriteMany StorageClass of the cluster: the shared, data and checkpoint claims not given "
        "in `claims` are created of it.",
    )
    storage_gib: int = Field(1024, ge=1, le=1_000_000, description="Size of each claim created.")

    @model_validator(mode="after")
    def _check(self) -> ExistingClusterConfig:
        check_name("name", self.name, 40)
        if (self.kubeconfig is None) == (self.kubeconfig_path is None):
            raise RuleError("kubeconfig", None, "set exactly one of kubeconfig (secret) and kubeconfigPath")
        names = [p.name for p in self.gpu_pools]
        for i, name in enumerate(names):
            if names.index(name) != i:
                raise RuleError(f"gpuPools[{i}].name", name, "must be unique")
        given = self.claims.given
        if given and not self.namespace_exists:
            key, name = next(iter(given.items()))
            why = "is a claim in the stack's namespace, which the program creates: set namespaceExists where it exists"
            raise RuleError(f"claims.{key}", name, why)
        # A cluster without GPU pools (a MultiKueue manager) runs no training pod, so needs no claim.
        created = [name for purpose, name in self.claims.names.items() if purpose not in given and self.gpu_pools]
        for key, name in given.items():
            if name in created:
                raise RuleError(f"claims.{key}", name, f"is the name of the {name} claim the program creates")
        if created and self.storage_class is None:
            why = f"is required to create the claims not given in claims: {', '.join(created)}"
            raise RuleError("storageClass", None, why)
        problem = dns_label_problem(self.storage_class) if self.storage_class is not None else None
        if problem:
            raise RuleError("storageClass", self.storage_class, problem)
        bad = labels_problem(self.system_node_labels)
        if bad:
            raise RuleError(f"systemNodeLabels.{bad[0]}", bad[1], bad[2])
        return self
