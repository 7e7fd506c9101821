"""Fabric checks: nccl-tests as a JobSet with the pool's GPUDirect wiring and the flavour's
documented test binaries, queued like a run, gating the runs that require it; and the driver
script, executed with stand-in ssh and mpirun."""

from __future__ import annotations

import copy
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

import payload
from facts import versions
from facts.machines import GpuDirect
from facts.nccl import PUBLISHED
from facts.versions import Image
from harness.runner import StackRun, load_stack_values, stack_with, unmarked
from planners.fabric import MIN_BW_FACTOR, NCCL_TEST_SCRIPT
from tests.conftest import Render, issue_for, rejected

JOBSET = "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"
CHECK_LABEL = "nemo-gke/fabric-check"


def jobsets(run: StackRun) -> dict[str, tuple[Any, dict[str, Any]]]:
    """Checks and runs by their label value: (resource, manifest)."""
    found = {}
    for resource in run.of_type(JOBSET):
        manifest = run.manifest(resource)
        labels = manifest["metadata"]["labels"]
        found[labels.get(CHECK_LABEL) or labels["nemo-gke/run"]] = (resource, manifest)
    return found


def pod(manifest: dict[str, Any]) -> dict[str, Any]:
    (replicated,) = manifest["spec"]["replicatedJobs"]
    return replicated["template"]["spec"]["template"]  # type: ignore[no-any-return]


def env(manifest: dict[str, Any]) -> dict[str, str]:
    (container,) = pod(manifest)["spec"]["containers"]
    return {e["name"]: e.get("value", "<field>") for e in container["env"]}


def with_check(stack: str, **check: Any) -> dict[str, Any]:
    values = load_stack_values(stack)
    training = copy.deepcopy(values["nemo-gke:training"])
    training["ncclTests"] = [{"name": "fabric", **check}]
    # The pool's own wiring: a supervised run moves its pods to the host network (test_resiliency).
    for run in training.get("runs", []):
        run.pop("resiliency", None)
    return stack_with(stack, training=training)


@pytest.mark.parametrize(
    ("stack", "image"),
    [
        ("dev", versions.TCPX_PLUGIN),
        # The pods' own plugin release (CEA tested it with its daemon: nccl-test.yaml@4aeee0d).
        ("a3mega", versions.TCPXO_RECIPE_PLUGIN),
        # The diagnostic image of the gIB release the pods install: v1.1.0 for A3 Ultra's NeMo 25.07
        # run (cluster-toolkit pairs them), v1.1.1 for A4's NeMo 26.02 runs (CEA's test).
        ("a3ultra", versions.GIB_DIAGNOSTIC_V110),
        ("a4", versions.GIB_DIAGNOSTIC),
        # Arm hosts: the arm64 build of the same test (CEA gpudirect-rdma/nccl-test-imex-a4x.yaml@992db81).
        ("a4x", versions.GIB_ARM64_DIAGNOSTIC),
    ],
)
def test_a_check_runs_the_flavour_s_nccl_test_with_the_training_pods_wiring(
    render: Render, stack: str, image: Image
) -> None:
    """The issue asks for "exactly the variant's GPUDirect wiring" and "the test binaries the
    variant's documented NCCL test uses": the pod's networking (annotations, host network,
    sidecars, volumes, environment) is the training pod's, the image is the one of CEA's NCCL
    test for the flavour and the hosts' CPU architecture, queued through Kueue like a run."""
    run = render(stack, values=with_check(stack, nodes=2))
    by_label = jobsets(run)
    _, check = by_label["fabric"]
    _, training = next(v for k, v in by_label.items() if k != "fabric")
    check_pod, training_pod = pod(check), pod(training)
    for key in ("hostNetwork", "initContainers", "tolerations", "nodeSelector"):
        assert check_pod["spec"].get(key) == training_pod["spec"].get(key), key
    for key, value in training_pod["metadata"]["annotations"].items():
        if key.startswith(("networking.gke.io/", "devices.gke.io/")):
            assert check_pod["metadata"]["annotations"][key] == value
    training_volumes = {v["name"]: v for v in training_pod["spec"]["volumes"]}
    for volume in check_pod["spec"]["volumes"]:
        if volume["name"] in training_volumes and volume["name"] not in ("workload", "shm"):
            assert volume == training_volumes[volume["name"]]
    (container,) = check_pod["spec"]["containers"]
    assert container["image"] == image.ref
    assert container["command"] == ["bash", f"/workload/{NCCL_TEST_SCRIPT}"]
    variables, training_env = env(check), env(training)
    for key in ("NCCL_INIT_SCRIPT", "LD_LIBRARY_PATH", "NCCL_SOCKET_IFNAME", "NCCL_TUNER_CONFIG_PATH"):
        assert variables.get(key) == training_env.get(key), key
    assert "suspend" not in check["spec"]  # Kueue's webhook suspends it (components.training.REPLACE_JOB)
    assert (
        check["metadata"]["labels"]["kueue.x-k8s.io/queue-name"]
        == training["metadata"]["labels"]["kueue.x-k8s.io/queue-name"]
    )


