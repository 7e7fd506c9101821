"""scripts/launch.sh, executed from the files of a run's ConfigMap laid out as the pod sees
them: torchrun's command line, the NCCL init script and plugin, the dataset copy, Nsight, the
dllogger module, and the goodput events and metrics the analytics read."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest

import payload
from analysis.logs import STEP_TIME, LogFormat, StepRange, read_log
from facts.kubernetes import PROGRAM_ERROR_EXIT_CODE
from facts.models import model_spec
from planners import nemo, workload
from planners.runs import Resiliency, RunSpec, Tokenizer
from planners.runtimes import bridge

# Stand-in torchrun: records its arguments, one variable and the dllogger module Python finds,
# saves a checkpoint at step 150.
TORCHRUN = """#!/bin/bash
printf '%s\\n' "$@" > "$RECORD/torchrun.args"
echo "${FROM_NCCL_INIT:-unset}" > "$RECORD/nccl-init"
python3 -c 'import dllogger; print(dllogger.__file__)' > "$RECORD/dllogger"
mkdir -p "$CHECKPOINT_DIR/megatron_gpt--step=150-consumed_samples=300.0"
sleep 0.2
exit "${TORCHRUN_EXIT:-0}"
"""
# Stand-in nsys: records its arguments, then runs the wrapped command.
NSYS = """#!/bin/bash
printf '%s\\n' "$@" > "$RECORD/nsys.args"
while [ "$1" != torchrun ]; do shift; done
exec "$@"
"""


# Stand-in ldconfig: records the directories it was given.
LDCONFIG = """#!/bin/bash
printf '%s\\n' "$@" >> "$RECORD/ldconfig.args"
"""


@pytest.fixture
def workspace(tmp_path: Path) -> dict[str, str]:
    bin_dir, record, mounted = tmp_path / "bin", tmp_path / "record", tmp_path / "workload"
    bin_dir.mkdir()
    record.mkdir()
    for name in (workload.LAUNCHER, workload.NCCL_INIT, workload.DLLOGGER):  # the ConfigMap's items, as mounted
        target = mounted / workload.file_path(name)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text((payload.DIR / name).read_text())
    for name, body in (("torchrun", TORCHRUN), ("nsys", NSYS), ("ldconfig", LDCONFIG)):
        (bin_dir / name).write_text(body)
        (bin_dir / name).chmod(0o755)
    checkpoints = tmp_path / "checkpoints" / "run"
    (checkpoints / "megatron_gpt--step=100-consumed_samples=200.0").mkdir(parents=True)
    init = tmp_path / "nccl-env.sh"
    init.write_text("export FROM_NCCL_INIT=sourced\n")
    return {
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "LAUNCHER": str(mounted / workload.LAUNCHER),
        "RECORD": str(record),
        "RUN_NAME": "run",
        "NNODES": "2",
        "GPUS_PER_NODE": "8",
        "JOB_COMPLETION_INDEX": "0",
        "MASTER_ADDR": "run-workers-0-0.run",
        "MASTER_PORT": "6002",
        "NEMO_ENTRYPOINT": "/opt/NeMo/examples/nlp/language_modeling/megatron_gpt_pretraining.py",
        "EXPERIMENT_DIR": str(tmp_path / "nfs" / "run"),
        "CHECKPOINT_DIR": str(checkpoints),
        "NCCL_INIT_SCRIPT": str(init),
    }


def launch(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", env["LAUNCHER"], *args], env=env, capture_output=True, text=True, check=False, timeout=60
    )


def events(env: dict[str, str]) -> list[dict[str, object]]:
    path = Path(env["EXPERIMENT_DIR"]) / "goodput" / "events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_node_0_runs_torchrun_and_records_goodput_events(workspace: dict[str, str]) -> None:
    result = launch(workspace, "--config-path=/workload", "--config-name=nemo-config.yaml")
    assert result.returncode == 0, result.stderr
    args = (Path(workspace["RECORD"]) / "torchrun.args").read_text().split()
    assert args == [
        "--nproc-per-node=8", "--nnodes=2", "--node-rank=0", "--master-addr=run-workers-0-0.run", "--master-port=6002",
        workspace["NEMO_ENTRYPOINT"], "--config-path=/workload", "--config-name=nemo-config.yaml",
    ]  # fmt: skip
    assert (Path(workspace["RECORD"]) / "nccl-init").read_text().strip() == "sourced"
    recorded = events(workspace)
    assert [(e["event"], e.get("step")) for e in recorded] == [
        ("job_started", None),
        ("checkpoint_loaded", 100),
        ("checkpoint_saved", 150),
        ("job_terminated", None),
    ]
    for event in recorded:
        assert event["run"] == "run" and event["attempt"] == 0
        assert datetime.fromisoformat(str(event["time"])).utcoffset() is not None
    assert "node 0/2" in (Path(workspace["EXPERIMENT_DIR"]) / "logs" / "node-0.log").read_text()


def test_other_nodes_write_no_events(workspace: dict[str, str]) -> None:
    workspace["JOB_COMPLETION_INDEX"] = "1"
    assert launch(workspace).returncode == 0
    assert not (Path(workspace["EXPERIMENT_DIR"]) / "goodput" / "events.jsonl").exists()
    assert "--node-rank=1" in (Path(workspace["RECORD"]) / "torchrun.args").read_text()


def test_a_failed_run_keeps_its_exit_code_and_still_records_its_end(workspace: dict[str, str]) -> None:
    workspace["TORCHRUN_EXIT"] = "3"
    assert launch(workspace).returncode == 3
    assert events(workspace)[-1]["event"] == "job_terminated"


def test_a_fresh_run_starts_from_step_0(workspace: dict[str, str], tmp_path: Path) -> None:
    workspace["CHECKPOINT_DIR"] = str(tmp_path / "empty")
    assert launch(workspace).returncode == 0
    assert [(e["event"], e.get("step")) for e in events(workspace)][1] == ("checkpoint_loaded", 0)


def test_nsight_wraps_torchrun_and_the_dataset_is_copied_to_local_ssd(
    workspace: dict[str, str], tmp_path: Path
) -> None:
    source = tmp_path / "data" / "wiki_text_document"
    source.parent.mkdir()
    for ext in ("bin", "idx"):
        Path(f"{source}.{ext}").write_text(ext)
    target = tmp_path / "ssd" / "data" / "wiki_text_document"
    workspace.update(NSYS_START_STEP="10", DATASET_SOURCE=str(source), DATASET_TARGET=str(target))
    assert launch(workspace).returncode == 0, "launch failed"
    nsys = (Path(workspace["RECORD"]) / "nsys.args").read_text().split()
    assert nsys[:2] == ["profile", "--sample=none"] and "--capture-range=cudaProfilerApi" in nsys
    assert f"--output={workspace['EXPERIMENT_DIR']}/nsys/node-0" in nsys
    assert Path(f"{target}.idx").read_text() == "idx"


def test_the_analytics_read_the_events_the_pods_write(workspace: dict[str, str]) -> None:
    assert launch(workspace).returncode == 0
    events_file = Path(workspace["EXPERIMENT_DIR"]) / "goodput" / "events.jsonl"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "analysis",
            "goodput",
            "--events",
            str(events_file),
            # Far below the fake run's runtime, so goodput stays under 100 %.
            "--reference-step-time",
            "0.000001",
            "--json",
        ],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["effective_time_s"] == pytest.approx(50e-6)  # steps 100 → 150 at 1 µs per step
    assert report["step_progress"] == 50 and 0 < report["goodput_percent"] <= 100


def test_the_nccl_plugin_directory_enters_the_linker_cache(workspace: dict[str, str]) -> None:
    """The public recipes' launchers run `ldconfig` on the NCCL plugin's directory
    (gpu-recipes src/launchers/nemo-10-launcher.sh and grl-nemo-20-launcher*.sh @2e1fd5e)."""
    assert launch(workspace).returncode == 0
    assert not (Path(workspace["RECORD"]) / "ldconfig.args").exists(), "no plugin, no ldconfig"
    workspace["NCCL_PLUGIN_PATH"] = "/usr/local/nccl-plugin/lib64:/usr/local/nvidia/lib64"
    assert launch(workspace).returncode == 0
    assert (Path(workspace["RECORD"]) / "ldconfig.args").read_text().split() == [
        "/usr/local/nccl-plugin/lib64",
        "/usr/local/nvidia/lib64",
    ]


def test_nemo_finds_the_shipped_dllogger_module(workspace: dict[str, str]) -> None:
    """Nothing is installed at start: Python in the training process imports the dllogger
    module shipped in the run's ConfigMap, even where the image has none."""
    assert launch(workspace).returncode == 0
    found = Path((Path(workspace["RECORD"]) / "dllogger").read_text().strip())
    assert found == Path(workspace["LAUNCHER"]).parent / workload.file_path(workload.DLLOGGER)


