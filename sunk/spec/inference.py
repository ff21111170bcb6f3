"""Inference on the shared pool: the namespaces whose pods sunk's scheduler places, each charged to
a Slurm account (docs/how-to/inference.md).

A listed namespace opts in: the admission webhook (runtime/webhook) sets sunk's schedulerName on its
pods, turns their `nvidia.com/gpu` requests into Slurm's, and writes the account, partition and QOS
the scheduler submits their placeholder jobs with. Nothing outside the list reaches the webhook."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Protocol

from pydantic import Field

from sunk.problem import Problem
from sunk.spec.base import SYSTEM_NAMESPACES, AccountingName, DnsLabel, Model, SlurmName
from sunk.spec.nodeset import NodeSetSpec, _unique
from sunk.spec.scheduling import AccountSpec, PartitionSpec, QosSpec
from sunk.spec.services import AccountingSpec

MAX_NAMESPACES = 256
"""The list lands in one MutatingWebhookConfiguration's namespaceSelector and one RoleBinding per
namespace: a bound keeps both a reviewable size (a team per namespace; more is a platform of its own)."""

CAPPED_TRES = ("gres/gpu", "node", "cpu")
"""The QOS limits checked against the pool: what a namespace's pods take from the shared NodeSets."""


class InferenceNamespaceSpec(Model):
    """One opted-in namespace: its pods run under sunk's scheduler, charged to `account`."""

    name: DnsLabel
    """The Kubernetes namespace (matched on its `kubernetes.io/metadata.name` label). Not the
    cluster's own namespace, sunk-system, default or any kube-*. Required."""
    account: AccountingName
    """The Slurm account every pod of the namespace runs under, so `sacct` and `sreport` charge
    the team; an account of `accounts`. A pod naming another account is refused. Required."""
    partition: SlurmName | None = None
    """Partition of the namespace's pods when a pod names none; a partition of `partitions` with
    a shared NodeSet. Default: Slurm's default partition."""
    qos: AccountingName | None = None
    """QOS of the namespace's pods when a pod names none; a QOS of `qos` (or `normal`) the
    account may use. Its GrpTRES and MaxTRESPerAccount cap the namespace's share of the pool.
    Default: the account's default QOS."""


class InferenceSpec(Model):
    """Kubernetes workloads on the shared pool, as users deploy them (Deployments, Jobs, JobSets,
    LeaderWorkerSets), placed by Slurm. Default: no namespace, no webhook rendered."""

    namespaces: Annotated[list[InferenceNamespaceSpec], Field(max_length=MAX_NAMESPACES)] = []
    """The opted-in namespaces, each once; at most 256. Default: none."""


class ClusterSpec(Protocol):
    """What these rules read of sunk.spec.cluster.ClusterSpec, which calls them (a protocol, so
    this module does not import the one that imports it)."""

    @property
    def ns(self) -> str: ...
    @property
    def inference(self) -> InferenceSpec: ...
    @property
    def accounting(self) -> AccountingSpec: ...
    @property
    def accounts(self) -> Sequence[AccountSpec]: ...
    @property
    def partitions(self) -> Sequence[PartitionSpec]: ...
    @property
    def nodesets(self) -> Sequence[NodeSetSpec]: ...
    @property
    def qos(self) -> Sequence[QosSpec]: ...


@dataclass(frozen=True)
class Pool:
    """What the shared NodeSets of a partition (or of every partition) hold at most."""

    nodes: int
    cpu: int
    gpus: int

    def get(self, tres: str) -> int:
        return {"gres/gpu": self.gpus, "node": self.nodes, "cpu": self.cpu}[tres]


def shared_pool(nodesets: Sequence[NodeSetSpec]) -> Pool:
    """The shared NodeSets' nodes, CPUs and GPUs at their node bound (maxNodes)."""
    shared = [n for n in nodesets if n.resource_mode == "shared"]
    return Pool(
        nodes=sum(n.node_bound for n in shared),
        cpu=sum(n.node_bound * n.cpus for n in shared),
        gpus=sum(n.node_bound * n.gpus.count for n in shared if n.gpus is not None),
    )


