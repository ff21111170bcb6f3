"""The glue on in-memory fakes: what reaches the APIs, how often, and what survives a restart."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from sunk.runtime.scheduler.loop import Scheduler, backoff
from sunk.runtime.scheduler.marker import Marker
from sunk.runtime.scheduler.metrics import Health
from sunk.runtime.scheduler.model import JobView
from sunk.runtime.scheduler.plan import GANG_REFUSED, PENDING_QUIET, Bind
from sunk.runtime.scheduler.request import JobRequest
from sunk.runtime.scheduler.settings import Settings
from sunk.runtime.scheduler.slurm import Rejected
from sunk.runtime.slurmrest import PodRef

from sunk import keys
from tests.support.fakes.scheduler import FakeKube, FakeSlurm


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def raw_pod(name: str, uid: str = "", **annotations: str) -> dict[str, Any]:
    return {
        "metadata": {
            "namespace": "ml",
            "name": name,
            "uid": uid or f"uid-{name}",
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "annotations": annotations,
        },
        "spec": {"schedulerName": "sunk-scheduler", "containers": [{"resources": {"requests": {"cpu": "1"}}}]},
        "status": {"phase": "Pending"},
    }


def slurmd(host: str, node: str) -> dict[str, Any]:
    meta = {"namespace": "slurm", "name": host, "labels": {keys.NODESET: "cpu"}}
    # A shared-mode slurmd: only its own overhead is requested.
    resources = {"requests": {"cpu": "500m", "memory": "1Gi"}}
    return {"metadata": meta, "spec": {"hostname": host, "nodeName": node, "containers": [{"resources": resources}]}}


def kube_node(name: str, cpu: str = "4", memory: str = "16Gi", pods: str = "110") -> dict[str, Any]:
    return {"metadata": {"name": name}, "status": {"allocatable": {"cpu": cpu, "memory": memory, "pods": pods}}}


def setup(*pods: dict[str, Any]) -> tuple[FakeKube, FakeSlurm, Scheduler, Clock]:
    kube, slurm, clock = FakeKube(), FakeSlurm(), Clock()
    kube.slurmd = [slurmd("cpu-0", "k8s-a"), slurmd("cpu-1", "k8s-b")]
    kube.nodes = {n: kube_node(n) for n in ("k8s-a", "k8s-b")}
    for p in pods:
        kube.add_pod(p)
    return kube, slurm, scheduler(kube, slurm, clock), clock


def scheduler(kube: FakeKube, slurm: FakeSlurm, clock: Clock) -> Scheduler:
    return Scheduler(
        kube, slurm, scheduler_name="sunk-scheduler", namespace="slurm", pod_namespaces=["ml"], clock=clock
    )


def condition(kube: FakeKube, name: str) -> dict[str, Any]:
    conditions: list[dict[str, Any]] = kube.pods[("ml", name)]["status"]["conditions"]
    [c] = [c for c in conditions if c["type"] == "PodScheduled"]
    return c


def test_a_pod_is_submitted_once_then_bound_once_to_the_node_slurm_chose() -> None:
    kube, slurm, sched, clock = setup(raw_pod("web"))
    sched.cycle()
    sched.cycle()
    assert len(slurm.submitted) == 1
    [(job_id, request, marker)] = slurm.submitted
    assert marker.text == "sunk-pod:ml/web/uid-web" and request.cpus_per_task == 1
    assert "conditions" not in kube.pods[("ml", "web")].get("status", {})  # pending < PENDING_QUIET: not news yet
    clock.now += PENDING_QUIET
    sched.cycle()
    assert condition(kube, "web")["reason"] == "SlurmJobPending"

    slurm.start(job_id, ("cpu-1",))
    clock.now += 1.5
    sched.cycle()
    sched.cycle()
    assert kube.bindings == [(PodRef("ml", "web", "uid-web"), "k8s-b")]
    annotations = kube.pods[("ml", "web")]["metadata"]["annotations"]
    assert annotations[keys.JOB_ID] == str(job_id) and annotations[keys.SLURM_NODE] == "cpu-1"
    assert keys.GPU_INDICES not in annotations  # no GPUs, no annotation
    assert [e[2] for e in kube.events] == ["Scheduled"]
    assert sched.metrics.binds._value.get() == 1
    assert sched.metrics.bind_latency._sum.get() == PENDING_QUIET + 1.5


def test_the_loop_knows_when_its_jobs_are_pending_so_it_polls_until_they_start() -> None:
    kube, slurm, sched, _ = setup(raw_pod("web"), raw_pod("api"))
    sched.cycle()
    assert (sched.pending, len(slurm.submitted)) == (0, 2)  # submitted after this cycle's read
    sched.cycle()
    assert sched.pending == 2
    slurm.start(slurm.submitted[0][0], ("cpu-0",))
    sched.cycle()
    assert sched.pending == 1 and len(kube.bindings) == 1


def test_submits_spread_over_workers_give_each_pod_exactly_one_job() -> None:
    names = [f"web-{i}" for i in range(12)]
    kube, slurm, _, clock = setup(*(raw_pod(n) for n in names))
    sched = Scheduler(
        kube,
        slurm,
        scheduler_name="sunk-scheduler",
        namespace="slurm",
        pod_namespaces=["ml"],
        clock=clock,
        submit_workers=3,
    )
    try:
        sched.cycle()
        while sched.backlog:  # submits still queued after SUBMIT_WAIT (a slow machine): they run on
            sched.cycle()
        sched.cycle()  # the jobs are seen now: nothing is submitted twice
    finally:
        sched.close()
    markers = sorted(marker.text for _, _, marker in slurm.submitted)
    assert markers == sorted(f"sunk-pod:ml/{n}/uid-{n}" for n in names)
    assert sorted(job_id for job_id, _, _ in slurm.submitted) == list(range(101, 113))
    assert sched.metrics.submits._value.get() == 12


def test_a_refused_submit_is_reported_once_and_retried_with_backoff_not_every_cycle() -> None:
    kube, slurm, sched, clock = setup(raw_pod("web", **{keys.PARTITION: "nope"}))
    slurm.reject = "Invalid partition name specified"
    attempts = 0

    def submit(request: JobRequest, marker: Marker) -> int:
        nonlocal attempts
        attempts += 1
        return FakeSlurm.submit(slurm, request, marker)

    slurm.submit = submit  # type: ignore[method-assign]
    for _ in range(20):
        sched.cycle()
        clock.now += 0.25
    assert attempts == 1
    [(_, kind, reason, message)] = kube.events
    assert (kind, reason) == ("Warning", "FailedScheduling") and "Invalid partition name" in message
    c = condition(kube, "web")
    assert (c["status"], c["reason"]) == ("False", "Unschedulable")

    clock.now += backoff(1)
    sched.cycle()
    assert attempts == 2
    clock.now += backoff(1)  # the second delay is twice the first
    sched.cycle()
    assert attempts == 2


def test_an_invalid_request_is_never_submitted() -> None:
    kube, slurm, sched, _ = setup(raw_pod("web", **{keys.NICE: "very"}))
    for _ in range(5):
        sched.cycle()
    assert slurm.submitted == [] and len(kube.events) == 1
    assert "slurm.sunk.dev/nice" in condition(kube, "web")["message"]


def test_nothing_is_cancelled_when_kubernetes_cannot_be_read() -> None:
    kube, slurm, sched, _ = setup(raw_pod("web"))
    sched.cycle()
    kube.fail_lists = True
    del kube.pods[("ml", "web")]
    assert sched.cycle() == []
    assert slurm.cancelled == []
    assert sched.metrics.errors.labels("observe")._value.get() == 1
    assert sched.health.ready()[0]  # the previous cycle was fine; staleness decides readiness


def test_the_job_lives_as_long_as_the_pod() -> None:
    kube, slurm, sched, _ = setup(raw_pod("web"), raw_pod("api"))
    sched.cycle()
    jobs = {m.name: j for j, _, m in slurm.submitted}
    web, api = jobs["web"], jobs["api"]
    slurm.start(web, ("cpu-0",))
    slurm.start(api, ("cpu-1",))
    sched.cycle()
    assert len(kube.bindings) == 2
    # Slurm preempts web's job: the pod is evicted with an Event saying so.
    slurm.end(web, "PREEMPTED")
    # api's pod finishes: its job is cancelled.
    kube.pods[("ml", "api")]["status"]["phase"] = "Succeeded"
    sched.cycle()
    assert kube.deleted == [PodRef("ml", "web", "uid-web")]
    assert ("Warning", "Preempted") in [(e[1], e[2]) for e in kube.events]
    assert slurm.cancelled == [api]
    sched.cycle()
    assert slurm.cancelled == [api] and len(kube.deleted) == 1


def test_a_restarted_scheduler_adopts_jobs_and_never_binds_twice() -> None:
    kube, slurm, first, clock = setup(raw_pod("web"), raw_pod("api"))
    first.cycle()
    jobs = {m.name: j for j, _, m in slurm.submitted}
    web, api = jobs["web"], jobs["api"]
    slurm.start(web, ("cpu-0",))
    first.cycle()  # binds web, then "crashes"
    slurm.start(api, ("cpu-1",))
    del kube.pods[("ml", "web")]  # deleted while no scheduler ran

    second = scheduler(kube, slurm, clock)
    second.cycle()
    assert len(slurm.submitted) == 2  # adopted by marker: nothing new submitted
    assert [ref.name for ref, _ in kube.bindings] == ["web", "api"]
    assert slurm.cancelled == [web]  # the orphan

    # An action planned from a stale view must not bind a pod that got bound meanwhile.
    ref = PodRef("ml", "api", "uid-api")
    first.apply(Bind(ref, "k8s-a", api, "cpu-1", "2000"), clock.now)
    assert [r.name for r, _ in kube.bindings] == ["web", "api"]


def test_pods_and_jobs_outside_the_scheduler_namespaces_are_not_touched() -> None:
    foreign = raw_pod("elsewhere")
    foreign["metadata"]["namespace"] = "other-tenant"
    kube, slurm, sched, _ = setup(foreign)
    other = Marker("pod", "other-tenant", "web", "uid-x")
    slurm.job_list.append(JobView(55, other, "RUNNING", nodes=("cpu-0",)))
    sched.cycle()
    assert slurm.submitted == [] and slurm.cancelled == [] and kube.events == []


def test_a_blocked_eviction_is_retried_and_reported_once_it_happens() -> None:
    kube, slurm, sched, _ = setup(raw_pod("web"))
    sched.cycle()
    [(job_id, _, _)] = slurm.submitted
    slurm.start(job_id, ("cpu-0",))
    sched.cycle()
    slurm.end(job_id, "PREEMPTED")
    kube.block_evictions = True
    sched.cycle()
    sched.cycle()
    assert kube.deleted == [] and [e[2] for e in kube.events] == ["Scheduled"]
    assert sched.metrics.errors.labels("evict_blocked")._value.get() == 2
    kube.block_evictions = False
    sched.cycle()
    sched.cycle()
    assert kube.deleted == [PodRef("ml", "web", "uid-web")]
    assert [e[2] for e in kube.events] == ["Scheduled", "Preempted"]


def test_settings_come_from_the_environment() -> None:
    env = {
        "SUNK_CLUSTER": "research",
        "SUNK_NAMESPACE": "acme-research",
        "SUNK_SLURMRESTD_URL": "http://research-restapi:6820",
        "SUNK_JWT_KEY_FILE": "/etc/slurm/jwt/jwt_hs256.key",
    }
    s = Settings.from_env(env)
    assert (s.scheduler_name, s.slurm_user, s.metrics_port, s.pod_namespaces) == (
        "sunk-scheduler",
        "slurm",
        8080,
        ("acme-research",),
    )
    s = Settings.from_env(
        {**env, "SUNK_POD_NAMESPACES": "ml, web", "SUNK_SCHEDULER_NAME": "x", "SUNK_METRICS_PORT": "9"}
    )
    assert (s.pod_namespaces, s.scheduler_name, s.metrics_port) == (("ml", "web"), "x", 9)
    with pytest.raises(ValueError, match="SUNK_JWT_KEY_FILE"):
        Settings.from_env({k: v for k, v in env.items() if k != "SUNK_JWT_KEY_FILE"})
    with pytest.raises(ValueError, match="SUNK_SCHEDULER_INTERVAL"):
        Settings.from_env({**env, "SUNK_SCHEDULER_INTERVAL": "0"})
    assert s.bind_grace == 60 and Settings.from_env({**env, "SUNK_BIND_GRACE": "5"}).bind_grace == 5
    with pytest.raises(ValueError, match="SUNK_BIND_GRACE"):
        Settings.from_env({**env, "SUNK_BIND_GRACE": "-1"})


def test_health_goes_stale_without_cycles() -> None:
    t = [0.0]
    health = Health(stale_after=30, clock=lambda: t[0])
    assert health.alive()[0] and not health.ready()[0]
    health.attempted(ok=True)
    t[0] = 29
    assert health.alive()[0] and health.ready()[0]
    health.attempted(ok=False)
    t[0] = 61
    assert not health.ready()[0] and not health.alive()[0]


def test_a_pod_that_would_not_fit_is_not_bound_then_its_job_is_rerouted() -> None:
    kube, slurm, sched, clock = setup(raw_pod("web"))
    # Something Slurm does not know about fills k8s-b: a pod of another scheduler.
    hog = raw_pod("hog")
    hog["spec"] = {"nodeName": "k8s-b", "containers": [{"resources": {"requests": {"cpu": "3"}}}]}
    kube.add_pod(hog)
    sched.cycle()
    until(lambda: len(slurm.submitted) == 1)  # submits and Events run beside the cycle (SUBMIT_WAIT)
    [(job_id, _, _)] = slurm.submitted
    slurm.start(job_id, ("cpu-1",), start_time=clock.now)
    for _ in range(3):
        sched.cycle()
    assert kube.bindings == []
    until(lambda: len(kube.events) >= 1)
    [(_, kind, reason, message)] = kube.events  # once, not every cycle
    assert (kind, reason) == ("Warning", "FailedScheduling")
    assert "Kubernetes Node k8s-b would not admit it (cpu: requested 1000m, 3500m of 4000m" in message
    assert condition(kube, "web")["reason"] == "NodeDoesNotFit"
    assert sched.metrics.unfit._value.get() == 1

    clock.now += 60
    sched.cycle()
    # A new job excluding cpu-1 was submitted, then the old one cancelled.
    until(lambda: len(slurm.submitted) == 2 and slurm.cancelled == [job_id])
    assert [r.exclude for _, r, _ in slurm.submitted] == [(), ("cpu-1",)]
    assert slurm.cancelled == [job_id]
    new_job = slurm.submitted[1][0]
    slurm.start(new_job, ("cpu-0",), start_time=clock.now)
    sched.cycle()
    assert kube.bindings == [(PodRef("ml", "web", "uid-web"), "k8s-a")]
    reasons = [e[2] for e in kube.events]
    # The reroute (Slurm thread) and the Unfit report (Kubernetes pool) of one cycle run side by
    # side: their two Events come in either order.
    assert reasons[0] == "FailedScheduling" and reasons[3:] == ["Scheduled"]
    assert sorted(reasons[1:3]) == ["FailedScheduling", "SlurmJobResubmitted"]


def test_a_refused_reroute_keeps_the_old_allocation() -> None:
    kube, slurm, sched, clock = setup(raw_pod("web"))
    sched.cycle()
    until(lambda: len(slurm.submitted) == 1)  # submits and Events run beside the cycle (SUBMIT_WAIT)
    [(job_id, _, _)] = slurm.submitted
    slurm.start(job_id, ("cpu-1",), start_time=clock.now - 120)
    kube.nodes["k8s-b"]["status"]["allocatable"]["cpu"] = "1"  # slurmd's 500m leaves too little
    slurm.reject = "Requested node configuration is not available"
    sched.cycle()
    until(lambda: any("keeping job" in e[3] for e in kube.events))
    assert slurm.cancelled == [] and kube.bindings == []
    # Room appears on the Node (the allocatable was wrong, now fixed): bound to the job it kept.
    kube.nodes["k8s-b"]["status"]["allocatable"]["cpu"] = "4"
    sched.cycle()
    assert kube.bindings == [(PodRef("ml", "web", "uid-web"), "k8s-b")]


def test_a_node_that_cannot_be_read_binds_nothing_and_the_cycle_goes_on() -> None:
    kube, slurm, sched, _ = setup(raw_pod("web"))
    sched.cycle()
    [(job_id, _, _)] = slurm.submitted
    slurm.start(job_id, ("cpu-0",))
    kube.fail_node_reads = True
    sched.cycle()
    assert kube.bindings == [] and condition(kube, "web")["reason"] == "NodeUnreadable"
    assert sched.metrics.errors.labels("read_node")._value.get() == 1
    kube.fail_node_reads = False
    sched.cycle()
    assert len(kube.bindings) == 1


def test_a_pinned_pod_gets_a_warning_event_with_its_binding() -> None:
    p = raw_pod("web")
    p["spec"]["containers"] = [{"name": "main", "resources": {"limits": {"cpu": "2", "memory": "1Gi"}}}]
    kube, slurm, sched, _ = setup(p)
    sched.cycle()
    slurm.start(slurm.submitted[0][0], ("cpu-0",))
    sched.cycle()
    assert [(e[1], e[2]) for e in kube.events] == [("Normal", "Scheduled"), ("Warning", "CPUPinningUnknownToSlurm")]


def test_the_gpu_indices_are_written_with_the_binding() -> None:
    kube, slurm, sched, _ = setup(raw_pod("web"))
    sched.cycle()
    [(job_id, _, _)] = slurm.submitted
    slurm.start(job_id, ("cpu-0",))
    slurm._set(job_id, gpu_indices={"cpu-0": (1, 3)})
    sched.cycle()
    assert kube.pods[("ml", "web")]["metadata"]["annotations"][keys.GPU_INDICES] == "1,3"


@dataclass
class HungSubmit(FakeSlurm):
    """FakeSlurm whose submit for one marker does not return until `release` is set: a slurmrestd
    or slurmctld slow to answer for one large gang. What it can't model: why a real submit is slow
    (slurmctld's locks, a controller busy with other work, slurmrestd's threads) and Slurm's own
    order between that gang and the pods behind it (priorities, backfill, an immediate allocation
    refused while a job of higher priority waits): the real-slurmctld test and the bench show those."""

    hold: str = ""
    release: threading.Event = field(default_factory=threading.Event)
    reads: int = 0

    def submit(self, request: JobRequest, marker: Marker) -> int:
        if marker.text == self.hold:
            self.release.wait(timeout=30)
        return super().submit(request, marker)

    def jobs(self) -> list[JobView]:
        self.reads += 1
        return super().jobs()


def until(check: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "not within 10 s"
        time.sleep(0.005)


def test_a_gang_whose_submit_hangs_blocks_none_of_the_pods_behind_it() -> None:
    group = {keys.GROUP: "big", keys.GROUP_SIZE: "2"}
    kube, _, _, clock = setup(raw_pod("big-0", **group), raw_pod("big-1", **group), raw_pod("web"), raw_pod("api"))
    slurm = HungSubmit(hold="sunk-group:ml/big")
    sched = scheduler(kube, slurm, clock)  # one submit at a time: the gang goes first and hangs
    try:
        sched.cycle()
        # The gang's submit still runs; past SUBMIT_WAIT it no longer holds the one worker, and the
        # pods behind it are submitted without waiting for another cycle.
        until(lambda: len(slurm.submitted) == 2)
        singles = {marker.text: job_id for job_id, _, marker in slurm.submitted}
        assert sorted(singles) == ["sunk-pod:ml/api/uid-api", "sunk-pod:ml/web/uid-web"]
        slurm.start(singles["sunk-pod:ml/web/uid-web"], ("cpu-0",))
        slurm.start(singles["sunk-pod:ml/api/uid-api"], ("cpu-1",))
        sched.cycle()
        assert sorted(ref.name for ref, _ in kube.bindings) == ["api", "web"]
        slurm.release.set()
        until(lambda: sched.metrics.submits._value.get() == 3)  # the gang's submit returns in its own thread
        for _ in range(3):
            sched.cycle()
    finally:
        slurm.release.set()
        sched.close()
    assert [m.text for _, _, m in slurm.submitted].count("sunk-group:ml/big") == 1  # never submitted twice


@dataclass
class SlowSubmit(FakeSlurm):
    """FakeSlurm whose every submit takes `seconds` (slurmctld under load: 20+ ms a submit)."""

    seconds: float = 0.02

    def submit(self, request: JobRequest, marker: Marker) -> int:
        time.sleep(self.seconds)
        return super().submit(request, marker)


def test_the_submits_a_cycle_could_not_wait_for_run_on_without_another_cycle() -> None:
    """A burst's submits take longer than a cycle waits for them (SUBMIT_WAIT): they go on between
    cycles, and the cycles that plan while they run submit nothing twice."""
    names = [f"web-{i:02d}" for i in range(40)]
    kube, _, _, clock = setup(*(raw_pod(n) for n in names))
    slurm = SlowSubmit()  # 40 x 20 ms, one at a time: 0.8 s, more than SUBMIT_WAIT
    sched = scheduler(kube, slurm, clock)
    try:
        sched.cycle()
        until(lambda: len(slurm.submitted) == len(names))  # no cycle in between
        for _ in range(3):
            sched.cycle()
        racing = [f"api-{i:02d}" for i in range(40)]
        for n in racing:
            kube.add_pod(raw_pod(n))
        for _ in range(20):  # cycles planning while the submits they handed over still run
            sched.cycle()
        until(lambda: len(slurm.submitted) == 80)
        sched.cycle()
    finally:
        sched.close()
    markers = [marker.name for _, _, marker in slurm.submitted]
    assert sorted(markers) == sorted(names + racing)  # each pod exactly one job
    assert markers[:40] == names  # oldest pods first


@dataclass
class SlowEvents(FakeKube):
    """FakeKube whose Events wait for `release` (an API server slow to take a burst's Events)."""

    release: threading.Event = field(default_factory=threading.Event)

    def event(self, ref: PodRef, kind: str, reason: str, message: str) -> None:
        if not self.release.wait(timeout=10):
            raise TimeoutError("the test never released the Events")
        super().event(ref, kind, reason, message)


def test_bindings_do_not_wait_behind_the_events_that_report_earlier_ones() -> None:
    kube = SlowEvents()
    kube.slurmd = [slurmd("cpu-0", "k8s-a"), slurmd("cpu-1", "k8s-b")]
    kube.nodes = {n: kube_node(n) for n in ("k8s-a", "k8s-b")}
    kube.add_pod(raw_pod("web"))
    slurm, clock = FakeSlurm(), Clock()
    sched = scheduler(kube, slurm, clock)
    try:
        sched.cycle()
        until(lambda: len(slurm.submitted) == 1)  # the submit runs beside the cycle (slower on a loaded machine)
        slurm.start(slurm.submitted[0][0], ("cpu-0",))
        sched.cycle()  # binds web; its Scheduled Event is stuck
        kube.add_pod(raw_pod("api"))
        sched.cycle()
        until(lambda: len(slurm.submitted) == 2)
        slurm.start(slurm.submitted[1][0], ("cpu-1",))
        sched.cycle()
        assert [ref.name for ref, _ in kube.bindings] == ["web", "api"] and kube.events == []
        kube.release.set()
        until(lambda: len(kube.events) == 2)
    finally:
        kube.release.set()
        sched.close()
    # Written by EVENT_WORKERS threads once released: in any order (the bindings above were in order).
    assert sorted((ref.name, reason) for ref, _, reason, _ in kube.events) == [
        ("api", "Scheduled"),
        ("web", "Scheduled"),
    ]


@pytest.mark.parametrize("queue", [1, 300])
def test_a_cycle_reads_slurm_once_however_long_the_queue(queue: int) -> None:
    kube, _, _, clock = setup(*(raw_pod(f"web-{i}") for i in range(queue)))
    slurm = HungSubmit()
    sched = scheduler(kube, slurm, clock)
    try:
        for _ in range(3):
            sched.cycle()
    finally:
        sched.close()
    assert slurm.reads == 3


def test_a_gang_slurm_refuses_says_so_with_its_own_reason_and_holds_back_no_pod() -> None:
    """More GPUs than the pool: Slurm refuses the gang's job at submit. Its pods say GangRefused
    (condition and Warning Event); a pod created after it is placed in the same pass."""
    gang = {keys.GROUP: "big", keys.GROUP_SIZE: "2", keys.GPUS: "64"}
    kube, slurm, sched, _ = setup(raw_pod("g-0", **gang), raw_pod("g-1", **gang), raw_pod("after"))
    original = slurm.submit

    def submit(request: JobRequest, marker: Marker) -> int:
        if request.gpus > 8:
            raise Rejected("Requested node configuration is not available")
        return original(request, marker)

    slurm.submit = submit  # type: ignore[method-assign]
    sched.cycle()
    for name in ("g-0", "g-1"):
        c = condition(kube, name)
        assert (c["status"], c["reason"]) == ("False", GANG_REFUSED)
        assert "Requested node configuration is not available" in c["message"]
    reasons = sorted((ref.name, r) for ref, k, r, _ in kube.events if k == "Warning")
    assert reasons == [("g-0", GANG_REFUSED), ("g-1", GANG_REFUSED)]
    assert [marker.name for _, _, marker in slurm.submitted] == ["after"]
