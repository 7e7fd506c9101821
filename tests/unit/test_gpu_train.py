"""make gpu-train (tools/gpu_train.py): the one-GPU run it plans, the figures it reports, its
refusals; and the stand-ins its worker and make runtime-check rely on (tools/runtime_stub.py).
The run itself needs a GPU; `make runtime-check` builds and validates its configuration."""

from __future__ import annotations

import importlib
import json
import re
import stat
import sys
from pathlib import Path

import pytest

from facts.machines import MACHINE_TYPES
from tools import gpu_train, gpu_worker, runtime_stub

H200 = MACHINE_TYPES["a3-ultragpu-8g"]


def test_one_gpu_run_fits_the_recipe_to_one_gpu(tmp_path: Path) -> None:
    run = gpu_train.one_gpu_run(H200, steps=30, layers=4, seq_length=4096, global_batch_size=8)
    settings = gpu_train.one_gpu_settings(run, H200, tmp_path)
    assert settings["huggingFace"]["repository"] == "meta-llama/Meta-Llama-3-8B"
    assert settings["worldSize"] == 1
    model = settings["model"]
    sizes = ("tensor_model_parallel_size", "pipeline_model_parallel_size", "context_parallel_size")
    assert [model[size] for size in sizes] == [1, 1, 1]
    assert model["virtual_pipeline_model_parallel_size"] is None
    assert model["sequence_parallel"] is False
    assert model["seq_length"] == settings["dataset"]["seq_length"] == 4096
    assert settings["train"] == {"train_iters": 30, "global_batch_size": 8, "micro_batch_size": 1}
    # BF16 (FP8 needs Transformer Engine), generated data, no checkpoint, no recomputation.
    assert settings["mixedPrecision"] == "bf16_mixed"
    assert settings["dataset"]["blend"] is None
    assert settings["tokenizer"] == {"tokenizer_type": "NullTokenizer", "vocab_size": 128256}
    assert settings["checkpoint"]["save"] is None
    assert (settings["recomputeLayers"], settings["recomputeModules"]) == (None, [])
    assert settings["overrides"] == {"model.num_layers": 4}
    assert settings["dlloggerFile"] == str(tmp_path / "dllogger.json")


def test_model_flops_of_the_fitted_model_worked_by_hand() -> None:
    """Llama 3 8B's layer per token, forward: Q and O 2·h² each, K and V 2·h·1024 each (8 groups
    of 128), the gated MLP 3 × 2·h·14336, attention 2 × 2·s·h; the logits 2·h·128256; three
    times that with the backward pass."""
    h, s = 4096, 4096
    layer = 2 * 2 * h * h + 2 * 2 * h * 1024 + 3 * 2 * h * 14336 + 2 * 2 * s * h
    per_token = 3 * (4 * layer + 2 * h * 128256)
    assert gpu_train.flops_per_sample(4, s) == pytest.approx(per_token * s, rel=1e-12)
    assert gpu_train.flops_per_sample(4, s) == pytest.approx(3.76497e13, rel=1e-5)


def test_published_figure_worked_by_hand() -> None:
    """NVIDIA's 25.11 DGX-H100 Llama 3 8B row: 14 451 tokens/s per GPU at sequence 8192, FP8.
    Per token: 32 layers of the above at s = 8192 and the logits, times three; against the
    H200's (an H100's) 1978 TFLOPS dense FP8 peak."""
    h, s = 4096, 8192
    layer = 2 * 2 * h * h + 2 * 2 * h * 1024 + 3 * 2 * h * 14336 + 2 * 2 * s * h
    tflops = 14451 * 3 * (32 * layer + 2 * h * 128256) / 1e12
    reference = gpu_train.published(H200)
    assert reference is not None
    # The catalog keeps the row as a step time rounded to 10 ms (9.07 s).
    assert reference["tflops_per_gpu"] == pytest.approx(tflops, rel=1e-3)
    assert reference["mfu"] == pytest.approx(tflops / 1978, rel=1e-3)
    assert reference["precision"] == "fp8"
    assert "LLAMA3_8B" in reference["source"]
    # As NVIDIA's table counts it, attention's scores over the causal half: its row says 744
    # TFLOP/s/GPU (Megatron-Bridge docs/performance-summary.md, 25.11).
    causal = 14451 * 3 * (32 * (layer - 2 * s * h) + 2 * h * 128256) / 1e12
    assert reference["tflops_per_gpu_causal"] == pytest.approx(causal, rel=1e-3)
    assert round(reference["tflops_per_gpu_causal"]) == 744
    assert reference["mfu_causal"] == pytest.approx(causal / 1978, rel=1e-3)


