"""Kubernetes names that GKE, Kueue, JobSet and this program's objects share.

A taint is written once and its toleration derived from it; a label key, an API version or a
namespace is written once and imported wherever an object names it.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType

# RFC 1123 labels: namespaces, service accounts, claims, queues, most object names.
# https://kubernetes.io/docs/concepts/overview/working-with-objects/names/#dns-label-names
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def dns_label_problem(value: str) -> str | None:
    if len(value) > 63 or not _DNS_LABEL.match(value):
        return "must be a DNS label: 1-63 of a-z, 0-9 and '-', starting and ending with a letter or digit"
    return None


# Label and taint keys: an optional DNS-subdomain prefix and a name of up to 63 characters.
# https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#syntax-and-character-set
_LABEL_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def dns_subdomain_problem(value: str) -> str | None:
    """Names of most objects, claims included (the same page, "DNS Subdomain Names")."""
    if len(value) > 253 or not _DNS_SUBDOMAIN.match(value):
        return "must be a DNS subdomain: 1-253 of a-z, 0-9, '-' and '.', starting and ending with a letter or digit"
    return None


def label_key_problem(key: str) -> str | None:
    prefix, _, name = key.rpartition("/")
    if (
        len(name) > 63
        or not _LABEL_NAME.match(name)
        or (prefix and (len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)))
    ):
        return "must be a Kubernetes label key: [prefix/]name, the name 1-63 of A-Z, a-z, 0-9, '-', '_', '.'"
    return None


def label_value_problem(value: str) -> str | None:
    """Label values, and the values of taints and Equal tolerations (which the API server checks
    as label values: k8s.io/kubernetes pkg/apis/core/validation ValidateTaints, ValidateTolerations)."""
    if value and (len(value) > 63 or not _LABEL_NAME.match(value)):
        return (
            "must be a Kubernetes label value: empty, or 1-63 of A-Z, a-z, 0-9, '-', '_', '.', starting and "
            "ending with a letter or digit"
        )
    return None


def labels_problem(labels: Mapping[str, str]) -> tuple[str, str, str] | None:
    """(key, its value, why) for the first label whose key or value Kubernetes refuses, or None."""
    for key, value in labels.items():
        problem = label_key_problem(key)
        if problem:
            return key, value, problem
        problem = label_value_problem(value)
        if problem:
            return key, value, problem
    return None


# Quantities as the API server writes them back. Core objects, and custom ones that a webhook
# decodes (JobSet, Kueue), come back in canonical form: the largest binary suffix that keeps
# the value whole, whole cores without "m", counts as strings (k8s.io/apimachinery
# pkg/api/resource/quantity.go CanonicalizeBytes). Written otherwise, a refresh reads them back
# changed and the next `up` proposes to patch them, a JobSet's pod template included.
_BINARY_SUFFIXES = (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10))


def bytes_quantity(size: int) -> str:
    for suffix, unit in _BINARY_SUFFIXES:
        if size % unit == 0:
            return f"{size // unit}{suffix}"
    return str(size)


def mib_quantity(mib: int) -> str:
    return bytes_quantity(mib * 2**20)


def gib_quantity(gib: int) -> str:
    return bytes_quantity(gib * 2**30)


def cpu_quantity(millicores: int) -> str:
    return str(millicores // 1000) if millicores % 1000 == 0 else f"{millicores}m"


# Objects whose defining fields cannot change in place (Kueue's CEL rules on a ResourceFlavor or
# Topology, a JobSet's pod template) carry a digest of those fields in their name: a change is a
# new object beside the old one (create it, move what refers to it, delete the old), never a
# patch the API server refuses nor a delete that waits on a finalizer.
DIGEST_LENGTH = 6


def digest(content: object) -> str:
    """The digest of `content` (JSON, keys sorted): DIGEST_LENGTH hex digits of its SHA-256."""
    encoded = json.dumps(content, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(encoded).hexdigest()[:DIGEST_LENGTH]


def versioned_name(base: str, content: object) -> str:
    """`<base>-<digest of content>`."""
    return f"{base}-{digest(content)}"


# --------------------------------------------------------------------------- taints

_GKE_EFFECTS = {"NoSchedule": "NO_SCHEDULE", "PreferNoSchedule": "PREFER_NO_SCHEDULE", "NoExecute": "NO_EXECUTE"}


@dataclass(frozen=True)
class Taint:
    """A node taint, in Kubernetes spelling. A value of None: the nodes' value is not known (an
    existing cluster's taint declared without one), and only Exists tolerates it."""

    key: str
    # Defaulted: stack outputs drop null values, and a later stack must still read the taint.
    value: str | None = None
    effect: str = "NoSchedule"

    def for_node_pool(self) -> dict[str, str]:
        """The taint as GKE's node pool API spells it (`node_config.taints`)."""
        return {"key": self.key, "value": self.value or "", "effect": _GKE_EFFECTS[self.effect]}

    def for_node(self) -> dict[str, str]:
        """The taint as a Node's `spec.taints` holds it."""
        return {"key": self.key, "value": self.value or "", "effect": self.effect}

    def toleration(self) -> dict[str, str]:
        """A pod toleration of this taint, whatever its value."""
        return {"key": self.key, "operator": "Exists", "effect": self.effect}

    def exact_toleration(self) -> dict[str, str]:
        """A pod toleration of exactly this taint: its key, value and effect (any value when the
        value is not known)."""
        if self.value is None:
            return self.toleration()
        return {"key": self.key, "operator": "Equal", "value": self.value, "effect": self.effect}

    def tolerated_by(self, tolerations: Iterable[Mapping[str, str]]) -> bool:
        """Whether one of the tolerations tolerates the taint, as the scheduler and the kubelet
        decide (k8s.io/api core/v1 toleration.go `ToleratesTaint`): an empty or equal effect, an
        empty or equal key, and `Exists` or an equal value (an empty operator means `Equal`)."""
        return any(
            t.get("effect", "") in ("", self.effect)
            and t.get("key", "") in ("", self.key)
            and (
                t.get("operator") == "Exists"
                or (t.get("operator", "") in ("", "Equal") and t.get("value", "") == self.value)
            )
            for t in tolerations
        )


