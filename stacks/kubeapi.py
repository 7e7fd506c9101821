"""Read CustomResourceDefinitions and the objects of the stack's names from a cluster the program
did not create, before anything is registered: the kubeconfig's cluster, CA and credentials, as
kubectl would use them.

Credentials: client certificates, bearer tokens (`token`, `tokenFile`) and exec plugins
(client.authentication.k8s.io ExecCredential: gke-gcloud-auth-plugin, `oci ce cluster
generate-token`, `aws eks get-token`). The legacy `auth-provider` entries are not supported.
"""

from __future__ import annotations

import base64
import json
import os
import ssl
import subprocess
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from planners.ownership import ObjectRef

CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"
TIMEOUT_S = 20


@dataclass(frozen=True)
class Kubeconfig:
    """Where a kubeconfig is: its contents, or a file (relative paths inside it are read
    against the file's folder, as kubectl reads them); and the context to use."""

    contents: str | None
    path: str | None
    context: str | None


# What a reader returns: each CRD name mapped to the CRD, or to None where the cluster has none.
CrdReader = Callable[[Kubeconfig, Sequence[str]], dict[str, Any]]


class ClusterUnreadable(Exception):
    """The cluster could not be asked: one line saying why. `key` is the existingCluster key at
    fault, where one is."""

    def __init__(self, message: str, key: str = "") -> None:
        super().__init__(message)
        self.key = key


def _named(entries: Sequence[Mapping[str, Any]] | None, name: str | None, what: str) -> Mapping[str, Any]:
    for entry in entries or ():
        if entry.get("name") == name:
            return entry
    raise ClusterUnreadable(f"the kubeconfig has no {what} {name!r}")


def _file(base: Path | None, path: str) -> str:
    """A path of the kubeconfig, relative to the kubeconfig's folder as kubectl reads it."""
    expanded = Path(os.path.expanduser(path))
    return str(expanded if expanded.is_absolute() or base is None else base / expanded)


