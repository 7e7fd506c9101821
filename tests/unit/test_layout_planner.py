"""The layout planner (planners.layout, tools.layout): its memory and time model against NVIDIA's
published rows, the search, and its refusals."""

from __future__ import annotations

import dataclasses

import pytest

from facts import versions
from facts.errors import RuleError
from facts.machines import MACHINE_TYPES, Precision
from facts.models import model_spec
from facts.published import CURRENT_RUNS, DGX_SYSTEMS, PUBLISHED_RUNS, DgxSystems
from planners import layout
from planners.layout import (
    AGREEMENT_ROWS,
    CALIBRATION_ROWS,
    LEAVE_ONE_OUT_BOUND,
    Fabric,
    Layout,
    LayoutRequest,
    Target,
    agreements,
    calibration,
    leave_one_out,
    memory,
    published_target,
)
from planners.runs import RunSpec, Tokenizer
from tools import layout as layout_tool

H100 = Fabric.of_system(DGX_SYSTEMS[DgxSystems.DGX_H100])
B200 = Fabric.of_system(DGX_SYSTEMS[DgxSystems.DGX_B200])


def _layout(**fields: object) -> Layout:
    base = {
        "tensor_parallel": 1,
        "pipeline_parallel": 1,
        "virtual_pipeline": None,
        "context_parallel": 1,
        "expert_parallel": 1,
        "micro_batch_size": 1,
        "global_batch_size": 128,
        "sequence_length": 8192,
        "precision": Precision.FP8,
    }
    return Layout(**(base | fields))  # type: ignore[arg-type]


def _target(model: str, machine: str, nodes: int, fabric: Fabric | None = None) -> Target:
    m = MACHINE_TYPES[machine]
    spec = model_spec(model)
    return Target(spec, spec.architecture, m, nodes, fabric or Fabric.of_machine(m))


# ---------------------------------------------------------------------- the published rows


def test_the_fit_uses_every_published_row_the_launcher_can_build() -> None:
    assert calibration().rows == CALIBRATION_ROWS
    assert {r.fsdp for r in CALIBRATION_ROWS} == {False}
    assert len(CALIBRATION_ROWS) == len(PUBLISHED_RUNS) - sum(r.fsdp for r in PUBLISHED_RUNS)
    fit = calibration()
    # Slower than the peak, never faster: every compute coefficient is at least 1.
    assert fit.dense >= 1 and fit.expert >= 1
    assert fit.small_experts >= 0 and fit.seconds_per_thousand_sample_layers >= 0


def test_a_published_row_states_the_step_its_throughput_implies() -> None:
    """Tokens per step over tokens per second: 256 × 8192 / (64 × 1621) for Llama 3 70B on H100,
    the 20.21 s the catalog prices A3 Ultra's recipe with."""
    row = next(r for r in PUBLISHED_RUNS if r.citation == "26.02, DGX-H100, LLAMA3_70B, 64 GPUs, FP8, GBS 256")
    assert row.step_seconds == pytest.approx(256 * 8192 / (64 * 1621))
    assert model_spec("llama3-70b").step_time("a3-ultragpu-8g", 8, 256, True).seconds == round(row.step_seconds, 2)


def test_the_catalogs_step_times_are_published_rows() -> None:
    """The go/no-go's published step times come from the same rows the planner is fitted on."""
    citations = {r.source for r in PUBLISHED_RUNS}
    steps = [t for name in ("llama3-8b", "llama3-70b", "qwen3-30b-a3b", "gpt-oss-120b", "deepseek-v3")
             for t in model_spec(name).step_times]  # fmt: skip
    assert steps and all(t.source in citations for t in steps)


