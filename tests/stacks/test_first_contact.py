"""Nothing silently ignored, no misleading message: what a new user's stack file gets.

Each refusal is one line naming the key and what is allowed, and nothing is registered
(tests/conftest.py `rejected`); each piece of advice is one warning. The classes are those a first
contact with the program meets: keys no deployed layer reads, keys that configure Google Cloud on a
stack that creates none, credentials in plain text, values the kernel or the API server refuses,
and messages that must blame the key the user wrote and show its value readably.
"""

from __future__ import annotations

import copy
import json
import time
from pathlib import Path
from typing import Any

import pulumi
import pytest
from pulumi.runtime import settings

from config.training import MAX_JOBS_PER_STACK
from facts.kubernetes import DEFINITION_ANNOTATION, MAX_ENV_STRING_BYTES
from facts.project import PROJECT
from facts.pulumi_cli import SECRET_STAND_IN, SHOWN_ERROR_EXIT_CODE
from harness.mocks import RecordingEngine, RecordingMocks, RecordingMonitor
from harness.runner import StackFailed, load_stack_values, run_stack, stack_with
from harness.stackfile import to_pulumi_config
from planners.runtimes import nemo1
from planners.submitted import ENCRYPTED
from stacks import program
from stacks.kubeapi import read_kubeconfig
from tests.conftest import Render, issue_for, rejected
from tools import render as render_tool

DEV_RUN = load_stack_values("dev")["nemo-gke:training"]["runs"][0]
EXISTING = load_stack_values("existing")["nemo-gke:existingCluster"]


def lines(values: dict[str, Any], stack: str = "dev") -> list[str]:
    return [str(issue) for issue in rejected(values, stack).issues]


def dev_run(**changes: Any) -> dict[str, Any]:
    return stack_with("dev", training={"runs": [{**DEV_RUN, **changes}]})


def existing_cluster(**changes: Any) -> dict[str, Any]:
    return stack_with("existing", existingCluster={**copy.deepcopy(EXISTING), **changes})


def run_only(**keys: Any) -> dict[str, Any]:
    values = {
        "nemo-gke:layers": ["training"],
        "nemo-gke:upstreamStack": "organization/nemo-gke/dev",
        "nemo-gke:training": {"runs": [{"name": "second", "model": "gpt-5b", "nodes": 2, "steps": 10}]},
    }
    return {**values, **{f"nemo-gke:{key}": value for key, value in keys.items()}}


# --------------------------------------------------------------------------- keys no layer reads


@pytest.mark.parametrize(
    ("values", "stack", "line"),
    [
        (
            run_only(gpuPools=[{"name": "x", "machineType": "a3-highgpu-8g", "nodeCount": 2}]),
            "run-on-dev",
            "nemo-gke:gpuPools: is read by the cluster layer, which this stack does not deploy (layers: training)",
        ),
        (
            run_only(storage={"filestore": {"capacityGib": 2048}}),
            "run-on-dev",
            "nemo-gke:storage: is read by the platform layer, which this stack does not deploy (layers: training)",
        ),
        (
            stack_with("bootstrap", training={"runs": []}),
            "bootstrap",
            "nemo-gke:training: is read by the training layer, which this stack does not deploy (layers: bootstrap)",
        ),
        (
            stack_with("dev", layers=["cluster"]),
            "dev",
            "nemo-gke:training: is read by the training layer, which this stack does not deploy (layers: cluster)",
        ),
    ],
    ids=["run-only-pools", "run-only-storage", "bootstrap-training", "cluster-only-training"],
)
def test_a_key_no_deployed_layer_reads_is_refused_by_name(values: dict[str, Any], stack: str, line: str) -> None:
    assert lines(values, stack) == [f"{line}"]


