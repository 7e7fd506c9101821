"""Run the whole Pulumi program in-process, under the recording mocks, for any stack file.

The program receives its config the way the Python language host hands it over (the
PULUMI_CONFIG environment variable), and every registration, invoke and warning is recorded.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pulumi
from pulumi.output import Unknown
from pulumi.runtime import settings

from config.loader import ConfigError, parse_stack_config
from config.stack import StackConfig
from facts.controller_api import CONTROLLER_KINDS
from facts.errors import RuleError
from facts.kubernetes import STACK_ANNOTATION, stack_identity
from facts.project import PROJECT, SELF_MANAGED_ORGANIZATION, qualified_stack_name, stack_reference_problem
from facts.registries import parse_reference
from facts.versions import JOBSET_CRD
from harness.mocks import LogWarning, RecordedResource, RecordingEngine, RecordingMocks, RecordingMonitor
from harness.stackfile import StackFile, holds_secret, read_stack_file, to_pulumi_config
from planners.ownership import ObjectRef
from stacks import installed, program
from stacks.kubeapi import CrdReader, Kubeconfig, KubeconfigReader, ObjectReader

ROOT = Path(__file__).resolve().parents[1]
# The key Pulumi marks special values (secrets, assets) with on the wire.
SECRET_SENTINEL = "4dabf18193072939515e22adb298388d"
# Stands in for values a preview cannot know yet.
UNKNOWN = "(known after apply)"


def stack_file(stack: str, beside: Path | None = None) -> Path:
    """`Pulumi.<stack>.yaml` in `beside` (the folder of a stack file given by path), else at the
    project root, else under examples/."""
    for folder in (*([beside] if beside else []), ROOT, ROOT / "examples"):
        path = folder / f"Pulumi.{stack}.yaml"
        if path.exists():
            return path
    known = ", ".join(sorted(stack_names()))
    raise FileNotFoundError(f"no Pulumi.{stack}.yaml at the project root or in examples/; known stacks: {known}")


def stack_names() -> list[str]:
    files = [*ROOT.glob("Pulumi.*.yaml"), *(ROOT / "examples").glob("Pulumi.*.yaml")]
    return sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in files)


def load_stack_file(path: Path) -> StackFile:
    """A stack file's config as the Pulumi CLI hands it to the program (harness.stackfile)."""
    return read_stack_file(path, PROJECT)


def load_stack_values(stack: str) -> dict[str, Any]:
    """The config values of `Pulumi.<stack>.yaml`, JSON-shaped, `secure:` values stood in for."""
    return load_stack_file(stack_file(stack)).values


def stack_config(stack: str) -> StackConfig:
    """`Pulumi.<stack>.yaml` as the program reads it."""
    return parse_stack_config(to_pulumi_config(load_stack_values(stack)), stack)


def _plain(value: Any) -> Any:
    """Strip secret sentinels from a mock-serialised value; mark unknowns."""
    if isinstance(value, Unknown):
        return UNKNOWN
    if isinstance(value, dict):
        if SECRET_SENTINEL in value:
            return _plain(value.get("value"))
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)  # the wire carries every number as a float
    return value


