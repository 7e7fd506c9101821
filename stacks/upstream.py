"""Reading earlier layers from another stack.

A stack that starts at a later layer (`layers: [training]`, say) names the stack holding the
earlier ones in `upstreamStack`. Facts that decide what this program creates (which pools,
which networks) are needed as plain values before anything is registered, so they are read
through the engine's stack-outputs function; values that must stay Outputs (the secret
kubeconfig) come from a StackReference, which also records the dependency in state.
"""

from __future__ import annotations

from typing import Any, TypeVar

import pulumi
from pydantic import ValidationError

from config.base import Model
from config.loader import ConfigError, ConfigIssue

M = TypeVar("M", bound=Model)


class Upstream:
    def __init__(self, name: str, key: str = "upstreamStack") -> None:
        self.name = name
        # The config key that names the stack, blamed in errors.
        self.key = key
        # An invoke registers nothing: what the program creates can be checked against it first.
        try:
            result = pulumi.runtime.invoke("pulumi:pulumi:readStackOutputs", {"name": name})
        except Exception as error:
            raise self._error(_unread(str(error))) from None
        self._outputs: dict[str, Any] = dict((result.value or {}).get("outputs") or {})
        self._reference: pulumi.StackReference | None = None

    def _error(self, message: str) -> ConfigError:
        return ConfigError([ConfigIssue(key=self.key, value=self.name, message=message)])

    def has(self, key: str) -> bool:
        return key in self._outputs

    def plain(self, key: str) -> Any:
        """A stack output as a plain value; a clear error when the upstream stack lacks it."""
        if key not in self._outputs:
            found = ", ".join(sorted(self._outputs)) or "none"
            raise self._error(
                f"has no output {key!r}: deploy the layer that produces it there first (outputs: {found})"
            )
        return _integral(self._outputs[key])

    def facts(self, key: str, model: type[M]) -> M:
        """A layer's facts output, checked against the record this program expects."""
        try:
            return model.from_plain(self.plain(key))
        except ValidationError as error:
            first = error.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise self._error(
                f"its output {key!r} is not what this program expects ({where}: {first['msg']}); "
                "update that stack with this version of nemo-gke first"
            ) from None

    def secret(self, key: str) -> pulumi.Output[Any]:
        self.plain(key)  # fail early and clearly if it is missing
        if self._reference is None:
            self._reference = pulumi.StackReference(self.name)
        return pulumi.Output.secret(self._reference.require_output(key))


def _unread(reason: str) -> str:
    """Why a stack's outputs could not be read, in the user's terms: the engine answers
    `unknown stack "<org>/<project>/<stack>"` for a stack its backend does not hold
    (pulumi/pkg/backend/backend.go, the backend's stack-outputs reader)."""
    if "unknown stack" in reason:
        return (
            "is not a stack of this backend (`pulumi stack ls` lists them): create and `pulumi up` it "
            "first, or name it as <organization>/<project>/<stack>"
        )
    return f"could not be read: {reason.removeprefix('invoke of pulumi:pulumi:readStackOutputs failed: ')}"


def _integral(value: Any) -> Any:
    """Stack outputs cross the wire as JSON numbers, so counts arrive as floats (2.0)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _integral(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_integral(v) for v in value]
    return value
