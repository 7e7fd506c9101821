"""`pulumi up` entry point: deploys the layers named by this stack's `nemo-gke:layers` (see README)."""

from stacks import program

program.main()
