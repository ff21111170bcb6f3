"""The Slurm side: a SlurmApi protocol and its implementation on the shared slurmrestd client.

Reading every job each cycle is what a scheduler does most, and GET /jobs is expensive: about 1 ms
and 5 KB per job in slurmrestd (180 ms for 200 jobs, measured 2026-11 on 24.11). GET /jobs/state lists only
ids and states (5 ms for 200), so jobs are cached and re-read only when their state changed, when
the cached copy is old (pending reasons change without a state change), or all at once when many
changed. Every REST path is the shared client's (runtime/slurmrest/client.py).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import Any, Protocol

from sunk import keys
from sunk.hostlist import expand
from sunk.spec.nodeset import SHARED_FEATURE

from ..slurmrest import SlurmApiError, SlurmRestClient, SlurmRestError
from ..slurmrest.errors import INVALID_JOB_ID
from .marker import Marker
from .model import ACTIVE_JOB_STATES, JobView, job_view
from .request import JobRequest, placeholder_job
from .room import NONE, Room, nameable, pick, room

ALREADY_DONE = 2021
"""ESLURM_ALREADY_DONE: cancelling a job that already ended."""
IMMEDIATE_PAUSE = 1.0
"""Seconds without immediate allocations of requests no smaller than one that was refused
(RestSlurm.submit)."""
ROOM_MAX_AGE = 1.0
"""Seconds Slurm's count of free room per node (`GET /nodes`) is used to name nodes before it is
read again (runtime/scheduler/room.py); a cancel makes it stale at once."""

_Size = tuple[int, int, int, int]
"""What a placeholder asks for, compared resource by resource: nodes, CPUs per node, MiB per
node, GPUs per node."""


def _size(request: JobRequest) -> _Size:
    return (request.nodes, request.cpus_per_task, request.memory_mib, request.gpus)


def _no_smaller(size: _Size, than: _Size) -> bool:
    return all(a >= b for a, b in zip(size, than, strict=True))


class Rejected(Exception):
    """Slurm refused the submit (unknown partition, no node can ever satisfy it, QOS denied, ...)."""


def _explained(why: str, request: JobRequest) -> str:
    """Slurm's refusal, with what the user must change where Slurm's own words don't say it: a
    constraint on the shared feature that no node has means the partition has no shared NodeSet."""
    if request.constraint == SHARED_FEATURE and "invalid feature" in why.lower():
        where = f"partition {request.partition}" if request.partition else "the default partition"
        return (
            f"{why}: no node of {where} has the feature {SHARED_FEATURE}; sunk's scheduler places pods only "
            "on NodeSets with resourceMode: shared (set it on a NodeSet of that partition, or name another "
            f"partition with the {keys.PARTITION} annotation)"
        )
    return why


class SlurmApi(Protocol):
    def jobs(self) -> list[JobView]:
        """Every job with a marker that slurmctld knows (pending, running, recently ended)."""
        ...

    def submit(self, request: JobRequest, marker: Marker) -> int:
        """Submit a placeholder job; raises Rejected when Slurm says no."""
        ...

    def cancel(self, job_ids: Iterable[int]) -> None:
        """Cancel, in one request; jobs that are gone or already over are fine."""
        ...


def _ended(state: tuple[str, ...]) -> bool:
    """As JobView.active says it, from /jobs/state's list (base state first, then flags)."""
    return state[0] not in ACTIVE_JOB_STATES or "COMPLETING" in state[1:]


