"""A team's place on the platform: its namespace and service accounts, the claims its runs mount,
what its members may do there, and, on GKE, the checkpoint folder only its runs may write.

Isolation comes from what Kubernetes and Cloud Storage already enforce:
- claims, Secrets and ResourceClaims are namespaced, and the team's service accounts are bound to no
  Role at all, so one team's pods can read nothing of another's through the API;
- on GKE the checkpoint bucket's `<team>/` prefix is a managed folder whose IAM grants write to the
  team's training identity alone (https://cloud.google.com/storage/docs/managed-folders), and the
  team's checkpoint volume mounts only that folder (Cloud Storage FUSE `only-dir`); data preparation
  writes only the team's folder of the data bucket, and every team reads the whole data bucket.
  Managed folders need uniform bucket-level access, which the buckets this program creates have.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s

from components.storage import (
    BUCKET_VOLUME_SIZE,
    FilestoreSource,
    StorageClaims,
    StorageClaimsArgs,
    bucket_volume_spec,
    static_claim,
)
from components.workspace import TrainingWorkspace, TrainingWorkspaceArgs
from facts.errors import require, require_no_problem
from facts.kubernetes import (
    FABRIC_CHECK_PRIORITY,
    JOBSET_NAMESPACE,
    NAMESPACE_NAME_LABEL,
    PRIORITY_CLASS_LABEL,
    QUEUE_NAME_LABEL,
    dns_label_problem,
    service_account_user,
)
from facts.podsecurity import BASELINE_CAPABILITIES, PodAllowance
from planners.teams import Team

# What a team's members do in its namespace: submit and follow runs (the JobSets, Jobs, ConfigMaps,
# Secrets and ComputeDomains a run stack creates), and read their queue, Workloads, pods and logs.
SUBMITTER_RULES = (
    {
        "apiGroups": ["jobset.x-k8s.io"],
        "resources": ["jobsets"],
        "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"],
    },
    {
        "apiGroups": ["batch"],
        "resources": ["jobs"],
        "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"],
    },
    {
        "apiGroups": [""],
        "resources": ["configmaps", "secrets"],
        "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"],
    },
    {
        "apiGroups": ["resource.nvidia.com"],
        "resources": ["computedomains"],
        "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"],
    },
    {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads", "localqueues"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": [""], "resources": ["pods", "pods/log", "events"], "verbs": ["get", "list", "watch"]},
)
SUBMITTER_ROLE = "nemo-team-submitter"


def _pod_rules(team: Team, pods: PodAllowance) -> list[dict[str, str]]:
    """Validations over `variables.pods` (the job's pod specs): nothing beyond what the pods of the
    team's pools need (`pods`), the Baseline policy's host namespaces never. The namespace's Pod
    Security level is privileged as soon as a pool needs one host path; these keep the rest out."""
    pools = ", ".join(team.pools)

    def each_container(rule: str) -> str:
        containers = "((has(p.initContainers) ? p.initContainers : []) + (has(p.containers) ? p.containers : []))"
        return f"variables.pods.all(p, {containers}.all(c, {rule}))"

    def context(field: str) -> str:
        return f"!has(c.securityContext) || !has(c.securityContext.{field})"

    def forbidden(what: str) -> str:
        return f"team {team.name}'s jobs may not use {what}: the pods of its pools ({pools}) need none"

    rules = [
        {
            "expression": "variables.pods.all(p, !(has(p.hostPID) && p.hostPID) && !(has(p.hostIPC) && p.hostIPC))",
            "message": f"team {team.name}'s jobs may not share the node's process or IPC namespace",
        }
    ]
    if not pods.host_network:
        rules.append(
            {
                "expression": "variables.pods.all(p, !has(p.hostNetwork) || !p.hostNetwork)",
                "message": forbidden("the host network"),
            }
        )
    if not pods.privileged:
        rules.append(
            {
                "expression": each_container(f"{context('privileged')} || !c.securityContext.privileged"),
                "message": forbidden("a privileged container"),
            }
        )
    paths = ", ".join(f"'{p}'" for p in sorted(pods.host_paths))
    rules.append(
        {
            "expression": "variables.pods.all(p, !has(p.volumes) || "
            f"p.volumes.all(v, !has(v.hostPath) || v.hostPath.path in [{paths}]))",
            "message": f"team {team.name}'s jobs may mount from the node only "
            + (", ".join(sorted(pods.host_paths)) if pods.host_paths else "nothing")
            + f" (what the pods of its pools, {pools}, mount)",
        }
    )
    capabilities = sorted(BASELINE_CAPABILITIES | pods.capabilities)
    listed = ", ".join(f"'{c}'" for c in capabilities)
    rules.append(
        {
            "expression": each_container(
                f"{context('capabilities')} || !has(c.securityContext.capabilities.add) || "
                f"c.securityContext.capabilities.add.all(a, a in [{listed}])"
            ),
            "message": f"team {team.name}'s jobs may add only the capabilities {', '.join(capabilities)}",
        }
    )
    return [
        {**rule, "expression": f"variables.jobsetController || {rule['expression']}", "reason": "Forbidden"}
        for rule in rules
    ]


def admission_policy(team: Team, pods: PodAllowance | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """A ValidatingAdmissionPolicy and its binding: in the team's namespace the API server refuses
    a JobSet or Job that does not queue in the team's LocalQueue, names a Kueue priority class the
    team may not use, or (from a member of the team's groups) the fabric check's class; with `pods`
    (None on a MultiKueue manager, whose runs' pods run on the workers, each enforcing its own),
    one whose pods need more of the node than `pods` allows. Kueue lets
    any job name any queue or WorkloadPriorityClass, and runs one that names none outside every
    quota. The Jobs the JobSet controller creates for a JobSet, which name no queue, are told by who
    creates them (a service account of the JobSet namespace), not by an owner reference anyone can
    write. Admission policies are GA from Kubernetes 1.30
    (https://kubernetes.io/docs/reference/access-authn-authz/validating-admission-policy/)."""
    name = f"nemo-team-{team.name}"
    allowed = (*team.priorities, FABRIC_CHECK_PRIORITY)
    listed = ", ".join(f"'{p}'" for p in allowed)
    groups = ", ".join(f"'{g}'" for g in team.groups)

    def label(obj: str, key: str) -> str:
        return f"has({obj}.metadata.labels) && '{key}' in {obj}.metadata.labels ? {obj}.metadata.labels['{key}'] : ''"

    policy = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "resourceRules": [
                    {
                        "apiGroups": [group],
                        "apiVersions": ["*"],
                        "operations": ["CREATE", "UPDATE"],
                        "resources": [resource],
                    }
                    for group, resource in (("jobset.x-k8s.io", "jobsets"), ("batch", "jobs"))
                ]
            },
            "variables": [
                {
                    "name": "jobsetController",
                    "expression": f"request.userInfo.username.startsWith('{service_account_user(JOBSET_NAMESPACE)}')",
                },
                {"name": "queue", "expression": label("object", QUEUE_NAME_LABEL)},
                {"name": "priority", "expression": label("object", PRIORITY_CLASS_LABEL)},
                # Without the label Kueue takes the pods' priorityClassName (pkg/controller/
                # jobframework/reconciler.go), so a template may not name one instead.
                {
                    "name": "podPriorityClasses",
                    "expression": "has(object.spec.replicatedJobs) ? object.spec.replicatedJobs.filter(r, "
                    "has(r.template.spec.template.spec.priorityClassName)).size() : "
                    "(has(object.spec.template.spec.priorityClassName) ? 1 : 0)",
                },
                {
                    "name": "pods",
                    "expression": "has(object.spec.replicatedJobs) ? "
                    "object.spec.replicatedJobs.map(r, r.template.spec.template.spec) : [object.spec.template.spec]",
                },
                {
                    "name": "member",
                    "expression": f"request.userInfo.groups.exists(g, g in [{groups}])" if groups else "false",
                },
            ],
            "validations": [
                {
                    "expression": f"variables.jobsetController || variables.queue == '{team.local_queue}'",
                    "message": f"team {team.name}'s jobs queue in its LocalQueue {team.local_queue}: label "
                    f"{QUEUE_NAME_LABEL}: {team.local_queue} (Kueue admits nothing else within the team's share)",
                    "reason": "Forbidden",
                },
                {
                    "expression": (
                        "variables.jobsetController || "
                        # Kueue suspends and resumes what it admitted: an update that keeps the class.
                        f"(request.operation == 'UPDATE' && ({label('oldObject', PRIORITY_CLASS_LABEL)}) == "
                        "variables.priority) || "
                        "(variables.priority == '' ? variables.podPriorityClasses == 0 : "
                        f"variables.priority in [{listed}])"
                    ),
                    "message": f"team {team.name} may use the priority classes {', '.join(team.priorities)} (the "
                    f"label {PRIORITY_CLASS_LABEL}, not a pod priorityClassName)",
                    "reason": "Forbidden",
                },
                {
                    "expression": f"!(variables.member && variables.priority == '{FABRIC_CHECK_PRIORITY}')",
                    "message": f"the priority class {FABRIC_CHECK_PRIORITY} is the fabric checks' (training.ncclTests "
                    "of the platform's stack), above every run: a team member's job may not use it",
                    "reason": "Forbidden",
                },
                *(_pod_rules(team, pods) if pods is not None else []),
            ],
        },
    }
    binding = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name},
        "spec": {
            "policyName": name,
            "validationActions": ["Deny"],
            "matchResources": {"namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: team.namespace}}},
        },
    }
    return policy, binding


