"""The lane's control plane: etcd and the Kubernetes API server on loopback, from the binaries
`integration/build-tools.sh` builds (cached by version), its certificates, a small API client and
the processes, each stopped by its process id."""

from __future__ import annotations

import base64
import json
import os
import random
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from facts.kubernetes import JOBSET_API, JOBSET_CONTROLLER_ACCOUNT, JOBSET_NAMESPACE, KUEUE_API, service_account_user

ROOT = Path(__file__).resolve().parent.parent
CACHE = Path(os.environ.get("NEMO_GKE_CACHE", Path.home() / ".cache" / "nemo-gke"))
BIN = CACHE / "integration" / "bin"
LOCALHOST = "127.0.0.1"
SERVICE_RANGE = "10.96.0.0/16"
KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"


def lane_pins() -> dict[str, str]:
    """The versions integration/versions.sh pins, by name."""
    text = (ROOT / "integration" / "versions.sh").read_text()
    return dict(line.split("=", 1) for line in text.splitlines() if line and not line.startswith("#"))


def lane_binary_versions() -> dict[str, str]:
    """The version each binary `integration/build-tools.sh` builds is named after (the Kubernetes
    binaries: KUBERNETES_VERSION); the lane's Kueue carries its patch in its name."""
    pins = lane_pins()
    return {
        "etcd": pins["ETCD_VERSION"],
        "kwok": pins["KWOK_VERSION"],
        "kueue": f"{pins['KUEUE_VERSION']}+{pins['KUEUE_LANE_PATCH']}",
        "jobset": pins["JOBSET_VERSION"],
        "pulumi-config": pins["PULUMI_SDK_VERSION"],
    }


def binary(name: str, version: str | None = None) -> Path:
    """The tool's binary at the lane's version of it, or at `version` (its file name's version)."""
    version = version or lane_binary_versions().get(name, lane_pins()["KUBERNETES_VERSION"])
    path = BIN / f"{name}-{version}"
    if not path.exists():
        raise SystemExit(f"{path} is missing: run `make integration-tools` first")
    return path


# The lane's processes listen below the kernel's ephemeral range: a port that the kernel picked,
# bound and released there may become the local end of any outgoing connection before the process
# binds it (Kueue exited with "bind: address already in use" in 1 of 2 lanes so started).
_EPHEMERAL_PORTS = Path("/proc/sys/net/ipv4/ip_local_port_range")
_ISSUED_PORTS: set[int] = set()