def test_held_out_rows_are_predicted_as_the_docs_say() -> None:
    """Each calibration row predicted by a fit on the others: every dense model's within the bar,
    and at least the count docs/training.md states (its generated table is checked by
    tests/repo/test_docs.py)."""
    held_out = leave_one_out()
    assert len(held_out) == len(CALIBRATION_ROWS)
    dense = [h for h in held_out if model_spec(h.row.model).architecture.experts is None]
    missed = [h.row.citation for h in dense if abs(h.error) > LEAVE_ONE_OUT_BOUND]
    assert len(dense) == 11 and not missed, missed
    assert sum(abs(h.error) <= LEAVE_ONE_OUT_BOUND for h in held_out) >= 17


def test_a_held_out_fit_never_sees_its_row() -> None:
    row = CALIBRATION_ROWS[0]
    with_it = calibration().step_seconds(layout._row_terms(row))
    assert leave_one_out()[0].predicted_seconds != pytest.approx(with_it)


def test_non_negative_least_squares_finds_the_constrained_optimum() -> None:
    """y = 2·x0 exactly with x1 anti-correlated: the unconstrained fit would give x1 a negative
    weight; the constrained one drops it."""
    x = [[1.0, 0.0], [2.0, -1.0], [3.0, 1.0], [4.0, -2.0]]
    y = [2.0, 4.0, 6.0, 8.0]
    assert layout._nonnegative_least_squares(x, y) == pytest.approx([2.0, 0.0])
    assert layout._nonnegative_least_squares([[1.0], [2.0]], [-1.0, -2.0]) == [0.0]


# ---------------------------------------------------------------------- memory


def test_a_gpt_layer_keeps_what_korthikanti_et_al_count() -> None:
    """34·s·b·h/t bytes per layer with sequence parallelism (arXiv:2205.05198 §4.2.2), less the
    two dropout masks (2·s·b·h: the recipes train without dropout) and the attention scores,
    which flash attention does not keep: 32·s·b·h/t."""
    gpt = model_spec("gpt-5b").architecture
    lay = _layout(tensor_parallel=2, micro_batch_size=4, sequence_length=2048, precision=Precision.BF16)
    per_layer, kept = layout._activation_bytes(gpt, lay, ())
    sbh = 2048 * 4 * gpt.hidden
    assert per_layer == pytest.approx(32 * sbh / 2)
    assert kept == pytest.approx(2 * sbh / 2)
    # In FP8 the four linear layers keep their inputs (h, h, h and 4h a token) in one byte.
    fp8, _ = layout._activation_bytes(gpt, dataclasses.replace(lay, precision=Precision.FP8), ())
    assert fp8 == pytest.approx((32 - 7) * sbh / 2)


def test_selective_recomputation_drops_what_it_recomputes() -> None:
    arch = model_spec("gpt-oss-120b").architecture
    lay = _layout(expert_parallel=8, sequence_length=4096, precision=Precision.BF16)
    full, _ = layout._activation_bytes(arch, lay, ())
    norms, _ = layout._activation_bytes(arch, lay, ("layernorm",))
    both, _ = layout._activation_bytes(arch, lay, ("layernorm", "moe_act"))
    tokens, h = 4096, arch.hidden
    assert full - norms == pytest.approx(tokens * 2 * h * 2)  # two norm outputs, two bytes each
    e = arch.experts
    assert e is not None
    assert norms - both == pytest.approx(tokens * e.top_k * e.ffn_hidden * 2)


def test_the_last_stage_holds_one_micro_batch_and_the_logits() -> None:
    """Under 1F1B the last stage keeps one micro-batch in flight: the first stage's p decide,
    unless the logits outweigh them."""
    arch = model_spec("llama3-70b").architecture
    lay = _layout(tensor_parallel=4, pipeline_parallel=8, global_batch_size=64)
    assert layout._layers_in_flight(arch, lay, 32, rank=7) == 80 / 8
    used = memory(arch, lay, 64)
    assert used.logits == 0 and used.activations == pytest.approx(
        layout._layers_in_flight(arch, lay, 32) * (layout._activation_bytes(arch, lay, ())[0])
    )


