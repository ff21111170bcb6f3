"""The syncer's cycle: observe both sides, plan, apply. Numbered phases, clock injected."""

from __future__ import annotations

import gc
import logging
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial

from prometheus_client import CollectorRegistry

from ..common.conditions import condition_removal
from ..slurmrest import SlurmApiError, SlurmRestError, SlurmUnavailable
from ..slurmrest.nodestate import NodeState
from .cache import Cursor, KubeCache, PollingCache
from .kube import KubeApi, KubeApiError, condition_patch, pod_event
from .metrics import SyncerMetrics
from .model import Observed, Scope, SlurmdPod
from .plan import (
    Action,
    AnnotateNode,
    AnnotatePod,
    Drain,
    KubeAction,
    RemoveNodeCondition,
    Resume,
    SetPodCondition,
    SetPodRef,
    SlurmAction,
    plan,
    state_summary,
)
from .scope import changed_scope
from .slurm import SlurmApi

log = logging.getLogger("sunk.syncer")

FULL_PLAN_EVERY = 300
"""Cycles between plans of everything (else only what changed is planned): a safety net for a
change no diff saw, e.g. an object edited back and forth between two reads. About 5 minutes at
the deployed 1 s interval; a full plan costs ~0.2 s of CPU at 10,000 nodes."""


@dataclass
class CycleReport:
    ok: bool = False
    """Both sides read: a plan was made (its writes may still have partly failed)."""
    actions: list[Action] = field(default_factory=list)
    slurm_requests: int = 0
    slurm_writes: int = 0
    kube_reads: int = 0
    """Kubernetes read requests (lists and watch starts, by the informers' threads too) since the
    previous cycle ended: 0 in a quiet cycle once the first lists are done."""
    kube_writes: int = 0
    events: int = 0
    """Kubernetes Events created (one per drain or resume applied), not in kube_writes."""
    errors: list[str] = field(default_factory=list)
    slurm_changed: int = 0
    """Slurm nodes added, changed or removed since the previous read."""
    scope: Scope | None = None
    """What the plan looked at; None: everything (first cycle, after an error, periodically)."""


