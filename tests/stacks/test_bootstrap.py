"""Bootstrap layer: APIs that stay enabled, the state backend, the image registry."""

from __future__ import annotations

from typing import Any

import pytest

from harness.runner import StackRun, stack_with
from tests.conftest import MODES
from tools.summary import markdown

REQUIRED_APIS = {
    "file.googleapis.com", "container.googleapis.com", "compute.googleapis.com", "iam.googleapis.com",
    "iamcredentials.googleapis.com", "logging.googleapis.com", "monitoring.googleapis.com",
    "storage.googleapis.com", "artifactregistry.googleapis.com", "cloudkms.googleapis.com",
}  # fmt: skip


@pytest.fixture(scope="module")
def run(render: Any) -> StackRun:
    return render("bootstrap")


def test_every_api_the_platform_needs_is_enabled_and_never_disabled_on_destroy(run: StackRun) -> None:
    services = run.of_type("gcp:projects/service:Service")
    assert {s.inputs["service"] for s in services} >= REQUIRED_APIS
    for service in services:
        assert service.inputs["disableOnDestroy"] is False
        assert service.inputs["disableDependentServices"] is False


def test_the_state_bucket_is_versioned_private_and_regional(run: StackRun) -> None:
    bucket = run.one("gcp:storage/bucket:Bucket")
    inputs = bucket.inputs
    assert inputs["name"] == "your-gcp-project-pulumi-state"
    assert inputs["versioning"] == {"enabled": True}
    assert inputs["uniformBucketLevelAccess"] is True
    assert inputs["publicAccessPrevention"] == "enforced"
    assert inputs["location"] == "US-CENTRAL1"  # a region, not a multi-region
    assert inputs["forceDestroy"] is True and not bucket.protect  # a dev bootstrap destroys cleanly


def test_a_production_bootstrap_protects_the_bucket_and_the_key(render: Any) -> None:
    run = render("bootstrap", values=stack_with("bootstrap", production=True))
    assert run.one("gcp:storage/bucket:Bucket").protect
    assert run.one("gcp:kms/cryptoKey:CryptoKey").protect
    assert run.one("gcp:storage/bucket:Bucket").inputs["forceDestroy"] is False


@pytest.mark.parametrize("production", [False, True], ids=["dev", "production"])
def test_the_key_ring_and_key_outlive_every_destroy(render: Any, production: bool) -> None:
    """Cloud KMS deletes neither: the provider's CryptoKey delete destroys every version, and
    with it every stack secret the key encrypted (terraform-provider-google
    docs/r/kms_crypto_key), and a key ring left behind makes the next create fail with 409
    (terraform-provider-google#1214). Protected in every stack, so `destroy --exclude-protected`
    keeps both in state for the next `up`, and retained should they ever be unprotected."""
    run = render("bootstrap", values=stack_with("bootstrap", production=production))
    for kind in ("gcp:kms/keyRing:KeyRing", "gcp:kms/cryptoKey:CryptoKey"):
        resource = run.one(kind)
        assert resource.protect and resource.retain_on_delete, kind
    key = run.one("gcp:kms/cryptoKey:CryptoKey")
    assert "skipInitialVersionCreation" not in key.inputs  # gcpkms:// encrypts with the primary version
    for grant in run.of_type("gcp:kms/cryptoKeyIAMMember:CryptoKeyIAMMember"):
        # Not protected with the key: an operator taken off the list loses access.
        assert not grant.protect and not grant.retain_on_delete, grant.name


def test_the_kms_key_encrypts_stack_secrets_and_rotates(run: StackRun) -> None:
    ring = run.one("gcp:kms/keyRing:KeyRing")
    key = run.one("gcp:kms/cryptoKey:CryptoKey")
    assert ring.inputs["location"] == "us-central1"
    assert key.inputs["purpose"] == "ENCRYPT_DECRYPT"
    assert key.inputs["rotationPeriod"] == f"{90 * 86400}s"
    assert ring.urn in key.all_dependencies


def test_operators_get_only_object_access_and_encrypt_decrypt(run: StackRun) -> None:
    bucket_grants = run.of_type("gcp:storage/bucketIAMMember:BucketIAMMember")
    key_grants = run.of_type("gcp:kms/cryptoKeyIAMMember:CryptoKeyIAMMember")
    assert [(g.inputs["role"], g.inputs["member"]) for g in bucket_grants] == [
        ("roles/storage.objectUser", "group:ml-platform@example.com")
    ]
    assert [(g.inputs["role"], g.inputs["member"]) for g in key_grants] == [
        ("roles/cloudkms.cryptoKeyEncrypterDecrypter", "group:ml-platform@example.com")
    ]


def test_the_outputs_are_the_exact_login_and_secrets_provider_values(run: StackRun) -> None:
    key = run.one("gcp:kms/cryptoKey:CryptoKey")
    key_id = f"projects/your-gcp-project/locations/us-central1/keyRings/pulumi/cryptoKeys/{key.inputs['name']}"
    assert run.exports["backendUrl"] == "gs://your-gcp-project-pulumi-state"
    assert run.exports["loginCommand"] == "pulumi login gs://your-gcp-project-pulumi-state"
    assert run.exports["secretsProvider"] == f"gcpkms://{key_id}"
    assert run.exports["stackInitCommand"] == f"pulumi stack init dev --secrets-provider gcpkms://{key_id}"


def test_an_artifact_registry_docker_repository_is_created(run: StackRun) -> None:
    repository = run.one("gcp:artifactregistry/repository:Repository")
    assert (repository.inputs["format"], repository.inputs["location"]) == ("DOCKER", "us-central1")
    assert run.exports["imageRepository"] == "us-central1-docker.pkg.dev/your-gcp-project/nemo-images"


@MODES
def test_backend_resources_wait_for_the_apis(render: Any, preview: bool) -> None:
    run = render("bootstrap", preview=preview)
    bucket = run.one("gcp:storage/bucket:Bucket")
    storage_api = next(
        s for s in run.of_type("gcp:projects/service:Service") if s.inputs["service"] == "storage.googleapis.com"
    )
    assert run.depends_on(bucket, storage_api)


def test_the_bootstrap_has_a_go_no_go_verdict(render: Any) -> None:
    """A placeholder project stops the bootstrap's `up` as it does any other stack's."""
    placeholder = render("bootstrap")
    last = markdown("bootstrap", placeholder.exports["summary"], []).rstrip().splitlines()[-1]
    assert last.startswith("**Verdict: NO-GO**") and "your-gcp-project" in last
    real = render("bootstrap", values=stack_with("bootstrap", project="my-project"))
    assert real.exports["summary"]["noGo"] == []