def test_the_first_stage_holds_the_pipelines_warm_up() -> None:
    """1F1B: the first stage holds p micro-batches of its layers; the interleaved schedule
    2(p − 1) + (v − 1)·p + 1 chunks (megatron-core schedules.py, group size p)."""
    arch = model_spec("llama3-70b").architecture  # 80 layers
    assert layout._layers_in_flight(arch, _layout(pipeline_parallel=8), 64) == 80 / 8 * 8
    assert layout._layers_in_flight(arch, _layout(pipeline_parallel=8), 3) == 80 / 8 * 3
    interleaved = _layout(pipeline_parallel=4, virtual_pipeline=5)
    assert layout._layers_in_flight(arch, interleaved, 64) == 80 / 20 * (2 * 3 + 4 * 4 + 1)


def test_the_optimizer_state_is_spread_over_the_data_and_context_parallel_gpus() -> None:
    """4 + 16/d bytes a parameter with BF16 weights and gradient buffers (Megatron-LM
    dist_optimizer.md); BF16 through the precision-aware optimizer keeps 10 of the 16 (a 16-bit
    remainder of the master weight, FP32 moments, the gradient read in BF16); d counts the
    context-parallel GPUs too."""
    arch = model_spec("llama3-8b").architecture
    assert memory(arch, _layout(), 8).states == pytest.approx(arch.parameters * (4 + 16 / 8))
    assert memory(arch, _layout(), 1).states == pytest.approx(arch.parameters * 20)
    bf16 = _layout(precision=Precision.BF16)
    assert memory(arch, bf16, 8, precision_aware=True).states == pytest.approx(arch.parameters * (4 + 10 / 8))
    assert memory(arch, bf16, 8).states == pytest.approx(arch.parameters * (4 + 16 / 8))
    context = _layout(context_parallel=2)
    assert memory(arch, context, 8).states == pytest.approx(arch.parameters * (4 + 16 / 8))


def test_every_published_layout_fits_its_gpus() -> None:
    """NVIDIA ran each of these (the fitted rows and the current ones); the estimate must not call
    one out of memory, nor ask for recomputation NVIDIA's configurations do not have, but GPT-OSS
    120B on H100 at micro-batch 4, whose 25.11 configuration is not the one published now
    (micro-batch 1)."""
    needs_recomputation = []
    for row in [*CALIBRATION_ROWS, *(r for r in AGREEMENT_ROWS if r not in CALIBRATION_ROWS)]:
        target = published_target(row)
        fitting = target.fitted(Layout.of_published(row))
        assert fitting is not None, row.citation
        if fitting.recompute_layers:
            needs_recomputation.append(row.citation)
    assert needs_recomputation == ["25.11, DGX-H100, GPT OSS 120B, 64 GPUs, BF16, GBS 512"]


def test_the_peak_is_the_backward_pass_or_the_optimizers_step_not_both() -> None:
    """The FP32 gradient shard exists from the optimizer's step on, when the activations are
    gone: Llama 3.1 405B at NVIDIA's GB200 layout holds 181 GB at its peak, not the 188 GB the
    activations and the FP32 gradients would make together, and fits the GPU's 186 GB."""
    row = next(r for r in CALIBRATION_ROWS if r.citation == "26.02, DGX-GB200, LLAMA3.1_405B, 256 GPUs, FP8, GBS 1536")
    target = published_target(row)
    found = memory(target.architecture, Layout.of_published(row), target.gpus, target.recomputed_modules, True)
    assert found.peak == found.forward_backward > found.held
    assert found.peak / 1e9 == pytest.approx(180.7, abs=0.1)
    assert (found.forward_backward + found.fp32_gradients) / 1e9 == pytest.approx(187.5, abs=0.1)
    assert found.peak <= target.fabric.hbm_bytes < found.forward_backward + found.fp32_gradients
    small = dataclasses.replace(found, activations=0.0, logits=0.0)
    assert small.peak == small.held