@pytest.mark.parametrize(
    ("key", "value", "reason"),
    [
        ("gpuPools", [{"name": "x", "machineType": "a3-highgpu-8g", "nodeCount": 2}], "is read by the cluster layer"),
        ("network", {"nodeCidr": "10.0.0.0/20"}, "is read by the cluster layer"),
        ("systemPool", {"nodeCount": 2}, "is read by the cluster layer"),
        ("cluster", {"name": "mine"}, "is read by the cluster layer"),
        ("project", "acme-ml-prod", "applies to Google Cloud resources, and an existingCluster stack creates none"),
        ("region", "us-east5", "applies to Google Cloud resources"),
        ("zone", "us-east5-a", "applies to Google Cloud resources"),
        ("production", True, "applies to Google Cloud resources"),
        ("labels", {"team": "ml"}, "applies to Google Cloud resources"),
        ("storage", {"filestore": {"capacityGib": 2048}}, "existingCluster.storageClass and existingCluster.claims"),
        ("monitoring", {"dashboard": True}, "the dashboard and alerts are Cloud Monitoring's"),
        ("gpudirect", {"nriDeviceInjector": False}, "applies to Google Cloud resources"),
    ],
)
def test_every_key_only_a_gke_stack_uses_is_refused_on_an_existing_cluster(key: str, value: Any, reason: str) -> None:
    (line,) = lines(stack_with("existing", **{key: value}), "existing")
    assert line.startswith(f"nemo-gke:{key}: ") and reason in line, line


def test_an_existing_cluster_stack_needs_no_project_and_a_gke_stack_is_told_how_to_set_one(render: Render) -> None:
    assert "nemo-gke:project" not in load_stack_values("existing")
    assert render("existing").exports["summary"]["project"] == ""
    values = load_stack_values("dev")
    del values["nemo-gke:project"]
    assert lines(values) == [
        "nemo-gke:project: is required: set it with `pulumi config set nemo-gke:project <your project ID>`"
    ]


def test_a_later_layer_repeats_its_upstream_s_keys_exactly() -> None:
    """The run-only stack reads project, region, zone, production and namespace from its upstream
    (stacks/upstream.py); a different value would be ignored, so it is refused."""
    assert lines(run_only(region="us-east5"), "run-on-dev") == [
        "nemo-gke:region = \"us-east5\": must be the upstream stack's region, 'us-central1', or unset: "
        "organization/nemo-gke/dev sets it"
    ]
    assert lines(run_only(namespace="other"), "run-on-dev")[0].startswith('nemo-gke:namespace = "other": must be the')
    assert run_stack("run-on-dev", values=run_only(region="us-central1", namespace="nemo")).of_type(
        "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"
    )


def test_keys_of_other_namespaces_are_warned_about_with_the_key_to_use(render: Render) -> None:
    values = {**load_stack_values("dev"), "gcp:project": "acme-ml-prod", "aws:region": "us-east-1"}
    said = [w.message for w in render("dev", values=values).warnings]
    assert (
        "config key 'gcp:project' is ignored: this program's gcp provider takes its settings from nemo-gke:project"
        in said
    )
    assert (
        "config key 'aws:region' is ignored: this program reads only nemo-gke:* keys (its aws resources, if any, "
        "take their settings from those)"
    ) in said


# --------------------------------------------------------------------------- credentials


def test_a_credential_in_plain_text_is_refused_with_the_command_that_encrypts_it() -> None:
    assert lines(dev_run(env={"HF_TOKEN": "hf_abc", "NCCL_DEBUG": "INFO", "wandb_api_key": "k"})) == [
        "nemo-gke:training.runs[0].env.HF_TOKEN: looks like a credential and is plain text: store it encrypted, "
        "`pulumi config set --secret --path 'nemo-gke:training.runs[0].env.HF_TOKEN' <value>`",
        "nemo-gke:training.runs[0].env.wandb_api_key: looks like a credential and is plain text: store it "
        "encrypted, `pulumi config set --secret --path 'nemo-gke:training.runs[0].env.wandb_api_key' <value>`",
    ]


