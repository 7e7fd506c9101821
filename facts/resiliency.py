"""The Google Cloud Resiliency supervisor and the run-side resiliency of the A3 Ultra Llama 3.1
405B resiliency recipe, as facts: what its chart deploys, the values its example sets, and what
a local checkpoint costs on a node's SSD.

Sources (AI-Hypercomputer/gpu-recipes@61b3f8a unless stated):
- SUPERVISOR_CHART: src/helm-charts/resiliency/supervisor-chart/templates/resilient-training.yaml
- RECIPE: training/a3ultra/llama31_405b/nemo-gke-resiliency/nemo2412/recipe/ (README.md,
  values-supervisor.yaml, values.yaml, ksa-setup.yaml)
- LAUNCHER: src/launchers/grl-nemo-20-launcher-a3u.sh
- AI-Hypercomputer/resiliency@ef69c85 supervisor/host_daemon.py (flags and their meaning)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# The recipe's CPU pool for the supervisor: "2 × e2-standard-8", "in the same zone as the A3
# Ultra node pool" (RECIPE README.md).
SUPERVISOR_POOL = "supervisor"
SUPERVISOR_MACHINE_TYPE = "e2-standard-8"
SUPERVISOR_NODES = 2
# How long the recipe saw its supervisor take (RECIPE README.md @2e1fd5e, "Deploy the Supervisor and the
# Host Monitor", installed with `helm install` and no --wait): the three Deployments ready at 4m36s,
# the host daemon on 16 GPU nodes ready at 8m1s.
OBSERVED_SERVICES_READY_SECONDS = 4 * 60 + 36
OBSERVED_HOST_DAEMON_READY_SECONDS = 8 * 60 + 1
# The services' await: three times what the recipe observed, a pool's slowest node and image pull
# included.
SERVICES_AWAIT_SECONDS = 3 * OBSERVED_SERVICES_READY_SECONDS
# The supervisor's service account; the chart hard-codes it in every pod.
SUPERVISOR_SERVICE_ACCOUNT = "supervisor-sa"


@dataclass(frozen=True)
class Service:
    """One of the supervisor's three services: a Deployment of one pod and its ClusterIP Service."""

    name: str
    port: int
    script: str

    @property
    def address_key(self) -> str:
        return f"{self.name.upper()}_ADDRESS"


# values-supervisor.yaml: ports and scripts (paths inside the image's working directory).
SERVICES = (
    Service("actuator", 60080, "resiliency/supervisor/actuator.py"),
    Service("sensor", 60081, "resiliency/supervisor/sensor.py"),
    Service("controller", 60082, "resiliency/supervisor/controller.py"),
)
HOST_DAEMON_SCRIPT = "resiliency/supervisor/host_daemon.py"
# The host daemon listens on each GPU node (hostNetwork) for the training launcher.
HOST_DAEMON_PORT = 60010
# The chart's host daemon container: privileged, with these capabilities, on the host network
# and PID namespace, on every GPU node (nodeSelector cloud.google.com/gke-gpu: "true").
HOST_DAEMON_CAPABILITIES = ("SYS_ADMIN", "SYS_PTRACE", "IPC_LOCK")
GKE_GPU_NODE_LABEL = "cloud.google.com/gke-gpu"
# GPU health watchdogs the host daemon may run (host_daemon.py --watchdogs choices).
Watchdog = Literal["ecc", "xid"]
WATCHDOGS: tuple[Watchdog, ...] = ("ecc", "xid")

# The recipe's supervisor settings (values-supervisor.yaml).
HEARTBEAT_POLLING_PERIOD_SECONDS = 15
HEARTBEAT_TIMEOUT_SECONDS = 30
WATCHDOG_INTERVAL_SECONDS = 10
WATCHDOG_NOTIFICATION_COOLDOWN_SECONDS = 10

# ksa-setup.yaml: what the supervisor may do, cluster-wide. The A3 Mega recipe's copy adds
# "update", which none of the supervisor's calls needs here; the program keeps the A3 Ultra set.
SUPERVISOR_RULES = (
    {
        "apiGroups": ["", "jobset.x-k8s.io"],
        "resources": ["pods", "nodes", "jobsets"],
        "verbs": ["get", "list", "watch", "create", "patch", "delete", "deletecollection"],
    },
)

# --------------------------------------------------------------------------- run side