@pytest.mark.parametrize(
    ("device", "machine"),
    [
        ("NVIDIA H200", "a3-ultragpu-8g"),
        ("NVIDIA H100 80GB HBM3", "a3-highgpu-8g"),
        ("NVIDIA B200", "a4-highgpu-8g"),
        ("NVIDIA GB200", "a4x-highgpu-4g"),
    ],
)
def test_machine_of_the_device(device: str, machine: str) -> None:
    assert gpu_train.machine_of(device).name == machine


def test_a_gpu_no_catalog_machine_has_is_refused() -> None:
    with pytest.raises(gpu_train.Refused, match=r"'Tesla T4', which no catalog machine has \(they have: .*h200"):
        gpu_train.machine_of("Tesla T4")


def _interpreter(folder: Path, script: str) -> str:
    """A stand-in for the runtime interpreter: a shell script that answers the device probe."""
    path = folder / "python"
    path.write_text(f"#!/bin/sh\n{script}\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


@pytest.mark.parametrize(
    ("script", "message"),
    [
        ("echo", "make gpu-train needs an NVIDIA GPU: torch under --python .* sees none"),
        (
            "echo \"ModuleNotFoundError: No module named 'torch'\" >&2; exit 1",
            "--python .*: cannot import torch: ModuleNotFoundError: No module named 'torch'",
        ),
        ("echo 'Tesla T4'", "the GPU here is 'Tesla T4', which no catalog machine has"),
    ],
)
def test_no_usable_gpu_is_one_line_and_exit_code_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], script: str, message: str
) -> None:
    code = gpu_train.main(["--python", _interpreter(tmp_path, script), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2
    assert len(err.strip().splitlines()) == 1
    assert re.search(message, err), err
    assert not (tmp_path / "out").exists()


def test_bad_flags_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = str(tmp_path / "no-such-python")
    assert gpu_train.main(["--python", missing]) == 2
    assert f"--python {missing}: No such file or directory" in capsys.readouterr().err
    assert gpu_train.main(["--python", missing, "--layers", "33"]) == 2
    assert "--layers: llama3-8b has 32 layers, not 33" in capsys.readouterr().err
    for flag in (["--steps", "14"], ["--layers", "0"], ["--seq-length", "x"]):
        with pytest.raises(SystemExit) as exited:
            gpu_train.main(["--python", missing, *flag])
        assert exited.value.code == 2


def test_a_stand_in_is_gone_once_uninstalled() -> None:
    """gpu_worker imports the Bridge modules that need Transformer Engine at import against a
    stand-in, then removes it: a later import must fail as without the package, while what
    imported the stand-in keeps it."""
    name = "nemo_gke_absent_package"
    finder = runtime_stub.install((name,))
    try:
        kept = importlib.import_module(f"{name}.pytorch")
        assert kept.Linear is not None
    finally:
        runtime_stub.uninstall(finder)
    assert not any(module == name or module.startswith(f"{name}.") for module in sys.modules)
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(name)
    assert kept.Linear is not None


def test_modelopt_stand_in_reports_no_distillation() -> None:
    """Megatron Core's schedule without a pipeline asserts that ModelOpt's
    get_tensor_shapes_adjust_fn_for_distillation returned None (schedules.py
    forward_backward_no_pipelining, megatron-core 0.16.0): a generic stand-in would return a
    class and stop the first step, as it did on the first GPU run."""
    finder = runtime_stub.install(("modelopt",))
    try:
        plugin = importlib.import_module("modelopt.torch.distill.plugins.megatron")
        assert plugin.get_tensor_shapes_adjust_fn_for_distillation([object()], seq_length=8) is None
    finally:
        runtime_stub.uninstall(finder)


# A stand-in runtime interpreter for the whole of `make gpu-parity` but the GPU: it answers the
# device probe with an H200, and "trains" by writing the run's DLLogger log, a step of $1 s for the
# launcher's configuration and of $2 s for NVIDIA's (named by $NEMO_NVIDIA_REFERENCE), and the
# allocator's figures gpu_worker.measure_memory writes: a peak of `peak` bytes in the forward and
# backward passes of step 3, `peak` × 0.9 in the optimizer's steps, `held` bytes after each step.
_FAKE_TRAINING = r"""
if [ "$1" = "-c" ]; then echo 'NVIDIA H200'; exit 0; fi
exec {python} - "$@" <<'PY'
import json, os
settings = json.load(open(os.environ["NEMO_RUN_SETTINGS"]))
seconds = {nvidia} if os.environ.get("NEMO_NVIDIA_REFERENCE") else {ours}
reference = json.loads(os.environ.get("NEMO_NVIDIA_REFERENCE") or "{{}}")
assert not reference or reference["function"] == "llama3_8b_pretrain_config", reference
with open(settings["dlloggerFile"], "w") as log:
    for step in range(settings["train"]["train_iters"]):
        data = {{"train_step_timing in s": seconds, "global_step": float(step)}}
        log.write("DLLL " + json.dumps({{"type": "LOG", "step": step, "data": data}}) + "\n")
steps = [
    {{"step": step + 1, "forward_backward_peak": {peak} if step == 2 else 1e9, "optimizer_peak": {peak} * 0.9,
     "allocated_at_end": {held}}}
    for step in range(settings["train"]["train_iters"])
]
with open(os.environ["{memory_file}"], "w") as memory:
    json.dump(steps, memory)
PY
"""


def _fake_training(ours: float = 1.0, nvidia: float = 1.0, peak: float | None = None, held: float | None = None) -> str:
    """The stand-in's script; `peak` and `held` default to the planner's prediction for the
    default slice."""
    run = gpu_train.one_gpu_run(H200, steps=30, layers=4, seq_length=4096, global_batch_size=8)
    predicted = gpu_train.predicted_memory(run, 4)
    return _FAKE_TRAINING.format(
        python=sys.executable,
        ours=ours,
        nvidia=nvidia,
        peak=predicted.forward_backward if peak is None else peak,
        held=predicted.held if held is None else held,
        memory_file=gpu_train.MEMORY_FILE,
    )


@pytest.mark.parametrize(("nvidia", "code"), [(0.98, 0), (0.95, 1)], ids=["within-3-percent", "slower"])
def test_against_nvidia_reports_the_ratio_and_fails_beyond_three_percent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], nvidia: float, code: int
) -> None:
    """Everything of the side-by-side but the GPU: both configurations of the same slice are
    trained (here: their logs written), read back, and their step times compared."""
    script = _fake_training(ours=1.0, nvidia=nvidia)
    out = tmp_path / "out"
    argv = ["--python", _interpreter(tmp_path, script), "--out", str(out), "--against-nvidia"]
    assert gpu_train.main(argv) == code
    report = json.loads((out / "report.json").read_text())
    assert report["ratio"] == pytest.approx(1.0 / nvidia)
    assert report["nvidia"]["step_time_s"] == pytest.approx(nvidia)
    printed = capsys.readouterr().out
    assert f"ratio {1.0 / nvidia:.3f}, {'within' if code == 0 else 'OUTSIDE'} 3%" in printed
    assert json.loads((out / "settings-nvidia.json").read_text())["dlloggerFile"].endswith("dllogger-nvidia.json")


