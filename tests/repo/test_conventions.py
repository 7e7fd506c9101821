"""How components are written: tokens, parents, child names, invokes, register_outputs."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import Any

import pulumi._types as pulumi_types
import pytest

from harness.runner import StackRun, stack_names, stack_with
from harness.schemas import _args_class
from tests.conftest import parse_source

ROOT = Path(__file__).resolve().parents[2]
SOURCES = sorted([*(ROOT / "components").glob("*.py"), *(ROOT / "stacks").glob("*.py")])
PROGRAM_PACKAGES = ("facts", "config", "planners", "components", "stacks", "tools", "analysis")


def component_classes() -> list[tuple[Path, ast.ClassDef]]:
    found = []
    for path in SOURCES:
        for node in parse_source(path.read_text()).body:
            if isinstance(node, ast.ClassDef) and any(ast.unparse(b) == "pulumi.ComponentResource" for b in node.bases):
                found.append((path, node))
    return found


def type_token(cls: ast.ClassDef) -> str | None:
    """The string a class assigns to TYPE in its body, if any."""
    for node in cls.body:
        is_type = isinstance(node, ast.Assign) and [ast.unparse(t) for t in node.targets] == ["TYPE"]
        if is_type and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return node.value.value
    return None


@pytest.mark.parametrize(("path", "cls"), component_classes(), ids=lambda v: getattr(v, "name", ""))
def test_a_component_has_a_constant_nemo_token_the_standard_signature_and_registers_outputs_last(
    path: Path, cls: ast.ClassDef
) -> None:
    """The type token is part of every URN: a literal in the class, never derived from the file
    it sits in, so moving code never changes a resource's identity."""
    token = type_token(cls)
    assert token is not None and re.fullmatch(rf"nemo:[a-z]+:{cls.name}", token), (cls.name, token)
    init = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__")
    assert [a.arg for a in init.args.args] == ["self", "name", "args", "opts"]
    assert ast.unparse(init.body[0]) == "super().__init__(self.TYPE, name, None, opts)"
    assert ast.unparse(init.body[-1]).startswith("self.register_outputs("), cls.name


def test_type_tokens_are_unique() -> None:
    tokens = [type_token(cls) for _, cls in component_classes()]
    assert len(tokens) == len(set(tokens)), tokens


def test_invokes_inside_components_are_parented() -> None:
    for path in SOURCES:
        for call in ast.walk(parse_source(path.read_text())):
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


LABELLED_FIELDS = ("labels", "resourceLabels")


@pytest.mark.parametrize("stack", ["dev", "bootstrap", "a3high-small"])
def test_every_labelled_gcp_resource_carries_the_stack_labels(render: Any, stack: str) -> None:
    """Every GCP resource whose API takes labels (top-level `labels`/`resourceLabels`, and the
    nodes of a node pool) carries the stack's labels plus managed-by and the stack name; the
    GCP provider applies the same set as its default labels."""
    run = render(stack, values=stack_with(stack, labels={"team": "ml-platform"}))
    expected = {"team": "ml-platform", "managed-by": "pulumi", "nemo-gke-stack": stack}
    labelled = 0
    for resource in run.gcp_resources:
        fields = pulumi_types.input_type_types(_args_class(resource.type))
        for field in LABELLED_FIELDS:
            if field in fields:
                assert resource.inputs.get(field) == expected, (resource.urn, field)
                labelled += 1
        if "nodeConfig" in resource.inputs:
            assert resource.inputs["nodeConfig"].get("resourceLabels") == expected, resource.urn
    assert labelled >= 3
    provider = run.one("pulumi:providers:gcp")
    assert json.loads(provider.inputs["defaultLabels"]) == expected


def test_the_program_checks_with_errors_not_asserts() -> None:
    """`python -O` strips asserts: a check that matters raises an error that names what is wrong."""
    program = [path for package in PROGRAM_PACKAGES for path in (ROOT / package).rglob("*.py")]
    found = [
        f"{path.relative_to(ROOT)}:{node.lineno}"
        for path in program
        for node in ast.walk(parse_source(path.read_text()))
        if isinstance(node, ast.Assert)
    ]
    assert program and found == []
