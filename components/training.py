"""A NeMo pretraining run as one JobSet admitted by Kueue, and a data-preparation Job.

`run_jobset` and `data_prep_job` are pure: they return the manifests, so tests can read every
field; the components only register them.

How `pulumi up` treats a run once it is submitted (planners.submitted decides; harness/updates.py
models the engine):

- Its ConfigMap, ComputeDomain and JobSet are frozen: every field the program writes is under
  `ignoreChanges`, so neither an upgrade of the platform or the launcher nor `pulumi refresh`
  makes `up` touch it. `spec.suspend`, which Kueue sets and clears, is Kueue's alone
  (REPLACE_JOB). What else Kueue merges into the pod template is never seen: the provider compares
  only the fields the program set.
- Its revision is their `replacementTrigger`, and their names carry it (facts.kubernetes.revisioned):
  raised, the engine deletes the old JobSet (it frees its nodes), creates the new ConfigMap,
  ComputeDomain and JobSet, and deletes the old ConfigMap and ComputeDomain last, once no pod
  mounts them; the new JobSet resumes from the run's checkpoints.
- The JobSet is named after the run and its revision, so an interrupted `up` can never leave two of
  one run: the API server answers a second of the name by applying it over the first, which the
  JobSet webhook refuses where its pods differ (sigs.k8s.io/jobset pkg/webhooks/jobset_webhook.go
  ValidateUpdate).
- Nothing deletes a finished job (no `ttlSecondsAfterFinished`): it stays in the namespace and
  in the stack's state, so a later `up` never submits it again.

A data-preparation Job is named by a digest of its definition (facts.kubernetes.versioned_name): a
changed one is a new Job, the old one deleted first.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.kubernetes import KubernetesObject
from components.nvlink import channel_template, compute_domain
from facts import resiliency, versions
from facts.errors import require
from facts.gke import GCSFUSE_POD_ANNOTATIONS
from facts.kubernetes import (
    DEFINITION_ANNOTATION,
    GPU_RESOURCE,
    GPU_TAINT,
    IMEX_CHANNEL_CLAIM,
    IMPENDING_TERMINATION_TOLERATION,
    JOBSET_API,
    MODEL_LABEL,
    PART_OF,
    POD_FAILURE_POLICY_REASON,
    PRIORITY_CLASS_LABEL,
    PROGRAM_ERROR_EXIT_CODE,
    PROGRAM_ERROR_RULE,
    QUEUE_NAME_LABEL,
    RENDERED_ANNOTATION,
    REVISION_ANNOTATION,
    RUN_LABEL,
    RUN_REPLICATED_JOB,
    SKIP_AWAIT,
    TRAINING_CONTAINER,
    WORKLOAD_ANNOTATIONS_MAX_BYTES,
    cpu_quantity,
    digest,
    gib_quantity,
    mib_quantity,
    revisioned,
    versioned_name,
    workload_file_key,
)
from facts.kueue import MULTIKUEUE_CONTROLLER
from facts.machines import MachineType, training_pod_requests
from facts.nvsentinel import preflight_annotations
from facts.registries import RegistryMirror, resolve
from planners import nemo, workload
from planners.chains import pool_affinity
from planners.gpudirect import PodNetworking
from planners.nemo import RunPlan
from planners.queues import Flavor
from planners.runs import DataPrepSpec, RunSpec, topology_annotation
from planners.submitted import RunStep, Submitted, encoded, shown, submission
from planners.workload import RunPaths

GPU_TOLERATIONS = [GPU_TAINT.toleration(), IMPENDING_TERMINATION_TOLERATION]


def tolerations(flavor: Flavor) -> list[dict[str, str]]:
    """GPU pods tolerate the GPU taint, GKE's reclaim notice, and an existing pool's own taints."""
    return GPU_TOLERATIONS + flavor.pool_tolerations


MAX_SHARED_MEMORY_GIB = 256
# Seconds a GPU pod has to stop after SIGTERM (a supervised run's are the resiliency recipe's).
TERMINATION_GRACE_SECONDS = 30


@dataclass(frozen=True)
class Volumes:
    """The platform's claims and where pods mount them."""

    shared_claim: str
    shared_mount: str
    data_claim: str
    data_mount: str
    checkpoint_claim: str
    checkpoint_mount: str
    # GKE: the GPT-2 files on their own Cloud Storage FUSE volume. Off GKE: in the data claim.
    gke: bool = True
    # Claims of Cloud Storage FUSE: the pods carry the annotations of its sidecar.
    cloud_storage_fuse: bool = True

    def volumes(self) -> list[dict[str, Any]]:
        return [
            {"name": "shared", "persistentVolumeClaim": {"claimName": self.shared_claim}},
            {"name": "data", "persistentVolumeClaim": {"claimName": self.data_claim}},
            {"name": "checkpoints", "persistentVolumeClaim": {"claimName": self.checkpoint_claim}},
        ]

    def mounts(self, data_read_only: bool) -> list[dict[str, Any]]:
        return [
            {"name": "shared", "mountPath": self.shared_mount},
            {"name": "data", "mountPath": self.data_mount, "readOnly": data_read_only},
            {"name": "checkpoints", "mountPath": self.checkpoint_mount},
        ]


