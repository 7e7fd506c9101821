"""`nemo-gke:bootstrap`: the bootstrap stack's APIs, state backend and image registry."""

from __future__ import annotations

import re

from pydantic import Field, model_validator

from config.base import Model, check_name
from facts.errors import RuleError
from facts.gcp import bucket_name_problem

_IAM_MEMBER = re.compile(r"^(user|group|serviceAccount|domain):[^\s]+$")


class BootstrapConfig(Model):
    """The bootstrap stack: APIs, the state backend and the image registry."""

    state_bucket: str | None = Field(
        None,
        description="Bucket for the self-managed Pulumi backend. Default: `<project>-pulumi-state`.",
    )
    key_ring: str = Field("pulumi", description="KMS key ring holding the secrets-provider key.")
    crypto_key: str = Field("pulumi-secrets", description="KMS key used by the `gcpkms://` secrets provider.")
    key_rotation_days: int = Field(90, ge=1, le=3650, description="Rotation period of the KMS key, in days.")
    artifact_repository: str = Field(
        "nemo-images", description="Artifact Registry Docker repository for custom training images."
    )
    extra_services: tuple[str, ...] = Field(
        (), description="APIs to enable beyond the ones the platform needs, e.g. `aiplatform.googleapis.com`."
    )
    operators: tuple[str, ...] = Field(
        (),
        description="IAM members (`user:`, `group:`, `serviceAccount:`) who run `pulumi`: object access to the "
        "state bucket and encrypt/decrypt on the secrets key, nothing more.",
    )

    @model_validator(mode="after")
    def _check(self) -> BootstrapConfig:
        check_name("keyRing", self.key_ring, 63)
        check_name("cryptoKey", self.crypto_key, 63)
        check_name("artifactRepository", self.artifact_repository, 63)
        if self.state_bucket is not None:
            problem = bucket_name_problem(self.state_bucket)
            if problem:
                raise RuleError("stateBucket", self.state_bucket, problem)
        for i, member in enumerate(self.operators):
            if not _IAM_MEMBER.match(member):
                raise RuleError(f"operators[{i}]", member, "must be an IAM member such as user:alice@example.com")
        for i, service in enumerate(self.extra_services):
            if not service.endswith(".googleapis.com"):
                raise RuleError(f"extraServices[{i}]", service, "must be a service name ending in .googleapis.com")
        return self
