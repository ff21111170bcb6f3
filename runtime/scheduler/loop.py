"""Glue: observe Kubernetes and Slurm, plan, apply each action idempotently, count and report.

All durable state lives in Slurm (jobs carry markers) and in Kubernetes (a bound pod's annotations
name its job and Slurm node), so a restarted scheduler picks up where the last one stopped. Only the
failure memory (which attempts to hold back) and the first-seen times are in memory.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_for
from dataclasses import dataclass, replace

from sunk import keys

from ..slurmrest import SlurmRestError
from .cache import NotSynced, WatchedCluster
from .fit import NodeView, node_view
from .kube import ALL_NAMESPACES, Conflict, EvictionBlocked, KubeApi
from .metrics import Health, Metrics
from .model import Snapshot, exclusive_nodes, node_map, pod_view, wanted_nodes
from .plan import (
    DOES_NOT_FIT,
    GRACE,
    Action,
    Bind,
    Cancel,
    Condition,
    Evict,
    Failure,
    Reject,
    Reroute,
    Submit,
    Unfit,
    event_reason,
    plan,
    refused_reason,
)
from .request import NO_TOPOLOGY, Topology
from .slurm import Rejected, SlurmApi
from .submitter import Submitter

log = logging.getLogger("sunk.scheduler")

NAMESPACE_TTL = 10.0
"""Namespace defaults are re-read this often; a changed default applies within that time."""


MIN_GAP = 0.05
"""Seconds between two cycles at least, however often watch events arrive."""

SUBMIT_WAIT = 0.25
"""Seconds a cycle waits for the submits it planned before it goes on (a cycle always waits for its
bindings). Submits no longer stop there: the submitter (submitter.py) runs them on while the next
cycles observe, plan and bind, so slurmctld is never idle while a burst's pods wait for their
jobs. The wait paces the cycles of a burst: a cycle with submits still queued starts the next at
once, which binds the pods whose jobs started meanwhile and hands over a fresh plan."""

SUBMIT_WORKERS = 2
"""Submits in flight at once (the process's setting; each worker has its own slurmrestd client).
slurmrestd parses and authenticates one request while slurmctld creates the job of another: 200
placeholder submits took 0.44 s with two at a time against 0.58-0.74 s one at a time, and no less
with four (measured on 24.11, 2 cores). Slurm numbers jobs in the order they reach slurmctld, so
two pods of a burst may get their job ids in either order; each pod still gets exactly one job."""

STRAGGLERS = 8
"""Slurm actions that may still be running past SUBMIT_WAIT (threads beyond SUBMIT_WORKERS): a
submit slurmrestd or slurmctld is slow to answer (a large gang, a controller busy with other work)
no longer holds the others, so the submits of the pods behind it go on. Its workload sits out the
cycles until it returns and a job list read after that shows its outcome. Past this many stuck at
once, new submits queue behind them again."""

EVENT_WORKERS = 2
"""Threads writing the Events that only report a binding (`Scheduled`, `CPUPinningUnknownToSlurm`).
They are news, not a step of scheduling: kube-scheduler's own event recorder writes them
asynchronously. A burst's cycle waits for them only until SUBMIT_WAIT from its start; before, each
Binding's Event was a second API write inside the cycle, and the next cycle's job read and
Bindings waited for all of them (half of a 1,000-pod burst's Kubernetes phase, measured)."""

EVENT_BACKLOG = 1000
"""Reporting Events queued at most: past this many, a cycle waits for all of them, so a burst
larger than the API server can take Events for slows the bindings down rather than growing a
queue without bound."""

FOLLOW_UP = 0.1
"""Poll interval while a job this scheduler submitted (or made room for, by cancelling) may be about
to start: slurmctld starts batch jobs only in its background pass, once a second (24.11, measured:
every allocation of a 200-job burst fell on a whole second, none at submission), so job states are
read this often for START_WATCH seconds after a cycle that submitted or cancelled, while any of our
jobs is pending, and its pods are bound within FOLLOW_UP of their start instead of one poll interval
later. A /jobs/state read costs ~5 ms for 200 jobs. A cycle that left submits for the next one
(SUBMIT_WAIT) is followed at once."""

START_WATCH = 1.5
"""Seconds after a submit or cancel during which pending jobs are polled every FOLLOW_UP: one
slurmctld pass (1 s) plus room for a pass that runs late on a busy controller."""


def _marker(action: Action) -> str:
    assert isinstance(action, Submit | Reject | Reroute)
    return action.marker.text


def backoff(attempts: int, base: float = 10.0, cap: float = 300.0) -> float:
    """Delay before retrying a submit Slurm refused: 10 s, 20 s, 40 s, ... at most 5 min."""
    return float(min(cap, base * 2 ** max(0, attempts - 1)))


@dataclass
class _Attempts:
    failure: Failure
    count: int


class Scheduler:
    def __init__(
        self,
        kube: KubeApi,
        slurm: SlurmApi,
        *,
        scheduler_name: str,
        namespace: str,
        pod_namespaces: Sequence[str] = (),
        metrics: Metrics | None = None,
        health: Health | None = None,
        clock: Callable[[], float] = time.time,
        kube_workers: int = 8,
        grace: float = GRACE,
        cache: WatchedCluster | None = None,
        submit_workers: int = 1,
        topology: Topology = NO_TOPOLOGY,
    ) -> None:
        self.kube = kube
        self.cache = cache
        """Pods, Nodes and slurmd pods from watches (the process); without it every cycle lists
        them through `kube` (the glue tests' fakes)."""
        self.slurm = slurm
        self.scheduler_name = scheduler_name
        self.namespace = namespace
        self.pod_namespaces = tuple(pod_namespaces) or (namespace,)
        """Where this scheduler's pods live: by default the cluster's own namespace (one tenant's
        scheduler never touches another tenant's pods, or their jobs); "*" for all."""
        self.metrics = metrics or Metrics()
        self.health = health or Health(stale_after=60.0)
        self.clock = clock
        self.grace = grace
        """Seconds a bind that does not fit is retried on the same job before it is rerouted."""
        self.topology = topology
        """The stack's topology: gangs are placed in one block or leaf switch (request.py)."""
        self.failures: dict[str, _Attempts] = {}
        self.first_seen: dict[str, float] = {}
        self._ns_cache: dict[str, tuple[float, dict[str, str]]] = {}
        self._pool = ThreadPoolExecutor(max_workers=kube_workers, thread_name_prefix="sunk-scheduler-kube")
        # One thread for the cycle's cancels (one request), then its handover of the submits, while
        # its Kubernetes writes go on: cancels first, so the submits after them find the room.
        self._slurm_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sunk-scheduler-slurm")
        # Submits, SUBMIT_WORKERS at a time plus the STRAGGLERS, running on between cycles: `slurm`
        # takes concurrent submits (each thread its own slurmrestd client).
        self._submitter: Submitter[Action] = Submitter(
            lambda a: self._apply_counted(a, self.clock()),
            _marker,
            workers=submit_workers,
            stragglers=STRAGGLERS,
            straggle_after=SUBMIT_WAIT,
        )
        self._events_pool = ThreadPoolExecutor(max_workers=EVENT_WORKERS, thread_name_prefix="sunk-scheduler-events")
        self._after: list[Future[None]] = []
        self._after_lock = threading.Lock()
        self._jobs_read = time.monotonic()
        """When this cycle's job list was asked for: what a bind's job state is as of."""
        self.backlog = 0
        """Slurm actions the last cycle left queued (not started within SUBMIT_WAIT; they run on)."""
        self.pending = 0
        """Our jobs the last cycle saw pending in Slurm."""

    # --- observe ----------------------------------------------------------------------------

    def _defaults(self, namespace: str, now: float) -> dict[str, str]:
        cached = self._ns_cache.get(namespace)
        if cached is None or now - cached[0] > NAMESPACE_TTL:
            cached = (now, self.kube.namespace_annotations(namespace))
            self._ns_cache[namespace] = cached
        return cached[1]

    def observe(self, now: float) -> Snapshot:
        """Everything or nothing: any read failing raises, and the cycle does nothing (fail closed)."""
        watched = self.cache.snapshot() if self.cache is not None else None
        if watched is not None:
            pods, slurmd = watched.pods, watched.slurmd
        else:
            pods = [pod_view(p) for p in self.kube.list_pods(self.scheduler_name, self.pod_namespaces)]
            slurmd = self.kube.list_slurmd_pods(self.namespace)
        node_of = node_map(slurmd)
        # A job marked for a namespace outside our scope is not ours to adopt or cancel.
        self._jobs_read = time.monotonic()
        jobs = [j for j in self.slurm.jobs() if self._in_scope(j.marker.namespace)]
        waiting = sorted({p.namespace for p in pods if p.live and not p.node_name})
        defaults = {ns: self._defaults(ns, now) for ns in waiting}
        wanted = wanted_nodes(pods, jobs, node_of)
        nodes = watched.node_views(wanted) if watched is not None else self._nodes(wanted)
        return Snapshot(
            pods=pods,
            jobs=jobs,
            node_of=node_of,
            namespace_defaults=defaults,
            exclusive=exclusive_nodes(slurmd),
            nodes=nodes,
        )

    def _nodes(self, names: list[str]) -> dict[str, NodeView]:
        """The Nodes pods may be bound to, with their pods' requests. A Node that cannot be read
        is left out: nothing is bound there this cycle (fail closed), everything else goes on."""
        out = {}
        for name in names:
            try:
                node = self.kube.get_node(name)
                if node is not None:
                    out[name] = node_view(node, self.kube.pods_on_node(name))
            except Exception:
                self.metrics.errors.labels("read_node").inc()
                log.exception("reading Node %s and its pods failed; binding nothing there this cycle", name)
        return out

    def _in_scope(self, namespace: str) -> bool:
        return ALL_NAMESPACES in self.pod_namespaces or namespace in self.pod_namespaces

    # --- one cycle --------------------------------------------------------------------------

    def cycle(self) -> list[Action]:
        started = time.monotonic()
        now = self.clock()
        snap = self._observed(now, started)
        if snap is None:
            return []
        self._remember(snap, now)
        self.pending = sum(1 for j in snap.jobs if j.state == "PENDING")
        snap = self._without_busy(snap)
        failures = {k: a.failure for k, a in dict(self.failures).items()}
        actions = self._execute(plan(snap, failures, now, grace=self.grace, topology=self.topology), snap, now)
        self.health.attempted(ok=True)
        self.metrics.last_cycle.set(now)
        self.metrics.cycle_seconds.observe(time.monotonic() - started)
        return actions

    def _observed(self, now: float, started: float) -> Snapshot | None:
        """The cycle's view of the cluster, None when there is none to act on this cycle."""
        try:
            snap = self.observe(now)
        except NotSynced as e:
            # The first cycle may come before the informers' first lists: nothing failed.
            self.health.attempted(ok=False)
            log.info("%s; doing nothing this cycle", e)
            return None
        except Exception:
            self.metrics.errors.labels("observe").inc()
            self.health.attempted(ok=False)
            log.exception("observe failed; doing nothing this cycle")
            return None
        self.metrics.observe_seconds.observe(time.monotonic() - started)
        return snap

    def _without_busy(self, snap: Snapshot) -> Snapshot:
        """A workload whose Slurm action is still running, or returned after this job list was
        read, sits this cycle out: the list can't show what that action did yet."""
        busy = self._busy()
        if not busy:
            return snap
        return replace(
            snap,
            pods=[p for p in snap.pods if p.marker.text not in busy],
            jobs=[j for j in snap.jobs if j.marker.text not in busy],
        )

    def _execute(self, actions: list[Action], snap: Snapshot, now: float) -> list[Action]:
        """The cycle's cancels, then its submits handed to the submitter (oldest pods first), in
        their own thread, while the Kubernetes actions (one pod each, independent) overlap their
        round trips in the pool, bindings first: they end a pod's wait. Events that only report a
        binding are written beside them (EVENT_WORKERS). Waits for the submits and those Events up
        to SUBMIT_WAIT; what is not done by then runs on. Returns the actions planned."""
        started = time.monotonic()
        cancels = [a for a in actions if isinstance(a, Cancel)]
        created = {p.uid: p.created for p in snap.pods}
        slurm = sorted(
            (a for a in actions if isinstance(a, Submit | Reject | Reroute)),
            key=lambda a: min((created.get(p.uid, 0.0) for p in a.pods), default=0.0),
        )
        handed = self._slurm_pool.submit(self._slurm_actions, cancels, slurm)
        binds = [a for a in actions if isinstance(a, Bind)]
        others = [a for a in actions if isinstance(a, Evict | Condition | Unfit)]
        list(self._pool.map(lambda a: self._apply_counted(a, now), [*binds, *others]))
        handed.result()
        self.backlog = self._submitter.wait(max(0.0, started + SUBMIT_WAIT - time.monotonic()))
        self._wait_after(max(0.0, started + SUBMIT_WAIT - time.monotonic()))
        return actions

    def _slurm_actions(self, cancels: list[Cancel], actions: Sequence[Action]) -> None:
        """Cancels, then this plan's submits replace those of the last plan not started yet
        (submitter.py): a workload whose submit started since this cycle's job list was read is
        left out, so nothing is submitted twice."""
        self._cancel(cancels)
        self._submitter.offer(actions, since=self._jobs_read)

    def _busy(self) -> set[str]:
        """Markers whose Slurm action runs, or returned after this cycle's job list was read."""
        return self._submitter.busy(since=self._jobs_read)

    def _later(self, fn: Callable[[], None]) -> None:
        """Run beside the bindings, in the order asked (EVENT_WORKERS at a time)."""
        with self._after_lock:
            self._after.append(self._events_pool.submit(self._guarded, fn))

    def _guarded(self, fn: Callable[[], None]) -> None:
        try:
            fn()
        except Exception:
            self.metrics.errors.labels("event").inc()
            log.exception("writing an Event failed")

    def _wait_after(self, timeout: float) -> None:
        """Waits for the reporting Events until `timeout`, or for all of them while more than
        EVENT_BACKLOG are queued; those not written by then are written meanwhile."""
        with self._after_lock:
            self._after = [f for f in self._after if not f.done()]
            pending = list(self._after)
        wait_for(pending, timeout=None if len(pending) > EVENT_BACKLOG else timeout)

    def _apply_counted(self, action: Action, now: float) -> None:
        kind, mark = type(action).__name__.lower(), time.monotonic()
        try:
            self.apply(action, now)
        except Exception:
            self.metrics.errors.labels(kind).inc()
            log.exception("%s failed", action)
        self.metrics.action_seconds.labels(kind).observe(time.monotonic() - mark)

    def close(self) -> None:
        self._slurm_pool.shutdown(wait=True)
        self._submitter.close()
        self._pool.shutdown(wait=True)
        self._events_pool.shutdown(wait=True)

    def _remember(self, snap: Snapshot, now: float) -> None:
        uids = {p.uid for p in snap.pods}
        for pod in snap.pods:
            if pod.live and not pod.node_name:
                self.first_seen.setdefault(pod.uid, now)
        for uid in set(self.first_seen) - uids:
            del self.first_seen[uid]
        markers = {p.marker.text for p in snap.pods}
        for key in set(self.failures) - markers:
            self.failures.pop(key, None)  # a straggling submit may have written it meanwhile
        self.metrics.queue.set(sum(1 for p in snap.pods if p.live and not p.node_name))

    def run(self, stop: threading.Event, interval: float, wake: threading.Event | None = None) -> None:
        """Cycle until `stop` is set; `wake` (set by a watch) starts the next cycle early."""
        wake = wake or threading.Event()
        watch_until = 0.0
        while not stop.is_set():
            wake.clear()
            actions = self.cycle()
            if self.backlog:
                continue  # pods wait for submits still queued: plan afresh (and bind) at once
            acted = any(isinstance(a, Submit | Reroute | Cancel) for a in actions)
            if acted:
                watch_until = time.monotonic() + START_WATCH
            if acted or (self.pending and time.monotonic() < watch_until):
                stop.wait(FOLLOW_UP)
            elif wake.wait(interval):
                # Our own writes wake us too; a short pause batches them into the next cycle.
                stop.wait(MIN_GAP)

    # --- apply ------------------------------------------------------------------------------

    def apply(self, action: Action, now: float) -> None:
        if isinstance(action, Submit):
            self._submit(action, now)
        elif isinstance(action, Bind):
            self._bind(action, now)
        elif isinstance(action, Evict):
            try:
                self.kube.evict(action.pod)
            except EvictionBlocked as e:
                # Retried next cycle; the Event waits for the eviction so it is written once.
                self.metrics.errors.labels("evict_blocked").inc()
                log.warning("%s (%s)", e, action.message)
                return
            log.info("evicted %s: %s", action.pod, action.message)
            self.kube.event(action.pod, "Warning", action.reason, f"{action.message}; pod evicted")
            self.metrics.evictions.labels(action.reason).inc()
        elif isinstance(action, Cancel):
            self._cancel([action])
        elif isinstance(action, Condition):
            self.kube.set_scheduled(action.pod, "False", action.reason, action.message)
            if action.event:
                self.kube.event(action.pod, "Normal", action.reason, action.message)
        elif isinstance(action, Unfit):
            log.info("not binding %s: %s", action.pod, action.message)
            self.metrics.unfit.inc()
            self.kube.event(action.pod, "Warning", "FailedScheduling", action.message)
            self.kube.set_scheduled(action.pod, "False", DOES_NOT_FIT, action.message)
        elif isinstance(action, Reroute):
            self._reroute(action, now)
        elif isinstance(action, Reject):
            log.info("reject %s: %s", action.marker.text, action.message)
            self.failures[action.marker.text] = _Attempts(Failure(action.spec_hash, float("inf")), 1)
            self.metrics.rejects.inc()
            for pod in action.pods:
                self.kube.event(pod, "Warning", event_reason(action.reason), action.message)
                self.kube.set_scheduled(pod, "False", action.reason, action.message)

    def _cancel(self, actions: list[Cancel]) -> None:
        """All of a cycle's cancels in one request (one DELETE /jobs/ instead of ~14 ms each)."""
        if not actions:
            return
        mark = time.monotonic()
        for action in actions:
            log.info("cancel job %d (%s): %s", action.job_id, action.marker.text, action.reason)
        try:
            self.slurm.cancel(a.job_id for a in actions)
        except Exception:
            self.metrics.errors.labels("cancel").inc()
            log.exception("cancelling %d jobs failed", len(actions))
            return
        self.metrics.cancels.inc(len(actions))
        self.metrics.action_seconds.labels("cancel").observe(time.monotonic() - mark)

    def _refused(self, marker: str, spec_hash: str, now: float) -> float:
        """Record one more refusal of this request by Slurm; the seconds until it is tried again
        (backoff grows while the request stays the same, and starts over when it changes)."""
        previous = self.failures.get(marker)
        count = previous.count + 1 if previous and previous.failure.spec_hash == spec_hash else 1
        delay = backoff(count)
        self.failures[marker] = _Attempts(Failure(spec_hash, now + delay), count)
        return delay

    def _submit(self, action: Submit, now: float) -> None:
        try:
            job_id = self.slurm.submit(action.request, action.marker)
        except Rejected as e:
            delay = self._refused(action.marker.text, action.spec_hash, now)
            self.metrics.rejects.inc()
            message = f"Slurm rejected the placeholder job: {e}; retrying in {delay:.0f} s if nothing changes"
            log.info("submit %s rejected: %s", action.marker.text, e)
            for pod in action.pods:
                self.kube.event(pod, "Warning", event_reason(refused_reason(action.marker)), message)
                self.kube.set_scheduled(pod, "False", refused_reason(action.marker), message)
            return
        except SlurmRestError:
            self.metrics.errors.labels("submit").inc()
            raise
        self.failures.pop(action.marker.text, None)
        self.metrics.submits.inc()
        log.info("submitted job %d for %s (%d pods)", job_id, action.marker.text, len(action.pods))

    def _reroute(self, action: Reroute, now: float) -> None:
        """Submit the replacement first: if Slurm refuses it, the old allocation is kept."""
        excluded = ",".join(action.request.exclude)
        try:
            job_id = self.slurm.submit(action.request, action.marker)
        except Rejected as e:
            delay = self._refused(action.marker.text, action.spec_hash, now)
            message = (
                f"Slurm refused the job without {excluded}: {e}; keeping job {action.old_job_id}, "
                f"retrying in {delay:.0f} s"
            )
            log.info("reroute of %s refused: %s", action.marker.text, e)
            for pod in action.pods:
                self.kube.event(pod, "Warning", "FailedScheduling", message)
            return
        self.metrics.submits.inc()
        self.metrics.reroutes.inc()
        log.info("job %d replaces job %d for %s, excluding %s", job_id, action.old_job_id, action.marker.text, excluded)
        self._cancel([Cancel(action.old_job_id, action.marker, f"replaced by job {job_id} (excluding {excluded})")])
        for pod in action.pods:
            message = (
                f"Slurm job {job_id} replaces job {action.old_job_id}, excluding {excluded} where this pod did not fit"
            )
            self.kube.event(pod, "Normal", "SlurmJobResubmitted", message)

    def _bind(self, action: Bind, now: float) -> None:
        # No read first: the pod is as observed this cycle, and the API server itself refuses a
        # Binding for a pod already bound or recreated under the same name (uid precondition),
        # 409, or gone, 404. So a pod is never bound twice, by this run or an earlier one.
        annotations = {
            keys.JOB_ID: str(action.job_id),
            keys.SLURM_NODE: action.slurm_node,
            keys.JOB_START: action.job_start,
        }
        if action.gpu_indices:
            annotations[keys.GPU_INDICES] = action.gpu_indices
        try:
            self.kube.bind(action.pod, action.node, annotations)
        except Conflict:
            return
        if self.cache is not None:
            self.cache.assume(action.pod, action.node, annotations)
        self.metrics.binds.inc()
        waited = self.clock() - self.first_seen.get(action.pod.uid, now)
        self.metrics.bind_latency.observe(max(0.0, waited))
        log.info(
            "bound %s to %s (job %d on %s), %.3f s after reading the job's state",
            action.pod,
            action.node,
            action.job_id,
            action.slurm_node,
            time.monotonic() - self._jobs_read,
        )
        message = (
            f"Successfully assigned {action.pod} to {action.node} (Slurm job {action.job_id} on {action.slurm_node})"
        )

        def report() -> None:  # one task: the warning follows its Scheduled Event
            self.kube.event(action.pod, "Normal", "Scheduled", message)
            if action.warning:
                self.kube.event(action.pod, "Warning", "CPUPinningUnknownToSlurm", action.warning)

        self._later(report)
