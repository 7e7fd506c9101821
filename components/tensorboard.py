"""TensorBoard on the training logs of the shared file system."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s

from facts import versions
from facts.errors import require
from facts.kubernetes import cpu_quantity, mib_quantity
from facts.registries import RegistryMirror, resolve

PORT = 6006


@dataclass(frozen=True)
class TensorBoardArgs:
    namespace: pulumi.Input[str]
    # Claim of the shared file system and the log folder inside it.
    claim: k8s.core.v1.PersistentVolumeClaim
    mount_path: str
    log_dir: str
    node_selector: Mapping[str, str]
    cpu_millicores: int
    memory_mib: int
    # Also create a Vertex AI TensorBoard instance in this project and region.
    vertex_ai: tuple[str, str] | None = None
    # Labels of the Vertex AI instance.
    labels: Mapping[str, str] = field(default_factory=dict)
    # The cluster's remote repositories, which the image comes through.
    mirror: RegistryMirror | None = None

    def __post_init__(self) -> None:
        require(self.cpu_millicores > 0, "cpu_millicores", self.cpu_millicores, "must be positive")
        require(self.memory_mib > 0, "memory_mib", self.memory_mib, "must be positive")
        require(self.log_dir.startswith(self.mount_path), "log_dir", self.log_dir, f"lies under {self.mount_path}")


class TensorBoard(pulumi.ComponentResource):
    """A Deployment on the system pool with a ClusterIP Service; reach it with port-forward."""

    TYPE = "nemo:tensorboard:TensorBoard"

    port_forward_command: pulumi.Output[str]
    vertex_ai_tensorboard: pulumi.Output[str] | None

    def __init__(self, name: str, args: TensorBoardArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(self.TYPE, name, None, opts)
        labels = {"app.kubernetes.io/name": "tensorboard"}
        deployment = k8s.apps.v1.Deployment(
            f"{name}-deployment",
            metadata={"name": "tensorboard", "namespace": args.namespace, "labels": labels},
            spec={
                "replicas": 1,
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "nodeSelector": dict(args.node_selector),
                        "securityContext": {"runAsNonRoot": True, "runAsUser": 65534, "runAsGroup": 65534},
                        "containers": [
                            {
                                "name": "tensorboard",
                                "image": resolve(versions.TENSORBOARD.ref, args.mirror),
                                "command": [
                                    "tensorboard",
                                    f"--logdir={args.log_dir}",
                                    "--bind_all",
                                    f"--port={PORT}",
                                    "--reload_interval=60",
                                ],
                                "env": [{"name": "HOME", "value": "/tmp"}],
                                "ports": [{"name": "http", "containerPort": PORT}],
                                "readinessProbe": {"httpGet": {"path": "/", "port": PORT}, "periodSeconds": 10},
                                "resources": {
                                    "requests": {
                                        "cpu": cpu_quantity(args.cpu_millicores),
                                        "memory": mib_quantity(args.memory_mib),
                                    },
                                    "limits": {"memory": mib_quantity(args.memory_mib)},
                                },
                                "securityContext": {
                                    "allowPrivilegeEscalation": False,
                                    "capabilities": {"drop": ["ALL"]},
                                },
                                "volumeMounts": [
                                    {"name": "shared", "mountPath": args.mount_path, "readOnly": True},
                                    {"name": "tmp", "mountPath": "/tmp"},
                                ],
                            }
                        ],
                        "volumes": [
                            {
                                "name": "shared",
                                "persistentVolumeClaim": {"claimName": args.claim.metadata.name, "readOnly": True},
                            },
                            {"name": "tmp", "emptyDir": {}},
                        ],
                    },
                },
            },
            # The pod holds the claim: it must go before the claim does.
            opts=pulumi.ResourceOptions(parent=self, depends_on=[args.claim]),
        )
        service = k8s.core.v1.Service(
            f"{name}-service",
            metadata={"name": "tensorboard", "namespace": args.namespace, "labels": labels},
            spec={
                "type": "ClusterIP",
                "selector": labels,
                "ports": [{"name": "http", "port": PORT, "targetPort": PORT}],
            },
            opts=pulumi.ResourceOptions(parent=self, depends_on=[deployment]),
        )
        self.port_forward_command = pulumi.Output.concat(
            "kubectl -n ", service.metadata.namespace, " port-forward svc/", service.metadata.name, f" {PORT}:{PORT}"
        )
        self.vertex_ai_tensorboard = None
        if args.vertex_ai is not None:
            project, region = args.vertex_ai
            self.vertex_ai_tensorboard = gcp.vertex.AiTensorboard(
                f"{name}-vertex-ai",
                display_name=f"{name} training logs",
                project=project,
                region=region,
                labels=dict(args.labels),
                opts=pulumi.ResourceOptions(parent=self),
            ).name
        self.register_outputs({"port_forward_command": self.port_forward_command})
