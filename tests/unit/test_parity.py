"""The launcher's environment against NVIDIA's (tools/parity.py): the environment half of the
parity check runs here without the runtime environment; the configuration half runs in
`make runtime-check` (tools/runtime_check.py), which shares DIFFERENCES."""

from __future__ import annotations

import pytest

from facts.machines import MACHINE_TYPES
from planners import workload
from tools import parity
from tools.runtime_check import bridge_recipes, smallest_run

CATALOG = [(model, machine.name) for model, machine in bridge_recipes()]


def _env_differences(model: str, machine_name: str) -> dict[str, tuple[str | None, str | None]]:
    machine = MACHINE_TYPES[machine_name]
    run = smallest_run(model, machine)
    paths = workload.run_paths(run, "/nfs/experiments", "/checkpoints", "/data")
    return parity.env_differences(parity.run_env(run, machine, paths), parity.nvidia_env(run, machine))


@pytest.mark.parametrize(("model", "machine"), CATALOG)
def test_every_catalog_run_has_nvidias_environment_but_what_is_listed(model: str, machine: str) -> None:
    assert parity.unlisted(_env_differences(model, machine), f"{model} on {machine}") == []


def test_every_listed_environment_difference_is_needed() -> None:
    found = {f"{model} on {machine}": _env_differences(model, machine) for model, machine in CATALOG}
    stale = [d.fields for d in parity.unused(found) if d.fields.startswith("env:")]
    assert stale == []


def test_the_catalog_has_all_five_megatron_bridge_models_on_every_gpudirect_machine() -> None:
    assert len(CATALOG) == 25
    assert {parity.reference(smallest_run(m, MACHINE_TYPES[n]), MACHINE_TYPES[n])["gpu"] for m, n in CATALOG} == {
        "h100",
        "b200",
        "gb200",
    }


@pytest.mark.parametrize(
    ("model", "machine", "expected"),
    [
        # Hopper, TP4 without the expert overlap: 1 connection, so the userbuffers overlap's
        # communication kernel is queued before its GEMM; 70B's pipeline chunk.
        ("llama3-70b", "a3-ultragpu-8g", {"CUDA_DEVICE_MAX_CONNECTIONS": "1", "NCCL_P2P_NET_CHUNKSIZE": "2097152"}),
        # Blackwell: 32 connections.
        ("llama3-70b", "a4-highgpu-8g", {"CUDA_DEVICE_MAX_CONNECTIONS": "32"}),
        # Llama 3 8B in FP8 current scaling on H100: cuDNN layer norms kept, NCCL's CTA policy.
        (
            "llama3-8b",
            "a3-ultragpu-8g",
            {"NVTE_NORM_FWD_USE_CUDNN": "1", "NVTE_NORM_BWD_USE_CUDNN": "1", "NCCL_CTA_POLICY": "1"},
        ),
        # HybridEP on GB200: margins of 20, the NVL72 domain with multi-node NVLink.
        (
            "qwen3-30b-a3b",
            "a4x-highgpu-4g",
            {"NVTE_FWD_LAYERNORM_SM_MARGIN": "20", "NVLINK_DOMAIN_SIZE": "72", "USE_MNNVL": "1"},
        ),
        # DeepSeek-V3 on H100 only: expandable segments.
        ("deepseek-v3", "a3-ultragpu-8g", {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}),
    ],
)
def test_nvidia_env_is_perf_env_plugins(model: str, machine: str, expected: dict[str, str]) -> None:
    """scripts/performance/perf_plugins.py@21b02e0 PerfEnvPlugin.setup and utils/executors.py
    PERF_ENV_VARS, worked by hand for five cases."""
    env = parity.nvidia_env(smallest_run(model, MACHINE_TYPES[machine]), MACHINE_TYPES[machine])
    assert {key: env.get(key) for key in expected} == expected
    assert env["TORCH_NCCL_HIGH_PRIORITY"] == "1" and env["NCCL_NVLS_ENABLE"] == "0"


def test_nvidia_env_of_gb200_has_the_executors_gdr_settings_and_qwen3_on_h100_deepep() -> None:
    """utils/executors.py: NCCL_NET_GDR_LEVEL=PHB, NCCL_NET_GDR_C2C=1 on GB200; NVIDIA's H100
    Qwen3 rows dispatch with DeepEP (qwen3_workload_base_configs.py), so PerfEnvPlugin gives 32
    connections and margins of 20 there."""
    a4x = MACHINE_TYPES["a4x-highgpu-4g"]
    env = parity.nvidia_env(smallest_run("llama3-8b", a4x), a4x)
    assert (env["NCCL_NET_GDR_LEVEL"], env["NCCL_NET_GDR_C2C"]) == ("PHB", "1")
    a3u = MACHINE_TYPES["a3-ultragpu-8g"]
    env = parity.nvidia_env(smallest_run("qwen3-30b-a3b", a3u), a3u)
    assert (env["CUDA_DEVICE_MAX_CONNECTIONS"], env["NVTE_FWD_LAYERNORM_SM_MARGIN"]) == ("32", "20")


