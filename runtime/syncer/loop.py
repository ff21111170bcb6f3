"""The syncer's cycle: observe both sides, plan, apply. Numbered phases, clock injected."""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial

from prometheus_client import CollectorRegistry

from ..common.conditions import condition_removal
from ..slurmrest import Node, NodeCache, NodeDiff, SlurmApiError, SlurmRestError, SlurmUnavailable
from .kube import KubeApi, KubeApiError, condition_patch, parse_node, parse_pod, pod_event
from .metrics import SyncerMetrics
from .model import NODESET_LABEL, Observed
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
from .slurm import SlurmApi

log = logging.getLogger("sunk.syncer")


@dataclass
class CycleReport:
    ok: bool = False
    """Both sides read: a plan was made (its writes may still have partly failed)."""
    actions: list[Action] = field(default_factory=list)
    slurm_requests: int = 0
    slurm_writes: int = 0
    kube_writes: int = 0
    events: int = 0
    """Kubernetes Events created (one per drain or resume applied), not in kube_writes."""
    errors: list[str] = field(default_factory=list)
    diff: NodeDiff | None = None


class Syncer:
    def __init__(
        self,
        slurm: SlurmApi,
        kube: KubeApi,
        namespace: str,
        *,
        registry: CollectorRegistry | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.slurm = slurm
        self.kube = kube
        self.namespace = namespace
        self.metrics = SyncerMetrics(registry or CollectorRegistry())
        self.clock = clock
        self.cache = NodeCache()
        self.last_cycle_end = 0.0
        self.last_ok = False
        self._seen_states: set[str] = set()

    # 1. observe -------------------------------------------------------------------------------
    def observe(self, report: CycleReport) -> Observed | None:
        try:
            nodes = self.slurm.list_nodes(future=True)
        except SlurmRestError as exc:
            self._error(report, "slurm_read", exc)
            return None  # fail closed: no Slurm view, no writes on either side
        try:
            kube_nodes = [parse_node(o) for o in self.kube.list_nodes()]
            pods = [parse_pod(o, self.namespace) for o in self.kube.list_pods(self.namespace, NODESET_LABEL)]
        except KubeApiError as exc:
            self._error(report, "kube_read", exc)
            return None
        report.diff = self.cache.update(nodes)
        self._count_states(nodes)
        return Observed(
            slurm_nodes=self.cache.nodes,
            kube_nodes={n.name: n for n in kube_nodes},
            pods=[p for p in pods if p is not None],
            namespace=self.namespace,
        )

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
            self.kube.patch_pod(action.namespace, action.name, {"metadata": {"annotations": dict(action.annotations)}})
        elif isinstance(action, SetPodCondition):
            patch = condition_patch(action.condition, action.index, action.count)
            self.kube.patch_pod_status(action.namespace, action.name, patch)
        elif isinstance(action, AnnotateNode):
            self.kube.patch_node(action.name, {"metadata": {"annotations": dict(action.annotations)}})
        elif isinstance(action, RemoveNodeCondition):
            self.kube.patch_node_status(action.name, condition_removal(action.type, action.index))
        else:
            self.kube.patch_node_status(action.name, condition_patch(action.condition, action.index, action.count))

    # the cycle --------------------------------------------------------------------------------
    def cycle(self) -> CycleReport:
        report = CycleReport()
        started = time.monotonic()
        before = self.slurm.requests
        observed = self.observe(report)  # 1. observe
        if observed is not None:
            report.ok = True
            report.actions = plan(observed, self.clock())  # 2. plan
            self.apply(report.actions, report)  # 3. apply
        report.slurm_requests = self.slurm.requests - before
        self.metrics.cycle_seconds.observe(time.monotonic() - started)
        self.last_cycle_end = time.monotonic()
        self.last_ok = report.ok
        if report.ok and not report.errors:
            self.metrics.last_success.set_to_current_time()
        for action in report.actions:
            log.info("action %s", action)
        return report

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

    def _count_states(self, nodes: list[Node]) -> None:
        counts = Counter(state_summary(n) for n in nodes)
        for state in self._seen_states - counts.keys():
            self.metrics.nodes.labels(state).set(0)
        for state, count in counts.items():
            self.metrics.nodes.labels(state).set(count)
        self._seen_states |= counts.keys()
