"""Megatron-Bridge runs through the whole program: a run on a machine with a published recipe
starts from that recipe, in the recipe's image, with the launcher and its settings shipped in the
run's ConfigMap; what the runtime cannot do is refused by key."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from facts import versions
from harness.runner import ROOT, stack_with
from planners import nemo, workload
from planners.runtimes import bridge, nemo2
from tests.conftest import Render, issue_for, rejected
from tools import render as render_cli


def bridge_stack(machine: str, **run: Any) -> dict[str, Any]:
    return stack_with(
        "dev",
        zone="us-central1-b",
        gpuPools=[{"name": "gpu", "machineType": machine, "nodeCount": 8}],
        training={"runs": [{"name": "l70", "model": "llama3-70b", "nodes": 8, **run}]},
    )


def test_a_run_on_a4_starts_from_the_a4_recipe_in_its_image(render: Render) -> None:
    run = render("dev", values=bridge_stack("a4-highgpu-8g"))
    (jobset,) = map(run.manifest, run.of_type("kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"))
    (container,) = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"]
    assert container["image"] == run.pulled_as(versions.NEMO_2602.ref)
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["NEMO_ENTRYPOINT"] == f"{workload.WORKLOAD_DIR}/{bridge.SCRIPT}"
    (config_map,) = (
        run.manifest(r) for r in run.of_type("kubernetes:core/v1:ConfigMap") if bridge.SCRIPT in run.manifest(r)["data"]
    )
    settings = json.loads(config_map["data"][workload.RUN_SETTINGS])
    assert (settings["mixedPrecision"], settings["train"]["train_iters"]) == ("bf16_with_mxfp8_mixed", 30)


def test_a_runs_own_keys_override_the_machines_recipe(render: Render) -> None:
    run = render("dev", values=bridge_stack("a3-ultragpu-8g", steps=10, fp8=True, globalBatchSize=512))
    (config_map,) = (
        run.manifest(r) for r in run.of_type("kubernetes:core/v1:ConfigMap") if bridge.SCRIPT in run.manifest(r)["data"]
    )
    settings = json.loads(config_map["data"][workload.RUN_SETTINGS])
    assert settings["train"] == {"train_iters": 10, "global_batch_size": 512, "micro_batch_size": 1}
    assert settings["mixedPrecision"] == "bf16_with_fp8_current_scaling_mixed"


def test_resiliency_settings_are_refused_on_megatron_bridge_naming_the_runtime() -> None:
    message = issue_for(
        rejected(bridge_stack("a3-ultragpu-8g", resiliency={"faultTolerance": True})), "training.runs[0].resiliency"
    )
    assert "llama3-70b runs on Megatron-Bridge; resiliency settings need a NeMo 2 model (such as llama3.1-70b)" in (
        message
    )
    # Megatron-Bridge 0.3.0 training/config.py: FaultToleranceConfig "is for Nvidia internal use only".
    assert "for NVIDIA's internal use" in message


def test_a4_trains_llama_405b_at_its_own_recipes_layout(render: Render) -> None:
    """gpu-recipes' A4 recipe (training/a4/llama31_405b/nemo-gke/nemo2507/128gpus-fp8-gbs128@2e1fd5e)
    trains on 16 nodes at TP8 × PP8 × VP2 with FP8 current scaling; the A3 Ultra recipe's layout
    (72 nodes, PP9) cannot split 16 nodes, so an A4 run starts from A4's recipe."""
    values = stack_with(
        "dev",
        zone="us-central1-b",
        gpuPools=[{"name": "gpu", "machineType": "a4-highgpu-8g", "nodeCount": 16}],
        training={"runs": [{"name": "l405", "model": "llama3.1-405b", "nodes": 16}]},
    )
    run = render("dev", values=values)
    (config_map,) = (
        run.manifest(r) for r in run.of_type("kubernetes:core/v1:ConfigMap") if nemo2.SCRIPT in run.manifest(r)["data"]
    )
    settings = json.loads(config_map["data"][workload.RUN_SETTINGS])
    layout = [settings[k] for k in ("tensorParallel", "pipelineParallel", "virtualPipeline", "globalBatchSize")]
    assert layout == [8, 8, 2, 128]
    assert (settings["fp8"], settings["fp8Scaling"]) == (True, "current")
    assert settings["pipelineSplitCountsEmbeddingAndLoss"] is True


