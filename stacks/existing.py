"""An existing cluster in place of the cluster layer (config.existing): the same `ClusterExports`
the platform layer reads, built from the pools the config describes, and a Kubernetes provider
on the given kubeconfig. Nothing here is a Google Cloud resource."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import yaml

from config.existing import ExistingClusterConfig
from config.loader import ConfigError
from facts.errors import RuleError
from facts.gke import CapacityType
from facts.kubernetes import KUEUE_API, KUEUE_NAMESPACE, UPSERT_EXISTING_OBJECTS, Taint
from facts.kueue import KUEUE_CONFIG_FILE, KUEUE_CONFIG_MAP
from facts.project import PROJECT
from facts.pulumi_cli import SECRET_STAND_IN
from planners.controller_api import (
    controller_api_problems,
    crd_names,
    dispatch_advice,
    installed_by_others,
    shared_kueue_advice,
    stored_version_advice,
)
from planners.ownership import ObjectRef
from planners.pools import GpuPoolExport
from stacks.cluster import ClusterOutputs
from stacks.contract import ClusterExports, PlatformExports
from stacks.kubeapi import (
    ClusterUnreadable,
    CrdReader,
    Kubeconfig,
    KubeconfigReader,
    ObjectReader,
    kubeconfig_credentials,
    kubeconfig_endpoint,
    kubeconfig_problem,
)


def cluster_facts(cfg: ExistingClusterConfig, production: bool) -> ClusterExports:
    return ClusterExports(
        project="",
        region="",
        zone="",
        name=cfg.name,
        location="",
        production=production,
        primary_network="",
        workload_pool="",
        system_pool="",
        gpu_networks=(),
        gpu_pools=tuple(
            GpuPoolExport(
                name=pool.name,
                machine_type=pool.machine_type,
                zone="",
                max_nodes=pool.nodes,
                # The nodes exist: the queue's quota is all of them, none is provisioned on demand.
                capacity_type=CapacityType.ON_DEMAND,
                compact=False,
                min_nodes=pool.nodes,
                node_labels=dict(pool.node_labels),
                taints=tuple(Taint(t.key, t.value, t.effect) for t in pool.taints),
                topology_labels=pool.topology_labels,
                other_machine=pool.other_machine,
            )
            for pool in cfg.gpu_pools
        ),
        gke=False,
        system_node_labels=dict(cfg.system_node_labels),
    )


def connect(cfg: ExistingClusterConfig, facts: ClusterExports) -> ClusterOutputs:
    """The cluster's Kubernetes provider; the kubeconfig contents stay secret in the state."""
    kubeconfig: pulumi.Output[str] = (
        pulumi.Output.secret(cfg.kubeconfig)
        if cfg.kubeconfig is not None
        else pulumi.Output.from_input(os.path.expanduser(str(cfg.kubeconfig_path)))
    )
    provider = k8s.Provider(
        "existing-k8s", kubeconfig=kubeconfig, context=cfg.context, upsert_existing_objects=UPSERT_EXISTING_OBJECTS
    )
    return ClusterOutputs(facts=facts, kubeconfig=kubeconfig, provider=provider, primary_network="")


def kubeconfig_of(cfg: ExistingClusterConfig) -> Kubeconfig:
    """Where the stack's kubeconfig is, and the context it names."""
    return Kubeconfig(cfg.kubeconfig, cfg.kubeconfig_path, cfg.context)


def api_endpoint(cfg: ExistingClusterConfig, read: KubeconfigReader) -> tuple[str, str]:
    """The cluster's API server and CA as the stack's kubeconfig reaches it (read before anything
    is registered, as check_kubeconfig reads it); the render's stand-in for an encrypted kubeconfig
    has none."""
    if cfg.kubeconfig == SECRET_STAND_IN:
        return "https://stand-in.invalid", ""
    return kubeconfig_endpoint(read(kubeconfig_of(cfg)), cfg.context)


