"""A fabric check as one JobSet: nccl-tests across the pool's nodes (planners/fabric.py), admitted
by Kueue like a run, its output on the shared volume. A run that requires it waits: the
JobSet then carries `pulumi.com/waitFor: condition=Completed`, so `pulumi up` submits the run
only once the check passed (pulumi-kubernetes provider/pkg/metadata/overrides.go ReadyCondition;
JobSet's `Completed` condition, sigs.k8s.io/jobset api/jobset/v1alpha2/jobset_types.go)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

import payload
from components.kubernetes import KubernetesObject
from components.nvlink import channel_template, compute_domain
from components.training import REPLACE_JOB, field_env, gpu_container, gpu_jobset, named
from facts.errors import require
from facts.kubernetes import FABRIC_CHECK_LABEL, PART_OF, PRIORITY_CLASS_LABEL, QUEUE_NAME_LABEL, versioned_name
from facts.nccl import NCCL_TEST_LAUNCH
from facts.nvsentinel import preflight_annotations
from planners import nemo, workload
from planners.fabric import NCCL_TEST_SCRIPT, NcclTestSpec, nccl_test_env, nccl_test_image
from planners.gpudirect import PodNetworking
from planners.queues import Flavor

CONTAINER = "nccl-test"
# The check's waiter: the JobSet's Completed condition (Failed never satisfies it).
WAIT_FOR_COMPLETION = {"pulumi.com/waitFor": "condition=Completed"}


@dataclass(frozen=True)
class FabricCheckArgs:
    test: NcclTestSpec
    flavor: Flavor
    namespace: str
    local_queue: str
    priority: str
    service_account: str
    networking: PodNetworking
    shared_claim: str
    # Where the shared volume is mounted, and the check's folder on it.
    shared_mount: str
    results_dir: str
    # A run requires the check: `pulumi up` waits until it completed.
    awaited: bool
    after: Sequence[pulumi.Resource] = ()
    # NVSentinel's preflight checks of the node at the start of each pod (the platform's
    # nvsentinel.preflight, planners.gpudirect.node_checks); None: the platform asks for none.
    node_checks: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        require(self.test.pool == self.flavor.pool, "flavor", self.flavor.pool, f"is the check's pool {self.test.pool}")
        require(self.test.nodes <= self.flavor.nodes, "test.nodes", self.test.nodes, f"fit pool {self.flavor.pool}")
        require(
            self.flavor.machine.gpudirect in NCCL_TEST_LAUNCH,
            "flavor",
            self.flavor.machine.name,
            "has a GPUDirect flavour with a documented NCCL test",
        )
        require(
            self.results_dir.startswith(f"{self.shared_mount}/"), "results_dir", self.results_dir, "is on the volume"
        )


def nccl_test_jobset(args: FabricCheckArgs, config_map: str) -> dict[str, Any]:
    """The check's JobSet, unnamed."""
    test, machine, net = args.test, args.flavor.machine, args.networking
    env = nemo.with_nccl_init(nccl_test_env(test, machine, args.results_dir), machine, net)
    container = gpu_container(
        CONTAINER,
        nccl_test_image(machine, net.gib).ref,
        machine,
        net,
        command=["bash", f"{workload.WORKLOAD_DIR}/{NCCL_TEST_SCRIPT}"],
        env=field_env(env),
        volumeMounts=[
            {"name": "workload", "mountPath": workload.WORKLOAD_DIR},
            {"name": "shm", "mountPath": "/dev/shm"},
            {"name": "shared", "mountPath": args.shared_mount},
        ],
    )
    volumes = [
        {"name": "workload", "configMap": {"name": config_map, "defaultMode": 0o755}},
        {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "8Gi"}},
        {"name": "shared", "persistentVolumeClaim": {"claimName": args.shared_claim}},
    ]
    return gpu_jobset(
        namespace=args.namespace,
        labels={
            QUEUE_NAME_LABEL: args.local_queue,
            PRIORITY_CLASS_LABEL: args.priority,
            **PART_OF,
            FABRIC_CHECK_LABEL: test.name,
        },
        flavors=[args.flavor],
        nodes=test.nodes,
        max_restarts=0,
        service_account=args.service_account,
        net=net,
        container=container,
        volumes=volumes,
        pod_labels={FABRIC_CHECK_LABEL: test.name},
        annotations=preflight_annotations(args.node_checks),
        imex_channels=channel_template(check_compute_domain(args)),
    )


def check_compute_domain(args: FabricCheckArgs) -> dict[str, Any] | None:
    """The check's own ComputeDomain on a machine whose NVLink spans nodes: NCCL then measures
    NVLink between them, as CEA's A4X test does (gpudirect-rdma/nccl-test-imex-a4x.yaml@992db81)."""
    return compute_domain(args.flavor.machine, args.test.name, args.namespace, args.test.nodes)


class FabricCheck(pulumi.ComponentResource):
    """One check: a ConfigMap with the nccl-tests driver script and its JobSet."""

    TYPE = "nemo:fabric:FabricCheck"

    test_name: str
    namespace: str
    # What a run that requires the check depends on.
    jobset: pulumi.Resource
    jobset_name: str
    results_dir: str
    # `python -m analysis nccl --expect` for the pool's machine.
    flavour: str

    def __init__(self, name: str, args: FabricCheckArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(self.TYPE, name, None, opts)
        files = {name: payload.text(name) for name in (NCCL_TEST_SCRIPT, workload.NCCL_INIT)}
        config_name = versioned_name(f"{args.test.name}-nccl", files)
        config_map = k8s.core.v1.ConfigMap(
            f"{name}-script",
            metadata={"name": config_name, "namespace": args.namespace, "labels": {FABRIC_CHECK_LABEL: args.test.name}},
            data=files,
            opts=pulumi.ResourceOptions(parent=self, depends_on=list(args.after)),
        )
        before: list[pulumi.Resource] = [config_map, *args.after]
        domain = check_compute_domain(args)
        if domain is not None:
            before.append(
                KubernetesObject(
                    f"{name}-nvlink", domain, opts=pulumi.ResourceOptions(parent=self, depends_on=list(args.after))
                )
            )
        manifest = named(args.test.name, nccl_test_jobset(args, config_name))
        if args.awaited:
            # Outside the digest: requiring a check that already passed does not run it again.
            manifest["metadata"]["annotations"] = dict(WAIT_FOR_COMPLETION)
        wait = (
            pulumi.ResourceOptions(
                custom_timeouts=pulumi.CustomTimeouts(
                    create=f"{args.test.timeout_minutes}m", update=f"{args.test.timeout_minutes}m"
                )
            )
            if args.awaited
            else pulumi.ResourceOptions()
        )
        self.jobset = KubernetesObject(
            f"{name}-jobset",
            manifest,
            opts=pulumi.ResourceOptions.merge(
                pulumi.ResourceOptions.merge(REPLACE_JOB, wait),
                pulumi.ResourceOptions(parent=self, depends_on=before),
            ),
        )
        self.test_name = args.test.name
        self.namespace = args.namespace
        self.jobset_name = manifest["metadata"]["name"]
        self.results_dir = args.results_dir
        self.flavour = args.flavor.machine.gpudirect.value
        self.register_outputs({"jobset": self.jobset_name, "results_dir": self.results_dir})
