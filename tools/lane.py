"""The integration lane's cluster: etcd, the Kubernetes control plane and kwok's simulated GPU
nodes on loopback, from the binaries `integration/build-tools.sh` builds, with the CRDs of the
pinned Kueue and JobSet modules installed.

    python -m tools.lane smoke [--stack existing]   start, check, stop; print each phase's time
    python -m tools.lane up --dir DIR [--stack S]   start, then hold until interrupted (by hand:
                                                    DIR/admin.kubeconfig reaches the cluster)
    python -m tools.lane down --dir DIR             stop what `up` started

Every process listens on 127.0.0.1 only and is stopped by its process id. The nodes are shaped
like the stack's GPU pools: their labels (the pool's selector, GKE's accelerator and topology
labels), the GPU taint and allocatable GPUs, CPUs and memory of the machine type.
"""

from __future__ import annotations

import argparse
import base64
import functools
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from components.scheduling import kueue_configuration
from facts import versions
from facts.controller_api import CONTROLLER_KINDS
from facts.kubernetes import (
    GPU_RESOURCE,
    HOSTNAME_LABEL,
    JOBSET_API,
    JOBSET_UID_LABEL,
    KUEUE_API,
    TOPOLOGY_LABELS,
    TopologyLevel,
)  # fmt: skip
from planners.controller_api import controller_api_problems, crd_names
from planners.queues import plan_flavor
from stacks.contract import ClusterExports
from stacks.kubeapi import Kubeconfig, read_crds
from stacks.platform import kueue_controller_args
from tools import crds
from tools.runner import StackRun, run_stack, stack_config

ROOT = Path(__file__).resolve().parent.parent
CACHE = Path(os.environ.get("NEMO_GKE_CACHE", Path.home() / ".cache" / "nemo-gke"))
BIN = CACHE / "integration" / "bin"
LOCALHOST = "127.0.0.1"
SERVICE_RANGE = "10.96.0.0/16"
KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"


def _pins() -> dict[str, str]:
    text = (ROOT / "integration" / "versions.sh").read_text()
    return dict(line.split("=", 1) for line in text.splitlines() if line and not line.startswith("#"))


def binary(name: str) -> Path:
    pins = _pins()
    version = {
        "etcd": pins["ETCD_VERSION"],
        "kwok": pins["KWOK_VERSION"],
        "kueue": f"{pins['KUEUE_VERSION']}+{pins['KUEUE_LANE_PATCH']}",
        "jobset": pins["JOBSET_VERSION"],
        "pulumi-config": pins["PULUMI_SDK_VERSION"],
    }.get(name, pins["KUBERNETES_VERSION"])
    path = BIN / f"{name}-{version}"
    if not path.exists():
        raise SystemExit(f"{path} is missing: run `make integration-tools` first")
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind((LOCALHOST, 0))
        return int(s.getsockname()[1])


# --------------------------------------------------------------------------- certificates


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_certs(pki: Path) -> None:
    """A CA, the API server's serving certificate for 127.0.0.1, an admin client certificate
    (group system:masters), and the service-account signing key."""
    pki.mkdir(parents=True, exist_ok=True)
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=lane-ca",
             "-keyout", "ca.key", "-out", "ca.crt", cwd=pki)  # fmt: skip
    for name, subject, extension in (
        ("server", "/CN=kube-apiserver", "subjectAltName=IP:127.0.0.1,DNS:localhost"),
        ("admin", "/O=system:masters/CN=admin", "extendedKeyUsage=clientAuth"),
    ):
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", subject, "-keyout", f"{name}.key",
                 "-out", f"{name}.csr", cwd=pki)  # fmt: skip
        (pki / f"{name}.ext").write_text(extension + "\n")
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
                 "-days", "2", "-extfile", f"{name}.ext", "-out", f"{name}.crt", cwd=pki)  # fmt: skip
    _openssl("genrsa", "-out", "sa.key", "2048", cwd=pki)
    _openssl("rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=pki)


def kubeconfig(pki: Path, server: str) -> dict[str, Any]:
    def data(name: str) -> str:
        return base64.b64encode((pki / name).read_bytes()).decode()

    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "lane", "cluster": {"server": server, "certificate-authority-data": data("ca.crt")}}],
        "users": [
            {
                "name": "admin",
                "user": {"client-certificate-data": data("admin.crt"), "client-key-data": data("admin.key")},
            }
        ],
        "contexts": [{"name": "lane", "context": {"cluster": "lane", "user": "admin"}}],
        "current-context": "lane",
    }


