"""Every shipped stack renders in both modes and validates; the offline render works as the
README says, and a bad config gets a message and exit code 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness import runner as program
from harness.runner import ROOT, stack_names, stack_with
from tests.conftest import MODES
from tools import docs
from tools import render as render_cli

SHIPPED = [
    "dev",
    "bootstrap",
    "a3mega",
    "a3ultra",
    "a3ultra-flex",
    "a4",
    "a4x",
    "a3high-small",
    "run-llama8b",
    "existing",
    "existing-oke",
    "teams",
    "worker-us",
    "worker-eu",
    "manager",
]


def test_the_issue_s_example_stacks_are_all_shipped() -> None:
    assert sorted(stack_names()) == sorted(SHIPPED)
    for name in SHIPPED[1:]:
        assert (ROOT / "examples" / f"Pulumi.{name}.yaml").exists()


@MODES
@pytest.mark.parametrize("stack", SHIPPED)
def test_every_shipped_stack_renders_and_validates(render: Any, stack: str, preview: bool) -> None:
    run = render(stack, preview=preview)  # the fixture validates every resource
    assert run.custom_resources


@pytest.mark.parametrize("stack", SHIPPED)
def test_make_render_works_for_every_shipped_stack(
    stack: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert render_cli.main(["--stack", stack, "--out", str(tmp_path)]) == 0
    assert capsys.readouterr().out.startswith(f"stack {stack}: ")
    assert (tmp_path / stack / "gcp-resources.json").exists() and (tmp_path / stack / "kubernetes").is_dir()


def test_render_writes_what_kubectl_and_reviewers_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert render_cli.main(["--stack", "dev", "--out", str(tmp_path)]) == 0
    out = tmp_path / "dev"
    files = sorted((out / "kubernetes").glob("*.yaml"))
    kinds = [yaml.safe_load(f.read_text())["kind"] for f in files]
    assert kinds[:2] == ["CustomResourceDefinition", "Namespace"] and kinds[-1] == "JobSet"
    assert {"ClusterQueue", "LocalQueue", "Network", "DaemonSet", "Deployment", "PersistentVolume"} <= set(kinds)
    for f in files:
        manifest = yaml.safe_load(f.read_text())
        assert list(manifest)[:3] == ["apiVersion", "kind", "metadata"]
    inventory = json.loads((out / "gcp-resources.json").read_text())
    assert {r["type"] for r in inventory} >= {"gcp:container/cluster:Cluster", "gcp:filestore/instance:Instance"}
    outputs = json.loads((out / "outputs.json").read_text())
    assert outputs["kubeconfig"] == "[secret]"
    printed = capsys.readouterr().out
    assert printed.startswith("stack dev: ") and "cluster (nemo:cluster:ClusterLayer)" in printed
    assert "  cluster-gke (nemo:gke:Cluster)" in printed
    summary = (out / "summary.md").read_text()
    assert printed.rstrip().endswith(summary.rstrip()), "the go/no-go summary is printed as written, last"
    assert printed.count("'your-gcp-project' is a placeholder") == 1, "each warning is printed once"
    lines = summary.splitlines()
    assert lines[0] == "# Go/no-go: stack dev"
    warning = next(i for i, line in enumerate(lines) if line.startswith("> **warning**"))
    table = next(i for i, line in enumerate(lines) if line.startswith("| Pool |"))
    assert warning < table and "your-gcp-project" in lines[warning], "warnings come first"
    # 2 × a3-highgpu-8g on demand in us-central1: 2 × (9.46006 + 33.60609) USD/h (facts/pricing.py).
    assert "| a3-highgpu | a3-highgpu-8g | 2 | 16 | onDemand | - | ~86 USD/h" in summary
    assert "**estimate**" in summary


def test_render_rejects_a_bad_config_with_the_key_and_exit_code_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    stack = {"config": {"nemo-gke:project": "my-project-1", "nemo-gke:zone": "us-central1"}}
    (tmp_path / "Pulumi.bad.yaml").write_text(yaml.safe_dump(stack))
    monkeypatch.setattr(program, "ROOT", tmp_path)
    assert render_cli.main(["--stack", "bad", "--out", str(tmp_path / "build")]) == 2
    error = capsys.readouterr().err
    assert "nemo-gke:zone" in error and "is a region, not a zone" in error
    assert not (tmp_path / "build").exists()


def test_the_render_entry_point_prints_no_traceback_for_an_unknown_stack(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "tools.render", "--stack", "nope", "--out", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 2
    assert "Traceback" not in result.stderr and "known stacks: " in result.stderr


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("- a list\n- not a mapping\n", "Pulumi.bad.yaml: must be a YAML mapping with a `config:` mapping"),
        ("config:\n  - nemo-gke:project\n", "Pulumi.bad.yaml:2: `config:` must map keys to values"),
        ("config:\n  nemo-gke:project: [unclosed\n", "Pulumi.bad.yaml:3: not YAML:"),
        (
            "config:\n  nemo-gke:project: my-project-1\n  nemo-gke:project: my-project-2\n",
            "Pulumi.bad.yaml:3: mapping key 'nemo-gke:project' already defined at line 2",
        ),
    ],
    ids=["list", "config-list", "syntax", "duplicate-key"],
)
def test_a_broken_stack_file_gets_one_line_and_exit_code_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], text: str, message: str
) -> None:
    """The Pulumi CLI refuses these files too (its YAML parser rejects duplicate keys)."""
    (tmp_path / "Pulumi.bad.yaml").write_text(text)
    monkeypatch.setattr(program, "ROOT", tmp_path)
    assert render_cli.main(["--stack", "bad", "--out", str(tmp_path / "build")]) == 2
    error = capsys.readouterr().err
    assert error.startswith(f"error: {message}") and error.count("\n") == 1, error


def test_an_encrypted_value_is_an_opaque_secret_to_the_render(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    stack = yaml.safe_load((ROOT / "Pulumi.dev.yaml").read_text())
    stack["config"]["gcp:credentials"] = {"secure": "v1:aGVsbG8=:c2VjcmV0"}
    (tmp_path / "Pulumi.enc.yaml").write_text(yaml.safe_dump(stack))
    monkeypatch.setattr(program, "ROOT", tmp_path)
    assert render_cli.main(["--stack", "enc", "--out", str(tmp_path / "build")]) == 0
    assert "c2VjcmV0" not in capsys.readouterr().out
    stack["config"]["nemo-gke:project"] = {"secure": "v1:aGVsbG8=:c2VjcmV0"}
    (tmp_path / "Pulumi.enc.yaml").write_text(yaml.safe_dump(stack))
    assert render_cli.main(["--stack", "enc", "--out", str(tmp_path / "build")]) == 2
    # The render cannot decrypt it, and says so, rather than blaming a "[secret]" nobody wrote.
    err = capsys.readouterr().err
    assert 'nemo-gke:project = "[secret]": is encrypted, and this run cannot decrypt it' in err
    assert "must be your GCP project ID" in err


def test_the_readme_shows_the_dev_summary_as_rendered(tmp_path: Path, render: Any) -> None:
    """The user guide's go/no-go summary is what `make render` writes for the dev stack, and the
    README's cost is that summary's."""
    assert render_cli.main(["--stack", "dev", "--out", str(tmp_path)]) == 0
    shown = "\n".join(
        "    " + line if line else "" for line in (tmp_path / "dev" / "summary.md").read_text().strip().splitlines()
    )
    for block, expected in (("dev-summary", shown), ("dev-cost", docs.dev_cost(render("dev")))):
        page = docs.BLOCKS_BY_NAME[block].page
        assert docs.block_text((ROOT / page).read_text(), block) == expected, f"{page}: {block} is stale: `make docs`"


def test_the_summary_prices_the_cpu_pools_and_the_filestore_the_stack_creates(render: Any) -> None:
    """The system pool in every zone of the cluster, the supervisor's pool where resiliency is on,
    and Filestore where the platform is on GKE; an existing cluster's stack creates none of them."""
    summary = render("a3ultra").exports["summary"]
    assert [(p["name"], p["machineType"], p["nodes"]) for p in summary["cpuPools"]] == [
        ("system", "e2-standard-4", 1),
        ("supervisor", "e2-standard-8", 2),
    ]
    assert (summary["filestore"]["tier"], summary["filestore"]["capacityGib"]) == ("ZONAL", 10240)
    regional = render("dev", values=stack_with("dev", cluster={"regional": True})).exports["summary"]
    assert regional["cpuPools"][0]["nodes"] == 3
    existing = render("existing").exports["summary"]
    assert existing["cpuPools"] == [] and existing.get("filestore") is None


