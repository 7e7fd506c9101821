"""Pulumi mocks that record every registration the way the engine would see it.

- Outputs come back under the providers' camelCase wire names.
- In preview mode a new resource gets no id and no computed outputs (they are unknown, as
  in a real `pulumi preview`); in update mode the mocks fill in realistic computed values.
- An invoke the mocks do not know raises, so no lookup silently returns nothing.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import grpc
import pulumi
from pulumi.runtime import rpc
from pulumi.runtime.mocks import MockCallArgs, MockMonitor, MockResourceArgs
from pulumi.runtime.proto import engine_pb2

# The GKE version the engine-versions lookup reports as each channel's default.
CHANNEL_DEFAULTS = {
    "RAPID": "1.35.1-gke.1396000",
    "REGULAR": "1.34.1-gke.1829001",
    "STABLE": "1.33.5-gke.1308000",
    "EXTENDED": "1.32.9-gke.1108000",
}
PROJECT_NUMBER = "123456789012"
FAKE_CA = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUMtZmFrZS1jYS0tLS0tCg=="


class EngineError(grpc.RpcError):
    """An error the engine answers an invoke with, as the SDK receives it over gRPC (it turns
    one into a plain Exception of its details: pulumi/runtime/settings.py grpc_error_to_exception)."""

    def __init__(self, details: str) -> None:
        super().__init__(details)
        self._details = details

    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.UNKNOWN

    def details(self) -> str:
        return self._details


@dataclass
class RecordedResource:
    """One registration: what the program asked the engine for."""

    urn: str
    type: str
    name: str
    custom: bool
    inputs: dict[str, Any]
    parent: str
    provider: str
    dependencies: list[str]
    property_dependencies: dict[str, list[str]]
    delete_before_replace: bool = False
    protect: bool = False
    retain_on_delete: bool = False
    deleted_with: str = ""
    ignore_changes: list[str] = field(default_factory=list)
    replace_on_changes: list[str] = field(default_factory=list)
    # The engine replaces the resource when this differs from the one it recorded (None: none).
    replacement_trigger: Any = None
    custom_timeouts: dict[str, str] = field(default_factory=dict)
    read: bool = False
    # The ID a read names (`Resource.get`): <namespace>/<name> for a namespaced Kubernetes object.
    read_id: str = ""
    # Alias specs as the SDK sends them: {"urn": ...} or name/type/parentUrn/noParent.
    aliases: list[dict[str, Any]] = field(default_factory=list)

    @property
    def provider_urn(self) -> str:
        """URN of the explicit provider ("" for the default one); references are `<urn>::<id>`."""
        return self.provider.rsplit("::", 1)[0] if self.provider else ""

    @property
    def all_dependencies(self) -> set[str]:
        deps = set(self.dependencies)
        for urns in self.property_dependencies.values():
            deps.update(urns)
        return deps


def _project(inputs: Mapping[str, Any], default: str) -> str:
    project = inputs.get("project")
    return project if isinstance(project, str) else default


def _computed(typ: str, name: str, inputs: Mapping[str, Any], project: str) -> tuple[str, dict[str, Any]]:
    """Update-mode id and computed outputs, by resource type."""
    p = _project(inputs, project)
    n = str(inputs["name"]) if isinstance(inputs.get("name"), str) else name
    region = inputs.get("region") or inputs.get("location") or "us-central1"
    if typ == "gcp:container/cluster:Cluster":
        loc = inputs.get("location", "us-central1-c")
        rid = f"projects/{p}/locations/{loc}/clusters/{n}"
        return rid, {
            "endpoint": "34.118.0.10",
            "masterAuth": {"clusterCaCertificate": FAKE_CA},
            "masterVersion": inputs.get("minMasterVersion", CHANNEL_DEFAULTS["REGULAR"]),
            "selfLink": f"https://container.googleapis.com/v1/{rid}",
        }
    if typ == "gcp:container/nodePool:NodePool":
        cluster = inputs.get("cluster", "cluster")
        return f"{cluster}/nodePools/{n}", {"instanceGroupUrls": [], "version": CHANNEL_DEFAULTS["REGULAR"]}
    if typ == "gcp:compute/network:Network":
        rid = f"projects/{p}/global/networks/{n}"
        return rid, {"selfLink": f"https://www.googleapis.com/compute/v1/{rid}", "gatewayIpv4": ""}
    if typ == "gcp:compute/subnetwork:Subnetwork":
        rid = f"projects/{p}/regions/{region}/subnetworks/{n}"
        return rid, {"selfLink": f"https://www.googleapis.com/compute/v1/{rid}", "gatewayAddress": "10.0.0.1"}
    if typ == "gcp:serviceaccount/account:Account":
        email = f"{inputs.get('accountId', name)}@{p}.iam.gserviceaccount.com"
        return f"projects/{p}/serviceAccounts/{email}", {
            "email": email,
            "member": f"serviceAccount:{email}",
            "name": f"projects/{p}/serviceAccounts/{email}",
            "uniqueId": "104000000000000000001",
        }
    if typ == "gcp:storage/bucket:Bucket":
        return n, {"url": f"gs://{n}", "selfLink": f"https://www.googleapis.com/storage/v1/b/{n}"}
    if typ == "gcp:kms/keyRing:KeyRing":
        return f"projects/{p}/locations/{inputs.get('location')}/keyRings/{n}", {}
    if typ == "gcp:kms/cryptoKey:CryptoKey":
        return f"{inputs.get('keyRing')}/cryptoKeys/{n}", {}
    if typ == "gcp:filestore/instance:Instance":
        networks = [dict(net, ipAddresses=["10.0.0.2"]) for net in inputs.get("networks", [])]
        return f"projects/{p}/locations/{inputs.get('location')}/instances/{n}", {"networks": networks}
    if typ == "gcp:artifactregistry/repository:Repository":
        return f"projects/{p}/locations/{inputs.get('location')}/repositories/{inputs.get('repositoryId')}", {}
    return f"{name}-id", {}


# The stack outputs the program exports as secrets (a cluster's kubeconfig, a worker's for its manager).
SECRET_OUTPUTS = ["kubeconfig", "multiKueueKubeconfig"]


class RecordingMocks(pulumi.runtime.Mocks):
    """Answers registrations and invokes; `upstream` holds the outputs of referenced stacks."""

    def __init__(
        self,
        project: str,
        preview: bool,
        upstream: Mapping[str, Mapping[str, Any]] | None = None,
        missing_images: frozenset[str] = frozenset(),
        recorded: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> None:
        self.project = project
        self.preview = preview
        self.upstream = dict(upstream or {})
        # The stack's own state: URN to type and outputs (a new stack records none).
        self.recorded = dict(recorded or {})
        # Compute Engine images that do not exist (every other one does).
        self.missing_images = missing_images
        self.invokes: list[str] = []
        self._calls: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
            "gcp:container/getEngineVersions:getEngineVersions": self._engine_versions,
            "gcp:organizations/getProject:getProject": self._get_project,
            "gcp:compute/getImages:getImages": self._get_images,
            "pulumi:pulumi:readStackOutputs": self._read_stack_outputs,
            "pulumi:pulumi:readStackResourceOutputs": self._read_stack_resources,
        }

    def _engine_versions(self, args: dict[str, Any]) -> dict[str, Any]:
        return {
            "location": args.get("location"),
            "project": args.get("project", self.project),
            "defaultClusterVersion": CHANNEL_DEFAULTS["REGULAR"],
            "latestMasterVersion": CHANNEL_DEFAULTS["RAPID"],
            "latestNodeVersion": CHANNEL_DEFAULTS["RAPID"],
            "releaseChannelDefaultVersion": dict(CHANNEL_DEFAULTS),
            "releaseChannelLatestVersion": dict(CHANNEL_DEFAULTS),
            "releaseChannelUpgradeTargetVersion": dict(CHANNEL_DEFAULTS),
            "validMasterVersions": sorted(CHANNEL_DEFAULTS.values(), reverse=True),
            "validNodeVersions": sorted(CHANNEL_DEFAULTS.values(), reverse=True),
        }

    def _get_project(self, args: dict[str, Any]) -> dict[str, Any]:
        project = args.get("projectId", self.project)
        return {"projectId": project, "number": PROJECT_NUMBER, "name": project, "id": f"projects/{project}"}

    def _get_images(self, args: dict[str, Any]) -> dict[str, Any]:
        # The images a `name = "<name>"` filter lists: none for a missing one.
        project, image_filter = args.get("project", self.project), str(args.get("filter", ""))
        match = re.fullmatch(r'name = "([a-z0-9-]+)"', image_filter)
        if match is None:
            raise NotImplementedError(f"the mocks list images by one name only, not {image_filter!r}")
        name = match.group(1)
        image = {"name": name, "selfLink": f"projects/{project}/global/images/{name}"}
        images = [] if name in self.missing_images else [image]
        return {"filter": image_filter, "project": project, "id": project, "images": images}

    def _stack(self, name: str) -> Mapping[str, Any]:
        if name not in self.upstream:
            raise EngineError(f"unknown stack {json.dumps(name)}")
        return self.upstream[name]

    def _read_stack_outputs(self, args: dict[str, Any]) -> dict[str, Any]:
        return {"name": args["name"], "outputs": dict(self._stack(args["name"])), "secretOutputNames": SECRET_OUTPUTS}

    def _read_stack_resources(self, args: dict[str, Any]) -> dict[str, Any]:
        own = f"{pulumi.get_organization()}/{pulumi.get_project()}/{pulumi.get_stack()}"
        if args["stackName"] != own:
            raise NotImplementedError(f"the mocks hold the resources of this stack ({own}) only")
        return {"name": own, "outputs": dict(self.recorded)}

    def call(self, args: MockCallArgs) -> dict[str, Any]:  # type: ignore[override]
        self.invokes.append(args.token)
        handler = self._calls.get(args.token)
        if handler is None:
            raise NotImplementedError(f"the mocks do not know the invoke {args.token!r}")
        return handler(dict(args.args))

    def new_resource(self, args: MockResourceArgs) -> tuple[str | None, dict[str, Any]]:
        if args.typ == "pulumi:pulumi:StackReference":
            name = args.inputs.get("name") or args.name
            return name, {
                "name": name,
                "outputs": dict(self._stack(name)),
                "secretOutputNames": SECRET_OUTPUTS,
            }
        if args.resource_id and args.typ.startswith("kubernetes:"):
            # A read of an existing object (`Resource.get`): its live state names it, even at preview.
            namespace, _, name = args.resource_id.rpartition("/")
            metadata = {"name": name, **({"namespace": namespace} if namespace else {})}
            return args.resource_id, {"metadata": metadata}
        state = dict(args.inputs)
        rid, computed = _computed(args.typ, args.name, args.inputs, self.project)
        if self.preview:
            # A new resource has no id, and its computed outputs stay unknown until it exists.
            return "", {**state, **dict.fromkeys(computed, rpc.UNKNOWN)}
        return rid, {**state, **computed}


@dataclass(frozen=True)
class LogWarning:
    """A `pulumi.log.warn`, with the URN of the resource it was attached to ("" for none)."""

    urn: str
    message: str

    @property
    def resource_name(self) -> str:
        return self.urn.rsplit("::", 1)[-1] if self.urn else "stack"


class RecordingEngine:
    """Stands in for the engine's log service: keeps warnings and errors with their resource, and
    the information lines apart."""

    def __init__(self) -> None:
        self.warnings: list[LogWarning] = []
        self.infos: list[LogWarning] = []

    def Log(self, request: Any) -> None:
        if request.severity in (engine_pb2.WARNING, engine_pb2.ERROR):
            self.warnings.append(LogWarning(urn=request.urn, message=request.message))
        elif request.severity == engine_pb2.INFO:
            self.infos.append(LogWarning(urn=request.urn, message=request.message))


def _alias(alias: Any) -> dict[str, Any]:
    if alias.WhichOneof("alias") == "urn":
        return {"urn": alias.urn}
    spec = alias.spec
    return {"name": spec.name, "type": spec.type, "parentUrn": spec.parentUrn, "noParent": spec.noParent}


def _trigger(request: Any) -> Any:
    """A registration's replacement trigger as a plain value (None: none)."""
    if not request.HasField("replacement_trigger"):
        return None
    value = request.replacement_trigger
    kind = value.WhichOneof("kind")
    return None if kind in (None, "null_value") else rpc.deserialize_property(getattr(value, kind))