class RestSlurm:
    """SlurmApi on SlurmRestClient (slurmrestd v0.0.42).

    `jobs` and `cancel` go through `rest`, one caller at a time. `submit` may be called from several
    threads at once when `connect` is given: each thread then submits through a client of its own
    (the client is not thread-safe), made by `connect` on its first submit and closed by `close`."""

    def __init__(
        self,
        rest: SlurmRestClient,
        *,
        connect: Callable[[], SlurmRestClient] | None = None,
        cwd: str = "/tmp",
        max_age: float = 15.0,
        bulk_over: int = 8,
        clock: Callable[[], float] = time.monotonic,
        immediate: bool = False,
        name_nodes: bool = True,
        on_placed: Callable[[str], None] | None = None,
    ) -> None:
        self._rest = rest
        self._immediate = immediate
        """Try each placeholder as an immediate allocation first (see `submit`)."""
        self._refused: dict[_Size, float] = {}
        """Sizes of refused allocations -> until when allocations no smaller are not tried."""
        self._refused_lock = threading.Lock()
        self._name_nodes = immediate and name_nodes
        """Name the node of a single CPU pod's allocation (runtime/scheduler/room.py)."""
        self._learned: dict[tuple[str | None, str], set[str]] = {}
        """(partition, constraint) as a request names them -> nodes where Slurm placed one of our
        allocations of that request: the nodes such a request may be named."""
        self._free: dict[str, Room] = {}
        """Slurm's free room per node as last read, less what was named since."""
        self._free_read = float("-inf")
        self._room_lock = threading.Lock()
        self._on_placed = on_placed
        self._connect = connect
        self._local = threading.local()
        self._clients: list[SlurmRestClient] = []
        self._lock = threading.Lock()
        self._cwd = cwd
        self._max_age = max_age
        """Seconds a cached job is trusted without a state change; at most `bulk_over` such jobs
        are read again per pass, so in a queue longer than that a copy may be older."""
        self._bulk_over = bulk_over
        """Up to this many stale jobs are always read one by one (GET /job/{id}, ~4 ms each)."""
        self._clock = clock
        self._cache: dict[int, tuple[tuple[str, ...], float, JobView | None]] = {}
        self._seeds: dict[int, tuple[float, tuple[str, ...], JobView | None]] = {}
        """Allocations known to the thread that made them (`submit`: read, or granted on a named
        node) -> when, their state then, and the job: the next pass takes them into the cache
        instead of reading them itself."""
        self._seed_lock = threading.Lock()
        self._cancelled: set[int] = set()
        """Jobs this scheduler cancelled: once /jobs/state shows one ended, its cached copy is
        updated in place instead of read again (nothing reports why a job we cancelled ended)."""

    def jobs(self) -> list[JobView]:
        """Every job of ours, in phases: the state list (one GET /jobs/state); the jobs we
        cancelled that it shows ended, updated in place; the stale rest read again, one by one or
        as one list, whichever is cheaper; then what the state list no longer has forgotten.
        Under the lock: a reroute still in flight from an earlier cycle may cancel through `rest`."""
        with self._lock:
            return self._jobs()

    def _jobs(self) -> list[JobView]:
        listed = self._rest.list_job_states()
        # Array tasks ("12_3") are never placeholders: only plain ids can be ours.
        states = {int(j["job_id"]): tuple(j.get("state") or ()) for j in listed if str(j.get("job_id", "")).isdigit()}
        now = self._clock()
        self._take_seeds(states)
        self._end_cancelled(states, now)
        changed = [
            job_id for job_id, state in states.items() if job_id not in self._cache or self._cache[job_id][0] != state
        ]
        # Copies only old (a pending reason may have changed) are re-read a few per pass, the
        # oldest first: a long queue read at once goes stale at once, and re-reading all of it
        # every max_age seconds would make a pass's reads grow with the queue.
        aged = sorted(
            (self._cache[job_id][1], job_id)
            for job_id, state in states.items()
            if job_id in self._cache
            and self._cache[job_id][0] == state
            and now - self._cache[job_id][1] > self._max_age
        )
        stale = changed + [job_id for _, job_id in aged[: self._bulk_over]]
        refreshed = self._refresh(stale, states, now)
        # Purged by slurmctld (MinJobAge), or listed and gone before it could be read: never
        # answer with a stale copy.
        for job_id in (set(self._cache) - set(states)) | (set(stale) - refreshed):
            self._cache.pop(job_id, None)
        return [view for _, _, view in self._cache.values() if view is not None]

    def _take_seeds(self, states: Mapping[int, tuple[str, ...]]) -> None:
        """Allocations their submitting thread read or was granted on a named node, as cached
        copies of that time, where the state list shows them in the state they had then (else
        they are read again like any job)."""
        with self._seed_lock:
            seeds, self._seeds = self._seeds, {}
        for job_id, (at, state, view) in seeds.items():
            if job_id not in self._cache and states.get(job_id) == state:
                self._cache[job_id] = (state, at, view)

    def _end_cancelled(self, states: Mapping[int, tuple[str, ...]], now: float) -> None:
        """The jobs we cancelled that the state list shows ended: their cached copies take the
        new state (nothing reports why a job we cancelled ended, so none is read again)."""
        for job_id in self._cancelled & states.keys():
            cached = self._cache.get(job_id)
            state = states[job_id]
            if cached is not None and cached[0] != state and state and _ended(state):
                view = cached[2]
                if view is not None:
                    view = replace(view, state=state[0], flags=frozenset(state[1:]))
                self._cache[job_id] = (state, now, view)
        self._cancelled &= states.keys()

    def _refresh(self, stale: list[int], states: Mapping[int, tuple[str, ...]], now: float) -> set[int]:
        """Read the stale jobs again into the cache; the ids read."""
        # One GET /job/{id} costs about four jobs' share of one GET /jobs (measured 2026-11): above a
        # quarter of the queue stale, the whole list is cheaper.
        if len(stale) > max(self._bulk_over, len(states) // 4):
            fresh = self._rest.list_jobs_raw()
        else:
            fresh = [raw for job_id in stale for raw in self._one(job_id)]
        refreshed = set()
        for raw in fresh:
            job_id = int(raw.get("job_id") or 0)
            if job_id in states:
                # A marker is only a name anyone can give a job: only jobs of the Slurm user this
                # scheduler submits as are its own (never adopted, bound or cancelled otherwise).
                mine = raw.get("user_name") == self._rest.user
                self._cache[job_id] = (states[job_id], now, job_view(raw) if mine else None)
                refreshed.add(job_id)
        return refreshed

    def _one(self, job_id: int) -> list[dict[str, Any]]:
        try:
            return self._rest.get_job_raw(job_id)
        except SlurmApiError as e:
            if e.not_found:
                return []  # purged between the two calls
            raise

    def _submitter(self) -> SlurmRestClient:
        if self._connect is None:
            return self._rest
        client: SlurmRestClient | None = getattr(self._local, "client", None)
        if client is None:
            client = self._local.client = self._connect()
            with self._lock:
                self._clients.append(client)
        return client

    def submit(self, request: JobRequest, marker: Marker) -> int:
        """With `immediate`: first as an allocation slurmctld grants in the request (no batch step,
        so no slurmstepd; started now rather than at slurmctld's next once-a-second pass), and when
        it can't start now (busy nodes, a job of higher priority waiting, any refusal) as the batch
        placeholder that waits in the queue. After a refusal, allocations of requests no smaller
        (in nodes, CPUs, memory and GPUs each) are not tried for IMMEDIATE_PAUSE seconds or until
        a cancel makes room, so a full cluster costs one extra request a second, not one per pod;
        and a gang too large to start now (or ever) keeps no smaller pod off the fast path."""
        job = placeholder_job(request, marker, cwd=self._cwd)
        client = self._submitter()
        if self._immediate and self._may_allocate(_size(request)):
            node = self._name(client, request) if self._name_nodes and nameable(request) else None
            if node is not None:
                try:
                    job_id = client.allocate_job(job, node=node)
                except SlurmApiError:
                    # No room after all (a job took it since the count), or no longer a node of
                    # this kind (a partition changed): not named again until Slurm places one
                    # there itself.
                    with self._room_lock:
                        self._free[node] = NONE
                        self._learned.get((request.partition, request.constraint), set()).discard(node)
                else:
                    if self._on_placed is not None:
                        self._on_placed("named")
                    self._seed_named(job_id, node, marker)
                    return job_id
            try:
                job_id = client.allocate_job(job)
            except SlurmApiError:
                with self._refused_lock:
                    self._refused[_size(request)] = self._clock() + IMMEDIATE_PAUSE
            else:
                if self._on_placed is not None:
                    self._on_placed("allocation")
                self._seed(client, job_id, request)
                return job_id
        try:
            job_id = client.submit_job(job)
        except SlurmApiError as e:
            # The first line ("Batch job submission failed") is generic; `error` says why.
            why = "; ".join(dict.fromkeys(err.message or err.description for err in e.errors)) or str(e)
            raise Rejected(_explained(why, request)) from e
        if self._on_placed is not None:
            self._on_placed("batch")
        return job_id

    def _seed(self, client: SlurmRestClient, job_id: int, request: JobRequest) -> None:
        """Reads a granted allocation (running, its nodes and GPUs known) with the submitting
        thread's own client, for the next pass to take (`_take_seeds`): that read is one the pass
        would make anyway, one GET /job/{id} per new job, and here it runs beside the cycle
        instead of inside its job read (a 1,000-pod burst's pass spent 0.2-0.5 s re-reading the
        60-120 jobs submitted since the last one, measured). A failed read is no loss: the pass
        reads the job itself."""
        if self._connect is None:
            return  # one client: the pass reads it
        try:
            raw = client.get_job_raw(job_id)
        except SlurmRestError:
            return
        with self._seed_lock:
            for job in raw:
                if int(job.get("job_id") or 0) == job_id:
                    mine = job.get("user_name") == self._rest.user
                    self._seeds[job_id] = (
                        self._clock(),
                        tuple(job.get("job_state") or ()),
                        job_view(job) if mine else None,
                    )
                    self._learn(request, job)

    def _learn(self, request: JobRequest, raw: Mapping[str, Any]) -> None:
        """The nodes Slurm placed a granted allocation of `request` on: nodes of its partition
        with its constraint, which later requests of the same kind may be named."""
        nodes = raw.get("nodes") or ""
        if self._name_nodes and nodes and "RUNNING" in (raw.get("job_state") or ()):
            with self._room_lock:
                self._learned.setdefault((request.partition, request.constraint), set()).update(expand(nodes))

    def _name(self, client: SlurmRestClient, request: JobRequest) -> str | None:
        """A node for `request` among those learned for its kind, with room by Slurm's count
        (read again when older than ROOM_MAX_AGE), taken out of that count; None when there is
        none (or the count can't be read), and the request goes the usual way."""
        with self._room_lock:
            candidates = self._learned.get((request.partition, request.constraint))
            if not candidates:
                return None
            if self._clock() - self._free_read > ROOM_MAX_AGE:
                read = self._clock()
                try:
                    nodes = client.list_nodes()
                except SlurmRestError:
                    return None
                self._free = {n.name: room(n.state, n.cpus, n.alloc_cpus, n.real_memory, n.alloc_memory) for n in nodes}
                self._free_read = read
            node = pick(self._free, candidates, request.cpus_per_task, request.memory_mib)
            if node is not None:
                self._free[node] = self._free[node].less(request.cpus_per_task, request.memory_mib)
            return node

    def _seed_named(self, job_id: int, node: str, marker: Marker) -> None:
        """A granted allocation on a named node, as the next pass takes it without reading it:
        running there since now. Its start time is Slurm's clock at the grant, which only a read
        would give to the second: `start_exact` is False, so its pod's binding records none (an
        allocation is never requeued, so there is no later start to tell apart)."""
        now = time.time()
        view = JobView(
            job_id=job_id,
            marker=marker,
            state="RUNNING",
            nodes=(node,),
            submit_time=now,
            start_time=now,
            start_exact=False,
        )
        with self._seed_lock:
            self._seeds[job_id] = (self._clock(), ("RUNNING",), view)

    def _may_allocate(self, size: _Size) -> bool:
        now = self._clock()
        with self._refused_lock:
            self._refused = {s: until for s, until in self._refused.items() if now < until}
            return not any(_no_smaller(size, refused) for refused in self._refused)

    def cancel(self, job_ids: Iterable[int]) -> None:
        ids = sorted(set(job_ids))
        if not ids:
            return
        with self._lock:  # a reroute's cancel may come from any submitting thread
            self._rest.cancel_jobs(ids, ignore=(INVALID_JOB_ID, ALREADY_DONE))
            self._cancelled.update(ids)
        with self._refused_lock:
            self._refused.clear()  # room was made: allocations may start again
        with self._room_lock:
            self._free_read = float("-inf")  # and Slurm's count of it is read again

    def close(self) -> None:
        """Closes the submitting threads' own clients (not `rest`, which the caller owns)."""
        with self._lock:
            for client in self._clients:
                client.close()
            self._clients.clear()
