"""Pod Security in the rendered stacks: each namespace the program creates enforces the strictest
level its pods allow (the PodSecurity admission plugin refuses any pod above it:
https://kubernetes.io/docs/concepts/security/pod-security-admission/), and a team's admission
policy admits no job whose pods need more of the node than the team's pools' pods do.
The lane shows the API server refusing both (tests/integration/test_lane.py, test_lane_teams.py)."""

from __future__ import annotations

import copy
from collections import defaultdict
from typing import Any

import pytest

from components.workspace import TrainingWorkspace
from facts.podsecurity import ENFORCE_LABEL, PodAllowance, PodSecurityLevel, needs_of, pod_specs, union
from harness.cel import User, policy_refusals
from harness.runner import StackRun, stack_names
from tests.conftest import Render

NAMESPACE = "kubernetes:core/v1:Namespace"
POLICY = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy"
MEMBER: User = ("someone@your-domain.com", ("alignment@your-domain.com", "system:authenticated"))


def _levels(run: StackRun) -> dict[str, str | None]:
    """The enforced level of each namespace of runs the stack creates (a read namespace is the
    cluster owner's; the controllers' namespaces hold their charts' pods)."""
    found = {}
    for resource in run.of_type(NAMESPACE):
        if not resource.read and run.by_urn(resource.parent or "").type == TrainingWorkspace.TYPE:
            metadata = run.manifest(resource)["metadata"]
            found[metadata["name"]] = (metadata.get("labels") or {}).get(ENFORCE_LABEL)
    return found


def _needs(run: StackRun) -> dict[str, PodAllowance]:
    """What the stack's pods need, by namespace. A MultiKueue manager's JobSet (managedBy) makes
    no pod where it is: its copy runs on a worker."""
    found: dict[str, list[PodAllowance]] = defaultdict(list)
    for resource in run.kubernetes_objects:
        manifest = run.manifest(resource)
        if (manifest.get("spec") or {}).get("managedBy"):
            continue
        namespace = (manifest.get("metadata") or {}).get("namespace")
        found[namespace] += [needs_of(spec) for spec in pod_specs(manifest)]
    return {namespace: union(needs) for namespace, needs in found.items()}


@pytest.mark.parametrize("stack", stack_names())
def test_every_namespace_enforces_a_level_that_admits_its_pods(render: Render, stack: str) -> None:
    run = render(stack)
    levels, needs = _levels(run), _needs(run)
    for namespace, level in levels.items():
        assert level in {PodSecurityLevel.BASELINE, PodSecurityLevel.PRIVILEGED}, f"{stack}: {namespace}: {level}"
        need = needs.get(namespace, PodAllowance())
        if level == PodSecurityLevel.BASELINE:
            assert need.level is PodSecurityLevel.BASELINE, f"{stack}: {namespace}: {PodAllowance().excess(need)}"


# The strictest level each shipped stack's namespaces allow: off GKE no pod needs the node; on GKE
# a pool's GPUDirect pods mount the host's NCCL plugin (a hostPath, which only privileged allows;
# a3high-small's a3-highgpu-8g pool has TCPX's), and a MultiKueue manager runs no pod of a run.
LEVELS = {
    "existing": {"nemo": "baseline"},
    "existing-oke": {"nemo": "baseline"},
    "a3high-small": {"nemo": "privileged"},
    "a3mega": {"nemo": "privileged"},
    "a4": {"nemo": "privileged"},
    "teams": {"nemo": "privileged", "alignment": "privileged", "pretraining": "privileged"},
    "manager": {"nemo": "baseline"},
}


@pytest.mark.parametrize("stack", sorted(LEVELS))
def test_the_level_is_the_strictest_the_pools_allow(render: Render, stack: str) -> None:
    levels = _levels(render(stack))
    for namespace, level in LEVELS[stack].items():
        assert levels.get(namespace) == level, (stack, namespace, levels)


def _policies(run: StackRun) -> dict[str, dict[str, Any]]:
    return {m["metadata"]["name"]: m for m in map(run.manifest, run.of_type(POLICY))}


