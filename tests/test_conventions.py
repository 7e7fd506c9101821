"""How components are written: tokens, parents, child names, invokes, register_outputs."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import pytest

from tests.harness.program import StackRun, stack_names

ROOT = Path(__file__).resolve().parents[1]
SOURCES = sorted([*(ROOT / "components").glob("*.py"), *(ROOT / "stacks").glob("*.py")])


def component_classes() -> list[tuple[Path, ast.ClassDef]]:
    found = []
    for path in SOURCES:
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ClassDef) and any(ast.unparse(b) == "pulumi.ComponentResource" for b in node.bases):
                found.append((path, node))
    return found


@pytest.mark.parametrize(("path", "cls"), component_classes(), ids=lambda v: getattr(v, "name", ""))
def test_a_component_has_a_nemo_token_the_standard_signature_and_registers_outputs_last(
    path: Path, cls: ast.ClassDef
) -> None:
    init = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__")
    assert [a.arg for a in init.args.args] == ["self", "name", "args", "opts"]
    super_call = ast.unparse(init.body[0])
    assert f"super().__init__('nemo:{path.stem}:{cls.name}', name, None, opts)" == super_call
    assert ast.unparse(init.body[-1]).startswith("self.register_outputs("), cls.name


def test_invokes_inside_components_are_parented() -> None:
    for path in SOURCES:
        for call in ast.walk(ast.parse(path.read_text())):
            if isinstance(call, ast.Call) and re.search(r"\.get_\w+_output$", ast.unparse(call.func)):
                opts = {k.arg: ast.unparse(k.value) for k in call.keywords}.get("opts", "")
                assert "parent=self" in opts, f"{path.name}: {ast.unparse(call)}"


@pytest.fixture(scope="module", params=stack_names())
def run(request: pytest.FixtureRequest, render: Any) -> StackRun:
    return render(request.param)


def test_every_resource_hangs_from_a_component_and_is_named_after_it(run: StackRun) -> None:
    for resource in run.resources:
        if resource.type.startswith("pulumi:") or resource.read:
            continue
        assert resource.parent, f"{resource.urn} has no parent"
        if resource.parent.split("::")[-2] == "pulumi:pulumi:Stack":
            assert resource.type.endswith("Layer"), f"{resource.urn} sits at the stack root"
            continue
        parent = run.by_urn(resource.parent)
        owner = next(a for a in [parent, *run.ancestors(parent)] if not a.custom)
        assert resource.name.startswith(owner.name), f"{resource.name} is not named after {owner.name}"


def test_cloud_and_kubernetes_resources_use_the_stack_s_explicit_providers(run: StackRun) -> None:
    for resource in run.custom_resources:
        if resource.type.startswith(("gcp:", "kubernetes:")):
            assert resource.provider_urn, f"{resource.urn} uses an ambient default provider"
