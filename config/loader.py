"""Turn a stack's raw `nemo-gke:*` values into a `StackConfig`, or into one line per bad key.

The values arrive as Pulumi hands them to a program: scalars as strings, objects and lists as
JSON. Every problem is reported at once, each naming the full key the user wrote.
"""

from __future__ import annotations

import difflib
import json
import re
import types
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

from config.stack import ENVIRONMENT_LAYERS, Layer, StackConfig
from facts.errors import RuleError
from facts.project import PROJECT
from facts.pulumi_cli import SECRET_STAND_IN, YAML_11_BOOLEANS, rounded_by_config

# Longest value a message shows whole; longer ones are cut and their length given.
MAX_SHOWN_VALUE = 80


@dataclass(frozen=True)
class ConfigIssue:
    key: str
    value: Any
    message: str

    def __str__(self) -> str:
        return f"{PROJECT}:{visible(self.key)}{shown_value(self.value)}: {self.message}"


def visible(text: str) -> str:
    """`text` with every character that prints as nothing (a zero-width space, a control) escaped."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in text)


def shown_value(value: Any) -> str:
    """` = <value as JSON>`, cut after MAX_SHOWN_VALUE characters; "" for no value."""
    if value is None:
        return ""
    text = json.dumps(value, default=str)
    if len(text) > MAX_SHOWN_VALUE:
        size = len(value) if isinstance(value, str) else len(text)
        text = f"{text[:MAX_SHOWN_VALUE]}… ({size} characters)"
    return f" = {text}"


class ConfigError(ValueError):
    """Invalid stack configuration: `issues` holds one entry per bad key."""

    def __init__(self, issues: list[ConfigIssue]) -> None:
        self.issues = issues
        lines = "\n".join(f"  {issue}" for issue in issues)
        super().__init__(f"invalid stack configuration:\n{lines}")

    @classmethod
    def of(cls, errors: Iterable[RuleError]) -> ConfigError:
        return cls([ConfigIssue(key=e.key, value=e.value, message=str(e)) for e in errors])


def _join(loc: Iterable[str | int]) -> str:
    key = ""
    for part in loc:
        key += f"[{part}]" if isinstance(part, int) else (f".{part}" if key else part)
    return key


def unwrap_annotation(annotation: Any) -> Any:
    """The model class behind Optional/tuple/list/dict annotations, if any."""
    while True:
        origin = get_origin(annotation)
        if origin is Annotated:
            annotation = get_args(annotation)[0]
        elif origin in (Union, types.UnionType, tuple, list, dict):
            args = [a for a in get_args(annotation) if a is not type(None) and a is not Ellipsis]
            annotation = args[-1] if args else None
        else:
            return annotation


def _model_at(loc: tuple[str | int, ...]) -> type[BaseModel] | None:
    model: type[BaseModel] | None = StackConfig
    for part in loc:
        if model is None:
            return None
        if isinstance(part, int):
            continue
        fields_by_alias = {f.alias or name: f for name, f in model.model_fields.items()}
        field = fields_by_alias.get(part)
        if field is None:
            return None
        candidate = unwrap_annotation(field.annotation)
        model = candidate if isinstance(candidate, type) and issubclass(candidate, BaseModel) else None
    return model


def _known_keys(model: type[BaseModel]) -> str:
    return ", ".join(f.alias or name for name, f in model.model_fields.items())


def _issue(error: Mapping[str, Any]) -> ConfigIssue:
    loc = tuple(error["loc"])
    cause = error.get("ctx", {}).get("error")
    if isinstance(cause, RuleError):
        return ConfigIssue(
            key=_join((*loc, *cause.key.split("."))) if cause.key else _join(loc), value=cause.value, message=str(cause)
        )
    if error["type"] == "extra_forbidden":
        parent = _model_at(loc[:-1])
        known = f"; known keys here: {_known_keys(parent)}" if parent else ""
        return ConfigIssue(key=_join(loc), value=None, message=f"unknown key{known}")
    if error["type"] == "missing":
        return ConfigIssue(key=_join(loc), value=None, message="is required")
    if error["type"] == "too_long":
        ctx = error.get("ctx", {})
        message = f"has {ctx.get('actual_length')} entries; at most {ctx.get('max_length')} are allowed"
        return ConfigIssue(key=_join(loc), value=None, message=message)
    if error["type"] == "bool_type" and isinstance(error.get("input"), str) and error["input"] in YAML_11_BOOLEANS:
        message = "must be true or false: the Pulumi CLI reads YAML 1.2, in which this word is text"
        return ConfigIssue(key=_join(loc), value=error["input"], message=message)
    if error["type"].startswith(_RANGE_ERRORS) and rounded_by_config(error.get("input")):
        message = (
            f"is far out of range{_bounds(loc)}; a whole number beyond 64 bits reaches the program rounded "
            "(Pulumi's config holds it as a float), hence the digits shown"
        )
        return ConfigIssue(key=_join(loc), value=error["input"], message=message)
    message = error["msg"].removeprefix("Value error, ")
    return ConfigIssue(key=_join(loc), value=error.get("input"), message=message)


# pydantic's errors for a number of the wrong size or kind, where a rounded one can land.
_RANGE_ERRORS = ("int_", "float_", "less_than", "greater_than")


def _bounds(loc: tuple[str | int, ...]) -> str:
    """` (from <ge> to <le>)` as the field at `loc` declares them; "" where it declares none."""
    model = _model_at(loc[:-1])
    fields = {f.alias or name: f for name, f in model.model_fields.items()} if model else {}
    field = fields.get(loc[-1]) if isinstance(loc[-1], str) else None
    limits = {k: getattr(m, k) for m in (field.metadata if field else ()) for k in ("ge", "le") if hasattr(m, k)}
    if not limits:
        return ""
    return " (" + " ".join(f"{word} {limits[k]}" for word, k in (("from", "ge"), ("to", "le")) if k in limits) + ")"


# What each scalar type pydantic tries in a union of scalars is, in a stack file's words.
_SCALAR_TAGS = {"str": "a string", "int": "an integer", "float": "a number", "bool": "true or false"}


def _unions(errors: list[Any]) -> list[Any]:
    """One error for a value that no member of a union of scalars takes: pydantic reports each
    member at the value's location plus the member's tag (`overrides.x.str`, `.int`, ...)."""
    merged: dict[tuple[Any, ...], list[Any]] = {}
    rest = []
    for error in errors:
        loc = tuple(error["loc"])
        if loc and loc[-1] in _SCALAR_TAGS:
            merged.setdefault(loc[:-1], []).append(error)
        else:
            rest.append(error)
    for loc, members in merged.items():
        value = members[0].get("input")
        kind = "a mapping" if isinstance(value, dict) else "a list" if isinstance(value, list) else "this value"
        wanted = ", ".join(_SCALAR_TAGS[e["loc"][-1]] for e in members)
        hint = ": write a nested setting as one dotted key (a.b.c: value)" if isinstance(value, dict) else ""
        rest.append({"type": "value_error", "loc": loc, "input": value, "msg": f"must be {wanted}, not {kind}{hint}"})
    return rest


def _causes(errors: list[Any]) -> list[Any]:
    """The errors, less a list's length check that failed only because items inside it were
    refused: pydantic counts a refused item out, so one bad pool would also read "at least 1
    item, not 0"."""
    locations = [tuple(e["loc"]) for e in errors]

    def refused_inside(loc: tuple[Any, ...]) -> bool:
        return any(len(other) > len(loc) and other[: len(loc)] == loc for other in locations)

    return [e for e in errors if not (e["type"] == "too_short" and refused_inside(tuple(e["loc"])))]