def test_the_dllogger_module_writes_what_the_analytics_read(tmp_path: Path) -> None:
    """NeMo's DLLogger (nemo/utils/loggers/dllogger.py) calls exactly `Verbosity`,
    `JSONStreamBackend(verbosity, file)`, `StdOutBackend(verbosity)`, `init(backends=)`,
    `log(step=, data=)` and `flush()`; the file it writes is the analytics' input. A restarted
    attempt appends to the same file."""
    metrics = tmp_path / "nfs" / "run" / "dllogger.json"
    metrics.parent.mkdir(parents=True)
    program = f"""
import dllogger
from dllogger import Verbosity
for attempt, steps in ((0, range(0, 12)), (1, range(10, 20))):
    dllogger.init(backends=[
        dllogger.JSONStreamBackend(Verbosity.VERBOSE, {str(metrics)!r}),
        dllogger.StdOutBackend(Verbosity.VERBOSE),
    ])
    dllogger.log(step="PARAMETER", data={{"global_batch_size": 8, "encoder_seq_length": 1024}})
    for step in steps:
        dllogger.log(step=step, data={{"train_step_timing in s": 2.0 + attempt, "reduced_train_loss": 5.0}})
    dllogger.flush()
"""
    shipped = subprocess.run(
        [sys.executable, "-c", program],
        env={**os.environ, "PYTHONPATH": str(payload.DIR)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert shipped.returncode == 0, shipped.stderr
    assert shipped.stdout.startswith("DLLL {")
    log = read_log(metrics, StepRange(5, 19))
    assert log.format is LogFormat.DLLOGGER
    assert log.parameters == {"global_batch_size": 8, "encoder_seq_length": 1024}
    assert log.repeated_steps == (10, 11)
    times = [log.records[step][STEP_TIME] for step in range(5, 20)]
    assert times == [2.0] * 5 + [3.0] * 10, "the restarted attempt's records win"


# Stand-in resiliency launcher (a Python script, as in the recipe's image): records its arguments.
RESILIENCY_LAUNCHER = """import os, sys
open(os.path.join(os.environ["RECORD"], "launcher.args"), "w").write("\\n".join(sys.argv[1:]) + "\\n")
open(os.path.join(os.environ["RECORD"], "node-rank"), "w").write(os.environ.get("NODE_RANK", "unset"))
"""


def test_fault_tolerant_runs_start_under_ft_launcher_with_their_heartbeats(workspace: dict[str, str]) -> None:
    """nvidia-resiliency-ext's ft_launcher takes torchrun's arguments and the --ft-param-* ones
    (fault_tolerance/launcher.py, 0.4.1); --max-restarts are its in-job restarts."""
    bin_dir = Path(workspace["PATH"].split(":")[0])
    (bin_dir / "ft_launcher").write_text(TORCHRUN)
    (bin_dir / "ft_launcher").chmod(0o755)
    workspace.update(
        RUN_LAUNCHER="ft",
        FT_PARAM_INITIAL_RANK_HEARTBEAT_TIMEOUT="720",
        FT_PARAM_RANK_HEARTBEAT_TIMEOUT="300",
        MAX_IN_JOB_RESTARTS="2",
        JOBSET_NAME="run-abc123",
    )
    result = launch(workspace, "--yes")
    assert result.returncode == 0, result.stderr
    args = (Path(workspace["RECORD"]) / "torchrun.args").read_text().split()
    assert args[:3] == [
        "--ft-param-initial_rank_heartbeat_timeout=720",
        "--ft-param-rank_heartbeat_timeout=300",
        "--max-restarts=2",
    ]
    # It rendezvouses through c10d at an endpoint only (launcher.py: --master-addr is ignored).
    for flag in ("--rdzv-backend=c10d", "--rdzv-endpoint=run-workers-0-0.run:6002", "--rdzv-id=run-abc123"):
        assert flag in args, flag
    assert "--nnodes=2" in args and args[-2:] == [workspace["NEMO_ENTRYPOINT"], "--yes"]


def test_supervised_runs_start_under_the_recipe_s_launcher_with_their_own_names(
    workspace: dict[str, str], tmp_path: Path
) -> None:
    """The recipe's launcher flags (gpu-recipes src/launchers/grl-nemo-20-launcher-a3u.sh@25dac48),
    with this program's JobSet, replicated job and container names, and workload scaling off."""
    launcher = tmp_path / "launcher.py"
    launcher.write_text(RESILIENCY_LAUNCHER)
    workspace.update(
        {**nemo_env(), "RESILIENCY_LAUNCHER": str(launcher)},
        JOBSET_NAME="run-abc123",
    )
    result = launch(workspace, "--yes")
    assert result.returncode == 0, result.stderr
    args = (Path(workspace["RECORD"]) / "launcher.args").read_text().split()
    for flag in (
        "--use-supervisor",
        "--host-daemon-port=60010",
        "--max-workload-restarts=0",
        "--max-restarts=0",
        "--num-nodes-per-dp=2",
        "--min-num-dp-replicas=1",
        "--max-num-dp-replicas=1",
        "--workload-name=run-abc123",
        "--rdzv-id=run-abc123",
        "--job-name=workers",
        "--container-name=nemo",
        "--container-termination-threshold-s=60",
        "--workload-downtime-threshold-s=180",
    ):
        assert flag in args, flag
    assert args[-2:] == [workspace["NEMO_ENTRYPOINT"], "--yes"]
    assert (Path(workspace["RECORD"]) / "node-rank").read_text() == "0"


def nemo_env() -> dict[str, str]:
    """The launcher variables the platform sets for a supervised run."""
    run = RunSpec(
        name="run",
        model="llama3.1-8b",
        pool="p",
        nodes=2,
        settings=model_spec("llama3.1-8b").recipe.settings(),
        tokenizer=Tokenizer("megatron", "GPT2BPETokenizer"),
        priority="nemo-medium",
        resiliency=Resiliency(supervisor=True),
    )
    return nemo.resiliency_env(run)


def test_an_unknown_launcher_is_refused(workspace: dict[str, str]) -> None:
    workspace["RUN_LAUNCHER"] = "mpirun"
    result = launch(workspace)
    assert result.returncode == 2 and "expected torchrun, ft or supervisor" in result.stdout


def test_the_platforms_nccl_settings_win_over_the_init_script(workspace: dict[str, str], tmp_path: Path) -> None:
    """The RDMA recipes export NCCL_SOCKET_IFNAME and the tuner configuration after sourcing gIB's
    set_nccl_env.sh (gpu-recipes training/a4/llama3_70b/nemo-gke/nemo2602/64gpus-fp8mx-gbs256/
    recipe/templates/workload-job.yaml@2e1fd5e): what NCCL_KEEP_AFTER_INIT names keeps its value,
    and what the script sets alone stays the script's."""
    (tmp_path / "nccl-env.sh").write_text(
        "export FROM_NCCL_INIT=sourced NCCL_SOCKET_IFNAME=eth0 NCCL_P2P_NET_CHUNKSIZE=131072 NCCL_NET=gIB\n"
    )
    seen = tmp_path / "bin" / "torchrun"
    seen.write_text(
        "#!/bin/bash\n"
        'echo "$NCCL_SOCKET_IFNAME $NCCL_P2P_NET_CHUNKSIZE $NCCL_NET ${NCCL_TUNER_CONFIG_PATH:-none}" '
        '> "$RECORD/nccl"\n'
    )
    workspace.update(
        NCCL_SOCKET_IFNAME="eth0,eth1",
        NCCL_P2P_NET_CHUNKSIZE="2097152",
        NCCL_KEEP_AFTER_INIT="NCCL_P2P_NET_CHUNKSIZE NCCL_SOCKET_IFNAME NCCL_TUNER_CONFIG_PATH",
    )
    assert launch(workspace).returncode == 0
    assert (Path(workspace["RECORD"]) / "nccl").read_text().split() == ["eth0,eth1", "2097152", "gIB", "none"]


def test_each_worker_is_bound_to_its_gpus_numa_node(workspace: dict[str, str], tmp_path: Path) -> None:
    """gpu-recipes' A3 Ultra and A4 launchers run each rank under `numactl --cpunodebind=$((LOCAL_RANK/4))
    --membind=$((LOCAL_RANK/4))` (training/a4/llama3_70b/nemo-gke/nemo2602/64gpus-fp8mx-gbs256/recipe/
    launcher.sh@2e1fd5e): torchrun starts a worker script that does so, with the entry point after it."""
    numactl = tmp_path / "bin" / "numactl"
    numactl.write_text('#!/bin/bash\nprintf \'%s\\n\' "$@" > "$RECORD/numactl.args"\n')
    numactl.chmod(0o755)
    workspace["GPUS_PER_NUMA_NODE"] = "4"
    assert launch(workspace, "--yes").returncode == 0
    args = (Path(workspace["RECORD"]) / "torchrun.args").read_text().split("\n")
    at = args.index("--no-python")
    assert args[at + 1] == "bash" and args[at + 3 :][:2] == [workspace["NEMO_ENTRYPOINT"], "--yes"]
    worker = args[at + 2]
    env = {**workspace, "LOCAL_RANK": "5"}
    subprocess.run(["bash", worker, "entry.py", "--yes"], env=env, check=True, timeout=30)
    assert (Path(workspace["RECORD"]) / "numactl.args").read_text().split() == [
        "--cpunodebind=1", "--membind=1", "python", "entry.py", "--yes",
    ]  # fmt: skip


def test_without_numactl_the_workers_run_unbound(workspace: dict[str, str]) -> None:
    workspace["GPUS_PER_NUMA_NODE"] = "4"
    workspace["PATH"] = workspace["PATH"].replace(os.environ["PATH"], "/usr/bin:/bin")
    done = launch(workspace)
    assert done.returncode == 0 and "no numactl" in done.stdout
    assert "--no-python" not in (Path(workspace["RECORD"]) / "torchrun.args").read_text().split()


def test_megatron_bridge_folders_without_its_tracker_count_as_no_checkpoint(
    workspace: dict[str, str], tmp_path: Path
) -> None:
    """Megatron-Bridge names checkpoints `iter_<7 digits>` and loads one only through its tracker
    file (training/utils/checkpoint_utils.py): folders without it are saves that never finished, so
    the run starts from step 0 and the events say so."""
    checkpoints = Path(workspace["CHECKPOINT_DIR"])
    for old in checkpoints.iterdir():
        old.rmdir()
    (checkpoints / "iter_0000100").mkdir()
    (checkpoints / "latest_checkpointed_iteration.txt").write_text("")  # being rewritten
    torchrun = tmp_path / "bin" / "torchrun"
    torchrun.write_text('#!/bin/bash\nmkdir -p "$CHECKPOINT_DIR/iter_0000150"\n')
    assert launch(workspace).returncode == 0
    assert [(e["event"], e.get("step")) for e in events(workspace)] == [
        ("job_started", None),
        ("checkpoint_loaded", 0),
        ("job_terminated", None),
    ]


def test_fault_tolerant_workers_are_bound_to_their_numa_node_too(workspace: dict[str, str], tmp_path: Path) -> None:
    """ft_launcher takes torchrun's arguments, --no-python included (nvidia-resiliency-ext)."""
    numactl = tmp_path / "bin" / "numactl"
    numactl.write_text("#!/bin/bash\n")
    numactl.chmod(0o755)
    ft = tmp_path / "bin" / "ft_launcher"
    ft.write_text('#!/bin/bash\nprintf \'%s\\n\' "$@" > "$RECORD/ft.args"\n')
    ft.chmod(0o755)
    workspace.update(GPUS_PER_NUMA_NODE="4", RUN_LAUNCHER="ft", JOBSET_NAME="run-abc")
    assert launch(workspace).returncode == 0
    args = (Path(workspace["RECORD"]) / "ft.args").read_text().split("\n")
    assert args[args.index("--no-python") + 1] == "bash"


# Stand-in entry point: records its arguments, exits with CHECK_EXIT.
ENTRYPOINT = """import os, sys
with open(os.path.join(os.environ["RECORD"], "check.args"), "a") as record:
    record.write(" ".join(sys.argv[1:]) + "\\n")
sys.exit(int(os.environ.get("CHECK_EXIT", "0")))
"""


@pytest.mark.parametrize(
    ("check_exit", "node", "attempt", "expected", "checked"),
    [
        ("78", "0", "0", PROGRAM_ERROR_EXIT_CODE, True),  # refused: the run fails
        ("1", "0", "0", 1, True),  # the check failed for another reason: the run restarts
        ("0", "0", "0", 0, True),  # valid: on to torchrun
        ("78", "0", "1", 0, False),  # a restart: checked before
        ("78", "1", "0", 0, False),  # node 1: node 0 checks
    ],
)
def test_node_0_checks_the_configuration_first_on_the_first_attempt(
    workspace: dict[str, str], tmp_path: Path, check_exit: str, node: str, attempt: str, expected: int, checked: bool
) -> None:
    """A configuration the library refuses (the entry point's check exits PROGRAM_ERROR_EXIT_CODE)
    ends the pod with that code before torchrun starts, and the JobSet then fails instead of
    restarting (components.training); a check that fails otherwise ends it with its own code, so the
    run restarts; a valid one goes on to torchrun. Node 0 checks, on the first attempt only."""
    entry = tmp_path / "entry.py"
    entry.write_text(ENTRYPOINT)
    workspace.update(
        NEMO_ENTRYPOINT=str(entry), NEMO_PREFLIGHT=bridge.PREFLIGHT_FLAG, CHECK_EXIT=check_exit,
        JOBSET_RESTART_ATTEMPT=attempt, JOB_COMPLETION_INDEX=node,
    )  # fmt: skip
    result = launch(workspace)
    assert result.returncode == expected, result.stderr
    record = Path(workspace["RECORD"])
    assert (record / "check.args").exists() is checked
    if checked:
        assert (record / "check.args").read_text().splitlines() == [bridge.PREFLIGHT_FLAG]
    assert (record / "torchrun.args").exists() is (expected == 0)
    if node == "0":
        assert events(workspace)[-1]["event"] == "job_terminated"


def test_the_exit_code_survives_a_failure_to_record_the_end(workspace: dict[str, str], tmp_path: Path) -> None:
    """The EXIT trap records the end; a failure there (the events file gone bad meanwhile) must not
    turn a program error's 78 into 1, which would restart the run."""
    entry = tmp_path / "entry.py"
    entry.write_text(
        "import os, sys\n"
        "events = os.path.join(os.environ['EXPERIMENT_DIR'], 'goodput', 'events.jsonl')\n"
        "os.remove(events)\n"
        "os.mkdir(events)\n"  # appending to it now fails
        "sys.exit(78)\n"
    )
    workspace.update(NEMO_ENTRYPOINT=str(entry), NEMO_PREFLIGHT=bridge.PREFLIGHT_FLAG)
    assert launch(workspace).returncode == PROGRAM_ERROR_EXIT_CODE


def test_a_restart_counts_the_newest_complete_bridge_checkpoint(workspace: dict[str, str], tmp_path: Path) -> None:
    """Megatron-Bridge creates `iter_N` when a save begins and writes the step to
    latest_checkpointed_iteration.txt once it has finished (training/checkpointing.py,
    save_checkpoint's finalize), which is the step it resumes from (its load reads the tracker): a
    save cut short by the failure is newer, but is not loaded, and the events say the step that is."""
    checkpoints = Path(workspace["CHECKPOINT_DIR"])
    for old in checkpoints.iterdir():
        old.rmdir()
    for step in (100, 200, 300):
        (checkpoints / f"iter_{step:07d}").mkdir()
    (checkpoints / "latest_checkpointed_iteration.txt").write_text("200")
    torchrun = tmp_path / "bin" / "torchrun"
    tracker = '"$CHECKPOINT_DIR/latest_checkpointed_iteration.txt"'
    torchrun.write_text(f'#!/bin/bash\nmkdir -p "$CHECKPOINT_DIR/iter_0000400"\necho 400 > {tracker}\n')
    assert launch(workspace).returncode == 0
    assert [(e["event"], e.get("step")) for e in events(workspace)][1:3] == [
        ("checkpoint_loaded", 200),
        ("checkpoint_saved", 400),
    ]


def test_a_restart_skips_a_nemo_checkpoint_marked_unfinished(workspace: dict[str, str], tmp_path: Path) -> None:
    """NeMo marks a checkpoint being saved with a `<checkpoint>-unfinished` file and removes it once
    the save is complete; resuming skips marked ones (nemo/utils/callbacks/nemo_model_checkpoint.py,
    UNFINISHED_CHECKPOINT_SUFFIX): a partial step=200 counts neither as loaded nor as saved."""
    checkpoints = Path(workspace["CHECKPOINT_DIR"])
    partial = checkpoints / "megatron_gpt--step=200-consumed_samples=400.0"
    partial.mkdir()
    Path(f"{partial}-unfinished").write_text("")
    torchrun = tmp_path / "bin" / "torchrun"
    torchrun.write_text("#!/bin/bash\n")
    assert launch(workspace).returncode == 0
    assert [(e["event"], e.get("step")) for e in events(workspace)] == [
        ("job_started", None),
        ("checkpoint_loaded", 100),
        ("job_terminated", None),
    ]
