"""The program: read the stack config once, deploy the layers it names, export their outputs."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pulumi
import pulumi_gcp as gcp

from config.loader import ConfigError, parse_stack_config, unread_keys, without_secrets
from config.stack import Layer, StackConfig
from facts.errors import RuleError
from facts.kubernetes import stack_identity as identity_of
from facts.kueue import Dispatch
from facts.project import MANAGED_BY_LABEL, PROJECT, STACK_LABEL, qualified_stack_name
from facts.pulumi_cli import SHOWN_ERROR_EXIT_CODE
from planners.submitted import Submitted
from planners.summary import CpuPool, Filestore, plan_summary
from stacks import bootstrap, cluster, existing, multikueue, ownership, platform, training
from stacks.contract import ClusterExports, PlatformExports
from stacks.kubeapi import CrdReader, KubeconfigReader, ObjectReader, read_live
from stacks.kubeapi import read_crds as read_cluster_crds
from stacks.kubeapi import read_kubeconfig as read_kubeconfig_file
from stacks.recorded import recorded_runs
from stacks.upstream import Upstream

# What an inline program ends on after showing its refusal.
REFUSED_ABOVE = "the stack configuration was refused: see the error above"


class InvalidStackConfig(ConfigError):
    """The stack's config, refused: one line per bad key, secret values masked."""


def main() -> None:
    """The program under the Pulumi CLI. A refused configuration is shown once, as an error of the
    stack, and the program ends the way the Python language host takes as "shown to the user"
    (facts.pulumi_cli.SHOWN_ERROR_EXIT_CODE): no second copy, no traceback.

    It ends at once: a program that ends by an exception has the SDK first send every
    registration it queued (pulumi/runtime/stack.py `run_pulumi_func` waits for outstanding RPCs,
    then re-raises), and the check of an existing cluster's names refuses once the objects are
    built (stacks.ownership). The error, logged without a resource, reaches the engine before
    `log.error` returns (pulumi/log.py `_log`)."""
    try:
        run()
    except InvalidStackConfig as refused:
        pulumi.log.error(str(refused))
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(SHOWN_ERROR_EXIT_CODE)


def inline() -> None:
    """The program as an Automation API inline program (`program=stacks.program.inline`). A
    refusal is shown once there too: the inline server cannot mark an error as already shown (it
    never sets RunResponse.bail, pulumi/automation/_server.py) and the engine repeats the error a
    program ends with ("an unhandled error occurred", pulumi/pkg/resource/deploy/program_source.go),
    so the run ends on a short error that points at the refusal above it."""
    try:
        run()
    except InvalidStackConfig as refused:
        pulumi.log.error(str(refused))
        raise pulumi.RunError(REFUSED_ABOVE) from None


def stack_config_values() -> dict[str, str]:
    """Every config value of this stack, as the Python language host hands them to the program
    (the PULUMI_CONFIG environment variable): unknown keys are reported, not ignored."""
    return {str(key): str(value) for key, value in pulumi.runtime.get_config_env().items()}


def stack_secret_keys(values: Mapping[str, str]) -> frozenset[str]:
    """The keys whose value holds a `secure:` leaf (PULUMI_CONFIG_SECRET_KEYS, as the language host
    hands them over)."""
    listed = set(pulumi.runtime.get_config_secret_keys_env())
    return frozenset(key for key in values if key in listed or pulumi.runtime.is_config_secret(key))


def utc_now() -> datetime:
    return datetime.now(UTC)


def run(
    read_crds: CrdReader = read_cluster_crds,
    read_kubeconfig: KubeconfigReader = read_kubeconfig_file,
    read_objects: ObjectReader = read_live,
    clock: Callable[[], datetime] = utc_now,
) -> None:
    """The program. `read_crds` reads an existing cluster's CRDs, `read_objects` the objects of the
    stack's names there, `read_kubeconfig` the kubeconfig a stack names (the render passes
    stand-ins for all three), `clock` the time of the `up`."""
    values = stack_config_values()
    for warning in unread_keys(values):
        pulumi.log.warn(warning)
    secret_keys = stack_secret_keys(values)
    try:
        cfg = parse_stack_config(values, pulumi.get_stack())
        exports = deploy(cfg, Access(read_crds, read_kubeconfig, read_objects, secret_keys, now=clock()))
    except ConfigError as error:
        raise InvalidStackConfig(without_secrets(error, secret_keys)) from None
    for key, value in exports.items():
        pulumi.export(key, value)


def stack_labels(cfg: StackConfig) -> dict[str, str]:
    """The labels of every labelled GCP resource of the stack, and the GCP provider's defaults."""
    stack = re.sub(r"[^a-z0-9_-]", "-", pulumi.get_stack().lower())[:63]
    return {**cfg.labels, MANAGED_BY_LABEL: "pulumi", STACK_LABEL: stack}