# GKE taints GPU nodes with this itself when the cluster also has CPU nodes; pools declare it
# too so that the plan stays clean.
# https://cloud.google.com/kubernetes-engine/docs/how-to/gpus#create
GPU_TAINT = Taint("nvidia.com/gpu", "present")
# Nodes of a queued-provisioning pool carry this taint and a label of the same key.
# https://cloud.google.com/kubernetes-engine/docs/how-to/provisioningrequest
QUEUED_TAINT = Taint("cloud.google.com/gke-queued", "true")
# GKE taints the nodes of Arm machine types, so that pods built for x86 only stay off them; every
# pod that runs there tolerates it (GKE adds the toleration itself only to pods that select
# kubernetes.io/arch=arm64). https://cloud.google.com/kubernetes-engine/docs/how-to/prepare-arm-workloads-for-deployment;
# GoogleCloudPlatform/cluster-toolkit:examples/gke-a4x/nccl-jobset-example.yaml@1047080
# A node's CPU architecture (https://kubernetes.io/docs/reference/labels-annotations-taints/#kubernetes-io-arch).
ARCH_LABEL = "kubernetes.io/arch"
ARM64_TAINT = Taint(ARCH_LABEL, "arm64")
# GKE's notice on a node about to be reclaimed; the public A3 recipes' training pods tolerate it.
# AI-Hypercomputer/gpu-recipes:src/helm-charts/a3mega/jobset/templates/workload-jobset.yaml@2e1fd5e
IMPENDING_TERMINATION_TOLERATION = {"key": "cloud.google.com/impending-node-termination", "operator": "Exists"}

# --------------------------------------------------------------------------- node labels

GPU_RESOURCE = "nvidia.com/gpu"
# https://cloud.google.com/kubernetes-engine/docs/how-to/gpus
ACCELERATOR_LABEL = "cloud.google.com/gke-accelerator"
# https://cloud.google.com/kubernetes-engine/docs/concepts/node-pools
NODE_POOL_LABEL = "cloud.google.com/gke-nodepool"
HOSTNAME_LABEL = "kubernetes.io/hostname"
# The API server labels every namespace with its name (Kubernetes 1.22+, NamespaceDefaultLabelName).
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"


class TopologyLevel(StrEnum):
    BLOCK = "block"
    SUBBLOCK = "subblock"
    HOST = "host"
    HOSTNAME = "hostname"


# GKE's topology labels on A3/A4 nodes from compact placement or a dense reservation, coarse to
# fine, then the node itself: the levels of the Kueue Topology runs are placed within.
# kubernetes-sigs/kueue:site/content/en/docs/concepts/topology_aware_scheduling.md (its GKE example)
TOPOLOGY_LABELS = MappingProxyType(
    {
        TopologyLevel.BLOCK: "cloud.google.com/gce-topology-block",
        TopologyLevel.SUBBLOCK: "cloud.google.com/gce-topology-subblock",
        TopologyLevel.HOST: "cloud.google.com/gce-topology-host",
        TopologyLevel.HOSTNAME: HOSTNAME_LABEL,
    }
)
# The Kueue Topology built from those levels is named `<TOPOLOGY_NAME>-<digest of the levels>`.
TOPOLOGY_NAME = "gke-default"