def test_the_worker_reads_nvidias_reference_where_gpu_train_writes_it() -> None:
    assert gpu_worker.NVIDIA_REFERENCE == gpu_train.NVIDIA_REFERENCE


def test_the_worker_writes_memory_where_gpu_train_reads_it_with_the_optimizer_it_predicts() -> None:
    assert gpu_worker.MEMORY_FILE == gpu_train.MEMORY_FILE
    assert gpu_worker.TE_FREE["optimizer.use_precision_aware_optimizer"] is gpu_train.PRECISION_AWARE


def test_memory_of_the_slice_worked_by_hand() -> None:
    """The default slice (4 of Llama 3 8B's layers, sequence 4096, micro-batch 1, one GPU, BF16,
    Megatron Core's local layers): 1 923 121 152 parameters (embedding and output 2 × 128256 ×
    4096, four layers of 4096 × (4096 + 2 × 1024 + 4096) + 3 × 4096 × 14336 + 2 × 4096) at 4 + 16
    bytes, 4 of them the FP32 gradient; a layer keeps per token its two norms' inputs and outputs
    (4 × 4096 × 2 B), queries, keys and values for 32 heads (3 × 4096 × 2 B), the projection's
    input (4096 × 2 B), 32 heads of 4096 softmax scores (32 × 4096 × 2 B), the gated MLP's two
    halves, activation, linear half and product (5 × 14336 × 2 B), and a 4096 × 4096 causal mask
    of one byte; beside them one buffer of 32 × 4096 × 4096 scores for the run, twice that in a
    layer's backward pass, which comes after the logits of 128256 × (2 + 4) bytes a token."""
    run = gpu_train.one_gpu_run(H200, steps=30, layers=4, seq_length=4096, global_batch_size=8)
    predicted = gpu_train.predicted_memory(run, 4)
    parameters = 2 * 128256 * 4096 + 4 * (4096 * (4096 + 2 * 1024 + 4096) + 3 * 4096 * 14336 + 2 * 4096)
    assert parameters == 1_923_121_152
    assert predicted.states == pytest.approx(parameters * 20)
    assert predicted.fp32_gradients == pytest.approx(parameters * 4)
    per_token = (4 + 3 + 1 + 32) * 4096 * 2 + 5 * 14336 * 2
    assert predicted.activations == pytest.approx(4 * (4096 * per_token + 4096 * 4096))
    scores = 32 * 4096 * 4096 * 2
    assert (predicted.buffers, predicted.backward_transient) == (pytest.approx(scores), pytest.approx(2 * scores))
    logits = 4096 * 128256 * 6
    assert predicted.logits == pytest.approx(logits)
    assert predicted.forward_backward == pytest.approx(parameters * 16 + scores + predicted.activations + logits)
    assert predicted.held == pytest.approx(parameters * 20 + scores)


