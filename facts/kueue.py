"""Kueue's API values and bounds as the pinned release defines them: the config refuses what the
API server would, and the components write the same names.

Source: kubernetes-sigs/kueue apis/kueue/v1beta2/clusterqueue_types.go and
apis/config/v1beta2/configuration_types.go at the pinned version (facts.versions.KUEUE); the
enums and item limits are the ClusterQueue CRD's (`+kubebuilder:validation:Enum`, `MaxItems`),
which tests/stacks/test_controller_api.py compares with the cached CRD.
"""

from __future__ import annotations

from enum import StrEnum


class QueueingStrategy(StrEnum):
    STRICT_FIFO = "StrictFIFO"
    # A workload that does not fit lets the ones behind it be admitted.
    BEST_EFFORT_FIFO = "BestEffortFIFO"


class WithinClusterQueue(StrEnum):
    """Whether a pending workload may preempt admitted ones of its own ClusterQueue."""

    NEVER = "Never"
    LOWER_PRIORITY = "LowerPriority"
    LOWER_OR_NEWER_EQUAL_PRIORITY = "LowerOrNewerEqualPriority"


class ReclaimWithinCohort(StrEnum):
    """Whether a ClusterQueue takes back its nominal quota from workloads of its cohort."""

    NEVER = "Never"
    LOWER_PRIORITY = "LowerPriority"
    ANY = "Any"


class BorrowWithinCohort(StrEnum):
    """Whether a workload that borrows may preempt workloads of other ClusterQueues of the cohort."""

    NEVER = "Never"
    LOWER_PRIORITY = "LowerPriority"


class RequeuingTimestamp(StrEnum):
    """waitForPodsReady.requeuingStrategy.timestamp: where a requeued workload goes in the queue."""

    # By when it was evicted: behind what was queued meanwhile.
    EVICTION = "Eviction"
    CREATION = "Creation"


# spec.resourceGroups, and flavors and coveredResources per group.
MAX_RESOURCE_GROUPS = 16
MAX_FLAVORS_PER_GROUP = 64
MAX_COVERED_RESOURCES = 64


class FairSharingStrategy(StrEnum):
    """Configuration fairSharing.preemptionStrategies: what a preemption between ClusterQueues of a
    cohort must satisfy, tried in order (apis/config/v1beta2/configuration_types.go)."""

    # The preemptor's share with its workload stays at or below the target's without the victim.
    LESS_THAN_OR_EQUAL_TO_FINAL_SHARE = "LessThanOrEqualToFinalShare"
    # The preemptor's share with its workload is below the target's before the preemption.
    LESS_THAN_INITIAL_SHARE = "LessThanInitialShare"


# The v1beta2 Configuration requires the list (`json:"preemptionStrategies"`, no default); these are
# what v1beta1 defaulted to, in this order (apis/config/v1beta1/defaults.go at the pinned version).
FAIR_SHARING_STRATEGIES = (
    FairSharingStrategy.LESS_THAN_OR_EQUAL_TO_FINAL_SHARE,
    FairSharingStrategy.LESS_THAN_INITIAL_SHARE,
)


# The AdmissionCheck of queued provisioning (components.scheduling): Kueue's ProvisioningRequest
# controller gates admission on capacity GKE provisions for the workload.
PROVISIONING_CHECK = "dws-prov"


# MultiKueue (kubernetes-sigs/kueue at the pinned version: site/content/en/docs/concepts/multikueue.md,
# site/content/en/docs/tasks/manage/setup_multikueue.md, apis/kueue/v1beta2/multikueue_types.go,
# apis/config/v1beta2/defaults.go). The controller's name is also the value Kueue's webhook gives a
# JobSet's spec.managedBy on the manager (docs/tasks/run/multikueue/jobsets.md).
MULTIKUEUE_CONTROLLER = "kueue.x-k8s.io/multikueue"
# The AdmissionCheck of a manager's queues (components.multikueue), read back by planners.waiting.
MULTIKUEUE_CHECK = "nemo-multikueue"
# The key of the worker's kubeconfig in its Secret, in Kueue's own namespace (MultiKueueConfigSecretKey).
MULTIKUEUE_KUBECONFIG_KEY = "kubeconfig"
# MultiKueueConfig spec.clusters: MaxItems.
MAX_MULTIKUEUE_CLUSTERS = 20
# Configuration multiKueue.workerLostTimeout: how long a workload stays admitted on a worker the
# manager cannot reach before it is evicted and dispatched again (DefaultMultiKueueWorkerLostTimeout).
DEFAULT_WORKER_LOST_TIMEOUT_SECONDS = 15 * 60


class Dispatch(StrEnum):
    """How a MultiKueue manager offers a run to its workers (Configuration multiKueue.dispatcherName,
    apis/config/v1beta2/configuration_types.go at the pinned version)."""

    # To every worker at once; the first whose Kueue admits it keeps it (the default).
    ALL_AT_ONCE = "allAtOnce"
    # To the workers a step at a time, in the order of MultiKueueConfig spec.clusters: Kueue's
    # incremental dispatcher with a step of one worker.
    IN_ORDER = "inOrder"


# The incremental dispatcher (Configuration multiKueue.dispatcherName; the default is all at
# once), pkg/controller/workloaddispatcher/incrementaldispatcher.go at the pinned version: it
# nominates `stepSize` more workers when none of those nominated admitted the run within a round of
# incrementalDispatcherRoundTimeout, a constant; the earlier ones stay nominated. It keeps each
# round's start in memory only, so a restarted Kueue offers every pending run to its next workers
# at once. It keeps the order of spec.clusters under MultiKueueIncrementalDispatcherRespectConfigOrder
# and reads stepSize under MultiKueueIncrementalDispatcherConfig, both beta and on by default from
# v0.19 (pkg/features/kube_features.go); before, it sorted the workers by name and stepped by 3.
MULTIKUEUE_INCREMENTAL_DISPATCHER = "kueue.x-k8s.io/multikueue-dispatcher-incremental"
MULTIKUEUE_DISPATCH_ROUND_SECONDS = 5 * 60
# The feature gates in-order dispatch needs (on by default from v0.19; a Configuration's
# featureGates map, or the --feature-gates flag, may turn them off).
MULTIKUEUE_IN_ORDER_GATES = (
    "MultiKueueIncrementalDispatcherRespectConfigOrder",
    "MultiKueueIncrementalDispatcherConfig",
)
# What a manager's Configuration sets under multiKueue to dispatch in order: one worker a step.
MULTIKUEUE_IN_ORDER = {
    "dispatcherName": MULTIKUEUE_INCREMENTAL_DISPATCHER,
    "incrementalDispatcherConfig": {"stepSize": 1},
}


# API group of Kueue's kinds (facts.kubernetes.KUEUE_API is the version the program writes).
KUEUE_GROUP = "kueue.x-k8s.io"
# Where a Kueue install keeps its Configuration: the chart's and the release manifests'
# `kueue-manager-config` ConfigMap in kueue-system, one file the manager reads with --config
# (charts/kueue/templates/manager/manager-config.yaml and manager.yaml).
KUEUE_CONFIG_MAP = "kueue-manager-config"
KUEUE_CONFIG_FILE = "controller_manager_config.yaml"
# The ClusterQueue xpk creates on a cluster it sets up (AI-Hypercomputer/xpk src/xpk/core/kueue.py,
# CLUSTER_QUEUE_NAME), whose quota counts every node of its accelerator.
XPK_CLUSTER_QUEUE = "cluster-queue"