@dataclass(frozen=True)
class TrainingRunArgs:
    # The run as planned (planners.nemo.plan_run): its files, environment and entry point.
    plan: RunPlan
    # The pool the run is placed on, as Kueue sees it, and the pools it falls back to, in order.
    flavor: Flavor
    namespace: str
    local_queue: str
    service_account: str
    volumes: Volumes
    # What the JobSet waits for (and is deleted before): its queue, claims, identity, networks.
    after: Sequence[pulumi.Resource] = ()
    # The run's `env` holds encrypted values: it goes into a Secret the container reads
    # (`<run>-env`), never into the JobSet or the state as text.
    secret_env: bool = False
    # Dispatched by a MultiKueue manager to a worker (planners.multikueue). MultiKueue copies the
    # JobSet's spec and nothing else to the worker (kubernetes-sigs/kueue pkg/controller/jobs/jobset/
    # jobset_multikueue_adapter.go at the pinned version): the run's files travel in its pod
    # template's annotations, and it names no Secret or ComputeDomain of its own.
    dispatched: bool = False
    # The cluster's remote repositories, which the pods pull nvcr.io and Docker Hub images through.
    mirror: RegistryMirror | None = None
    # What the stack's state records of the run, and what `up` does to it.
    submitted: Submitted | None = None
    step: RunStep = RunStep.SUBMIT
    fallback: Sequence[Flavor] = ()

    @property
    def run(self) -> RunSpec:
        return self.plan.run

    @property
    def networking(self) -> PodNetworking:
        return self.plan.networking

    @property
    def paths(self) -> RunPaths:
        return self.plan.paths

    def __post_init__(self) -> None:
        require(self.run.pool == self.flavor.pool, "flavor", self.flavor.pool, f"is the run's pool {self.run.pool}")
        fallback = tuple(f.pool for f in self.fallback)
        require(fallback == self.run.fallback_pools, "fallback", fallback, f"are {self.run.fallback_pools}")
        require(
            all(f.machine == self.flavor.machine for f in self.fallback),
            "fallback",
            fallback,
            f"are {self.flavor.machine.name} pools",
        )
        require(
            self.plan.machine == self.flavor.machine,
            "plan.machine",
            self.plan.machine.name,
            f"is pool {self.flavor.pool}'s {self.flavor.machine.name}",
        )
        require(
            (self.submitted is None) == (self.step is RunStep.SUBMIT),
            "step",
            self.step.value,
            "is submit exactly for a run the stack has not submitted",
        )
        require(self.run.nodes <= self.flavor.nodes, "run.nodes", self.run.nodes, f"fit pool {self.flavor.pool}")
        if self.dispatched:
            # The copy runs on whichever worker takes it: its image cannot name one cluster's mirror.
            require(self.mirror is None, "mirror", self.mirror, "is one cluster's, and a worker runs the copy")
            require(not self.secret_env, "secret_env", self.secret_env, "is not copied to a MultiKueue worker")
            require(
                not self.flavor.machine.nvlink_across_nodes,
                "flavor",
                self.flavor.pool,
                "has NVLink domains, whose ComputeDomain MultiKueue does not copy",
            )


def fuse_annotations(volumes: Volumes) -> dict[str, str]:
    """GKE's Cloud Storage FUSE sidecar injection, where claims are buckets."""
    return dict(GCSFUSE_POD_ANNOTATIONS) if volumes.cloud_storage_fuse else {}


def _env(values: Mapping[str, str]) -> list[dict[str, Any]]:
    return [{"name": k, "value": v} for k, v in values.items()]


