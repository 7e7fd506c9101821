"""Property: a shipped stack with one value changed, of any type or size, or one unknown key
added, either renders or is refused with one line per issue, an issue naming the changed key's
section: never a traceback, never another exception (issue 36: the next round of hostile stack
files uses other files, so the cause is tested, not the cases)."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from config.loader import ConfigError
from facts.project import PROJECT
from harness.runner import StackFailed, load_stack_values, run_stack

# Fast to run (tens of milliseconds each), and between them every section of an environment on an
# existing cluster, teams included.
STACKS = ("existing", "existing-oke")

Path = tuple[str | int, ...]


def _nodes(value: Any, path: Path = ()) -> Iterator[Path]:
    """Every place in the config: mapping values and list items, nested."""
    if path:
        yield path
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _nodes(item, (*path, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _nodes(item, (*path, i))


def _placed(values: dict[str, Any], path: Path, new: Any) -> dict[str, Any]:
    changed = copy.deepcopy(values)
    node: Any = changed
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = new
    return changed


# What a user, or a YAML 1.1 habit, may write where something else was meant.
VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**15), max_value=10**15),
    # Non-finite floats never reach the program: the stack file reader refuses them first
    # (harness.stackfile, as the Pulumi CLI cannot pass them on).
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=24),
    st.sampled_from(["yes", "on", "0x10", "1e3", "-1", "", " ", "null", "~", "[secret]", "a.b.c", "Nemo_X"]),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=8), st.integers(), max_size=2),
)


@st.composite
def mutated(draw: st.DrawFn) -> tuple[str, Path, dict[str, Any]]:
    stack = draw(st.sampled_from(STACKS))
    values = {k: v for k, v in load_stack_values(stack).items() if k.startswith(f"{PROJECT}:")}
    places = sorted(_nodes(values), key=repr)
    path = draw(st.sampled_from(places))
    if draw(st.booleans()) and isinstance(_at(values, path), dict):
        return stack, (*path, "unknownKey"), _placed(values, (*path, "unknownKey"), 1)
    return stack, path, _placed(values, path, draw(VALUES))


def _at(values: dict[str, Any], path: Path) -> Any:
    node: Any = values
    for part in path:
        node = node[part]
    return node


def _renders_or_refuses_by_key(stack: str, path: Path, values: dict[str, Any]) -> None:
    try:
        run_stack(stack, values=values)
        return
    except StackFailed as failure:
        error = failure.error
    assert isinstance(error, ConfigError), f"{stack} {path}: {type(error).__name__}: {error}"
    section = str(path[0]).removeprefix(f"{PROJECT}:")
    for issue in error.issues:
        assert "\n" not in str(issue), f"{stack} {path}: {issue}"
    sections = {issue.key.split(".")[0].split("[")[0] for issue in error.issues}
    assert sections, f"{stack} {path}: a refusal with no issue"
    assert section in sections or sections & {"training", "teams", "kueue"}, f"{stack} {path}: {error}"


@settings(max_examples=100, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_one_changed_value_renders_or_is_refused_by_key_in_one_line(case: tuple[str, Path, dict[str, Any]]) -> None:
    _renders_or_refuses_by_key(*case)


# A value of each kind no field takes whole, put in every place of the stack in turn: the random
# search above samples places; this sweeps them (a mapping where a flag was meant was a TypeError).
SWEPT = ({"x": {"y": 1}}, "yes", -1)


@pytest.mark.parametrize("stack", STACKS)
def test_every_place_takes_a_hostile_value_without_a_traceback(stack: str) -> None:
    values = {k: v for k, v in load_stack_values(stack).items() if k.startswith(f"{PROJECT}:")}
    for path in sorted(_nodes(values), key=repr):
        for value in SWEPT:
            _renders_or_refuses_by_key(stack, path, _placed(values, path, value))
