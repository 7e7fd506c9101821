"""Validate what the program registers against real schemas.

- Kubernetes built-in kinds: the strict schemas `kubernetes-validate` ships, for the Kubernetes
  minor the project targets (facts.versions.KUBERNETES_MINOR), each loaded once.
- Kueue, JobSet and networking.gke.io kinds: the CRDs of the pinned releases (fetched by
  tools/crds.py, read back by stacks/installed.py),
  made strict the way the API server is with `fieldValidation=Strict` (unknown fields are
  errors), and their CEL rules (`x-kubernetes-validations`) as on create (harness/cel.py).
- Pulumi resource inputs (GCP, Helm releases, providers): the provider SDK's own generated
  `*Args` classes, recursively, so a misspelt field anywhere inside a dict argument fails.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import inspect
import json
import re
import typing
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import jsonschema
import pulumi._types as pulumi_types
from kubernetes_validate import utils as kubernetes_schemas
from packaging.version import Version
from pulumi.output import Unknown
from referencing import Registry, Resource

from facts.versions import KUBERNETES_MINOR
from harness import cel
from harness.mocks import RecordedResource
from harness.runner import SECRET_SENTINEL, UNKNOWN
from stacks import installed

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
def _crd_validator(api_version: str, kind: str) -> jsonschema.Draft202012Validator | None:
    """A validator for one custom kind; None when no pinned CRD defines it."""
    schema = installed.schemas().get((api_version, kind))
    if schema is None:
        return None
    strict = _strict(schema)
    # The API server validates metadata itself (checked below); the CRD leaves it open.
    strict["properties"] = {**strict.get("properties", {}), "metadata": {"type": "object"}}
    return jsonschema.Draft202012Validator(strict)


@functools.cache
def _builtin_schema_dir() -> str:
    """kubernetes-validate's strict schemas for the newest minor not after the targeted one."""
    target = Version(KUBERNETES_MINOR)
    version = [v for v in kubernetes_schemas.all_versions() if Version(v) <= target][-1]
    return f"kubernetes-json-schema/v{version}-local-strict"


@functools.cache
def _builtin_validator(api_version: str, kind: str) -> jsonschema.Draft202012Validator | None:
    """A validator for one built-in kind; None when Kubernetes has no such kind."""
    folder = _builtin_schema_dir()
    api = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    try:
        schema = kubernetes_schemas.schema_contents(f"{folder}/{kind.lower()}-{api}.json", KUBERNETES_MINOR)
    except FileNotFoundError:
        return None
    registry: Registry[Any] = Resource.from_contents(schema) @ Registry()
    registry = _definitions(folder) @ registry
    return jsonschema.Draft202012Validator(schema, registry=registry)


@functools.cache
def _definitions(folder: str) -> Resource[Any]:
    return Resource.from_contents(kubernetes_schemas.schema_contents(f"{folder}/_definitions.json", KUBERNETES_MINOR))


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


def is_custom(manifest: Mapping[str, Any]) -> bool:
    """Whether the object's API group is one the pinned CRDs define."""
    api_version = str(manifest.get("apiVersion"))
    return "/" in api_version and api_version.split("/", maxsplit=1)[0] in installed.groups()


def kubernetes_errors(manifest: Mapping[str, Any]) -> list[str]:
    """Everything wrong with one Kubernetes object; empty when it is valid."""
    errors = list(_check_metadata(manifest))
    api_version, kind = str(manifest.get("apiVersion")), str(manifest.get("kind"))
    if is_custom(manifest):
        validator = _crd_validator(api_version, kind)
        if validator is None:
            return [*errors, f"{api_version} {kind}: no CRD schema for this kind in the pinned modules"]
    else:
        validator = _builtin_validator(api_version, kind)
        if validator is None:
            return [*errors, f"{api_version} {kind}: unknown to Kubernetes {KUBERNETES_MINOR} and to the pinned CRDs"]
    for error in validator.iter_errors(dict(manifest)):
        errors.append(f"{'.'.join(map(str, error.absolute_path)) or '<root>'}: {error.message}")
    if is_custom(manifest) and not errors:
        errors += cel.create_errors(manifest)
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
    params = inspect.signature(cls).parameters.values()
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
    if isinstance(value, dict) and SECRET_SENTINEL in value:
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
