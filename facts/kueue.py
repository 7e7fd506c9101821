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