def stack_identity() -> str:
    """This stack's fully qualified name, marked on what it installs that others could own too."""
    return identity_of(pulumi.get_organization(), pulumi.get_project(), pulumi.get_stack())


def gcp_provider(cfg: StackConfig, location: ClusterExports | None = None) -> gcp.Provider:
    """One explicit provider per stack: the project and region come from validated config (a
    later layer's, from its upstream's cluster), never from ambient gcloud settings."""
    project, region, zone = (
        (cfg.gcp_project, cfg.region, cfg.zone)
        if location is None
        else (location.project, location.region, location.zone)
    )
    return gcp.Provider("gcp", project=project, region=region, zone=zone, default_labels=stack_labels(cfg))


# Keys a later layer's stack reads from its upstream, and may repeat only with the same value.
_UPSTREAM_KEYS = ("project", "region", "zone", "production")


def check_upstream_keys(cfg: StackConfig, cluster: ClusterExports, platform: PlatformExports | None) -> None:
    """A later layer's stack that repeats its upstream's project, region, zone, production or
    namespace repeats it exactly: a different value would be ignored."""
    found = [(key, getattr(cluster, key), getattr(cfg, key)) for key in _UPSTREAM_KEYS]
    if platform is not None:
        found.append(("namespace", platform.namespace, cfg.namespace))
    errors = [
        RuleError(key, ours, f"must be the upstream stack's {key}, {theirs!r}, or unset: {cfg.upstream_stack} sets it")
        for key, theirs, ours in found
        if key in cfg.given and ours != theirs
    ]
    if errors:
        raise ConfigError.of(errors)


@dataclass(frozen=True)
class Access:
    """What the program reads besides its config: an existing cluster's CRDs, kubeconfig and the
    objects of the stack's names, and which config keys hold encrypted values."""

    read_crds: CrdReader
    read_kubeconfig: KubeconfigReader
    read_objects: ObjectReader
    secret_keys: frozenset[str] = frozenset()
    # The time of this `up`, read once: a booked pool's quota is open within its booking only.
    now: datetime = field(kw_only=True)

    def secret(self, key: str) -> bool:
        return f"{PROJECT}:{key}" in self.secret_keys


def check_no_self_reference(cfg: StackConfig, identity: str) -> None:
    """A stack reads stacks below it (its upstream stack, a manager's workers), never itself."""
    references = [("upstreamStack", cfg.upstream_stack)]
    references += [(f"multiKueue.workers[{i}]", w) for i, w in enumerate(cfg.multi_kueue.workers)]
    for key, reference in references:
        if reference is not None and qualified_stack_name(reference) == identity:
            raise ConfigError.of([RuleError(key, reference, "names this stack itself: name the stack below it")])


