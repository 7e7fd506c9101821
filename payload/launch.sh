#!/bin/bash
# Starts one node of a NeMo pretraining run under torchrun; the arguments are passed to the
# NeMo entry point. Everything else comes from the environment the JobSet sets:
#   RUN_NAME NNODES GPUS_PER_NODE JOB_COMPLETION_INDEX MASTER_ADDR MASTER_PORT NEMO_ENTRYPOINT
#   EXPERIMENT_DIR      logs, DLLogger metrics and goodput events (shared volume)
#   CHECKPOINT_DIR      checkpoints (empty: none)
#   NCCL_INIT_SCRIPT    sourced when set: the GPUDirect plugin's NCCL environment
#   NCCL_KEEP_AFTER_INIT  names of variables whose values here win over what that script sets
#   NCCL_PLUGIN_PATH    the NCCL network plugin's library directories (a:b), added to the linker cache
#   DATASET_SOURCE, DATASET_TARGET                    copy the dataset to local SSD when set
#   NSYS_START_STEP     wrap the run in Nsight Systems when set
#   NEMO_PREFLIGHT      the entry point's flag that only builds and validates the configuration:
#                       run by node 0 first, on the first attempt, when set
#   GPUS_PER_NUMA_NODE  bind each torchrun worker to its GPU's NUMA node (CPUs and memory) with
#                       numactl, as the machine's recipes do, where the image has numactl
#   RUN_LAUNCHER        torchrun (unset), ft (ft_launcher, the nvidia-resiliency-ext entry point in
#                       the NeMo images: rank heartbeats, in-job restarts)
#                       or supervisor (the resiliency recipe's launcher, reporting to the host
#                       daemon): FT_PARAM_*_HEARTBEAT_TIMEOUT MAX_IN_JOB_RESTARTS, and for the
#                       supervisor RESILIENCY_LAUNCHER HOST_DAEMON_PORT MAX_WORKLOAD_RESTARTS
#                       CONTAINER_TERMINATION_THRESHOLD_S WORKLOAD_DOWNTIME_THRESHOLD_S
#                       REPLICATED_JOB_NAME WORKLOAD_CONTAINER_NAME JOBSET_NAME
# Nothing is downloaded: the dllogger module NeMo's DLLogger needs is shipped beside this script
# (python/dllogger.py).
set -euo pipefail

node="${JOB_COMPLETION_INDEX}"
events="${EXPERIMENT_DIR}/goodput/events.jsonl"
mkdir -p "${EXPERIMENT_DIR}/logs" "${EXPERIMENT_DIR}/goodput"
exec > >(tee -a "${EXPERIMENT_DIR}/logs/node-${node}.log") 2>&1

event() {  # event <type> [step]: one goodput record, written by node 0 only
  [ "${node}" = 0 ] || return 0
  local step=""
  [ -n "${2:-}" ] && step=", \"step\": $2"
  printf '{"time": "%s", "event": "%s", "run": "%s", "attempt": %s%s}\n' \
    "$(date -u +%Y-%m-%dT%H:%M:%S.%3N+00:00)" "$1" "${RUN_NAME}" "${JOBSET_RESTART_ATTEMPT:-0}" "${step}" >> "${events}"
}

latest_checkpoint_step() {  # the newest complete checkpoint's step, or nothing: the one a restart
  # resumes from. Megatron-Bridge writes it to latest_checkpointed_iteration.txt once a save has
  # finished, and loads nothing without it (training/checkpointing.py, save_checkpoint; utils/
  # checkpoint_utils.py); NeMo names checkpoints `...step=N...` and marks one being saved with a
  # `<checkpoint>-unfinished` file (utils/callbacks/nemo_model_checkpoint.py,
  # UNFINISHED_CHECKPOINT_SUFFIX).
  [ -n "${CHECKPOINT_DIR:-}" ] && [ -d "${CHECKPOINT_DIR}" ] || return 0
  local tracker="${CHECKPOINT_DIR}/latest_checkpointed_iteration.txt" step=""
  [ -f "${tracker}" ] && step="$(tr -dc '0-9' < "${tracker}")"
  if [ -n "${step}" ]; then
    echo "${step}"
    return 0
  fi
  find "${CHECKPOINT_DIR}" -maxdepth 2 -name '*step=*' ! -name '*-unfinished' 2>/dev/null \
    | while read -r checkpoint; do
        [ -e "${checkpoint%.ckpt}-unfinished" ] || echo "${checkpoint}"
      done \
    | sed -n 's/.*step=\([0-9][0-9]*\).*/\1/p' | sort -n | tail -n 1
}

loaded_step="$(latest_checkpoint_step)"
loaded_step="${loaded_step:-0}"  # a fresh run starts from step 0
event job_started
event checkpoint_loaded "${loaded_step}"

finish() {
  local status=$?
  set +e  # the exit code is the run's, whatever recording its end does

  local saved_step
  saved_step="$(latest_checkpoint_step)"
  if [ -n "${saved_step}" ] && [ "${saved_step}" != "${loaded_step}" ]; then
    event checkpoint_saved "${saved_step}"
  fi
  event job_terminated
  exit "${status}"
}
trap finish EXIT

workload_dir="$(dirname "$0")"
# shellcheck source=nccl_init.sh
source "${workload_dir}/nccl_init.sh"

