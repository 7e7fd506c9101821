"""An existing cluster's Kueue and JobSet, read from their CRDs before anything is registered.
`kueue.install: false`: the program stops with one line per kind the cluster cannot take: no CRD,
the version not served, or a field the program sets unknown to the schema (the API server would
prune it silently: Kubernetes docs, CustomResourceDefinitions, "Field pruning"). `true`: one line
per controller the cluster already runs that this stack did not install."""

from __future__ import annotations

import copy
import http.server
import json
import sys
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from config.loader import ConfigError
from facts.controller_api import CONTROLLER_KINDS, JOB_POD_TEMPLATE
from facts.kubernetes import STACK_ANNOTATION
from harness.runner import StackFailed, crd_reader, pinned_crds, run_stack, stack_names, stack_with
from planners.controller_api import controller_api_problems, schema_knows
from stacks import installed
from stacks.kubeapi import ClusterUnreadable, Kubeconfig, read_crds

CLUSTER_QUEUES = "clusterqueues.kueue.x-k8s.io"
FLAVORS = "resourceflavors.kueue.x-k8s.io"
DECLARED = stack_with("existing", kueue={"install": False})


def field_paths(value: Any, schema: Mapping[str, Any], prefix: str = "") -> set[str]:
    """The schema paths an object sets, a map (additionalProperties) or the Job's pod template
    ending its path, as facts.controller_api writes them."""
    if prefix == JOB_POD_TEMPLATE or "additionalProperties" in schema or not isinstance(value, dict | list):
        return {prefix}
    if isinstance(value, list):
        return set().union(*(field_paths(item, schema.get("items", {}), prefix + "[]") for item in value))
    properties = schema.get("properties", {})
    return set().union(
        *(field_paths(v, properties.get(k, {}), f"{prefix}.{k}" if prefix else k) for k, v in value.items())
    )


def test_the_fields_are_those_the_shipped_stacks_set(render: Any) -> None:
    """Every field any shipped stack sets in a Kueue or JobSet object is checked on the cluster,
    and nothing else is: the list cannot drift from the program."""
    emitted: dict[str, set[str]] = {kind.kind: set() for kind in CONTROLLER_KINDS}
    schemas = {
        kind.kind: installed.record(kind.module)["schemas"][f"{kind.api} {kind.kind}"] for kind in CONTROLLER_KINDS
    }
    for stack in stack_names():
        run = render(stack)
        for resource in run.kubernetes_objects:
            manifest = run.manifest(resource)
            if manifest.get("kind") in emitted:
                body = {k: v for k, v in manifest.items() if k not in ("apiVersion", "kind", "metadata")}
                emitted[manifest["kind"]] |= field_paths(body, schemas[manifest["kind"]])
    assert emitted == {kind.kind: set(kind.fields) for kind in CONTROLLER_KINDS}


def test_the_pinned_releases_take_every_field() -> None:
    assert controller_api_problems(pinned_crds()) == []


def test_a_cluster_without_kueue_is_refused_per_kind() -> None:
    crds = {name: crd for name, crd in pinned_crds().items() if not name.endswith("kueue.x-k8s.io")}
    problems = controller_api_problems(crds)
    assert len(problems) == len([k for k in CONTROLLER_KINDS if k.group == "kueue.x-k8s.io"])
    assert problems[0] == (
        "the cluster has no CRD resourceflavors.kueue.x-k8s.io (ResourceFlavor): install Kueue v0.19.2 or later, "
        "or let the program install it (kueue.install: true)"
    )


