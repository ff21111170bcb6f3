"""The glue: observe everything, plan each NodeSet and each cluster's topology, apply, record.

One resync is level-based: it reads the whole state (NodeSets, slurmd pods, Nodes, Services, PDBs,
each cluster's ConfigMaps and Slurm nodes), so a missed event or a manual change is caught on the
next one. Kubernetes comes from `source` (cache.py): informers' caches in the process (no request),
or lists (5, 6 when a NodeSet is all-matching-nodes: every bound pod, for the admission check).
Then per cluster one Slurm node list, one read per ConfigMap its NodeSets mount (one per Slurm
file; cached `config_ttl` when it exists) and, with a topology plugin, one of the topology
ConfigMap (likewise). Writes happen only for actions, so an unchanged world writes nothing. Each
applied action leaves an Event on the NodeSet (or the topology ConfigMap)."""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import ValidationError

from sunk import keys, naming
from sunk.manifests.nodeset_pod import nodeset_pod, service_name
from sunk.nodeset_resource import API_VERSION, KIND, NodeSetResourceSpec
from sunk.policy import namespace_problem, pod_problems
from sunk.render import TopologyNode
from sunk.spec.errors import format_errors
from sunk.spec.operator import TenantPolicy

from ..common.conditions import Condition
from ..common.events import event
from ..common.timefmt import rfc3339
from ..slurmrest.models import Node as SlurmNode
from ..slurmrest.models import Reservation
from .admission import add_usage, pod_requests
from .cache import KubeState, ListedKube, WatchedKube
from .kube import KubeApi
from .model import (
    WARNINGS,
    Action,
    Budget,
    CreatePod,
    CreateService,
    DeletePod,
    Drain,
    KubeNode,
    NodeSetObject,
    Observed,
    Pod,
    PodDoesNotFit,
    Protect,
    RemoveSlurmNode,
    Resume,
    Unprotect,
    WriteStatus,
)
from .plan import plan
from .slurm import ClusterRef, SlurmApi, SlurmFactory
from .topology import (
    Reconfigure,
    TopologyAction,
    TopologyObserved,
    WriteTopology,
    config_map,
    plan_topology,
    slurmd_identities,
)

log = logging.getLogger("sunk.operator")
COMPONENT = "sunk-operator"


@dataclass
class ResyncReport:
    applied: list[Action | TopologyAction] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    slurm_unreadable: list[str] = field(default_factory=list)


