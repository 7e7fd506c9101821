"""The platform layer's keys: `storage`, `kueue`, `tensorboard` and `gpudirect`."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, model_validator

from config.base import Model, check_name
from facts.errors import RuleError
from facts.gcp import FilestoreTier, bucket_name_problem, filestore_capacity_problem

_SHARE_NAME = re.compile(r"^[a-z][a-z0-9_]{0,15}$")


class FilestoreConfig(Model):
    """The shared file system for logs and checkpoints, mounted at /nfs in every pod."""

    tier: FilestoreTier = Field(FilestoreTier.BASIC_HDD, description="Filestore service tier.")
    capacity_gib: int = Field(1024, description="Capacity; allowed range and step depend on the tier.")
    share_name: str = Field("nemo", description="Name of the NFS share.")

    @model_validator(mode="after")
    def _check(self) -> FilestoreConfig:
        problem = filestore_capacity_problem(self.tier, self.capacity_gib)
        if problem:
            raise RuleError("capacityGib", self.capacity_gib, problem)
        if not _SHARE_NAME.match(self.share_name):
            raise RuleError("shareName", self.share_name, "must be 1-16 of a-z, 0-9 and '_', starting with a letter")
        return self


class BucketConfig(Model):
    name: str | None = Field(None, description="Bucket name. Default: `<project>-<cluster>-<role>`.")
    create: bool = Field(True, description="Create the bucket; false uses an existing one.")

    @model_validator(mode="after")
    def _check(self) -> BucketConfig:
        if self.name is not None:
            problem = bucket_name_problem(self.name)
            if problem:
                raise RuleError("name", self.name, problem)
        if not self.create and self.name is None:
            raise RuleError("name", None, "is required when create is false")
        return self


class CheckpointBucketConfig(BucketConfig):
    hierarchical_namespace: bool = Field(
        True, description="Hierarchical namespace: fast directory renames for checkpoints."
    )


class StorageConfig(Model):
    filestore: FilestoreConfig = Field(default_factory=FilestoreConfig, description="Shared file system.")
    data_bucket: BucketConfig = Field(
        default_factory=BucketConfig, description="Training data, mounted read-only at /data."
    )
    checkpoint_bucket: CheckpointBucketConfig = Field(
        default_factory=CheckpointBucketConfig, description="Checkpoints, mounted read-write at /checkpoints."
    )


class KueueConfig(Model):
    """Queueing and all-or-nothing admission."""

    cluster_queue: str = Field("a3-queue", description="ClusterQueue name.")
    local_queue: str = Field("a3-queue", description="LocalQueue name in the training namespace: runs submit here.")
    wait_for_pods_ready_timeout_seconds: int = Field(
        1800,
        ge=300,
        le=86400,
        description="An admitted workload whose pods are not all ready by then is evicted and requeued; "
        "leaves room for 20-30 GB image pulls.",
    )
    requeue_limit: int = Field(
        5, ge=0, le=100, description="Evictions for not-ready pods before a workload is deactivated."
    )
    preemption: Literal["LowerPriority", "LowerOrNewerEqualPriority", "Never"] = Field(
        "LowerPriority", description="Whether a higher-priority run may preempt a lower one in the queue."
    )

    @model_validator(mode="after")
    def _check(self) -> KueueConfig:
        check_name("clusterQueue", self.cluster_queue, 63)
        check_name("localQueue", self.local_queue, 63)
        return self


class TensorBoardConfig(Model):
    enabled: bool = Field(True, description="Run TensorBoard on the system pool, reading the training logs.")
    cpu_millicores: int = Field(500, ge=100, le=8000, description="CPU request of the TensorBoard pod.")
    memory_mib: int = Field(2048, ge=256, le=65536, description="Memory request (and limit) of the TensorBoard pod.")
    vertex_ai: bool = Field(
        False, description="Also create a Vertex AI TensorBoard instance (needs aiplatform.googleapis.com)."
    )


class GpuDirectConfig(Model):
    nri_device_injector: bool = Field(
        True,
        description="Deploy the NRI device injector TCPX/TCPXO sidecars need; set false where GKE already runs it.",
    )
