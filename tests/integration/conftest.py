"""The integration tier: real kube-apiserver, Kueue, JobSet and kwok nodes on loopback (and the
Pulumi CLI where its binaries are at hand). `make integration` builds the binaries first; these
tests never run in `make test`."""

from __future__ import annotations

import pytest

from integration.controlplane import BIN, RUNNING


def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> None:
    """A failed test prints what each running lane's controllers and pods were doing, before its
    fixtures stop them. The engine's tests share one session in file order: after one fails, the
    others would fail for its reason, so they are skipped, naming it."""
    module = getattr(item, "module", None)
    if call.excinfo is not None and call.when in ("setup", "call"):
        for lane in list(RUNNING):
            print(f"\n{item.name} failed; {lane.state()}", flush=True)
    if call.excinfo is not None and call.when == "call" and module is not None:
        module.FIRST_FAILURE = getattr(module, "FIRST_FAILURE", None) or item.name


def pytest_runtest_setup(item: pytest.Item) -> None:
    module = getattr(item, "module", None)
    failed = getattr(module, "FIRST_FAILURE", None)
    if failed and module is not None and module.__name__.endswith("test_engine"):
        pytest.skip(f"the session's earlier test {failed} failed")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Each phase prints its time; the lane's binaries come from `make integration-tools`."""
    if not BIN.is_dir() or not any(BIN.iterdir()):
        for item in items:
            item.add_marker(pytest.mark.skip(reason=f"no lane binaries in {BIN}: run `make integration-tools`"))