def free_port() -> int:
    """A port no process listens on and the lane has not handed out, outside the ephemeral range."""
    first_ephemeral = int(_EPHEMERAL_PORTS.read_text().split()[0]) if _EPHEMERAL_PORTS.exists() else 32768
    for port in random.sample(range(first_ephemeral // 2, first_ephemeral), 100):
        if port in _ISSUED_PORTS:
            continue
        with socket.socket() as s:
            try:
                s.bind((LOCALHOST, port))
            except OSError:
                continue
        _ISSUED_PORTS.add(port)
        return port
    raise RuntimeError(f"no free port below {first_ephemeral} on {LOCALHOST}")


# --------------------------------------------------------------------------- certificates


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


# Who the JobSet controller is to the API server where its chart installs it: what a team's admission
# policy trusts to create Jobs that name no queue (components.teams). The lane's JobSet manager
# connects as that user (group system:masters, as the lane's admin).
JOBSET_CONTROLLER_USER = service_account_user(JOBSET_NAMESPACE, JOBSET_CONTROLLER_ACCOUNT)


def make_certs(pki: Path) -> None:
    """A CA, the API server's serving certificate for 127.0.0.1, an admin client certificate
    (group system:masters), the JobSet controller's, and the service-account signing key."""
    pki.mkdir(parents=True, exist_ok=True)
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=lane-ca",
             "-keyout", "ca.key", "-out", "ca.crt", cwd=pki)  # fmt: skip
    for name, subject, extension in (
        ("server", "/CN=kube-apiserver", "subjectAltName=IP:127.0.0.1,DNS:localhost"),
        ("admin", "/O=system:masters/CN=admin", "extendedKeyUsage=clientAuth"),
        ("jobset", f"/O=system:masters/CN={JOBSET_CONTROLLER_USER}", "extendedKeyUsage=clientAuth"),
    ):
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", subject, "-keyout", f"{name}.key",
                 "-out", f"{name}.csr", cwd=pki)  # fmt: skip
        (pki / f"{name}.ext").write_text(extension + "\n")
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
                 "-days", "2", "-extfile", f"{name}.ext", "-out", f"{name}.crt", cwd=pki)  # fmt: skip
    _openssl("genrsa", "-out", "sa.key", "2048", cwd=pki)
    _openssl("rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=pki)


def kubeconfig(pki: Path, server: str, user: str = "admin") -> dict[str, Any]:
    """A kubeconfig of the lane for the client certificate `user` (admin, jobset)."""

    def data(name: str) -> str:
        return base64.b64encode((pki / name).read_bytes()).decode()

    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "lane", "cluster": {"server": server, "certificate-authority-data": data("ca.crt")}}],
        "users": [
            {
                "name": user,
                "user": {"client-certificate-data": data(f"{user}.crt"), "client-key-data": data(f"{user}.key")},
            }
        ],
        "contexts": [{"name": "lane", "context": {"cluster": "lane", "user": user}}],
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

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        kind: str | None = None,
        *,
        as_user: tuple[str, str] | None = None,
    ) -> tuple[int, Any]:
        """The API server's status and answer. `as_user`: as that (user, group), impersonated by the
        admin (the API server adds system:authenticated)."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.server + path, data=data, method=method)
        kind = kind or ("application/merge-patch+json" if method == "PATCH" else "application/json")
        request.add_header("Content-Type", kind)
        if as_user is not None:
            request.add_header("Impersonate-User", as_user[0])
            request.add_header("Impersonate-Group", as_user[1])
        try:
            with urllib.request.urlopen(request, context=self._context(), timeout=30) as response:
                text = response.read().decode()
                return response.status, json.loads(text) if text.startswith(("{", "[")) else text
        except urllib.error.HTTPError as error:
            text = error.read().decode()
            return error.code, json.loads(text) if text.startswith("{") else text

    def allowed(
        self, user: str, groups: Sequence[str], verb: str, resource: str, *, namespace: str, group: str = ""
    ) -> bool:
        """Whether the API server's authorizer (RBAC) lets the user do it: a SubjectAccessReview."""
        review = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {
                "user": user,
                "groups": list(groups),
                "resourceAttributes": {"verb": verb, "resource": resource, "namespace": namespace, "group": group},
            },
        }
        status, answer = self.request("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", review)
        if status != 201:
            raise RuntimeError(f"SubjectAccessReview: {status} {answer}")
        return bool(answer["status"]["allowed"])

    def apply(self, path: str, body: Mapping[str, Any], manager: str) -> tuple[int, Any]:
        """A server-side apply of the object at `path` by field manager `manager`, conflicts not
        forced, as pulumi-kubernetes creates (provider/pkg/await/await.go `patchForce`)."""
        return self.request("PATCH", f"{path}?fieldManager={manager}", body, "application/apply-patch+yaml")

    def create(self, path: str, body: Mapping[str, Any]) -> None:
        status, answer = self.request("POST", path, body)
        if status not in (200, 201, 409):
            raise RuntimeError(f"POST {path}: {status} {answer}")


def has_condition(obj: Mapping[str, Any], kind: str) -> bool:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(c["type"] == kind and c["status"] == "True" for c in conditions)


