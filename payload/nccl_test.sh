#!/bin/bash
# One node of a fabric check. Every pod serves ssh on port 222; node 0 waits for all of them,
# runs each collective of nccl-tests across every GPU with mpirun, and writes its output to
# NCCL_TEST_DIR/<collective>.log; the other nodes wait for node 0 to finish. The environment
# the JobSet sets:
#   JOBSET_NAME NNODES GPUS_PER_NODE JOB_COMPLETION_INDEX
#   NCCL_TEST_DIR          where the logs and the final status go (shared volume)
#   NCCL_TEST_COLLECTIVES  e.g. "all_gather all_reduce"
#   NCCL_TEST_BEGIN, NCCL_TEST_END   message sizes (nccl-tests -b / -e)
#   NCCL_TEST_SSHD         starts the image's ssh server
#   NCCL_TEST_RANK         what each MPI rank runs, {bench} standing for <collective>_perf
#   NCCL_TEST_MIN_BUSBW_<collective>  the pass mark, GB/s: nccl-tests fails below 90 % of it
#   NCCL_INIT_SCRIPT       sourced when set: the GPUDirect plugin's NCCL environment
#   NCCL_KEEP_AFTER_INIT   names of variables whose values here win over what that script sets
#   NCCL_TEST_TIMEOUT_S    how long a node waits for the others
set -euo pipefail

node="${JOB_COMPLETION_INDEX}"
status_file="${NCCL_TEST_DIR}/status"
deadline=$((SECONDS + ${NCCL_TEST_TIMEOUT_S:-3600}))
mkdir -p "${NCCL_TEST_DIR}"
eval "${NCCL_TEST_SSHD}"

if [ "${node}" != 0 ]; then
  until [ -s "${status_file}" ]; do
    [ "${SECONDS}" -lt "${deadline}" ] || { echo "node 0 never finished" >&2; exit 1; }
    sleep 5
  done
  exit 0
fi

rm -f "${status_file}"
status=1
trap 'echo "${status}" > "${status_file}"' EXIT  # releases the other nodes, whatever happens

hostfile="$(mktemp)"
for i in $(seq 0 $((NNODES - 1))); do
  host="${JOBSET_NAME}-workers-0-${i}.${JOBSET_NAME}"
  until ssh -p 222 -o StrictHostKeyChecking=no -o ConnectTimeout=5 "${host}" true; do
    [ "${SECONDS}" -lt "${deadline}" ] || { echo "${host} never answered on port 222" >&2; exit 1; }
    sleep 5
  done
  echo "${host} port=222 slots=${GPUS_PER_NODE}" >> "${hostfile}"
done

# shellcheck source=nccl_init.sh
source "$(dirname "$0")/nccl_init.sh"
forward=(-x LD_LIBRARY_PATH -x PATH)
for variable in $(compgen -e | grep '^NCCL_' || true); do
  forward+=(-x "${variable}")
done

status=0
for collective in ${NCCL_TEST_COLLECTIVES}; do
  read -r -a rank <<< "${NCCL_TEST_RANK//\{bench\}/${collective}_perf}"
  pass_mark="NCCL_TEST_MIN_BUSBW_${collective}"
  min_bw=()
  if [ -n "${!pass_mark:-}" ]; then
    min_bw=(-x "NCCL_TESTS_MIN_BW=${!pass_mark}")
  fi
  echo "node 0: ${collective} on ${NNODES} nodes x ${GPUS_PER_NODE} GPUs"
  mpirun --allow-run-as-root --mca btl tcp,self --mca btl_tcp_if_include eth0 \
    -np $((NNODES * GPUS_PER_NODE)) --hostfile "${hostfile}" "${forward[@]}" "${min_bw[@]}" \
    "${rank[@]}" -b "${NCCL_TEST_BEGIN}" -e "${NCCL_TEST_END}" -f 2 -g 1 -w 5 --iters 100 -c 1 \
    2>&1 | tee "${NCCL_TEST_DIR}/${collective}.log" || status=1
done
exit "${status}"