# --------------------------------------------------------------------------- the API


@dataclass
class Api:
    server: str
    pki: Path

    def _context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(self.pki / "ca.crt"))
        context.load_cert_chain(str(self.pki / "admin.crt"), str(self.pki / "admin.key"))
        return context

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.server + path, data=data, method=method)
        kind = "application/merge-patch+json" if method == "PATCH" else "application/json"
        request.add_header("Content-Type", kind)
        try:
            with urllib.request.urlopen(request, context=self._context(), timeout=30) as response:
                text = response.read().decode()
                return response.status, json.loads(text) if text.startswith(("{", "[")) else text
        except urllib.error.HTTPError as error:
            text = error.read().decode()
            return error.code, json.loads(text) if text.startswith("{") else text

    def create(self, path: str, body: Mapping[str, Any]) -> None:
        status, answer = self.request("POST", path, body)
        if status not in (200, 201, 409):
            raise RuntimeError(f"POST {path}: {status} {answer}")


def has_condition(obj: Mapping[str, Any], kind: str) -> bool:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(c["type"] == kind and c["status"] == "True" for c in conditions)


def wait_for(what: str, check: Any, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except (OSError, urllib.error.URLError, ssl.SSLError):
            pass
        time.sleep(0.5)
    raise RuntimeError(f"{what} not ready within {timeout:.0f} s")


# --------------------------------------------------------------------------- processes


@dataclass
class Lane:
    workdir: Path
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    timings: list[tuple[str, float]] = field(default_factory=list)

    def start(self, name: str, command: Sequence[str], env: Mapping[str, str] | None = None) -> None:
        log = open(self.workdir / f"{name}.log", "wb")  # noqa: SIM115 - lives as long as the process
        self.processes[name] = subprocess.Popen(
            list(command),
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=self.workdir,
            start_new_session=True,
            env={**os.environ, **(env or {})},
        )
        (self.workdir / "pids").open("a").write(f"{name} {self.processes[name].pid}\n")

    def alive(self) -> bool:
        """True, or the error of the first process that exited, with the end of its log."""
        self.check_alive()
        return True

    def check_alive(self) -> None:
        for name, process in self.processes.items():
            if process.poll() is not None:
                tail = (self.workdir / f"{name}.log").read_text(errors="replace")[-2000:]
                raise RuntimeError(f"{name} exited with {process.returncode}:\n{tail}")

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        start = time.monotonic()
        yield
        self.timings.append((name, time.monotonic() - start))
        print(f"lane: {name}: {time.monotonic() - start:.1f} s", flush=True)

    def stop(self) -> None:
        stop_pids(self.workdir)
        self.processes.clear()


def stop_pids(workdir: Path, grace: float = 10.0) -> None:
    """Stop every process the lane recorded: SIGTERM to each process group at once, SIGKILL to
    whatever still runs after `grace` seconds."""
    pids = workdir / "pids"
    if not pids.exists():
        return
    groups = [int(line.split()[1]) for line in pids.read_text().splitlines()]
    for pid in groups:
        with suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(_running(pid) for pid in groups):
        time.sleep(0.2)
    for pid in groups:
        with suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
    pids.unlink()


def _running(pid: int) -> bool:
    with suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def control_plane(lane: Lane) -> Api:
    pki = lane.workdir / "pki"
    make_certs(pki)
    etcd_client, etcd_peer, api_port = free_port(), free_port(), free_port()
    with lane.phase("etcd"):
        lane.start("etcd", [
            str(binary("etcd")), "--name", "lane", "--data-dir", str(lane.workdir / "etcd"),
            "--listen-client-urls", f"http://{LOCALHOST}:{etcd_client}",
            "--advertise-client-urls", f"http://{LOCALHOST}:{etcd_client}",
            "--listen-peer-urls", f"http://{LOCALHOST}:{etcd_peer}",
            "--initial-advertise-peer-urls", f"http://{LOCALHOST}:{etcd_peer}",
            "--initial-cluster", f"lane=http://{LOCALHOST}:{etcd_peer}",
            "--listen-metrics-urls", f"http://{LOCALHOST}:{free_port()}",
        ])  # fmt: skip
        wait_for("etcd", lambda: urllib.request.urlopen(f"http://{LOCALHOST}:{etcd_client}/health").status == 200)
    server = f"https://{LOCALHOST}:{api_port}"
    api = Api(server, pki)
    with lane.phase("kube-apiserver"):
        lane.start("kube-apiserver", [
            str(binary("kube-apiserver")), "--etcd-servers", f"http://{LOCALHOST}:{etcd_client}",
            "--bind-address", LOCALHOST, "--advertise-address", LOCALHOST, "--secure-port", str(api_port),
            "--tls-cert-file", str(pki / "server.crt"), "--tls-private-key-file", str(pki / "server.key"),
            "--client-ca-file", str(pki / "ca.crt"), "--authorization-mode", "Node,RBAC",
            "--service-account-key-file", str(pki / "sa.pub"),
            "--service-account-signing-key-file", str(pki / "sa.key"),
            "--service-account-issuer", "https://kubernetes.default.svc",
            "--service-cluster-ip-range", SERVICE_RANGE,
        ])  # fmt: skip
        wait_for("kube-apiserver", lambda: lane.alive() and api.request("GET", "/readyz")[0] == 200)
    config = lane.workdir / "admin.kubeconfig"
    config.write_text(yaml.safe_dump(kubeconfig(pki, server)))
    with lane.phase("controller-manager and scheduler"):
        lane.start("kube-controller-manager", [
            str(binary("kube-controller-manager")), "--kubeconfig", str(config), "--leader-elect=false",
            "--bind-address", LOCALHOST, "--secure-port", str(free_port()),
            "--service-account-private-key-file", str(pki / "sa.key"), "--root-ca-file", str(pki / "ca.crt"),
            "--cluster-signing-cert-file", str(pki / "ca.crt"), "--cluster-signing-key-file", str(pki / "ca.key"),
            "--use-service-account-credentials",
        ])  # fmt: skip
        lane.start("kube-scheduler", [
            str(binary("kube-scheduler")), "--kubeconfig", str(config), "--leader-elect=false",
            "--bind-address", LOCALHOST, "--secure-port", str(free_port()),
        ])  # fmt: skip
        # The controller-manager creates the default namespace's service account.
        wait_for(
            "the default service account",
            lambda: lane.alive() and api.request("GET", "/api/v1/namespaces/default/serviceaccounts/default")[0] == 200,
        )
    return api


# --------------------------------------------------------------------------- nodes


def node_manifests(run: StackRun) -> list[dict[str, Any]]:
    """One Node per node of each GPU pool of the stack, labelled, tainted and sized as the
    cluster facts describe it (GKE's labels for a GKE pool, the described ones for an existing
    cluster's), with GKE's topology labels where the pool has them."""
    nodes = []
    for pool in ClusterExports.from_plain(run.exports["cluster"]).gpu_pools:
        machine = pool.machine
        flavor = plan_flavor(pool)
        millicores, mib = machine.allocatable
        for i in range(pool.max_nodes):
            name = f"{pool.name}-{i}"
            labels = {**flavor.node_labels, HOSTNAME_LABEL: name, "type": "kwok"}
            if pool.has_topology_labels:
                labels |= {
                    TOPOLOGY_LABELS[TopologyLevel.BLOCK]: "block-0",
                    TOPOLOGY_LABELS[TopologyLevel.SUBBLOCK]: f"subblock-{i // 4}",
                    TOPOLOGY_LABELS[TopologyLevel.HOST]: f"host-{i}",
                }
            capacity = {"cpu": f"{millicores}m", "memory": f"{mib}Mi", GPU_RESOURCE: str(machine.gpus), "pods": "110"}
            nodes.append(
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "metadata": {"name": name, "labels": labels, "annotations": {KWOK_NODE_ANNOTATION: "fake"}},
                    "spec": {"taints": [taint.for_node() for taint in pool.node_taints]},
                    "status": {"capacity": capacity, "allocatable": capacity},
                }
            )
    system = {"cpu": "8", "memory": "32Gi", "pods": "110"}
    nodes.append(
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": "system-0",
                "labels": {
                    "kubernetes.io/os": "linux",
                    "cloud.google.com/gke-nodepool": "system",
                    HOSTNAME_LABEL: "system-0",
                    "type": "kwok",
                },
                "annotations": {KWOK_NODE_ANNOTATION: "fake"},
            },
            "status": {"capacity": system, "allocatable": system},
        }
    )
    return nodes