class Syncer:
    def __init__(
        self,
        slurm: SlurmApi,
        kube: KubeApi,
        namespace: str,
        *,
        cache: KubeCache | None = None,
        registry: CollectorRegistry | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        full_plan_every: int = FULL_PLAN_EVERY,
        freeze_gc: bool = False,
        drain_conditions: Iterable[str] = (),
    ) -> None:
        self.slurm = slurm
        self.drain_conditions = frozenset(drain_conditions)
        self.kube = kube
        self.namespace = namespace
        self.cache: KubeCache = cache if cache is not None else PollingCache(kube, namespace)
        self.metrics = SyncerMetrics(registry or CollectorRegistry())
        self.clock = clock
        self.full_plan_every = full_plan_every
        self.slurm_nodes: dict[str, NodeState] = {}
        """Slurm's nodes at the last successful read."""
        self.last_cycle_end = 0.0
        self.last_ok = False
        self._seen_states: set[str] = set()
        self._cursor: Cursor | None = None
        self._pods: Mapping[str, SlurmdPod] = {}
        self._plan_all = True
        self._since_full = 0
        self._frozen = not freeze_gc
        """`freeze_gc`: for a process (gc.freeze is process-wide), not for a test suite."""
        self._reads = 0

    # 1. observe -------------------------------------------------------------------------------
    def observe(self, report: CycleReport) -> tuple[Observed, Scope | None] | None:
        """Both views, and what the plan must look at. Nothing is remembered unless both reads
        succeed: a failed cycle leaves the next one the same changes to see."""
        try:
            states = self.slurm.node_states(future=True)
        except SlurmRestError as exc:
            self._error(report, "slurm_read", exc)
            return None  # fail closed: no Slurm view, no writes on either side
        try:
            kube = self.cache.read(self._cursor)
        except KubeApiError as exc:
            self._error(report, "kube_read", exc)
            return None
        new = {n.name: n for n in states}
        old = self.slurm_nodes
        changed = [name for name, n in new.items() if old.get(name) != n]
        changed += [name for name in old if name not in new]
        report.slurm_changed = len(changed)
        if changed or not self._seen_states:
            self._count_states(states)
        full = (
            self._plan_all
            or kube.node_changes is None
            or kube.pod_changes is None
            or self._since_full >= self.full_plan_every
        )
        scope: Scope | None = None  # everything
        if not full:
            assert kube.node_changes is not None and kube.pod_changes is not None
            scope = changed_scope(changed, kube.node_changes, kube.pod_changes, self._pods, kube.pods)
        self._since_full = 0 if full else self._since_full + 1
        self._plan_all = False
        self.slurm_nodes = new
        self._cursor = kube.cursor
        self._pods = kube.pods
        observed = Observed(
            slurm_nodes=new,
            kube_nodes=kube.nodes,
            pods=list(kube.pods.values()),
            namespace=self.namespace,
            drain_conditions=self.drain_conditions,
        )
        return observed, scope

    # 3. apply ---------------------------------------------------------------------------------
    def apply(self, actions: list[Action], report: CycleReport) -> None:
        slurm = [a for a in actions if isinstance(a, Drain | Resume | SetPodRef)]
        kube = [a for a in actions if not isinstance(a, Drain | Resume | SetPodRef)]
        done: list[Drain | Resume] = []
        try:
            self._apply_slurm(slurm, report, done)
        except SlurmUnavailable as exc:
            self._error(report, "slurm_write", exc)  # the rest waits for the next cycle
        for applied in done:
            if applied.pod is not None:
                self._event(report, applied)
        for action in kube:
            try:
                self._apply_kube(action)
                report.kube_writes += 1
                self.metrics.writes.labels("kubernetes", type(action).__name__).inc()
            except KubeApiError as exc:
                self._error(report, "kube_write", exc)

    def _slurm_write(self, report: CycleReport, kind: str, fn: Callable[[], None]) -> bool:
        try:
            fn()
            report.slurm_writes += 1
            self.metrics.writes.labels("slurm", kind).inc()
            return True
        except SlurmApiError as exc:  # e.g. the node vanished since the read; others still go
            self._error(report, "slurm_write", exc)
            return False

    def _event(self, report: CycleReport, action: Drain | Resume) -> None:
        """Best effort: an Event on the slurmd pod for every drain and resume sunk made."""
        pod = action.pod
        assert pod is not None
        if isinstance(action, Drain):
            message = f"Slurm node {pod.hostname} drained: {action.reason}"
            body = pod_event(pod, "SlurmNodeDrained", message, True, self.clock())
        else:
            body = pod_event(pod, "SlurmNodeResumed", f"Slurm node {pod.hostname} resumed", False, self.clock())
        try:
            self.kube.create_event(pod.namespace, body)
            report.events += 1
            self.metrics.writes.labels("kubernetes", "Event").inc()
        except KubeApiError as exc:
            self._error(report, "kube_write", exc)

    def _apply_slurm(self, actions: list[SlurmAction], report: CycleReport, done: list[Drain | Resume]) -> None:
        # Same-reason drains and all resumes go as one batch request each (POST /nodes/); a
        # batch Slurm refuses (one unknown name) is retried node by node.
        groups: dict[tuple[str, str | None], list[Drain | Resume]] = defaultdict(list)
        for action in actions:
            if isinstance(action, Drain):
                groups[("DRAIN", action.reason)].append(action)
            elif isinstance(action, Resume):
                groups[("RESUME", None)].append(action)
        for (state, reason), members in groups.items():
            kind = "Drain" if state == "DRAIN" else "Resume"
            if len(members) > 1:
                try:
                    self.slurm.update_nodes([a.node for a in members], state=state, reason=reason)
                    report.slurm_writes += 1
                    self.metrics.writes.labels("slurm", kind).inc()
                    done.extend(members)
                    continue
                except SlurmApiError:
                    pass
            for action in members:
                write = partial(self.slurm.update_node, action.node, state=state, reason=reason)
                if self._slurm_write(report, kind, write):
                    done.append(action)
        for action in actions:
            if isinstance(action, SetPodRef):
                self._slurm_write(report, "SetPodRef", partial(self.slurm.update_node, action.node, extra=action.extra))

    def _apply_kube(self, action: KubeAction) -> None:
        if isinstance(action, AnnotatePod):
            patch = {"metadata": {"annotations": dict(action.annotations)}}
            self._observe("pod", self.kube.patch_pod(action.namespace, action.name, patch))
        elif isinstance(action, SetPodCondition):
            status = condition_patch(action.condition, action.index, action.count)
            self._observe("pod", self.kube.patch_pod_status(action.namespace, action.name, status))
        elif isinstance(action, AnnotateNode):
            patch = {"metadata": {"annotations": dict(action.annotations)}}
            self._observe("node", self.kube.patch_node(action.name, patch))
        elif isinstance(action, RemoveNodeCondition):
            self._observe(
                "node", self.kube.patch_node_status(action.name, condition_removal(action.type, action.index))
            )
        else:
            status = condition_patch(action.condition, action.index, action.count)
            self._observe("node", self.kube.patch_node_status(action.name, status))

    def _observe(self, kind: str, reply: object) -> None:
        if isinstance(reply, dict):
            self.cache.observe(kind, reply)

    # the cycle --------------------------------------------------------------------------------
    def cycle(self) -> CycleReport:
        report = CycleReport()
        started = time.monotonic()
        before = self.slurm.requests
        seen = self.observe(report)  # 1. observe
        if seen is not None:
            observed, scope = seen
            report.ok = True
            report.scope = scope
            if scope is None or scope.slurm_nodes or scope.kube_nodes:
                report.actions = plan(observed, self.clock(), scope)  # 2. plan
            self.apply(report.actions, report)  # 3. apply
            if report.errors:
                self._plan_all = True  # a write that failed is planned again next cycle
        if report.ok and not self._frozen:
            # What the first cycle built lives as long as the process (the informers' projections
            # of every Node and pod, the clients): moved out of the collector's sight, a full
            # collection no longer walks them (one took ~0.2 s of a quiet cycle at 10,000 nodes).
            gc.freeze()
            self._frozen = True
        report.slurm_requests = self.slurm.requests - before
        reads = self.cache.reads
        report.kube_reads, self._reads = reads - self._reads, reads
        self.metrics.kube_reads.inc(report.kube_reads)
        self.metrics.cycle_seconds.observe(time.monotonic() - started)
        self.last_cycle_end = time.monotonic()
        self.last_ok = report.ok
        if report.ok and not report.errors:
            self.metrics.last_success.set_to_current_time()
        for action in report.actions:
            log.info("action %s", action)
        return report

    def close(self) -> None:
        self.cache.close()

    def run(self, interval: float, stop: threading.Event) -> None:
        while not stop.is_set():
            started = time.monotonic()
            try:
                self.cycle()
            except Exception:  # a bug must not kill the loop silently; liveness shows a stuck loop
                log.exception("sync cycle crashed")
                self.metrics.errors.labels("crash").inc()
                self.last_ok = False
            stop.wait(max(0.0, interval - (time.monotonic() - started)))

    def _error(self, report: CycleReport, phase: str, exc: Exception) -> None:
        report.errors.append(f"{phase}: {exc}")
        self.metrics.errors.labels(phase).inc()
        log.warning("%s: %s", phase, exc)

    def _count_states(self, nodes: list[NodeState]) -> None:
        counts = Counter(state_summary(n) for n in nodes)
        for state in self._seen_states - counts.keys():
            self.metrics.nodes.labels(state).set(0)
        for state, count in counts.items():
            self.metrics.nodes.labels(state).set(count)
        self._seen_states |= counts.keys()