@dataclass(frozen=True)
class TeamBuckets:
    """The GKE platform's buckets and Filestore share, which a team's volumes mount."""

    filestore: FilestoreSource
    data_bucket: pulumi.Input[str]
    data_mount_options: Sequence[str]
    checkpoint_bucket: pulumi.Input[str]
    checkpoint_mount_options: Sequence[str]


@dataclass(frozen=True)
class TeamClaimsOnClass:
    """An existing cluster: the team's claims come from its ReadWriteMany StorageClass."""

    storage_class: str
    size_gib: int


@dataclass(frozen=True)
class TeamSpaceArgs:
    team: Team
    # None: not on GKE, so no Workload Identity principals.
    project: str | None
    workload_pool: str
    # The team's training and data-preparation accounts (the platform's names, in its namespace).
    training_account: str
    data_prep_account: str
    # Shared, data and checkpoint claims, in that order (the platform's names).
    claim_names: tuple[str, str, str]
    # None: a MultiKueue manager's team, whose runs run on the workers: a namespace, its queue's
    # priority policy and submitters only.
    storage: TeamBuckets | TeamClaimsOnClass | None
    # What the pods of the team's pools need beyond the Baseline pod security policy
    # (planners.gpudirect.machine_needs): the namespace's level and the policy's pod rules. None
    # on a manager: no pod of a run runs there.
    pods: PodAllowance | None
    # The namespace's labels beyond the platform's own (facts.nvsentinel's preflight).
    labels: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        require_no_problem(dns_label_problem(self.team.namespace), "team.namespace", self.team.namespace)
        require(len(set(self.claim_names)) == 3, "claim_names", self.claim_names, "names three distinct claims")
        if isinstance(self.storage, TeamBuckets):
            require(self.project is not None, "project", self.project, "is needed for the team's bucket folders")


