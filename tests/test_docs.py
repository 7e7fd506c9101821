"""The README's configuration table says what the models say."""

from __future__ import annotations

from tools.docs import README, rows, with_table


def test_the_readme_config_table_matches_the_models() -> None:
    readme = README.read_text()
    assert readme == with_table(readme), "README.md is out of date: run `make docs`"


def test_every_config_key_is_described() -> None:
    undocumented = [key for key, _, _, description in rows() if not description]
    assert undocumented == []


def test_the_keys_of_an_optional_object_are_listed() -> None:
    """`existingCluster` is `ExistingClusterConfig | None` (a PEP 604 union): its keys need rows too."""
    keys = {key for key, _, _, _ in rows()}
    assert {"existingCluster.gpuPools", "existingCluster.gpuPools[].nodeLabels"} <= keys
