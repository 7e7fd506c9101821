"""Stand-ins for the GPU-only packages Megatron-Bridge 0.3.0 and Megatron Core 0.16.0 import at
module level, so that `make runtime-check` imports the real libraries on a machine without CUDA.

Only the modules in STUBBED (and their submodules) are faked; every attribute of a stand-in is a
class that can be subclassed, called or subscripted, so module-level code such as
`class X(te.pytorch.Linear)` or `@triton.jit` runs. Nothing of them executes: building and
validating a configuration calls no GPU code. Why each is here:
- transformer_engine: imported unconditionally (peft/lora_layers.py, mixed_precision.py);
  transformer-engine-torch has no binary wheel (its sdist compiles against CUDA);
- triton: Megatron Core applies `@triton.jit` at import;
- torch.utils.tensorboard: reached through megatron.bridge.recipes' package import, and would
  pull in tensorboard and protobuf;
- megatron.energon: the vision-language data modules the same package import reaches.
And the one GPU question a configuration's validation asks (Megatron-Bridge's
validate_flex_dispatcher_backend reads the device's compute capability and name): the check
process has no GPU, so it answers with the run's GPU, "<major>.<minor> <name>" in $NEMO_CHECK_GPU
(tools/runtime_check.py sets it per case), a Hopper H100 where it is unset.
tools/runtime_check.py's check process calls install() and answer_device_questions() before it
loads the launcher; tools/gpu_worker.py, on a real GPU, installs only what is not installed.
"""

import importlib
import importlib.abc
import importlib.machinery
import os
import sys
import types
from collections.abc import Sequence
from typing import Any

STUBBED = ("transformer_engine", "triton", "torch.utils.tensorboard", "megatron.energon")
# Transformer Engine's version in NeMo 26.02, which version gates compare against.
FAKE_VERSION = "2.12.0"


class _Anything(type):
    def __getattr__(cls, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _stand_in(name)

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        return cls

    def __getitem__(cls, item: Any) -> Any:
        return cls


def _stand_in(name: str) -> type:
    return _Anything(name, (object,), {})


class _Module(types.ModuleType):
    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        value = _stand_in(name)
        setattr(self, name, value)
        return value


class FusedAdam:
    """Transformer Engine 2.12's FusedAdam, by its signature only
    (transformer_engine/pytorch/optimizers/fused_adam.py in the transformer-engine 2.12.0 wheel):
    Megatron Core reads the keyword names to decide whether the precision-aware optimizer is
    supported (megatron/core/optimizer/optimizer_config.py)."""

    def __init__(  # noqa: PLR0917 - the library's signature
        self,
        params: Any,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        amsgrad: bool = False,
        *,
        bias_correction: bool = True,
        adam_w_mode: bool = True,
        capturable: bool = False,
        master_weights: bool = False,
        master_weight_dtype: Any = None,
        exp_avg_dtype: Any = None,
        exp_avg_sq_dtype: Any = None,
        use_decoupled_grad: bool = False,
        store_param_remainders: bool = False,
        set_grad_none: bool | None = None,
    ) -> None:
        raise RuntimeError("a stand-in: the configuration check builds no optimizer")


def no_distillation(model: Any, **kwargs: Any) -> None:
    """ModelOpt's get_tensor_shapes_adjust_fn_for_distillation for a model that is not being
    distilled (modelopt/torch/distill/plugins/megatron.py in the nvidia-modelopt 0.40.0 wheel):
    None, which Megatron Core's schedules require without a pipeline."""


# Stand-ins with a real shape, where the libraries inspect one or call one.
_KNOWN: dict[str, dict[str, Any]] = {
    "transformer_engine.pytorch.optimizers": {"FusedAdam": FusedAdam},
    "modelopt.torch.distill.plugins.megatron": {"get_tensor_shapes_adjust_fn_for_distillation": no_distillation},
}


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self, names: Sequence[str]) -> None:
        self.names = tuple(names)

    def stands_in_for(self, fullname: str) -> bool:
        return any(fullname == prefix or fullname.startswith(prefix + ".") for prefix in self.names)

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if self.stands_in_for(fullname):
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = _Module(spec.name)
        module.__path__ = []
        setattr(module, "__version__", FAKE_VERSION)  # noqa: B010 - a module attribute mypy does not know
        for name, value in _KNOWN.get(spec.name, {}).items():
            setattr(module, name, value)
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        pass


def install(names: Sequence[str] = STUBBED) -> _Finder:
    """Stand in for the packages `names` (and their submodules) from now on."""
    finder = _Finder(names)
    sys.meta_path.insert(0, finder)
    return finder


def uninstall(finder: _Finder) -> None:
    """No more stand-ins of `finder`: those already imported are forgotten, so a later import of
    one fails as it would without the package (a module that imported one keeps it)."""
    sys.meta_path.remove(finder)
    for name in [name for name in sys.modules if finder.stands_in_for(name)]:
        del sys.modules[name]


def _device_properties(device: Any = None) -> types.SimpleNamespace:
    capability, _, name = os.environ.get("NEMO_CHECK_GPU", "9.0 NVIDIA H100").partition(" ")
    major, minor = (int(part) for part in capability.split("."))
    return types.SimpleNamespace(major=major, minor=minor, name=name)


def answer_device_questions() -> None:
    """The configuration check's GPU, for a process that has none (after the stand-ins, as the
    launcher imports torch; by name, as this project's environment has none)."""
    importlib.import_module("torch").cuda.get_device_properties = _device_properties
