"""The CRDs of the pinned releases (`facts.versions.CRD_MODULES`: Kueue, JobSet and
gke-networking-api), fetched from their Go modules.

`python -m tools.crds fetch` (run by `make install`) downloads each module with
`go mod download` (or, without Go, straight from the Go module proxy), checks it against the
hash pinned in facts.versions, reads its CustomResourceDefinitions, and caches
their schemas (what custom resources are validated against) and the manifests of the CRDs the
program applies itself as JSON under `~/.cache/nemo-gke/crds/<module>@<version>.json`
(stacks.installed reads it). Validation and the program read only that cache: no YAML
parsing, no network, no Go. Nothing taken from those modules is ever committed here.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import urllib.request
import zipfile
from pathlib import Path
from typing import Any

import yaml

from facts.versions import CRD_MODULES, CrdModule
from stacks.installed import CACHE_FORMAT, NotInstalled, cache_dir, cache_file
from stacks.installed import record as cached


def hash1(archive: zipfile.ZipFile) -> str:
    """The `h1:` hash of a module zip, as go.sum records it (golang.org/x/mod/sumdb/dirhash
    Hash1: SHA-256 over the sorted lines `<sha256 of the file>  <name>`)."""
    digest = hashlib.sha256()
    for name in sorted(n for n in archive.namelist() if not n.endswith("/")):
        digest.update(f"{hashlib.sha256(archive.read(name)).hexdigest()}  {name}\n".encode())
    return "h1:" + base64.b64encode(digest.digest()).decode()


def escaped(module: str) -> str:
    """A module path as the module proxy protocol spells it: capitals as `!` + lower case."""
    return re.sub(r"[A-Z]", lambda m: "!" + m.group(0).lower(), module)


def _with_go(go: str, module: CrdModule) -> Path:
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
        raise NotInstalled(f"go mod download {module.module}@{module.version} failed: {info.get('Error')}")
    if info.get("Sum") != module.sum:
        raise NotInstalled(f"{module.module}@{module.version} hashes to {info.get('Sum')}, not the pinned {module.sum}")
    return Path(info["Dir"])


def _from_proxy(module: CrdModule) -> Path:
    """Without Go: the module's zip from the Go module proxy over HTTPS, checked against the
    pinned go.sum hash before anything is read from it."""
    root = cache_dir().parent / "modules" / f"{escaped(module.module)}@{module.version}"
    tree = root / f"{module.module}@{module.version}"
    if tree.is_dir():
        return tree
    proxy = next(
        (p for p in os.environ.get("GOPROXY", "").split(",") if p.startswith("https://")), "https://proxy.golang.org"
    )
    url = f"{proxy.rstrip('/')}/{escaped(module.module)}/@v/{module.version}.zip"
    try:
        with urllib.request.urlopen(url, timeout=300) as response:
            archive = zipfile.ZipFile(io.BytesIO(response.read()))
    except (OSError, zipfile.BadZipFile) as error:
        raise NotInstalled(f"could not download {url}: {error}") from None
    if hash1(archive) != module.sum:
        raise NotInstalled(f"{url} hashes to {hash1(archive)}, not the pinned {module.sum}")
    partial = root.parent / f"{root.name}.partial"
    shutil.rmtree(partial, ignore_errors=True)
    archive.extractall(partial)
    partial.replace(root)
    return tree


def module_dir(module: CrdModule) -> Path:
    """The module's source tree: from `go mod download` where Go is installed, else from the
    Go module proxy directly; either way checked against the pinned hash."""
    go = shutil.which("go")
    return _with_go(go, module) if go else _from_proxy(module)


def fetch(module: CrdModule) -> Path:
    """Download one module and cache the schemas of every served version of its CRDs, and the
    manifests of the CRDs the program applies."""
    folder = module_dir(module) / module.path
    schemas: dict[str, Any] = {}
    manifests: dict[str, Any] = {}
    for path in sorted(folder.glob("*.yaml")):
        crd = yaml.load(path.read_text(), Loader=yaml.CSafeLoader)
        group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
        if group not in module.groups:
            continue
        for version in crd["spec"]["versions"]:
            if version.get("served", True):
                schemas[f"{group}/{version['name']} {kind}"] = version["schema"]["openAPIV3Schema"]
        if crd["metadata"]["name"] in module.applied:
            manifests[crd["metadata"]["name"]] = crd
    if not schemas or set(manifests) != set(module.applied):
        raise NotInstalled(
            f"{module.module}@{module.version} lacks CRDs of {module.groups} or {module.applied} under {module.path}"
        )
    record = {
        "format": CACHE_FORMAT,
        "module": module.module,
        "version": module.version,
        "sum": module.sum,
        "schemas": schemas,
        "manifests": manifests,
    }
    target = cache_file(module)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".partial")
    partial.write_text(json.dumps(record))
    partial.replace(target)
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["fetch", "check"], help="fetch: download and cache; check: report")
    args = parser.parse_args(argv)
    try:
        for module in CRD_MODULES:
            if args.command == "fetch":
                try:
                    cached(module)
                except NotInstalled:
                    fetch(module)
            record = cached(module)
            print(f"{module.module}@{record['version']}: {len(record['schemas'])} schemas, {cache_file(module)}")
    except NotInstalled as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
