"""Shared storage for training: a Filestore instance and Cloud Storage buckets, each exposed
to pods as a statically bound ReadWriteMany volume claim.

Filestore is a Pulumi-managed instance with a static PersistentVolume, never a claim that
provisions an instance through the CSI driver: `pulumi destroy` then removes claim, volume
and instance in that order, and no instance outlives the stack to block the VPC's deletion.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s

from facts.errors import require, require_no_problem
from facts.gcp import FilestoreTier, bucket_name_problem, filestore_capacity_problem, resource_name_problem
from facts.gke import GCSFUSE_CSI_DRIVER, GCSFUSE_HOST_NETWORK_KSA
from facts.kubernetes import dns_label_problem, dns_subdomain_problem, gib_quantity

FILESTORE_CSI_DRIVER = "filestore.csi.storage.gke.io"
# Nominal size of a bucket-backed volume: Kubernetes wants one, Cloud Storage ignores it.
BUCKET_VOLUME_SIZE = "64Ti"

# Cloud Storage FUSE mount options the public A3 recipes tune: cache metadata for the life of
# the mount (training data does not change underneath a run)...
# AI-Hypercomputer/gpu-recipes:src/helm-charts/storage/gcs-fuse/templates/pv.yaml@2e1fd5e
DATA_MOUNT_OPTIONS = (
    "implicit-dirs",
    "metadata-cache:negative-ttl-secs:0",
    "metadata-cache:ttl-secs:-1",
    "metadata-cache:stat-cache-max-size-mb:-1",
    "metadata-cache:type-cache-max-size-mb:-1",
)
# ...and for checkpoints, stream writes and cache whole files for parallel restore reads. The
# chart's `machine-type:a3-highgpu-8g` makes Cloud Storage FUSE 3.5.0 and older treat every A3/A4
# node as high-performance, raising its global block limit: without it, streaming writes fall
# back to staged writes.
CHECKPOINT_MOUNT_OPTIONS = (
    *DATA_MOUNT_OPTIONS,
    "write:enable-streaming-writes:true",
    "machine-type:a3-highgpu-8g",
    "file-cache:max-size-mb:-1",
    "file-cache:cache-file-for-range-read:true",
    "file-cache:enable-parallel-downloads:true",
)


def static_claim(
    name: str,
    namespace: pulumi.Input[str],
    claim_name: str,
    volume_spec: Mapping[str, Any],
    *,
    size: str,
    depends_on: Sequence[pulumi.Resource],
    parent: pulumi.Resource,
) -> k8s.core.v1.PersistentVolumeClaim:
    """A PersistentVolume of what already exists (a Filestore share, a bucket) bound to one claim:
    Retain, as the storage's lifecycle is Pulumi's, not the volume's."""
    volume = k8s.core.v1.PersistentVolume(
        f"{name}-volume",
        metadata={"name": pulumi.Output.concat(namespace, "-", claim_name)},
        spec={
            "capacity": {"storage": size},
            "accessModes": ["ReadWriteMany"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": "",
            **volume_spec,
            "claimRef": {"name": claim_name, "namespace": namespace},
        },
        opts=pulumi.ResourceOptions(parent=parent, depends_on=list(depends_on)),
    )
    return k8s.core.v1.PersistentVolumeClaim(
        f"{name}-claim",
        metadata={"name": claim_name, "namespace": namespace},
        spec={
            "accessModes": ["ReadWriteMany"],
            "storageClassName": "",
            "volumeName": volume.metadata.name,
            "resources": {"requests": {"storage": size}},
        },
        opts=pulumi.ResourceOptions(parent=parent, depends_on=[volume]),
    )


def bucket_volume_spec(bucket_name: pulumi.Input[str], mount_options: Sequence[str]) -> dict[str, Any]:
    """A Cloud Storage FUSE volume of the bucket with the mount options of its role."""
    return {
        "mountOptions": list(mount_options),
        "csi": {
            "driver": GCSFUSE_CSI_DRIVER,
            "volumeHandle": bucket_name,
            "volumeAttributes": {
                # The pod's identity is checked when it reads; the mount need not list first.
                "skipCSIBucketAccessCheck": "true",
                "gcsfuseMetadataPrefetchOnMount": "true",
                **GCSFUSE_HOST_NETWORK_KSA,
            },
        },
    }


@dataclass(frozen=True)
class FilestoreSource:
    """A Filestore share as volumes name it: the platform's claim and each team's mount it."""

    handle: str
    address: pulumi.Input[str]
    share_name: str
    capacity_gib: int

    @property
    def size(self) -> str:
        return gib_quantity(self.capacity_gib)

    def volume_spec(self) -> dict[str, Any]:
        return {
            "volumeMode": "Filesystem",
            "csi": {
                "driver": FILESTORE_CSI_DRIVER,
                "volumeHandle": self.handle,
                "volumeAttributes": {"ip": self.address, "volume": self.share_name},
            },
        }


@dataclass(frozen=True)
class SharedFilesystemArgs:
    project: str
    instance_name: str
    # A zone, or the region for REGIONAL and ENTERPRISE tiers.
    location: str
    tier: str
    capacity_gib: int
    share_name: str
    # The primary VPC (an Output in one-stack environments, so the instance is deleted first).
    network: pulumi.Input[str]
    namespace: pulumi.Input[str]
    claim_name: str
    protect: bool
    labels: Mapping[str, str]

    def __post_init__(self) -> None:
        require_no_problem(resource_name_problem(self.instance_name, 63), "instance_name", self.instance_name)
        require(self.tier in set(FilestoreTier), "tier", self.tier, f"is one of {', '.join(FilestoreTier)}")
        require_no_problem(filestore_capacity_problem(self.tier, self.capacity_gib), "capacity_gib", self.capacity_gib)
        require_no_problem(dns_label_problem(self.claim_name), "claim_name", self.claim_name)


class SharedFilesystem(pulumi.ComponentResource):
    """Filestore on the primary VPC, bound to a claim in the training namespace."""

    TYPE = "nemo:storage:SharedFilesystem"

    claim_name: pulumi.Output[str]
    claim: k8s.core.v1.PersistentVolumeClaim
    # What another namespace's volume of the share names (components.teams).
    source: FilestoreSource

    def __init__(self, name: str, args: SharedFilesystemArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(self.TYPE, name, None, opts)
        instance = gcp.filestore.Instance(
            f"{name}-instance",
            name=args.instance_name,
            project=args.project,
            location=args.location,
            tier=args.tier,
            file_shares={"name": args.share_name, "capacity_gb": args.capacity_gib},
            networks=[{"network": args.network, "modes": ["MODE_IPV4"], "connect_mode": "DIRECT_PEERING"}],
            labels=dict(args.labels),
            opts=pulumi.ResourceOptions(
                parent=self,
                protect=args.protect,
                custom_timeouts=pulumi.CustomTimeouts(create="40m", update="40m", delete="40m"),
            ),
        )
        address = instance.networks.apply(lambda networks: networks[0].ip_addresses[0] if networks else "")
        self.source = FilestoreSource(
            handle=f"modeInstance/{args.location}/{args.instance_name}/{args.share_name}",
            address=address,
            share_name=args.share_name,
            capacity_gib=args.capacity_gib,
        )
        self.claim = static_claim(
            name,
            args.namespace,
            args.claim_name,
            self.source.volume_spec(),
            size=self.source.size,
            depends_on=[instance],
            parent=self,
        )
        self.claim_name = self.claim.metadata.name
        self.register_outputs({"claim_name": self.claim_name})


@dataclass(frozen=True)
class BucketVolumeArgs:
    project: str
    region: str
    bucket_name: str
    # False: use an existing bucket by name.
    create: bool
    hierarchical_namespace: bool
    namespace: pulumi.Input[str]
    claim_name: str
    mount_options: Sequence[str]
    # (role, member) pairs: each workload identity gets exactly the role it needs.
    grants: Sequence[tuple[str, pulumi.Input[str]]]
    protect: bool
    labels: Mapping[str, str]

    def __post_init__(self) -> None:
        require_no_problem(bucket_name_problem(self.bucket_name), "bucket_name", self.bucket_name)
        require_no_problem(dns_label_problem(self.claim_name), "claim_name", self.claim_name)
        roles = [role for role, _ in self.grants]
        require(all(r.startswith("roles/") for r in roles), "grants", roles, "grant predefined roles/… roles")


class BucketVolume(pulumi.ComponentResource):
    """A Cloud Storage bucket (uniform access, no public access) as a Cloud Storage FUSE
    volume claim, with the mount options of its role baked into the volume."""

    TYPE = "nemo:storage:BucketVolume"

    bucket_name: pulumi.Output[str]
    claim_name: pulumi.Output[str]
    claim: k8s.core.v1.PersistentVolumeClaim

    def __init__(self, name: str, args: BucketVolumeArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(self.TYPE, name, None, opts)
        depends: list[pulumi.Resource] = []
        bucket_name: pulumi.Output[str] = pulumi.Output.from_input(args.bucket_name)
        if args.create:
            bucket = gcp.storage.Bucket(
                f"{name}-bucket",
                name=args.bucket_name,
                project=args.project,
                location=args.region.upper(),
                storage_class="STANDARD",
                uniform_bucket_level_access=True,
                public_access_prevention="enforced",
                hierarchical_namespace={"enabled": True} if args.hierarchical_namespace else None,
                labels=dict(args.labels),
                force_destroy=not args.protect,
                opts=pulumi.ResourceOptions(parent=self, protect=args.protect),
            )
            bucket_name = bucket.name
            depends.append(bucket)
        for i, (role, member) in enumerate(args.grants):
            gcp.storage.BucketIAMMember(
                f"{name}-access-{i}",
                bucket=bucket_name,
                role=role,
                member=member,
                opts=pulumi.ResourceOptions(parent=self),
            )
        self.claim = static_claim(
            name,
            args.namespace,
            args.claim_name,
            bucket_volume_spec(bucket_name, args.mount_options),
            size=BUCKET_VOLUME_SIZE,
            depends_on=depends,
            parent=self,
        )
        self.bucket_name = bucket_name
        self.claim_name = self.claim.metadata.name
        self.register_outputs({"bucket_name": self.bucket_name, "claim_name": self.claim_name})


@dataclass(frozen=True)
class StorageClaimsArgs:
    """The platform's claims on an existing cluster, in place of Filestore and the buckets
    (config.existing): new claims of a ReadWriteMany StorageClass, or claims it has already."""

    namespace: pulumi.Input[str]
    # Every claim, in the platform's order (shared, data, checkpoints); only existing ones repeat.
    claim_names: Sequence[str]
    # Those of them the cluster has: read, never created or deleted.
    existing: Sequence[str]
    # The class of the others; None only when every claim exists.
    storage_class: str | None
    size_gib: int

    def __post_init__(self) -> None:
        for claim in self.claim_names:
            require_no_problem(dns_subdomain_problem(claim), "claim_names", claim)
        for claim in self.existing:
            require(claim in self.claim_names, "existing", claim, "must be one of claim_names")
        created = [claim for claim in self.claim_names if claim not in self.existing]
        require(len(created) == len(set(created)), "claim_names", created, "names each claim to create once")
        if set(self.claim_names) - set(self.existing):
            require(self.storage_class is not None, "storage_class", None, "is needed to create a claim")
            require_no_problem(dns_label_problem(str(self.storage_class)), "storage_class", self.storage_class)
        require(self.size_gib >= 1, "size_gib", self.size_gib, "must be at least 1")


class StorageClaims(pulumi.ComponentResource):
    TYPE = "nemo:storage:StorageClaims"

    claims: list[k8s.core.v1.PersistentVolumeClaim]

    def __init__(self, name: str, args: StorageClaimsArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(self.TYPE, name, None, opts)
        self.claims = []
        # One existing claim may serve several purposes (data and checkpoints on one share).
        for claim in dict.fromkeys(args.claim_names):
            if claim in args.existing:
                # A read: `pulumi preview` stops with "not found" if the claim is missing.
                self.claims.append(
                    k8s.core.v1.PersistentVolumeClaim.get(
                        f"{name}-{claim}-existing",
                        pulumi.Output.concat(args.namespace, "/", claim),
                        opts=pulumi.ResourceOptions(parent=self),
                    )
                )
                continue
            self.claims.append(
                k8s.core.v1.PersistentVolumeClaim(
                    f"{name}-{claim}",
                    metadata={"name": claim, "namespace": args.namespace},
                    spec={
                        "accessModes": ["ReadWriteMany"],
                        "storageClassName": args.storage_class,
                        "resources": {"requests": {"storage": gib_quantity(args.size_gib)}},
                    },
                    # A claim of a provisioner binds when its first pod starts, on some classes.
                    opts=pulumi.ResourceOptions(parent=self, delete_before_replace=True),
                )
            )
        self.register_outputs({"claims": [c.metadata.name for c in self.claims]})
