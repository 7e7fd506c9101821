"""What NVIDIA NVSentinel writes on a node it quarantines, and how its drainer moves the pods off.

NVSentinel (NVIDIA/NVSentinel) watches GPUs, NICs, system logs and cloud maintenance events. Its
platform connector records a fatal health event as a node condition; its fault quarantine then
cordons the node (every default rule set sets `cordon.shouldCordon`; taints are optional and off
by default: distros/kubernetes/nvsentinel/charts/fault-quarantine/values.yaml@1197f6a8,
docs/INTEGRATIONS.md@e157bb73) and marks it with the labels and annotations below
(fault-quarantine/pkg/reconciler/reconciler.go@b7e4a8c7, fault-quarantine/pkg/common/common.go@569d1eb2,
commons/pkg/statemanager/statemanager.go). When every check of the node is healthy again it
removes them and uncordons the node. Its node drainer then evicts the node's pods, per namespace
(docs/configuration/node-drainer.md@786efb5b).

The lane stands in for NVSentinel with exactly these marks: its Go modules are not served by the
module proxy, so it cannot run there (tests/integration/test_lane_recovery.py).
"""

from __future__ import annotations

# Labels on a quarantined node, with the chart's default labelPrefix "k8saas.nvidia.com/" (a
# setting): who cordoned it and why (the rule sets' names), and the node's state in NVSentinel's
# remediation.
CORDON_BY_LABEL = "k8saas.nvidia.com/cordon-by"
CORDON_BY = "NVSentinel"
CORDON_REASON_LABEL = "k8saas.nvidia.com/cordon-reason"
STATE_LABEL = "dgxc.nvidia.com/nvsentinel-state"
QUARANTINED = "quarantined"
# Annotations: the health events that hold the node (JSON), and that NVSentinel cordoned it.
HEALTH_EVENTS_ANNOTATION = "quarantineHealthEvent"
CORDONED_ANNOTATION = "quarantineHealthEventIsCordoned"
CORDONED = "True"


def fault_condition(check: str, message: str) -> dict[str, str]:
    """The node condition of a fatal health event: its check's name as the type, True
    (platform-connectors/pkg/connectors/kubernetes/process_node_events.go@227932c7)."""
    return {"type": check, "status": "True", "reason": f"{check}IsNotHealthy", "message": message}


def healthy_condition(check: str) -> dict[str, str]:
    """The same condition once the check passes again (the same file)."""
    return {"type": check, "status": "False", "reason": f"{check}IsHealthy", "message": "No Health Failures"}


# The drainer's modes, per namespace (`userNamespaces[].mode`): Immediate (the Eviction API, with
# this grace period: evictionTimeoutInSeconds), AllowCompletion (waits for the pods to finish: the
# default for every namespace) and DeleteAfterTimeout (deletes them 60 minutes after the event).
EVICTION_GRACE_SECONDS = 60
