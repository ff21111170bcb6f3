"""The tenant namespace and the whole cluster as plain manifests (what the components create,
minus the generated secret values), from the one table of the cluster's parts
(sunk.manifests.parts)."""

from __future__ import annotations

from sunk.manifests.meta import Manifest
from sunk.manifests.parts import context, namespace, part_manifests
from sunk.spec.cluster import ClusterSpec

__all__ = ["cluster_manifests", "namespace"]


def cluster_manifests(spec: ClusterSpec, operator_namespace: str | None = "sunk-system") -> list[Manifest]:
    """Every object of one tenant's cluster as `sunk render` writes it: the keys and passwords are
    made in the cluster by the key generator's Job (no Secret here holds one)."""
    return part_manifests(context(spec, operator_namespace, keys_in_cluster=True))
