"""Every quantity the program writes is in the form the API server writes back, so a refresh
reads back what the program would write and `pulumi preview --expect-no-changes` holds.

Found by the integration lane with the real engine: `215000m`, `2889728Mi` and the integer `8`
came back as `215`, `2822Gi` and `"8"` (the JobSet and Kueue webhooks decode and re-encode
them), and every later preview proposed to patch the JobSet's pod template. The rule is
k8s.io/apimachinery pkg/api/resource/quantity.go: binary quantities take the largest suffix that
keeps the value whole, decimal ones drop `m` when the value is whole cores; re-implemented here."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from facts.kubernetes import bytes_quantity, cpu_quantity, gib_quantity, mib_quantity
from tests.stacks.test_examples import SHIPPED

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_QUANTITY = re.compile(r"^(?P<number>[0-9]+)(?P<suffix>m|Ki|Mi|Gi|Ti|Pi|Ei)?$")


def canonical(quantity: str) -> str:
    match = _QUANTITY.match(quantity)
    assert match, f"{quantity!r} is not a quantity this program writes"
    number, suffix = int(match["number"]), match["suffix"]
    if suffix in _BINARY:
        size = number * _BINARY[suffix]
        for name, unit in sorted(_BINARY.items(), key=lambda item: -item[1]):
            if size % unit == 0:
                return f"{size // unit}{name}"
    if suffix == "m":
        return str(number // 1000) if number % 1000 == 0 else quantity
    return quantity


def quantities(node: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """(where, value) of every resource amount in a manifest."""
    if isinstance(node, dict):
        for key, value in node.items():
            here = f"{path}.{key}"
            if key in ("requests", "limits", "capacity") and isinstance(value, dict):
                yield from ((f"{here}.{k}", v) for k, v in value.items())
            elif key in ("nominalQuota", "sizeLimit"):
                yield here, value
            else:
                yield from quantities(value, here)
    elif isinstance(node, list):
        for i, item in enumerate(node):
            yield from quantities(item, f"{path}[{i}]")


@pytest.mark.parametrize("stack", [s for s in SHIPPED if s != "bootstrap"])
def test_every_quantity_is_written_as_the_api_server_writes_it(render: Any, stack: str) -> None:
    run = render(stack)
    found = 0
    for resource in run.resources:
        kind = resource.type.rsplit(":", 1)[-1]
        if not resource.type.startswith("kubernetes:") or kind in ("Release", "CustomResourceDefinition"):
            continue
        for where, value in quantities(run.manifest(resource)):
            found += 1
            assert isinstance(value, str), f"{resource.name}{where} = {value!r}: a number reads back as a string"
            assert value == canonical(value), f"{resource.name}{where} = {value!r}, read back as {canonical(value)!r}"
    assert found


def test_the_helpers_write_canonical_quantities() -> None:
    assert (cpu_quantity(215000), cpu_quantity(1500)) == ("215", "1500m")
    assert (mib_quantity(2889728), mib_quantity(1536), mib_quantity(2048)) == ("2822Gi", "1536Mi", "2Gi")
    assert (gib_quantity(1024), gib_quantity(256), bytes_quantity(3)) == ("1Ti", "256Gi", "3")
