"""One rank of `make gpu-train` (tools/gpu_train.py starts it under torchrun): the launcher,
payload/megatron_bridge_pretrain.py, trains for real on Megatron Core without Transformer Engine.

    python -m torch.distributed.run --standalone --nproc_per_node 1 tools/gpu_worker.py LAUNCHER

Run by the runtime environment's interpreter (torch with CUDA, megatron-bridge, megatron-core),
with $NEMO_RUN_SETTINGS naming the settings tools/gpu_train.py wrote. Transformer Engine is
absent here (its wheel compiles against CUDA and is far larger than a check can carry), so:
- Megatron Core is imported first with no Transformer Engine, so that each of its modules takes
  its own paths (HAVE_TE false); then the Megatron-Bridge modules that import `transformer_engine`
  unconditionally (the PEFT adapters, reached through the package's imports, never used by
  pretraining) are imported against tools/runtime_stub.py's stand-in, which is then removed:
  every later `import transformer_engine` fails as it would without the package. The package
  modules imported meanwhile (the model providers of other families among them) may take the
  stand-in for the real package; the Llama provider, the training loop and Megatron Core do not;
- the launcher's own `config` builds the run's ConfigContainer, and `without_transformer_engine`
  replaces what only Transformer Engine provides (TE_FREE) by Megatron Core's own modules;
- the launcher's `main` trains with `pretrain` and its DLLogger step log, unchanged; with
  $NEMO_GPU_MEMORY set, each step's memory is read from torch's allocator too (measure_memory).
With $NEMO_NVIDIA_REFERENCE set (make gpu-parity), NVIDIA's configuration of the same slice
(tools/nvidia_path.py) is trained instead, by the same loop, replacements and step log.
"""

import importlib
import importlib.util
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import runtime_stub

# What Transformer Engine provides that the launcher or the recipe turns on, and what stands in
# for it here (megatron/bridge/models/gpt_provider.py, llama_provider.py at 0.3.0): Megatron
# Core's local layer spec (its own attention, norm and linear layers), eager kernels instead of
# fused ones (Megatron Core fuses through torch.compile, which needs Triton, not always in the
# runtime environment), and torch's AdamW (Megatron Core's fallback,
# megatron/core/optimizer/__init__.py, when neither Transformer Engine's nor Apex's FusedAdam
# imports). BF16 throughout: FP8 needs Transformer Engine.
TE_FREE = {
    "model.cross_entropy_fusion_impl": "native",
    "model.cross_entropy_loss_fusion": False,
    "model.apply_rope_fusion": False,
    "model.gradient_accumulation_fusion": False,
    "model.masked_softmax_fusion": False,
    "model.bias_activation_fusion": False,
    "model.bias_dropout_fusion": False,
    "model.persist_layer_norm": False,
    "model.use_te_rng_tracker": False,
    "rng.te_rng_tracker": False,
    "model.cuda_graph_impl": "none",
    "optimizer.use_precision_aware_optimizer": False,
}
# Imported at module level on the way to `pretrain` and never called by this run: in-process
# restarts (megatron/bridge/training/pretrain.py) and ModelOpt's state in checkpoints
# (checkpointing.py); stood in for where they are not installed.
UNUSED_BY_THIS_RUN = ("nvidia_resiliency_ext", "modelopt")
# Where tools/gpu_train.py names NVIDIA's configuration to train instead of the launcher's
# (tools/parity.py reference, as JSON).
NVIDIA_REFERENCE = "NEMO_NVIDIA_REFERENCE"
# Where tools/gpu_train.py wants the allocator's figures of each step written (JSON).
MEMORY_FILE = "NEMO_GPU_MEMORY"
# Bridge modules that import transformer_engine at module level (peft/lora_layers.py, lora.py).
TE_AT_IMPORT = ("megatron.bridge.peft.lora_layers", "megatron.bridge.peft.lora")


def import_core_without_transformer_engine():
    """Every Megatron Core module importable here, imported while Transformer Engine is absent;
    returns the names of those that cannot be (they need a package this run does not have)."""
    import megatron.core  # noqa: PLC0415

    failed = set()
    # By file: some of its folders are namespace packages, which pkgutil does not walk.
    root = Path(megatron.core.__file__).parent
    for path in sorted(root.rglob("*.py")):
        name = ".".join(("megatron", "core", *path.relative_to(root).with_suffix("").parts)).removesuffix(".__init__")
        try:
            importlib.import_module(name)
        except Exception:
            failed.add(name)
    return failed


def import_bridge_adapters_against_stand_in(need_transformer_engine):
    """The Bridge modules in TE_AT_IMPORT, against the stand-in; then the stand-in is gone. Only
    Megatron Core modules that cannot import without Transformer Engine may come in meanwhile
    (each of the others took its own path in import_core_without_transformer_engine)."""
    before = set(sys.modules)
    stand_in = runtime_stub.install(("transformer_engine",))
    for name in TE_AT_IMPORT:
        importlib.import_module(name)
    runtime_stub.uninstall(stand_in)
    added = {name for name in set(sys.modules) - before if name.startswith("megatron.core")}
    if stray := added - need_transformer_engine:
        raise RuntimeError(f"Megatron Core modules imported against the stand-in: {sorted(stray)}")


