"""What `make install` fetched for the pinned releases, read back: the CRD schemas objects are
validated against, and the CRD manifests the program applies itself (a chart that ships its
CRDs in `crds/` never upgrades them: facts.versions.JOBSET_CRD).

`tools/crds.py` downloads each module of facts.versions.CRD_MODULES from the Go module proxy
and writes one JSON record per module and version under `~/.cache/nemo-gke/crds/` (or
`$XDG_CACHE_HOME`). Nothing taken from those modules is committed to this repository.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from facts.versions import CRD_MODULES, CrdModule

# (apiVersion, kind) → a CRD's openAPIV3Schema.
Schemas = dict[tuple[str, str], dict[str, Any]]

# Bumped when the record's layout changes, so that `make install` fetches again.
CACHE_FORMAT = 2


class NotInstalled(Exception):
    """The cache lacks what a pinned module provides; the message says how to fetch it."""


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "nemo-gke" / "crds"


def cache_file(module: CrdModule) -> Path:
    return cache_dir() / f"{module.module.replace('/', '_')}@{module.version}.json"


def record(module: CrdModule) -> dict[str, Any]:
    """The cached record of one module: its schemas and the manifests of its applied CRDs."""
    path = cache_file(module)
    found: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}
    if found.get("format") != CACHE_FORMAT:
        raise NotInstalled(
            f"the CRDs of {module.module}@{module.version} are not cached at {path}: run `make install` "
            "(Go fetches them from the Go module proxy)"
        )
    return found


def crd_manifest(module: CrdModule, name: str) -> dict[str, Any]:
    """The CustomResourceDefinition `name` of the module, as released."""
    manifests: dict[str, dict[str, Any]] = record(module)["manifests"]
    if name not in manifests:
        raise NotInstalled(f"{module.module}@{module.version} has no cached CRD {name}: run `make install`")
    return manifests[name]


@functools.cache
def schemas(modules: tuple[CrdModule, ...] = CRD_MODULES) -> Schemas:
    """(apiVersion, kind) → the CRD's openAPIV3Schema, for every pinned module."""
    found: Schemas = {}
    for module in modules:
        for key, schema in record(module)["schemas"].items():
            api_version, kind = key.split(" ")
            found[(api_version, kind)] = schema
    return found


def groups(modules: Iterable[CrdModule] = CRD_MODULES) -> frozenset[str]:
    """API groups whose kinds must be validated against the cached CRDs."""
    return frozenset(group for module in modules for group in module.groups)