@pytest.mark.parametrize(
    ("peak_over", "held_over", "code"),
    [(1.05, 1.0, 0), (1.0, 0.95, 0), (1.2, 1.0, 1), (0.85, 1.0, 1), (1.0, 1.15, 1)],
)
def test_memory_is_held_to_the_allocator(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], peak_over: float, held_over: float, code: int
) -> None:
    """The peak of the forward and backward passes (here step 3's) and what stays allocated after
    a step, each against the planner's prediction: within 10 % passes, beyond fails the check."""
    run = gpu_train.one_gpu_run(H200, steps=30, layers=4, seq_length=4096, global_batch_size=8)
    predicted = gpu_train.predicted_memory(run, 4)
    out = tmp_path / "out"
    peak, held = predicted.forward_backward * peak_over, predicted.held * held_over
    script = _fake_training(peak=peak, held=held)
    assert gpu_train.main(["--python", _interpreter(tmp_path, script), "--out", str(out)]) == code
    memory = json.loads((out / "report.json").read_text())["run"]["memory"]
    assert memory["peak_gb"] == pytest.approx(peak / 1e9)
    assert memory["peak_step"] == 3
    assert memory["forward_backward_error"] == pytest.approx(1 / peak_over - 1)
    assert memory["held_error"] == pytest.approx(1 / held_over - 1)
    verdict = "within" if code == 0 else "OUTSIDE"
    printed = capsys.readouterr().out
    assert re.search(
        rf"forward and backward {predicted.forward_backward / 1e9:.1f} GB against .*: {verdict} 10%", printed
    )


def test_a_run_without_memory_figures_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = _fake_training().replace(f'os.environ["{gpu_train.MEMORY_FILE}"]', '"/dev/null"')
    assert gpu_train.main(["--python", _interpreter(tmp_path, script), "--out", str(tmp_path / "out")]) == 1
    assert "the worker wrote no memory figures" in capsys.readouterr().err