@dataclass
class StackRun:
    stack: str
    preview: bool
    resources: list[RecordedResource]
    exports: dict[str, Any] = field(default_factory=dict)
    secret_exports: set[str] = field(default_factory=set)
    invokes: list[str] = field(default_factory=list)
    warnings: list[LogWarning] = field(default_factory=list)
    infos: list[LogWarning] = field(default_factory=list)
    # The outputs each component registered, by URN.
    outputs: dict[str, dict[str, Any]] = field(default_factory=dict)

    # ---- lookups
    def __iter__(self) -> Iterator[RecordedResource]:
        return iter(self.resources)

    def of_type(self, *types: str) -> list[RecordedResource]:
        return [r for r in self.resources if r.type in types]

    def one(self, typ: str, name: str | None = None) -> RecordedResource:
        found = [r for r in self.of_type(typ) if name is None or r.name == name]
        if len(found) != 1:
            names = [r.name for r in self.of_type(typ)]
            raise AssertionError(f"expected one {typ} named {name!r}, found {len(found)}; {typ} names: {names}")
        return found[0]

    def by_urn(self, urn: str) -> RecordedResource:
        for r in self.resources:
            if r.urn == urn:
                return r
        raise KeyError(urn)

    def children(self, parent: RecordedResource) -> list[RecordedResource]:
        return [r for r in self.resources if r.parent == parent.urn]

    def ancestors(self, resource: RecordedResource) -> list[RecordedResource]:
        chain = []
        while resource.parent:
            try:
                resource = self.by_urn(resource.parent)
            except KeyError:
                break
            chain.append(resource)
        return chain

    def depends_on(self, dependent: RecordedResource, dependency: RecordedResource) -> bool:
        """Whether `dependent` waits for `dependency` on create (and is deleted before it), following
        explicit and property dependencies, parents and providers as the engine does."""
        seen: set[str] = set()
        stack = [dependent.urn]
        while stack:
            urn = stack.pop()
            if urn in seen:
                continue
            seen.add(urn)
            try:
                current = self.by_urn(urn)
            except KeyError:
                continue
            edges = current.all_dependencies | ({current.parent} if current.parent else set())
            if current.provider_urn:
                edges.add(current.provider_urn)
            if dependency.urn in edges:
                return True
            stack.extend(edges)
        return False

    def pulled_as(self, ref: str) -> str:
        """`ref` as this stack's pods pull it: through the remote repository the stack created for its
        registry (read from the recorded repositories, not from the program's own resolution)."""
        image = parse_reference(ref)
        for repository in self.of_type("gcp:artifactregistry/repository:Repository"):
            inputs = repository.inputs
            remote = inputs.get("remoteRepositoryConfig") or {}
            if inputs.get("mode") == "REMOTE_REPOSITORY" and remote.get("description") == image.registry:
                host = f"{inputs['location']}-docker.pkg.dev/{inputs['project']}/{inputs['repositoryId']}"
                return f"{host}/{image.path}{image.suffix}"
        return ref

    # ---- views
    @property
    def custom_resources(self) -> list[RecordedResource]:
        return [r for r in self.resources if r.custom and not r.read]

    @property
    def gcp_resources(self) -> list[RecordedResource]:
        return [r for r in self.custom_resources if r.type.startswith("gcp:")]

    @property
    def kubernetes_objects(self) -> list[RecordedResource]:
        """Resources that are Kubernetes API objects (not Helm releases or providers)."""
        return [
            r
            for r in self.custom_resources
            if r.type.startswith("kubernetes:") and not r.type.startswith("kubernetes:helm.sh/")
        ]

    @staticmethod
    def manifest(resource: RecordedResource) -> dict[str, Any]:
        manifest: dict[str, Any] = _plain(resource.inputs)
        return manifest


class StackFailed(Exception):
    """The program raised; `resources` is what it had registered by then."""

    def __init__(self, error: BaseException, resources: list[RecordedResource]) -> None:
        super().__init__(str(error))
        self.error = error
        self.resources = resources


@contextlib.contextmanager
def _config_environment(values: Mapping[str, Any], secrets: list[str]) -> Iterator[None]:
    """PULUMI_CONFIG and PULUMI_CONFIG_SECRET_KEYS as the language host sets them, for one run."""
    variables = {
        "PULUMI_CONFIG": json.dumps(to_pulumi_config(values)),
        "PULUMI_CONFIG_SECRET_KEYS": json.dumps(secrets),
    }
    saved = {name: os.environ.get(name) for name in variables}
    os.environ.update(variables)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def pinned_crds() -> dict[str, Any]:
    """The CRDs of the kinds the program writes as the pinned releases define them: what an
    existing cluster running those releases returns (stacks.kubeapi.read_crds)."""
    schemas = {m.module: installed.record(m)["schemas"] for m in {kind.module for kind in CONTROLLER_KINDS}}
    found: dict[str, Any] = {}
    for kind in CONTROLLER_KINDS:
        schema = schemas[kind.module.module][f"{kind.api} {kind.kind}"]
        version = {"name": kind.version, "served": True, "schema": {"openAPIV3Schema": schema}}
        found[kind.crd_name] = {"metadata": {"name": kind.crd_name}, "spec": {"versions": [version]}}
    return found


def read_pinned_crds(kubeconfig: Kubeconfig, names: Sequence[str]) -> dict[str, Any]:
    """A stand-in for an existing cluster that runs the pinned releases, as the stack being run
    installed them (its JobSet CRD marked with the stack's identity), so that a stack renders with
    `kueue.install` either way. The records are read only when the program asks."""
    crds = pinned_crds()
    identity = stack_identity(pulumi.get_organization(), pulumi.get_project(), pulumi.get_stack())
    crds[JOBSET_CRD]["metadata"]["annotations"] = {STACK_ANNOTATION: identity}
    return crd_reader(crds)(kubeconfig, names)


