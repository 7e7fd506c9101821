"""The design card's layout, a thin entry point, pinned requirements and CI wiring."""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path

import yaml

from tests.conftest import parse_source

ROOT = Path(__file__).resolve().parents[2]


def test_the_project_layout_matches_the_design_card() -> None:
    for path in (
        "Pulumi.yaml", "Pulumi.dev.yaml", "__main__.py", "README.md", "Makefile", "requirements.txt",
        "stacks/bootstrap.py", "stacks/cluster.py", "stacks/platform.py", "stacks/training.py",
        "stacks/contract.py", "facts", "config", "planners", "components", "tools/render.py", "tools/docs.py", "docs",
        "tests", "tests/identities", "examples", "analysis/__main__.py", ".ci/run",
    ):  # fmt: skip
        assert (ROOT / path).exists(), path


def test_pulumi_project_is_python_with_a_virtualenv() -> None:
    project = yaml.safe_load((ROOT / "Pulumi.yaml").read_text())
    assert project["name"] == "nemo-gke"
    assert project["runtime"]["name"] == "python"
    assert project["runtime"]["options"]["virtualenv"] == ".venv"


def test_the_entry_point_only_runs_the_program() -> None:
    tree = parse_source((ROOT / "__main__.py").read_text())
    statements = [
        node for node in tree.body if not isinstance(node, ast.Expr) or not isinstance(node.value, ast.Constant)
    ]
    assert ast.unparse(statements) == "from stacks import program\nprogram.main()"


def test_each_layer_module_composes_components_in_one_layer_component() -> None:
    for layer in ("bootstrap", "cluster", "platform", "training"):
        tree = parse_source((ROOT / "stacks" / f"{layer}.py").read_text())
        classes = [n.name for n in tree.body if isinstance(n, ast.ClassDef)]
        functions = [n.name for n in tree.body if isinstance(n, ast.FunctionDef)]
        assert f"{layer.capitalize()}Layer" in classes and "build" in functions, layer


def test_runtime_requirements_are_pinned() -> None:
    pins = dict(re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)$", (ROOT / "requirements.txt").read_text(), flags=re.MULTILINE))
    for package in ("pulumi", "pulumi-gcp", "pulumi-kubernetes", "pydantic"):
        assert package in pins, package
    for line in (ROOT / "requirements-dev.txt").read_text().splitlines():
        if line and not line.startswith(("#", "-r")):
            assert "==" in line, line


def test_ci_runs_the_readme_test_command() -> None:
    script = ROOT / ".ci" / "run"
    assert os.access(script, os.X_OK)
    assert "make test\n" in script.read_text() and "make integration\n" in script.read_text()
    assert "set -euo pipefail" in script.read_text()
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^STACK \?= dev$", makefile, flags=re.MULTILINE)
    for target in (
        "render:",
        "test:",
        "lint:",
        "typecheck:",
        "unit:",
        "bench:",
        "identities:",
        "crds:",
        "integration:",
    ):
        assert target in makefile
    # The CRDs are fetched first: the program applies one and the tests validate against them.
    assert re.search(r"^install: .* crds$", makefile, flags=re.MULTILINE)
    assert re.search(r"^test: install ", makefile, flags=re.MULTILINE)


def test_the_readme_starts_with_a_quickstart_from_make_install_to_pulumi_up() -> None:
    """Install, the render and the test command CI runs, then the deployment."""
    readme = (ROOT / "README.md").read_text()
    first_code = re.search(r"```(?:sh|bash|console)?\n(.*?)```", readme, flags=re.DOTALL)
    assert first_code is not None
    commands = [line.split("#")[0].split() for line in first_code.group(1).splitlines()]
    assert commands[:3] == [["make", "install"], ["make", "render"], ["make", "test"]]
    assert commands[-1] == ["pulumi", "up"]