def deploy(cfg: StackConfig, access: Access) -> dict[str, Any]:
    """Create the stack's layers; everything that can be checked is checked before the first
    resource is registered, including runs against an upstream environment and, on an existing
    cluster, the names of the stack's objects (stacks.ownership)."""
    labels = stack_labels(cfg)
    objects = ownership.mark_objects(stack_identity())
    if cfg.deploys(Layer.BOOTSTRAP):
        return bootstrap.build(cfg, labels, pulumi.ResourceOptions(providers={"gcp": gcp_provider(cfg)}))

    check_no_self_reference(cfg, stack_identity())
    upstream = Upstream(cfg.upstream_stack_name) if cfg.upstream_stack_name else None
    if cfg.existing_cluster is not None:
        existing.check_kubeconfig(cfg.existing_cluster, access.secret("existingCluster"), access.read_kubeconfig)
        cluster_facts = existing.cluster_facts(cfg.existing_cluster, cfg.production)
    elif cfg.deploys(Layer.CLUSTER):
        cluster_facts = cluster.cluster_facts(cfg)
        gke_version = cluster.check_release_channel(cfg, cluster_facts)
        cluster.check_preloaded_images(cfg)
    else:
        cluster_facts = _need(upstream).facts("cluster", ClusterExports)
        check_upstream_keys(cfg, cluster_facts, None)
    platform_facts: PlatformExports | None = None
    managed: multikueue.ManagedWorkers | None = None
    if cfg.deploys(Layer.PLATFORM):
        platform.check_platform(cfg, cluster_facts)
        advice = (
            existing.check_controllers(cfg.existing_cluster, cfg.kueue.install, stack_identity(), access.read_crds)
            if cfg.existing_cluster is not None
            else []
        )
        managed = multikueue.read_workers(cfg) if cfg.multi_kueue.manager else None
        platform_facts = platform.platform_facts(cfg, cluster_facts, access.now, managed)
        if cfg.existing_cluster is not None and not cfg.kueue.install and platform_facts.teams:
            advice += existing.shared_kueue(cfg.existing_cluster, platform_facts, access.read_objects)
        if cfg.existing_cluster is not None and not cfg.kueue.install and cfg.multi_kueue.dispatch is Dispatch.IN_ORDER:
            advice += existing.own_kueue_dispatch(cfg.existing_cluster, access.read_objects)
        for line in advice:
            pulumi.log.warn(line)
    elif cfg.deploys(Layer.TRAINING):
        platform_facts = _need(upstream).facts("platform", PlatformExports)
        check_upstream_keys(cfg, cluster_facts, platform_facts)
    submitted: dict[str, Submitted] = {}
    checked = training.CheckedRuns()
    if cfg.deploys(Layer.TRAINING) and platform_facts is not None:
        submitted = recorded_runs(stack_identity(), training.LAYER) if cfg.training.runs else {}
        unrecorded = (
            ownership.unrecorded_runs(
                cfg.existing_cluster,
                stack_identity(),
                training.unrecorded_jobsets(cfg, platform_facts, submitted),
                access.read_objects,
            )
            if cfg.existing_cluster is not None
            else {}
        )
        checked = training.check_runs(
            cfg, cluster_facts, platform_facts, access.secret("training"), submitted=submitted, unrecorded=unrecorded
        )
    summary = plan_summary(
        cluster_facts.project,
        cluster_facts.region,
        cluster_facts.zone,
        cluster_facts.gpu_pools,
        list(checked.plans.values()),
        cpu_pools=cpu_pools(cfg) if cfg.deploys(Layer.CLUSTER) else (),
        filestore=(
            Filestore(cfg.storage.filestore.tier.value, cfg.storage.filestore.capacity_gib)
            if cfg.deploys(Layer.PLATFORM) and cluster_facts.gke and not cfg.multi_kueue.manager
            else None
        ),
        teams=platform_facts.teams if platform_facts is not None and cfg.deploys(Layer.PLATFORM) else (),
        workers=platform_facts.workers if platform_facts else (),
        dispatch=platform_facts.dispatch if platform_facts else Dispatch.ALL_AT_ONCE,
        # A manager's runs name their images as published (training.TrainingRunArgs.mirror).
        mirror=None if platform_facts is not None and platform_facts.workers else cluster_facts.image_mirror,
    )

    # A stack on an existing cluster has no Google Cloud resource, so no Google Cloud provider.
    gke = cfg.existing_cluster is None and cluster_facts.gke
    opts = pulumi.ResourceOptions(providers={"gcp": gcp_provider(cfg, cluster_facts)} if gke else {})
    exports: dict[str, Any] = {}
    if cfg.existing_cluster is not None:
        cluster_outputs = existing.connect(cfg.existing_cluster, cluster_facts)
        exports.update(cluster=cluster_facts.to_plain(), kubeconfig=cluster_outputs.kubeconfig)
    elif cfg.deploys(Layer.CLUSTER):
        cluster_outputs, cluster_exports = cluster.build(cfg, cluster_facts, labels, gke_version, opts)
        exports.update(cluster_exports)
    else:
        cluster_outputs = cluster.from_upstream(cluster_facts, _need(upstream).secret("kubeconfig"))
    if platform_facts is not None:  # none on a stack of the cluster layer alone
        if cfg.deploys(Layer.PLATFORM):
            existing_cluster = cfg.existing_cluster
            endpoint = (
                existing.api_endpoint(existing_cluster, access.read_kubeconfig)
                if existing_cluster is not None and cfg.multi_kueue.worker
                else None
            )
            platform_outputs, platform_exports = platform.build(
                cfg,
                cluster_outputs,
                platform_facts,
                labels,
                opts,
                endpoint=endpoint,
                managed=managed,
            )
            exports.update(platform_exports)
        else:
            platform_outputs = platform.PlatformOutputs(facts=platform_facts)
        if cfg.deploys(Layer.TRAINING):
            secret_env = access.secret("training")
            exports.update(
                training.build(
                    cfg, cluster_outputs, platform_outputs, opts, secret_env, checked=checked, submitted=submitted
                )
            )
    exports["summary"] = summary.as_output()
    if cfg.existing_cluster is not None:
        ownership.check_existing(cfg, cfg.existing_cluster, objects, access.read_objects)
    return exports


def cpu_pools(cfg: StackConfig) -> list[CpuPool]:
    """The CPU pools a stack of the cluster layer creates, for the summary's prices."""
    system = CpuPool("system", cfg.system_pool.machine_type, cfg.system_pool.node_count * cfg.cluster.zones)
    supervisor = cfg.resiliency.pool
    return [
        system,
        *([CpuPool("supervisor", supervisor.machine_type, supervisor.node_count)] if cfg.resiliency.enabled else []),
    ]


def _need(upstream: Upstream | None) -> Upstream:
    if upstream is None:
        raise ValueError("a layer comes from an upstream stack, but none is configured (config.stack checks this)")
    return upstream
