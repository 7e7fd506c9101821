"""Google Cloud naming rules, each checked against the rule as Google states it."""

from __future__ import annotations

import pytest

from config.loader import parse_stack_config
from facts.gcp import bucket_name_problem, filestore_capacity_problem, region_of_zone, resource_name_problem
from facts.project import qualified_stack_name

BUCKET_NAMES = [
    ("nemo-data", True),
    ("my_corpus_2026", True),
    ("abc", True),
    ("a" * 63, True),
    # Dots are allowed (the bucket then needs domain verification), up to 222 characters.
    ("data.example.com", True),
    (".".join(["a" * 63] * 3), True),
    ("ab", False),
    ("a" * 64, False),
    ("Data", False),
    ("-data", False),
    ("data-", False),
    ("da..ta", False),
    ("192.168.5.4", False),
    ("goog-data", False),
    ("my-google-data", False),
    ("my-g00gle-data", False),
]


@pytest.mark.parametrize(("name", "valid"), BUCKET_NAMES)
def test_bucket_names_follow_cloud_storage_s_rules(name: str, valid: bool) -> None:
    """https://cloud.google.com/storage/docs/buckets#naming: a-z, 0-9, '-', '_', '.'; start and end
    with a letter or digit; 3-63 characters (222 with dots, 63 per dot-separated part); not an IP
    address; no 'goog' prefix; no 'google' or look-alike. The two copies of this rule the config
    had disagreed on dots (the state bucket allowed them, the data buckets did not) and both let
    'goog' and 'google' through."""
    assert (bucket_name_problem(name) is None) is valid, bucket_name_problem(name)


@pytest.mark.parametrize(("name", "valid"), BUCKET_NAMES)
def test_every_bucket_key_of_the_config_applies_the_same_rule(name: str, valid: bool) -> None:
    for values in (
        {"nemo-gke:storage": f'{{"dataBucket": {{"name": "{name}"}}}}'},
        {"nemo-gke:storage": f'{{"checkpointBucket": {{"name": "{name}"}}}}'},
        {"nemo-gke:layers": '["bootstrap"]', "nemo-gke:bootstrap": f'{{"stateBucket": "{name}"}}'},
    ):
        try:
            parse_stack_config({"nemo-gke:project": "my-project-1", **values}, "dev")
            accepted = True
        except ValueError:
            accepted = False
        assert accepted is valid, (name, values)


def test_resource_names_are_rfc_1035() -> None:
    assert resource_name_problem("nemo-dev", 24) is None
    for bad in ("Nemo", "1nemo", "nemo-", "nemo_dev", "n" * 25):
        assert resource_name_problem(bad, 24), bad


def test_zones_name_their_region() -> None:
    assert region_of_zone("europe-west4-b") == "europe-west4"
    assert region_of_zone("europe-west4") is None


def test_filestore_capacity_follows_each_tier_s_range_and_step() -> None:
    assert filestore_capacity_problem("ZONAL", 1280) is None
    assert "steps of 256 GiB" in str(filestore_capacity_problem("ZONAL", 1100))
    assert filestore_capacity_problem("BASIC_SSD", 2560) is None


def test_a_bare_upstream_stack_name_is_a_stack_of_this_project_on_a_self_managed_backend() -> None:
    assert qualified_stack_name("dev") == "organization/nemo-gke/dev"
    assert qualified_stack_name("acme/nemo-gke/prod") == "acme/nemo-gke/prod"