def kwok_stages(workdir: Path, pods_complete: bool) -> Path:
    """kwok's own "fast" node and pod stages, from its module (nothing of it is committed).
    Without `pods_complete`, a Job's pods stay Running until someone marks them Succeeded."""
    module = Path(os.environ.get("GOMODCACHE", CACHE / "go" / "mod")) / f"sigs.k8s.io/kwok@{_pins()['KWOK_VERSION']}"
    pod_stages = sorted((module / "kustomize/stage/pod/fast").glob("pod-*.yaml"))
    stages = [
        module / "kustomize/stage/node/fast/node-initialize.yaml",
        module / "kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
        *(p for p in pod_stages if pods_complete or p.name != "pod-complete.yaml"),
    ]
    target = workdir / "kwok-stages.yaml"
    target.write_text("\n---\n".join(p.read_text() for p in stages))
    return target


def simulated_nodes(lane: Lane, api: Api, run: StackRun, pods_complete: bool = True) -> int:
    nodes = node_manifests(run)
    with lane.phase(f"kwok and {len(nodes)} nodes"):
        lane.start("kwok", [
            str(binary("kwok")), "--kubeconfig", str(lane.workdir / "admin.kubeconfig"),
            "--manage-all-nodes=false", f"--manage-nodes-with-annotation-selector={KWOK_NODE_ANNOTATION}=fake",
            "--config", str(kwok_stages(lane.workdir, pods_complete)), "--server-address", f"{LOCALHOST}:{free_port()}",
        ])  # fmt: skip
        for node in nodes:
            api.create("/api/v1/nodes", node)

        def all_ready() -> bool:
            lane.check_alive()
            _, listing = api.request("GET", "/api/v1/nodes")
            return sum(has_condition(n, "Ready") for n in listing["items"]) == len(nodes)

        wait_for("the simulated nodes", all_ready)
    return len(nodes)


