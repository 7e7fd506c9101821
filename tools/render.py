"""Render a stack offline: `python -m tools.render --stack dev` (`make render`), or any stack file
with `--file PATH`.

Runs the whole program under the mocks (no credentials, no Pulumi CLI, no network),
validates everything against the real schemas, prints the program's warnings, and writes
`build/<stack>/`:

- `kubernetes/NNN-<kind>-<name>.yaml`: every Kubernetes object, in creation order
  (`kubectl apply -f build/<stack>/kubernetes/` accepts the folder);
- `gcp-resources.json`: the GCP resources with their inputs;
- `helm-releases.json`: the Helm releases (chart, version, values);
- `outputs.json`: the stack outputs, secrets masked;
- `summary.md`: the go/no-go summary (warnings, pools, runs, estimated cost), also printed, last.

The folder also lists what the render wrote (`.rendered-files`): the next render removes those files
and nothing else, and refuses a folder that holds anything it did not write.

Custom resources (Kueue, JobSet, GKE networking) are validated against the CRDs `make install`
caches, CEL rules included; without that cache the render stops and says how to fill it.

Exit codes: 0 rendered, 2 invalid configuration, 1 any other failure; with --no-go-exit, 3
rendered with the verdict NO-GO (how a script tells GO from NO-GO; the summary says why).
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from config.loader import ConfigError
from facts.errors import RuleError
from facts.kubernetes import FIRST_REVISION, RUN_LABEL
from facts.project import stack_name_problem
from harness.mocks import RecordedResource
from harness.runner import ROOT, StackFailed, StackRun, run_stack
from harness.schemas import resource_errors
from harness.stackfile import StackFileError
from planners.submitted import Submitted, live_of, step_of, submission
from stacks import installed
from stacks.installed import NotInstalled
from tools.summary import markdown


class _Dumper(yaml.CSafeDumper):
    """libyaml's emitter: the JobSet CRD alone is 800 kB of YAML."""


def _str(dumper: yaml.CSafeDumper, value: str) -> yaml.Node:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def _is_component(resource: RecordedResource) -> bool:
    return not resource.custom and resource.type.startswith("nemo:")


def tree(run: StackRun) -> list[str]:
    """Layer → component → resource lines, with resource counts."""
    components = {r.urn: r for r in run.resources if _is_component(r)}
    owned: dict[str, list[RecordedResource]] = {urn: [] for urn in components}
    for resource in run.custom_resources:
        owner = next((a for a in run.ancestors(resource) if a.urn in components), None)
        if owner is not None:
            owned[owner.urn].append(resource)

    def count(component: RecordedResource) -> int:
        return len(owned[component.urn]) + sum(count(c) for c in run.children(component) if c.urn in components)

    lines: list[str] = []

    def show(component: RecordedResource, depth: int) -> None:
        indent = "  " * depth
        lines.append(f"{indent}{component.name} ({component.type}): {count(component)} resources")
        for resource in sorted(owned[component.urn], key=lambda r: (r.type, r.name)):
            lines.append(f"{indent}  - {resource.type} {resource.name}")
        for child in sorted(run.children(component), key=lambda r: r.name):
            if child.urn in components:
                show(child, depth + 1)

    for layer in (r for r in components.values() if r.type.endswith("Layer")):
        show(layer, 0)
    loose = [r for r in run.custom_resources if not any(a.urn in components for a in run.ancestors(r))]
    if loose:
        lines.append(f"stack-level: {len(loose)} resources")
        lines.extend(f"  - {r.type} {r.name}" for r in loose)
    return lines


def summary(run: StackRun) -> str:
    kinds = Counter(
        "Helm releases" if r.type.startswith("kubernetes:helm.sh/")
        else "GCP" if r.type.startswith("gcp:")
        else "Kubernetes" if r in run.kubernetes_objects
        else "providers" if r.type.startswith("pulumi:providers:")
        else "other"
        for r in run.custom_resources
    )  # fmt: skip
    parts = ", ".join(f"{n} {kind}" for kind, n in sorted(kinds.items()))
    return f"stack {run.stack}: {len(run.custom_resources)} resources ({parts})"


# Files sort so that `kubectl apply -f` meets CRDs before their objects, namespaces before what
# lives in them and Kueue's flavors before the queues that name them.
KIND_ORDER = (
    "CustomResourceDefinition", "Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "PersistentVolume",
    "PersistentVolumeClaim", "ConfigMap", "GKENetworkParamSet", "Network", "DaemonSet", "Deployment",
    "Service", "Job", "Topology", "ResourceFlavor", "WorkloadPriorityClass", "ProvisioningRequestConfig",
    "AdmissionCheck", "ClusterQueue", "LocalQueue", "JobSet",
)  # fmt: skip


# Keys a reader looks for first; the wire keeps no key order at all.
LEADING_KEYS = ("apiVersion", "kind", "metadata", "name", "namespace", "spec")


