"""Project-level setup: the APIs the platform calls."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from facts.errors import require

# APIs every layer of the platform uses. Kept enabled on destroy: other workloads in the
# project may depend on them, and disabling an API can take resources down with it.
PLATFORM_APIS = (
    "artifactregistry.googleapis.com",
    "cloudkms.googleapis.com",
    "cloudresourcemanager.googleapis.com",
    "compute.googleapis.com",
    "container.googleapis.com",
    "file.googleapis.com",
    "iam.googleapis.com",
    "iamcredentials.googleapis.com",
    "logging.googleapis.com",
    "monitoring.googleapis.com",
    "serviceusage.googleapis.com",
    "storage.googleapis.com",
)


@dataclass(frozen=True)
class ProjectServicesArgs:
    project: str
    services: Sequence[str]

    def __post_init__(self) -> None:
        bad = [s for s in self.services if not s.endswith(".googleapis.com")]
        require(not bad, "services", bad, "must be service names ending in .googleapis.com")


class ProjectServices(pulumi.ComponentResource):
    """Enables APIs and leaves them enabled when the stack is destroyed."""

    TYPE = "nemo:project:ProjectServices"

    def __init__(self, name: str, args: ProjectServicesArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(self.TYPE, name, None, opts)
        for service in sorted(set(args.services)):
            gcp.projects.Service(
                f"{name}-{service.split('.', 1)[0]}",
                project=args.project,
                service=service,
                disable_on_destroy=False,
                disable_dependent_services=False,
                opts=pulumi.ResourceOptions(parent=self),
            )
        self.register_outputs({})
