"""The integration tier: real kube-apiserver, Kueue, JobSet and kwok nodes on loopback (and the
Pulumi CLI where its binaries are at hand). `make integration` builds the binaries first; these
tests never run in `make test`."""

from __future__ import annotations

import pytest

from integration.controlplane import BIN


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Each phase prints its time; the lane's binaries come from `make integration-tools`."""
    if not BIN.is_dir() or not any(BIN.iterdir()):
        for item in items:
            item.add_marker(pytest.mark.skip(reason=f"no lane binaries in {BIN}: run `make integration-tools`"))
