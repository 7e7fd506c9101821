"""Run placement and quota checks, tested directly against flavors of every machine type."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from pydantic.alias_generators import to_camel

from facts.errors import RuleError
from facts.gke import CapacityType
from facts.kubernetes import TopologyLevel
from facts.machines import MACHINE_TYPES
from facts.models import MODELS, model_spec
from planners import workload
from planners.pools import GpuPoolExport
from planners.queues import Flavor, plan_flavor
from planners.runs import (
    ProfileWindow,
    RunSpec,
    Tokenizer,
    check_run,
    check_sequence_split,
    topology_annotation,
    untested_image,
)
from planners.runtimes import check_overrides, nemo1

PRIORITIES = ("nemo-low", "nemo-medium", "nemo-high")


def flavor(machine: str, nodes: int = 4, compact: bool = True) -> Flavor:
    return plan_flavor(GpuPoolExport("p", machine, "us-central1-b", nodes, CapacityType.ON_DEMAND, compact, nodes))


def run(model: str = "llama3.1-8b", nodes: int = 2, **settings: object) -> RunSpec:
    """A run whose config sets `settings` (the others are the model's)."""
    return RunSpec(
        name="r",
        model=model,
        pool="p",
        nodes=nodes,
        settings=model_spec(model).recipe.settings(**settings),  # type: ignore[arg-type]
        tokenizer=Tokenizer("megatron", "GPT2BPETokenizer"),
        priority="nemo-medium",
        given=frozenset(to_camel(key) for key in settings),
    )


def error_key(spec: RunSpec, target: Flavor) -> str | None:
    try:
        check_run(spec, {"p": target}, PRIORITIES)
    except RuleError as error:
        return error.key
    return None


def fitting_nodes(model: str) -> int:
    """The fewest nodes of 8 GPUs on which the model's recipe layout divides evenly."""
    s = model_spec(model).recipe.settings()
    nodes = 1
    while (nodes * 8) % s.gpu_multiple or s.global_batch_size % (s.micro_batch_size * nodes * 8 // s.model_parallel):
        nodes += 1
    return nodes


@pytest.mark.parametrize("name", [n for n, m in MACHINE_TYPES.items() if m.gpus == 8])
@pytest.mark.parametrize("model", list(MODELS))
def test_every_catalog_recipe_fits_every_eight_gpu_machine_on_enough_nodes(name: str, model: str) -> None:
    nodes = fitting_nodes(model)
    spec = run(model, nodes)
    if untested_image(spec, MACHINE_TYPES[name]):  # refused by default: see the image rule
        assert error_key(spec, flavor(name, nodes)) == "model"
        spec = replace(spec, image=model_spec(model).recipe.image.ref)
    assert error_key(spec, flavor(name, nodes)) is None
    assert error_key(spec, flavor(name, nodes - 1)) == "nodes"


@pytest.mark.parametrize(
    ("target", "spec", "key"),
    [
        (flavor("a3-highgpu-8g", nodes=2), run(nodes=3), "nodes"),
        (flavor("a3-highgpu-8g"), run(tensor_parallel=3), "tensorParallel"),
        (flavor("a3-highgpu-8g"), run("llama3.1-70b", 1), "nodes"),
        (flavor("a3-highgpu-8g"), run(global_batch_size=100), "globalBatchSize"),
        (flavor("a3-highgpu-8g"), run(micro_batch_size=3), "microBatchSize"),
        (flavor("a3-highgpu-8g"), run(global_batch_size=100, micro_batch_size=3), "globalBatchSize"),
        (flavor("a3-highgpu-8g", nodes=8), run(nodes=3), "nodes"),
        (flavor("a3-highgpu-8g"), run(sequence_length=262144), "sequenceLength"),
        (flavor("a3-highgpu-8g"), run("gpt-5b", 2, pipeline_parallel=2, virtual_pipeline=5), "pipelineParallel"),
        (flavor("a3-highgpu-8g"), replace(run(), profile=ProfileWindow(40, 60)), "profile.endStep"),
        (flavor("a3-highgpu-8g", compact=False), replace(run(), topology_mode="required"), "topology.mode"),
        (flavor("a3-highgpu-8g"), replace(run(), pool="elsewhere"), "pool"),
        (flavor("a3-highgpu-8g"), replace(run(), priority="urgent"), "priority"),
        (flavor("a3-megagpu-8g"), run("llama3.1-8b", 1), "model"),
        (flavor("a3-ultragpu-8g"), run("llama3-8b", 1, expert_parallel=2), "expertParallel"),
        # 24 GPUs hold 2 groups of EP6 × PP2: only the 128 experts do not split over 6.
        (flavor("a3-ultragpu-8g"), run("qwen3-30b-a3b", 3, expert_parallel=6, global_batch_size=1152),
         "expertParallel"),
        (flavor("a3-ultragpu-8g"), run("qwen3-30b-a3b", 2, expert_parallel=16), "expertParallel"),
        (flavor("a3-ultragpu-8g"), run("qwen3-30b-a3b", 1), "nodes"),
        (flavor("a3-ultragpu-8g", nodes=32), run("deepseek-v3", 32, pipeline_parallel=2), "pipelineParallel"),
        # 64 nodes: data-parallel 256 × micro 4 leaves 1 micro-batch per step for a pipeline of 2.
        (flavor("a3-ultragpu-8g", nodes=64), run("qwen3-30b-a3b", 64), "nodes"),
        (flavor("a3-ultragpu-8g", nodes=64), run("qwen3-30b-a3b", 32, global_batch_size=1536), "globalBatchSize"),
    ],
    ids=["quota", "tp-in-node", "model-parallel", "batch", "micro-batch", "both-batches", "data-parallel",
         "sequence", "layers", "profile", "topology", "pool", "priority", "untested-image", "dense-experts",
         "experts-split", "expert-groups", "expert-groups-nodes", "uneven-split", "interleaved-micro-batches",
         "interleaved-batch"],
)  # fmt: skip
def test_each_rule_names_the_key_the_user_wrote(target: Flavor, spec: RunSpec, key: str) -> None:
    assert error_key(spec, target) == key


@pytest.mark.parametrize(
    ("mode", "compact", "expected"),
    [
        (None, True, {"kueue.x-k8s.io/podset-preferred-topology": "cloud.google.com/gce-topology-block"}),
        (None, False, {}),
        ("required", True, {"kueue.x-k8s.io/podset-required-topology": "cloud.google.com/gce-topology-block"}),
        ("none", True, {}),
    ],
)
def test_topology_is_preferred_by_default_where_the_pool_has_topology_labels(
    mode: str | None, compact: bool, expected: dict[str, str]
) -> None:
    assert topology_annotation(replace(run(), topology_mode=mode), flavor("a3-megagpu-8g", compact=compact)) == expected


def test_the_topology_level_names_gke_s_label() -> None:
    spec = replace(run(), topology_mode="preferred", topology_level=TopologyLevel.HOSTNAME)
    assert topology_annotation(spec, flavor("a3-megagpu-8g")) == {
        "kueue.x-k8s.io/podset-preferred-topology": "kubernetes.io/hostname"
    }


@pytest.mark.parametrize(
    ("model", "override", "key"),
    [
        ("gpt-5b", "trainer.max_steps", "steps"),
        ("llama3.1-8b", "trainer.max_steps", "steps"),
        ("llama3.1-8b", "trainer.strategy.tensor_model_parallel_size", "tensorParallel"),
        ("llama3-70b", "train.train_iters", "steps"),
        ("llama3-70b", "model.seq_length", "sequenceLength"),
    ],
)
def test_an_override_of_what_a_run_s_key_sets_is_refused_naming_the_key(model: str, override: str, key: str) -> None:
    """`trainer.max_steps: 999` with `steps: 50` trained 999 steps while the summary priced 50."""
    spec = replace(run(model), overrides={override: 999, "model.optim.lr": 1e-4})
    with pytest.raises(RuleError) as error:
        check_overrides(spec)
    assert error.value.key == f"overrides.{override}" and f"set {key} instead" in str(error.value)
    assert check_overrides(replace(spec, overrides={"model.optim.lr": 1e-4})) is None


def test_every_keyed_nemo1_path_is_one_the_launcher_sets() -> None:
    """The NeMo 1 config is built here (planners.runtimes.nemo1.config): each refused path is in it."""
    spec = run("gpt-5b")
    config = nemo1.config(spec, workload.run_paths(spec, "/e", "/c", "/d"), MACHINE_TYPES["a3-highgpu-8g"])
    for path in nemo1.KEYED_OVERRIDES:
        node: Any = config
        for part in path.split("."):
            assert isinstance(node, dict) and part in node, path
            node = node[part]


@pytest.mark.parametrize(
    ("settings", "words"),
    [
        ({"context_parallel": 2, "tensor_parallel": 1, "sequence_length": 8190}, "multiple of 2 × contextParallel = 4"),
        ({"context_parallel": 1, "tensor_parallel": 4, "sequence_length": 8190}, "use a multiple of 4"),
        ({"context_parallel": 2, "tensor_parallel": 4, "sequence_length": 8196}, "use a multiple of 8"),
    ],
)
def test_a_sequence_the_layout_cannot_split_is_refused(settings: dict[str, int], words: str) -> None:
    """It rendered silently, and failed at the first batch in the pods."""
    with pytest.raises(RuleError) as error:
        check_sequence_split(model_spec("llama3.1-8b").recipe.settings(**settings))  # type: ignore[arg-type]
    assert error.value.key == "sequenceLength" and words in str(error.value)
    assert check_sequence_split(model_spec("llama3.1-8b").recipe.settings(sequence_length=8192)) is None
