"""The machine catalog and version pins: complete, sourced, and consistent with the issues."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from facts import versions
from facts.kubernetes import JOBSET_API, KUEUE_API, NETWORKING_API
from facts.machines import (
    MACHINE_TYPES,
    SOURCED_MACHINE_FIELDS,
    GpuDirect,
    MachineType,
    allocatable_memory_mib,
    allocatable_millicores,
    machine_type,
    training_pod_requests,
)
from facts.models import MODELS, Framework, model_spec
from facts.versions import HelmChart, Image
from planners.networks import network_mtu, plan_gpu_networks
from stacks import installed
from tools import crds

SOURCE = re.compile(r"(https://\S+|[\w.-]+/[\w.-]+:\S+)")


@pytest.mark.parametrize("name", list(MACHINE_TYPES))
def test_every_machine_fact_names_its_public_source(name: str) -> None:
    machine = MACHINE_TYPES[name]
    for field in SOURCED_MACHINE_FIELDS:
        assert SOURCE.search(machine.sources.get(field, "")), f"{name}.{field} has no source"
    # A field left at its default needs no source; one a machine sets does.
    for field in dataclasses.fields(MachineType):
        defaulted = field.default is not dataclasses.MISSING and field.name != "reported_allocatable"
        if field.name not in SOURCED_MACHINE_FIELDS and defaulted and getattr(machine, field.name) != field.default:
            assert SOURCE.search(machine.sources.get(field.name, "")), f"{name}.{field.name} has no source"


def test_every_accelerator_and_model_names_its_sources() -> None:
    for machine in MACHINE_TYPES.values():
        assert SOURCE.search(machine.accelerator.sources["peak_dense_tflops"])
    for model in MODELS.values():
        assert SOURCE.search(model.sources["architecture"]) and SOURCE.search(model.sources["recipe"])


@pytest.mark.parametrize("name", list(MACHINE_TYPES))
def test_each_machine_gets_one_gpu_network_per_nic_of_its_record(name: str) -> None:
    """The GPU network plan follows the record: one network per GPU NIC and per extra gVNIC, each
    with its own subnet of the GPU block, the Kubernetes names the recipes' pods refer to, and
    a machine with no GPU NIC gets none."""
    machine = machine_type(name)
    plan = plan_gpu_networks("c", machine, "192.168.0.0/16")
    assert len(plan) == machine.additional_networks
    assert len({n.cidr for n in plan}) == len(plan) and len({n.interface for n in plan}) == len(plan)
    rdma = [n for n in plan if n.kubernetes_name.startswith("rdma-")]
    assert len(rdma) == (machine.gpu_nics if machine.gpudirect is GpuDirect.RDMA else 0)
    assert (network_mtu([machine]) is None) is (machine.mtu is None)


def test_an_unknown_machine_type_lists_the_known_ones() -> None:
    with pytest.raises(ValueError, match="a3-megagpu-8g"):
        machine_type("a2-highgpu-8g")


def test_each_gpudirect_flavour_pairs_a_plugin_with_its_sidecar() -> None:
    tcpx, tcpxo, rdma = (machine_type(m).gpudirect_stack for m in ("a3-highgpu-8g", "a3-megagpu-8g", "a3-ultragpu-8g"))
    assert tcpx and tcpxo and rdma
    assert (tcpx.node_plugin.tag, tcpx.rxdm_sidecar and tcpx.rxdm_sidecar.tag) == ("v3.1.9", "v2.0.12")
    assert rdma.rxdm_sidecar is None and rdma.node_plugin.repository.endswith("nccl-plugin-gib")
    assert tcpx.needs_nri_device_injector and not tcpxo.needs_nri_device_injector and not rdma.needs_nri_device_injector


def test_a3_mega_runs_one_release_of_plugin_and_daemon_and_checks_the_fabric_with_it() -> None:
    """CEA couples the RxDM to its plugin release ("The tcpxo-daemon version is coupled with the
    NCCL plugin installer version", gpudirect-tcpxo/README.md@992db81). The pods run the newest
    pair of an A3 Mega training recipe (gpu-recipes training/a3mega/llama3_70b/nemo-gke-gcs/nemo2507:
    v1.0.7 and v1.0.13_1, CEA's Nov 27, 2024 release, tested together by CEA's nccl-test.yaml@4aeee0d),
    which installs the NCCL the NeMo 24.07 recipes ran (2.21.5); the fabric check runs that release's
    tests, so it measures the plugin and NCCL training loads (before: v1.0.15 tools over v1.0.3)."""
    tcpxo = machine_type("a3-megagpu-8g").gpudirect_stack
    assert tcpxo is not None and tcpxo.pod_plugin is not None and tcpxo.rxdm_sidecar is not None
    assert (tcpxo.pod_plugin.tag, tcpxo.rxdm_sidecar.tag) == ("v1.0.7", "v1.0.13_1")
    assert tcpxo.nccl_test_image == tcpxo.pod_plugin
    assert [image.ref for image in tcpxo.validated_images] == ["nvcr.io/nvidia/nemo:24.07"]
    assert MODELS["gpt3-175b"].recipe.image in tcpxo.validated_images
    # The RxDM writes a health file from v1.0.11 (Sept 19 2024 release): v1.0.13_1 does.
    assert tcpxo.rxdm_health_check


def all_images() -> list[Image]:
    return [v for v in vars(versions).values() if isinstance(v, Image)]


@pytest.mark.parametrize("image", all_images(), ids=lambda i: i.repository)
def test_every_image_is_pinned_and_sourced(image: Image) -> None:
    """A digest, a version tag, or a tag that carries its build date (the resiliency image: the
    recipes publish no digest and no version for it)."""
    versioned = re.match(r"^v?\d+(\.\d+)+", image.tag) or re.search(r"\d+(\.\d+)+.*-\d{4}-\d{2}-\d{2}$", image.tag)
    assert image.digest or versioned, image.ref
    assert image.tag not in ("latest", "master", "main")
    assert not image.digest or re.fullmatch(r"sha256:[0-9a-f]{64}", image.digest)
    assert SOURCE.search(image.source), image.ref


def test_the_charts_are_pinned() -> None:
    assert (versions.KUEUE.version, versions.JOBSET.version) == ("0.19.2", "0.12.0")
    assert versions.KUEUE.ref == "oci://registry.k8s.io/kueue/charts/kueue"
    assert versions.JOBSET.ref == "oci://registry.k8s.io/jobset/charts/jobset"


@pytest.mark.parametrize(("chart", "group"), [(versions.KUEUE, "kueue.x-k8s.io"), (versions.JOBSET, "jobset.x-k8s.io")])
def test_the_cached_crds_come_from_the_release_of_the_pinned_chart(chart: HelmChart, group: str) -> None:
    """What the objects are validated against is what the chart installs: the cached schemas came
    from the Go module of the chart's version, whose content the pinned go.sum hash fixes."""
    (module,) = [m for m in versions.CRD_MODULES if group in m.groups]
    record = crds.cached(module)
    assert (record["module"], record["version"], record["sum"]) == (module.module, f"v{chart.version}", module.sum)


def _go_download_cache() -> Path | None:
    go = shutil.which("go")
    if go is None:
        return None
    return Path(subprocess.run([go, "env", "GOMODCACHE"], capture_output=True, text=True, check=True).stdout.strip())


@pytest.mark.parametrize("module", versions.CRD_MODULES, ids=lambda m: m.module)
def test_a_module_is_read_only_if_it_hashes_to_its_pin(module: versions.CrdModule, tmp_path: Path) -> None:
    """Without Go the module zip comes straight from the proxy, so the program checks it itself:
    go.sum's `h1:` hash (golang.org/x/mod/sumdb/dirhash Hash1) of the zip `go mod download`
    verified must equal the pin, and one changed byte must not."""
    cache = _go_download_cache()
    if cache is None:
        pytest.skip("Go's module cache holds the zips `go mod download` verified; Go is not installed")
    crds.module_dir(module)  # downloads and verifies it if need be
    archive = cache / "cache" / "download" / crds.escaped(module.module) / "@v" / f"{module.version}.zip"
    with zipfile.ZipFile(archive) as original:
        assert crds.hash1(original) == module.sum
        tampered_path = tmp_path / "tampered.zip"
        with zipfile.ZipFile(tampered_path, "w") as tampered:
            for i, item in enumerate(original.infolist()):
                data = original.read(item)
                tampered.writestr(item, data + b" " if i == 0 else data)
    with zipfile.ZipFile(tampered_path) as tampered:
        assert crds.hash1(tampered) != module.sum


def test_module_paths_are_escaped_as_the_proxy_protocol_spells_them() -> None:
    """https://go.dev/ref/mod#goproxy-protocol: each capital letter is `!` and its lower case."""
    assert crds.escaped("github.com/GoogleCloudPlatform/gke-networking-api") == (
        "github.com/!google!cloud!platform/gke-networking-api"
    )


def test_the_cached_crds_serve_every_kind_and_version_the_program_writes() -> None:
    served = installed.schemas()
    for api_version, kinds in (
        (KUEUE_API, ("Topology", "ResourceFlavor", "WorkloadPriorityClass", "ProvisioningRequestConfig",
                     "AdmissionCheck", "ClusterQueue", "LocalQueue")),
        (JOBSET_API, ("JobSet",)),
        (NETWORKING_API, ("Network", "GKENetworkParamSet")),
    ):  # fmt: skip
        for kind in kinds:
            assert (api_version, kind) in served, (api_version, kind)


def test_gke_versions_sort_numerically() -> None:
    key = versions.gke_version_key
    assert key("1.34.1-gke.1829001") > key("1.32.11-gke.1174000") > key("1.32.4-gke.1236000")
    with pytest.raises(ValueError, match="not a GKE version"):
        key("latest")


def test_allocatable_capacity_follows_gke_reservations() -> None:
    # 6% of the first core, 1% of the next, 0.5% of the next two, 0.25% above four.
    assert allocatable_millicores(4) == 4000 - 60 - 10 - 10
    assert allocatable_millicores(208) == 208000 - 60 - 10 - 10 - 510
    # 25% of 4 GiB, 20% of 4 GiB, 10% of 8 GiB, 6% of 112 GiB, 2% above 128 GiB, plus eviction.
    reserved = 1024 + 819.2 + 819.2 + 6881.28 + 0.02 * (1872 - 128) * 1024 + 100
    assert allocatable_memory_mib(1872) == int(1872 * 1024 - reserved)


@pytest.mark.parametrize("name", list(MACHINE_TYPES))
def test_a_training_pod_fits_inside_a_node_with_room_for_daemonsets(name: str) -> None:
    machine = MACHINE_TYPES[name]
    cpu, memory = training_pod_requests(machine)
    assert 0 < cpu < allocatable_millicores(machine.vcpus) - 4000
    assert 0 < memory < allocatable_memory_mib(machine.memory_gib) - 32 * 1024


@pytest.mark.parametrize(
    ("machine", "image", "gib"),
    [
        # gpu-recipes@2e1fd5e network.gibVersion: all eight A3 Ultra NeMo 26.02 recipes, all eleven
        # A4 ones, all nine A4 NeMo 25.07 ones, every A4X NeMo 26.02 one.
        ("a3-ultragpu-8g", versions.NEMO_2602, versions.GIB_POD_V110),
        ("a4-highgpu-8g", versions.NEMO_2602, versions.GIB_PLUGIN),
        ("a4-highgpu-8g", versions.NEMO_2, versions.GIB_POD_V110),
        ("a4x-highgpu-4g", versions.NEMO_2602, versions.GIB_ARM64_PLUGIN),
        # No A3 Ultra NeMo 25.07 recipe: A4's pin for that image.
        ("a3-ultragpu-8g", versions.NEMO_2, versions.GIB_POD_V110),
        # A3 Ultra's resiliency recipes (nemo-gke-resiliency/nemo2412@2e1fd5e): v1.0.5.
        ("a3-ultragpu-8g", versions.RESILIENCY, versions.GIB_POD_V105),
    ],
)
def test_rdma_pods_install_the_gib_the_recipes_pin_for_machine_and_image(
    machine: str, image: Image, gib: Image
) -> None:
    """The node's gIB carries no NCCL since CEA 2da1c92 (`install`, no --install-nccl), so the
    recipes install gIB with its NCCL in the pod, one release per machine and image: the same
    image takes v1.1.0 on A3 Ultra and v1.1.1 on A4."""
    # Each pinned explicitly (not the fallback of another image).
    assert dict(machine_type(machine).pod_gib)[image.ref] == gib
    assert machine_type(machine).pod_gib_for(image.ref) == gib
    # Another image: the machine's current runtime's pin.
    assert machine_type(machine).pod_gib_for("example.invalid/other:1") == machine_type(machine).pod_gib_for(None)
    assert machine_type("a3-megagpu-8g").pod_gib_for(image.ref) is None


def test_a_nemo2_run_splits_its_layers_either_way_only_on_an_image_that_can() -> None:
    """Llama 3.1 405B's 126 layers: its A3 Ultra recipe splits them alone (PP9 × VP14). PP8 × VP8
    divides them only with the embedding and the loss counted, which NeMo 2.4's MegatronStrategy
    (the 25.07 image) can set. NeMo 24.12's (the resiliency image) has neither field, so a run
    there splits the layers alone, even from A4's recipe, which counts them (128 over PP8 × VP2)."""
    layers = model_spec("llama3.1-405b").architecture.layers
    a3u, a4 = (model_spec("llama3.1-405b").recipe_on(m) for m in ("a3-ultragpu-8g", "a4-highgpu-8g"))
    assert a3u.counts_embedding_and_loss(layers, 9, 14, versions.NEMO_2.ref) is False
    assert a3u.counts_embedding_and_loss(layers, 8, 8, versions.NEMO_2.ref) is True
    assert a3u.counts_embedding_and_loss(layers, 8, 8, versions.RESILIENCY.ref) is None
    assert a3u.counts_embedding_and_loss(layers, 9, 4, versions.NEMO_2.ref) is None
    assert a4.counts_embedding_and_loss(layers, 8, 2, versions.NEMO_2.ref) is True
    assert a4.counts_embedding_and_loss(layers, 8, 2, versions.RESILIENCY.ref) is None
    assert a4.counts_embedding_and_loss(layers, 9, 14, versions.RESILIENCY.ref) is False
    # Megatron-Bridge recipes split as they are written.
    bridge = model_spec("llama3-70b").recipe_on("a4-highgpu-8g")
    assert bridge.pipeline_splits(bridge.image.ref) == (False,)


def test_every_megatron_bridge_model_names_the_hugging_face_configuration_its_recipes_read() -> None:
    for model in MODELS.values():
        if model.recipe.framework is Framework.MEGATRON_BRIDGE:
            assert model.hugging_face and SOURCE.search(model.sources["hugging_face"]), model.name
            assert model.hugging_face.repository in model.sources["hugging_face"]
        else:
            assert model.hugging_face is None and model.hugging_face_config() is None


def test_a_hugging_face_configuration_takes_its_shape_from_the_architecture_by_the_files_keys() -> None:
    """Each model type's own keys, as the published config.json files spell them."""
    deepseek = model_spec("deepseek-v3").hugging_face_config()
    assert deepseek is not None
    assert {k: deepseek[k] for k in ("n_routed_experts", "num_experts_per_tok", "moe_intermediate_size")} == {
        "n_routed_experts": 256,
        "num_experts_per_tok": 8,
        "moe_intermediate_size": 2048,
    }
    assert (deepseek["n_shared_experts"], deepseek["first_k_dense_replace"], deepseek["intermediate_size"]) == (
        1,
        3,
        18432,
    )
    assert (deepseek["q_lora_rank"], deepseek["kv_lora_rank"], deepseek["qk_nope_head_dim"]) == (1536, 512, 128)
    assert deepseek["num_nextn_predict_layers"] == 1 and deepseek["num_hidden_layers"] == 61
    gpt_oss = model_spec("gpt-oss-120b").hugging_face_config()
    assert gpt_oss is not None
    assert (gpt_oss["num_local_experts"], gpt_oss["num_experts_per_tok"], gpt_oss["intermediate_size"]) == (
        128,
        4,
        2880,
    )
    assert gpt_oss["head_dim"] == 64 and "num_experts" not in gpt_oss
    qwen = model_spec("qwen3-30b-a3b").hugging_face_config()
    assert qwen is not None
    assert (qwen["num_experts"], qwen["moe_intermediate_size"], qwen["intermediate_size"]) == (128, 768, 6144)
    llama = model_spec("llama3-70b").hugging_face_config()
    assert llama is not None
    assert (llama["num_hidden_layers"], llama["hidden_size"], llama["num_key_value_heads"]) == (80, 8192, 8)
    assert "head_dim" not in llama and "num_experts" not in llama
    # As the settings file carries it: JSON, nested values included.
    assert json.loads(json.dumps(gpt_oss)) == gpt_oss
    assert gpt_oss["rope_scaling"]["rope_type"] == "yarn" and gpt_oss["architectures"] == ["GptOssForCausalLM"]