CONTROLLER_GROUPS = frozenset({"kueue.x-k8s.io", "jobset.x-k8s.io"})


def crd_manifests() -> list[dict[str, Any]]:
    """Every CRD of the pinned Kueue and JobSet modules (tools.crds downloads and checks them)."""
    found = []
    for module in versions.CRD_MODULES:
        if not set(module.groups) & CONTROLLER_GROUPS:
            continue
        for path in sorted((crds.module_dir(module) / module.path).glob("*.yaml")):
            crd = yaml.safe_load(path.read_text())
            if crd["spec"]["group"] in CONTROLLER_GROUPS:
                found.append(crd)
    return found


def install_crds(lane: Lane, api: Api) -> int:
    """The CRDs of the pinned Kueue and JobSet modules, as the program's cache holds them."""
    manifests = crd_manifests()
    with lane.phase(f"{len(manifests)} CRDs"):
        for manifest in manifests:
            api.create("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", manifest)

        def established() -> bool:
            _, listing = api.request("GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions")
            done = {c["metadata"]["name"] for c in listing["items"] if has_condition(c, "Established")}
            return {m["metadata"]["name"] for m in manifests} <= done

        wait_for("the CRDs", established)
    return len(manifests)


# --------------------------------------------------------------------------- controllers

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


