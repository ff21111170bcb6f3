"""SlurmConfig: the rendered Slurm files as ConfigMaps."""

from __future__ import annotations

import pulumi

from sunk.manifests.config import TOPOLOGY_FILE, config_maps, slurm_config_name, topology_config_name
from sunk.spec.cluster import ClusterSpec

from ._k8s import child, create


class SlurmConfig(pulumi.ComponentResource):
    """`<cluster>-slurm-config` with every rendered file (keys from sunk.naming.config_key) and,
    with a topology plugin, `<cluster>-topology`, which the NodeSet operator owns after creation.

    Pods mount them through projected volumes, so an edited file reaches running pods and the
    reconfigure watcher beside slurmctld applies it; pod templates carry a hash of only what a
    reconfigure cannot apply (sunk.manifests.config)."""

    config_map: pulumi.Output[str]
    """Name of the ConfigMap with the Slurm files."""
    topology_config_map: pulumi.Output[str] | None
    """Name of the topology ConfigMap, if the cluster has a topology plugin."""

    def __init__(
        self,
        name: str,
        spec: ClusterSpec,
        *,
        namespace: pulumi.Input[str],
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("sunk:index:SlurmConfig", name, None, opts)
        self.topology_config_map = None
        main, *rest = config_maps(spec)
        create(f"{name}-files", main, child(self), namespace=namespace)
        self.config_map = pulumi.Output.from_input(slurm_config_name(spec))
        for topo in rest:
            assert TOPOLOGY_FILE in topo["data"]
            # Rendered with no nodes; the operator rewrites it from the Node labels. Pulumi
            # creates it and then never reverts the operator's data.
            create(f"{name}-topology", topo, child(self, ignore_changes=["data"]), namespace=namespace)
            self.topology_config_map = pulumi.Output.from_input(topology_config_name(spec))
        self.register_outputs({"config_map": self.config_map, "topology_config_map": self.topology_config_map})
