"""NodeSet objects from a ClusterSpec, built by the components' own code (sunk.manifests): used by
the operator's tests, its benchmark and the local demo, where no Pulumi program has created the
objects, so they drive exactly the NodeSets production writes."""

from __future__ import annotations

from typing import Any

from sunk import naming
from sunk.manifests.auth import auth_refs
from sunk.manifests.config import TOPOLOGY_FILES, config_maps
from sunk.manifests.nodeset import resource_spec as nodeset_resource_spec
from sunk.nodeset_resource import API_VERSION, KIND, NodeSetResourceSpec
from sunk.spec.cluster import ClusterSpec


def resource_spec(cluster: ClusterSpec, nodeset: str, **overrides: Any) -> NodeSetResourceSpec:
    """The NodeSet object spec the components write for one spec nodeset (production's own
    builder, sunk.manifests.nodeset), with `overrides` (camelCase, validated like a CR)."""
    built = nodeset_resource_spec(cluster, cluster.nodeset(nodeset), auth_refs(cluster))
    if not overrides:
        return built
    data: dict[str, Any] = built.model_dump(by_alias=True, exclude_unset=True, mode="json")
    return NodeSetResourceSpec.model_validate({**data, **overrides})


def config_map_objects(cluster: ClusterSpec, *, namespace: str) -> list[dict[str, Any]]:
    """The per-file Slurm ConfigMaps the components create (not topology.conf's: the operator
    creates that one when it is missing), in `namespace`."""
    return [
        {**cm, "metadata": {**cm["metadata"], "namespace": namespace}}
        for cm in config_maps(cluster)
        if not set(TOPOLOGY_FILES) & set(cm["data"])
    ]


def nodeset_object(
    spec: NodeSetResourceSpec, *, namespace: str, uid: str = "", generation: int = 1, name: str | None = None
) -> dict[str, Any]:
    """A NodeSet custom object as the API server returns it."""
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {
            "name": name or f"{spec.cluster_name}-{spec.name}",
            "namespace": namespace,
            "uid": uid or f"uid-{spec.cluster_name}-{spec.name}",
            "generation": generation,
        },
        # Only what was set, as the components write it.
        "spec": spec.model_dump(by_alias=True, mode="json", exclude_unset=True),
    }


def slurm_node_names(spec: NodeSetResourceSpec, count: int) -> list[str]:
    return [naming.slurm_node_name(spec.name, i) for i in range(count)]