def wait_for(what: str, check: Any, timeout: float = 120.0, describe: Callable[[], str] | None = None) -> None:
    """Wait until `check()` holds; past `timeout`, fail with what `describe()` says of the state,
    in the error itself, which a CI log keeps where it cuts the lane's report."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except (OSError, urllib.error.URLError, ssl.SSLError):
            pass
        time.sleep(0.5)
    state = ""
    if describe is not None:
        try:
            state = f": {describe()}"
        except Exception as error:  # a report of a failure must not fail itself
            state = f" (its state not read: {error})"
    raise RuntimeError(f"{what} not ready within {timeout:.0f} s{state}")


# --------------------------------------------------------------------------- processes


def _conditions(item: Mapping[str, Any]) -> str:
    held = [c for c in item.get("status", {}).get("conditions") or () if c.get("status") == "True"]
    return ", ".join(f"{c['type']}({c.get('reason', '')})" for c in held) or "no condition"


def _named(item: Mapping[str, Any]) -> str:
    meta = item.get("metadata", {})
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}".lstrip("/")


# What a failed test's report shows of a lane's cluster: each list, and one line per object.
_STATE: tuple[tuple[str, str, Any], ...] = (
    ("nodes", "/api/v1/nodes", lambda n: (
        f"{_named(n)} {_conditions(n)} unschedulable={n['spec'].get('unschedulable', False)} "
        f"taints={[t['key'] for t in n['spec'].get('taints') or ()]}"
    )),
    ("workloads", f"/apis/{KUEUE_API}/workloads", lambda w: f"{_named(w)} {_conditions(w)}"),
    ("jobsets", f"/apis/{JOBSET_API}/jobsets", lambda j: (
        f"{_named(j)} suspend={j['spec'].get('suspend')} {_conditions(j)}"
    )),
    ("pods", "/api/v1/pods", lambda p: (
        f"{_named(p)} {p.get('status', {}).get('phase')} on {p['spec'].get('nodeName') or 'no node'}"
    )),
    ("events", "/api/v1/events", lambda e: (
        f"{e['involvedObject'].get('kind')}/{e['involvedObject'].get('name')} {e.get('reason')}: "
        f"{str(e.get('message', ''))[:160]}"
    )),
)  # fmt: skip

# The lanes whose processes run now, for the report of a test that fails (tests/integration/conftest.py).
RUNNING: list[Lane] = []


@dataclass
class Lane:
    workdir: Path
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    timings: list[tuple[str, float]] = field(default_factory=list)
    # Its API server, once control_plane() has started it.
    api: Api | None = None

    def __post_init__(self) -> None:
        RUNNING.append(self)

    def state(self, last: int = 25) -> str:
        """What the lane's cluster and controllers were doing: the last `last` nodes, workloads,
        JobSets, pods and events, and the end of each process's log."""
        lines = [f"lane {self.workdir}:"]
        for title, path, describe in _STATE if self.api is not None else ():
            try:
                _, found = self.api.request("GET", path)  # type: ignore[union-attr]
                items = list(found.get("items") or ()) if isinstance(found, dict) else []
                lines.append(f"  {title} ({len(items)}):")
                lines += [f"    {describe(item)}" for item in items[-last:]]
            except Exception as error:  # a report of a failure must not fail itself
                lines.append(f"  {title}: not read ({error})")
        for name in self.processes:
            log = (self.workdir / f"{name}.log").read_text(errors="replace").splitlines()[-last:]
            lines.append(f"  {name}.log, its last {len(log)} lines:")
            lines += [f"    {line[:300]}" for line in log]
        return "\n".join(lines)

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
        if self in RUNNING:
            RUNNING.remove(self)

    def stop_process(self, name: str, grace: float = 10.0) -> None:
        """Stop one process as `stop` does (SIGTERM, SIGKILL after `grace` seconds), as a
        Deployment's rollout stops its old pod."""
        process = self.processes.pop(name)
        with suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


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
    pids.unlink(missing_ok=True)  # `down` and the `up` it stops may both get here


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
    api = lane.api = Api(server, pki)
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
    (lane.workdir / "jobset.kubeconfig").write_text(yaml.safe_dump(kubeconfig(pki, server, "jobset")))
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
