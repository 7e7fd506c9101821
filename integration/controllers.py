"""The pinned Kueue and JobSet: their CRDs, webhooks and managers, configured as the stack
configures Kueue, and the program's own check of them."""

from __future__ import annotations

import base64
import shutil
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from components.scheduling import kueue_configuration
from config.loader import parse_stack_config
from facts import versions
from facts.kubernetes import (
    JOBSET_API,
    KUEUE_API,
)  # fmt: skip
from facts.versions import CrdModule
from harness.runner import StackRun, stack_config
from harness.stackfile import to_pulumi_config
from integration.controlplane import (
    LOCALHOST,
    Api,
    Lane,
    binary,
    free_port,
    has_condition,
    lane_binary_versions,
    lane_pins,
    wait_for,
)
from integration.dra import driver_objects
from integration.runs import api_path
from planners.controller_api import controller_api_problems, crd_names
from stacks.contract import ClusterExports
from stacks.kubeapi import Kubeconfig, read_crds
from stacks.platform import kueue_controller_args
from tools import crds

# --------------------------------------------------------------------------- controllers


CONTROLLER_GROUPS = frozenset({"kueue.x-k8s.io", "jobset.x-k8s.io"})


@dataclass(frozen=True)
class Release:
    """A Kueue and a JobSet the lane runs: their Go modules (CRDs and webhooks, checked against
    their go.sum hashes by tools.crds) and the binaries integration/build-tools.sh builds of them."""

    kueue: CrdModule
    jobset: CrdModule

    @property
    def modules(self) -> tuple[CrdModule, CrdModule]:
        return self.kueue, self.jobset

    def binaries(self) -> tuple[Path, Path]:
        patch = lane_binary_versions()["kueue"].split("+", 1)[1]
        return binary("kueue", f"{self.kueue.version}+{patch}"), binary("jobset", self.jobset.version)

    def __str__(self) -> str:
        return f"Kueue {self.kueue.version} and JobSet {self.jobset.version}"


_MODULES = {m.module: m for m in versions.CRD_MODULES}
# The pinned releases, which the program installs.
PINNED = Release(_MODULES["sigs.k8s.io/kueue"], _MODULES["sigs.k8s.io/jobset"])
# The releases before them (integration/versions.sh, *_PREVIOUS_VERSION), which the upgrade
# scenario starts from; their go.sum hashes as `go mod download -json` reports them.
PREVIOUS = Release(
    replace(
        PINNED.kueue,
        version=lane_pins()["KUEUE_PREVIOUS_VERSION"],
        sum="h1:hnONSDkjUN1kp+Yxc+SzjmwNb57RjFYF7qQmkn9ijxA=",
    ),
    replace(
        PINNED.jobset,
        version=lane_pins()["JOBSET_PREVIOUS_VERSION"],
        sum="h1:WgLEBnXTeX+4MxfVkIbfm4jIVgjvIY6Jfaei2okxKNk=",
    ),
)


def crd_manifests(release: Release = PINNED) -> list[dict[str, Any]]:
    """Every CRD of the release's Kueue and JobSet modules (tools.crds downloads and checks them)."""
    found = []
    for module in release.modules:
        for path in sorted((crds.module_dir(module) / module.path).glob("*.yaml")):
            crd = yaml.safe_load(path.read_text())
            if crd["spec"]["group"] in CONTROLLER_GROUPS:
                found.append(crd)
    return found