# The CPU pool every controller and TensorBoard runs on.
SYSTEM_POOL = "system"


def node_pool_selector(pool: str) -> dict[str, str]:
    """A node selector that pins pods to one GKE node pool."""
    return {NODE_POOL_LABEL: pool}


# --------------------------------------------------------------------------- namespaces and APIs

SYSTEM_NAMESPACE = "kube-system"
KUEUE_NAMESPACE = "kueue-system"
JOBSET_NAMESPACE = "jobset-system"
# The JobSet controller's service account as the pinned chart names it (`<release>-controller`, the
# release named after the chart: sigs.k8s.io/jobset charts/jobset/templates/controller/_helpers.tpl);
# kubectl's manifests name it jobset-controller-manager (config/default: namePrefix jobset-). Either
# is a service account of JOBSET_NAMESPACE, which is what a team's admission policy trusts.
JOBSET_CONTROLLER_ACCOUNT = "jobset-controller"


def service_account_user(namespace: str, name: str = "") -> str:
    """The username the API server gives a service account (with `name` empty: the prefix of every
    service account of `namespace`)."""
    return f"system:serviceaccount:{namespace}:{name}"


# Namespaces a stack may not take for its training runs.
# NVIDIA's DRA driver, as GKE's A4X guide installs it
# (https://cloud.google.com/ai-hypercomputer/docs/create/gke-ai-hypercompute-custom-a4x).
NVIDIA_DRA_NAMESPACE = "nvidia-dra-driver-gpu"
# A MultiKueue worker's account for its manager (components.multikueue): a namespace of its own, so
# no pod of a training namespace can run as it.
MULTIKUEUE_WORKER_NAMESPACE = "nemo-multikueue"
RESERVED_NAMESPACES = frozenset(
    {
        "default",
        "kube-public",
        SYSTEM_NAMESPACE,
        KUEUE_NAMESPACE,
        JOBSET_NAMESPACE,
        NVIDIA_DRA_NAMESPACE,
        MULTIKUEUE_WORKER_NAMESPACE,
    }
)

# The annotation by which the program marks every Kubernetes object it writes (stacks.ownership; its
# Helm releases' objects are Helm's): the fully qualified stack name, as
# `pulumi stack --show-name --fully-qualify-stack-names` prints it.
STACK_ANNOTATION = "nemo-gke.io/stack"
# A run dispatched by a MultiKueue manager carries its files as pod annotations under this prefix
# (components.training.workload_volume). The API server refuses an object whose annotations exceed
# 256 KiB (k8s.io/apimachinery pkg/api/validation/objectmeta.go, TotalAnnotationSizeLimitB): the
# files may take this much of it.
WORKLOAD_FILE_ANNOTATION_PREFIX = "workload.nemo-gke.io/"
WORKLOAD_ANNOTATIONS_MAX_BYTES = 192 * 1024


# Every Kubernetes provider of the program creates over an object that exists, by server-side
# apply, instead of failing with AlreadyExists (pulumi-kubernetes v4.29+ fails by default,
# pulumi/pulumi-kubernetes#4278; provider.go `upsertExistingObjects`): what an `up` left behind when
# it was interrupted is taken, not refused. Only what carries the stack's mark is taken on an
# existing cluster (stacks.ownership); adding the setting to a deployed provider updates it in
# place (provider.go DiffConfig replaces it only for another cluster).
UPSERT_EXISTING_OBJECTS = True


def workload_file_key(name: str) -> str:
    return f"{WORKLOAD_FILE_ANNOTATION_PREFIX}{name}"


def stack_identity(organization: str, project: str, stack: str) -> str:
    return f"{organization}/{project}/{stack}"


# How the Pulumi Kubernetes provider awaits an object (pulumi/pulumi-kubernetes
# provider/pkg/metadata/overrides.go @94977969, provider/pkg/await/await.go): `skipAwait` leaves it
# unawaited on create and update and unchecked on refresh (Read fails on a DaemonSet or Deployment
# whose rollout is not complete at that moment); `timeoutSeconds` replaces the 10-minute await.
SKIP_AWAIT = {"pulumi.com/skipAwait": "true"}
TIMEOUT_SECONDS_ANNOTATION = "pulumi.com/timeoutSeconds"