@pytest.mark.parametrize(
    ("model", "machine", "nodes", "fields"),
    [
        # 70B unsplit: 70.6e9 × (4 + 12/8) bytes of state alone, twice a B200's 180 GB.
        ("llama3-70b", "a4-highgpu-8g", 1, {}),
        # 405B over 64 H100 at TP8 PP8: 6.3e9 parameters × 16 bytes per GPU, beyond 80 GB.
        ("llama3.1-405b", "a3-megagpu-8g", 8, {"tensor_parallel": 8, "pipeline_parallel": 8}),
        # 8B on one H100: 8e9 × 16 bytes.
        ("llama3-8b", "a3-highgpu-1g", 1, {}),
    ],
)
def test_layouts_whose_state_alone_exceeds_the_gpu_do_not_fit(
    model: str, machine: str, nodes: int, fields: dict[str, int]
) -> None:
    target = _target(model, machine, nodes)
    lay = _layout(global_batch_size=target.gpus, **fields)
    assert target.fitted(lay) is None
    assert memory(target.architecture, lay, target.gpus).states > target.fabric.hbm_bytes


def test_recomputation_is_taken_only_as_far_as_memory_needs() -> None:
    """Llama 3 70B at TP2 PP4 VP5 on H100 needs full recomputation of some layers; on B200 it
    fits as it is."""
    lay = _layout(tensor_parallel=2, pipeline_parallel=4, virtual_pipeline=5, global_batch_size=256)
    on_h100 = _target("llama3-70b", "a3-megagpu-8g", 8, H100).fitted(lay)
    on_b200 = _target("llama3-70b", "a4-highgpu-8g", 8, B200).fitted(lay)
    assert on_b200 == lay
    assert on_h100 is not None and on_h100.recompute_layers > 0
    fewer = dataclasses.replace(on_h100, recompute_layers=on_h100.recompute_layers - 1)
    arch = model_spec("llama3-70b").architecture
    assert memory(arch, fewer, 64).peak > H100.hbm_bytes >= memory(arch, on_h100, 64).peak


# ---------------------------------------------------------------------- step time and ranking


def test_interleaving_shrinks_the_bubble() -> None:
    target = _target("llama3-70b", "a3-megagpu-8g", 8, H100)
    plain = target.predict(_layout(tensor_parallel=4, pipeline_parallel=8, global_batch_size=64))
    interleaved = target.predict(
        _layout(tensor_parallel=4, pipeline_parallel=8, virtual_pipeline=5, global_batch_size=64)
    )
    assert interleaved.step_seconds < plain.step_seconds


def test_expert_groups_stay_on_nvlink_inside_a_runs_nvlink_blocks() -> None:
    """GB200 NVL72: 64 nodes are placed as 16-node blocks (the most nodes up to 18 dividing 64,
    as NVIDIA segments its GB200 runs), so EP64 stays on NVLink and EP128 does not; on HGX a block
    is a node."""
    gb200 = Fabric.of_system(DGX_SYSTEMS[DgxSystems.DGX_GB200])
    assert gb200.nvlink_block(256) == 64 and gb200.nvlink_block(72) == 72 and gb200.nvlink_block(8) == 8
    assert gb200.experts_on_nvlink(64, 256) and not gb200.experts_on_nvlink(128, 256)
    assert not gb200.experts_on_nvlink(48, 256)
    assert B200.nvlink_block(256) == 8 and B200.experts_on_nvlink(8, 256) and not B200.experts_on_nvlink(16, 256)


def test_experts_across_nodes_exchange_over_the_slower_fabric() -> None:
    """GPT-OSS 120B on 64 B200: EP64 sends the experts' tokens over 400 Gb/s NICs, EP8 over NVLink."""
    target = _target("gpt-oss-120b", "a4-highgpu-8g", 8, B200)
    lay = _layout(global_batch_size=1280, micro_batch_size=4, sequence_length=4096, precision=Precision.BF16)
    across = layout.terms(target.architecture, dataclasses.replace(lay, expert_parallel=64), 64, B200)
    inside = layout.terms(target.architecture, dataclasses.replace(lay, expert_parallel=8), 64, B200)
    assert across.expert_exchange > 10 * inside.expert_exchange