def install_crds(lane: Lane, api: Api, release: Release = PINNED) -> int:
    """The CRDs of the release's Kueue and JobSet modules; a CRD already there is replaced, as
    Kueue's chart upgrades its CRDs with it and the program applies JobSet's."""
    manifests = crd_manifests(release)
    with lane.phase(f"{len(manifests)} CRDs of {release}"):
        for manifest in manifests:
            _create_or_replace(api, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", manifest)

        def established() -> bool:
            _, listing = api.request("GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions")
            done = {c["metadata"]["name"] for c in listing["items"] if has_condition(c, "Established")}
            return {m["metadata"]["name"] for m in manifests} <= done

        wait_for("the CRDs", established)
    return len(manifests)


def install_driver_stand_ins(lane: Lane, api: Api, nodes: Sequence[str]) -> None:
    """NVIDIA's DRA driver as the cluster would hold it for these nodes (integration.dra)."""
    objects = driver_objects(nodes)
    with lane.phase(f"DRA driver stand-ins for {len(nodes)} nodes"):
        for manifest in objects:
            api.create(api_path(manifest), manifest)
        crd = next(m["metadata"]["name"] for m in objects if m["kind"] == "CustomResourceDefinition")

        def established() -> bool:
            _, found = api.request("GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd}")
            return has_condition(found, "Established")

        wait_for(f"the {crd} CRD", established)


# The webhooks of the kinds the platform uses (Kueue's own objects, Jobs and JobSets): Kueue
# serves only the integrations its configuration enables, as the program configures it.
_WEBHOOK_PATHS = ("kueue-x-k8s-io", "batch-v1-job", "jobset-x-k8s-io")


def webhook_configurations(module_dir: Path, prefix: str, port: int, ca_bundle: str) -> list[dict[str, Any]]:
    """The module's webhook configurations with each service reference turned into a URL on
    loopback (no pod network here), signed by the lane's CA."""
    found = []
    for manifest in yaml.safe_load_all((module_dir / "config/components/webhook/manifests.yaml").read_text()):
        if not manifest:
            continue
        hooks = [
            h for h in manifest["webhooks"] if any(p in h["clientConfig"]["service"]["path"] for p in _WEBHOOK_PATHS)
        ]
        for hook in hooks:
            path = hook["clientConfig"]["service"]["path"]
            hook["clientConfig"] = {"url": f"https://{LOCALHOST}:{port}{path}", "caBundle": ca_bundle}
        manifest["metadata"] = {"name": f"{prefix}-{manifest['metadata']['name']}"}
        manifest["webhooks"] = hooks
        if hooks:
            found.append(manifest)
    return found


def _serving_cert(pki: Path, folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("tls.crt", "tls.key"):
        shutil.copy(pki / ("server.crt" if name == "tls.crt" else "server.key"), folder / name)


def _create_or_replace(api: Api, collection: str, manifest: Mapping[str, Any]) -> None:
    """Create the object in `collection`, or replace the one of its name (an upgrade's new version)."""
    name = manifest["metadata"]["name"]
    status, found = api.request("GET", f"{collection}/{name}")
    if status != 200:
        api.create(collection, manifest)
        return
    replacing = {
        **manifest,
        "metadata": {**manifest["metadata"], "resourceVersion": found["metadata"]["resourceVersion"]},
    }
    status, answer = api.request("PUT", f"{collection}/{name}", replacing)
    if status != 200:
        raise RuntimeError(f"PUT {collection}/{name}: {status} {answer}")


def controllers(lane: Lane, api: Api, kueue_config: Mapping[str, Any], release: Release = PINNED) -> None:
    """The JobSet and Kueue managers of the release, outside the cluster, with their webhooks
    served on loopback (their configurations replaced where there); Kueue with the program's own
    configuration."""
    pki, config = lane.workdir / "pki", str(lane.workdir / "admin.kubeconfig")
    certs = lane.workdir / "webhook-certs"
    _serving_cert(pki, certs)
    ca_bundle = base64.b64encode((pki / "ca.crt").read_bytes()).decode()
    kueue_binary, jobset_binary = release.binaries()
    with lane.phase(f"JobSet and Kueue managers ({release})"):
        jobset_port, jobset_health = free_port(), f"{LOCALHOST}:{free_port()}"
        jobset_config = lane.workdir / "jobset-config.yaml"
        jobset_config.write_text(yaml.safe_dump({
            "apiVersion": "config.jobset.x-k8s.io/v1alpha1", "kind": "Configuration",
            "leaderElection": {"leaderElect": False}, "internalCertManagement": {"enable": False},
            "webhook": {"port": jobset_port, "host": LOCALHOST, "certDir": str(certs)},
            "metrics": {"bindAddress": f"{LOCALHOST}:{free_port()}", "certDir": str(certs)},
            "health": {"healthProbeBindAddress": jobset_health},
        }))  # fmt: skip
        # As the JobSet controller's own account, which a team's admission policy trusts.
        jobset_kubeconfig = str(lane.workdir / "jobset.kubeconfig")
        lane.start("jobset", [str(jobset_binary), "--config", str(jobset_config), "--kubeconfig", jobset_kubeconfig])
        kueue_port = free_port()
        kueue = {
            **kueue_config,
            "leaderElection": {"leaderElect": False},
            "internalCertManagement": {"enable": False},
            "webhook": {"port": kueue_port, "host": LOCALHOST, "certDir": str(certs)},
            "metrics": {"bindAddress": f"{LOCALHOST}:{free_port()}"},
            "health": {"healthProbeBindAddress": f"{LOCALHOST}:{free_port()}"},
        }
        kueue_config_file = lane.workdir / "kueue-config.yaml"
        kueue_config_file.write_text(yaml.safe_dump(kueue))
        # Kueue reads its metrics certificate from a folder when it manages no certificates: the
        # lane's build takes it from the environment (integration/versions.sh, KUEUE_LANE_PATCH).
        metrics_certs = lane.workdir / "kueue-metrics-certs"
        _serving_cert(pki, metrics_certs)
        lane.start("kueue", [
            str(kueue_binary), "--config", str(kueue_config_file), "--kubeconfig", config,
            "--feature-gates=VisibilityOnDemand=false",
        ], env={"KUEUE_METRICS_CERT_DIR": str(metrics_certs)})  # fmt: skip
        for module, prefix, port in ((release.jobset, "jobset", jobset_port), (release.kueue, "kueue", kueue_port)):
            for manifest in webhook_configurations(crds.module_dir(module), prefix, port, ca_bundle):
                kind = (
                    "mutatingwebhookconfigurations"
                    if manifest["kind"].startswith("Mutating")
                    else "validatingwebhookconfigurations"
                )
                _create_or_replace(api, f"/apis/admissionregistration.k8s.io/v1/{kind}", manifest)

        def ready() -> bool:
            lane.check_alive()
            return all(
                urllib.request.urlopen(f"http://{address}/readyz", timeout=2).status == 200
                for address in (jobset_health, kueue["health"]["healthProbeBindAddress"])
            )

        wait_for("the JobSet and Kueue managers", ready)
        # Both managers register their webhooks after they report ready: until then the API
        # server gets a 404 from them and refuses the object. A server-side dry run of a JobSet
        # and of a ResourceFlavor passes through both managers' webhooks without storing anything.
        probe = {"name": "lane-probe"}
        probes: list[tuple[str, dict[str, Any]]] = [
            (
                f"/apis/{JOBSET_API}/namespaces/default/jobsets?dryRun=All",
                {"apiVersion": JOBSET_API, "kind": "JobSet", "metadata": probe, "spec": {"replicatedJobs": []}},
            ),
            (
                f"/apis/{KUEUE_API}/resourceflavors?dryRun=All",
                {"apiVersion": KUEUE_API, "kind": "ResourceFlavor", "metadata": probe, "spec": {}},
            ),
        ]

        def webhooks_answer() -> bool:
            lane.check_alive()
            for path, body in probes:
                status, answer = api.request("POST", path, body)
                if status == 500 and "failed calling webhook" in str(answer):
                    return False
            return True

        wait_for("the JobSet and Kueue webhooks", webhooks_answer)


def upgrade(lane: Lane, api: Api, kueue_config: Mapping[str, Any], release: Release) -> None:
    """Kueue and JobSet moved to `release` under whatever runs, as their charts' upgrade does: the
    old managers stopped, the CRDs replaced, the new managers and webhooks started."""
    for name in ("kueue", "jobset"):
        lane.stop_process(name)
    install_crds(lane, api, release)
    controllers(lane, api, kueue_config, release)


def lane_kueue_config(run: StackRun, values: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The Kueue configuration the program gives the Kueue it installs, which a stack with
    `kueue.install: false` expects the cluster's own to have; `values`: the config of a stack that
    has no file."""
    cfg = stack_config(run.stack) if values is None else parse_stack_config(to_pulumi_config(values), run.stack)
    return kueue_configuration(kueue_controller_args(cfg, ClusterExports.from_plain(run.exports["cluster"])))


def controller_api_check(lane: Lane) -> list[str]:
    """What the program's check of an existing cluster's Kueue and JobSet says of the lane, read
    with the program's own reader through the lane's kubeconfig."""
    kubeconfig = Kubeconfig(None, str(lane.workdir / "admin.kubeconfig"), "lane")
    return controller_api_problems(read_crds(kubeconfig, crd_names()))