def _decode(value: str) -> Any:
    """Pulumi hands structured values to programs as JSON strings, scalars as plain strings."""
    try:
        return json.loads(value)
    except ValueError:
        return value


def _creates_cluster(data: Mapping[str, Any]) -> bool:
    """Whether the raw config deploys the cluster layer (the default layers do)."""
    layers = data.get("layers", [layer.value for layer in ENVIRONMENT_LAYERS])
    return isinstance(layers, list) and Layer.CLUSTER.value in layers and "existingCluster" not in data


def default_cluster_name(stack: str) -> str:
    return f"nemo-{stack}"


def _blame_the_stack_name(issue: ConfigIssue, stack: str) -> ConfigIssue:
    """The default cluster name comes from the stack name: say so, and how to choose one."""
    if issue.key != "cluster.name":
        return issue
    return ConfigIssue(
        key=issue.key,
        value=None,
        message=f"defaults to nemo-<stack> = {default_cluster_name(stack)!r}, which {issue.message}: the stack "
        f"name {stack!r} is too long or not lower-case; set a name with "
        f"`pulumi config set --path {PROJECT}:cluster.name <name>`",
    )


def _refuse_unnested_paths(data: Mapping[str, Any]) -> None:
    """A key such as `cluster.name` at the top: what `pulumi config set` without `--path` stores
    (a key of its own, with a dot in it), where a nested `cluster: {name: ...}` was meant."""
    fields = {f.alias or name for name, f in StackConfig.model_fields.items()}
    issues = [
        ConfigIssue(
            key=key,
            value=value,
            message=f"is one key with a dot in it, as `pulumi config set` stores a path given without --path: "
            f"set it with `pulumi config set --path '{PROJECT}:{key}' <value>` (it nests under {key.split('.')[0]}), "
            f"and remove this one with `pulumi config rm '{PROJECT}:{key}'`",
        )
        for key, value in data.items()
        if "." in key and key.split(".")[0].split("[")[0] in fields
    ]
    if issues:
        raise ConfigError(issues)


