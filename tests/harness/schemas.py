"""Validate what the program registers against real schemas.

- Kubernetes built-in kinds: `kubernetes-validate` in strict mode, for the Kubernetes minor
  the project targets.
- Kueue, JobSet and networking.gke.io kinds: the CRDs in `../shared/crds`, made strict the
  way the API server is with `fieldValidation=Strict` (unknown fields are errors).
- Pulumi resource inputs (GCP, Helm releases, providers): the provider SDK's own generated
  `*Args` classes, recursively, so a misspelt field anywhere inside a dict argument fails.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import importlib
import inspect
import json
import os
import re
import typing
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pulumi._types as pulumi_types
import yaml
from pulumi.output import Unknown

from components.versions import KUBERNETES_MINOR
from tests.harness.mocks import RecordedResource
from tests.harness.program import UNKNOWN

SHARED = Path(os.environ.get("NEMO_SHARED_DIR", Path(__file__).resolve().parents[3] / "shared"))
CRD_DIR = SHARED / "crds"
KUBERNETES_VERSION = f"{KUBERNETES_MINOR}.0"
# API groups whose kinds must be validated against ../shared/crds.
CRD_GROUPS = ("kueue.x-k8s.io", "jobset.x-k8s.io", "networking.gke.io")

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_NAME = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")
_OBJECT_META = {
    "name", "namespace", "labels", "annotations", "generateName", "finalizers", "ownerReferences",
}  # fmt: skip


# --------------------------------------------------------------------------- Kubernetes


def _strict(schema: Any) -> Any:
    """An OpenAPI v3 CRD schema as strict JSON Schema: unknown fields rejected, nullable honoured."""
    if isinstance(schema, list):
        return [_strict(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _strict(v) for k, v in schema.items()}
    closed = "additionalProperties" in out or out.get("x-kubernetes-preserve-unknown-fields")
    if out.get("type") == "object" and "properties" in out and not closed:
        out["additionalProperties"] = False
    if out.pop("nullable", False) and isinstance(out.get("type"), str):
        out["type"] = [out["type"], "null"]
    if isinstance(out.get("pattern"), str):
        # Go regexps allow ^(?i)…; Python wants inline flags first.
        out["pattern"] = re.sub(r"^\^\(\?([a-z]+)\)", r"(?\1)^", out["pattern"])
    return out


@functools.cache
def crd_schemas() -> dict[tuple[str, str], dict[str, Any]]:
    """(apiVersion, kind) → strict schema, for every CRD under ../shared/crds."""
    if not CRD_DIR.is_dir():
        raise FileNotFoundError(f"CRD schemas not found at {CRD_DIR}; set NEMO_SHARED_DIR to the shared/ folder")
    schemas: dict[tuple[str, str], dict[str, Any]] = {}
    for path in sorted(CRD_DIR.rglob("*.yaml")):
        crd = yaml.safe_load(path.read_text())
        group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
        for version in crd["spec"]["versions"]:
            if version.get("served", True):
                schema = _strict(copy.deepcopy(version["schema"]["openAPIV3Schema"]))
                schemas[(f"{group}/{version['name']}", kind)] = schema
    return schemas


def _check_metadata(manifest: Mapping[str, Any]) -> Iterator[str]:
    meta = manifest.get("metadata")
    if not isinstance(meta, dict):
        yield "metadata: missing"
        return
    for key in meta:
        if key not in _OBJECT_META:
            yield f"metadata.{key}: not an ObjectMeta field a manifest may set"
    name = meta.get("name")
    if not isinstance(name, str) or len(name) > 253 or not _DNS_SUBDOMAIN.match(name):
        yield f"metadata.name: {name!r} is not a DNS-1123 subdomain"
    for key, value in (meta.get("labels") or {}).items():
        if not _LABEL_NAME.match(key):
            yield f"metadata.labels: {key!r} is not a valid label key"
        if not isinstance(value, str) or not _LABEL_VALUE.match(value):
            yield f"metadata.labels.{key}: {value!r} is not a valid label value"
    for key, value in (meta.get("annotations") or {}).items():
        if not _LABEL_NAME.match(key) or not isinstance(value, str):
            yield f"metadata.annotations.{key}: annotation keys must be qualified names and values strings"


def kubernetes_errors(manifest: Mapping[str, Any]) -> list[str]:
    """Everything wrong with one Kubernetes object; empty when it is valid."""
    errors = list(_check_metadata(manifest))
    api_version, kind = manifest.get("apiVersion"), manifest.get("kind")
    schema = crd_schemas().get((str(api_version), str(kind)))
    if schema is not None:
        body = {k: v for k, v in manifest.items() if k != "metadata"}
        validator = jsonschema.Draft202012Validator(
            {**schema, "properties": {**schema.get("properties", {}), "metadata": {"type": "object"}}}
        )
        for error in validator.iter_errors({**body, "metadata": manifest.get("metadata", {})}):
            errors.append(f"{'.'.join(map(str, error.absolute_path)) or '<root>'}: {error.message}")
        return errors
    group = str(api_version).split("/")[0] if "/" in str(api_version) else ""
    if group in CRD_GROUPS:
        return [*errors, f"{api_version} {kind}: no CRD schema for this kind under {CRD_DIR}"]
    try:
        kubernetes_validate.validate(dict(manifest), KUBERNETES_VERSION, strict=True)
    except kubernetes_validate.utils.SchemaNotFoundError:
        errors.append(f"{api_version} {kind}: unknown to Kubernetes {KUBERNETES_VERSION} and to the shared CRDs")
    except kubernetes_validate.utils.ValidationError as error:
        path = ".".join(str(p) for p in getattr(error, "path", []))
        errors.append(f"{path or '<root>'}: {getattr(error, 'message', error)}")
    return errors


# --------------------------------------------------------------------------- Pulumi inputs


def _args_class(token: str) -> type:
    """The SDK *Args class of a resource type token (or of a provider)."""
    package, module, name = token.split(":")
    if package == "pulumi" and module == "providers":
        return typing.cast(type, importlib.import_module(f"pulumi_{name}").ProviderArgs)
    if package == "gcp":  # gcp:container/nodePool:NodePool -> pulumi_gcp.container
        python_module = f"pulumi_gcp.{module.split('/')[0]}"
    elif package == "kubernetes" and module.startswith("helm.sh/"):  # kubernetes:helm.sh/v3:Release
        python_module = f"pulumi_kubernetes.helm.{module.split('/')[1]}"
    else:
        raise KeyError(f"no SDK Args class known for {token}")
    return typing.cast(type, getattr(importlib.import_module(python_module), f"{name}Args"))


def _required(cls: type) -> set[str]:
    """Wire names of the constructor arguments without defaults."""
    py_to_wire = pulumi_types.input_type_py_to_pulumi_names(cls)
    params = inspect.signature(cls.__init__).parameters.values()
    return {
        py_to_wire.get(p.name, p.name)
        for p in params
        if p.default is inspect.Parameter.empty and p.kind is inspect.Parameter.KEYWORD_ONLY
    }


def _unwrap(tp: Any) -> Any:
    return pulumi_types.unwrap_type(tp)


def _type_errors(value: Any, tp: Any, path: str, json_strings: bool) -> Iterator[str]:
    tp = _unwrap(tp)
    if value is None or tp is Any or isinstance(value, Unknown) or value == UNKNOWN:
        return
    if isinstance(value, dict) and "4dabf18193072939515e22adb298388d" in value:  # secret sentinel
        yield from _type_errors(value.get("value"), tp, path, json_strings)
        return
    if json_strings and isinstance(value, str) and tp is not str:
        with contextlib.suppress(ValueError):
            value = json.loads(value)
    origin = typing.get_origin(tp)
    if origin is typing.Union:
        options = [a for a in typing.get_args(tp) if a is not type(None)]
        if not any(not list(_type_errors(value, option, path, json_strings)) for option in options):
            yield f"{path}: {value!r} matches none of {options}"
        return
    if isinstance(tp, type) and pulumi_types.is_input_type(tp):
        if not isinstance(value, dict):
            yield f"{path}: expected an object ({tp.__name__}), got {type(value).__name__}"
            return
        yield from _object_errors(value, tp, path, json_strings)
        return
    if origin in (list, Sequence, typing.Sequence, tuple) or tp in (list, tuple):
        if not isinstance(value, list):
            yield f"{path}: expected a list, got {type(value).__name__}"
            return
        (item,) = typing.get_args(tp)[:1] or (Any,)
        for i, element in enumerate(value):
            yield from _type_errors(element, item, f"{path}[{i}]", json_strings)
        return
    if origin in (dict, Mapping, typing.Mapping) or tp is dict:
        if not isinstance(value, dict):
            yield f"{path}: expected a map, got {type(value).__name__}"
            return
        args = typing.get_args(tp)
        for key, element in value.items():
            yield from _type_errors(element, args[1] if len(args) == 2 else Any, f"{path}.{key}", json_strings)
        return
    if tp is bool and not isinstance(value, bool):
        yield f"{path}: expected a boolean, got {value!r}"
    elif tp is int and (isinstance(value, bool) or not isinstance(value, (int, float)) or float(value) != int(value)):
        yield f"{path}: expected an integer, got {value!r}"
    elif tp is float and (isinstance(value, bool) or not isinstance(value, (int, float))):
        yield f"{path}: expected a number, got {value!r}"
    elif tp is str and not isinstance(value, str):
        yield f"{path}: expected a string, got {value!r}"


def _object_errors(value: Mapping[str, Any], cls: type, path: str, json_strings: bool) -> Iterator[str]:
    fields = pulumi_types.input_type_types(cls)
    for key, element in value.items():
        if key not in fields:
            known = ", ".join(sorted(fields))
            yield f"{path}.{key}: not a field of {cls.__name__} (fields: {known})"
            continue
        yield from _type_errors(element, fields[key], f"{path}.{key}", json_strings)
    for key in sorted(_required(cls) - set(value)):
        yield f"{path}.{key}: required by {cls.__name__}"


def pulumi_input_errors(resource: RecordedResource, *, preview: bool = False) -> list[str]:
    """Errors in a resource's inputs against its SDK Args class. In preview, inputs that
    depend on unknown outputs are absent, so required fields are not enforced."""
    cls = _args_class(resource.type)
    inputs = {k: v for k, v in resource.inputs.items() if not k.startswith("__")}
    providers = resource.type.startswith("pulumi:providers:")
    errors = list(_object_errors(inputs, cls, resource.type, json_strings=providers))
    if preview:
        errors = [e for e in errors if not e.endswith(f"required by {cls.__name__}")]
    return errors


# --------------------------------------------------------------------------- a whole run


def validated_types(resource: RecordedResource) -> str | None:
    """Which validator applies to a resource: 'kubernetes', 'pulumi', or None (components, reads)."""
    if not resource.custom or resource.read:
        return None
    if resource.type.startswith("kubernetes:") and not resource.type.startswith("kubernetes:helm.sh/"):
        return "kubernetes"
    if resource.type.startswith(("gcp:", "kubernetes:helm.sh/", "pulumi:providers:")):
        return "pulumi"
    return None


def resource_errors(resource: RecordedResource, manifest: Mapping[str, Any], *, preview: bool) -> list[str]:
    kind = validated_types(resource)
    if kind == "kubernetes":
        # Values only known after apply are fine wherever they sit.
        return [e for e in kubernetes_errors(manifest) if UNKNOWN not in e]
    if kind == "pulumi":
        return pulumi_input_errors(resource, preview=preview)
    if resource.custom and not resource.read:
        return [f"{resource.type}: no schema to validate this resource type against"]
    return []