def _exec_credential(spec: Mapping[str, Any], base: Path | None) -> Mapping[str, Any]:
    info = {"apiVersion": spec.get("apiVersion", ""), "kind": "ExecCredential", "spec": {"interactive": False}}
    env = {**os.environ, "KUBERNETES_EXEC_INFO": json.dumps(info)}
    env.update({e["name"]: e["value"] for e in spec.get("env") or ()})
    command = [spec["command"], *(spec.get("args") or ())]
    try:
        done = subprocess.run(command, env=env, cwd=base, capture_output=True, text=True, check=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as error:
        raise ClusterUnreadable(f"the kubeconfig's credential plugin {spec['command']!r} failed: {error}") from None
    status: Mapping[str, Any] = json.loads(done.stdout).get("status", {})
    return status


class _Client:
    def __init__(self, kubeconfig: str, context: str | None, base: Path | None) -> None:
        try:
            config = yaml.safe_load(kubeconfig) or {}
        except yaml.YAMLError as error:
            raise ClusterUnreadable(f"the kubeconfig is not YAML: {error}") from None
        name = context or config.get("current-context")
        chosen = _named(config.get("contexts"), name, "context")["context"]
        cluster = _named(config.get("clusters"), chosen.get("cluster"), "cluster")["cluster"]
        user = _named(config.get("users"), chosen["user"], "user")["user"] if chosen.get("user") else {}
        self.headers: dict[str, str] = {"Accept": "application/json"}
        self._folder = tempfile.TemporaryDirectory(prefix="nemo-gke-kubeconfig-")
        try:
            self.server = str(cluster["server"]).rstrip("/")
            problem = _url_problem(self.server)
            if problem:
                raise ValueError(problem)
            self.context = self._tls(cluster, user, base)
        except (KeyError, ValueError, OSError) as error:
            self.close()
            raise ClusterUnreadable(f"context {name!r} of the kubeconfig cannot be used: {error!r}") from None

    def _tls(self, cluster: Mapping[str, Any], user: Mapping[str, Any], base: Path | None) -> ssl.SSLContext:
        if cluster.get("insecure-skip-tls-verify"):
            context = ssl.create_default_context()
            context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
        elif "certificate-authority-data" in cluster:
            ca = base64.b64decode(cluster["certificate-authority-data"]).decode()
            context = ssl.create_default_context(cadata=ca)
        elif "certificate-authority" in cluster:
            context = ssl.create_default_context(cafile=_file(base, cluster["certificate-authority"]))
        else:
            context = ssl.create_default_context()
        if "auth-provider" in user:
            raise ClusterUnreadable("the kubeconfig's user has an auth-provider, which is not supported: use exec")
        credential: Mapping[str, Any] = dict(user)
        if "exec" in user:
            status = _exec_credential(user["exec"], base)
            credential = {
                "token": status.get("token"),
                "client-certificate-data": _b64(status.get("clientCertificateData")),
                "client-key-data": _b64(status.get("clientKeyData")),
            }
        token = credential.get("token") or (
            Path(_file(base, credential["tokenFile"])).read_text().strip() if credential.get("tokenFile") else None
        )
        if token:
            self.headers["Authorization"] = f"Bearer {token}"
        certificate = self._pem(credential, "client-certificate", base)
        key = self._pem(credential, "client-key", base)
        if certificate and key:
            context.load_cert_chain(certificate, key)
        return context

    def _pem(self, user: Mapping[str, Any], name: str, base: Path | None) -> str | None:
        if user.get(f"{name}-data"):
            path = Path(self._folder.name) / name
            path.write_bytes(base64.b64decode(user[f"{name}-data"]))
            return str(path)
        return _file(base, user[name]) if user.get(name) else None

    def close(self) -> None:
        """Remove the credentials written for the TLS context."""
        self._folder.cleanup()

    def get(self, path: str) -> Any:
        request = urllib.request.Request(self.server + path, headers=self.headers)
        try:
            with urllib.request.urlopen(request, context=self.context, timeout=TIMEOUT_S) as response:
                return json.loads(response.read())
        except json.JSONDecodeError:
            raise ClusterUnreadable(
                f"GET {self.server}{path}: the answer is not JSON, so not a Kubernetes API"
            ) from None
        except urllib.error.HTTPError as error:
            if error.code == 404:
                return None
            raise ClusterUnreadable(f"GET {self.server}{path}: {error.code} {error.reason}") from None
        except (OSError, ssl.SSLError) as error:
            raise ClusterUnreadable(f"cannot reach {self.server}: {error}") from None


# Fields of a kubeconfig user that hold a credential outright (client.authentication / clientcmd
# api v1 AuthInfo): stored in a stack file, they belong in an encrypted value.
CREDENTIAL_FIELDS = ("token", "client-key-data", "password")


# Reads the kubeconfig a stack names: its text, or ClusterUnreadable naming the key at fault. The
# render stands in for the machine's file.
KubeconfigReader = Callable[[Kubeconfig], str]


def read_kubeconfig(kubeconfig: Kubeconfig) -> str:
    """The kubeconfig's text: the contents given, or the file (`~` expanded, as kubectl does)."""
    if kubeconfig.contents is not None:
        return kubeconfig.contents
    path = Path(os.path.expanduser(str(kubeconfig.path)))
    if not path.exists():
        raise ClusterUnreadable(f"{path} does not exist on the machine running Pulumi", "kubeconfigPath")
    if not path.is_file():
        raise ClusterUnreadable(f"{path} is not a file", "kubeconfigPath")
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError) as error:
        raise ClusterUnreadable(f"{path} cannot be read: {error}", "kubeconfigPath") from None


def kubeconfig_problem(text: str, context: str | None) -> tuple[str, str] | None:
    """(the key at fault: "context" or "", why) where `text` is no kubeconfig kubectl could use with
    `context` (default: its current context); None where it is one."""
    try:
        config = yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        return "", f"is not YAML{where}: {getattr(error, 'problem', None) or error}"
    if not isinstance(config, dict) or not isinstance(config.get("clusters"), list):
        return "", "is not a kubeconfig: it has no `clusters` list, as `kubectl config view --raw` writes"
    name = context or config.get("current-context")
    if not name:
        return "context", "is required: the kubeconfig names no current-context"
    try:
        chosen = _named(config.get("contexts"), name, "context").get("context") or {}
    except ClusterUnreadable as error:
        return "context" if context else "", str(error)
    try:
        cluster = _named(config.get("clusters"), chosen.get("cluster"), "cluster").get("cluster") or {}
    except ClusterUnreadable as error:
        return "", f"context {name!r}: {error}"
    server = cluster.get("server")
    problem = _url_problem(str(server)) if server else "its cluster has no server"
    return None if problem is None else ("", f"context {name!r}: {problem}")