def _reserved(spec: ClusterSpec, name: str) -> str | None:
    if name == spec.ns:
        return "the cluster's own namespace (its slurmd, slurmctld and runtime pods would be sent to the webhook)"
    if name in SYSTEM_NAMESPACES or name.startswith("kube-"):
        return "Kubernetes' own namespace (default, kube-*): the control plane's pods must never wait for Slurm"
    if name == "sunk-system":
        return "the operator's namespace"
    return None


def inference_problems(spec: ClusterSpec) -> list[Problem]:
    """Each listed namespace: not reserved, listed once, its account, partition and QOS defined,
    the QOS one the account may use, and its caps within the pool it draws from."""
    listed = spec.inference.namespaces
    if not listed:
        return []
    problems = _unique("inference.namespaces", [n.name for n in listed], "name")
    problems += [
        Problem(f"inference.namespaces[{i}].name", f"{n.name!r} is {why}; list a namespace of the team's workloads")
        for i, n in enumerate(listed)
        if (why := _reserved(spec, n.name)) is not None
    ]
    if not spec.accounting.enabled:
        problems.append(
            Problem("inference.namespaces", "each namespace is charged to a Slurm account: set accounting.enabled true")
        )
        return problems
    for i, n in enumerate(listed):
        problems += _references(spec, i, n)
    return problems


def _references(spec: ClusterSpec, i: int, n: InferenceNamespaceSpec) -> list[Problem]:
    path = f"inference.namespaces[{i}]"
    accounts = {a.name: a for a in spec.accounts}
    account = accounts.get(n.account)
    if account is None:
        known = ", ".join(sorted(accounts)) or "none (add it to accounts)"
        return [Problem(f"{path}.account", f"{n.account!r} is not an account of the stack; known: {known}")]
    problems: list[Problem] = []
    partitions = {p.name: p for p in spec.partitions}
    if n.partition is not None and n.partition not in partitions:
        known = ", ".join(sorted(partitions))
        return [Problem(f"{path}.partition", f"{n.partition!r} is not a partition; known: {known}")]
    scope = [partitions[n.partition]] if n.partition is not None else list(spec.partitions)
    names = {name for p in scope for name in p.nodesets}
    pool = shared_pool([ns for ns in spec.nodesets if ns.name in names])
    if pool.nodes == 0:
        field, where = (
            (f"{path}.partition", f"partition {n.partition!r} has") if n.partition else (path, "no partition has")
        )
        problems.append(
            Problem(
                field,
                f"{where} a NodeSet with resourceMode shared, the only nodes sunk places pods on; "
                "add one (or choose a partition that has one)",
            )
        )
    qos_name = n.qos or account.default_qos
    if n.qos is not None:
        problems += _qos_choice(spec, path, n.qos, account.qos)
    if qos_name is not None and not problems:
        problems += _caps(spec, path, qos_name, pool, explicit=n.qos is not None)
    return problems


def _qos_choice(spec: ClusterSpec, path: str, qos: str, allowed: Sequence[str]) -> list[Problem]:
    known = {q.name for q in spec.qos} | {"normal"}
    if qos not in known:
        return [Problem(f"{path}.qos", f"{qos!r} is not a QOS; known: {', '.join(sorted(known))}")]
    if allowed and qos not in allowed:
        return [
            Problem(
                f"{path}.qos",
                f"the account may use only {', '.join(allowed)}; Slurm would refuse {qos!r}: add it to the account's qos",
            )
        ]
    return []


def _caps(spec: ClusterSpec, path: str, qos_name: str, pool: Pool, *, explicit: bool) -> list[Problem]:
    """A cap above what the pool holds is never reached: most likely a typo (an extra digit), and
    certainly not the limit the team was promised."""
    qos = next((q for q in spec.qos if q.name == qos_name), None)
    if qos is None:
        return []
    where = f"{path}.qos" if explicit else f"{path}.account"
    return [
        Problem(
            where,
            f"QOS {qos_name}'s {field} caps {tres} at {limits[tres]}, above the {pool.get(tres)} the shared pool this "
            f"namespace draws from holds: lower the cap to at most {pool.get(tres)}, or grow the shared NodeSets",
        )
        for field, limits in (("grpTres", qos.grp_tres), ("maxTresPerAccount", qos.max_tres_per_account))
        for tres in CAPPED_TRES
        if tres in limits and limits[tres] > pool.get(tres)
    ]
