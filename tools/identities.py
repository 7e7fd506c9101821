"""The identity lock: every resource's URN of every shipped stack, checked in under
tests/identities/.

A URN is how Pulumi knows a deployed resource: its name, its type and its parents' types. A
change to any of them, without an alias, makes `pulumi up` delete the resource and create a new
one. `tests/stacks/test_identities.py` runs each shipped stack and compares its URNs with the locked
list; a URN that disappears must be kept by an alias on the resource that replaces it.

`python -m tools.identities --write` (`make identities`) rewrites the lists: do that for new
resources, and for renames only while nothing is deployed.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from harness.mocks import RecordedResource
from harness.runner import ROOT, StackRun, run_stack, stack_names

LOCKS = ROOT / "tests" / "identities"
ROOT_STACK = "pulumi:pulumi:Stack"
HEADER = (
    "# Resource identities (URN type chain :: name) of Pulumi.{stack}.yaml, as the engine builds them.\n"
    "# Written by `make identities`; tests/stacks/test_identities.py compares the program with this list.\n"
)


def qualified_type(run: StackRun, resource: RecordedResource) -> str:
    """The URN's type part: the parents' types (the root stack excluded), then the resource's.
    The engine builds it this way (pulumi/pulumi:sdk/go/common/resource/urn.go, NewURN with the
    parent's QualifiedType); the mocks' own URNs keep only the nearest parent type."""
    parent = _parent(run, resource)
    return resource.type if parent is None else f"{qualified_type(run, parent)}${resource.type}"


def _parent(run: StackRun, resource: RecordedResource) -> RecordedResource | None:
    """The resource's parent; None for the root stack, which is no part of any URN."""
    if not resource.parent or resource.parent.split("::")[2].endswith(ROOT_STACK):
        return None
    return run.by_urn(resource.parent)


def identity(run: StackRun, resource: RecordedResource) -> str:
    return f"{qualified_type(run, resource)}::{resource.name}"


def _urn_identity(urn: str) -> str:
    """`urn:pulumi:<stack>::<project>::<types>::<name>` → `<types>::<name>`."""
    return urn.split("::", 2)[2]


def alias_identities(run: StackRun, resource: RecordedResource) -> set[str]:
    """The earlier identities a resource's aliases keep, resolved as the engine resolves alias specs."""
    found = set()
    for alias in resource.aliases:
        if "urn" in alias:
            found.add(_urn_identity(alias["urn"]))
            continue
        if alias["noParent"]:
            parent_type = ""
        elif alias["parentUrn"]:
            recorded = [r for r in run.resources if r.urn == alias["parentUrn"]]
            parent_type = qualified_type(run, recorded[0]) if recorded else _urn_identity(alias["parentUrn"])
            parent_type = parent_type.split("::")[0]
        else:
            parent = _parent(run, resource)
            parent_type = "" if parent is None else qualified_type(run, parent)
        typ = alias["type"] or resource.type
        found.add(f"{parent_type + '$' if parent_type else ''}{typ}::{alias['name'] or resource.name}")
    return found


def identities(run: StackRun) -> list[str]:
    return sorted(identity(run, r) for r in run.resources if r.type != ROOT_STACK)


def lock_file(stack: str) -> Path:
    return LOCKS / f"{stack}.txt"


def locked(stack: str) -> list[str]:
    path = lock_file(stack)
    if not path.exists():
        return []
    return [line for line in path.read_text().splitlines() if line and not line.startswith("#")]


@dataclass(frozen=True)
class Drift:
    # Locked identities no resource has any more, and no alias keeps.
    lost: list[str]
    # Identities the lock does not know yet.
    new: list[str]

    def __bool__(self) -> bool:
        return bool(self.lost or self.new)

    def explain(self, stack: str) -> str:
        lines = [f"the resource identities (URNs) of stack {stack} differ from {lock_file(stack).relative_to(ROOT)}:"]
        lines += [f"  - {i}   (gone: pulumi up would delete it)" for i in self.lost]
        lines += [f"  + {i}" for i in self.new]
        if self.lost:
            lines.append(
                "A renamed or moved resource keeps its identity with an alias on the resource that replaces it: "
                "ResourceOptions(aliases=[pulumi.Alias(name=<old name>, parent=<old parent>)])."
            )
        lines.append(
            "Then run `make identities` to lock the new URNs (without an alias only while nothing is deployed)."
        )
        return "\n".join(lines)


def drift(run: StackRun, lock: Iterable[str]) -> Drift:
    current, lock = set(identities(run)), set(lock)
    kept = set().union(*(alias_identities(run, r) for r in run.resources))
    return Drift(lost=sorted(lock - current - kept), new=sorted(current - lock))


def write(stack: str, run: StackRun) -> None:
    LOCKS.mkdir(parents=True, exist_ok=True)
    lock_file(stack).write_text(HEADER.format(stack=stack) + "\n".join(identities(run)) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--write", action="store_true", help="rewrite tests/identities/ from the program")
    args = parser.parse_args(argv)
    status = 0
    for stack in stack_names():
        run = run_stack(stack)
        found = drift(run, locked(stack))
        if args.write:
            write(stack, run)
            print(f"{stack}: {len(identities(run))} identities written")
        elif found:
            print(found.explain(stack), file=sys.stderr)
            status = 1
        else:
            print(f"{stack}: {len(identities(run))} identities, as locked")
    return status


if __name__ == "__main__":
    sys.exit(main())
