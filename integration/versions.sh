# Versions of the integration lane's tools. Kueue and JobSet match facts/versions.py (a test ties them).
KUEUE_VERSION=v0.19.2
# The lane's Kueue reads its metrics certificate from $KUEUE_METRICS_CERT_DIR instead of the fixed
# /etc/kueue/metrics/certs (kueue cmd/kueue/main.go), so the lane writes nothing outside its folders
# and runs as any user; the binary's name carries the change.
KUEUE_LANE_PATCH=metrics-cert-dir
JOBSET_VERSION=v0.12.0
# The releases the upgrade scenario starts from (tests/integration/test_lane_upgrade.py): Kueue's
# previous minor and JobSet's previous release, as served by the Go module proxy.
KUEUE_PREVIOUS_VERSION=v0.18.2
JOBSET_PREVIOUS_VERSION=v0.11.1
KWOK_VERSION=v0.8.0
# Kubernetes of Kueue's own go.mod minor (k8s.io/kubernetes v1.36), and an etcd it supports; the
# wrapper modules under integration/wrappers pin the same versions (build-tools.sh checks).
KUBERNETES_VERSION=v1.36.3
ETCD_VERSION=v3.6.16
# The Pulumi CLI's config reader (its sdk module at the CLI version the engine scenarios use): the lane
# compares harness/stackfile.py with it (integration/wrappers/pulumi-config pins the same version).
PULUMI_SDK_VERSION=v3.274.1
# The Pulumi CLI the engine scenarios run (github.com/pulumi/pulumi/pkg/v3, cmd/pulumi); its go.mod
# replaces the sdk module with a path, so it builds through integration/wrappers/pulumi.
PULUMI_CLI_VERSION=v3.274.1
# The Kubernetes provider they run. The Go module proxy serves one version of
# github.com/pulumi/pulumi-kubernetes/provider/v4: this commit of 2026-01-15, after v4.24.0 (its
# go.mod requires sdk/v4 v4.24.0) and before v4.29.0 (no upsertExistingObjects: a create is a
# server-side apply). Built through integration/wrappers/pulumi-kubernetes.
PULUMI_KUBERNETES_VERSION=v4.0.0-20260115033456-f47bc2d6f199
