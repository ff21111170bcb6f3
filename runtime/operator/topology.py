"""topology.conf kept in step with the Nodes the slurmd pods run on. Pure plan, one per cluster.

The operator owns one ConfigMap per cluster (naming.topology_config_map, key `topology.conf`)
rendered by sunk.render.render_topology_conf from the labels of the pods' Nodes; with named
topologies (Slurm 26.05) its key is `topology.yaml`, rendered by sunk.render.render_topology_yaml,
and the same steps keep it (dynamic nodes join a topology.yaml's switches and blocks on
reconfigure, and a topology written flat becomes a block one then: measured 2026-11 on 26.05.5). slurmctld
reads it from a projected volume, which the kubelet refreshes at its next sync of the pod (up to
about a minute on a stock kubelet; within a second on the local cluster), and dynamic nodes only
join their switches on `scontrol reconfigure` (24.11 and 26.05, measured 2026-11). Until that
reconfigure a new node runs single-node jobs only: slurmctld refuses a job that needs it beside
another ("Requested node configuration is not available"). So:
1. the text differs from what the Nodes say -> write it, stamping when (annotation);
2. the text is current and the set of registered nodes it names changed since the last
   reconfigure -> reconfigure `retry`, 2 `retry`, 4 `retry`... after the write, while the kubelet
   may still be refreshing the file (the first one that finds the new file binds the nodes,
   whenever the kubelet gets to it), and
   a last time once it was written `delay` ago (the kubelet has surely refreshed it by then),
   recording which (text, registered nodes) it covered and, before `delay`, which try it was.
Slurm unreadable -> no reconfigure (and nothing to learn about registrations); under
topology/block no write either: a block is rendered only once enough of its nodes registered.

Slurm 26.05 can also place a dynamic node by itself (`scontrol update NodeName=n
Topology=default:root:<switch>...`, no reconfigure), but slurmrestd v0.0.45 ignores a node
update's `topology` field (measured), and slurmctld keeps that placement across restarts
(a path that no longer starts at a switch the file defines is fatal at the next start), so the
operator stays with the file and reconfigures."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sunk import keys, naming
from sunk.images import DEFAULT_SLURM
from sunk.render import TopologyNode, render_topology_conf, render_topology_yaml
from sunk.spec.scheduling import NamedTopologySpec, TopologySpec

from ..common.timefmt import parse_rfc3339, rfc3339
from .model import Pod

TOPOLOGY_KEY = "topology.conf"
TOPOLOGY_YAML_KEY = "topology.yaml"


@dataclass(frozen=True)
class TopologyObserved:
    namespace: str
    cluster: str
    spec: TopologySpec
    extra: tuple[str, ...]
    nodes: Sequence[TopologyNode]
    """Every scheduled slurmd pod of the cluster: its Slurm node and its Node's labels."""
    config_map: Mapping[str, Any] | None
    registered: frozenset[str] | None
    """Slurm nodes slurmctld knows; None when Slurm could not be read."""
    release: str = DEFAULT_SLURM
    """The cluster's Slurm release (what a node-less tree looks like differs)."""
    started: Mapping[str, str] | None = None
    """Registered node -> which slurmd registered it (slurmd_identities). A node whose pod was
    replaced registers afresh under the same name, and slurmctld 26.05 then leaves it out of its
    switches until the next reconfigure (24.11 kept it in; both measured by the operator's
    real-Slurm rolling update)."""
    topologies: tuple[NamedTopologySpec, ...] = ()
    """The cluster's named topologies: when given, topology.yaml with them replaces topology.conf."""

    @property
    def key(self) -> str:
        """The ConfigMap key (and file name) of the topology file."""
        return TOPOLOGY_YAML_KEY if self.topologies else TOPOLOGY_KEY

    @property
    def blocks(self) -> bool:
        """Whether a block topology is among them (its blocks depend on the registered nodes)."""
        if self.topologies:
            return any(t.plugin == "block" for t in self.topologies)
        return self.spec.plugin == "block"

    def render(self, nodes: Sequence[TopologyNode]) -> str:
        if self.topologies:
            return render_topology_yaml(self.topologies, nodes, self.registered, self.release)
        return render_topology_conf(self.spec, nodes, self.extra, self.registered, self.release)


@dataclass(frozen=True)
class WriteTopology:
    namespace: str
    cluster: str
    name: str
    text: str
    written: str
    create: bool
    key: str = TOPOLOGY_KEY

    def event(self) -> tuple[str, str]:
        return "WriteTopology", f"ConfigMap {self.name}: {self.key} follows the Node labels"


@dataclass(frozen=True)
class Reconfigure:
    namespace: str
    cluster: str
    config_map: str
    key: str

    def event(self) -> tuple[str, str]:
        return "Reconfigure", f"scontrol reconfigure on cluster {self.cluster}: topology.conf or its nodes changed"


TopologyAction = WriteTopology | Reconfigure


def _parse(stamp: str | None) -> datetime | None:
    if not stamp:
        return None
    try:
        return parse_rfc3339(stamp)
    except ValueError:
        return None


