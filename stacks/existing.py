"""An existing cluster in place of the cluster layer (config.existing): the same `ClusterFacts`
the platform layer reads, built from the pools the config describes, and a Kubernetes provider
on the given kubeconfig. Nothing here is a Google Cloud resource."""

from __future__ import annotations

import os

import pulumi
import pulumi_kubernetes as k8s

from config.existing import ExistingClusterConfig
from facts.gke import CapacityType
from planners.pools import PoolFacts
from stacks.cluster import ClusterOutputs
from stacks.contract import ClusterFacts


def cluster_facts(cfg: ExistingClusterConfig, production: bool) -> ClusterFacts:
    return ClusterFacts(
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
            PoolFacts(
                name=pool.name,
                machine_type=pool.machine_type,
                zone="",
                max_nodes=pool.nodes,
                # The nodes exist: the queue's quota is all of them, none is provisioned on demand.
                capacity_type=CapacityType.ON_DEMAND,
                compact=False,
                min_nodes=pool.nodes,
                node_labels=dict(pool.node_labels),
                taint_keys=tuple(t.key for t in pool.taints),
                topology_labels=pool.topology_labels,
            )
            for pool in cfg.gpu_pools
        ),
        gke=False,
        system_node_labels=dict(cfg.system_node_labels),
    )


def connect(cfg: ExistingClusterConfig, facts: ClusterFacts) -> ClusterOutputs:
    """The cluster's Kubernetes provider; the kubeconfig contents stay secret in the state."""
    kubeconfig: pulumi.Output[str] = (
        pulumi.Output.secret(cfg.kubeconfig)
        if cfg.kubeconfig is not None
        else pulumi.Output.from_input(os.path.expanduser(str(cfg.kubeconfig_path)))
    )
    provider = k8s.Provider("existing-k8s", kubeconfig=kubeconfig, context=cfg.context)
    return ClusterOutputs(facts=facts, kubeconfig=kubeconfig, provider=provider, primary_network="")