def test_a_script_tells_go_from_no_go_by_the_exit_code(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The verdict was in the printed summary only. The dev stack names your-gcp-project: NO-GO;
    an existing-cluster stack names no project: GO."""
    assert render_cli.main(["--stack", "dev", "--out", str(tmp_path / "a")]) == 0
    assert render_cli.main(["--stack", "dev", "--out", str(tmp_path / "b"), "--no-go-exit"]) == render_cli.NO_GO_EXIT
    assert "Verdict: NO-GO" in capsys.readouterr().out
    assert render_cli.main(["--stack", "existing", "--out", str(tmp_path / "c"), "--no-go-exit"]) == 0
    out = capsys.readouterr().out
    # The existing cluster was not read: a plain GO would claim more than the render checked.
    assert "Verdict: GO" in out and "Offline: the cluster was not read" in out


# What a shipped stack may still say about itself: what only its user can supply (their project,
# reservations and address), and the trade-off each of two examples exists to show.
YOUR_OWN_VALUES = ("is a placeholder", "is the example's placeholder", "accepts connections from any address")
CHOSEN_TRADE_OFFS = {
    # The resiliency recipe's supervisor exists only in its own image (NeMo 24.12).
    "a3ultra": "supervised, so it runs on the resiliency recipe's image",
    # One checkpoint bucket for both workers is what lets a run resume in the other region.
    "manager": "share the checkpoint bucket",
}


@pytest.mark.parametrize("stack", SHIPPED)
def test_no_shipped_stack_warns_about_itself(render: Any, stack: str) -> None:
    """`existing`, `run-llama8b` and three more trained a model NVIDIA deprecated, and a run of
    default steps warned about the default checkpoint interval."""
    said = [w.message for w in render(stack).warnings if not any(mine in w.message for mine in YOUR_OWN_VALUES)]
    chosen = CHOSEN_TRADE_OFFS.get(stack)
    assert [m for m in said if chosen is None or chosen not in m] == []
    assert chosen is None or any(chosen in m for m in said), "the trade-off is still shown"