# What Helm writes on every object of a release (helm/helm pkg/action/validate.go, the
# annotations Helm 3.2+ checks before adopting an object).
HELM_RELEASE_NAME_ANNOTATION = "meta.helm.sh/release-name"
HELM_RELEASE_NAMESPACE_ANNOTATION = "meta.helm.sh/release-namespace"

# API versions this program writes; the pinned releases (facts.versions) serve them.
KUEUE_API = "kueue.x-k8s.io/v1beta2"
JOBSET_API = "jobset.x-k8s.io/v1alpha2"
NETWORKING_API = "networking.gke.io/v1"

# --------------------------------------------------------------------------- NVLink across nodes

# GPUs of different nodes of one NVLink domain (GB200 NVL72) share memory through IMEX channels.
# NVIDIA's DRA driver gives a workload's pods one: the workload creates a ComputeDomain, whose
# controller creates the ResourceClaimTemplate the spec names, and each pod claims a channel from
# it. NVIDIA/k8s-dra-driver-gpu (kubernetes-sigs/dra-driver-nvidia-gpu) @2240711:
# api/nvidia.com/resource/v1beta1/computedomain.go, templates/deviceclass-*.yaml,
# templates/compute-domain-workload-claim-template.tmpl.yaml.
COMPUTE_DOMAIN_API = "resource.nvidia.com/v1beta1"
# The DeviceClass the workload claim template requests its channel from.
IMEX_CHANNEL_DEVICE_CLASS = "compute-domain-default-channel.nvidia.com"
# The resource name Kueue charges a pod's channel to (its configuration maps the DeviceClass to
# it, and each ClusterQueue flavor gives it a quota): kueue v0.19.2
# site/content/en/docs/concepts/dynamic_resource_allocation.md.
IMEX_CHANNEL_RESOURCE = "compute-domain.nvidia.com/channel"
# The pod's name for its claim, and the container's reference to it.
IMEX_CHANNEL_CLAIM = "imex-channel"

# --------------------------------------------------------------------------- container environment

# The longest string execve takes into a process's environment, `NAME=value` and its NUL: 32 pages
# of 4 KiB (torvalds/linux include/uapi/linux/binfmts.h MAX_ARG_STRLEN). A longer variable fails the
# container's start with "argument list too long".
MAX_ENV_STRING_BYTES = 32 * 4096

# Words that mark an environment variable as a credential (HF_TOKEN, WANDB_API_KEY, ...): its value
# belongs in a secret, never in a stack file or a pod spec as text.
SECRET_ENV_WORDS = ("TOKEN", "KEY", "SECRET", "PASSWORD")


def looks_secret(name: str) -> bool:
    return any(word in name.upper() for word in SECRET_ENV_WORDS)


def env_string_bytes(name: str, value: str) -> int:
    return len(f"{name}={value}".encode()) + 1


# --------------------------------------------------------------------------- labels on workloads

# https://kueue.sigs.k8s.io/docs/concepts/local_queue/ and .../workload_priority_class/
QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"
# Set by the Job and JobSet controllers on every pod they create.
COMPLETION_INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"
# The same index as a pod label (Kubernetes 1.28+), to select one node's pod.
COMPLETION_INDEX_LABEL = COMPLETION_INDEX_ANNOTATION

# A run whose configuration its library refuses before training starts (payload/launch.sh's
# preflight) exits with sysexits.h's EX_CONFIG ("something was found in an unconfigured or
# misconfigured state"): its Job fails at once on it (a podFailurePolicy FailJob rule, Kubernetes
# batch/v1), with the Job failure reason PodFailurePolicy (batch/v1 JobReasonPodFailurePolicy), on
# which the JobSet fails instead of restarting (failurePolicy rule PROGRAM_ERROR_RULE; JobSet
# v1alpha2 FailurePolicyRule): restarting cannot fix a configuration.
PROGRAM_ERROR_EXIT_CODE = 78
POD_FAILURE_POLICY_REASON = "PodFailurePolicy"
PROGRAM_ERROR_RULE = "ProgramError"
RESTART_ATTEMPT_LABEL = "jobset.sigs.k8s.io/restart-attempt"
# sigs.k8s.io/jobset api/jobset/v1alpha2/jobset_types.go JobSetNameKey, on every pod of a JobSet.
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
# The same file's JobSetUIDKey: tells a JobSet's pods from those of an earlier one of its name.
JOBSET_UID_LABEL = "jobset.sigs.k8s.io/jobset-uid"

