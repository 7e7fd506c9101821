"""The Kueue and JobSet kinds this program writes and the fields it sets in them: what a cluster's
own Kueue and JobSet must serve when the program does not install them (`kueue.install: false`).

A field is written as its path in the CRD's schema (`[]` steps into a list's items); a map
(label selectors, node labels) ends its path. tests/stacks/test_controller_api.py keeps every kind's
fields equal to what the shipped stacks emit, each present in the pinned release's schema.
"""

from __future__ import annotations

from dataclasses import dataclass

from facts.kubernetes import JOBSET_API, KUEUE_API
from facts.versions import CRD_MODULES, JOBSET, JOBSET_CRDS, KUEUE, CrdModule

# A Job's pod template is the core Pod API, which the Kubernetes version decides, not JobSet's.
JOB_POD_TEMPLATE = "spec.replicatedJobs[].template.spec.template"


@dataclass(frozen=True)
class ControllerKind:
    kind: str
    plural: str
    api: str
    fields: tuple[str, ...]

    @property
    def group(self) -> str:
        return self.api.split("/")[0]

    @property
    def version(self) -> str:
        return self.api.split("/")[1]

    @property
    def crd_name(self) -> str:
        return f"{self.plural}.{self.group}"

    @property
    def module(self) -> CrdModule:
        """The pinned module whose CRDs define the kind."""
        return next(m for m in CRD_MODULES if self.group in m.groups)

    @property
    def release(self) -> str:
        """The release the program is tested with, e.g. `Kueue v0.19.2`."""
        return f"Kueue v{KUEUE.version}" if self.api == KUEUE_API else f"JobSet v{JOBSET.version}"


def _kueue(kind: str, plural: str, *fields: str) -> ControllerKind:
    return ControllerKind(kind, plural, KUEUE_API, fields)


CONTROLLER_KINDS = (
    _kueue(
        "ResourceFlavor", "resourceflavors",
        "spec.nodeLabels", "spec.tolerations[].effect", "spec.tolerations[].key", "spec.tolerations[].operator",
        "spec.tolerations[].value", "spec.topologyName",
    ),
    _kueue("Topology", "topologies", "spec.levels[].nodeLabel"),
    _kueue("WorkloadPriorityClass", "workloadpriorityclasses", "description", "value"),
    _kueue(
        "ClusterQueue", "clusterqueues",
        "spec.admissionChecksStrategy.admissionChecks[].name",
        "spec.admissionChecksStrategy.admissionChecks[].onFlavors[]", "spec.cohortName", "spec.fairSharing.weight",
        "spec.namespaceSelector.matchLabels", "spec.preemption.reclaimWithinCohort",
        "spec.preemption.withinClusterQueue", "spec.queueingStrategy", "spec.resourceGroups[].coveredResources[]",
        "spec.resourceGroups[].flavors[].name", "spec.resourceGroups[].flavors[].resources[].borrowingLimit",
        "spec.resourceGroups[].flavors[].resources[].name",
        "spec.resourceGroups[].flavors[].resources[].nominalQuota",
    ),
    _kueue(
        "Cohort", "cohorts",
        "spec.resourceGroups[].coveredResources[]", "spec.resourceGroups[].flavors[].name",
        "spec.resourceGroups[].flavors[].resources[].name", "spec.resourceGroups[].flavors[].resources[].nominalQuota",
    ),
    _kueue("LocalQueue", "localqueues", "spec.clusterQueue"),
    _kueue(
        "AdmissionCheck", "admissionchecks",
        "spec.controllerName", "spec.parameters.apiGroup", "spec.parameters.kind", "spec.parameters.name",
    ),
    _kueue("MultiKueueConfig", "multikueueconfigs", "spec.clusters[]"),
    _kueue(
        "MultiKueueCluster", "multikueueclusters",
        "spec.clusterSource.kubeConfig.location", "spec.clusterSource.kubeConfig.locationType",
    ),
    _kueue(
        "ProvisioningRequestConfig", "provisioningrequestconfigs",
        "spec.managedResources[]", "spec.podSetUpdates.nodeSelector[].key",
        "spec.podSetUpdates.nodeSelector[].valueFromProvisioningClassDetail", "spec.provisioningClassName",
    ),
    ControllerKind(
        "JobSet", JOBSET_CRDS.applied[0].split(".")[0], JOBSET_API,
        (
            "spec.failurePolicy.maxRestarts", "spec.failurePolicy.rules[].action", "spec.failurePolicy.rules[].name",
            "spec.failurePolicy.rules[].onJobFailureReasons[]", "spec.managedBy", "spec.network.enableDNSHostnames",
            "spec.network.publishNotReadyAddresses", "spec.replicatedJobs[].name", "spec.replicatedJobs[].replicas",
            "spec.replicatedJobs[].template.spec.backoffLimit", "spec.replicatedJobs[].template.spec.completionMode",
            "spec.replicatedJobs[].template.spec.completions", "spec.replicatedJobs[].template.spec.parallelism",
            "spec.replicatedJobs[].template.spec.podFailurePolicy.rules[].action",
            "spec.replicatedJobs[].template.spec.podFailurePolicy.rules[].onExitCodes.containerName",
            "spec.replicatedJobs[].template.spec.podFailurePolicy.rules[].onExitCodes.operator",
            "spec.replicatedJobs[].template.spec.podFailurePolicy.rules[].onExitCodes.values[]",
            JOB_POD_TEMPLATE,
        ),
    ),
)  # fmt: skip


# The Kueue API version Kueue 0.20 stops serving (kubernetes-sigs/kueue#13957). Since 0.16 Kueue
# stores v1beta2, but an object written before stays stored at v1beta1 until written again, and
# the CRD's status.storedVersions keeps listing v1beta1 until cleared (kubernetes-sigs/kueue#8020,
# its release note; Kubernetes docs, "Upgrade existing objects to a new stored version").
KUEUE_RETIRED_VERSION = "v1beta1"