class RecordingMonitor(MockMonitor):
    """A mock monitor that also keeps the options and dependencies of each registration."""

    def __init__(self, mocks: RecordingMocks) -> None:
        super().__init__(mocks)
        self.recorded: list[RecordedResource] = []
        # What each component registered as its outputs, by URN (the stack's own under its root's).
        self.outputs: dict[str, dict[str, Any]] = {}

    def _record(self, request: Any, urn: str, inputs: dict[str, Any], *, read: bool) -> None:
        timeouts = getattr(request, "customTimeouts", None)
        self.recorded.append(
            RecordedResource(
                urn=urn,
                type=request.type,
                name=request.name,
                custom=bool(getattr(request, "custom", True)) if not read else True,
                inputs=inputs,
                parent=request.parent,
                provider=request.provider,
                dependencies=list(request.dependencies),
                property_dependencies={
                    key: list(deps.urns) for key, deps in getattr(request, "propertyDependencies", {}).items()
                },
                delete_before_replace=bool(getattr(request, "deleteBeforeReplace", False)),
                protect=bool(getattr(request, "protect", False)),
                retain_on_delete=bool(getattr(request, "retainOnDelete", False)),
                deleted_with=getattr(request, "deletedWith", ""),
                ignore_changes=list(getattr(request, "ignoreChanges", [])),
                replace_on_changes=list(getattr(request, "replaceOnChanges", [])),
                replacement_trigger=None if read else _trigger(request),
                custom_timeouts={
                    kind: getattr(timeouts, kind)
                    for kind in ("create", "update", "delete")
                    if timeouts and getattr(timeouts, kind)
                },
                read=read,
                read_id=getattr(request, "id", "") if read else "",
                aliases=[_alias(alias) for alias in getattr(request, "aliases", [])],
            )
        )

    def RegisterResource(self, request: Any) -> Any:
        response = super().RegisterResource(request)  # type: ignore[no-untyped-call]
        if request.type != "pulumi:pulumi:Stack":
            self._record(request, response.urn, rpc.deserialize_properties(request.object), read=False)
        return response

    def RegisterResourceOutputs(self, request: Any) -> Any:
        self.outputs[request.urn] = rpc.deserialize_properties(request.outputs, keep_unknowns=True)
        return super().RegisterResourceOutputs(request)  # type: ignore[no-untyped-call]

    def ReadResource(self, request: Any) -> Any:
        response = super().ReadResource(request)  # type: ignore[no-untyped-call]
        self._record(request, response.urn, rpc.deserialize_properties(request.properties), read=True)
        return response