def test_a_kueue_before_v1beta2_is_refused() -> None:
    """Kueue before 0.15 serves v1beta1 only (kueue CHANGELOG-0.15: v1beta2 exposed for serving)."""
    crds = pinned_crds()
    crds[CLUSTER_QUEUES]["spec"]["versions"][0]["name"] = "v1beta1"
    assert controller_api_problems(crds) == [
        "clusterqueues.kueue.x-k8s.io serves v1beta1, not v1beta2: install Kueue v0.19.2 or later, "
        "or let the program install it (kueue.install: true)"
    ]
    crds[CLUSTER_QUEUES]["spec"]["versions"][0].update(name="v1beta2", served=False)
    assert "serves no version, not v1beta2" in controller_api_problems(crds)[0]


def test_a_schema_without_a_field_the_program_sets_is_refused() -> None:
    """A Kueue whose ResourceFlavor has no topologyName would prune it: the run would queue with
    no topology-aware placement, and nothing would say so."""
    crds = copy.deepcopy(pinned_crds())
    schema = crds[FLAVORS]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    del schema["properties"]["spec"]["properties"]["topologyName"]
    (problem,) = controller_api_problems(crds)
    assert problem.startswith(
        "resourceflavors.kueue.x-k8s.io v1beta2 lacks spec.topologyName, which this program sets: "
        "the cluster's release is older than Kueue v0.19.2"
    )


def test_a_subtree_that_keeps_unknown_fields_knows_them() -> None:
    schema = {"properties": {"spec": {"x-kubernetes-preserve-unknown-fields": True}}}
    assert schema_knows(schema, "spec.anything[].deeper")
    assert not schema_knows({"properties": {"spec": {"properties": {}}}}, "spec.anything")
    listed = {"properties": {"spec": {"properties": {"levels": {"items": {"properties": {"nodeLabel": {}}}}}}}}
    assert schema_knows(listed, "spec.levels[].nodeLabel")
    assert not schema_knows(listed, "spec.levels[].other")


def refused(crds: Mapping[str, Any], values: Mapping[str, Any] = DECLARED) -> ConfigError:
    with pytest.raises(StackFailed) as failure:
        run_stack("existing", values=values, read_crds=crd_reader(crds))
    assert isinstance(failure.value.error, ConfigError), failure.value.error
    assert failure.value.resources == [], [r.urn for r in failure.value.resources]
    return failure.value.error


def test_the_program_stops_before_registering_anything() -> None:
    crds = {name: crd for name, crd in pinned_crds().items() if name != CLUSTER_QUEUES}
    error = refused(crds)
    assert [str(issue) for issue in error.issues] == [
        "nemo-gke:kueue.install = false: the cluster has no CRD clusterqueues.kueue.x-k8s.io (ClusterQueue): "
        "install Kueue v0.19.2 or later, or let the program install it (kueue.install: true)"
    ]


INSTALLING = stack_with("existing", kueue={"install": True})


def _annotated(crds: dict[str, Any], name: str, annotations: Mapping[str, str]) -> dict[str, Any]:
    crds = copy.deepcopy(crds)
    crds[name]["metadata"]["annotations"] = dict(annotations)
    return crds


def test_an_empty_cluster_gets_the_pinned_releases() -> None:
    run = run_stack("existing", values=INSTALLING, read_crds=crd_reader({}))
    assert len(run.of_type("kubernetes:helm.sh/v3:Release")) == 2


def test_kueue_and_jobset_already_installed_are_refused_with_the_fix() -> None:
    """A cluster-toolkit or xpk cluster (both apply Kueue's and JobSet's release manifests with
    kubectl): pulumi-kubernetes 4.29+ creates with a client-side create that fails with
    AlreadyExists (pulumi/pulumi-kubernetes#4278), so `up` would stop half-way. Refused at
    preview, nothing registered, with the one command that uses the cluster's own."""
    error = refused(pinned_crds(), INSTALLING)
    assert [(issue.key, issue.value) for issue in error.issues] == [("kueue.install", True)] * 2
    jobset, kueue = (str(issue) for issue in error.issues)
    assert jobset.startswith(
        "nemo-gke:kueue.install = true: the cluster already runs JobSet (its CRD jobsets.jobset.x-k8s.io was "
        "installed with kubectl or another tool), which this stack would create again and fail with AlreadyExists"
    )
    assert "(its CRD resourceflavors.kueue.x-k8s.io was installed with kubectl" in kueue
    assert kueue.endswith(
        "`pulumi config set --path nemo-gke:kueue.install false` (its API is then checked before "
        "anything is created), or remove it"
    )