def test_the_published_pass_mark_applies_to_exactly_the_published_test(render: Render) -> None:
    """nccl-tests fails a run whose average bus bandwidth is under 90 % of NCCL_TESTS_MIN_BW
    (NVIDIA/nccl-tests src/util.cu): the check hands over the published pass mark / 0.9 for the
    published test (all_gather, 2 nodes; facts/nccl.py PUBLISHED), nothing for the others."""
    two = env(jobsets(render("a3mega", values=with_check("a3mega", nodes=2)))["fabric"][1])
    mark = PUBLISHED[GpuDirect.TCPXO].min_avg_busbw
    assert float(two["NCCL_TEST_MIN_BUSBW_all_gather"]) == pytest.approx(mark / MIN_BW_FACTOR, abs=0.01)
    assert "NCCL_TEST_MIN_BUSBW_all_reduce" not in two
    four = env(jobsets(render("a3mega", values=with_check("a3mega", nodes=4)))["fabric"][1])
    assert not [key for key in four if key.startswith("NCCL_TEST_MIN_BUSBW")]


def test_a_run_that_requires_a_check_is_submitted_only_once_it_passed(render: Render) -> None:
    """pulumi-kubernetes awaits a resource annotated `pulumi.com/waitFor: condition=Completed`
    until the condition holds (provider/pkg/metadata/overrides.go ReadyCondition); JobSet sets
    `Completed` only on success (jobset_types.go JobSetCompleted). The run depends on the check,
    so `pulumi up` creates it after. A check no run requires is not awaited."""
    run = render("a3mega")
    (check_resource, check), (run_resource, _) = jobsets(run)["fabric"], jobsets(run)["gpt3-175b"]
    assert unmarked(check)["metadata"]["annotations"] == {"pulumi.com/waitFor": "condition=Completed"}
    assert check_resource.custom_timeouts == {"create": "60m", "update": "60m"}
    assert run.depends_on(run_resource, check_resource)
    free = render("a3ultra")
    assert "annotations" not in unmarked(jobsets(free)["fabric"][1])["metadata"]


def test_requiring_a_check_does_not_rerun_one_that_passed(render: Render) -> None:
    """The wait annotation stays out of the name's digest: a check a run starts requiring
    keeps its JobSet (a metadata patch), instead of running again under a new name."""
    values = load_stack_values("a3mega")
    training = copy.deepcopy(values["nemo-gke:training"])
    del training["runs"][0]["fabricCheck"]
    free = jobsets(render("a3mega", values=stack_with("a3mega", training=training)))["fabric"][1]
    gated = jobsets(render("a3mega"))["fabric"][1]
    assert free["metadata"]["name"] == gated["metadata"]["name"]


@pytest.mark.parametrize(
    ("check", "key", "expected"),
    [
        ({"pool": "h100x4"}, "training.ncclTests[0].pool", "no GPUDirect fabric to check"),
        ({"nodes": 3}, "training.ncclTests[0].nodes", "at most 2 nodes"),
        ({"collectives": ["all_gather", "all_gather"]}, "training.ncclTests[0].collectives", "must not repeat"),
    ],
)
def test_a_check_that_cannot_run_is_refused_with_the_key(check: dict[str, Any], key: str, expected: str) -> None:
    stack = "a3high-small" if check.get("pool") == "h100x4" else "dev"
    assert expected in issue_for(rejected(with_check(stack, **check), stack), key)


def test_a_run_may_require_only_a_check_of_its_stack() -> None:
    values = load_stack_values("dev")
    training = copy.deepcopy(values["nemo-gke:training"])
    training["runs"][0]["fabricCheck"] = "elsewhere"
    message = issue_for(rejected(stack_with("dev", training=training)), "training.runs[0].fabricCheck")
    assert "names no ncclTests entry" in message


