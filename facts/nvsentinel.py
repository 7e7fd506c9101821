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

from fnmatch import fnmatchcase

from facts.podsecurity import PodAllowance

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

# NVSentinel's preflight (docs/configuration/preflight.md@231a207e, docs/designs/
# 026-preflight-checks.md@b26bb7d9, 034-preflight-check-selection.md): a mutating webhook that
# appends its checks as init containers to every GPU pod created in a namespace with this label
# (the chart's default namespaceSelector). Each check reports a failure to NVSentinel as a health
# event, which NVSentinel's default "Preflight check fatal error" rule set answers with a cordon
# (charts/fault-quarantine/values.yaml@1197f6a8), and exits non-zero.
PREFLIGHT_NAMESPACE_LABEL = "nvsentinel.nvidia.com/preflight"
PREFLIGHT_ENABLED = "enabled"
# The pod annotation naming the checks to inject, comma-separated (ADR-034). A name the cluster's
# chart does not configure is skipped with a warning by some releases and refuses the pod in others
# (preflight.md@231a207e against @7661ca7d): the platform names only the chart's own checks.
PREFLIGHT_CHECKS_ANNOTATION = "nvsentinel.nvidia.com/preflight-checks"
# The webhook mounts the node's platform-connector socket into each check, from this host path
# (its injector's nvsentinel-socket volume): the namespace's pod security must allow it.
PREFLIGHT_SOCKET_HOST_PATH = "/var/run/nvsentinel"
# The pod's volume mounts the webhook copies into the checks, with the training container's NCCL_*,
# FI_*, LD_LIBRARY_PATH... variables (the chart's default volumeMountPatterns, preflight.md).
PREFLIGHT_VOLUME_MOUNT_PATTERNS = ("host-opt-amazon*", "nvtcpxo-*", "nccl-*", "dev-shm")
# Every check's init container is named so.
PREFLIGHT_CHECK_PREFIX = "preflight-"
# A failed check exits 1 once it has sent its health events (preflight-checks/dcgm-diag/dcgm_diag/
# __main__.py@14e04d01), so NVSentinel has the node's event before the pod fails.
PREFLIGHT_CHECK_FAILED = 1
# DCGM diagnostics of the pod's GPUs through the node's hostengine, at the chart's `dcgm.diagLevel`
# (default 2: "approx 2 min", docs/configuration/preflight.md), and an all-reduce across the node's
# GPUs (nccl-tests' all_reduce_perf up to 256 MB, held to a bus bandwidth of 150 GB/s by default).
PREFLIGHT_DCGM_DIAG = "preflight-dcgm-diag"
PREFLIGHT_DCGM_DIAG_SECONDS = 120
PREFLIGHT_NCCL_LOOPBACK = "preflight-nccl-loopback"
PREFLIGHT_CHECKS = (PREFLIGHT_DCGM_DIAG, PREFLIGHT_NCCL_LOOPBACK)
# The gang-wide all-reduce finds its peers through Kubernetes' PodGroup API (1.36; the Workload
# API in earlier releases: preflight/pkg/gang/factory.go, preflight.md "Gang discovery") or a
# scheduler's PodGroup; NVSentinel documents none for Kueue.
PREFLIGHT_NCCL_ALLREDUCE = "preflight-nccl-allreduce"


def preflight_namespace_labels(checks: tuple[str, ...]) -> dict[str, str]:
    """A training namespace's labels for NVSentinel's preflight: none where no check runs."""
    return {PREFLIGHT_NAMESPACE_LABEL: PREFLIGHT_ENABLED} if checks else {}


def preflight_annotations(checks: tuple[str, ...] | None) -> dict[str, str]:
    """A GPU pod's annotations naming its checks (never none: releases differ on what an empty
    list means, config.platform.PreflightConfig). None: the platform asks for no preflight, and
    its namespaces carry no label."""
    return {} if checks is None else {PREFLIGHT_CHECKS_ANNOTATION: ",".join(checks)}


def preflight_pod_needs(checks: tuple[str, ...]) -> PodAllowance:
    """What the webhook adds to a pod of a namespace opted in, of its pod security."""
    return PodAllowance(host_paths=frozenset({PREFLIGHT_SOCKET_HOST_PATH})) if checks else PodAllowance()


def copied_into_checks(mount: str) -> bool:
    """Whether the webhook copies a volume mount of this name into the checks."""
    return any(fnmatchcase(mount, pattern) for pattern in PREFLIGHT_VOLUME_MOUNT_PATTERNS)