def test_an_encrypted_env_value_reaches_the_pod_through_a_secret_never_the_jobset(render: Render) -> None:
    """`pulumi config set --secret --path` writes a nested `secure:` leaf; the CLI then marks the whole
    `training` key secret (config.Map.SecureKeys), so every env value of every run is treated as one."""
    run = render("dev", values=dev_run(env={"HF_TOKEN": SECRET_STAND_IN, "NCCL_DEBUG": "INFO"}))
    secret = run.one("kubernetes:core/v1:Secret", "training-gpt5b-demo-env")
    assert run.manifest(secret)["metadata"]["name"] == "gpt5b-demo-env"
    jobset = run.manifest(run.one("kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"))
    (container,) = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][-1:]
    env = {e["name"]: e for e in container["env"]}
    for name in ("HF_TOKEN", "NCCL_DEBUG"):
        assert env[name] == {"name": name, "valueFrom": {"secretKeyRef": {"name": "gpt5b-demo-env", "key": name}}}
    assert SECRET_STAND_IN not in json.dumps(jobset)
    # What the JobSet records of the run keeps the names only (planners.submitted).
    definition = json.loads(jobset["metadata"]["annotations"][DEFINITION_ANNOTATION])
    assert definition["env"] == {"HF_TOKEN": ENCRYPTED, "NCCL_DEBUG": ENCRYPTED}
    assert run.depends_on(run.one("kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"), secret)


def test_a_secret_value_is_never_shown_in_a_message() -> None:
    values = dev_run(env={"HF_TOKEN": SECRET_STAND_IN, "BAD NAME": "plain but secret"})
    (line,) = lines(values)
    assert line.startswith('nemo-gke:training.runs[0].env.BAD NAME = "[secret]": the name must be')


def test_an_env_value_the_kernel_cannot_take_is_refused() -> None:
    big = "x" * MAX_ENV_STRING_BYTES
    (line,) = lines(dev_run(env={"BIG": big}))
    assert line.startswith('nemo-gke:training.runs[0].env.BIG = "xxxxxxxxxx')
    assert line.endswith(
        f"… ({MAX_ENV_STRING_BYTES} characters): is {MAX_ENV_STRING_BYTES + 5} bytes as NAME=value; a process's "
        f"environment takes at most {MAX_ENV_STRING_BYTES} per variable (Linux MAX_ARG_STRLEN): put large values "
        "in the data bucket"
    )


KUBECONFIG = {
    "apiVersion": "v1",
    "clusters": [{"name": "c", "cluster": {"server": "https://203.0.113.9"}}],
    "contexts": [{"name": "team-a3ultra", "context": {"cluster": "c", "user": "u"}}],
    "users": [{"name": "u", "user": {"token": "eyJhbGciOi"}}],
    "current-context": "team-a3ultra",
}


def test_an_inline_kubeconfig_holding_a_credential_must_be_encrypted(render: Render) -> None:
    inline = existing_cluster(kubeconfig=json.dumps(KUBECONFIG), kubeconfigPath=None)
    assert lines(inline, "existing") == [
        "nemo-gke:existingCluster.kubeconfig: holds a credential (users[0].user.token) as plain text: store it "
        "encrypted, `pulumi config set --secret --path 'nemo-gke:existingCluster.kubeconfig' \"$(kubectl config "
        'view --raw --minify)"`, or use kubeconfigPath'
    ]
    assert render("existing", values=existing_cluster(kubeconfig=SECRET_STAND_IN, kubeconfigPath=None))


