"""The one error type rules raise: it names the key that is wrong, the value, and what is allowed."""

from __future__ import annotations

from typing import Any


class RuleError(ValueError):
    """A value breaks a rule. `key` is the (camelCase, dotted) key the user wrote, relative to
    the record that raised it; callers prefix it with where that record sits."""

    def __init__(self, key: str, value: Any, message: str) -> None:
        super().__init__(message)
        self.key = key
        self.value = value

    def under(self, prefix: str) -> RuleError:
        """The same error, its key placed under `prefix` (e.g. `training.runs[0]`)."""
        return RuleError(f"{prefix}.{self.key}" if self.key else prefix, self.value, str(self))


def require(condition: bool, key: str, value: Any, message: str) -> None:
    """Raise RuleError(key, value, message) unless `condition` holds."""
    if not condition:
        raise RuleError(key, value, message)


def require_no_problem(problem: str | None, key: str, value: Any) -> None:
    """Raise RuleError naming `key` when a rule function reported a problem."""
    if problem is not None:
        raise RuleError(key, value, problem)