def _from_secret(secret: str, names: Sequence[str]) -> list[dict[str, Any]]:
    return [{"name": name, "valueFrom": {"secretKeyRef": {"name": secret, "key": name}}} for name in names]


def env_secret_name(run: RunSpec) -> str:
    """The Secret holding a run's encrypted `env`: one per run, kept across its revisions."""
    return f"{run.name}-env"


def _field(name: str, path: str) -> dict[str, Any]:
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}


# What the program queues (a JobSet, a Job) leaves `spec.suspend` to Kueue's webhook, which
# suspends a job that names a queue as it is created (kubernetes-sigs/kueue pkg/controller/jobs/
# jobset/jobset_webhook.go and job/job_webhook.go Default, jobframework.ApplyDefaultForSuspend;
# failurePolicy Fail, so none is created while Kueue is down). The program then owns no field Kueue
# changes: an apply over an admitted job (the next `up` taking what an interrupted one submitted)
# cannot conflict with Kueue on it, and a refresh reads back nothing the program wrote otherwise.
# A job is replaced by deleting it first: `pulumi up --replace` of an unchanged job keeps its
# name, and the engine would otherwise create the new one first (AlreadyExists). A changed job,
# named anew, frees its nodes before its successor queues for them.
REPLACE_JOB = pulumi.ResourceOptions(delete_before_replace=True)
# The fields a run's objects are written with, all kept once submitted.
FROZEN_CONFIG_MAP = ["metadata", "data"]
FROZEN_OBJECT = ["metadata", "spec"]


def frozen(revision: int, fields: Sequence[str]) -> pulumi.ResourceOptions:
    """A submitted run's object: `fields` kept as created, replaced (under its new revision's name)
    only when the run's revision changes."""
    return pulumi.ResourceOptions(ignore_changes=list(fields), replacement_trigger=revision)


def named(base: str, manifest: Mapping[str, Any]) -> dict[str, Any]:
    """The unnamed `manifest` named `<base>-<digest of the manifest>`: the digest covers every
    field, the ConfigMap's name included, and that name carries the digest of its files."""
    return {**manifest, "metadata": {"name": versioned_name(base, manifest), **manifest["metadata"]}}


def gpu_container(name: str, image: str, machine: MachineType, net: PodNetworking, **fields: Any) -> dict[str, Any]:
    """The main container of a GPU pod: every GPU of the node, the pod networking's mounts, and
    privileged where the flavour's pattern runs it so."""
    cpu, memory = training_pod_requests(machine)
    container: dict[str, Any] = {
        "name": name,
        "image": image,
        **fields,
        "resources": {
            "requests": {"cpu": cpu_quantity(cpu), "memory": mib_quantity(memory), GPU_RESOURCE: str(machine.gpus)},
            "limits": {GPU_RESOURCE: str(machine.gpus)},
        },
    }
    container["volumeMounts"] = [*container.get("volumeMounts", []), *net.mounts]
    if net.privileged:
        container["securityContext"] = {"privileged": True}
    return container


def field_env(values: Mapping[str, str]) -> list[dict[str, Any]]:
    """The pod-metadata variables first (others may refer to them as $(NAME)), then `values`."""
    return [*(_field(key, path) for key, path in nemo.FIELD_ENV.items()), *_env(values)]