@pytest.mark.parametrize("stack", stack_names())
def test_each_team_s_policy_admits_the_stack_s_own_jobs(render: Render, stack: str) -> None:
    run = render(stack)
    policies = {p["metadata"]["name"].removeprefix("nemo-team-"): p for p in _policies(run).values()}
    namespaces = {
        b["spec"]["matchResources"]["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"]: name
        for b in map(run.manifest, run.of_type(f"{POLICY}Binding"))
        for name in [b["spec"]["policyName"].removeprefix("nemo-team-")]
    }
    for resource in run.kubernetes_objects:
        manifest = run.manifest(resource)
        team = namespaces.get((manifest.get("metadata") or {}).get("namespace"))
        if team and manifest["kind"] in ("JobSet", "Job"):
            assert policy_refusals(policies[team], manifest) == [], (stack, manifest["metadata"])


def _with_pod(jobset: dict[str, Any], change: Any) -> dict[str, Any]:
    changed = copy.deepcopy(jobset)
    change(changed["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"])
    return changed


def test_a_team_member_s_job_may_not_need_more_of_the_node_than_its_pools(render: Render) -> None:
    """The teams stack's pools are A3 Ultra: its pods mount the host's NCCL plugin and nothing else,
    so the namespace's level is privileged, and the team's policy keeps out what those pods do not
    need: a privileged container, the host network or process namespace, another host path, a
    capability beyond Baseline's. Kueue's updates of an admitted job change none of these."""
    run = render("teams")
    policy = _policies(run)["nemo-team-alignment"]
    (jobset,) = [
        run.manifest(r)
        for r in run.kubernetes_objects
        if r.type.endswith(":JobSet") and run.manifest(r)["metadata"]["namespace"] == "alignment"
    ]
    assert policy_refusals(policy, jobset, user=MEMBER) == []

    def privileged(pod: dict[str, Any]) -> None:
        pod["containers"][0]["securityContext"] = {"privileged": True}

    def host_network(pod: dict[str, Any]) -> None:
        pod["hostNetwork"] = True

    def host_pid(pod: dict[str, Any]) -> None:
        pod["hostPID"] = True

    def root_path(pod: dict[str, Any]) -> None:
        pod["volumes"].append({"name": "root", "hostPath": {"path": "/"}})

    def capability(pod: dict[str, Any]) -> None:
        pod["containers"][0]["securityContext"] = {"capabilities": {"add": ["SYS_ADMIN"]}}

    def init_privileged(pod: dict[str, Any]) -> None:
        pod.setdefault("initContainers", []).append({"name": "i", "securityContext": {"privileged": True}})

    expected = {
        privileged: "team alignment's jobs may not use a privileged container",
        init_privileged: "team alignment's jobs may not use a privileged container",
        host_network: "team alignment's jobs may not use the host network",
        host_pid: "team alignment's jobs may not share the node's process or IPC namespace",
        root_path: "team alignment's jobs may mount from the node only /home/kubernetes/bin/nvidia",
        capability: "team alignment's jobs may add only the capabilities AUDIT_WRITE",
    }
    for change, message in expected.items():
        (refusal,) = policy_refusals(policy, _with_pod(jobset, change), user=MEMBER)
        assert refusal.startswith(message), (change.__name__, refusal)
    job = {"kind": "Job", "metadata": jobset["metadata"], "spec": {"template": {"spec": {"containers": [{}]}}}}
    job["spec"]["template"]["spec"]["containers"][0]["securityContext"] = {"privileged": True}
    (refusal,) = policy_refusals(policy, job, user=MEMBER)
    assert refusal.startswith(expected[privileged])
    # The JobSet controller's Jobs copy a JobSet the policy admitted.
    controller: User = ("system:serviceaccount:jobset-system:jobset-controller", ("system:serviceaccounts",))
    assert policy_refusals(policy, {**job, "metadata": {}}, user=controller) == []