def controllers(lane: Lane, api: Api, kueue_config: Mapping[str, Any]) -> None:
    """The JobSet and Kueue managers of the pinned releases, outside the cluster, with their
    webhooks served on loopback; Kueue with the program's own configuration."""
    pki, config = lane.workdir / "pki", str(lane.workdir / "admin.kubeconfig")
    certs = lane.workdir / "webhook-certs"
    _serving_cert(pki, certs)
    ca_bundle = base64.b64encode((pki / "ca.crt").read_bytes()).decode()
    modules = {m.module: m for m in versions.CRD_MODULES}
    with lane.phase("JobSet and Kueue managers"):
        jobset_port, jobset_health = free_port(), f"{LOCALHOST}:{free_port()}"
        jobset_config = lane.workdir / "jobset-config.yaml"
        jobset_config.write_text(yaml.safe_dump({
            "apiVersion": "config.jobset.x-k8s.io/v1alpha1", "kind": "Configuration",
            "leaderElection": {"leaderElect": False}, "internalCertManagement": {"enable": False},
            "webhook": {"port": jobset_port, "host": LOCALHOST, "certDir": str(certs)},
            "metrics": {"bindAddress": f"{LOCALHOST}:{free_port()}", "certDir": str(certs)},
            "health": {"healthProbeBindAddress": jobset_health},
        }))  # fmt: skip
        lane.start("jobset", [str(binary("jobset")), "--config", str(jobset_config), "--kubeconfig", config])
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
            str(binary("kueue")), "--config", str(kueue_config_file), "--kubeconfig", config,
            "--feature-gates=VisibilityOnDemand=false",
        ], env={"KUEUE_METRICS_CERT_DIR": str(metrics_certs)})  # fmt: skip
        for module, prefix, port in (
            ("sigs.k8s.io/jobset", "jobset", jobset_port),
            ("sigs.k8s.io/kueue", "kueue", kueue_port),
        ):
            for manifest in webhook_configurations(crds.module_dir(modules[module]), prefix, port, ca_bundle):
                kind = (
                    "mutatingwebhookconfigurations"
                    if manifest["kind"].startswith("Mutating")
                    else "validatingwebhookconfigurations"
                )
                api.create(f"/apis/admissionregistration.k8s.io/v1/{kind}", manifest)

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


# --------------------------------------------------------------------------- the program's objects

# What the lane applies of a stack's render: the platform's namespace, identities, claims and
# queues, and the runs. The controllers themselves run as processes above.
APPLIED_KINDS = (
    "Namespace", "ServiceAccount", "PersistentVolumeClaim", "ResourceFlavor", "Topology",
    "WorkloadPriorityClass", "ClusterQueue", "LocalQueue", "ConfigMap", "JobSet",
)  # fmt: skip


def _plural(kind: str) -> str:
    lower = kind.lower()
    if lower.endswith("y"):
        return lower[:-1] + "ies"
    return lower + ("es" if lower.endswith("s") else "s")


def api_path(manifest: Mapping[str, Any]) -> str:
    """The collection a manifest is created in."""
    version = manifest["apiVersion"]
    base = f"/api/{version}" if "/" not in version else f"/apis/{version}"
    namespace = manifest["metadata"].get("namespace")
    scope = f"/namespaces/{namespace}" if namespace else ""
    return f"{base}{scope}/{_plural(manifest['kind'])}"