def test_the_8b_model_on_one_node_is_not_split() -> None:
    """Nothing to gain from splitting a model that fits one GPU: the first choice is TP1 PP1."""
    first = LayoutRequest.of("llama3-8b", "a4-highgpu-8g", 1, global_batch_size=128).plan()[0]
    assert (first.layout.tensor_parallel, first.layout.pipeline_parallel, first.layout.context_parallel) == (1, 1, 1)


def test_the_planner_agrees_with_nvidia_s_current_layouts_on_70_percent_of_rows() -> None:
    found = agreements()
    assert [a.row for a in found] == list(AGREEMENT_ROWS)
    assert sum(a.agrees for a in found) >= 0.7 * len(found)
    by_row = {a.row.citation: a for a in found}
    # Where NVIDIA moved after the fitted 26.02 rows to the planner's choice: the experts inside a
    # node, and a larger micro-batch (docs/training.md, Layouts).
    gpt_oss = by_row["26.04.01, DGX-B200, GPT OSS 120B, 64 GPUs, BF16, GBS 1280"]
    assert gpt_oss.first is not None and gpt_oss.first.layout == gpt_oss.nvidia.layout
    qwen = by_row["26.04.01, DGX-B200, Qwen3_30B_a3B, 8 GPUs, MXFP8, GBS 512"]
    assert qwen.first is not None and qwen.first.layout == qwen.nvidia.layout


def test_nvidia_s_current_layout_is_the_newest_row_of_each_model_system_and_precision() -> None:
    keys = [r.current_key for r in CURRENT_RUNS]
    assert len(keys) == len(set(keys))
    for row in PUBLISHED_RUNS:
        current = next(r for r in CURRENT_RUNS if r.current_key == row.current_key)
        assert tuple(map(int, current.release.split("."))) >= tuple(map(int, row.release.split(".")))
    current = {r.current_key: r.release for r in CURRENT_RUNS}
    # 26.06 ran Qwen3 on H100 at EP16; the 25.11 "FP8-CS" rows are the later tables' FP8 ones;
    # no later table has Llama 3.1 405B on B200.
    assert current["qwen3-30b-a3b", "DGX-H100", "FP8"] == "26.06"
    assert current["llama3-70b", "DGX-H100", "FP8"] == "26.04.01"
    assert current["llama3.1-405b", "DGX-B200", "FP8"] == "25.11"
    assert not any(r.fsdp for r in AGREEMENT_ROWS) and any(r.fsdp for r in CURRENT_RUNS)


def test_every_proposal_is_a_layout_the_config_check_accepts_and_fits() -> None:
    request = LayoutRequest.of("qwen3-30b-a3b", "a4-highgpu-8g", 2)
    proposals = request.search()
    assert proposals
    for p in proposals:
        assert request.target.valid(p.layout)
        assert p.memory.peak <= request.target.fabric.hbm_bytes
    assert [p.step_seconds for p in proposals] == sorted(p.step_seconds for p in proposals)


def test_the_search_is_deterministic() -> None:
    once = LayoutRequest.of("llama3-70b", "a4x-highgpu-4g", 16).plan()
    again = LayoutRequest.of("llama3-70b", "a4x-highgpu-4g", 16).plan()
    assert [p.layout for p in once] == [p.layout for p in again]


def test_a_batch_no_layout_splits_is_refused_with_the_nearest_that_work() -> None:
    """48 GPUs: every split leaves a data-parallel size with a factor 3, which 256 lacks."""
    with pytest.raises(RuleError) as refused:
        LayoutRequest.of("llama3-70b", "a3-ultragpu-8g", 6, global_batch_size=256).plan()
    assert refused.value.key == "globalBatchSize"
    assert str(refused.value).endswith("255 or 258 would")
    assert LayoutRequest.of("llama3-70b", "a3-ultragpu-8g", 6, global_batch_size=255).plan()