def test_a_nemo2_run_splits_its_layers_the_way_its_stages_divide_them(render: Render) -> None:
    """A4's 405B recipe counts the embedding and the loss as a layer each (128 over PP8 × VP2).
    The A3 Ultra layout on as many A4 nodes (PP9 × VP14 = 126 stages) divides the layers alone,
    and NeMo 2.4's MegatronStrategy splits either way (facts.models EITHER_SPLIT_IMAGES): the run
    is split so. Stages that divide neither 126 nor 128 are refused, naming both."""
    a3_layout = {"pipelineParallel": 9, "virtualPipeline": 14, "globalBatchSize": 2016}
    pools = [{"name": "gpu", "machineType": "a4-highgpu-8g", "nodeCount": 72}]
    values = stack_with(
        "dev",
        zone="us-central1-b",
        gpuPools=pools,
        training={"runs": [{"name": "l405", "model": "llama3.1-405b", "nodes": 72, **a3_layout}]},
    )
    run = render("dev", values=values)
    (config_map,) = (
        run.manifest(r) for r in run.of_type("kubernetes:core/v1:ConfigMap") if nemo2.SCRIPT in run.manifest(r)["data"]
    )
    settings = json.loads(config_map["data"][workload.RUN_SETTINGS])
    assert (settings["pipelineParallel"], settings["virtualPipeline"]) == (9, 14)
    assert settings["pipelineSplitCountsEmbeddingAndLoss"] is False
    neither = {"runs": [{"name": "l405", "model": "llama3.1-405b", "nodes": 72, **a3_layout, "virtualPipeline": 4}]}
    message = issue_for(rejected({**values, "nemo-gke:training": neither}), "training.runs[0].pipelineParallel")
    assert (
        "(36) must divide the 126 layers of llama3.1-405b, or the 128 its launcher splits with the embedding and the "
        "loss counted as a layer each" in message
    ), message


def test_a_render_says_what_an_update_would_do_to_each_run(
    tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The second render into a folder says what `pulumi up` would do to each run were the first
    deployed (planners.submitted): nothing for an unchanged run; a catalog bump (here the run's
    recipe image) keeps a submitted run as it is; a change of the run's own keys is refused at
    its revision, and a raised revision replaces the run."""
    stack_file = tmp_path / "Pulumi.dev.yaml"
    values = yaml.safe_load((ROOT / "Pulumi.dev.yaml").read_text())
    stack_file.write_text(yaml.safe_dump(values))
    out = tmp_path / "build"

    def rendered() -> list[str]:
        assert render_cli.main(["--file", str(stack_file), "--out", str(out)]) == 0
        return [line for line in capsys.readouterr().out.splitlines() if line.startswith("  run gpt5b-demo:")]

    assert rendered() == []
    assert rendered() == []
    workload_files = nemo.workload_files
    monkeypatch.setattr(nemo, "workload_files", lambda *a: {**workload_files(*a), "upgraded.txt": "1"})
    (kept,) = rendered()
    assert kept == (
        "  run gpt5b-demo: JobSet nemo/gpt5b-demo is kept as submitted at revision 1; this version of the platform "
        "renders the run otherwise, which reaches it only when its revision is raised"
    )
    monkeypatch.undo()
    rendered()
    values["config"]["nemo-gke:training"]["runs"][0]["steps"] = 80
    stack_file.write_text(yaml.safe_dump(values))
    (refused,) = rendered()
    assert "`pulumi up` refuses the change: changes run gpt5b-demo, submitted at revision 1 (steps 50 → 80)" in refused
    values["config"]["nemo-gke:training"]["runs"][0]["revision"] = 2
    stack_file.write_text(yaml.safe_dump(values))
    values["config"]["nemo-gke:training"]["runs"][0]["image"] = "nvcr.io/nvidia/nemo:24.12"
    stack_file.write_text(yaml.safe_dump(values))
    (replaced,) = rendered()
    assert replaced.startswith(
        "  run gpt5b-demo: revision 1 → 2 replaces JobSet nemo/gpt5b-demo with gpt5b-demo-r2: its pods stop"
    )
    assert re.search(r"\(image \S+/nvidia/nemo:24\.07 -> \S+/nvidia/nemo:24\.12\)$", replaced)


def test_a_megatron_tokenizer_megatron_bridge_cannot_build_is_refused_by_key() -> None:
    values = bridge_stack(
        "a3-ultragpu-8g",
        dataset={"source": "gcs", "prefix": "datasets/wiki/wiki_text_document"},
        tokenizer={"library": "megatron", "type": "BertWordPieceLowerCase"},
    )
    message = issue_for(rejected(values), "training.runs[0].tokenizer.type")
    assert "use GPT2BPETokenizer, or library huggingface or sentencepiece" in message
