"""Dependencies flow one way: facts at the bottom; config and planners on facts; components on
facts and planners; stacks turn config into component Args; `__main__.py` on top; the log
analytics on facts only. Read from the source with `ast`, so a forbidden import fails here
before it can tangle the packages."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from tests.conftest import parse_source

ROOT = Path(__file__).resolve().parents[2]
PULUMI = {"pulumi", "pulumi_gcp", "pulumi_kubernetes"}
# What each package may import besides the standard library (first name of the module).
ALLOWED: dict[str, set[str]] = {
    "facts": {"facts"},
    # Reads the pods' files; imports nothing of ours.
    "payload": {"payload"},
    "config": {"facts", "config", "pydantic"},
    "planners": {"facts", "planners", "payload"},
    "components": {"facts", "planners", "payload", "components", *PULUMI},
    # yaml: an existing cluster's kubeconfig (stacks.kubeapi).
    "stacks": {"facts", "config", "planners", "components", "stacks", "pydantic", "yaml", *PULUMI},
    "analysis": {"facts", "analysis", "matplotlib"},
    # The offline harness: the program under mocks, validated against the real schemas; its mocks
    # answer as the engine does, in the SDK's gRPC errors.
    "harness": {
        "facts", "config", "planners", "components", "stacks", "harness", "pydantic", "pydantic_core", "yaml",
        "jsonschema", "referencing", "kubernetes_validate", "packaging", "celpy", "grpc", *PULUMI,
    },
    # The user tools: render, docs, bench, identities, the CRD cache.
    "tools": {
        "facts", "config", "planners", "components", "stacks", "harness", "tools", "analysis", "pydantic",
        "pydantic_core", "annotated_types", "yaml", *PULUMI,
    },
    # The integration lane and the real-engine scenarios.
    "integration": {
        "facts", "config", "planners", "components", "stacks", "harness", "tools", "integration", "yaml", *PULUMI,
    },
}  # fmt: skip
# Files the pods run inside the NeMo image, beside payload/__init__.py that reads them: not part of
# the program.
PAYLOAD = ROOT / "payload"
# Run by make runtime-check's interpreter, beside the launcher (gpu_worker under torchrun for make
# gpu-train; nvidia_path in the check's process): they import the training library and the
# stand-ins by path, nothing of the program.
RUNTIME_SIDE = (ROOT / "tools" / "gpu_worker.py", ROOT / "tools" / "nvidia_path.py")


def imported_modules(path: Path) -> set[str]:
    """First names of every module a file imports (relative imports resolved to its package)."""
    found: set[str] = set()
    for node in ast.walk(parse_source(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            found.add(path.relative_to(ROOT).parts[0] if node.level else str(node.module).split(".")[0])
    return found


def package_files(package: str) -> list[Path]:
    return [
        p
        for p in sorted((ROOT / package).rglob("*.py"))
        if (p.parent != PAYLOAD or p.name == "__init__.py") and p not in RUNTIME_SIDE
    ]


def violations(package: str) -> list[str]:
    allowed = ALLOWED[package] | set(sys.stdlib_module_names) | {"__future__"}
    return [
        f"{path.relative_to(ROOT)} imports {module}"
        for path in package_files(package)
        for module in sorted(imported_modules(path) - allowed)
    ]


@pytest.mark.parametrize("package", list(ALLOWED))
def test_each_package_imports_only_what_lies_below_it(package: str) -> None:
    assert package_files(package), f"{package}/ has no modules"
    assert violations(package) == []


@pytest.mark.parametrize("path", RUNTIME_SIDE, ids=lambda path: path.name)
def test_the_runtime_side_imports_the_library_and_the_stand_ins_only(path: Path) -> None:
    beside = {other.stem for other in RUNTIME_SIDE} | {"runtime_stub"}
    # torch: the library's own dependency, which the GPU worker reads the allocator through;
    # transformers: another, whose configuration of a model the library's bridge reads.
    allowed = set(sys.stdlib_module_names) | {"megatron", "torch", "transformers"} | beside
    assert imported_modules(path) - allowed == set()


def test_facts_planners_and_analysis_import_neither_pulumi_nor_pydantic() -> None:
    for package in ("facts", "planners", "analysis"):
        assert not ALLOWED[package] & {*PULUMI, "pydantic"}, package


# What reading a file, the environment, a process or the network takes.
IO_MODULES = {"os", "pathlib", "io", "shutil", "tempfile", "glob", "subprocess", "socket", "urllib", "http"}


def io_uses(path: Path) -> list[str]:
    """The input and output a module does: modules it imports for it and calls of `open`."""
    tree = parse_source(path.read_text())
    calls = {
        "open"
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "open"
    }
    return sorted((imported_modules(path) & IO_MODULES) | calls)


def test_facts_read_nothing() -> None:
    """Facts are values: what a cache, a file or the environment holds is read by the layers above
    (stacks.installed reads the CRD cache), so a fact reads the same on every machine."""
    found = {str(p.relative_to(ROOT)): uses for p in package_files("facts") if (uses := io_uses(p))}
    assert found == {}


def test_the_entry_point_imports_only_the_stacks() -> None:
    assert imported_modules(ROOT / "__main__.py") == {"stacks"}


def test_every_top_level_package_is_ruled() -> None:
    packages = {p.parent.name for p in ROOT.glob("*/__init__.py")} - {"tests"}
    assert packages == set(ALLOWED)


def test_a_component_importing_the_config_is_caught(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The rule catches the cycle the restructure removed (components importing stacks.config)."""
    fake_root = tmp_path
    (fake_root / "components").mkdir()
    (fake_root / "components" / "gke.py").write_text("from config.cluster import GpuPoolConfig\nimport pulumi\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", fake_root)
    monkeypatch.setattr(sys.modules[__name__], "PAYLOAD", fake_root / "none")
    assert violations("components") == ["components/gke.py imports config"]