def crd_reader(crds: Mapping[str, Any]) -> CrdReader:
    """A stand-in for the cluster's API server that answers with `crds`."""

    def read(kubeconfig: Kubeconfig, names: Sequence[str]) -> dict[str, Any]:
        return {name: crds.get(name) for name in names}

    return read


def unmarked(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """`manifest` without the stack's mark (stacks.ownership), for a test whose subject it is not."""
    metadata = dict(manifest.get("metadata") or {})
    annotations = {k: v for k, v in (metadata.pop("annotations", None) or {}).items() if k != STACK_ANNOTATION}
    return {**manifest, "metadata": {**metadata, **({"annotations": annotations} if annotations else {})}}


def objects_reader(live: Mapping[ObjectRef, Any] | None = None) -> ObjectReader:
    """A stand-in for the cluster's API server that has the objects `live` (default: none of the
    stack's names is taken)."""

    def read(kubeconfig: Kubeconfig, refs: Sequence[ObjectRef]) -> dict[ObjectRef, Any]:
        return {ref: (live or {}).get(ref) for ref in refs}

    return read


def stand_in_kubeconfig(kubeconfig: Kubeconfig) -> str:
    """A stand-in for the machine's kubeconfig file (contents given inline are read as they are):
    one cluster, and the context the stack names."""
    if kubeconfig.contents is not None:
        return kubeconfig.contents
    context = kubeconfig.context or "stand-in"
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "stand-in", "cluster": {"server": "https://stand-in.invalid"}}],
            "contexts": [{"name": context, "context": {"cluster": "stand-in", "user": "stand-in"}}],
            "users": [{"name": "stand-in", "user": {}}],
            "current-context": context,
        }
    )


# The time a run of the harness is an `up` at, unless given: fixed, so that a render does not
# change with the day (the tests' bookings start after it). `tools.render` gives the clock's.
RUN_AT = datetime(2026, 11, 28, tzinfo=UTC)


def run_stack(
    stack: str,
    *,
    values: Mapping[str, Any] | None = None,
    file: Path | None = None,
    preview: bool = False,
    upstream: Mapping[str, Mapping[str, Any]] | None = None,
    read_crds: CrdReader | None = None,
    read_kubeconfig: KubeconfigReader = stand_in_kubeconfig,
    read_objects: ObjectReader | None = None,
    missing_images: frozenset[str] = frozenset(),
    recorded: Mapping[str, Mapping[str, Any]] | None = None,
    now: datetime = RUN_AT,
) -> StackRun:
    """Run the program for `stack` (the config of `file`, else of its own stack file, else `values`)
    and record everything; what the stack file says other than it seems is a warning of the run.

    `upstream` maps referenced stack names to their outputs; when omitted and the stack names an
    upstream stack, that stack is run first (from its own file, looked for beside `file` first) and
    its exports are used.
    `missing_images` names Compute Engine images the project lacks (disk images of preloaded pools).
    `now` is the time of the `up` (planners.queues.booking_closed).
    `recorded` is the stack's state before the run (`recorded_state` of an earlier run; default: a
    new stack).
    `read_crds` answers for an existing cluster's API server (default: a cluster that runs the
    pinned releases), `read_kubeconfig` for the machine's kubeconfig file (default: one that has
    the context the stack names), `read_objects` for the objects of the stack's names there
    (default: none is taken).
    """
    reader = read_crds or read_pinned_crds
    advice: tuple[str, ...] = ()
    # The stack file the values come from (None: values given).
    source: Path | None = None
    if values is None:
        source = file or stack_file(stack)
        loaded = load_stack_file(source)
        values, advice = loaded.values, loaded.advice
    config_values = dict(values)
    if upstream is None:
        upstream = _upstream_exports(stack, source, config_values, file.parent if file else None, now)
    project = str(config_values.get(f"{PROJECT}:project", "unset-project"))
    mocks = RecordingMocks(
        project=project, preview=preview, upstream=upstream, missing_images=missing_images, recorded=recorded
    )
    monitor = RecordingMonitor(mocks)
    settings.ROOT.set(None)
    pulumi.runtime.set_mocks(
        mocks, project=PROJECT, stack=stack, preview=preview, monitor=monitor, organization=SELF_MANAGED_ORGANIZATION
    )
    engine = RecordingEngine()
    engine.warnings.extend(LogWarning(urn="", message=line) for line in advice)
    settings.SETTINGS.engine = engine

    run = StackRun(
        stack=stack,
        preview=preview,
        resources=monitor.recorded,
        invokes=mocks.invokes,
        warnings=engine.warnings,
        infos=engine.infos,
        outputs=monitor.outputs,
    )

    @pulumi.runtime.test  # type: ignore[untyped-decorator]
    def body() -> pulumi.Output[Any]:
        program.run(reader, read_kubeconfig, read_objects or objects_reader(), clock=lambda: now)
        root = settings.get_root_resource()
        outputs: dict[str, Any] = dict(getattr(root, "outputs", {}) or {})

        async def collect() -> None:
            for name, value in outputs.items():
                out = pulumi.Output.from_input(value)
                if await out.is_secret():
                    run.secret_exports.add(name)
                run.exports[name] = _plain(await out.future(with_unknowns=True))

        return pulumi.Output.from_input(collect())

    try:
        secrets = sorted(key for key, value in config_values.items() if holds_secret(value))
        with _config_environment(config_values, secrets):
            body()
    except Exception as error:
        raise StackFailed(error, list(monitor.recorded)) from error
    return run