def _url_problem(server: str) -> str | None:
    """Why a kubeconfig's server is not one a client can reach (kubectl takes http(s) URLs)."""
    address = urllib.parse.urlsplit(server)
    if address.scheme in ("https", "http") and address.hostname:
        return None
    return f"its cluster's server {server!r} is not an https:// URL"


def kubeconfig_credentials(text: str) -> list[str]:
    """Where `text` holds a credential outright (`users[0].user.token`, ...)."""
    try:
        config = yaml.safe_load(text)
    except yaml.YAMLError:
        return []
    users = config.get("users") if isinstance(config, dict) else None
    return [
        f"users[{i}].user.{field}"
        for i, entry in enumerate(users if isinstance(users, list) else [])
        for field in CREDENTIAL_FIELDS
        if isinstance(entry, dict) and isinstance(entry.get("user"), dict) and entry["user"].get(field)
    ]


def _b64(pem: str | None) -> str | None:
    return base64.b64encode(pem.encode()).decode() if pem else None


@contextmanager
def connected(kubeconfig: Kubeconfig) -> Iterator[Callable[[str], Any]]:
    """A GET of API paths (None where the cluster has none), through one client: the kubeconfig
    is read, and an exec plugin run, once for every request made with it."""
    text = read_kubeconfig(kubeconfig)
    base = None if kubeconfig.contents is not None else Path(os.path.expanduser(str(kubeconfig.path))).parent
    client = _Client(text, kubeconfig.context, base)
    try:
        yield client.get
    finally:
        client.close()


def read_crds(kubeconfig: Kubeconfig, names: Sequence[str]) -> dict[str, Any]:
    """Each CRD of `names` as the cluster returns it, or None where it has none."""
    with connected(kubeconfig) as get:
        return {name: get(CRD_PATH + name) for name in names}


def read_objects(kubeconfig: Kubeconfig, paths: Sequence[str]) -> dict[str, Any]:
    """Each API path (an object or a list) as the cluster returns it, or None where it has none."""
    with connected(kubeconfig) as get:
        return {path: get(path) for path in paths}


# What an object reader returns: each object mapped to the object as the cluster returns it, or to
# None where the cluster has none.
ObjectReader = Callable[[Kubeconfig, Sequence[ObjectRef]], dict[ObjectRef, Any]]


def _api_root(api_version: str) -> str:
    return f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"


def read_live(kubeconfig: Kubeconfig, refs: Sequence[ObjectRef]) -> dict[ObjectRef, Any]:
    """Each object of `refs` as the cluster returns it, or None where it has none (or does not
    serve its kind yet: a CRD the stack installs); a ref without a name, the list of its kind.
    The resource's path comes from the API's discovery document, as kubectl finds it."""
    found: dict[ObjectRef, Any] = {}
    with connected(kubeconfig) as get:
        for api_version in sorted({ref.api_version for ref in refs}):
            root = _api_root(api_version)
            served = get(root) or {}
            resources = {r["kind"]: r for r in served.get("resources", ()) if "/" not in r["name"]}
            for ref in (r for r in refs if r.api_version == api_version):
                resource = resources.get(ref.kind)
                if resource is None or bool(resource.get("namespaced")) != (ref.namespace is not None):
                    found[ref] = None  # not served, or not where the program puts it
                    continue
                where = f"/namespaces/{ref.namespace}" if ref.namespace else ""
                found[ref] = get(f"{root}{where}/{resource['name']}" + (f"/{ref.name}" if ref.name else ""))
    return found


def kubeconfig_endpoint(text: str, context: str | None = None) -> tuple[str, str]:
    """The API server and CA (base64 PEM, empty where the kubeconfig trusts the system's roots) of a
    kubeconfig's context: what another cluster's client needs to reach this one."""
    config = yaml.safe_load(text) or {}
    name = context or config.get("current-context")
    chosen = _named(config.get("contexts"), name, "context")["context"]
    cluster = _named(config.get("clusters"), chosen.get("cluster"), "cluster")["cluster"]
    ca = cluster.get("certificate-authority-data", "")
    if not ca and cluster.get("certificate-authority"):
        ca = base64.b64encode(Path(os.path.expanduser(cluster["certificate-authority"])).read_bytes()).decode()
    return str(cluster["server"]), str(ca)