class Reconciler:
    def __init__(
        self,
        kube: KubeApi,
        slurm_for: SlurmFactory,
        *,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        topology_delay: timedelta = timedelta(seconds=90),
        topology_retry: timedelta | None = None,
        may_act: Callable[[], bool] = lambda: True,
        identity: str = COMPONENT,
        policy: TenantPolicy | None = None,
        source: ListedKube | WatchedKube | None = None,
        config_ttl: timedelta = timedelta(0),
    ) -> None:
        self.kube = kube
        self.source = source or ListedKube(kube)
        """Where a resync reads Kubernetes: lists every time, or informers' caches."""
        self.config_ttl = config_ttl
        """How long the keys of a ConfigMap that exists are trusted without reading it again (a
        missing one is read every resync). 0: read at every resync."""
        self._config_keys: dict[tuple[str, str], tuple[datetime, frozenset[str]]] = {}
        self._topology_maps: dict[tuple[str, str], tuple[datetime, dict[str, Any]]] = {}
        self.slurm_for = slurm_for
        self.clock = clock
        self.topology_delay = topology_delay
        self.topology_retry = topology_retry
        """Interval of the reconfigures tried before topology_delay (None: only the one at the delay)."""
        self.may_act = may_act
        self.identity = identity
        self.slurm_reads = 0
        self.policy = policy
        """The tenant policy (sunk.policy). The operator's app always passes one; None serves
        every NodeSet as it asks (tests of other behaviour)."""
        self.namespaces_unreadable = False

    # --- observe ----------------------------------------------------------------------------

    def resync(self) -> ResyncReport:
        now = self.clock()
        self.namespaces_unreadable = False
        report = ResyncReport()
        state = self.source.read()
        clusters: dict[tuple[str, str], list[NodeSetObject]] = defaultdict(list)
        tenants = self._tenant_namespaces(state)
        for obj in state.nodesets:
            parsed = self._parse(obj, now)
            if parsed is not None and self._allowed(parsed, tenants, now):
                clusters[(parsed.namespace, parsed.spec.cluster_name)].append(parsed)
        # Only all-matching-nodes pods are pinned to a Node by the operator, so only then does it
        # check a kubelet's admission itself (replicas pods go through kube-scheduler).
        usage: dict[str, dict[str, int]] = {}
        if any(s.spec.mode == "all-matching-nodes" for sets in clusters.values() for s in sets):
            usage = state.bound_usage()
            # Pinned pods still waiting for kube-scheduler will land there too (another NodeSet's
            # on the same Node must not be over-committed against them).
            for node, requests in state.pinned:
                add_usage(usage, node, requests)
        for (namespace, cluster), sets in sorted(clusters.items()):
            sets.sort(key=lambda s: s.name)
            self._cluster(
                namespace,
                cluster,
                sets,
                state.pods,
                state.budgets,
                state.kube_nodes,
                state.services,
                usage,
                now,
                report,
            )
        return report

    def _parse(self, obj: Mapping[str, Any], now: datetime) -> NodeSetObject | None:
        meta = obj.get("metadata") or {}
        status = dict(obj.get("status") or {})
        namespace, name = meta.get("namespace", ""), meta.get("name", "")
        try:
            spec = NodeSetResourceSpec.model_validate(obj.get("spec") or {})
        except ValidationError as err:
            # The CRD schema can't express cross-field rules; say so on the object, once.
            message = "; ".join(str(p) for p in format_errors(err))[:1000]
            want = _refusal(keys.SPEC_VALID, "Invalid", message, meta.get("generation", 0), now)
            old = (status.get("conditions") or [{}])[0]
            if old.get("message") != message or status.get("observedGeneration") != want["observedGeneration"]:
                self._guarded(lambda: self.kube.patch_nodeset_status(namespace, name, want), f"status of {name}")
            return None
        return NodeSetObject(name, namespace, meta.get("uid", ""), int(meta.get("generation") or 0), spec, status)

    def _tenant_namespaces(self, state: KubeState) -> dict[str, dict[str, str]] | None:
        """The namespaces the policy serves (name -> labels); None: every namespace, or none
        could be read (then _allowed serves nothing this resync: fail closed)."""
        if self.policy is None or self.policy.namespace_label is None:
            return None
        label = self.policy.namespace_label
        try:
            found = state.namespaces(label)
            legacy = keys.LEGACY.get(label)  # namespaces labelled before the single key prefix
            if legacy is not None:
                found = {**state.namespaces(legacy), **found}
            return found
        except Exception as err:
            log.warning("namespaces unreadable, serving no NodeSet this resync: %s", err)
            self.namespaces_unreadable = True
            return None

    def _allowed(self, s: NodeSetObject, tenants: dict[str, dict[str, str]] | None, now: datetime) -> bool:
        """Whether the tenant policy lets this NodeSet have pods. A refused NodeSet gets no action
        at all (its existing pods are left as they are) and says why: the PolicyAllowed condition
        and a Warning Event, once per change of the reason."""
        if self.policy is None:
            return True
        if self.namespaces_unreadable:
            return False
        problems = []
        if self.policy.namespace_label is not None:
            problem = namespace_problem(self.policy, s.namespace, (tenants or {}).get(s.namespace))
            problems += [problem] if problem else []
        # The pod it would create (ConfigMap contents don't matter to the policy: one key each).
        where: dict[str, Any] = {"ordinal": 0} if s.spec.mode == "replicas" else {"kube_node": "policy-check"}
        config_keys = {name: frozenset({path.rsplit("/", 1)[-1]}) for path, name in s.spec.config_files.items()}
        problems += pod_problems(
            self.policy, nodeset_pod(s.spec, namespace=s.namespace, config_keys=config_keys, **where)
        )
        if not problems:
            return True
        message = "; ".join(problems)[:1000]
        old: dict[str, Any] = next(
            (c for c in s.status.get("conditions") or [] if c.get("type") == keys.POLICY_ALLOWED), {}
        )
        if old.get("message") != message or old.get("status") != "False":
            status = _refusal(keys.POLICY_ALLOWED, "PolicyViolation", message, s.generation, now)
            if self.may_act():
                self._guarded(
                    lambda: self.kube.patch_nodeset_status(s.namespace, s.name, status), f"status of {s.name}"
                )
                self._event(s.namespace, s.name, _involved(s), "PolicyViolation", message, now=now, warning=True)
        log.warning("%s/%s refused by the tenant policy: %s", s.namespace, s.name, message)
        return False

    def _cluster(
        self,
        namespace: str,
        cluster: str,
        sets: Sequence[NodeSetObject],
        pods_by: Mapping[tuple[str, str, str], list[Pod]],
        budgets_by: Mapping[tuple[str, str, str], list[Budget]] | None,
        kube_nodes: Mapping[str, KubeNode],
        services: set[tuple[str, str]],
        usage: dict[str, dict[str, int]],
        now: datetime,
        report: ResyncReport,
    ) -> None:
        first = sets[0].spec
        api: SlurmApi | None = None
        slurm: dict[str, SlurmNode] | None = None
        release: str | None = None
        try:
            ref = ClusterRef(namespace, cluster, first.jwt_secret, first.jwt_secret_key or "jwt_hs256.key")
            api = self.slurm_for(ref)
            self.slurm_reads += 1
            slurm = {n.name: n for n in api.list_nodes()}
            release = api.release()
        except Exception as err:  # any failure to read Slurm means: delete nothing this resync
            log.warning("cluster %s/%s: Slurm unreadable, deleting nothing: %s", namespace, cluster, err)
            report.slurm_unreadable.append(f"{namespace}/{cluster}")
        reservations: dict[str, Reservation] | None = None
        if api is not None and slurm is not None and any(s.spec.update_strategy.maintenance_reservation for s in sets):
            try:  # unread, updates held to a maintenance window wait
                reservations = {r.name: r for r in api.list_reservations()}
            except Exception as err:
                log.warning("cluster %s/%s: reservations unreadable, held updates wait: %s", namespace, cluster, err)
        # One read per ConfigMap a NodeSet of the cluster mounts (NodeSets share most of them).
        map_keys: dict[str, frozenset[str] | None] = {}
        for s in sets:
            for name in sorted(set(s.spec.config_files.values()) - set(map_keys)):
                map_keys[name] = self._config_map_keys(namespace, name, now)
            observed = Observed(
                nodeset=s,
                pods=pods_by.get((namespace, cluster, s.spec.name), []),
                kube_nodes=kube_nodes,
                slurm=slurm,
                config_keys={n: k for n in s.spec.config_files.values() if (k := map_keys[n]) is not None},
                service_exists=(namespace, service_name(s.spec)) in services,
                node_usage=usage,
                budgets=None if budgets_by is None else budgets_by.get((namespace, cluster, s.spec.name), []),
                reservations=reservations,
                slurm_release=release,
            )
            for action in plan(observed, now):
                applied = self._apply(s, action, api, now, report)
                if applied and isinstance(action, CreatePod):  # later NodeSets of this resync see it
                    kube_node = (action.pod["metadata"].get("annotations") or {}).get(keys.KUBE_NODE)
                    if kube_node:
                        add_usage(usage, kube_node, pod_requests(action.pod))
        self._topology(namespace, cluster, first, sets, pods_by, kube_nodes, slurm, api, now, report)

    def _config_map_keys(self, namespace: str, name: str, now: datetime) -> frozenset[str] | None:
        cached = self._config_keys.get((namespace, name))
        if cached is not None and now < cached[0]:
            return cached[1]
        cm = self.kube.get_config_map(namespace, name)
        if cm is None:
            self._config_keys.pop((namespace, name), None)
            return None
        found = frozenset((cm.get("data") or {}).keys())
        if self.config_ttl:
            self._config_keys[(namespace, name)] = (now + self.config_ttl, found)
        return found

    def _topology_config_map(self, namespace: str, name: str, now: datetime) -> dict[str, Any] | None:
        """The topology ConfigMap, read again after config_ttl, or at once after this operator
        wrote it (it is the only writer; a manual edit is seen within config_ttl)."""
        cached = self._topology_maps.get((namespace, name))
        if cached is not None and now < cached[0]:
            return cached[1]
        found = self.kube.get_config_map(namespace, name)
        if self.config_ttl and found is not None:
            self._topology_maps[(namespace, name)] = (now + self.config_ttl, found)
        return found

    def _topology(
        self,
        namespace: str,
        cluster: str,
        first: NodeSetResourceSpec,
        sets: Sequence[NodeSetObject],
        pods_by: Mapping[tuple[str, str, str], list[Pod]],
        kube_nodes: Mapping[str, KubeNode],
        slurm: Mapping[str, SlurmNode] | None,
        api: SlurmApi | None,
        now: datetime,
        report: ResyncReport,
    ) -> None:
        if first.topology_file is None:
            return
        nodes = [
            TopologyNode(p.slurm_node, kube_nodes[p.node_name].labels)
            for s in sets
            for p in pods_by.get((namespace, cluster, s.spec.name), [])
            if p.node_name is not None and p.node_name in kube_nodes and not p.deleting
        ]
        observed = TopologyObserved(
            namespace=namespace,
            cluster=cluster,
            spec=first.topology,
            topologies=tuple(first.topologies),
            release=first.slurm_version,
            extra=tuple(first.topology_extra),
            nodes=nodes,
            config_map=self._topology_config_map(namespace, naming.topology_config_map(cluster), now),
            registered=frozenset(slurm) if slurm is not None else None,
            started=slurmd_identities(
                (p for nodeset in sets for p in pods_by.get((namespace, cluster, nodeset.spec.name), [])),
                {n: node.slurmd_start_time for n, node in (slurm or {}).items() if node.slurmd_start_time is not None},
            ),
        )
        for action in plan_topology(observed, now, self.topology_delay, self.topology_retry):
            self._apply_topology(action, api, now, report)

    # --- apply -------------------------------------------------------------------------------

    def _guarded(self, fn: Callable[[], None], what: str) -> bool:
        try:
            fn()
        except Exception as err:  # one failed action must not stop the others; next resync retries
            log.warning("%s failed: %s", what, err)
            return False
        return True

    def _apply(
        self, s: NodeSetObject, action: Action, api: SlurmApi | None, now: datetime, report: ResyncReport
    ) -> bool:
        """Whether the action was applied."""
        if not self.may_act():
            return False
        ns = s.namespace
        fn: Callable[[], None]
        if isinstance(action, CreatePod):
            body = action.pod
            fn = lambda: self.kube.create_pod(body)  # noqa: E731
        elif isinstance(action, DeletePod):
            name = action.name
            fn = lambda: self.kube.delete_pod(ns, name)  # noqa: E731
        elif isinstance(action, CreateService):
            svc = action.service
            fn = lambda: self.kube.create_service(svc)  # noqa: E731
        elif isinstance(action, WriteStatus):
            status = action.status
            fn = lambda: self.kube.patch_nodeset_status(ns, s.name, status)  # noqa: E731
        elif isinstance(action, Protect):
            budget = action.budget
            fn = lambda: self.kube.create_budget(budget)  # noqa: E731
        elif isinstance(action, Unprotect):
            name = action.name
            fn = lambda: self.kube.delete_budget(ns, name)  # noqa: E731
        elif isinstance(action, PodDoesNotFit):
            fn = lambda: None  # noqa: E731 (nothing to apply: the Warning Event is the action)
        else:
            if api is None:
                return False
            fn = _slurm_call(api, action)
        if not self._guarded(fn, f"{s.key}: {type(action).__name__}"):
            report.errors.append(f"{s.key}: {type(action).__name__}")
            return False
        report.applied.append(action)
        event = action.event()
        if event is not None:
            warning = isinstance(action, WARNINGS)
            log.log(logging.WARNING if warning else logging.INFO, "%s: %s: %s", s.key, *event)
            self._event(ns, s.name, _involved(s), *event, now=now, warning=warning)
        return True

    def _apply_topology(
        self, action: TopologyAction, api: SlurmApi | None, now: datetime, report: ResyncReport
    ) -> None:
        if not self.may_act():
            return
        ns, name = action.namespace, action.config_map if isinstance(action, Reconfigure) else action.name
        self._topology_maps.pop((ns, name), None)  # written now: read it again next resync
        fn: Callable[[], None]
        if isinstance(action, WriteTopology):
            text, written = action.text, action.written
            if action.create:
                body = config_map(ns, action.cluster, text, written, action.key)
                fn = lambda: self.kube.create_config_map(body)  # noqa: E731
            else:
                patch = {"metadata": {"annotations": {keys.TOPOLOGY_WRITTEN: written}}, "data": {action.key: text}}
                fn = lambda: self.kube.patch_config_map(ns, name, patch)  # noqa: E731
        else:
            if api is None:
                return
            key = action.key
            reconfigure = api.reconfigure

            def fn() -> None:
                reconfigure()
                self.kube.patch_config_map(ns, name, {"metadata": {"annotations": {keys.TOPOLOGY_RECONFIGURED: key}}})

        if not self._guarded(fn, f"{ns}/{name}: {type(action).__name__}"):
            report.errors.append(f"{ns}/{name}: {type(action).__name__}")
            return
        report.applied.append(action)
        reason, message = action.event()
        log.info("%s/%s: %s: %s", ns, name, reason, message)
        self._event(
            ns, name, {"apiVersion": "v1", "kind": "ConfigMap", "name": name, "namespace": ns}, reason, message, now=now
        )

    def _event(
        self,
        namespace: str,
        name: str,
        involved: Mapping[str, str],
        reason: str,
        message: str,
        *,
        now: datetime,
        warning: bool = False,
    ) -> None:
        body = event(
            {**involved, "namespace": namespace},
            reason,
            message,
            now=now,
            component=COMPONENT,
            warning=warning,
            instance=self.identity,
        )
        self._guarded(lambda: self.kube.create_event(body), f"event {reason} on {name}")


def _refusal(ctype: str, reason: str, message: str, generation: int, now: datetime) -> dict[str, Any]:
    """The status of a NodeSet the operator will not serve: one False condition saying why."""
    condition = Condition(ctype, "False", reason, message, rfc3339(now))
    return {"observedGeneration": generation, "conditions": [condition.to_dict()]}


def _involved(s: NodeSetObject) -> dict[str, str]:
    """The NodeSet as an Event's involvedObject."""
    return {"apiVersion": API_VERSION, "kind": KIND, "name": s.name, "namespace": s.namespace, "uid": s.uid}


def _slurm_call(api: SlurmApi, action: Action) -> Callable[[], None]:
    if isinstance(action, Drain):
        return lambda: api.drain(action.slurm_node, action.reason)
    if isinstance(action, Resume):
        return lambda: api.resume(action.slurm_node)
    if isinstance(action, RemoveSlurmNode):
        return lambda: api.remove(action.slurm_node, f"{naming.OPERATOR_REASON_PREFIX} {action.why}")
    raise TypeError(f"not a Slurm action: {action!r}")