def recorded_state(run: StackRun) -> dict[str, dict[str, Any]]:
    """The state an `up` of `run` leaves, as the engine's readStackResourceOutputs answers (URN to
    type and outputs): each custom resource as created (its inputs), each component with the
    outputs it registered."""
    custom = {r.urn: {"type": r.type, "outputs": run.manifest(r)} for r in run.custom_resources}
    components = {
        r.urn: {"type": r.type, "outputs": _plain(run.outputs.get(r.urn, {}))} for r in run.resources if not r.custom
    }
    return {**custom, **components}


# The stack files whose upstream stacks are being run, outermost first (a stack run from given
# values has none): a reference back to one of them is a cycle.
_RUNNING_UPSTREAM: list[tuple[str, Path | None]] = []


def _upstream_exports(
    stack: str, file: Path | None, values: Mapping[str, Any], beside: Path | None, now: datetime
) -> dict[str, dict[str, Any]]:
    """Exports of the stacks this one references (its upstream stack, a MultiKueue manager's
    workers), produced by running each referenced stack's own file. A reference to this stack or
    back to one that references it is refused by its key: each layer reads one below it."""
    references = [("upstreamStack", values.get(f"{PROJECT}:upstreamStack"))]
    multikueue = values.get(f"{PROJECT}:multiKueue")
    if isinstance(multikueue, Mapping) and isinstance(multikueue.get("workers"), list):
        references += [(f"multiKueue.workers[{i}]", w) for i, w in enumerate(multikueue["workers"])]
    found: dict[str, dict[str, Any]] = {}
    _RUNNING_UPSTREAM.append((stack, file.resolve() if file else None))
    try:
        for key, reference in references:
            if not isinstance(reference, str) or stack_reference_problem(reference):
                continue
            full_name = qualified_stack_name(reference)
            upstream_stack = full_name.rsplit("/", 1)[-1]
            try:
                upstream_file = stack_file(upstream_stack, beside)
            except FileNotFoundError:
                why = (
                    f"names stack {upstream_stack}, and the render finds no Pulumi.{upstream_stack}.yaml beside this "
                    "file, at the project root or in examples/ to run first"
                )
                raise StackFailed(ConfigError.of([RuleError(key, reference, why)]), []) from None
            files = [f for _, f in _RUNNING_UPSTREAM]
            if upstream_file.resolve() in files:
                names = [name for name, _ in _RUNNING_UPSTREAM[files.index(upstream_file.resolve()) :]]
                chain = " → ".join([*names, upstream_stack])
                why = f"makes a cycle of stacks ({chain}): a stack reads only stacks below it, never itself"
                raise StackFailed(ConfigError.of([RuleError(key, reference, why)]), [])
            found[full_name] = run_stack(upstream_stack, file=upstream_file, now=now).exports
    finally:
        _RUNNING_UPSTREAM.pop()
    return found


def stack_with(stack: str, **overrides: Any) -> dict[str, Any]:
    """A stack file's config values with top-level `nemo-gke:` keys replaced."""
    values = load_stack_values(stack)
    for key, value in overrides.items():
        values[f"{PROJECT}:{key}"] = value
    return values
