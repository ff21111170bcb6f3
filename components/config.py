"""SlurmConfig: the rendered Slurm files as ConfigMaps, one per file."""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from sunk import keys
from sunk.manifests.config import TOPOLOGY_FILES, config_maps, topology_config_name
from sunk.spec.cluster import ClusterSpec

from ._k8s import Component, child, create, typed


class SlurmConfig(Component):
    """One ConfigMap per rendered Slurm file (`<cluster>-slurm-conf`, `<cluster>-gres-gpu-conf`,
    ...: sunk.naming.config_file_map; the file's name its only key) and, with a topology plugin,
    `<cluster>-topology`, which the NodeSet operator owns after creation.

    Pods mount them through projected volumes, one source per file their role reads, so an edited
    file reaches running pods and the reconfigure watcher beside slurmctld applies it; pod
    templates carry a hash of only what a reconfigure cannot apply (sunk.manifests.config)."""

    config_maps: pulumi.Output[dict[str, str]]
    """ConfigMap name of each Slurm file, by path relative to /etc/slurm (topology.conf's too)."""
    topology_config_map: pulumi.Output[str] | None
    """Name of the topology ConfigMap, if the cluster has a topology plugin."""
    resources: dict[str, k8s.core.v1.ConfigMap]
    """The ConfigMaps, by the file's path relative to /etc/slurm."""

    def __init__(
        self,
        name: str,
        spec: ClusterSpec,
        *,
        namespace: pulumi.Input[str],
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("sunk:index:SlurmConfig", name, opts)
        self.topology_config_map = None
        names: dict[str, str] = {}
        self.resources = {}
        for cm in config_maps(spec):
            path = cm["metadata"]["annotations"][keys.SLURM_FILE]
            names[path] = cm["metadata"]["name"]
            if path in TOPOLOGY_FILES:
                # Rendered with no nodes; the operator rewrites it from the Node labels. Pulumi
                # creates it and then never reverts the operator's data.
                made = create(f"{name}-topology", cm, child(self, ignore_changes=["data"]), namespace=namespace)
                self.topology_config_map = pulumi.Output.from_input(topology_config_name(spec))
            else:
                # Child names follow the ConfigMap names, which are unique and stable per path.
                suffix = cm["metadata"]["name"].removeprefix(f"{spec.name}-")
                made = create(f"{name}-{suffix}", cm, child(self), namespace=namespace)
            self.resources[path] = typed(k8s.core.v1.ConfigMap, made)
        self.config_maps = pulumi.Output.from_input(names)
        self.register_outputs({"config_maps": self.config_maps, "topology_config_map": self.topology_config_map})