def gpu_jobset(
    *,
    namespace: str,
    labels: Mapping[str, str],
    flavors: Sequence[Flavor],
    nodes: int,
    max_restarts: int,
    service_account: str,
    net: PodNetworking,
    container: dict[str, Any],
    volumes: Sequence[dict[str, Any]],
    pod_labels: Mapping[str, str],
    annotations: Mapping[str, str],
    termination_grace_seconds: int = TERMINATION_GRACE_SECONDS,
    imex_channels: str | None = None,
    managed_by: str | None = None,
    fail_fast: bool = False,
) -> dict[str, Any]:
    """An unnamed JobSet of one pod per node on the first of `flavors` with room (a run's chain,
    planners.chains; one flavor for any other job), suspended by Kueue's webhook until Kueue admits
    all of it (REPLACE_JOB), each pod wired for the pool's GPUDirect flavour.
    `imex_channels` names the ResourceClaimTemplate of a ComputeDomain (components.nvlink): each pod claims its IMEX
    channel from it, and its container gets the channel (GKE's A4X guide). `managed_by` hands the
    JobSet to another controller (MultiKueue's: the manager's JobSet controller leaves it alone).
    `fail_fast`: the container's program-error exit code fails the Job and the JobSet at once
    (program_error_policy); any other failure restarts the JobSet within `max_restarts`."""
    if imex_channels is not None:
        container = {
            **container,
            "resources": {**container["resources"], "claims": [{"name": IMEX_CHANNEL_CLAIM}]},
        }
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "serviceAccountName": service_account,
        # Kueue offers the job only the flavors whose node labels this selector (or, for a chain,
        # this affinity) allows, so it is admitted on its own pools, never on another pool's quota.
        **(
            {"nodeSelector": flavors[0].selector}
            if len(flavors) == 1
            else {"affinity": pool_affinity([f.pool for f in flavors])}
        ),
        "tolerations": tolerations(flavors[0]),
        "terminationGracePeriodSeconds": termination_grace_seconds,
        # An empty list is dropped by the API server (omitempty): written, it would read back
        # as a change after every refresh.
        **({"initContainers": net.init_containers} if net.init_containers else {}),
        "containers": [container],
        "volumes": [*volumes, *net.volumes],
    }
    if imex_channels is not None:
        pod_spec["resourceClaims"] = [{"name": IMEX_CHANNEL_CLAIM, "resourceClaimTemplateName": imex_channels}]
    if net.host_network:
        pod_spec.update(hostNetwork=True, dnsPolicy="ClusterFirstWithHostNet")
    return {
        "apiVersion": JOBSET_API,
        "kind": "JobSet",
        "metadata": {"namespace": namespace, "labels": dict(labels)},
        "spec": {
            **({"managedBy": managed_by} if managed_by else {}),
            "failurePolicy": {
                "maxRestarts": max_restarts,
                **({"rules": [PROGRAM_ERROR_JOBSET_RULE]} if fail_fast else {}),
            },
            "network": {"enableDNSHostnames": True, "publishNotReadyAddresses": True},
            "replicatedJobs": [
                {
                    "name": RUN_REPLICATED_JOB,
                    "replicas": 1,
                    "template": {
                        "spec": {
                            "parallelism": nodes,
                            "completions": nodes,
                            "completionMode": "Indexed",
                            "backoffLimit": 0,
                            **({"podFailurePolicy": program_error_policy(container["name"])} if fail_fast else {}),
                            "template": {
                                "metadata": {
                                    "labels": dict(pod_labels),
                                    "annotations": {
                                        "kubectl.kubernetes.io/default-container": container["name"],
                                        **annotations,
                                        **net.annotations,
                                    },
                                },
                                "spec": pod_spec,
                            },
                        }
                    },
                }
            ],
        },
    }


# The JobSet fails, never restarts, when a Job failed by its pod failure policy: a program error.
PROGRAM_ERROR_JOBSET_RULE = {
    "name": PROGRAM_ERROR_RULE,
    "action": "FailJobSet",
    "onJobFailureReasons": [POD_FAILURE_POLICY_REASON],
}


def program_error_policy(container: str) -> dict[str, Any]:
    """The Job fails at once when the container exits with the program-error code (a pod failure
    policy needs restartPolicy Never, which every pod here has)."""
    exit_codes = {"containerName": container, "operator": "In", "values": [PROGRAM_ERROR_EXIT_CODE]}
    return {"rules": [{"action": "FailJob", "onExitCodes": exit_codes}]}


def run_env(args: TrainingRunArgs) -> list[dict[str, Any]]:
    """The training container's environment: the platform's, then the run's `env` (as text, or
    read from the run's Secret where it holds encrypted values), which may replace the platform's."""
    run, platform = args.run, args.plan.env
    if not args.secret_env:
        return field_env({**platform, **run.env})
    kept = {name: value for name, value in platform.items() if name not in run.env}
    return [*field_env(kept), *_from_secret(env_secret_name(run), list(run.env))]


def workload_volume(args: TrainingRunArgs, config_map: str, files: Mapping[str, str]) -> dict[str, Any]:
    """The run's files, each at workload.file_path: the ConfigMap `config_map`, or, for a dispatched run,
    its pod template's annotations (workload_annotations) read through the downward API."""
    if not args.dispatched:
        keys = [{"key": name, "path": workload.file_path(name)} for name in files]
        return {"name": "workload", "configMap": {"name": config_map, "defaultMode": 0o755, "items": keys}}
    fields = [
        {
            "path": workload.file_path(name),
            "fieldRef": {"fieldPath": f"metadata.annotations['{workload_file_key(name)}']"},
        }
        for name in files
    ]
    return {"name": "workload", "downwardAPI": {"defaultMode": 0o755, "items": fields}}