def slurmd_identities(pods: Iterable[Pod], slurmd_started: Mapping[str, int]) -> dict[str, str]:
    """Registered node -> which slurmd registered it: its pod's uid and its container's restart
    count, once slurmctld's record of the node comes from that container (slurmctld's
    SlurmdStartTime not before the container started: the same Node's clock, whole seconds).

    Not SlurmdStartTime itself: `scontrol reconfigure` makes every slurmd re-exec itself inside
    its container, which moves SlurmdStartTime to the reconfigure's second. A key built from it
    changed with every reconfigure it caused, and the operator reconfigured at each resync (10 s)
    for ever (measured on the local cluster, 26.05.5), so slurmctld re-exec'd before it scheduled
    and a job waited with reason None. A re-exec keeps the container; a replaced pod or a
    restarted container is a new identity, seen only once its slurmd registered."""
    out: dict[str, str] = {}
    for pod in pods:
        registered_at = slurmd_started.get(pod.slurm_node)
        if pod.leaving or registered_at is None or pod.started is None or registered_at < pod.started:
            continue  # no record, or the record is an earlier slurmd's: this one has not registered
        out[pod.slurm_node] = f"{pod.uid}/{pod.restarts}"
    return out


def reconfigure_key(
    text: str, registered: frozenset[str], nodes: Sequence[TopologyNode], started: Mapping[str, str] | None = None
) -> str:
    """What a reconfigure covered: the text, the registered nodes it names, and which slurmd
    registered each (slurmd_identities: a replaced pod's registration changes the key, so it gets
    its reconfigure; a reconfigure's own re-exec does not)."""
    named = sorted({n.name for n in nodes} & registered)
    if started:
        named = [f"{name}@{started[name]}" if name in started else name for name in named]
    return hashlib.sha256("\n".join([text, *named]).encode()).hexdigest()[:16]


def config_map(namespace: str, cluster: str, text: str, written: str, key: str = TOPOLOGY_KEY) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": naming.topology_config_map(cluster),
            "namespace": namespace,
            "labels": {keys.CLUSTER: cluster},
            "annotations": {keys.TOPOLOGY_WRITTEN: written},
        },
        "data": {key: text},
    }


def _missing_yaml(observed: TopologyObserved, now: datetime) -> list[TopologyAction]:
    """Slurm unreadable under a block topology: nothing, unless the ConfigMap lacks topology.yaml
    altogether (a stack that moved from `topology` to `topologies`: Pulumi leaves the data of the
    ConfigMap it created to the operator). slurmctld and slurmd cannot start without that key, and
    Slurm stays unreadable until they do, so the file goes in with every block flat (as if no
    node had registered: safe whatever registered), and the blocks follow once Slurm answers."""
    cm = observed.config_map
    if not observed.topologies or (cm is not None and observed.key in (cm.get("data") or {})):
        return []
    nodes = sorted(observed.nodes, key=lambda n: n.name)
    text = render_topology_yaml(observed.topologies, nodes, frozenset(), observed.release)
    name = naming.topology_config_map(observed.cluster)
    return [WriteTopology(observed.namespace, observed.cluster, name, text, rfc3339(now), cm is None, observed.key)]


def plan_topology(
    observed: TopologyObserved, now: datetime, delay: timedelta, retry: timedelta | None = None
) -> list[TopologyAction]:
    """`delay`: when the last reconfigure for a written text is due; `retry`: when the first try
    before it is, the next ones at doubling ages (None: none, only the one at `delay`)."""
    if observed.spec.plugin == "none" and not observed.topologies:
        return []
    if observed.blocks and observed.registered is None:
        # Which blocks are safe depends on which nodes registered: slurmctld exits on a block with
        # fewer registered nodes than the base block size (24.11, measured 2026-11). Fail closed.
        return _missing_yaml(observed, now)
    nodes = sorted(observed.nodes, key=lambda n: n.name)
    text = observed.render(nodes)
    name = naming.topology_config_map(observed.cluster)
    cm = observed.config_map
    if cm is None or (cm.get("data") or {}).get(observed.key) != text:
        write = WriteTopology(observed.namespace, observed.cluster, name, text, rfc3339(now), cm is None, observed.key)
        return [write]
    if observed.registered is None:
        return []
    annotations = (cm.get("metadata") or {}).get("annotations") or {}
    key = reconfigure_key(text, observed.registered, nodes, observed.started)
    done = annotations.get(keys.TOPOLOGY_RECONFIGURED)
    if done == key:
        return []
    written = _parse(annotations.get(keys.TOPOLOGY_WRITTEN))
    age = None if written is None else now - written
    if age is None or age >= delay:
        return [Reconfigure(observed.namespace, observed.cluster, name, key)]
    if retry is None or age < retry:
        return []  # the kubelet has not refreshed slurmctld's copy yet, most likely
    # Tries at retry, 2 retry, 4 retry... after the write, each finding whatever file the kubelet
    # has written by then: a reconfigure re-reads every file and holds scheduling meanwhile, so
    # they thin out instead of coming every retry until the delay.
    attempt = f"{key}+{int(math.log2(age / retry))}"
    if done == attempt:
        return []
    return [Reconfigure(observed.namespace, observed.cluster, name, attempt)]