# The resiliency launcher in the recipe's image: torchrun-compatible, plus NVRx fault tolerance
# and the supervisor (LAUNCHER; values.yaml configPath /workspace/resiliency/workload).
RESILIENCY_LAUNCHER = "/workspace/resiliency/launcher.py"
# values.yaml: FT_PARAM_INITIAL_RANK_HEARTBEAT_TIMEOUT and FT_PARAM_RANK_HEARTBEAT_TIMEOUT.
INITIAL_HEARTBEAT_TIMEOUT_SECONDS = 720
RANK_HEARTBEAT_TIMEOUT_SECONDS = 720
# values.yaml: CONTAINER_TERMINATION_THRESHOLD_S and WORKLOAD_DOWNTIME_THRESHOLD_S.
CONTAINER_TERMINATION_THRESHOLD_SECONDS = 60
WORKLOAD_DOWNTIME_THRESHOLD_SECONDS = 180
# values.yaml: the supervised training pods' /dev/shm (volumes.sharedMemorySize), their
# terminationGracePeriodSeconds (a replaced node's pods go at once) and the JobSet's maxRestarts
# (workload.max_workload_restarts, src/helm-charts/a3ultra/jobset/templates/workload-jobset.yaml),
# which every run that resumes from its checkpoints takes by default (planners.runs.max_restarts).
SUPERVISED_SHARED_MEMORY_GIB = 600
SUPERVISED_TERMINATION_GRACE_SECONDS = 3
RECIPE_MAX_RESTARTS = 20
# values.yaml defaultArguments: --local-ckpt-interval=5 (and --persistent-ckpt-interval=25, what
# examples/Pulumi.a3ultra.yaml sets; the README's prose says "every 20 steps").
LOCAL_CHECKPOINT_INTERVAL = 5

# Local checkpoints live on the node's ephemeral local SSD through a hostPath, as the recipe
# mounts it (values.yaml ssdMountPath, workload-jobset.yaml `local-ssd` volume): unlike an
# emptyDir they outlive the pod, so a run re-created on the same nodes finds them.
NODE_EPHEMERAL_SSD = "/mnt/stateful_partition/kube-ephemeral-ssd"
LOCAL_CHECKPOINT_MOUNT = "/local-checkpoints"

# What one node keeps of a local checkpoint. NeMo's update_trainer_local_checkpoint_io
# (NVIDIA/NeMo nemo/lightning/pytorch/local_ckpt.py@8cfedd7) stores every rank's own state with
# nvidia-resiliency-ext's LocalCheckpointManager and, on more than one node, replicates it with
# LazyCliqueReplicationStrategy, whose default replication_factor is 2; the manager removes the
# older checkpoint only after the newer one is saved (base_manager.py, nvidia-resiliency-ext 0.4.1).
LOCAL_CHECKPOINT_REPLICATION = 2
LOCAL_CHECKPOINTS_AT_PEAK = 2
# Bytes per parameter of a rank's state: bf16 weights of its tensor/pipeline shard, and with
# Megatron's distributed optimizer an fp32 main copy and two fp32 Adam moments of its data-parallel
# shard (Megatron-LM docs/source/api-guide/dist_optimizer.md).
WEIGHT_BYTES = 2
OPTIMIZER_BYTES = 12
# A checkpoint in the bucket holds every parameter once: its weights and its optimizer state.
CHECKPOINT_BYTES_PER_PARAMETER = WEIGHT_BYTES + OPTIMIZER_BYTES
# Writing checkpoints to the bucket through Cloud Storage FUSE, per node: GCSFuse v3.4.3's
# sequential-write benchmark, 1 GiB files, 10 jobs, on a C4-standard-192 with 200 Gbps egress
# (GoogleCloudPlatform/gcsfuse:docs/benchmarks.md@009e2e3, 4,624.59 MB/s). Every node writes its
# own ranks' shards at once (Megatron's torch_dist format with fully parallel saves), so a save of
# B bytes on N nodes takes about B / (N x this); no public figure is measured on a GPU node.
CHECKPOINT_WRITE_BYTES_PER_SECOND = 4_624.59e6
# The share of a run's training time its checkpoints may hold its steps back before the plan
# advises a longer interval: "an interval that costs a few percent" (this program's rule).
CHECKPOINT_SHARE = 0.05
# Share of a node's local SSD the local checkpoints may take: the rest holds container images,
# the dataset copy and logs (this program's rule).
LOCAL_CHECKPOINT_SSD_SHARE = 0.5