@pytest.mark.parametrize(
    ("write", "context", "line"),
    [
        (
            None,
            "team-a3ultra",
            "nemo-gke:existingCluster.kubeconfigPath: {path} does not exist on the machine running Pulumi",
        ),
        ("folder", "team-a3ultra", "nemo-gke:existingCluster.kubeconfigPath: {path} is not a file"),
        (
            "clusters: [unclosed\n",
            "team-a3ultra",
            "nemo-gke:existingCluster.kubeconfigPath: {path} is not YAML (line 2): expected ',' or ']', but got "
            "'<stream end>'",
        ),
        (
            "kind: Config\n",
            "team-a3ultra",
            "nemo-gke:existingCluster.kubeconfigPath: {path} is not a kubeconfig: it has no `clusters` list, as "
            "`kubectl config view --raw` writes",
        ),
        (
            json.dumps(KUBECONFIG),
            "other",
            "nemo-gke:existingCluster.context = \"other\": the kubeconfig has no context 'other'",
        ),
    ],
    ids=["missing", "folder", "not-yaml", "not-a-kubeconfig", "no-such-context"],
)
def test_a_kubeconfig_kubectl_could_not_use_is_refused_before_anything_is_registered(
    tmp_path: Path, write: str | None, context: str, line: str
) -> None:
    path = tmp_path / "kubeconfig"
    if write == "folder":
        path.mkdir()
    elif write is not None:
        path.write_text(write)
    values = existing_cluster(kubeconfigPath=str(path), context=context)
    with pytest.raises(StackFailed) as failure:
        run_stack("existing", values=values, read_kubeconfig=read_kubeconfig)
    assert failure.value.resources == []
    assert [str(i) for i in failure.value.error.issues] == [line.format(path=path)]  # type: ignore[attr-defined]


def test_a_usable_kubeconfig_file_is_taken_as_it_is(tmp_path: Path) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text(json.dumps(KUBECONFIG))
    run = run_stack("existing", values=existing_cluster(kubeconfigPath=str(path)), read_kubeconfig=read_kubeconfig)
    assert run.of_type("kubernetes:jobset.x-k8s.io/v1alpha2:JobSet")


# --------------------------------------------------------------------------- readable messages


def test_an_invisible_character_in_a_key_is_escaped_and_the_value_shown() -> None:
    assert lines(dev_run(env={"HF\u200bTOKEN": "abc"})) == [
        'nemo-gke:training.runs[0].env.HF\\u200bTOKEN = "abc": the name must be an environment variable name: '
        "[A-Za-z_][A-Za-z0-9_]*"
    ]


@pytest.mark.parametrize(
    ("labels", "line"),
    [
        ({"Team": "ml"}, """nemo-gke:labels.Team = "ml": label keys are 1-63 of a-z, 0-9, '_', '-', starting with """
                         "a letter"),
        ({"managed-by": "terraform"}, 'nemo-gke:labels.managed-by = "terraform": is a label the program sets on '
                                      "every resource itself"),
        ({f"l{i}": "x" for i in range(63)}, "nemo-gke:labels = 63: a Google Cloud resource holds 64 labels, 2 of them "
                                            "the program's"),
    ],
    ids=["bad-key", "program-s-own", "too-many"],
)  # fmt: skip
def test_a_label_is_shown_with_its_value(labels: dict[str, str], line: str) -> None:
    assert lines(stack_with("dev", labels=labels)) == [line]


def test_a_long_value_is_cut_in_the_message() -> None:
    (line,) = lines(dev_run(name="x" * 5000))
    assert line.startswith('nemo-gke:training.runs[0].name = "' + "x" * 79 + "… (5000 characters): must be")


def test_the_key_the_user_wrote_is_blamed_with_its_value() -> None:
    assert lines(dev_run(microBatchSize=3)) == [
        "nemo-gke:training.runs[0].microBatchSize = 3: the global batch size 2048 must be a multiple of micro batch "
        "× data-parallel size = 3 × 16 (16 GPUs / model parallel 1)"
    ]
    assert lines(dev_run(resiliency={"supervisor": True})) == [
        'nemo-gke:training.runs[0].resiliency = {"supervisor": true}: gpt-5b runs on NeMo 1; resiliency settings '
        "need a NeMo 2 model"
    ]
    pools = copy.deepcopy(load_stack_values("existing-oke")["nemo-gke:existingCluster"]["gpuPools"])
    pools[0]["gpusPerNode"] = 3
    values = stack_with(
        "existing-oke",
        existingCluster={**load_stack_values("existing-oke")["nemo-gke:existingCluster"], "gpuPools": pools},
    )
    assert lines(values, "existing-oke") == [
        "nemo-gke:existingCluster.gpuPools[0].gpusPerNode = 3: must be one of 1, 2, 4, 8, 16: GPU machines hold no "
        "other count"
    ]