@pytest.mark.parametrize(
    ("args", "key"),
    [
        (("no-such-model", "a4-highgpu-8g", 1), "model"),
        (("llama3-8b", "a9-megagpu-1g", 1), "machine"),
        (("llama3-8b", "a4-highgpu-8g", 0), "nodes"),
        (("llama3-8b", "a3-highgpu-1g", 1), "nodes"),
    ],
)
def test_impossible_requests_are_refused_by_key(args: tuple[str, str, int], key: str) -> None:
    with pytest.raises(RuleError) as refused:
        LayoutRequest.of(*args).plan()
    assert refused.value.key == key


def test_a_sequence_beyond_the_model_is_refused() -> None:
    with pytest.raises(RuleError) as refused:
        LayoutRequest.of("llama3-8b", "a4-highgpu-8g", 1, sequence_length=10**6).plan()
    assert refused.value.key == "sequenceLength"


# ---------------------------------------------------------------------- the command


def test_the_command_prints_the_fastest_layouts_and_the_recipes_rank(capsys: pytest.CaptureFixture[str]) -> None:
    assert layout_tool.main(["llama3-70b", "--machine", "a3-ultragpu-8g", "--nodes", "8", "--top", "3"]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("| ") and line[2].isdigit()]
    assert len(rows) == 3
    assert "The recipe's layout (TP4 PP8 VP5 MBS1) ranks" in out
    assert "USD" in rows[0]


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["llama3-70b", "--machine", "a3-ultragpu-8g", "--nodes", "6"], "--global-batch-size 256:"),
        (["nope", "--machine", "a3-ultragpu-8g", "--nodes", "1"], "MODEL nope:"),
        (["llama3-8b", "--machine", "a3-highgpu-1g", "--nodes", "1"], "--nodes 1: no layout of llama3-8b fits"),
    ],
)
def test_a_refused_request_is_one_line_and_exit_2(
    argv: list[str], words: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert layout_tool.main(argv) == 2
    err = capsys.readouterr().err
    assert words in err and err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize("flag", [["--nodes", "0"], ["--nodes", "x"], ["--precision", "fp4"], ["--top", "-1"]])
def test_a_malformed_flag_exits_2(flag: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["llama3-8b", "--machine", "a4-highgpu-8g", "--nodes", "1"]
    with pytest.raises(SystemExit) as exited:
        layout_tool.main([*argv, *flag])
    assert exited.value.code == 2
    assert "Traceback" not in capsys.readouterr().err


def test_an_auto_layout_carries_its_recomputation_into_the_run() -> None:
    """DeepSeek-V3 on 16 A4 nodes: the chosen layout recomputes layers, and the run's settings,
    which the Megatron-Bridge launcher reads (recomputeLayers), say how many."""
    machine = MACHINE_TYPES["a4-highgpu-8g"]
    settings = model_spec("deepseek-v3").recipe_on(machine.name).settings()
    chosen = LayoutRequest.of("deepseek-v3", machine.name, 16).choose().layout
    planned = layout.planned_settings("deepseek-v3", machine, 16, settings)
    assert chosen.recompute_layers > 0
    assert planned.recompute_layers == chosen.recompute_layers
    assert (planned.tensor_parallel, planned.pipeline_parallel, planned.expert_parallel) == (
        chosen.tensor_parallel,
        chosen.pipeline_parallel,
        chosen.expert_parallel,
    )


def test_a_run_without_recomputation_in_its_runtime_is_planned_without() -> None:
    """The launcher sets recomputed layers for Megatron-Bridge only: a NeMo 2 run's layout fits
    as it is."""
    request = LayoutRequest.of("llama3.1-70b", "a3-megagpu-8g", 8)
    assert not request.target.bridge
    assert all(p.layout.recompute_layers == 0 for p in request.plan())


def test_a_machine_without_gpu_nics_keeps_its_experts_inside_a_node() -> None:
    """a3-highgpu-4g reaches other nodes over its gVNIC, whose bandwidth per GPU no source gives:
    its layouts are planned across nodes, but no expert-parallel group spans them."""
    proposals = LayoutRequest.of("qwen3-30b-a3b", "a3-highgpu-4g", 4, global_batch_size=512).plan()
    assert proposals and all(p.layout.expert_parallel <= 4 for p in proposals)


def test_no_step_is_predicted_for_experts_spread_over_a_gvnic() -> None:
    """A run on a machine without GPU NICs whose expert-parallel group spans nodes: the model
    knows no bandwidth for that exchange, so the plan predicts nothing rather than divide by 0."""
    machine = MACHINE_TYPES["a3-highgpu-4g"]
    spec = model_spec("qwen3-30b-a3b")
    settings = spec.recipe_on(machine.name).settings(
        global_batch_size=512, tensor_parallel=1, pipeline_parallel=1, expert_parallel=8, micro_batch_size=1
    )
    run = RunSpec("r", spec.name, "p", 2, settings, Tokenizer("megatron", "GPT2BPETokenizer"), "x")
    assert layout.predicted_step_seconds(run, machine) is None
    inside = dataclasses.replace(run, settings=dataclasses.replace(settings, expert_parallel=4))
    assert layout.predicted_step_seconds(inside, machine) is not None


def test_the_recipes_layout_is_chosen_only_where_its_exchange_is_known() -> None:
    """Qwen3 30B-A3B's recipe (EP8) on 4 a3-highgpu-4g nodes spreads its experts over the gVNIC:
    `layout: auto` keeps its expert groups inside a node instead of failing."""
    chosen = LayoutRequest.of("qwen3-30b-a3b", "a3-highgpu-4g", 4).choose()
    assert chosen.layout.expert_parallel <= 4 and chosen.step_seconds > 0


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (["qwen3-30b-a3b", "--machine", "a4-highgpu-8g", "--nodes", "12"], "is not one of these GPUs at this batch"),
        (["llama3-70b", "--machine", "a3-ultragpu-8g", "--nodes", "8"], "The recipe's layout (TP4 PP8 VP5 MBS1) ranks"),
    ],
)
def test_the_command_says_where_the_recipe_stands(
    argv: list[str], line: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """96 GPUs leave Qwen3's recipe (one node's EP8 at global batch 512) no whole split."""
    assert layout_tool.main([*argv, "--top", "1"]) == 0
    assert line in capsys.readouterr().out


def test_llama_405b_on_a_power_of_two_of_h100_nodes_gets_a_layout() -> None:
    """126 layers split over no power of two of stages but 1 and 2, and two stages of 405B do not
    fit 80 GB: on 128 A3 Mega nodes the planner splits the layers with the embedding and the loss
    counted (128 over 16 stages), as the NeMo 2.4 launcher can."""
    first = LayoutRequest.of("llama3.1-405b", "a3-megagpu-8g", 128, global_batch_size=1536).plan()[0]
    assert first.layout.pipeline_parallel * first.layout.chunks in (16, 32, 64, 128)
    assert first.memory.peak <= 80e9


def test_the_planner_splits_the_layers_as_the_run_s_image_can() -> None:
    """A supervised run runs the resiliency image, whose NeMo 24.12 cannot count the embedding
    and the loss in the split: the planner's layout for it divides Llama 3.1 405B's 126 layers
    alone, where on the catalog's NeMo 2.4 image it counts them (128 over PP8 × VP16)."""
    machine = MACHINE_TYPES["a3-ultragpu-8g"]
    settings = model_spec("llama3.1-405b").recipe_on(machine.name).settings(global_batch_size=1536)
    own = layout.planned_settings("llama3.1-405b", machine, 64, settings)
    supervised = layout.planned_settings("llama3.1-405b", machine, 64, settings, image=versions.RESILIENCY.ref)
    stages = [s.pipeline_parallel * (s.virtual_pipeline or 1) for s in (own, supervised)]
    assert 126 % stages[0] and 128 % stages[0] == 0, own
    assert 126 % stages[1] == 0, supervised