# A run is one JobSet named after the run and its revision (`revisioned`; `<run>-<digest>` where an
# earlier nemo-gke submitted it), with one replicated job whose pods are `<jobset>-workers-0-<node>`,
# reachable as `<pod>.<jobset>`.
RUN_REPLICATED_JOB = "workers"
MAX_RUN_NODES = 1000
# What a run's JobSet was submitted with (planners.submitted): the run's revision, its definition
# as the stack file wrote it (JSON; an encrypted `env` by its names), and a digest of everything the
# program rendered for it.
REVISION_ANNOTATION = "nemo-gke.io/revision"
DEFINITION_ANNOTATION = "nemo-gke.io/definition"
RENDERED_ANNOTATION = "nemo-gke.io/rendered"
# A run's revision (training.runs[].revision): the first, and the largest whose name suffix fits the
# room MAX_RUN_NAME keeps for it.
FIRST_REVISION = 1
MAX_REVISION = 99_999


def revisioned(name: str, revision: int) -> str:
    """The name of a run's object at `revision`: `name` at the first, `<name>-r<revision>` after. A
    replacement's objects never share a name with those they replace, so they are created beside
    them, and a preview's dry-run create (pulumi-kubernetes await.go) never lands on the running ones."""
    return name if revision == FIRST_REVISION else f"{name}-r{revision}"


def jobset_pod_name_length(jobset: str, replicated_job: str, replicas: int, completions: int) -> int:
    """The longest pod name a JobSet's Indexed job generates, with the 5-character suffix the
    JobSet webhook allows for; it must be a DNS label of at most 63 characters
    (sigs.k8s.io/jobset@v0.12.0 pkg/webhooks/jobset_webhook.go, placement.GenPodName)."""
    return len(f"{jobset}-{replicated_job}-{replicas - 1}-{completions - 1}-abcde")


# The longest run name whose JobSet the webhook accepts at MAX_RUN_NODES nodes, with room for the
# largest revision's suffix, or the digest an earlier nemo-gke named each JobSet with.
_RUN_NAME_SUFFIX = max(DIGEST_LENGTH + 1, len(revisioned("", MAX_REVISION)))
MAX_RUN_NAME = 63 - jobset_pod_name_length("-" * _RUN_NAME_SUFFIX, RUN_REPLICATED_JOB, 1, MAX_RUN_NODES)


def run_node_pod_pattern(run: str, node: int) -> re.Pattern[str]:
    """The names of the pods of node `node` of a run's JobSet, whatever its revision: `<run>`,
    `<run>-r<N>` or the `<run>-<digest>` of an earlier nemo-gke, then `-workers-0-<node>-` and the
    5 characters the API server generates (jobset_pod_name_length)."""
    return re.compile(rf"{_run_jobset_pattern(run)}-{RUN_REPLICATED_JOB}-0-{node}-[a-z0-9]{{5}}")


def run_workload_pattern(run: str) -> re.Pattern[str]:
    """The names of the Kueue Workloads of a run's JobSets: `jobset-<jobset>-` and 5 hex digits of
    a hash of its uid (kueue pkg/controller/jobframework/workload_names.go,
    GetWorkloadNameForOwnerWithGVK; run names are short enough not to be cut)."""
    return re.compile(rf"jobset-{_run_jobset_pattern(run)}-[0-9a-f]{{5}}")


def _run_jobset_pattern(run: str) -> str:
    return rf"{re.escape(run)}(?:-r\d+|-[0-9a-f]{{{DIGEST_LENGTH}}})?"


PART_OF = MappingProxyType({"app.kubernetes.io/part-of": "nemo-gke"})
RUN_LABEL = "nemo-gke/run"
FABRIC_CHECK_LABEL = "nemo-gke/fabric-check"
MODEL_LABEL = "nemo-gke/model"
# The container that runs NeMo in every training pod (`kubectl logs -c`).
TRAINING_CONTAINER = "nemo"


class Priority(StrEnum):
    """The platform's Kueue WorkloadPriorityClasses; a higher one may preempt a lower one."""

    LOW = "nemo-low"
    MEDIUM = "nemo-medium"
    HIGH = "nemo-high"


PRIORITY_VALUES = MappingProxyType({Priority.LOW: 100, Priority.MEDIUM: 500, Priority.HIGH: 1000})
DEFAULT_PRIORITY = Priority.MEDIUM

# Fabric checks run above every training priority: a check `pulumi up` waits for, submitted again
# while the run it gates holds the pool (the check changed), preempts that run instead of queueing
# behind it for the whole wait (Kueue preempts workloads of lower priority within a ClusterQueue:
# https://kueue.sigs.k8s.io/docs/concepts/preemption/). Runs cannot ask for it.
FABRIC_CHECK_PRIORITY = "nemo-fabric-check"
FABRIC_CHECK_PRIORITY_VALUE = 10 * max(PRIORITY_VALUES.values())
