"""The PodDisruptionBudget that keeps one slurmd pod from being evicted while its Slurm node may
run jobs (like Slinky's workloadDisruptionProtection and SUNK's node lock).

The Eviction API (`kubectl drain`, node upgrades, the cluster autoscaler) refuses to evict a pod
a PDB with `maxUnavailable: 0` selects (429). The operator keeps one per slurmd pod whose Slurm
node is not drained and idle, and removes it once it is: a drain of the Kubernetes Node then goes
cordon -> the syncer drains the Slurm node -> its jobs finish -> the operator removes the PDB ->
the eviction succeeds. Deleting a pod (the operator's own scale-in and rolling update, which wait
for drained and idle themselves) is not an eviction and is not held back.
(https://kubernetes.io/docs/concepts/workloads/pods/disruptions/)"""

from __future__ import annotations

from typing import Any

from sunk import keys
from sunk.manifests.nodeset_pod import selector_labels
from sunk.nodeset_resource import NodeSetResourceSpec

PROTECTION = "slurmd-protection"
"""app.kubernetes.io/component of the PDBs (the slurmd pods' own is `slurmd`)."""


def protection_name(pod_name: str) -> str:
    """The PDB of a slurmd pod is named like the pod (names are unique per kind)."""
    return pod_name


def protection_budget(
    spec: NodeSetResourceSpec, *, namespace: str, pod_name: str, pod_uid: str, slurm_node: str
) -> dict[str, Any]:
    """A PDB selecting exactly the slurmd pod of `slurm_node` with no disruption allowed, owned by
    that pod so the garbage collector removes it with the pod."""
    labels = {**selector_labels(spec), keys.NODE: slurm_node}
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {
            "name": protection_name(pod_name),
            "namespace": namespace,
            "labels": {**labels, keys.APP_COMPONENT: PROTECTION},
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": pod_name, "uid": pod_uid}],
        },
        "spec": {
            "maxUnavailable": 0,
            # The default unhealthyPodEvictionPolicy (IfHealthyBudget) holds an unready slurmd too:
            # a readiness probe failing under load does not mean its jobs are gone.
            "selector": {"matchLabels": labels},
        },
    }