if [ -n "${NCCL_PLUGIN_PATH:-}" ]; then
  # As the public recipes' launchers do, so the plugin's libraries resolve by name.
  IFS=: read -r -a plugin_dirs <<< "${NCCL_PLUGIN_PATH}"
  ldconfig "${plugin_dirs[@]}"
fi

export PYTHONPATH="${workload_dir}/python${PYTHONPATH:+:${PYTHONPATH}}"

# A configuration the library refuses fails the run at once instead of restarting it: the entry
# point's check exits 78 (sysexits.h EX_CONFIG), on which the Job and the JobSet fail
# (facts.kubernetes, PROGRAM_ERROR_EXIT_CODE); any other failure of the check exits as it did, and the
# run restarts. Node 0 checks, on the first attempt only: every node has the same configuration,
# and a restarted run's passed.
if [ -n "${NEMO_PREFLIGHT:-}" ] && [ "${JOBSET_RESTART_ATTEMPT:-0}" = 0 ] && [ "${node}" = 0 ]; then
  checked=0
  python3 "${NEMO_ENTRYPOINT}" "${NEMO_PREFLIGHT}" "$@" || checked=$?
  if [ "${checked}" = 78 ]; then
    echo "the run's configuration was refused: the run fails without a restart" >&2
    exit 78
  elif [ "${checked}" != 0 ]; then
    echo "the configuration check failed (exit ${checked}), not on the configuration: the run restarts" >&2
    exit "${checked}"
  fi
fi

if [ -n "${DATASET_SOURCE:-}" ]; then
  echo "copying ${DATASET_SOURCE}.{bin,idx} to ${DATASET_TARGET}"
  mkdir -p "$(dirname "${DATASET_TARGET}")"
  for ext in bin idx; do cp "${DATASET_SOURCE}.${ext}" "${DATASET_TARGET}.${ext}"; done
fi

heartbeats=(--ft-param-initial_rank_heartbeat_timeout="${FT_PARAM_INITIAL_RANK_HEARTBEAT_TIMEOUT:-}"
  --ft-param-rank_heartbeat_timeout="${FT_PARAM_RANK_HEARTBEAT_TIMEOUT:-}" --max-restarts="${MAX_IN_JOB_RESTARTS:-0}")
rendezvous=(--nproc-per-node="${GPUS_PER_NODE}" --nnodes="${NNODES}" --node-rank="${node}"
  --master-addr="${MASTER_ADDR}" --master-port="${MASTER_PORT}")
bind=()
if [ -n "${GPUS_PER_NUMA_NODE:-}" ]; then
  if command -v numactl > /dev/null; then
    worker="$(mktemp)"
    # LOCAL_RANK is torchrun's, per worker.
    cat > "${worker}" <<'WORKER'
numa=$((LOCAL_RANK / GPUS_PER_NUMA_NODE))
exec numactl --cpunodebind="${numa}" --membind="${numa}" python "$@"
WORKER
    bind=(--no-python bash "${worker}")
  else
    echo "GPUS_PER_NUMA_NODE is set but the image has no numactl: ranks are not bound to their NUMA node"
  fi
fi
case "${RUN_LAUNCHER:-torchrun}" in
  torchrun) launch=(torchrun "${rendezvous[@]}" "${bind[@]}") ;;
  # ft_launcher rendezvouses through c10d only, at --rdzv-endpoint (it ignores --master-addr).
  ft) launch=(ft_launcher "${heartbeats[@]}" "${rendezvous[@]}" --rdzv-backend=c10d
      --rdzv-endpoint="${MASTER_ADDR}:${MASTER_PORT}" --rdzv-id="${JOBSET_NAME}" "${bind[@]}") ;;
  supervisor)
    [ "${#bind[@]}" -gt 0 ] && echo "the resiliency launcher starts the workers itself: ranks are not bound to their NUMA node"
    # Newer resiliency launchers read the node's rank from NODE_RANK.
    export NODE_RANK="${node}"
    # Workload scaling off: one data-parallel group of all nodes, never fewer.
    launch=(python3 "${RESILIENCY_LAUNCHER}" --use-supervisor "${heartbeats[@]}" "${rendezvous[@]}"
      --rdzv-id="${JOBSET_NAME}" --host-daemon-port="${HOST_DAEMON_PORT}"
      --max-workload-restarts="${MAX_WORKLOAD_RESTARTS}"
      --num-nodes-per-dp="${NNODES}" --min-num-dp-replicas=1 --max-num-dp-replicas=1
      --container-termination-threshold-s="${CONTAINER_TERMINATION_THRESHOLD_S}"
      --workload-downtime-threshold-s="${WORKLOAD_DOWNTIME_THRESHOLD_S}"
      --workload-name="${JOBSET_NAME}" --job-name="${REPLICATED_JOB_NAME}"
      --container-name="${WORKLOAD_CONTAINER_NAME}") ;;
  *) echo "RUN_LAUNCHER=${RUN_LAUNCHER}: expected torchrun, ft or supervisor" >&2; exit 2 ;;
esac
launch+=("${NEMO_ENTRYPOINT}" "$@")
if [ -n "${NSYS_START_STEP:-}" ]; then
  mkdir -p "${EXPERIMENT_DIR}/nsys"
  launch=(nsys profile --sample=none --trace=nvtx,cuda --capture-range=cudaProfilerApi
    --capture-range-end=stop --output="${EXPERIMENT_DIR}/nsys/node-${node}" "${launch[@]}")
fi

echo "node ${node}/${NNODES}: ${launch[*]}"
"${launch[@]}"