# --------------------------------------------------------------------------- advice


def test_a_checkpoint_interval_longer_than_the_run_is_warned_about(render: Render) -> None:
    run = render("dev", values=dev_run(checkpoint={"intervalSteps": 100}))
    said = [w.message for w in run.warnings if "checkpoint.intervalSteps" in w.message]
    assert said == [
        "run gpt5b-demo: checkpoint.intervalSteps 100 is longer than the run's 50 steps, so it saves no checkpoint "
        "on the way: a restart begins again at step 0; set checkpoint.intervalSteps to at most 50"
    ]


def test_a_run_of_default_steps_and_interval_saves_at_its_end_and_hears_nothing(render: Render) -> None:
    """The default interval (100) was longer than every model's default steps (30 or 50): a run that
    set neither warned about its own defaults."""
    run = render("dev", values=stack_with("dev", training={"runs": [{"name": "plain", "model": "gpt-5b", "nodes": 2}]}))
    assert not [w.message for w in run.warnings if "checkpoint" in w.message]
    (config_map,) = [run.manifest(c) for c in run.of_type("kubernetes:core/v1:ConfigMap") if "plain" in c.name]
    trainer = json.loads(config_map["data"][nemo1.CONFIG])["exp_manager"]["checkpoint_callback_params"]
    assert trainer["every_n_train_steps"] == 50, "one checkpoint, at the run's 50th and last step"


def test_ten_thousand_runs_are_refused_at_the_documented_limit_in_bounded_time() -> None:
    runs = [{**DEV_RUN, "name": f"r{i}"} for i in range(10_000)]
    started = time.monotonic()
    assert lines(stack_with("dev", training={"runs": runs})) == [
        f"nemo-gke:training.runs: has 10000 entries; at most {MAX_JOBS_PER_STACK} are allowed"
    ]
    assert time.monotonic() - started < 5, "validation is linear in the number of runs"


def test_a_stack_of_the_cluster_layer_alone_renders(render: Render) -> None:
    """`layers: [cluster]` is a valid stack (config.stack): it once failed looking for an upstream
    platform it does not need."""
    values = {key: value for key, value in load_stack_values("dev").items() if key != "nemo-gke:training"}
    run = render("dev", values={**values, "nemo-gke:layers": ["cluster"]})
    assert run.of_type("gcp:container/cluster:Cluster") and not run.of_type("kubernetes:helm.sh/v3:Release")
    assert run.exports["summary"]["runs"] == []