def stack_objects(run: StackRun) -> list[dict[str, Any]]:
    by_kind: dict[str, list[dict[str, Any]]] = {kind: [] for kind in APPLIED_KINDS}
    for resource in run.resources:
        kind = resource.type.rsplit(":", 1)[-1]
        if resource.custom and kind in by_kind:
            by_kind[kind].append(run.manifest(resource))
    return [m for kind in APPLIED_KINDS for m in by_kind[kind]]


def claim_volumes(objects: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """A StorageClass without a provisioner and a volume per claim: the claims bind, so the
    runs' pods can be scheduled on the simulated nodes."""
    claims = [m for m in objects if m["kind"] == "PersistentVolumeClaim"]
    classes = {c["spec"]["storageClassName"] for c in claims}
    found: list[dict[str, Any]] = [
        {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": name},
         "provisioner": "kubernetes.io/no-provisioner", "volumeBindingMode": "Immediate"}
        for name in classes
    ]  # fmt: skip
    for claim in claims:
        found.append({
            "apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": f"{claim['metadata']['namespace']}-{claim['metadata']['name']}"},
            "spec": {
                "capacity": {"storage": claim["spec"]["resources"]["requests"]["storage"]},
                "accessModes": ["ReadWriteMany"], "storageClassName": claim["spec"]["storageClassName"],
                "hostPath": {"path": f"/tmp/lane/{claim['metadata']['name']}"},
                "claimRef": {"namespace": claim["metadata"]["namespace"], "name": claim["metadata"]["name"]},
            },
        })  # fmt: skip
    return found


def jobset_run(api: Api, namespace: str, name: str) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """The Workload and pods of the JobSet now named `name`, matched by its uid, not those of an
    earlier JobSet of the same name; (None, []) while there is no such JobSet."""
    status, jobset = api.request("GET", f"/apis/{JOBSET_API}/namespaces/{namespace}/jobsets/{name}")
    if status != 200:
        return None, []
    uid = jobset["metadata"]["uid"]
    _, workloads = api.request("GET", f"/apis/{KUEUE_API}/namespaces/{namespace}/workloads")
    owned = (w for w in workloads["items"] if any(o["uid"] == uid for o in w["metadata"].get("ownerReferences", [])))
    _, pods = api.request("GET", f"/api/v1/namespaces/{namespace}/pods?labelSelector={JOBSET_UID_LABEL}={uid}")
    return next(owned, None), list(pods["items"])


def placed(api: Api, namespace: str, jobset: str, pods_wanted: int) -> bool:
    """The JobSet's Workload is admitted and every one of its pods is bound to a node."""
    workload, pods = jobset_run(api, namespace, jobset)
    nodes = [p["spec"].get("nodeName") for p in pods]
    return workload is not None and has_condition(workload, "Admitted") and len(nodes) == pods_wanted and all(nodes)


def admit_runs(lane: Lane, api: Api, run: StackRun) -> list[str]:
    """Apply the stack's objects; every run's Workload must be admitted with a topology
    assignment where its flavor has one, and its pods bound to the simulated nodes."""
    objects = stack_objects(run)
    jobsets = [m for m in objects if m["kind"] == "JobSet"]
    with lane.phase(f"{len(objects)} objects of the stack applied"):
        for manifest in [*claim_volumes(objects), *objects]:
            api.create(api_path(manifest), manifest)
    admitted = []
    for jobset in jobsets:
        namespace, name = jobset["metadata"]["namespace"], jobset["metadata"]["name"]
        parallelism = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["parallelism"]
        with lane.phase(f"run {name} admitted and placed"):
            check = functools.partial(placed, api, namespace, name, parallelism)
            wait_for(f"run {name}", lambda check=check: lane.alive() and check(), timeout=180)
        workload, _ = jobset_run(api, namespace, name)
        if workload is None:
            raise RuntimeError(f"run {name}: its Workload is gone")
        assignment = workload["status"]["admission"]["podSetAssignments"][0]
        topology = "with a topology assignment" if assignment.get("topologyAssignment") else "without topology"
        admitted.append(f"{name}: admitted on {assignment['flavors']}, {topology}")
    return admitted