def test_a_kueue_from_helm_says_which_release() -> None:
    crds = {name: crd for name, crd in pinned_crds().items() if name.endswith("kueue.x-k8s.io")}
    helm = {"meta.helm.sh/release-name": "kueue", "meta.helm.sh/release-namespace": "kueue-system"}
    (issue,) = refused(_annotated(crds, FLAVORS, helm), INSTALLING).issues
    assert "Kueue (its CRD resourceflavors.kueue.x-k8s.io was installed by the Helm release kueue in kueue-system)" in (
        str(issue)
    )


def test_another_stacks_jobset_is_not_adopted() -> None:
    crds = _annotated(pinned_crds(), "jobsets.jobset.x-k8s.io", {STACK_ANNOTATION: "organization/nemo-gke/team-b"})
    issues = [str(issue) for issue in refused(crds, INSTALLING).issues]
    assert "was installed by the Pulumi stack organization/nemo-gke/team-b)" in issues[0]


def test_what_this_stack_installed_is_its_own_on_the_next_up() -> None:
    """The JobSet CRD the program applies carries the stack's identity, and a cluster whose JobSet
    CRD carries it (this stack's earlier `up`) is taken as the stack's own."""
    run = run_stack("existing", values=INSTALLING, read_crds=crd_reader({}))
    (crd,) = run.of_type("kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition")
    identity = "organization/nemo-gke/existing"
    assert run.manifest(crd)["metadata"]["annotations"][STACK_ANNOTATION] == identity
    again = run_stack(
        "existing",
        values=INSTALLING,
        read_crds=crd_reader(_annotated(pinned_crds(), "jobsets.jobset.x-k8s.io", {STACK_ANNOTATION: identity})),
    )
    assert len(again.of_type("kubernetes:helm.sh/v3:Release")) == 2


@pytest.mark.parametrize("stack", ["existing", "existing-oke"])
def test_the_shipped_existing_examples_use_the_clusters_kueue(stack: str) -> None:
    """Clusters from cluster-toolkit, xpk and oci-hpc-oke run Kueue and JobSet already: the shipped
    examples take them as found."""
    run = run_stack(stack, read_crds=crd_reader(pinned_crds()))
    assert not run.of_type("kubernetes:helm.sh/v3:Release")


def test_an_unreadable_kubeconfig_names_its_key(tmp_path: Path) -> None:
    values = stack_with(
        "existing",
        kueue={"install": False},
        existingCluster={**DECLARED["nemo-gke:existingCluster"], "kubeconfigPath": str(tmp_path / "absent")},
    )
    with pytest.raises(StackFailed) as failure:
        run_stack("existing", values=values, read_crds=read_crds)
    (issue,) = failure.value.error.issues  # type: ignore[attr-defined]
    assert issue.key == "existingCluster.kubeconfigPath"
    assert "does not exist on the machine running Pulumi" in issue.message and failure.value.resources == []


# --------------------------------------------------------------------------- the reader


@pytest.fixture
def api_server() -> Iterator[tuple[str, list[dict[str, str]]]]:
    """A plain-HTTP stand-in for the API server that knows one CRD and records the headers."""
    seen: list[dict[str, str]] = []
    crd = pinned_crds()[CLUSTER_QUEUES]

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(dict(self.headers))
            found = self.path.endswith("/" + CLUSTER_QUEUES)
            body = json.dumps(crd if found else {"kind": "Status", "code": 404}).encode()
            self.send_response(200 if found else 404)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()


