"""The design card's layout, a thin entry point, pinned requirements and CI wiring."""

from __future__ import annotations

import ast
import os
import re
import subprocess
from pathlib import Path

import yaml

from tests.conftest import parse_source

ROOT = Path(__file__).resolve().parents[2]


def design_layout() -> dict[str, str]:
    """The folders and files docs/design.md's layout block names, with what it says of each."""
    design = (ROOT / "docs" / "design.md").read_text()
    block = design.split("## How the code is laid out", 1)[1].split("```", 2)[1]
    named = {}
    for line in block.splitlines():
        if line and not line.startswith(" "):
            names, _, said = re.split(r"( {2,})", line, maxsplit=1)
            named.update({name.strip(): said for name in names.split(",")})
    return named


def test_the_design_notes_name_every_top_level_folder_and_nothing_that_is_gone() -> None:
    named = design_layout()
    folders = {f"{p.name}/" for p in ROOT.iterdir() if p.is_dir() and not p.name.startswith(".") and p.name != "build"}
    assert folders - {name for name in named if name.endswith("/")} == set(), "folders the design notes omit"
    assert [name for name in named if not (ROOT / name.split("/")[0]).exists()] == []


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


def ci_with_make(tmp_path: Path, failing: str | None) -> tuple[int, list[str]]:
    """.ci/run with a stand-in `make` that records its arguments and fails on `failing`."""
    tmp_path.mkdir(exist_ok=True)
    log = tmp_path / "make.log"
    fake = tmp_path / "bin" / "make"
    fake.parent.mkdir()
    fake.write_text(f'#!/bin/sh\necho "$*" >> {log}\n[ "$*" != "{failing}" ]\n')
    fake.chmod(0o755)
    env = {**os.environ, "PATH": f"{fake.parent}:{os.environ['PATH']}"}
    done = subprocess.run([str(ROOT / ".ci" / "run")], env=env, capture_output=True, text=True, check=False)
    return done.returncode, log.read_text().splitlines() if log.exists() else []


def test_ci_runs_the_readme_test_command_then_the_integration_tier(tmp_path: Path) -> None:
    assert ci_with_make(tmp_path, None) == (0, ["test", "integration", "runtime-check"])


def test_ci_stops_at_the_first_failure(tmp_path: Path) -> None:
    """`set -euo pipefail`: a failing `make test` ends CI before the integration tier, non-zero."""
    assert ci_with_make(tmp_path, "test") == (1, ["test"])
    assert ci_with_make(tmp_path / "later", "integration")[0] == 1


def test_make_help_lists_every_target_with_its_description() -> None:
    """Every target of the Makefile's .PHONY list has a `## ` line above it, which `make help` prints."""
    makefile = (ROOT / "Makefile").read_text()
    phony = re.search(r"^\.PHONY: (.*)$", makefile, flags=re.MULTILINE)
    assert phony is not None
    shown = subprocess.run(["make", "-s", "help"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    listed = {line.split()[0]: line for line in shown.splitlines() if line.strip()}
    assert set(phony.group(1).split()) <= set(listed)
    assert all(len(line.split()) > 2 for line in listed.values())


def test_the_readme_starts_offline_then_deploys_with_pulumi_up() -> None:
    """First what needs no cloud account (install, the render, the tests CI runs), then the
    deployment."""
    readme = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```(?:sh|bash|console)?\n(.*?)```", readme, flags=re.DOTALL)
    assert blocks, "the README shows commands"

    def commands(block: str) -> list[list[str]]:
        return [line.split("#")[0].split() for line in block.splitlines()]

    offline = commands(blocks[0])
    assert offline[:2] == [["make", "install"], ["make", "render"]] and ["make", "test"] in offline
    assert not [c for c in offline if c[0] in ("pulumi", "gcloud", "kubectl")], "the first block needs no cloud"
    deploy = next(commands(b) for b in blocks if any(c[:1] == ["pulumi"] for c in commands(b)))
    assert deploy[-1] == ["pulumi", "up"]
    assert readme.index("Try it without a cloud account") < readme.index("Quickstart on Google Cloud")
