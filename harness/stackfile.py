"""Read a stack file as the Pulumi CLI reads it, and say where that differs from what it looks like.

The CLI (pulumi/pulumi `sdk/go/common/workspace/loaders.go` `LoadProjectStackBytes`, v3.259.0) parses
`Pulumi.<stack>.yaml` with gopkg.in/yaml.v3 (v3.0.1), gives every key of `config:` without a colon the
project's namespace (`stackConfigNamespacedWithProject`), parses each key (`resource/config/key.go`
`ParseKey`: `<namespace>:<name>`, or the old `<namespace>:config:<name>`), turns every value into a
config object (`resource/config/object.go` `unmarshalObject`) and hands the program each top-level value
as text (`Map.Decrypt`): a string as it is, any other scalar as its JSON text, an object or a list as
JSON, a null as the empty string, a `secure:` leaf decrypted wherever it sits.

yaml.v3 is YAML 1.2 with two YAML 1.1 habits kept (`resolve.go`): `010` is octal (8), and a plain
scalar shaped like a timestamp becomes a time, which Pulumi writes as Go's `time.Time.String()`
(`2026-01-01 00:00:00 +0000 UTC`). `yes`, `on` and `1:30` are strings; `<<` merges; a key given twice in
one mapping is refused; NaN and infinities are refused when Pulumi writes the value as JSON. Every rule
below was compared with the CLI's own code on the same files (`make integration` does so again).

What the CLI accepts but would surprise the author is refused here (a key without the project's
namespace, a key outside `config:`, which the CLI ignores) or reported as advice (an octal number).
The render cannot decrypt a `secure:` value: SECRET_STAND_IN stands in, as the CLI's blinding decrypter
writes it, and its key is secret.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any, cast

import yaml

from facts.pulumi_cli import INT64_LIMIT, SECRET_STAND_IN

# The keys a stack file may hold beside `config:` (workspace/project.go `ProjectStack`).
STACK_FILE_KEYS = ("secretsprovider", "encryptedkey", "encryptionsalt", "config", "environment")

# yaml.v3 refuses a document whose aliases expand it far beyond its size (decode.go
# `allowedAliasRatio`); a stack file has no use for more values than this.
MAX_VALUES = 100_000
# Likewise nesting: yaml.v3 stops at 10,000 levels (scannerc.go max_flow_level, max_indents), and
# the deepest key of the config is a handful of levels down; PyYAML's composer recurses per level.
MAX_DEPTH = 100

_PLAIN = "!plain"
_YAML = "tag:yaml.org,2002:"
_FLOAT = re.compile(r"^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$")  # resolve.go yamlStyleFloat
_NULLS = ("", "~", "null", "Null", "NULL")
_BOOLS = {"true": True, "True": True, "TRUE": True, "false": False, "False": False, "FALSE": False}
_SPECIAL_FLOATS = {
    **dict.fromkeys((".nan", ".NaN", ".NAN"), math.nan),
    **dict.fromkeys((".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF"), math.inf),
    **dict.fromkeys(("-.inf", "-.Inf", "-.INF"), -math.inf),
}
# resolve.go allowedTimestampFormats: `2006-1-2T15:4:5.999999999Z07:00` (T or t), `2006-1-2 15:4:5.999999999`
# and `2006-1-2`, read by Go's time.Parse.
_TIMESTAMP = re.compile(
    r"^(\d{4})-(\d{1,2})-(\d{1,2})"
    r"(?:(?:[Tt](\d{1,2}):(\d{1,2}):(\d{1,2})([.,]\d+)?(Z|[+-]\d{2}:\d{2}))"
    r"|(?: (\d{1,2}):(\d{1,2}):(\d{1,2})([.,]\d+)?))?$"
)
_UINT64 = 2**64


class StackFileError(ValueError):
    """A stack file the CLI refuses, or would read other than it looks: one line per problem."""


@dataclass(frozen=True)
class StackFile:
    """A stack file's config as the program receives it: `values` by full key, as JSON-shaped data
    (`to_pulumi_config` gives the CLI's text), `secret_keys` whose value holds a `secure:` leaf, and
    advice where the CLI's reading differs from what the file seems to say."""

    values: dict[str, Any]
    secret_keys: tuple[str, ...] = ()
    advice: tuple[str, ...] = field(default=())


def read_stack_file(path: Path, project: str) -> StackFile:
    """The `config:` of the stack file at `path`, read as the Pulumi CLI reads it."""
    try:
        text = path.read_text(encoding="utf-8-sig")  # the CLI strips a UTF-8 byte-order mark
    except UnicodeDecodeError:
        raise StackFileError(f"{path.name}: not UTF-8 text") from None
    except OSError as error:
        raise StackFileError(f"{path}: cannot be read ({error.strerror or error})") from None
    return parse_stack_file(text, path.name, project)


def parse_stack_file(text: str, name: str, project: str) -> StackFile:
    """The CLI's reading of a stack file's text; StackFileError, one line per problem, where the CLI
    refuses it or where its reading differs from what the file seems to say."""
    reading = _read(text, name, project)
    _raise([*reading.refused, *reading.surprising])
    secret_keys = tuple(sorted(key for key, value in reading.values.items() if holds_secret(value)))
    return StackFile(reading.values, secret_keys, tuple(reading.advice))


def cli_reading(text: str, project: str) -> dict[str, str]:
    """Exactly what the CLI hands the program for this text (PULUMI_CONFIG), bare keys included;
    StackFileError where the CLI refuses the file. The lane compares it with the CLI's own code."""
    reading = _read(text, "stack file", project)
    _raise(reading.refused)
    return to_pulumi_config(reading.values)


@dataclass
class _Reading:
    values: dict[str, Any] = field(default_factory=dict)
    refused: list[str] = field(default_factory=list)  # what the CLI refuses
    surprising: list[str] = field(default_factory=list)  # what the CLI reads other than it looks
    advice: list[str] = field(default_factory=list)


def _read(text: str, name: str, project: str) -> _Reading:
    reading = _Reading()
    try:
        _check_depth(text, name)
        root = yaml.compose(text, Loader=_Loader)
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark
        where = f":{mark.line + 1}" if mark is not None else ""
        raise StackFileError(f"{name}{where}: not YAML: {error.problem or error.context}") from None
    except yaml.YAMLError as error:
        raise StackFileError(f"{name}: not YAML: {str(error).splitlines()[0]}") from None
    if root is None:
        return reading
    if not isinstance(root, yaml.MappingNode):
        raise StackFileError(f"{name}: must be a YAML mapping with a `config:` mapping of keys to values")
    reader = _Reader(name)
    config: yaml.Node | None = None
    for key_node, value_node in reader.pairs(root):
        key = key_node.value if isinstance(key_node, yaml.ScalarNode) else _kind(key_node)
        line = key_node.start_mark.line + 1
        if key == "config":
            config = value_node
        elif key == "environment":
            reading.advice.append(
                f"{name}:{line}: `environment:` is not read by the render: config that a Pulumi ESC environment "
                "provides is missing here, and present under `pulumi up`"
            )
        elif key not in STACK_FILE_KEYS:
            fix = "move it under `config:`" if ":" in key else f"a stack file holds only {', '.join(STACK_FILE_KEYS)}"
            reading.surprising.append(
                f"{name}:{line}: {key!r} is outside `config:`, so the Pulumi CLI ignores it; {fix}"
            )
    if config is None or _is_null(config):
        return reading
    if not isinstance(config, yaml.MappingNode):
        raise StackFileError(
            f"{name}:{config.start_mark.line + 1}: `config:` must map keys to values "
            f"(the Pulumi CLI refuses a {_kind(config)} here)"
        )
    written_as: dict[str, str] = {}
    for key_node, value_node in reader.merged_pairs(config):
        line = key_node.start_mark.line + 1
        written = reader.config_key_text(key_node)
        key = None if written is None else _config_key(written, project)
        if written is None or key is None:
            shown = written if written is not None else reader.shown(key_node)
            reading.refused.append(
                f"{name}:{line}: the Pulumi CLI cannot parse {shown!r} as a configuration key "
                "(configuration keys should be of the form `<namespace>:<name>`)"
            )
            continue
        if ":" not in written:
            reading.surprising.append(
                f"{name}:{line}: config key {written!r} has no namespace: the Pulumi CLI reads it as {key!r}; "
                f"write `{key}`"
            )
        if key in written_as:
            reading.surprising.append(
                f"{name}:{line}: {written!r} and {written_as[key]!r} are one key, {key!r}, to the Pulumi CLI, "
                "which keeps either; keep one"
            )
        written_as[key] = written
        try:
            value = reader.value(value_node)
        except StackFileError as error:
            reading.refused.append(f"{name}:{error}")
        else:
            reading.values[key] = value if isinstance(value, str | int | float | None) else _inside_json(value)
    reading.advice.extend(f"{name}:{line}: {message}" for line, message in reader.advice)
    return reading


def _raise(problems: list[str]) -> None:
    if problems:
        raise StackFileError("\n".join(problems))


def holds_secret(value: Any) -> bool:
    """Whether a config value holds a `secure:` leaf: the CLI then marks its whole key secret
    (`Map.SecureKeys`)."""
    if isinstance(value, dict):
        return any(holds_secret(v) for v in value.values())
    if isinstance(value, list):
        return any(holds_secret(v) for v in value)
    return bool(value == SECRET_STAND_IN)


def _config_key(written: str, project: str) -> str | None:
    """resource/config/key.go `ParseKey`, after loaders.go gave a bare key the project's namespace."""
    parts = written.split(":")
    if len(parts) == 1:
        return f"{project}:{written}"
    if len(parts) == 2:
        return written
    if len(parts) == 3 and parts[1] == "config" and parts[0] and parts[2]:
        return f"{parts[0]}:{parts[2]}"
    return None


def _is_null(node: yaml.Node) -> bool:
    return isinstance(node, yaml.ScalarNode) and node.tag in (_PLAIN, f"{_YAML}null") and node.value in _NULLS


def _kind(node: yaml.Node) -> str:
    if isinstance(node, yaml.MappingNode):
        return "mapping"
    return "list" if isinstance(node, yaml.SequenceNode) else "scalar"


def _check_depth(text: str, name: str) -> None:
    """Refuses a document nested deeper than MAX_DEPTH, from the parser's events (which it yields
    without recursing), before the composer recurses into it."""
    depth = 0
    for event in yaml.parse(text, Loader=_Loader):
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                line = event.start_mark.line + 1 if event.start_mark else 0
                raise StackFileError(f"{name}:{line}: nested deeper than {MAX_DEPTH} levels; a stack file needs a few")
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


class _Loader(yaml.SafeLoader):
    """Composes nodes only, and marks plain untagged scalars so that they are resolved here by
    yaml.v3's rules, not PyYAML's YAML 1.1 ones."""

    def resolve(self, kind: Any, value: Any, implicit: Any) -> str:
        if kind is yaml.ScalarNode and implicit[0]:
            return _PLAIN
        return str(super().resolve(kind, value, implicit))  # type: ignore[no-untyped-call]


_Loader.yaml_implicit_resolvers = {}


def _is_merge(node: yaml.Node) -> bool:
    return isinstance(node, yaml.ScalarNode) and node.tag == _PLAIN and node.value == "<<"


def _merge_sources(value: yaml.Node, where: str = "") -> list[yaml.MappingNode]:
    """The maps a `<<` key merges: its value, or each item of a sequence (decode.go `merge`).
    `where` prefixes the error's line (the file's name, where no caller adds it)."""
    sources = value.value if isinstance(value, yaml.SequenceNode) else [value]
    for source in sources:
        if not isinstance(source, yaml.MappingNode):
            line = source.start_mark.line + 1
            raise StackFileError(f"{where}{line}: map merge requires map or sequence of maps as the value")
    return cast(list[yaml.MappingNode], sources)


class _Reader:
    """Turns composed nodes into values as yaml.v3 decodes them into `any` and Pulumi's config
    objects hold them."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.advice: dict[tuple[int, str], None] = {}  # once, however often an alias repeats the value
        self._values = 0
        self._open: set[int] = set()

    def pairs(self, node: yaml.MappingNode) -> Iterator[tuple[yaml.Node, yaml.Node]]:
        """The mapping's own pairs, refusing a key written twice (decode.go compares the keys' text)."""
        seen: dict[tuple[type, str], int] = {}
        for key_node, value_node in node.value:
            if isinstance(key_node, yaml.ScalarNode):
                identity = (type(key_node), key_node.value)
                if identity in seen:
                    raise StackFileError(
                        f"{self.name}:{key_node.start_mark.line + 1}: mapping key {key_node.value!r} already "
                        f"defined at line {seen[identity]}"
                    )
                seen[identity] = key_node.start_mark.line + 1
            yield key_node, value_node

    def merged_pairs(self, node: yaml.MappingNode) -> Iterator[tuple[yaml.Node, yaml.Node]]:
        """The pairs of a mapping with its `<<` merges expanded: what yaml.v3 decodes into a Go map
        (decode.go `merge`; the first map merged wins, the mapping's own keys over all)."""
        own = [(k, v) for k, v in self.pairs(node) if not _is_merge(k)]
        taken = {k.value for k, _ in own if isinstance(k, yaml.ScalarNode)}
        for key_node, value_node in self.pairs(node):
            if not _is_merge(key_node):
                continue
            for source in _merge_sources(value_node, f"{self.name}:"):
                for merged_key, merged_value in self.merged_pairs(source):
                    if isinstance(merged_key, yaml.ScalarNode):
                        if merged_key.value in taken:
                            continue
                        taken.add(merged_key.value)
                    yield merged_key, merged_value
        yield from own

    def shown(self, node: yaml.Node) -> str:
        return str(node.value) if isinstance(node, yaml.ScalarNode) else f"a {_kind(node)}"

    def config_key_text(self, node: yaml.Node) -> str | None:
        """A `config:` key's text; None where it is not a string (a number, a list...), which the CLI's
        key parser refuses."""
        if not isinstance(node, yaml.ScalarNode):
            return None
        if node.tag == _PLAIN:
            return node.value if isinstance(resolve_plain(node.value), str) else None
        return node.value if node.tag == f"{_YAML}str" else None

    def value(self, node: yaml.Node) -> Any:
        self._values += 1
        if self._values > MAX_VALUES:
            raise StackFileError(f"{node.start_mark.line + 1}: document contains excessive aliasing")
        if id(node) in self._open:
            raise StackFileError(f"{node.start_mark.line + 1}: an anchor's value contains itself")
        if isinstance(node, yaml.ScalarNode):
            return self.scalar(node)
        self._open.add(id(node))
        try:
            if isinstance(node, yaml.SequenceNode):
                return [self.value(item) for item in node.value]
            return self.mapping(cast(yaml.MappingNode, node))
        finally:
            self._open.discard(id(node))

    def mapping(self, node: yaml.MappingNode) -> Any:
        own: dict[str, Any] = {}
        merged: dict[str, Any] = {}
        for key_node, value_node in self.pairs(node):
            if _is_merge(key_node):
                for source in _merge_sources(value_node):
                    for k, v in self.mapping(source).items():
                        merged.setdefault(k, v)  # the first map merged wins, as YAML's merge key says
                continue
            key = self.key(key_node)
            own[key] = self.value(value_node)
        if set(own) == {"secure"} and isinstance(own["secure"], str) and not merged:
            return SECRET_STAND_IN  # object.go isSecureValue: a map of one string `secure` key
        return {**merged, **own}

    def key(self, node: yaml.Node) -> str:
        """A nested key as Pulumi writes it back (`fmt.Sprintf("%v", key)`)."""
        if not isinstance(node, yaml.ScalarNode):
            raise StackFileError(f"{node.start_mark.line + 1}: a {_kind(node)} cannot be a key")
        value = self.scalar(node)
        if value is None:
            return "<nil>"
        return value if isinstance(value, str) else to_cli_text(value)

    def scalar(self, node: yaml.ScalarNode) -> Any:
        text = node.value
        line = node.start_mark.line + 1
        value = resolve_plain(text) if node.tag == _PLAIN else self.tagged(node)
        if isinstance(value, float):
            if not math.isfinite(value):
                raise StackFileError(f"{line}: {text!r} is not a number JSON can hold (json: unsupported value)")
            return _json_number(value)
        if isinstance(value, int) and not isinstance(value, bool) and node.tag == _PLAIN and _is_octal(text):
            self.advice.setdefault(
                (
                    line,
                    f"{text} is read by the Pulumi CLI as the octal number {value} (gopkg.in/yaml.v3 keeps YAML 1.1 "
                    f"octals); write {value}, or quote '{text}' for text",
                )
            )
        return value

    def tagged(self, node: yaml.ScalarNode) -> Any:
        """An explicitly tagged scalar (resolve.go `resolve(tag, in)`)."""
        tag = node.tag.removeprefix(_YAML) if node.tag.startswith(_YAML) else None
        text = node.value
        if tag == "binary":
            try:
                return base64.b64decode(text, validate=False).decode("utf-8", "replace")
            except binascii.Error:
                raise StackFileError(f"{node.start_mark.line + 1}: !!binary value is not base64") from None
        if tag in (None, "str") or tag not in ("bool", "int", "float", "null", "timestamp"):
            return text  # any data is a !!str; an unknown tag keeps the text
        value = resolve_plain(text)
        wanted = {"bool": bool, "int": int, "float": float, "null": type(None)}.get(tag)
        if tag == "float" and isinstance(value, int) and not isinstance(value, bool):
            return float(value)
        if tag == "timestamp" and isinstance(value, str) and value != text:
            return value
        if wanted is not None and isinstance(value, wanted) and not (wanted is int and isinstance(value, bool)):
            return value
        raise StackFileError(f"{node.start_mark.line + 1}: cannot decode {text!r} as a !!{tag}")


def resolve_plain(text: str) -> Any:
    """A plain scalar as gopkg.in/yaml.v3 v3.0.1 `resolve.go` resolves it, with a timestamp written as
    Pulumi writes a time (object.go: `v.String()`)."""
    if text in _NULLS:
        return None
    if text in _BOOLS:
        return _BOOLS[text]
    if text in _SPECIAL_FLOATS:
        return _SPECIAL_FLOATS[text]
    if text == "<<":
        return text
    hint = text[0]
    if hint == ".":
        return float(text) if _FLOAT.match(text) and math.isfinite(float(text)) else text
    if not (hint.isdigit() and hint.isascii()) and hint not in "+-":
        return text
    timestamp = go_time_string(text)
    if timestamp is not None:
        return timestamp
    plain = text.replace("_", "")
    integer = _go_int(plain)
    if integer is not None:
        return integer
    if _FLOAT.match(plain):
        number = float(plain)
        if math.isfinite(number):  # Go's ParseFloat fails on overflow: the text stays a string
            return number
    return text


def _go_int(text: str) -> int | None:
    """strconv.ParseInt(text, 0, 64), else strconv.ParseUint(text, 0, 64): Go's base prefixes, and a
    leading 0 for octal."""
    sign, digits = (-1, text[1:]) if text.startswith("-") else (1, text.removeprefix("+"))
    lower = digits.lower()
    base = 10
    for prefix, prefix_base in (("0b", 2), ("0o", 8), ("0x", 16)):
        if lower.startswith(prefix):
            base, digits = prefix_base, digits[2:]
            break
    else:
        if len(digits) > 1 and digits[0] == "0":
            base, digits = 8, digits[1:]
    allowed = "0123456789abcdef"[:base]
    if not digits or any(c not in allowed for c in digits.lower()):
        return None
    value = sign * int(digits, base)
    if -INT64_LIMIT <= value < INT64_LIMIT or (0 <= value < _UINT64 and text[0] not in "+-"):
        return value
    return None


def _is_octal(text: str) -> bool:
    digits = text.replace("_", "").lstrip("+-")
    return len(digits) > 1 and digits[0] == "0" and digits[1].isdigit() and _go_int(text.replace("_", "")) is not None


def go_time_string(text: str) -> str | None:
    """`text` as Go's `time.Time.String()` if yaml.v3 reads it as a timestamp, else None. A zone
    other than UTC is written as Go writes a fabricated fixed zone (`+0200 +0200`), which assumes the
    CLI runs in UTC."""
    match = _TIMESTAMP.match(text)
    if match is None:
        return None
    year, month, day = (int(g) for g in match.group(1, 2, 3))
    hms = match.group(4, 5, 6) if match.group(4) is not None else match.group(9, 10, 11)
    fraction = match.group(7) if match.group(4) is not None else match.group(12)
    hour, minute, second = (int(g) if g is not None else 0 for g in hms)
    # Go's time.Parse ranges; an offset may reach 24 hours or 60 minutes.
    if not (1 <= month <= 12 and 1 <= day <= _days_in(year, month)) or hour > 23 or minute > 59 or second > 59:
        return None
    zone = match.group(8)
    if zone in (None, "Z") or zone[1:] == "00:00":
        offset = "+0000 UTC"
    else:
        if int(zone[1:3]) > 24 or int(zone[4:6]) > 60:
            return None
        signed = f"{zone[0]}{zone[1:3]}{zone[4:6]}"
        offset = f"{signed} {signed}"
    nanos = (fraction or ".")[1:10].ljust(9, "0").rstrip("0")
    return (
        f"{year:04d}-{month:02d}-{day:02d} {hour:02d}:{minute:02d}:{second:02d}{'.' + nanos if nanos else ''} {offset}"
    )


def _inside_json(value: Any) -> Any:
    """Inside an object or a list, Pulumi holds an integer beyond int64 as a float64 (object.go reads
    it back from JSON): it reaches the program with a float's digits."""
    if isinstance(value, dict):
        return {k: _inside_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_inside_json(v) for v in value]
    if isinstance(value, int) and not isinstance(value, bool) and not -INT64_LIMIT <= value < INT64_LIMIT:
        return _json_number(float(value))
    return value


def _days_in(year: int, month: int) -> int:
    """Days of a month in the proleptic Gregorian calendar Go uses, year 0 included."""
    if month == 2:
        return 29 if year % 4 == 0 and (year % 100 != 0 or year % 400 == 0) else 28
    return 30 if month in (4, 6, 9, 11) else 31


def _json_number(value: float) -> int | float:
    """A float as the program reads back Go's JSON text of it: an integral value below 1e21 is
    written without a fraction, so the program sees an integer (Go's digits, not Python's)."""
    if value.is_integer() and abs(value) < 1e21:
        return int(Decimal(repr(value)))
    return value


def to_cli_text(value: Any) -> str:
    """One top-level value as the CLI hands it to the program (`Map.Decrypt`, `Plaintext.marshalText`):
    a string as it is, null as "", other scalars and all structures as JSON."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return _go_float(value)
    return json.dumps(value, separators=(",", ":"), sort_keys=True, allow_nan=False, default=str)


def _go_float(value: float) -> str:
    """encoding/json's float64 text: fixed notation from 1e-6 up to 1e21, else the shortest exponent
    form with no leading zero in the exponent (`1e+21`, `1e-7`)."""
    if value.is_integer() and abs(value) < 1e21:
        return str(int(Decimal(repr(value))))
    if 1e-6 <= abs(value) < 1e21:
        return format(Decimal(repr(value)), "f")
    mantissa, _, exponent = repr(value).partition("e")
    return f"{mantissa}e{int(exponent):+d}"


def to_pulumi_config(values: Mapping[str, Any]) -> dict[str, str]:
    """What the Pulumi CLI hands a program (PULUMI_CONFIG): each value as `to_cli_text`."""
    return {key: to_cli_text(value) for key, value in values.items()}
