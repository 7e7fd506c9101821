"""Pod Security Standards: the level a namespace enforces, and what a pod spec needs of it.

Sources: https://kubernetes.io/docs/concepts/security/pod-security-standards/ (the Baseline
policy's controls) and https://kubernetes.io/docs/concepts/security/pod-security-admission/
(the namespace label the built-in PodSecurity admission plugin reads, on by default since
Kubernetes 1.25)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

ENFORCE_LABEL = "pod-security.kubernetes.io/enforce"


class PodSecurityLevel(StrEnum):
    """The levels a namespace of this program enforces. `restricted` is never one: the NeMo and
    Megatron-Bridge containers run as root, which it forbids."""

    BASELINE = "baseline"
    PRIVILEGED = "privileged"


# The Baseline policy's "Capabilities" control: what a container may add.
BASELINE_CAPABILITIES = frozenset(
    {
        "AUDIT_WRITE",
        "CHOWN",
        "DAC_OVERRIDE",
        "FOWNER",
        "FSETID",
        "KILL",
        "MKNOD",
        "NET_BIND_SERVICE",
        "SETFCAP",
        "SETGID",
        "SETPCAP",
        "SETUID",
        "SYS_CHROOT",
    }
)


@dataclass(frozen=True)
class PodAllowance:
    """What pods of a namespace may use beyond the Baseline policy: the node's network, privileged
    containers, these host paths and these capabilities. `other` names any further Baseline control
    a pod breaks (hostPID, hostIPC, hostPort, sysctls...): needed by no training pod, so never
    allowed by a team's policy, and it makes the namespace privileged."""

    host_network: bool = False
    privileged: bool = False
    host_paths: frozenset[str] = frozenset()
    capabilities: frozenset[str] = frozenset()
    other: frozenset[str] = frozenset()

    def __or__(self, other: PodAllowance) -> PodAllowance:
        return PodAllowance(
            host_network=self.host_network or other.host_network,
            privileged=self.privileged or other.privileged,
            host_paths=self.host_paths | other.host_paths,
            capabilities=self.capabilities | other.capabilities,
            other=self.other | other.other,
        )

    @property
    def level(self) -> PodSecurityLevel:
        """The strictest level that admits every pod within the allowance."""
        beyond = self.host_network or self.privileged or self.host_paths or self.capabilities or self.other
        return PodSecurityLevel.PRIVILEGED if beyond else PodSecurityLevel.BASELINE

    def excess(self, needs: PodAllowance) -> list[str]:
        """What `needs` asks beyond this allowance, in words (empty: within it)."""
        found = []
        if needs.host_network and not self.host_network:
            found.append("the host network")
        if needs.privileged and not self.privileged:
            found.append("a privileged container")
        found += [f"the host path {p}" for p in sorted(needs.host_paths - self.host_paths)]
        found += [f"the capability {c}" for c in sorted(needs.capabilities - self.capabilities)]
        found += sorted(needs.other - self.other)
        return found


def union(allowances: Iterable[PodAllowance]) -> PodAllowance:
    found = PodAllowance()
    for allowance in allowances:
        found |= allowance
    return found


def _containers(spec: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [*spec.get("initContainers", []), *spec.get("containers", []), *spec.get("ephemeralContainers", [])]


def needs_of(spec: Mapping[str, Any]) -> PodAllowance:
    """What a pod spec uses beyond the Baseline policy (its controls for host namespaces, privileged
    containers, capabilities, hostPath volumes, host ports and sysctls; the others, such as SELinux,
    /proc mount and seccomp, this program's pods never set)."""
    containers = _containers(spec)
    contexts = [c.get("securityContext") or {} for c in containers]
    added = {cap for context in contexts for cap in (context.get("capabilities") or {}).get("add", [])}
    other = {field for field in ("hostPID", "hostIPC") if spec.get(field)}
    if any(port.get("hostPort") for c in containers for port in c.get("ports", [])):
        other.add("hostPort")
    if (spec.get("securityContext") or {}).get("sysctls"):
        other.add("sysctls")
    return PodAllowance(
        host_network=bool(spec.get("hostNetwork")),
        privileged=any(context.get("privileged") for context in contexts),
        host_paths=frozenset(v["hostPath"]["path"] for v in spec.get("volumes", []) if "hostPath" in v),
        capabilities=frozenset(added - BASELINE_CAPABILITIES),
        other=frozenset(other),
    )


def pod_specs(manifest: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The pod specs a manifest creates pods from: a Pod's own, a workload's template, each of a
    JobSet's replicated Jobs' templates."""
    kind, spec = manifest.get("kind"), manifest.get("spec") or {}
    if kind == "Pod":
        return [spec]
    if kind in ("Deployment", "DaemonSet", "StatefulSet", "ReplicaSet", "Job"):
        return [spec["template"].get("spec") or {}]
    if kind == "CronJob":
        return [spec["jobTemplate"]["spec"]["template"].get("spec") or {}]
    if kind == "JobSet":
        return [r["template"]["spec"]["template"].get("spec") or {} for r in spec.get("replicatedJobs", [])]
    return []