def readable(value: Any) -> Any:
    """Leading keys first, the rest alphabetically, at every level."""
    if isinstance(value, dict):
        leading = [k for k in LEADING_KEYS if k in value]
        rest = sorted(k for k in value if k not in LEADING_KEYS)
        return {k: readable(value[k]) for k in [*leading, *rest]}
    if isinstance(value, list):
        return [readable(v) for v in value]
    return value


def ordered(manifests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    def key(m: dict[str, Any]) -> tuple[int, str, str]:
        kind, meta = m.get("kind", ""), m.get("metadata", {})
        rank = KIND_ORDER.index(kind) if kind in KIND_ORDER else len(KIND_ORDER)
        return rank, meta.get("namespace", ""), meta.get("name", "")

    return [readable(m) for m in sorted(manifests, key=key)]


# Lists the files a render wrote into its folder: the next render removes those and nothing else.
WRITTEN = ".rendered-files"


class OutputFolderError(ValueError):
    """An --out folder the render may not write into, or cannot."""


def clear(out: Path) -> None:
    """Remove what an earlier render wrote into `out` (as its list says); refuse a folder holding
    anything else, so that a render never deletes what it did not write."""
    if out.exists() and not out.is_dir():
        raise OutputFolderError(f"--out: {out} is a file, not a folder")
    if not out.exists():
        return
    # A link inside the folder would have the render write, or delete, where it points.
    links = sorted(p for p in out.rglob("*") if p.is_symlink())
    if links:
        raise OutputFolderError(
            f"--out: {links[0]} is a symbolic link, which a render neither writes through nor removes: remove it"
        )
    listed = out / WRITTEN
    if not listed.is_file():
        if any(out.iterdir()):
            raise OutputFolderError(
                f"--out: {out} holds files a render did not write (or a render older than this list, "
                f"{WRITTEN}): remove them, or choose another --out"
            )
        return
    root = out.resolve()
    for line in listed.read_text().splitlines():
        path = (out / line).resolve()
        if line and path.is_relative_to(root) and path != root and path.is_file():
            path.unlink()
    listed.unlink()
    for folder in sorted((p for p in out.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True):
        if not any(folder.iterdir()):
            folder.rmdir()


@dataclass(frozen=True)
class RenderedRun:
    """A run's JobSet as a render wrote it: what it records of its submission, and its image."""

    submitted: Submitted
    image: str


def run_jobsets(manifests: list[dict[str, Any]]) -> dict[str, RenderedRun]:
    """The training runs' JobSets among manifests, by run name."""
    found = {}
    for manifest in manifests:
        run = manifest.get("metadata", {}).get("labels", {}).get(RUN_LABEL)
        if manifest.get("kind") == "JobSet" and run:
            spec = manifest["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
            found[run] = RenderedRun(live_of(manifest), spec["containers"][0]["image"])
    return found


def previous_jobsets(out: Path) -> dict[str, RenderedRun]:
    """The run JobSets the last render into `out` wrote (none where it wrote nothing)."""
    listed = out / WRITTEN
    if not listed.is_file():
        return {}
    paths = [out / line for line in listed.read_text().splitlines() if "-jobset-" in line]
    return run_jobsets([yaml.safe_load(path.read_text()) for path in paths if path.is_file()])


def jobset_changes(before: dict[str, RenderedRun], after: dict[str, RenderedRun]) -> list[str]:
    """What `pulumi up` would do to each run were the earlier render deployed (planners.submitted):
    a run whose revision rose is replaced; one changed at its revision is refused; one this
    version renders otherwise (a bumped runtime or image in the catalog) is kept as submitted."""
    lines = []
    for run in sorted(before.keys() | after.keys()):
        if run not in after:
            lines.append(f"run {run}: removed (JobSet {before[run].submitted.jobset} is deleted)")
            continue
        new = after[run]
        if run not in before:
            lines.append(f"run {run}: new JobSet {new.submitted.jobset}")
            continue
        old, now = before[run].submitted, new.submitted
        image = f" (image {before[run].image} -> {new.image})" if before[run].image != new.image else ""
        revision = now.revision or FIRST_REVISION
        try:
            step = step_of(run, revision, now.definition or {}, old)
        except RuleError as refused:
            lines.append(f"run {run}: `pulumi up` refuses the change: {refused}")
            continue
        said = submission(
            run, revision=revision, jobset=now.jobset, rendered=now.rendered or "", step=step, submitted=old
        )
        if said.warning or said.notice:
            lines.append(f"{said.warning or said.notice}{image}")
    return lines


def write(run: StackRun, out: Path) -> None:
    clear(out)
    (out / "kubernetes").mkdir(parents=True, exist_ok=True)  # kubectl apply -f takes it even empty
    written: list[Path] = []

    def put(relative: str, text: str) -> None:
        path = out / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        written.append(Path(relative))

    for i, manifest in enumerate(ordered([run.manifest(r) for r in run.kubernetes_objects]), start=1):
        name = manifest["metadata"]["name"]
        put(
            f"kubernetes/{i:03d}-{manifest.get('kind', 'object').lower()}-{name}.yaml",
            yaml.dump(manifest, Dumper=_Dumper, sort_keys=False),
        )

    def record(r: RecordedResource) -> dict[str, Any]:
        return {"type": r.type, "name": r.name, "urn": r.urn, "parent": r.parent, "inputs": run.manifest(r)}

    put("gcp-resources.json", json.dumps([record(r) for r in run.gcp_resources], indent=2) + "\n")
    releases = [r for r in run.custom_resources if r.type.startswith("kubernetes:helm.sh/")]
    put("helm-releases.json", json.dumps([record(r) for r in releases], indent=2) + "\n")
    outputs = {k: ("[secret]" if k in run.secret_exports else v) for k, v in run.exports.items()}
    put("outputs.json", json.dumps(outputs, indent=2) + "\n")
    put("summary.md", go_no_go(run))
    (out / WRITTEN).write_text("".join(f"{path.as_posix()}\n" for path in written))


def go_no_go(run: StackRun) -> str:
    """The summary; for a stack on an existing cluster, it says the cluster was not read: offline,
    its kubeconfig, Kueue and JobSet and the objects of the stack's names are stood in for (what
    `pulumi preview` reads and checks)."""
    text = markdown(run.stack, run.exports.get("summary"), run.warnings)
    if (run.exports.get("cluster") or {}).get("gke") is False:
        text = text.rstrip("\n") + (
            " Offline: the cluster was not read; `pulumi preview` reads its kubeconfig, Kueue and JobSet, and "
            "the objects of this stack's names, and refuses there what would fail.\n"
        )
    return text


# The exit code of a render whose verdict is NO-GO, with --no-go-exit.
NO_GO_EXIT = 3


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stack", help="stack name: Pulumi.<stack>.yaml at the root or in examples/ (default: dev)")
    parser.add_argument(
        "--file", type=Path, help="a stack file anywhere; its stack is named by Pulumi.<stack>.yaml unless --stack"
    )
    parser.add_argument("--out", type=Path, default=ROOT / "build", help="output folder (default: build/)")
    parser.add_argument(
        "--preview", action="store_true", help="render as `pulumi preview` sees it (computed values unknown)"
    )
    parser.add_argument(
        "--no-go-exit", action="store_true", help=f"exit {NO_GO_EXIT} when the verdict is NO-GO (for scripts)"
    )
    args = parser.parse_args(argv)
    try:
        stack, file = _stack_and_file(args.stack, args.file)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2

    try:
        installed.schemas()  # the program applies a cached CRD, and every custom resource is checked
    except NotInstalled as missing:
        print(f"error: {missing}", file=sys.stderr)
        return 1
    try:
        run = run_stack(stack, file=file, preview=args.preview, now=datetime.now(UTC))
    except (FileNotFoundError, StackFileError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except StackFailed as failure:
        if isinstance(failure.error, ConfigError):
            print(f"error: {failure.error}", file=sys.stderr)
            return 2
        print(f"error: the program failed: {failure.error}", file=sys.stderr)
        return 1

    errors = [
        f"{r.type} {r.name}: {error}"
        for r in run.resources
        for error in resource_errors(r, run.manifest(r), preview=args.preview)
    ]
    if errors:
        print("schema validation failed:", *errors, sep="\n  ", file=sys.stderr)
        return 1
    out = args.out / stack
    try:
        before = previous_jobsets(out)
        write(run, out)
    except OutputFolderError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except OSError as error:
        print(f"error: --out: cannot write {error.filename or out}: {error.strerror or error}", file=sys.stderr)
        return 2
    changes = jobset_changes(before, run_jobsets([run.manifest(r) for r in run.kubernetes_objects])) if before else []
    if changes:
        print(f"Runs since the last render in {out}:", *changes, sep="\n  ")
    print(summary(run))
    print("\n".join(tree(run)))
    print(f"wrote {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}\n")
    print(go_no_go(run))
    no_go = bool((run.exports.get("summary") or {}).get("noGo"))
    return NO_GO_EXIT if args.no_go_exit and no_go else 0


def _stack_and_file(stack: str | None, file: Path | None) -> tuple[str, Path | None]:
    """The stack's name and the file to read (None: the stack's own file at the root or in examples/)."""
    if file is not None:
        if not file.is_file():
            shown = str(file) if str(file).isprintable() else repr(str(file))
            raise ValueError(f"--file: {shown} is not a file")
        name = file.name
        if stack is None:
            if not (name.startswith("Pulumi.") and name.endswith(".yaml") and len(name) > len("Pulumi..yaml")):
                raise ValueError(f"--file: {name} is not named Pulumi.<stack>.yaml; name the stack with --stack")
            stack = name[len("Pulumi.") : -len(".yaml")]
    stack = "dev" if stack is None else stack
    problem = stack_name_problem(stack)
    if problem:
        raise ValueError(f"--stack: {stack!r} {problem}")
    return stack, file


if __name__ == "__main__":
    # A short-lived process whose objects all live until it exits: the cyclic garbage collector
    # only costs time here (about a third of a render), so it stays off, and what exists at the
    # end is frozen so that interpreter shutdown does not walk it either.
    gc.disable()
    status = main()
    gc.freeze()
    sys.exit(status)
