"""The integration lane's tool pins agree with the program's: the Kueue and JobSet managers it
builds are the releases whose charts and CRDs the program installs, and each wrapper module
requires the version the build script names."""

from __future__ import annotations

import re
from pathlib import Path

from facts import versions

INTEGRATION = Path(__file__).parent.parent / "integration"


def pins() -> dict[str, str]:
    text = (INTEGRATION / "versions.sh").read_text()
    return dict(re.findall(r"^([A-Z_]+)=(\S+)$", text, re.MULTILINE))


def test_the_lane_builds_the_controllers_the_program_installs() -> None:
    assert pins()["KUEUE_VERSION"] == f"v{versions.KUEUE.version.lstrip('v')}"
    assert pins()["JOBSET_VERSION"] == f"v{versions.JOBSET.version.lstrip('v')}"


def test_each_wrapper_requires_the_pinned_release() -> None:
    wrappers = {
        "etcd": ("go.etcd.io/etcd/server/v3", "ETCD_VERSION"),
        "kubernetes": ("k8s.io/kubernetes", "KUBERNETES_VERSION"),
    }
    for wrapper, (module, pin) in wrappers.items():
        go_mod = (INTEGRATION / "wrappers" / wrapper / "go.mod").read_text()
        assert re.search(rf"^\s*(require )?{re.escape(module)} {re.escape(pins()[pin])}$", go_mod, re.MULTILINE)
        assert (INTEGRATION / "wrappers" / wrapper / "go.sum").exists()
    staging = (INTEGRATION / "wrappers" / "kubernetes" / "go.mod").read_text()
    minor = pins()["KUBERNETES_VERSION"].replace("v1.", "v0.")
    replaced = re.findall(r"^\s+(k8s\.io/\S+) => \1 (\S+)$", staging, re.MULTILINE)
    assert replaced and all(version == minor for _, version in replaced)
