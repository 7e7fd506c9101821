"""Reading earlier layers from another stack.

A stack that starts at a later layer (`layers: [training]`, say) names the stack holding the
earlier ones in `upstreamStack`. Facts that decide what this program creates (which pools,
which networks) are needed as plain values before anything is registered, so they are read
through the engine's stack-outputs function; values that must stay Outputs (the secret
kubeconfig) come from a StackReference, which also records the dependency in state.
"""

from __future__ import annotations

from typing import Any

import pulumi

from stacks.config import ConfigError, ConfigIssue


class Upstream:
    def __init__(self, name: str) -> None:
        self.name = name
        self.reference = pulumi.StackReference(name)
        result = pulumi.runtime.invoke("pulumi:pulumi:readStackOutputs", {"name": name})
        self._outputs: dict[str, Any] = dict((result.value or {}).get("outputs") or {})

    def plain(self, key: str) -> Any:
        """A stack output as a plain value; a clear error when the upstream stack lacks it."""
        if key not in self._outputs:
            raise ConfigError(
                [
                    ConfigIssue(
                        key="upstreamStack",
                        value=self.name,
                        message=f"has no output {key!r}: deploy the layer that produces it there first "
                        f"(outputs found: {', '.join(sorted(self._outputs)) or 'none'})",
                    )
                ]
            )
        return _integral(self._outputs[key])

    def secret(self, key: str) -> pulumi.Output[Any]:
        self.plain(key)  # fail early and clearly if it is missing
        return pulumi.Output.secret(self.reference.require_output(key))


def _integral(value: Any) -> Any:
    """Stack outputs cross the wire as JSON numbers, so counts arrive as floats (2.0)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _integral(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_integral(v) for v in value]
    return value