# --------------------------------------------------------------------------- commands


def lane_kueue_config(run: StackRun) -> dict[str, Any]:
    """The Kueue configuration the program gives the Kueue it installs, which a stack with
    `kueue.install: false` expects the cluster's own to have."""
    cfg = stack_config(run.stack)
    return kueue_configuration(kueue_controller_args(cfg, ClusterExports.from_plain(run.exports["cluster"])))


def start(lane: Lane, run: StackRun, *, pods_complete: bool = True) -> Api:
    """The control plane, nodes shaped like the stack's pools, the CRDs and the managers, the
    latter configured as the stack configures Kueue."""
    started = time.monotonic()
    api = control_plane(lane)
    nodes = simulated_nodes(lane, api, run, pods_complete)
    before = controller_api_check(lane)
    count = install_crds(lane, api)
    after = controller_api_check(lane)
    if len(before) != len(CONTROLLER_KINDS) or after:
        raise RuntimeError(f"the program's CRD check: before the CRDs {before}; after {after}")
    print(f"lane: the program's CRD check: {len(before)} kinds refused before the CRDs, none after")
    controllers(lane, api, lane_kueue_config(run))
    print(f"lane: ready in {time.monotonic() - started:.1f} s: {nodes} nodes, {count} CRDs ({lane.workdir})")
    return api


def controller_api_check(lane: Lane) -> list[str]:
    """What the program's check of an existing cluster's Kueue and JobSet says of the lane, read
    with the program's own reader through the lane's kubeconfig."""
    kubeconfig = Kubeconfig(None, str(lane.workdir / "admin.kubeconfig"), "lane")
    return controller_api_problems(read_crds(kubeconfig, crd_names()))


def smoke(stack: str) -> int:
    # The stack is run once under the mocks: its pools shape the nodes, its Kueue settings the
    # controller, its objects are what the lane applies.
    run = run_stack(stack)
    workdir = Path(tempfile.mkdtemp(prefix="nemo-gke-lane-"))
    lane = Lane(workdir)
    try:
        api = start(lane, run)
        for line in admit_runs(lane, api, run):
            print(f"lane: {line}")
        lane.check_alive()
        return 0
    finally:
        lane.stop()
        if not os.environ.get("LANE_KEEP"):
            shutil.rmtree(workdir, ignore_errors=True)


def _interrupted(*_: object) -> None:
    raise KeyboardInterrupt


def up(stack: str, workdir: Path) -> int:
    """Start the lane and hold it (the stack's claims bind to local volumes) until interrupted."""
    run = run_stack(stack)
    workdir.mkdir(parents=True, exist_ok=True)
    lane = Lane(workdir)
    # SIGTERM stops the lane like ^C does: through the `finally` below.
    signal.signal(signal.SIGTERM, _interrupted)
    try:
        api = start(lane, run)
        for manifest in claim_volumes(stack_objects(run)):
            api.create(api_path(manifest), manifest)
        print(f"lane: up; KUBECONFIG={workdir / 'admin.kubeconfig'} (context lane); interrupt to stop", flush=True)
        while True:
            lane.check_alive()
            time.sleep(2)
    except KeyboardInterrupt:
        return 0
    finally:
        lane.stop()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.lane", description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["smoke", "up", "down"])
    parser.add_argument("--stack", default="existing", help="stack whose GPU pools the nodes imitate")
    parser.add_argument("--dir", type=Path, help="down: the work directory of a lane")
    args = parser.parse_args(argv)
    if args.command in ("up", "down") and args.dir is None:
        parser.error(f"{args.command} needs --dir")
    if args.command == "down":
        stop_pids(args.dir)
        return 0
    if args.command == "up":
        return up(args.stack, args.dir)
    return smoke(args.stack)


if __name__ == "__main__":
    sys.exit(main())