def kubeconfig(server: str, user: Mapping[str, Any]) -> str:
    return yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "a",
        "clusters": [{"name": "c", "cluster": {"server": server}}],
        "users": [{"name": "u", "user": dict(user)}],
        "contexts": [{"name": "a", "context": {"cluster": "c", "user": "u"}}],
    })  # fmt: skip


def test_the_reader_answers_each_crd_or_none(api_server: tuple[str, list[dict[str, str]]]) -> None:
    server, seen = api_server
    found = read_crds(Kubeconfig(kubeconfig(server, {"token": "t0k"}), None, None), [CLUSTER_QUEUES, FLAVORS])
    assert found[CLUSTER_QUEUES]["spec"]["versions"][0]["name"] == "v1beta2" and found[FLAVORS] is None
    assert [h["Authorization"] for h in seen] == ["Bearer t0k", "Bearer t0k"]


def test_the_reader_runs_the_credential_plugin(api_server: tuple[str, list[dict[str, str]]], tmp_path: Path) -> None:
    """An exec plugin (gke-gcloud-auth-plugin, `oci ce cluster generate-token`) prints an
    ExecCredential; its token is sent (client.authentication.k8s.io/v1 ExecCredentialStatus)."""
    server, seen = api_server
    plugin = tmp_path / "plugin.py"
    plugin.write_text(
        "import json, os\n"
        "info = json.loads(os.environ['KUBERNETES_EXEC_INFO'])\n"
        "print(json.dumps({'kind': 'ExecCredential', 'status': {'token': os.environ['TOKEN'] + info['kind']}}))\n"
    )
    exec_spec = {
        "apiVersion": "client.authentication.k8s.io/v1",
        "command": sys.executable,
        "args": [str(plugin)],
        "env": [{"name": "TOKEN", "value": "from-plugin-"}],
    }
    read_crds(Kubeconfig(kubeconfig(server, {"exec": exec_spec}), None, None), [CLUSTER_QUEUES])
    assert seen[0]["Authorization"] == "Bearer from-plugin-ExecCredential"


def test_the_reader_says_why_it_cannot_ask(tmp_path: Path) -> None:
    config = kubeconfig("https://127.0.0.1:1", {"token": "t"})
    with pytest.raises(ClusterUnreadable, match=r"^cannot reach https://127.0.0.1:1: "):
        read_crds(Kubeconfig(config, None, None), [CLUSTER_QUEUES])
    with pytest.raises(ClusterUnreadable, match="the kubeconfig has no context 'other'"):
        read_crds(Kubeconfig(config, None, "other"), [CLUSTER_QUEUES])
    with pytest.raises(ClusterUnreadable, match="auth-provider") as failure:
        read_crds(Kubeconfig(kubeconfig("https://x", {"auth-provider": {"name": "gcp"}}), None, None), ["x"])
    assert failure.value.key == ""
    with pytest.raises(ClusterUnreadable, match="does not exist") as failure:
        read_crds(Kubeconfig(None, str(tmp_path / "none"), None), ["x"])
    assert failure.value.key == "kubeconfigPath"


def test_a_broken_credential_is_one_line(tmp_path: Path) -> None:
    """A plugin that prints no ExecCredential, or a client key that is no PEM, is reported, not
    raised as a traceback."""
    plugin = {"apiVersion": "client.authentication.k8s.io/v1", "command": "true"}
    with pytest.raises(ClusterUnreadable, match="context 'a' of the kubeconfig cannot be used: JSONDecodeError"):
        read_crds(Kubeconfig(kubeconfig("https://x", {"exec": plugin}), None, None), ["x"])
    garbage = {"client-certificate-data": "bm90IGEgY2VydA==", "client-key-data": "bm90IGEga2V5"}
    with pytest.raises(ClusterUnreadable, match="cannot be used: SSLError"):
        read_crds(Kubeconfig(kubeconfig("https://x", garbage), None, None), ["x"])
