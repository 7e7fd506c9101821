"""This Pulumi project's own names."""

from __future__ import annotations

import re

# The project name in Pulumi.yaml, and the namespace of every config key (`nemo-gke:zone`).
PROJECT = "nemo-gke"

# pulumi/pulumi sdk/go/common/tokens/stack_name.go ParseStackName.
_STACK_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,100}$")


def stack_name_problem(name: str) -> str | None:
    if _STACK_NAME.match(name):
        return None
    if not name or len(name) > 100:
        return "must be 1 to 100 characters"
    return "may only contain alphanumeric, hyphens, underscores, or periods"


# A stack reference: `<org>/<project>/<stack>`, or a bare stack name of this project.
_STACK_REFERENCE = re.compile(r"^([^/\s]+/[^/\s]+/)?[A-Za-z0-9._-]+$")


def stack_reference_problem(reference: str) -> str | None:
    if not _STACK_REFERENCE.match(reference):
        return "must be <org>/<project>/<stack> or a stack name"
    return None


# The organization of every stack on a self-managed backend (gs://, file://).
# https://www.pulumi.com/docs/iac/concepts/stacks/#stackreferences
SELF_MANAGED_ORGANIZATION = "organization"


def qualified_stack_name(reference: str) -> str:
    """The full name of a referenced stack. A bare name means a stack of this project on a
    self-managed backend (gs://, file://), where every organization is called `organization`.
    https://www.pulumi.com/docs/iac/concepts/stacks/#stackreferences"""
    return reference if "/" in reference else f"{SELF_MANAGED_ORGANIZATION}/{PROJECT}/{reference}"


# Labels the program puts on every labelled Google Cloud resource of a stack, beside the stack's own.
MANAGED_BY_LABEL = "managed-by"
STACK_LABEL = "nemo-gke-stack"
PROGRAM_LABELS = (MANAGED_BY_LABEL, STACK_LABEL)

# Values the shipped stack files leave for the user to replace (`your-gcp-project`).
PLACEHOLDER_PREFIX = "your-"


def is_placeholder(value: str) -> bool:
    return value.startswith(PLACEHOLDER_PREFIX)


def project_advice(project: str) -> str | None:
    """A warning when the GCP project is still the shipped stack files' placeholder."""
    if not is_placeholder(project):
        return None
    return f"{PROJECT}:project {project!r} is a placeholder: `pulumi config set {PROJECT}:project <your project ID>`"
