"""Facts: the machine and model catalogs, pinned versions, and the names GKE, Kubernetes and
this program's objects share. Every fact is defined once, here, with its public source.

This package imports neither pulumi nor pydantic, so the config schema, the planners, the
components and the log analytics can all build on it (tests/repo/test_architecture.py checks).
"""