def parse_stack_config(raw: Mapping[str, str], stack: str) -> StackConfig:
    """Validate the `nemo-gke:*` values of a stack. Raises ConfigError naming every bad key."""
    prefix = f"{PROJECT}:"
    data: dict[str, Any] = {key[len(prefix) :]: _decode(value) for key, value in raw.items() if key.startswith(prefix)}
    _refuse_unnested_paths(data)
    cluster = data.get("cluster")
    named = isinstance(cluster, dict) and "name" in cluster
    if isinstance(cluster, dict) and not named:
        data["cluster"] = {**cluster, "name": default_cluster_name(stack)}
    elif cluster is None and _creates_cluster(data):
        data["cluster"] = {"name": default_cluster_name(stack)}
    try:
        # JSON mode: strict types, with JSON arrays accepted for tuples and strings for enums.
        return StackConfig.from_plain(data)
    except ValidationError as exc:
        issues = [_issue(e) for e in _unions(_causes(exc.errors()))]
        raise ConfigError(issues if named else [_blame_the_stack_name(i, stack) for i in issues]) from None


def without_secrets(error: ConfigError, secret_keys: Iterable[str]) -> list[ConfigIssue]:
    """The error's issues, with the value of any issue under a secret key (full keys, as
    PULUMI_CONFIG_SECRET_KEYS lists them) hidden: a message never shows a secret."""
    secret = set(secret_keys)

    def masked(issue: ConfigIssue) -> ConfigIssue:
        top = re.split(r"[.\[]", issue.key, maxsplit=1)[0]
        if issue.value is None or f"{PROJECT}:{top}" not in secret:
            return issue
        if issue.value == SECRET_STAND_IN:
            # What the offline render (or a CLI that cannot decrypt) hands over: not the user's value.
            why = (
                "is encrypted, and this run cannot decrypt it while the program checks its value before anything "
                "is created; `pulumi preview` and `pulumi up` decrypt and check it. To render offline, give it in "
                f"plain text (the check it must pass: {issue.message})"
            )
            return ConfigIssue(key=issue.key, value=SECRET_STAND_IN, message=why)
        return ConfigIssue(key=issue.key, value=SECRET_STAND_IN, message=issue.message)

    return [masked(issue) for issue in error.issues]


# Namespaces whose keys the program may be handed without reading them: Pulumi's own settings.
PULUMI_NAMESPACE = "pulumi"

# Keys of providers this program never configures from stack config (its providers are explicit),
# and the key of this project that does what the user meant.
PROVIDER_KEYS_READ_ELSEWHERE = {
    "gcp:project": f"{PROJECT}:project",
    "gcp:region": f"{PROJECT}:region",
    "gcp:zone": f"{PROJECT}:zone",
    "kubernetes:kubeconfig": f"{PROJECT}:existingCluster.kubeconfig",
    "kubernetes:context": f"{PROJECT}:existingCluster.context",
}


def unread_keys(raw: Mapping[str, str]) -> list[str]:
    """Warnings for keys the program is handed but never reads: Pulumi would otherwise ignore them
    without a word. Keys of Pulumi itself (`pulumi:*`) are the engine's."""
    warnings = []
    for key in sorted(raw):
        namespace, _, name = key.partition(":")
        if namespace in (PROJECT, PULUMI_NAMESPACE):
            continue
        shown = visible(key)
        if difflib.get_close_matches(namespace.lower(), [PROJECT], n=1, cutoff=0.75):
            warnings.append(
                f"config key {shown!r} is ignored: its namespace is not {PROJECT}; did you mean {PROJECT}:{name}?"
            )
        elif key in PROVIDER_KEYS_READ_ELSEWHERE:
            warnings.append(
                f"config key {shown!r} is ignored: this program's {namespace} provider takes its settings from "
                f"{PROVIDER_KEYS_READ_ELSEWHERE[key]}"
            )
        else:
            warnings.append(
                f"config key {shown!r} is ignored: this program reads only {PROJECT}:* keys (its {namespace} "
                "resources, if any, take their settings from those)"
            )
    return warnings