def team_folder(team: Team) -> str:
    """The team's managed folder in each bucket (a folder name ends with '/')."""
    return f"{team.name}/"


class TeamSpace(pulumi.ComponentResource):
    """One team's namespace, identities, claims and submitters (see the module's docstring)."""

    TYPE = "nemo:teams:TeamSpace"

    namespace: pulumi.Output[str]
    # What the team's runs wait for: its accounts and claims.
    run_dependencies: list[pulumi.Resource]

    def __init__(self, name: str, args: TeamSpaceArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(self.TYPE, name, None, opts)
        team = args.team
        child = pulumi.ResourceOptions(parent=self)
        workspace = TrainingWorkspace(
            f"{name}-workspace",
            TrainingWorkspaceArgs(
                project=args.project,
                workload_pool=args.workload_pool,
                namespace=team.namespace,
                service_accounts=(args.training_account, args.data_prep_account) if args.storage else (),
                pod_security=(args.pods or PodAllowance()).level,
                labels=args.labels,
            ),
            opts=child,
        )
        self.namespace = workspace.namespace
        self.run_dependencies = list(workspace.accounts)
        policy, binding = admission_policy(team, args.pods)
        checked = k8s.admissionregistration.v1.ValidatingAdmissionPolicy(
            f"{name}-admission",
            metadata=policy["metadata"],
            spec=policy["spec"],
            opts=pulumi.ResourceOptions(parent=self, aliases=[pulumi.Alias(name=f"{name}-priorities")]),
        )
        self.run_dependencies.append(
            k8s.admissionregistration.v1.ValidatingAdmissionPolicyBinding(
                f"{name}-admission-binding",
                metadata=binding["metadata"],
                spec=binding["spec"],
                opts=pulumi.ResourceOptions(
                    parent=self,
                    depends_on=[checked, workspace],
                    aliases=[pulumi.Alias(name=f"{name}-priorities-binding")],
                ),
            )
        )
        if team.groups:
            role = k8s.rbac.v1.Role(
                f"{name}-submitter",
                metadata={"name": SUBMITTER_ROLE, "namespace": workspace.namespace},
                rules=[dict(rule) for rule in SUBMITTER_RULES],
                opts=child,
            )
            k8s.rbac.v1.RoleBinding(
                f"{name}-submitters",
                metadata={"name": SUBMITTER_ROLE, "namespace": workspace.namespace},
                role_ref={"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role.metadata.name},
                subjects=[{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": g} for g in team.groups],
                opts=child,
            )
        shared, data, checkpoints = args.claim_names
        storage = args.storage
        if storage is None:
            self.register_outputs({"namespace": self.namespace})
            return
        if isinstance(storage, TeamClaimsOnClass):
            claims = StorageClaims(
                f"{name}-storage",
                StorageClaimsArgs(
                    namespace=workspace.namespace,
                    claim_names=args.claim_names,
                    existing=(),
                    storage_class=storage.storage_class,
                    size_gib=storage.size_gib,
                ),
                opts=child,
            )
            self.run_dependencies += claims.claims
            self.register_outputs({"namespace": self.namespace})
            return
        training = workspace.principals[args.training_account]
        data_prep = workspace.principals[args.data_prep_account]
        for suffix, reader in (("data-read", training), ("data-prep-read", data_prep)):
            gcp.storage.BucketIAMMember(
                f"{name}-{suffix}",
                bucket=storage.data_bucket,
                role="roles/storage.objectViewer",
                member=reader,
                opts=child,
            )
        folders = []
        for suffix, bucket, writer in (
            ("data", storage.data_bucket, data_prep),
            ("checkpoints", storage.checkpoint_bucket, training),
        ):
            folder = gcp.storage.ManagedFolder(
                f"{name}-{suffix}-folder",
                bucket=bucket,
                name=team_folder(team),
                # `pulumi destroy` removes the folder's access scope even where it holds checkpoints; the
                # objects stay in the bucket (pulumi-gcp storage.ManagedFolder, force_destroy).
                force_destroy=True,
                opts=child,
            )
            access = gcp.storage.ManagedFolderIamMember(
                f"{name}-{suffix}-write",
                bucket=bucket,
                managed_folder=folder.name,
                role="roles/storage.objectUser",
                member=writer,
                opts=child,
            )
            folders.append(access)
        self.run_dependencies += [
            static_claim(
                f"{name}-shared",
                workspace.namespace,
                shared,
                storage.filestore.volume_spec(),
                size=storage.filestore.size,
                depends_on=[],
                parent=self,
            ),
            static_claim(
                f"{name}-data",
                workspace.namespace,
                data,
                bucket_volume_spec(storage.data_bucket, storage.data_mount_options),
                size=BUCKET_VOLUME_SIZE,
                depends_on=[],
                parent=self,
            ),
            static_claim(
                f"{name}-checkpoints",
                workspace.namespace,
                checkpoints,
                # Only the team's folder: its runs' checkpoint paths stay those of a platform without teams.
                bucket_volume_spec(
                    storage.checkpoint_bucket, (*storage.checkpoint_mount_options, f"only-dir={team.name}")
                ),
                size=BUCKET_VOLUME_SIZE,
                depends_on=folders,
                parent=self,
            ),
        ]
        self.register_outputs({"namespace": self.namespace})