def test_nvidia_env_drops_the_cudnn_norms_and_the_chunk_where_the_plugin_does() -> None:
    machine = MACHINE_TYPES["a4-highgpu-8g"]
    env = parity.nvidia_env(smallest_run("llama3-8b", machine), machine)
    assert "NVTE_NORM_FWD_USE_CUDNN" not in env and "NCCL_P2P_NET_CHUNKSIZE" not in env
    assert "PYTORCH_CUDA_ALLOC_CONF" not in parity.nvidia_env(smallest_run("deepseek-v3", machine), machine)


def test_a_platform_only_entry_never_covers_a_value_nvidia_sets() -> None:
    """NCCL variables of the GPUDirect stack are the platform's own; NVIDIA's NCCL_NVLS_ENABLE=0
    left out would be a real difference, not covered by that entry."""
    case = "llama3-70b on a4-highgpu-8g"
    assert parity.unlisted({"env:NCCL_NET": ("gIB", None)}, case) == []
    assert parity.unlisted({"env:NCCL_NVLS_ENABLE": (None, "0")}, case) == ["env:NCCL_NVLS_ENABLE"]
    assert parity.unlisted({"env:TORCH_NCCL_HIGH_PRIORITY": (None, "1")}, case) == ["env:TORCH_NCCL_HIGH_PRIORITY"]


def test_an_entry_for_some_cases_covers_no_other() -> None:
    """A3 Mega's SM margins of 8 are its flavour's; the same difference on A3 Ultra is not listed,
    nor Qwen3's DeepEP left out on Blackwell, where NVIDIA's configuration has none."""
    margins = {"env:NVTE_FWD_LAYERNORM_SM_MARGIN": ("8", "16")}
    assert parity.unlisted(margins, "llama3-8b on a3-megagpu-8g (1 nodes)") == []
    assert parity.unlisted(margins, "llama3-8b on a3-ultragpu-8g (1 nodes)") == ["env:NVTE_FWD_LAYERNORM_SM_MARGIN"]
    dispatcher = {"model.moe_token_dispatcher_type": ("alltoall", "flex")}
    assert parity.unlisted(dispatcher, "qwen3-30b-a3b on a3-ultragpu-8g (2 nodes)") == []
    assert parity.unlisted(dispatcher, "qwen3-30b-a3b on a4-highgpu-8g (1 nodes)") == [
        "model.moe_token_dispatcher_type"
    ]


def test_a_run_without_the_executor_environment_is_caught() -> None:
    """What the first comparison found: a run without the executor's high-priority NCCL streams."""
    machine = MACHINE_TYPES["a4-highgpu-8g"]
    run = smallest_run("llama3-70b", machine)
    paths = workload.run_paths(run, "/e", "/c", "/d")
    ours = {k: v for k, v in parity.run_env(run, machine, paths).items() if k != "TORCH_NCCL_HIGH_PRIORITY"}
    differences = parity.env_differences(ours, parity.nvidia_env(run, machine))
    assert parity.unlisted(differences, "llama3-70b on a4-highgpu-8g") == ["env:TORCH_NCCL_HIGH_PRIORITY"]


def test_a_provider_without_a_recipe_function_names_the_table_to_extend(monkeypatch: pytest.MonkeyPatch) -> None:
    machine = MACHINE_TYPES["a4-highgpu-8g"]
    monkeypatch.setattr(parity, "RECIPE_FUNCTIONS", {})
    with pytest.raises(KeyError, match="RECIPE_FUNCTIONS"):
        parity.reference(smallest_run("llama3-8b", machine), machine)


def test_every_difference_has_a_reason_and_matches_by_glob() -> None:
    assert all(d.reason and d.fields for d in parity.DIFFERENCES)
    assert parity.unlisted({"scheduler.lr_warmup_iters": (3, 10)}, "llama3-8b on a4-highgpu-8g") == []
    assert parity.unlisted({"model.tp_comm_overlap": (False, True)}, "llama3-8b on a4-highgpu-8g") == [
        "model.tp_comm_overlap"
    ]