def test_a_refused_config_is_shown_once_and_ends_as_the_language_host_expects(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Under the CLI the refusal is one error of the stack and exit code 32, by which the Python
    language host knows the message was shown (pulumi/pulumi sdk/python/cmd/pulumi-language-python-exec;
    pulumi-language-python main.go answers it with Bail, adding nothing). A RunError, as before,
    exits 1 and the host adds "an unhandled error occurred: program exited with non-zero exit code"."""
    values = stack_with("dev", region="mars-north1")
    monkeypatch.setenv("PULUMI_CONFIG", json.dumps(to_pulumi_config(values)))
    monkeypatch.setenv("PULUMI_CONFIG_SECRET_KEYS", "[]")
    mocks = RecordingMocks(project="p", preview=True, upstream={})
    monitor = RecordingMonitor(mocks)
    settings.ROOT.set(None)
    pulumi.runtime.set_mocks(mocks, project=PROJECT, stack="dev", preview=True, monitor=monitor)
    engine = RecordingEngine()
    settings.SETTINGS.engine = engine

    def exit_now(code: int) -> None:
        raise SystemExit(code)

    monkeypatch.setattr(program.os, "_exit", exit_now)
    with pytest.raises(SystemExit) as ended:
        program.main()
    assert ended.value.code == SHOWN_ERROR_EXIT_CODE == 32
    (shown,) = engine.warnings
    assert shown.message.startswith('invalid stack configuration:\n  nemo-gke:zone = "us-central1-c": must be a zone')
    assert monitor.recorded == []


def _refused_render(file: Path, capsys: pytest.CaptureFixture[str]) -> str:
    assert render_tool.main(["--file", str(file), "--out", str(file.parent / "out")]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.splitlines()) == 2, err
    return err


def test_a_stack_naming_itself_or_a_cycle_of_stacks_is_refused_by_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Run by the render, each reference ran the stack it names first: a stack naming itself, or
    two naming each other, recursed until Python's limit (about 3,000 lines of traceback)."""
    run_file = (Path(__file__).parents[2] / "examples" / "Pulumi.run-llama8b.yaml").read_text()
    itself = tmp_path / "Pulumi.run-llama8b.yaml"
    itself.write_text(run_file.replace("organization/nemo-gke/a3high-small", "run-llama8b"))
    err = _refused_render(itself, capsys)
    assert 'nemo-gke:upstreamStack = "run-llama8b": makes a cycle of stacks (run-llama8b → run-llama8b)' in err
    (tmp_path / "Pulumi.a.yaml").write_text(run_file.replace("organization/nemo-gke/a3high-small", "b"))
    (tmp_path / "Pulumi.b.yaml").write_text(run_file.replace("organization/nemo-gke/a3high-small", "a"))
    err = _refused_render(tmp_path / "Pulumi.a.yaml", capsys)
    assert "makes a cycle of stacks (a → b → a)" in err
    # The program refuses it too, where the engine reads the reference (no render runs it first).
    values = stack_with("run-llama8b", upstreamStack="run-llama8b")
    upstream = {"organization/nemo-gke/run-llama8b": run_stack("a3high-small").exports}
    error = rejected(values, "run-llama8b", upstream=upstream)
    assert [i.key for i in error.issues] == ["upstreamStack"]


def test_a_value_no_member_of_a_union_takes_is_one_line_naming_its_key() -> None:
    """A nested mapping under `overrides` ended in "unhashable type: 'dict'" (exit 1, no key); a
    value of the wrong kind had one line per type pydantic tried."""
    values = stack_with("existing")
    values[f"{PROJECT}:training"]["runs"][0]["overrides"] = {"trainer": {"max_steps": 5}, "model.seq": [1]}
    error = rejected(values, "existing")
    assert {i.key: i.message for i in error.issues} == {
        "training.runs[0].overrides.trainer": "must be a string, an integer, a number, true or false, not a mapping: "
        "write a nested setting as one dotted key (a.b.c: value)",
        "training.runs[0].overrides.model.seq": "must be a string, an integer, a number, true or false, not a list",
    }


def test_a_gpu_pool_named_like_the_system_pool_is_refused() -> None:
    """It rendered with no word, and `up` cannot create two GKE node pools of one name."""
    values = stack_with("a4")
    pools = copy.deepcopy(values[f"{PROJECT}:gpuPools"])
    pools[0]["name"] = "system"
    values[f"{PROJECT}:gpuPools"] = pools
    assert "the cluster's CPU pool" in issue_for(rejected(values, "a4"), "gpuPools[0].name")


def test_an_inline_kubeconfig_whose_server_is_not_a_url_is_refused_by_key() -> None:
    """It rendered with no word; `up` would then fail in the provider."""
    config = copy.deepcopy(KUBECONFIG)
    config["clusters"][0]["cluster"]["server"] = "203.0.113.9:443"
    config["users"][0]["user"] = {"exec": {"command": "gke-gcloud-auth-plugin", "apiVersion": "x"}}
    assert lines(existing_cluster(kubeconfig=json.dumps(config), kubeconfigPath=None), "existing") == [
        "nemo-gke:existingCluster.kubeconfig: context 'team-a3ultra': its cluster's server '203.0.113.9:443' is not "
        "an https:// URL"
    ]


@pytest.mark.parametrize(("model", "path"), [("llama3-8b", "train.train_iters"), ("llama3.1-8b", "trainer.max_steps")])
def test_an_override_contradicting_a_key_is_refused_by_key(model: str, path: str) -> None:
    values = stack_with("existing")
    values[f"{PROJECT}:training"]["runs"][0].update(model=model, overrides={path: 999})
    why = issue_for(rejected(values, "existing"), f"training.runs[0].overrides.{path}")
    assert "set steps instead" in why


def test_a_path_set_without_path_is_told_to_use_path() -> None:
    """`pulumi config set nemo-gke:cluster.name foo` (no --path) stores one dotted key; the message
    was spliced from the stack-name template and the unknown-key one."""
    values = {**stack_with("dev"), f"{PROJECT}:cluster.name": "foo"}
    (issue,) = rejected(values).issues
    assert issue.key == "cluster.name"
    assert "pulumi config set --path 'nemo-gke:cluster.name' <value>" in issue.message
    assert "stack name" not in issue.message


def test_an_encrypted_value_the_render_must_check_is_refused_saying_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It was refused as if the user had written "[secret]"."""
    text = (Path(__file__).parents[2] / "Pulumi.dev.yaml").read_text()
    file = tmp_path / "Pulumi.dev.yaml"
    file.write_text(text.replace("  nemo-gke:project: your-gcp-project", "  nemo-gke:project:\n    secure: v1:abc", 1))
    err = _refused_render(file, capsys)
    assert 'nemo-gke:project = "[secret]": is encrypted, and this run cannot decrypt it' in err
    assert "`pulumi preview` and `pulumi up` decrypt and check it" in err


def test_a_referenced_stack_without_a_file_is_named_by_its_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The render runs a referenced stack from its file first; a missing one named no key."""
    run_file = (Path(__file__).parents[2] / "examples" / "Pulumi.run-llama8b.yaml").read_text()
    file = tmp_path / "Pulumi.run-x.yaml"
    file.write_text(run_file.replace("organization/nemo-gke/a3high-small", "nowhere"))
    err = _refused_render(file, capsys)
    assert 'nemo-gke:upstreamStack = "nowhere": names stack nowhere, and the render finds no Pulumi.nowhere.yaml' in err


@pytest.mark.parametrize(
    ("written", "shown"),
    [("99999999999999999999", "100000000000000000000"), ("123456789012345678901234567890", "1.2345678901234568e+29")],
)
def test_a_number_beyond_64_bits_is_refused_as_out_of_range_saying_why_it_shows_rounded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], written: str, shown: str
) -> None:
    """The CLI holds it as a float: it was refused as "not a valid integer", shown in digits the
    user never wrote."""
    text = (Path(__file__).parents[2] / "Pulumi.dev.yaml").read_text()
    file = tmp_path / "Pulumi.dev.yaml"
    file.write_text(text.replace("      nodeCount: 2", f"      nodeCount: {written}", 1))
    err = _refused_render(file, capsys)
    assert f"nemo-gke:gpuPools[0].nodeCount = {shown}: is far out of range (from 0 to 1000)" in err
    assert "reaches the program rounded" in err and "valid integer" not in err


def test_a_virtual_pipeline_that_cannot_split_the_layers_blames_the_key_the_user_wrote() -> None:
    """`virtualPipeline: 3` alone on the A4 70B run (PP8 from the recipe) blamed pipelineParallel,
    which the user never wrote."""
    values = stack_with("a4")
    values[f"{PROJECT}:training"]["runs"][0]["virtualPipeline"] = 3
    message = issue_for(rejected(values, "a4"), "training.runs[0].virtualPipeline")
    assert "pipeline × virtual stages (24) must divide the 80 layers of llama3-70b" in message
