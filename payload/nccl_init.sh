# Sourced by launch.sh and nccl_test.sh: sources the GPUDirect stack's NCCL init script
# ($NCCL_INIT_SCRIPT, when set), then gives back their values to the variables named in
# $NCCL_KEEP_AFTER_INIT, so what the platform sets wins over the script, as the public recipes
# export their own settings after sourcing it.
if [ -n "${NCCL_INIT_SCRIPT:-}" ]; then
  declare -A kept=()
  for name in ${NCCL_KEEP_AFTER_INIT:-}; do
    [ -n "${!name+set}" ] && kept["${name}"]="${!name}"
  done
  # shellcheck disable=SC1090
  source "${NCCL_INIT_SCRIPT}"
  for name in "${!kept[@]}"; do
    export "${name}=${kept[${name}]}"
  done
fi