def check_kubeconfig(cfg: ExistingClusterConfig, secret: bool, read: KubeconfigReader) -> None:
    """The stack's kubeconfig is one kubectl could use with its context, before anything is
    registered; one given inline that holds a credential is an encrypted (`secret`) value."""
    given = "kubeconfig" if cfg.kubeconfig is not None else "kubeconfigPath"
    if cfg.kubeconfig == SECRET_STAND_IN:
        return  # the render cannot decrypt it
    try:
        text = read(kubeconfig_of(cfg))
    except ClusterUnreadable as error:
        raise ConfigError.of([RuleError(f"existingCluster.{error.key or given}", None, str(error))]) from None
    problem = kubeconfig_problem(text, cfg.context)
    if problem:
        key, why = problem
        if key != "context" and cfg.kubeconfig_path is not None:
            why = f"{cfg.kubeconfig_path} {why}"
        value = cfg.context if key == "context" else None
        raise ConfigError.of([RuleError(f"existingCluster.{key or given}", value, why)])
    held = kubeconfig_credentials(text) if cfg.kubeconfig is not None else []
    if held and not secret:
        why = (
            f"holds a credential ({held[0]}) as plain text: store it encrypted, `pulumi config set --secret --path "
            f"'{PROJECT}:existingCluster.kubeconfig' \"$(kubectl config view --raw --minify)\"`, or use kubeconfigPath"
        )
        raise ConfigError.of([RuleError("existingCluster.kubeconfig", None, why)])


def check_controllers(cfg: ExistingClusterConfig, install: bool, identity: str, read_crds: CrdReader) -> list[str]:
    """The cluster's Kueue and JobSet CRDs, read before anything is registered. `kueue.install:
    false`: the cluster's own Kueue and JobSet must take the program's objects; a missing or older
    release stops the program with one line per kind (planners.controller_api). `true`: neither may
    be there already unless this stack (`identity`) installed it, one line per controller. Returns
    the advice on what to migrate before a Kueue upgrade."""
    try:
        crds = read_crds(kubeconfig_of(cfg), crd_names())
    except ClusterUnreadable as error:
        if error.key:
            raise ConfigError.of([RuleError(f"existingCluster.{error.key}", cfg.kubeconfig_path, str(error))]) from None
        why = f"the cluster's CRDs could not be read to check kueue.install = {str(install).lower()}: {error}"
        raise ConfigError.of([RuleError("existingCluster.name", cfg.name, why)]) from None
    problems = installed_by_others(crds, identity) if install else controller_api_problems(crds)
    if problems:
        raise ConfigError.of([RuleError("kueue.install", install, problem) for problem in problems])
    return stored_version_advice(crds)


# Where a Kueue install keeps its Configuration (facts.kueue), as the stack reads it.
KUEUE_CONFIGURATION = ObjectRef("v1", "ConfigMap", KUEUE_NAMESPACE, KUEUE_CONFIG_MAP)


def installed_kueue_configuration(config_map: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """The Configuration a Kueue install reads (its ConfigMap's one file), None where unreadable."""
    text = ((config_map or {}).get("data") or {}).get(KUEUE_CONFIG_FILE)
    try:
        config = yaml.safe_load(text) if text else None
    except yaml.YAMLError:
        return None
    return config if isinstance(config, Mapping) else None


def shared_kueue(cfg: ExistingClusterConfig, platform: PlatformExports, read: ObjectReader) -> list[str]:
    """Teams on the cluster's own Kueue (`kueue.install: false`): what its Configuration and the
    other ClusterQueues mean for their shares (planners.controller_api.shared_kueue_advice)."""
    queues, flavors = (ObjectRef(KUEUE_API, kind, None, "") for kind in ("ClusterQueue", "ResourceFlavor"))
    try:
        found = read(kubeconfig_of(cfg), [KUEUE_CONFIGURATION, queues, flavors])
    except ClusterUnreadable as error:
        return [f"the cluster's Kueue could not be read to check the teams' fair sharing: {error}"]
    ours = {platform.cluster_queue, *(team.cluster_queue for team in platform.teams)}
    pools = {flavor.pool: flavor.selector for flavor in platform.flavors}
    return shared_kueue_advice(
        installed_kueue_configuration(found.get(KUEUE_CONFIGURATION)),
        (found.get(queues) or {}).get("items", []),
        (found.get(flavors) or {}).get("items", []),
        ours,
        pools,
    )


def own_kueue_dispatch(cfg: ExistingClusterConfig, read: ObjectReader) -> list[str]:
    """A manager in order on the cluster's own Kueue: whether its Configuration dispatches so
    (planners.controller_api.dispatch_advice)."""
    try:
        found = read(kubeconfig_of(cfg), [KUEUE_CONFIGURATION])
    except ClusterUnreadable as error:
        return [f"the cluster's Kueue could not be read to check that it dispatches in order: {error}"]
    return dispatch_advice(installed_kueue_configuration(found.get(KUEUE_CONFIGURATION)))