def without_transformer_engine(cfg, set_field):
    """The launcher's ConfigContainer with TE_FREE applied by the launcher's own setter of a
    dotted field (`_set`, which refuses a field the library does not have), and Megatron Core's
    local layer spec."""
    from megatron.bridge.models.gpt_provider import local_layer_spec  # noqa: PLC0415

    for dotted, value in TE_FREE.items():
        set_field(cfg, dotted, value)
    cfg.model.transformer_layer_spec = local_layer_spec
    return cfg


def use_prebuilt_dataset_helpers():
    """Megatron-Bridge builds Megatron Core's dataset index helpers with `make` in the package's
    folder before training (training/initialize.py, from the source tree the NeMo container
    installs); the megatron-core wheel ships them built (helpers_cpp) and no Makefile, so they
    are loaded instead."""
    from megatron.bridge.training import initialize  # noqa: PLC0415

    initialize.compile_helpers = lambda: importlib.import_module("megatron.core.datasets.helpers_cpp")


def nvidia_config(settings, reference, set_field):
    """NVIDIA's ConfigContainer for the run's model, GPU, precision and layout (tools/nvidia_path.py,
    which make runtime-check compares with the launcher's field by field), cut to the same slice
    as the launcher's: the run's sequence, steps and overrides (its layers)."""
    import nvidia_path  # noqa: PLC0415 - beside this file, imported once the stand-ins are in place

    cfg = nvidia_path.config(settings, reference)
    cfg.model.seq_length = cfg.dataset.seq_length = settings["model"]["seq_length"]
    cfg.train.train_iters = settings["train"]["train_iters"]
    for dotted, value in settings["overrides"].items():
        set_field(cfg, dotted, value)
    return cfg


def measure_memory(launcher, path):
    """The launcher's step log, measuring each step through torch's caching allocator too: the
    peak of its forward and backward passes (up to the optimizer's step, a pre-hook on every torch
    optimizer), the peak of the optimizer's step and what stays allocated at the step's end;
    written to `path` after every step."""
    import torch  # noqa: PLC0415 - the runtime environment's, with CUDA
    from torch.optim.optimizer import register_optimizer_step_pre_hook  # noqa: PLC0415

    steps, current = [], {}

    def before_optimizer_step(optimizer, args, kwargs):
        current["forward_backward_peak"] = torch.cuda.max_memory_allocated()
        torch.cuda.reset_peak_memory_stats()

    register_optimizer_step_pre_hook(before_optimizer_step)

    class MeasuredStepLog(launcher.StepLog):
        def on_train_step_start(self, context):
            current.clear()
            torch.cuda.reset_peak_memory_stats()
            super().on_train_step_start(context)

        def on_train_step_end(self, context):
            super().on_train_step_end(context)
            current["optimizer_peak"] = torch.cuda.max_memory_allocated()
            current["allocated_at_end"] = torch.cuda.memory_allocated()
            steps.append({"step": context.state.train_state.step, **current})
            Path(path).write_text(json.dumps(steps))

    launcher.StepLog = MeasuredStepLog


def main(launcher_path):
    # Not stood in for where the real package is installed (the GPU image has triton and
    # tensorboard); megatron.energon only feeds vision-language data modules.
    runtime_stub.install(missing_packages())
    import_bridge_adapters_against_stand_in(import_core_without_transformer_engine())
    use_prebuilt_dataset_helpers()
    spec = importlib.util.spec_from_file_location("megatron_bridge_pretrain", launcher_path)
    launcher = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(launcher)
    build = launcher.config
    reference = os.environ.get(NVIDIA_REFERENCE)
    if reference:
        # NVIDIA's configuration of the same slice, trained by the same loop and step log.
        def build(settings):
            return nvidia_config(settings, json.loads(reference), launcher._set)

    launcher.config = lambda settings: without_transformer_engine(build(settings), launcher._set)
    if memory_file := os.environ.get(MEMORY_FILE):
        measure_memory(launcher, memory_file)
    return launcher.main([])


def missing_packages():
    """What runtime_stub stands in for and UNUSED_BY_THIS_RUN, but Transformer Engine (absent) and
    what is installed."""
    names = (*runtime_stub.STUBBED, *UNUSED_BY_THIS_RUN)
    return tuple(name for name in names if name != "transformer_engine" and not _installed(name))


def _installed(name):
    # torch's tensorboard module is always there; the package it wraps may not be.
    package = "tensorboard" if name == "torch.utils.tensorboard" else name
    try:
        importlib.import_module(package)
    except ImportError:
        return False
    return True


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