# --------------------------------------------------------------------------- the driver script

MPIRUN = """#!/bin/bash
printf '%s\\n' "$@" > "$RECORD/mpirun.$(date +%s%N).args"
echo "# Avg bus bandwidth    : 42.0"
exit "${MPIRUN_EXIT:-0}"
"""
SSH = """#!/bin/bash
echo "$@" >> "$RECORD/ssh.args"
"""


@pytest.fixture
def node(tmp_path: Path) -> dict[str, str]:
    bin_dir, record, results = tmp_path / "bin", tmp_path / "record", tmp_path / "nfs" / "fabric" / "nccl"
    bin_dir.mkdir()
    record.mkdir()
    for name, body in (("mpirun", MPIRUN), ("ssh", SSH)):
        (bin_dir / name).write_text(body)
        (bin_dir / name).chmod(0o755)
    return {
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "RECORD": str(record),
        "JOBSET_NAME": "fabric-abc123",
        "JOB_COMPLETION_INDEX": "0",
        "NNODES": "2",
        "GPUS_PER_NODE": "8",
        "NCCL_TEST_DIR": str(results),
        "NCCL_TEST_COLLECTIVES": "all_gather all_reduce",
        "NCCL_TEST_BEGIN": "1K",
        "NCCL_TEST_END": "8G",
        "NCCL_TEST_SSHD": "true",
        "NCCL_TEST_RANK": "/third_party/nccl-tests/build/{bench}",
        "NCCL_TEST_MIN_BUSBW_all_gather": "111.11",
        "NCCL_TEST_TIMEOUT_S": "20",
        "NCCL_NET": "gIB",
    }


def drive(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    script = payload.DIR / NCCL_TEST_SCRIPT
    return subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, check=False, timeout=60)


def mpirun_calls(env: dict[str, str]) -> list[list[str]]:
    return [path.read_text().split("\n")[:-1] for path in sorted(Path(env["RECORD"]).glob("mpirun.*.args"))]


def test_node_0_runs_every_collective_across_all_nodes_and_records_the_status(node: dict[str, str]) -> None:
    result = drive(node)
    assert result.returncode == 0, result.stderr
    all_gather, all_reduce = mpirun_calls(node)
    hostfile = Path(all_gather[all_gather.index("--hostfile") + 1])
    assert hostfile.read_text().split("\n")[:-1] == [
        "fabric-abc123-workers-0-0.fabric-abc123 port=222 slots=8",
        "fabric-abc123-workers-0-1.fabric-abc123 port=222 slots=8",
    ]
    assert all_gather[all_gather.index("-np") + 1] == "16"
    assert "/third_party/nccl-tests/build/all_gather_perf" in all_gather
    assert "/third_party/nccl-tests/build/all_reduce_perf" in all_reduce
    assert all_gather[all_gather.index("NCCL_NET") - 1 : all_gather.index("NCCL_NET") + 1] == ["-x", "NCCL_NET"]
    assert "NCCL_TESTS_MIN_BW=111.11" in all_gather and not [a for a in all_reduce if "MIN_BW" in a]
    assert all_gather[-14:] == ["-b", "1K", "-e", "8G", "-f", "2", "-g", "1", "-w", "5", "--iters", "100", "-c", "1"]
    results = Path(node["NCCL_TEST_DIR"])
    assert "Avg bus bandwidth" in (results / "all_gather.log").read_text()
    assert (results / "status").read_text().strip() == "0"


def test_a_failed_collective_fails_node_0_and_still_releases_the_others(node: dict[str, str]) -> None:
    node["MPIRUN_EXIT"] = "1"
    assert drive(node).returncode == 1
    assert (Path(node["NCCL_TEST_DIR"]) / "status").read_text().strip() == "1"
    other = {**node, "JOB_COMPLETION_INDEX": "1"}
    assert drive(other).returncode == 0, "the others end once node 0 has"


def test_the_other_nodes_give_up_when_node_0_never_finishes(node: dict[str, str]) -> None:
    other = {**node, "JOB_COMPLETION_INDEX": "1", "NCCL_TEST_TIMEOUT_S": "1"}
    result = drive(other)
    assert result.returncode == 1 and "node 0 never finished" in result.stderr


