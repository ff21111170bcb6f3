"""Which Slurm nodes and Kubernetes Nodes a cycle must look at, from what changed since the
last plan. Pure: no I/O, no clock.

A change reaches further than the object that changed: a Node's cordon concerns the slurmd pods
on it; a pod's move concerns the Nodes it left and joined; a Slurm node's drain concerns the Node
its pod runs on (the tenant's drain annotation there lists every foreign drain on it)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from .model import Scope, SlurmdPod


def changed_scope(
    slurm_changed: Iterable[str],
    node_changes: Iterable[str],
    pod_changes: Iterable[str],
    pods_before: Mapping[str, SlurmdPod],
    pods_now: Mapping[str, SlurmdPod],
) -> Scope:
    """`pod_changes` are `namespace/name` keys; `pods_before`/`pods_now` the pods by key at the
    last plan and now (both versions of a changed pod count: its old hostname and Node too)."""
    slurm = set(slurm_changed)
    kube = set(node_changes)
    for key in pod_changes:
        for pod in (pods_before.get(key), pods_now.get(key)):
            if pod is not None:
                slurm.add(pod.hostname)
                if pod.node_name:
                    kube.add(pod.node_name)
    if slurm or kube:
        for pod in pods_now.values():
            if pod.node_name in kube:
                slurm.add(pod.hostname)
        for pod in pods_now.values():
            if pod.node_name and pod.hostname in slurm:
                kube.add(pod.node_name)
    return Scope(frozenset(slurm), frozenset(kube))