def workload_annotations(args: TrainingRunArgs, files: Mapping[str, str]) -> dict[str, str]:
    """A dispatched run's files as pod annotations, within the API server's limit on their size."""
    if not args.dispatched:
        return {}
    found = {workload_file_key(name): text for name, text in files.items()}
    size = sum(len(k) + len(v.encode()) for k, v in found.items())
    require(size <= WORKLOAD_ANNOTATIONS_MAX_BYTES, "files", size, f"fit {WORKLOAD_ANNOTATIONS_MAX_BYTES} bytes")
    return found


def run_jobset(args: TrainingRunArgs, config_map: str, files: Mapping[str, str]) -> dict[str, Any]:
    """The run's JobSet, unnamed: suspended until Kueue admits all of it, one pod per node, with
    its files (workload_volume)."""
    run, machine, net = args.run, args.flavor.machine, args.networking
    tokenizer_volumes, tokenizer_mounts = workload.tokenizer_volumes(run.tokenizer) if args.volumes.gke else ([], [])
    supervised = run.resiliency.supervisor
    shm_gib = min(
        resiliency.SUPERVISED_SHARED_MEMORY_GIB if supervised else MAX_SHARED_MEMORY_GIB, machine.memory_gib // 4
    )
    entry_args = list(args.plan.entrypoint[1])
    container = gpu_container(
        TRAINING_CONTAINER,
        resolve(run.image_ref, args.mirror),
        machine,
        net,
        command=["bash", f"{workload.WORKLOAD_DIR}/{workload.LAUNCHER}"],
        # An empty list is dropped by the API server (omitempty): written, it reads back as a change.
        **({"args": entry_args} if entry_args else {}),
        env=run_env(args),
        volumeMounts=[
            {"name": "workload", "mountPath": workload.WORKLOAD_DIR},
            {"name": "shm", "mountPath": "/dev/shm"},
            {"name": "local-ssd", "mountPath": workload.LOCAL_SSD},
            *args.volumes.mounts(data_read_only=True),
            *tokenizer_mounts,
        ],
    )
    local_checkpoints = (
        [{"name": "local-checkpoints", "hostPath": {"path": resiliency.NODE_EPHEMERAL_SSD, "type": "Directory"}}]
        if args.paths.local_checkpoint_dir
        else []
    )
    container["volumeMounts"] += [
        {"name": v["name"], "mountPath": resiliency.LOCAL_CHECKPOINT_MOUNT} for v in local_checkpoints
    ]
    volumes = [
        *local_checkpoints,
        workload_volume(args, config_map, files),
        {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": gib_quantity(shm_gib)}},
        # Ephemeral storage sits on the node's local NVMe SSDs.
        {"name": "local-ssd", "emptyDir": {}},
        *args.volumes.volumes(),
        *tokenizer_volumes,
    ]
    labels = {
        QUEUE_NAME_LABEL: args.local_queue,
        PRIORITY_CLASS_LABEL: run.priority,
        **PART_OF,
        RUN_LABEL: run.name,
        MODEL_LABEL: run.model,
    }
    return gpu_jobset(
        namespace=args.namespace,
        labels=labels,
        flavors=[args.flavor, *args.fallback],
        nodes=run.nodes,
        max_restarts=run.max_restarts,
        service_account=args.service_account,
        net=net,
        container=container,
        volumes=volumes,
        pod_labels={RUN_LABEL: run.name},
        annotations={
            **fuse_annotations(args.volumes),
            **topology_annotation(run, args.flavor),
            **workload_annotations(args, files),
            **preflight_annotations(args.plan.node_checks),
        },
        # The resiliency recipe's: the supervisor replaces a failed node's pods at once.
        termination_grace_seconds=(
            resiliency.SUPERVISED_TERMINATION_GRACE_SECONDS if supervised else TERMINATION_GRACE_SECONDS
        ),
        imex_channels=channel_template(run_compute_domain(args)),
        managed_by=MULTIKUEUE_CONTROLLER if args.dispatched else None,
        fail_fast=args.plan.preflight,
    )


def run_compute_domain(args: TrainingRunArgs) -> dict[str, Any] | None:
    return compute_domain(args.flavor.machine, jobset_name(args.run), args.namespace, args.run.nodes)


class TrainingRun(pulumi.ComponentResource):
    """One run: a ConfigMap with its launcher and NeMo configuration, and its JobSet. Its outputs
    record what it was submitted with (planners.submitted.recorded_of reads them back)."""

    TYPE = "nemo:training:TrainingRun"

    run_name: str
    namespace: str
    jobset_name: str
    log_dir: str
    # What the owner does to submit the run again.
    resubmit: str

    def __init__(self, name: str, args: TrainingRunArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(self.TYPE, name, None, opts)
        run = args.run
        files = dict(args.plan.files)
        config_name = revisioned(f"{run.name}-workload", run.revision)
        # What the JobSet waits for: its ConfigMap, the run's Secret, its ComputeDomain. The
        # ConfigMap and ComputeDomain of a raised revision are new ones, created before the JobSet
        # and the old ones deleted at the end of the update, once the old JobSet is gone.
        before: list[pulumi.Resource] = []
        if not args.dispatched:
            before.append(
                k8s.core.v1.ConfigMap(
                    f"{name}-workload",
                    metadata={"name": config_name, "namespace": args.namespace, "labels": {RUN_LABEL: run.name}},
                    data=files,
                    opts=pulumi.ResourceOptions.merge(
                        frozen(run.revision, FROZEN_CONFIG_MAP),
                        pulumi.ResourceOptions(parent=self, depends_on=list(args.after)),
                    ),
                )
            )
        if args.secret_env and run.env:
            # Not frozen: it holds the run's `env` alone, which changes only with its revision
            # (planners.submitted refuses it otherwise).
            before.append(
                k8s.core.v1.Secret(
                    f"{name}-env",
                    metadata={
                        "name": env_secret_name(run),
                        "namespace": args.namespace,
                        "labels": {RUN_LABEL: run.name},
                    },
                    string_data=pulumi.Output.secret(dict(run.env)),
                    opts=pulumi.ResourceOptions(parent=self),
                )
            )
        domain = run_compute_domain(args)
        if domain is not None:
            before.append(
                KubernetesObject(
                    f"{name}-nvlink",
                    domain,
                    opts=pulumi.ResourceOptions.merge(
                        frozen(run.revision, FROZEN_OBJECT),
                        pulumi.ResourceOptions(parent=self, depends_on=list(args.after)),
                    ),
                )
            )
        jobset = run_jobset(args, config_name, files)
        rendered = digest({"jobset": jobset, "files": files, "domain": domain})
        KubernetesObject(
            f"{name}-jobset",
            submitted_jobset(jobset, run, rendered, args.secret_env),
            opts=pulumi.ResourceOptions.merge(
                frozen(run.revision, FROZEN_OBJECT),
                # Deleted before its successor is created: it frees its nodes, and two of one run
                # never train into the same checkpoint folder.
                pulumi.ResourceOptions(delete_before_replace=True, parent=self, depends_on=[*before, *args.after]),
            ),
        )
        for advice in args.plan.advice:
            pulumi.log.warn(advice, resource=self)
        said = submission(
            run.name,
            revision=run.revision,
            jobset=jobset_name(run),
            rendered=rendered,
            step=args.step,
            submitted=args.submitted,
        )
        if said.warning:
            pulumi.log.warn(said.warning, resource=self)
        if said.notice:
            pulumi.log.info(said.notice, resource=self)
        self.run_name = run.name
        self.namespace = args.namespace
        self.jobset_name = said.jobset
        self.log_dir = args.paths.experiment_dir
        self.resubmit = f"raise run {run.name}'s revision to {run.revision + 1}, then pulumi up"
        definition: pulumi.Input[str] = pulumi.Output.secret(run.definition) if args.secret_env else run.definition
        self.register_outputs(
            {
                "run": run.name,
                "jobset": self.jobset_name,
                "namespace": self.namespace,
                "log_dir": self.log_dir,
                "resubmit": self.resubmit,
                "revision": run.revision,
                "definition": definition,
                "plan": args.plan.to_plain(),
                **({"rendered": said.rendered} if said.rendered else {}),
            }
        )


def jobset_name(run: RunSpec) -> str:
    """The name of the run's JobSet at its revision."""
    return revisioned(run.name, run.revision)


def submitted_jobset(jobset: Mapping[str, Any], run: RunSpec, rendered: str, secret_env: bool) -> dict[str, Any]:
    """The run's JobSet, named after the run and its revision, showing what it is submitted with
    (planners.submitted)."""
    metadata = jobset["metadata"]
    annotations = {
        **metadata.get("annotations", {}),
        REVISION_ANNOTATION: str(run.revision),
        DEFINITION_ANNOTATION: encoded(shown(json.loads(run.definition), secret_env)),
        RENDERED_ANNOTATION: rendered,
    }
    return {**jobset, "metadata": {"name": jobset_name(run), **metadata, "annotations": annotations}}


@dataclass(frozen=True)
class DataPreparationArgs:
    job: DataPrepSpec
    # The pool whose CPUs run the job.
    flavor: Flavor
    namespace: str
    local_queue: str
    service_account: str
    volumes: Volumes
    after: Sequence[pulumi.Resource] = ()
    mirror: RegistryMirror | None = None

    def __post_init__(self) -> None:
        require(self.job.workers >= 1, "job.workers", self.job.workers, "must be at least 1")
        require(self.job.pool == self.flavor.pool, "flavor", self.flavor.pool, f"is the job's pool {self.job.pool}")


def data_prep_job(args: DataPreparationArgs) -> dict[str, Any]:
    """A Job, unnamed, queued through Kueue on a GPU pool's CPUs, writing .bin/.idx to the data bucket."""
    job, data = args.job, args.volumes.data_mount
    tokenizer = workload.tokenizer_settings(job.tokenizer, data, workload.gpt2_dir(data, args.volumes.gke))
    tokenizer_volumes, tokenizer_mounts = workload.tokenizer_volumes(job.tokenizer) if args.volumes.gke else ([], [])
    input_path = f"{data}/{job.input}"
    folder = not job.input.endswith((".json", ".jsonl", ".gz"))
    command = nemo.preprocess_command(
        input_path, f"{data}/{job.output_prefix}", job.json_key, tokenizer, job.workers
    ) + (["--preproc-folder"] if folder else [])
    script = f'set -euo pipefail\nmkdir -p "$(dirname {data}/{job.output_prefix})"\n' + " ".join(command) + "\n"
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "namespace": args.namespace,
            "labels": {QUEUE_NAME_LABEL: args.local_queue, **PART_OF},
            # Tokenizing a corpus takes hours: `pulumi up` submits it and moves on.
            "annotations": dict(SKIP_AWAIT),
        },
        "spec": {
            "backoffLimit": 2,
            "template": {
                "metadata": {"annotations": fuse_annotations(args.volumes)},
                "spec": {
                    "restartPolicy": "Never",
                    "serviceAccountName": args.service_account,
                    "nodeSelector": args.flavor.selector,
                    "tolerations": tolerations(args.flavor),
                    "containers": [
                        {
                            "name": "preprocess",
                            "image": resolve(versions.NEMO_2.ref, args.mirror),
                            "command": ["bash", "-c", script],
                            "env": _env(workload.OFFLINE_ENV),
                            "resources": {
                                "requests": {"cpu": str(job.workers + 2), "memory": gib_quantity(4 * job.workers + 16)},
                            },
                            "volumeMounts": [*args.volumes.mounts(data_read_only=False), *tokenizer_mounts],
                        }
                    ],
                    "volumes": [*args.volumes.volumes(), *tokenizer_volumes],
                },
            },
        },
    }


class DataPreparation(pulumi.ComponentResource):
    """Tokenizes JSONL from the data bucket into Megatron .bin/.idx files in the same bucket."""

    TYPE = "nemo:training:DataPreparation"

    spec_name: str
    namespace: str
    job_name: str

    def __init__(self, name: str, args: DataPreparationArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(self.TYPE, name, None, opts)
        job = named(args.job.name, data_prep_job(args))
        k8s.batch.v1.Job(
            f"{name}-job",
            metadata=job["metadata"],
            spec=job["spec"],
            opts=pulumi.ResourceOptions.merge(
                REPLACE_JOB, pulumi.ResourceOptions(parent=self, depends_on=list(args.after))
            ),
        )
        self.spec_name = args.job.name
        self.namespace = args.namespace
        self.job_name = job["metadata"]["name"]
        self.register_outputs({"job": self.job_name})
