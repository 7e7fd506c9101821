"""The CEL rules (`x-kubernetes-validations`) of the pinned CRDs, evaluated as the API server
evaluates them, so a test sees what a real create or update of a custom resource would be told.

- On create every rule runs whose value is present, except transition rules (those naming
  `oldSelf`), which the API server runs only on update.
- On update a transition rule runs where the old object has a value at the same place: object
  fields by name, items of `x-kubernetes-list-type: map` lists by their keys; other list items
  have no old value (Kubernetes "Transition rules", k8s.io/apiextensions-apiserver
  `pkg/apiserver/schema/cel/validation.go`).
- A rule that does not evaluate to true, or fails to evaluate, is an error with its message.

The rules come from the same cache as the schemas (tools/crds.py fetches it, stacks/installed.py
reads it); cel-python evaluates them.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping
from typing import Any

import celpy
from celpy import celtypes
from celpy.adapter import json_to_cel
from celpy.evaluation import CELEvalError

from stacks import installed

_ABSENT = object()


@functools.cache
def _program(rule: str) -> celpy.Runner:
    environment = celpy.Environment()
    return environment.program(environment.compile(rule))


def _holds(rule: str, value: Any, old: Any) -> bool:
    activation = {"self": json_to_cel(value)}
    if old is not _ABSENT:
        activation["oldSelf"] = json_to_cel(old)
    try:
        result = _program(rule).evaluate(activation)
    except CELEvalError:  # an evaluation error refuses the object, as in the API server
        return False
    return isinstance(result, celtypes.BoolType) and bool(result)


def _is_transition(rule: Mapping[str, Any]) -> bool:
    return "oldSelf" in rule["rule"] and not rule.get("optionalOldSelf", False)


def _walk(schema: Mapping[str, Any], value: Any, old: Any, path: str) -> Iterator[str]:
    for rule in schema.get("x-kubernetes-validations", ()):
        if _is_transition(rule) and old is _ABSENT:
            continue
        if not _holds(rule["rule"], value, old if _is_transition(rule) else _ABSENT):
            yield f"{path or '<root>'}: {rule.get('message') or 'failed rule'} (rule: {rule['rule']})"
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        extra = schema.get("additionalProperties")
        for key, item in value.items():
            child = properties.get(key, extra if isinstance(extra, dict) else None)
            if child is not None:
                old_item = old.get(key, _ABSENT) if isinstance(old, dict) else _ABSENT
                yield from _walk(child, item, old_item, f"{path}.{key}" if path else key)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        keys = schema.get("x-kubernetes-list-map-keys") if schema.get("x-kubernetes-list-type") == "map" else None
        for index, item in enumerate(value):
            yield from _walk(schema["items"], item, _list_item(old, item, keys), f"{path}[{index}]")


def _list_item(old: Any, item: Any, keys: list[str] | None) -> Any:
    """The old item a map-list item corresponds to (same key fields), else absent."""
    if not keys or not isinstance(old, list) or not isinstance(item, dict):
        return _ABSENT
    for candidate in old:
        if isinstance(candidate, dict) and all(candidate.get(k) == item.get(k) for k in keys):
            return candidate
    return _ABSENT


def _schema(manifest: Mapping[str, Any]) -> Mapping[str, Any] | None:
    return installed.schemas().get((str(manifest.get("apiVersion")), str(manifest.get("kind"))))


def create_errors(manifest: Mapping[str, Any]) -> list[str]:
    """What the API server's CEL rules refuse in a new custom resource (empty: accepted)."""
    schema = _schema(manifest)
    return [] if schema is None else list(_walk(schema, dict(manifest), _ABSENT, ""))


def update_errors(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """What the CEL rules refuse when `old` is updated in place to `new` (empty: accepted)."""
    schema = _schema(new)
    return [] if schema is None else list(_walk(schema, dict(new), dict(old), ""))


# Who submits, as a ValidatingAdmissionPolicy's `request.userInfo` sees them: (username, groups).
User = tuple[str, tuple[str, ...]]
DEPLOYER: User = ("deployer@example.com", ("system:authenticated",))


def policy_refusals(
    policy: Mapping[str, Any], obj: Mapping[str, Any], old: Mapping[str, Any] | None = None, user: User = DEPLOYER
) -> list[str]:
    """The messages of a ValidatingAdmissionPolicy's validations that fail for `obj`, evaluated as
    the API server does: its variables first, in order, then each expression, with `object`,
    `oldObject`, `request` and `variables` bound."""
    request = {
        "operation": "UPDATE" if old is not None else "CREATE",
        "userInfo": {"username": user[0], "groups": list(user[1])},
    }
    activation: dict[str, Any] = {
        "object": json_to_cel(dict(obj)),
        "oldObject": json_to_cel(dict(old) if old is not None else None),
        "request": json_to_cel(request),
    }
    variables: dict[str, Any] = {}
    for variable in policy["spec"].get("variables", []):
        variables[variable["name"]] = _program(variable["expression"]).evaluate(
            {**activation, "variables": celtypes.MapType(variables)}
        )
    bound = {**activation, "variables": celtypes.MapType(variables)}
    return [v["message"] for v in policy["spec"]["validations"] if not bool(_program(v["expression"]).evaluate(bound))]