def test_a_check_comes_before_the_run_it_gates_so_a_changed_check_never_waits_behind_it(render: Render) -> None:
    """A changed check is a new JobSet `pulumi up` waits for; the run it gates may hold the pool.
    Kueue admits a workload by preempting lower-priority ones in its ClusterQueue when
    `withinClusterQueue` is LowerPriority (https://kueue.sigs.k8s.io/docs/concepts/preemption/;
    kueue apis/kueue/v1beta2 clusterqueue_types.go PreemptionPolicy), so the check's priority class
    stands above every run's: it takes the pool, passes, and the run is admitted again."""
    run = render("a3mega")
    (_, check), (_, gated) = jobsets(run)["fabric"], jobsets(run)["gpt3-175b"]
    classes = {
        m["metadata"]["name"]: m["value"]
        for m in map(run.manifest, run.of_type("kubernetes:kueue.x-k8s.io/v1beta2:WorkloadPriorityClass"))
    }
    check_class = check["metadata"]["labels"]["kueue.x-k8s.io/priority-class"]
    run_classes = [name for name in classes if name != check_class]
    assert check_class == "nemo-fabric-check" and classes[check_class] > max(classes[c] for c in run_classes)
    assert gated["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] in run_classes
    (queue,) = map(run.manifest, run.of_type("kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue"))
    assert queue["spec"]["preemption"]["withinClusterQueue"] == "LowerPriority"


def test_a_gated_run_is_refused_where_the_queue_never_preempts() -> None:
    values = stack_with(
        "a3mega", kueue={**load_stack_values("a3mega").get("nemo-gke:kueue", {}), "preemption": "Never"}
    )
    message = issue_for(rejected(values, "a3mega"), "training.runs[0].fabricCheck")
    assert "cannot preempt this run once it holds the pool (kueue.preemption is Never)" in message


def test_an_a4x_check_shares_an_nvlink_domain_like_a_run(render: Render) -> None:
    """CEA's A4X NCCL test claims IMEX channels from a ComputeDomain of its own
    (gpudirect-rdma/nccl-test-imex-a4x.yaml@992db81): NCCL then measures NVLink across nodes."""
    run = render("a4x", values=with_check("a4x", nodes=2))
    _, check = jobsets(run)["fabric"]
    domains = [run.manifest(r) for r in run.of_type("kubernetes:resource.nvidia.com/v1beta1:ComputeDomain")]
    (domain,) = [d for d in domains if d["metadata"]["name"].startswith("fabric-nvlink-")]
    assert domain["spec"]["numNodes"] == 2
    (claim,) = pod(check)["spec"]["resourceClaims"]
    assert claim["resourceClaimTemplateName"] == domain["spec"]["channel"]["resourceClaimTemplate"]["name"]


def test_a_check_installs_the_gib_its_runs_load_and_says_when_they_differ(render: Render) -> None:
    """gpu-recipes pins gIB per machine and image (network.gibVersion: A4's NeMo 26.02 recipes
    v1.1.1, its NeMo 25.07 ones v1.1.0), installed with its NCCL in the pod; a check tests the NCCL
    training loads, so it installs the release of the runs it gates. Runs of two releases behind
    one check are told which one it tests."""
    values = load_stack_values("a4")
    training = copy.deepcopy(values["nemo-gke:training"])
    training["ncclTests"] = [{"name": "fabric", "pool": "a4", "nodes": 2}]
    training["runs"][0]["fabricCheck"] = "fabric"
    run = render("a4", values=stack_with("a4", training=training))
    (installer,) = pod(jobsets(run)["fabric"][1])["spec"]["initContainers"]
    assert installer["image"] == versions.GIB_PLUGIN.ref
    assert not run.warnings or all("fabric check" not in w.message for w in run.warnings)
    # A NeMo 2 run (NeMo 25.07) behind the same check: its release is A4's v1.1.0.
    training["runs"].append({"name": "old", "model": "llama3.1-8b", "nodes": 1, "fabricCheck": "fabric"})
    both = render("a4", values=stack_with("a4", training=training))
    (warning,) = [w.message for w in both.warnings if "fabric check" in w.message]
    assert versions.GIB_POD_V110.ref in warning and versions.GIB_PLUGIN.ref in warning
    del training["runs"][0]["fabricCheck"]
    old_only = render("a4", values=stack_with("a4", training=training))
    (installer,) = pod(jobsets(old_only)["fabric"][1])["spec"]["initContainers"]
    assert installer["image"] == versions.GIB_POD_V110.ref
