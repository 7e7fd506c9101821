"""The self-managed Pulumi backend: a state bucket and a KMS key for stack secrets.

Cloud KMS never deletes a key ring or a key, and the provider's delete of a CryptoKey destroys
every one of its versions, "rendering the key unusable" and whatever it encrypted irrecoverable
(pulumi-gcp kms.CryptoKey, from hashicorp/terraform-provider-google
website/docs/r/kms_crypto_key.html.markdown); a key ring deleted leaves state only, and creating
it again fails with 409 alreadyExists (hashicorp/terraform-provider-google#1214). So the key ring
and the key are protected in every stack, production or not, and retained on delete: `pulumi
destroy --exclude-protected` removes the rest and keeps both in state, so the next `up` finds
them and creates nothing; a plain `pulumi destroy` stops on them instead of making every other
stack's secrets unreadable.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_gcp as gcp

from facts.errors import require, require_no_problem
from facts.gcp import bucket_name_problem, resource_name_problem

SECONDS_PER_DAY = 86400
# Old versions of each state file kept for recovery.
STATE_VERSIONS_KEPT = 20


@dataclass(frozen=True)
class StateBackendArgs:
    project: str
    region: str
    bucket: str
    key_ring: str
    crypto_key: str
    key_rotation_days: int
    # IAM members (user:, group:, serviceAccount:) who run `pulumi` against this backend.
    operators: Sequence[str]
    # Production: the state bucket too is protected, and not emptied on destroy.
    protect: bool
    labels: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        require_no_problem(bucket_name_problem(self.bucket), "bucket", self.bucket)
        require_no_problem(resource_name_problem(self.key_ring, 63), "key_ring", self.key_ring)
        require_no_problem(resource_name_problem(self.crypto_key, 63), "crypto_key", self.crypto_key)
        require(self.key_rotation_days >= 1, "key_rotation_days", self.key_rotation_days, "must be at least 1")


class StateBackend(pulumi.ComponentResource):
    """Where every other stack keeps its state (`pulumi login gs://…`) and encrypts its
    secrets (`--secrets-provider gcpkms://…`)."""

    TYPE = "nemo:backend:StateBackend"

    backend_url: pulumi.Output[str]
    secrets_provider: pulumi.Output[str]

    def __init__(self, name: str, args: StateBackendArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(self.TYPE, name, None, opts)
        bucket = gcp.storage.Bucket(
            f"{name}-bucket",
            name=args.bucket,
            project=args.project,
            location=args.region.upper(),
            storage_class="STANDARD",
            uniform_bucket_level_access=True,
            public_access_prevention="enforced",
            versioning={"enabled": True},
            lifecycle_rules=[
                {
                    "action": {"type": "Delete"},
                    "condition": {"num_newer_versions": STATE_VERSIONS_KEPT, "with_state": "ARCHIVED"},
                }
            ],
            # Outside production, `pulumi destroy` removes the bucket with its object versions.
            force_destroy=not args.protect,
            labels=dict(args.labels),
            opts=pulumi.ResourceOptions(parent=self, protect=args.protect),
        )
        # Every stack's secrets hang on these two: kept through any destroy (module docstring).
        kept = pulumi.ResourceOptions(protect=True, retain_on_delete=True)
        key_ring = gcp.kms.KeyRing(
            f"{name}-keyring",
            name=args.key_ring,
            project=args.project,
            location=args.region,
            opts=pulumi.ResourceOptions.merge(kept, pulumi.ResourceOptions(parent=self)),
        )
        key = gcp.kms.CryptoKey(
            f"{name}-key",
            name=args.crypto_key,
            key_ring=key_ring.id,
            purpose="ENCRYPT_DECRYPT",
            rotation_period=f"{args.key_rotation_days * SECONDS_PER_DAY}s",
            labels=dict(args.labels),
            opts=pulumi.ResourceOptions.merge(kept, pulumi.ResourceOptions(parent=key_ring)),
        )
        for i, member in enumerate(args.operators):
            gcp.storage.BucketIAMMember(
                f"{name}-state-user-{i}",
                bucket=bucket.name,
                role="roles/storage.objectUser",
                member=member,
                opts=pulumi.ResourceOptions(parent=bucket),
            )
            gcp.kms.CryptoKeyIAMMember(
                f"{name}-key-user-{i}",
                crypto_key_id=key.id,
                role="roles/cloudkms.cryptoKeyEncrypterDecrypter",
                member=member,
                # Not protected with the key: an operator taken off the list loses access.
                opts=pulumi.ResourceOptions(parent=key, protect=False),
            )
        self.backend_url = pulumi.Output.concat("gs://", bucket.name)
        self.secrets_provider = pulumi.Output.concat("gcpkms://", key.id)
        self.register_outputs({"backend_url": self.backend_url, "secrets_provider": self.secrets_provider})
