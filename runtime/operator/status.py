"""The NodeSet's status, computed from what was observed. Pure.

Counts: protected (pods with an eviction-refusing PDB), desired (members), feasible (members that can run now: in all-matching-nodes the
members whose Node is Ready, not cordoned and has room for the pod; in replicas mode all of them when at least one
eligible Node is usable, else only those already scheduled), scheduled, ready and updated
(member pods), and the Slurm states of the NodeSet's Slurm nodes: down, drained (drain, no
job), draining (drain, jobs left), allocated, idle. A node is counted once, in that order.
Conditions keep their lastTransitionTime while their status holds, so an unchanged NodeSet
writes nothing."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from sunk import keys
from sunk.manifests.nodeset_pod import selector_labels
from sunk.nodeset_resource import NodeSetStatus

from ..common.conditions import Condition, transition
from .matching import eligible, usable
from .model import Member, Observed, Pod, busy


def _slurm_counts(observed: Observed, names: set[str]) -> dict[str, int]:
    counts = dict.fromkeys(("idle", "allocated", "draining", "drained", "down"), 0)
    for name in names:
        node = (observed.slurm or {}).get(name)
        if node is None:
            continue
        if node.base_state == "DOWN":
            counts["down"] += 1
        elif node.drain:
            counts["draining" if busy(node) else "drained"] += 1
        elif busy(node):
            counts["allocated"] += 1
        elif node.base_state == "IDLE":
            counts["idle"] += 1
    return counts


def _feasible(
    observed: Observed, want: Mapping[str, Member], pods: Mapping[str, Pod], unfit: Mapping[str, object]
) -> int:
    spec = observed.nodeset.spec
    if spec.mode == "all-matching-nodes":
        kube = observed.kube_nodes
        return sum(
            1
            for m in want.values()
            if m.kube_node is not None
            and m.kube_node in kube
            and usable(kube[m.kube_node])
            and m.kube_node not in unfit
        )
    if any(usable(n) and eligible(spec, n) for n in observed.kube_nodes.values()):
        return len(want)
    return sum(1 for name in want if name in pods and pods[name].scheduled)


def _condition(
    previous: list[dict[str, Any]], ctype: str, ok: bool, reason: str, message: str, now: datetime
) -> dict[str, str]:
    old = next((Condition.from_dict(c) for c in previous if c.get("type") == ctype), None)
    return transition(Condition(ctype, "True" if ok else "False", reason, message), old, now).to_dict()


_LISTED = 10
"""Nodes named in the PodsFit message; more are counted (a status must stay small)."""


def unfit_message(unfit: Mapping[str, tuple[str, str]]) -> str:
    """The PodsFit=False message: `<n> Node(s): <node> (<what>); ...`, the first ten by name."""
    items = sorted(unfit.items())
    listed = "; ".join(f"{kube} ({short})" for kube, (_, short) in items[:_LISTED])
    more = f"; and {len(items) - _LISTED} more" if len(items) > _LISTED else ""
    return f"slurmd pods not created, a kubelet would reject them on {len(items)} Node(s): {listed}{more}"


def compute_status(
    observed: Observed,
    want: Mapping[str, Member],
    pods: Mapping[str, Pod],
    desired_hash: str | None,
    build_error: str,
    now: datetime,
    unfit: Mapping[str, tuple[str, str]] | None = None,
    protected: int = 0,
) -> dict[str, Any]:
    """The NodeSet's status: the counts of its pods, why it is (not) Ready, then its conditions.
    `unfit`: Kubernetes Node -> (Slurm node, what does not fit) for members not created."""
    unfit = unfit or {}
    ns = observed.nodeset
    mine = [pods[n] for n in want if n in pods and not pods[n].leaving]
    ready = sum(p.ready for p in mine)
    updated = sum(p.template_hash == desired_hash for p in mine) if desired_hash is not None else 0
    slurm_names = {p.slurm_node for p in observed.pods} | set(want)
    previous = list(ns.status.get("conditions") or [])
    desired = len(want)
    leaving = sum(1 for p in observed.pods if p.slurm_node not in want)
    outdated = len(mine) - updated if desired_hash is not None else 0
    on_delete = ns.spec.update_strategy.type == "OnDelete"
    why, msg = _readiness(desired, len(mine), ready, updated, outdated, leaving, on_delete, desired_hash is not None)
    status = NodeSetStatus(
        desired=desired,
        feasible=_feasible(observed, want, pods, unfit),
        scheduled=sum(p.scheduled for p in mine),
        ready=ready,
        updated=updated,
        outdated=outdated,
        protected=protected,
        replicas=sum(not p.leaving for p in mine),
        selector=",".join(f"{k}={v}" for k, v in sorted(selector_labels(ns.spec).items())),
        observed_generation=ns.generation,
        conditions=_conditions(previous, observed, (why, msg), build_error, unfit, now),
        **_slurm_counts(observed, slurm_names),
    )
    return status.model_dump(by_alias=True, mode="json")


def _readiness(
    desired: int, exist: int, ready: int, updated: int, outdated: int, leaving: int, on_delete: bool, hashed: bool
) -> tuple[str, str]:
    """The Ready condition's reason and message: what the pods are doing, most pressing first."""
    if ready == desired and updated == desired and not leaving:
        why, msg = "AllReady", f"{ready}/{desired} pods ready and up to date"
    elif on_delete and ready == desired == exist and not leaving:
        why, msg = "OutdatedOnDelete", f"{ready}/{desired} pods ready, {outdated} outdated until deleted (OnDelete)"
    elif exist < desired:
        why, msg = "ScalingOut", f"{exist}/{desired} pods exist, {ready} ready"
    elif updated < desired and hashed:
        why, msg = "Updating", f"{updated}/{desired} pods up to date, {ready} ready"
    elif leaving:
        why, msg = "ScalingIn", f"{leaving} pods leaving (drained first, deleted once idle)"
    else:
        why, msg = "PodsNotReady", f"{ready}/{desired} pods ready"
    return why, msg


def _conditions(
    previous: list[dict[str, Any]],
    observed: Observed,
    readiness: tuple[str, str],
    build_error: str,
    unfit: Mapping[str, tuple[str, str]],
    now: datetime,
) -> list[dict[str, str]]:
    """Ready, SlurmReachable, ConfigFound, TemplateValid and PodsFit, each keeping its transition
    time from `previous` while it holds."""
    why, msg = readiness
    missing = observed.missing_config
    return [
        _condition(previous, keys.READY, why in ("AllReady", "OutdatedOnDelete"), why, msg, now),
        _condition(
            previous,
            keys.SLURM_REACHABLE,
            observed.slurm is not None,
            "Read" if observed.slurm is not None else "ReadFailed",
            "" if observed.slurm is not None else "slurmrestd could not be read: nothing is deleted or drained",
            now,
        ),
        _condition(
            previous,
            keys.CONFIG_FOUND,
            not missing,
            "Found" if not missing else "ConfigMapMissing",
            "" if not missing else f"ConfigMap {', '.join(missing)} not found: no pod is created",
            now,
        ),
        _condition(
            previous,
            keys.TEMPLATE_VALID,
            not build_error,
            "Valid" if not build_error else "Invalid",
            build_error,
            now,
        ),
        _condition(
            previous,
            keys.PODS_FIT,
            not unfit,
            "Fit" if not unfit else "InsufficientResources",
            "" if not unfit else unfit_message(unfit),
            now,
        ),
    ]
