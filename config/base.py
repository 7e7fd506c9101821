"""The base every config model shares, and the checks several models use."""

from __future__ import annotations

import ipaddress
import json
import re
from datetime import datetime
from typing import Any, Self

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

from facts.errors import RuleError
from facts.gcp import resource_name_problem
from facts.pulumi_cli import rfc3339_of_go_time

_RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$")


class Model(BaseModel):
    """Frozen, strict, camelCase keys, unknown keys rejected."""

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        strict=True,
        alias_generator=to_camel,
        populate_by_name=True,
    )

    @classmethod
    def from_plain(cls, data: Any) -> Self:
        """Validate JSON-shaped data (config or stack outputs): strict types, arrays for tuples."""
        return cls.model_validate_json(json.dumps(data))

    def to_plain(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True, mode="json")


def to_snake(key: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", key).lower()


def check_name(key: str, value: str, max_length: int) -> None:
    problem = resource_name_problem(value, max_length)
    if problem:
        raise RuleError(key, value, problem)


def parse_cidr(key: str, value: str) -> ipaddress.IPv4Network:
    """An IPv4 range in CIDR notation, its prefix length written: GKE takes authorized networks "in
    CIDR notation" (https://cloud.google.com/kubernetes-engine/docs/reference/rest/v1/projects.locations.clusters#cidrblock),
    and an address alone would otherwise read as a /32 nobody wrote."""
    if "/" not in value:
        example = f"{value}/32" if _is_address(value) else "203.0.113.7/32"
        raise RuleError(
            key, value, f"must be an IPv4 range in CIDR notation, with its prefix length, such as {example}"
        )
    try:
        return ipaddress.IPv4Network(value, strict=True)
    except ValueError as exc:
        raise RuleError(key, value, f"must be an IPv4 CIDR range such as 10.0.0.0/20 ({exc})") from None


def _is_address(value: str) -> bool:
    try:
        ipaddress.IPv4Address(value)
    except ValueError:
        return False
    return True


def parse_timestamp(key: str, value: str, example: str) -> datetime:
    """An RFC 3339 timestamp with its offset, as GKE's maintenance policy takes it."""
    if not _RFC3339.match(value):
        written = rfc3339_of_go_time(value)
        if written is not None:
            raise RuleError(
                key,
                value,
                f"is how the Pulumi CLI passes on an unquoted timestamp: quote it in the stack file ('{written}')",
            )
        raise RuleError(key, value, f"must be an RFC 3339 timestamp such as {example}")
    return datetime.fromisoformat(value)


def check_period(start_key: str, start: str, end_key: str, end: str, example: str) -> None:
    """Both ends are RFC 3339 timestamps and the period ends after it starts (compared as times,
    not as strings: offsets may differ)."""
    began = parse_timestamp(start_key, start, example)
    if parse_timestamp(end_key, end, example) <= began:
        raise RuleError(end_key, end, f"must be after {start_key} ({start})")
