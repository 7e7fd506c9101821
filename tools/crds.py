"""The CRD schemas custom resources are validated against, from the Go modules of the pinned
releases (`facts.versions.CRD_MODULES`): Kueue, JobSet and gke-networking-api.

`python -m tools.crds fetch` (run by `make install`) downloads each module with
`go mod download` from the Go module proxy, reads its CustomResourceDefinitions, and caches
their schemas as JSON under `~/.cache/nemo-gke/crds/<module>@<version>.json` (or
`$XDG_CACHE_HOME`). Validation reads only that cache: no YAML parsing, no network, no Go.
Nothing taken from those modules is ever committed to this repository.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from facts.versions import CRD_MODULES, CrdModule

Schemas = dict[tuple[str, str], dict[str, Any]]


class CrdsMissing(Exception):
    """The cache lacks the CRDs of a pinned module; the message says how to fetch them."""


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "nemo-gke" / "crds"


def cache_file(module: CrdModule) -> Path:
    return cache_dir() / f"{module.module.replace('/', '_')}@{module.version}.json"


def _download(module: CrdModule) -> dict[str, Any]:
    go = shutil.which("go")
    if go is None:
        raise CrdsMissing("Go is not installed: `go mod download` fetches the CRD schemas (https://go.dev/dl/)")
    result = subprocess.run(
        [go, "mod", "download", "-json", f"{module.module}@{module.version}"],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    try:
        info: dict[str, Any] = json.loads(result.stdout)
    except ValueError:
        info = {"Error": result.stderr.strip() or f"go mod download exited with {result.returncode}"}
    if result.returncode or "Error" in info:
        raise CrdsMissing(f"go mod download {module.module}@{module.version} failed: {info.get('Error')}")
    return info


def fetch(module: CrdModule) -> Path:
    """Download one module and cache the schemas of every served version of its CRDs."""
    info = _download(module)
    folder = Path(info["Dir"]) / module.path
    schemas: dict[str, Any] = {}
    for path in sorted(folder.glob("*.yaml")):
        crd = yaml.load(path.read_text(), Loader=yaml.CSafeLoader)
        group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
        if group not in module.groups:
            continue
        for version in crd["spec"]["versions"]:
            if version.get("served", True):
                schemas[f"{group}/{version['name']} {kind}"] = version["schema"]["openAPIV3Schema"]
    if not schemas:
        raise CrdsMissing(f"{module.module}@{module.version} has no CRDs of {module.groups} under {module.path}")
    record = {
        "module": module.module,
        "version": info["Version"],
        "sum": info.get("Sum"),
        "tag": info.get("Origin", {}).get("Ref"),
        "schemas": schemas,
    }
    target = cache_file(module)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".partial")
    partial.write_text(json.dumps(record))
    partial.replace(target)
    return target


def cached(module: CrdModule) -> dict[str, Any]:
    path = cache_file(module)
    if not path.exists():
        raise CrdsMissing(
            f"the CRD schemas of {module.module}@{module.version} are not cached at {path}: "
            "run `make install` (it needs Go to fetch them)"
        )
    record: dict[str, Any] = json.loads(path.read_text())
    return record


@functools.cache
def schemas(modules: tuple[CrdModule, ...] = CRD_MODULES) -> Schemas:
    """(apiVersion, kind) → the CRD's openAPIV3Schema, for every pinned module."""
    found: Schemas = {}
    for module in modules:
        for key, schema in cached(module)["schemas"].items():
            api_version, kind = key.split(" ")
            found[(api_version, kind)] = schema
    return found


def groups(modules: Iterable[CrdModule] = CRD_MODULES) -> frozenset[str]:
    """API groups whose kinds must be validated against the cached CRDs."""
    return frozenset(group for module in modules for group in module.groups)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["fetch", "check"], help="fetch: download and cache; check: report")
    args = parser.parse_args(argv)
    try:
        for module in CRD_MODULES:
            if args.command == "fetch" and not cache_file(module).exists():
                fetch(module)
            record = cached(module)
            print(f"{module.module}@{record['version']}: {len(record['schemas'])} schemas, {cache_file(module)}")
    except CrdsMissing as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
