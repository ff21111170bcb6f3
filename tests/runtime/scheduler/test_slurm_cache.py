"""RestSlurm on a scripted slurmrestd: which requests it makes, not just what it returns."""

from __future__ import annotations

import json
import threading
from dataclasses import replace
from functools import partial
from typing import Any

import httpx
import pytest
from sunk.runtime.scheduler.marker import Marker
from sunk.runtime.scheduler.request import JobRequest
from sunk.runtime.scheduler.settings import Settings
from sunk.runtime.scheduler.slurm import Rejected, RestSlurm
from sunk.runtime.slurmrest import SlurmApiError, SlurmRestClient, StaticToken
from sunk.runtime.slurmrest.wire import HttpxWire

from sunk.manifests.auth import auth_refs
from sunk.manifests.runtime import deployment
from sunk.spec import load_spec
from sunk.stackfile import load_stack
from tests.support.stacks import FIXTURE_STACKS

API = "/slurm/v0.0.42"
SETTINGS = {
    "SUNK_CLUSTER": "c",
    "SUNK_NAMESPACE": "ns",
    "SUNK_SLURMRESTD_URL": "http://slurmrestd",
    "SUNK_JWT_KEY_FILE": "/k",
}


class Slurmrestd:
    def __init__(self) -> None:
        self.jobs: dict[int, dict[str, Any]] = {}
        self.paths: list[str] = []
        self.bodies: list[Any] = []
        self.submit_error: dict[str, Any] | None = None
        self.busy = False
        """POST /job/allocate refuses (2016), as slurmctld does when the job can't start now."""
        self.nodes: list[dict[str, Any]] = []
        """GET /nodes/'s list."""
        self.full: set[str] = set()
        """Nodes an allocation naming them is refused on (2016)."""
        self.allocated: list[int] = []
        """Job ids POST /job/allocate hands out, in turn (78 when empty)."""

    def add(self, job_id: int, state: str, comment: str = "", nodes: str = "", user: str = "slurm") -> None:
        self.jobs[job_id] = {
            "job_id": job_id,
            "comment": comment,
            "job_state": [state],
            "nodes": nodes,
            "user_name": user,
        }

    def __call__(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        self.paths.append(f"{request.method} {path}")
        body = json.loads(request.content) if request.content else None
        self.bodies.append(body)
        if path == f"{API}/jobs/state/":
            states = [{"job_id": str(i), "state": j["job_state"]} for i, j in self.jobs.items()]
            return httpx.Response(200, json={"jobs": [*states, {"job_id": "9_1", "state": ["PENDING"]}]})
        if path == f"{API}/jobs/" and request.method == "GET":
            return httpx.Response(200, json={"jobs": list(self.jobs.values())})
        if path.startswith(f"{API}/job/") and request.method == "GET":
            job = self.jobs.get(int(path.rsplit("/", 1)[1]))
            if job is None:
                return httpx.Response(500, json={"errors": [{"error_number": 2017, "error": "Invalid job id"}]})
            return httpx.Response(200, json={"jobs": [job]})
        if path == f"{API}/jobs/" and request.method == "DELETE":
            assert body is not None
            status = [
                {"job_id": int(i), "error": {"code": 2017 if int(i) not in self.jobs else 0}} for i in body["jobs"]
            ]
            return httpx.Response(200, json={"status": status})
        if path == f"{API}/nodes/" and request.method == "GET":
            return httpx.Response(200, json={"nodes": self.nodes})
        if path == f"{API}/job/allocate":
            assert body is not None and body["job"]["immediate"] is True and "script" not in body["job"]
            if self.busy or set(body["job"].get("required_nodes") or ()) & self.full:
                return httpx.Response(
                    500, json={"errors": [{"error_number": 2016, "error": "Job allocation request failed"}]}
                )
            return httpx.Response(200, json={"job_id": self.allocated.pop(0) if self.allocated else 78})
        if path == f"{API}/job/submit":
            if self.submit_error:
                return httpx.Response(500, json={"errors": [self.submit_error]})
            return httpx.Response(200, json={"job_id": 77})
        return httpx.Response(404, json={})

    def reset(self) -> None:
        self.paths.clear()
        self.bodies.clear()


@pytest.fixture
def server() -> Slurmrestd:
    return Slurmrestd()


def rest_client(server: Slurmrestd) -> SlurmRestClient:
    """A new client of the fake (each submitting thread's, or the pass's)."""
    return SlurmRestClient(
        "http://slurmrestd",
        user="slurm",
        token=StaticToken("t"),
        transport=httpx.MockTransport(server),
        api="v0.0.42",  # the fake's replies are v0.0.42's
    )


def client(server: Slurmrestd, clock: list[float]) -> RestSlurm:
    return RestSlurm(rest_client(server), bulk_over=2, clock=lambda: clock[0])


def test_jobs_are_reread_only_when_their_state_changes_or_they_get_old(server: Slurmrestd) -> None:
    clock = [0.0]
    slurm = client(server, clock)
    server.add(1, "PENDING", "sunk-pod:ml/a/u1")
    server.add(2, "RUNNING", "sunk-group:ml/g", "cpu-[0-1]")
    server.add(3, "RUNNING", "a user's own job")
    views = slurm.jobs()
    assert sorted(v.job_id for v in views) == [1, 2]
    assert [v.nodes for v in views if v.job_id == 2] == [("cpu-0", "cpu-1")]
    assert server.paths[1:] == [f"GET {API}/jobs/"]  # 3 unknown jobs > bulk_over: one list

    server.reset()
    assert len(slurm.jobs()) == 2
    assert server.paths == [f"GET {API}/jobs/state/"]  # nothing changed: no job read

    server.reset()
    server.add(1, "RUNNING", "sunk-pod:ml/a/u1", "cpu-2")
    del server.jobs[3]
    views = slurm.jobs()
    assert server.paths == [f"GET {API}/jobs/state/", f"GET {API}/job/1"]
    assert [v.running for v in views if v.job_id == 1] == [True]

    server.reset()
    clock[0] = 60.0  # pending reasons change without a state change: old copies are re-read
    slurm.jobs()
    assert sorted(server.paths) == [f"GET {API}/job/1", f"GET {API}/job/2", f"GET {API}/jobs/state/"]


@pytest.mark.parametrize("queue", [10, 1000])
def test_a_pass_reads_as_much_with_a_long_queue_as_with_a_short_one(server: Slurmrestd, queue: int) -> None:
    """Pending jobs whose copies only got old are re-read a few per pass (bulk_over), the oldest
    first, so a queue read at once and gone stale at once costs no more a pass than a short one."""
    clock = [0.0]
    slurm = client(server, clock)
    for i in range(queue):
        server.add(i + 1, "PENDING", f"sunk-pod:ml/p{i}/u{i}")
    slurm.jobs()
    seen: set[str] = set()
    for t in range(queue):  # every copy stale from here on
        clock[0] = 60.0 + t
        server.reset()
        assert len(slurm.jobs()) == queue
        assert server.paths[0] == f"GET {API}/jobs/state/"
        assert len(server.paths) == 3  # the state list and two jobs (bulk_over), never the whole list
        seen.update(server.paths[1:])
        if len(seen) == queue:
            break
    assert len(seen) == queue  # each old copy gets its turn


def test_a_job_purged_between_the_two_reads_is_skipped(server: Slurmrestd) -> None:
    slurm = client(server, [0.0])
    server.add(1, "PENDING", "sunk-pod:ml/a/u1")
    slurm.jobs()
    server.jobs[1]["job_state"] = ["COMPLETED"]
    real = server.__call__

    def purge_after_listing(request: httpx.Request) -> httpx.Response:
        reply = real(request)
        if request.url.path.endswith("/jobs/state/"):
            server.jobs.clear()
        return reply

    wire = slurm._rest._http
    assert isinstance(wire, HttpxWire)
    wire._transport = httpx.MockTransport(purge_after_listing)
    assert slurm.jobs() == []


def test_cancels_go_in_one_request_and_finished_jobs_are_fine(server: Slurmrestd) -> None:
    slurm = client(server, [0.0])
    server.add(1, "RUNNING")
    slurm.cancel([1, 5, 1])
    assert server.paths == [f"DELETE {API}/jobs/"]
    assert server.bodies == [{"jobs": ["1", "5"]}]
    server.reset()
    slurm.cancel([])
    assert server.paths == []


def test_a_job_we_cancelled_is_not_read_again_once_it_ended(server: Slurmrestd) -> None:
    """Slurm load under bursts: a burst cancels as many jobs as it starts; the state list says they ended, and
    nothing else about a job we cancelled matters, so only the jobs Slurm started are read."""
    slurm = client(server, [0.0])
    server.add(1, "RUNNING", "sunk-pod:ml/a/u1", "cpu-0")
    server.add(2, "PENDING", "sunk-pod:ml/b/u2")
    slurm.jobs()
    slurm.cancel([1])
    server.add(1, "CANCELLED", "sunk-pod:ml/a/u1", "cpu-0")
    server.add(2, "RUNNING", "sunk-pod:ml/b/u2", "cpu-0")
    server.reset()
    views = {v.job_id: v for v in slurm.jobs()}
    assert server.paths == [f"GET {API}/jobs/state/", f"GET {API}/job/2"]
    assert views[1].state == "CANCELLED" and not views[1].active and views[2].running
    # A job we did not cancel that ends is read (why it ended goes on its pods' Events).
    server.add(2, "PREEMPTED", "sunk-pod:ml/b/u2", "cpu-0")
    server.reset()
    slurm.jobs()
    assert server.paths == [f"GET {API}/jobs/state/", f"GET {API}/job/2"]


def test_a_refused_submit_says_why(server: Slurmrestd) -> None:
    slurm = client(server, [0.0])
    request = JobRequest(nodes=1, cpus_per_task=1, memory_mib=1, partition="nope")
    assert slurm.submit(request, Marker("pod", "ml", "a", "u1")) == 77
    sent = server.bodies[-1]["job"]
    assert sent["memory_per_node"] == {"set": True, "infinite": False, "number": 1} and sent["partition"] == "nope"
    server.submit_error = {
        "error_number": 2000,
        "description": "Batch job submission failed",
        "error": "Invalid partition name specified",
    }
    with pytest.raises(Rejected, match="Invalid partition name specified"):
        slurm.submit(request, Marker("pod", "ml", "a", "u1"))


def test_a_cluster_without_a_shared_nodeset_is_named_as_the_reason(server: Slurmrestd) -> None:
    """Slurm's words for the placeholder's constraint on a partition with no shared NodeSet say
    nothing of NodeSets: the refusal adds what to change (seen on the local cluster's HA stack)."""
    slurm = client(server, [0.0])
    server.submit_error = {"error_number": 2072, "description": "Batch job submission failed",
                           "error": "Invalid feature specification"}  # fmt: skip
    with pytest.raises(Rejected) as refused:
        slurm.submit(JobRequest(nodes=1, cpus_per_task=1, memory_mib=1), Marker("pod", "ml", "a", "u1"))
    assert str(refused.value) == (
        "Invalid feature specification: no node of the default partition has the feature sunk_shared; sunk's "
        "scheduler places pods only on NodeSets with resourceMode: shared (set it on a NodeSet of that partition, "
        "or name another partition with the slurm.sunk.dev/partition annotation)"
    )
    with pytest.raises(Rejected, match=r"^Invalid feature specification$"):  # another constraint: Slurm's words
        slurm.submit(
            JobRequest(nodes=1, cpus_per_task=1, memory_mib=1, constraint="a100"), Marker("pod", "ml", "a", "u1")
        )


def test_each_submitting_thread_has_its_own_client_and_close_ends_them(server: Slurmrestd) -> None:
    made: list[SlurmRestClient] = []

    def connect() -> SlurmRestClient:
        made.append(rest_client(server))
        return made[-1]

    rest = rest_client(server)
    slurm = RestSlurm(rest, connect=connect)
    request = JobRequest(nodes=1, cpus_per_task=1, memory_mib=1)

    def submit_twice(name: str) -> None:
        for i in range(2):
            slurm.submit(request, Marker("pod", "ml", name, f"u{i}"))

    threads = [threading.Thread(target=submit_twice, args=(n,)) for n in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # One client per thread, reused for its second submit; the shared one (jobs, cancel) sent nothing.
    assert len(made) == 2 and [c.requests for c in made] == [2, 2] and rest.requests == 0
    slurm.close()
    assert all(c._http.is_closed for c in made) and not rest._http.is_closed


def test_an_unreachable_controller_is_not_a_rejection(server: Slurmrestd) -> None:
    slurm = client(server, [0.0])
    server.submit_error = {"error_number": 1800, "error": "Unable to contact slurm controller"}
    slurm._rest._sleep = lambda _: None
    with pytest.raises(Exception) as caught:
        slurm.submit(JobRequest(nodes=1, cpus_per_task=1, memory_mib=1), Marker("pod", "ml", "a", "u1"))
    assert not isinstance(caught.value, Rejected | SlurmApiError)


def test_a_marker_on_another_users_job_is_not_ours(server: Slurmrestd) -> None:
    """Runtime trust: anyone can name a job `sunk-pod:...`; only jobs of the Slurm user
    the scheduler submits as (SUNK_SLURM_USER) are adopted, bound or cancelled."""
    clock = [0.0]
    slurm = client(server, clock)
    server.add(1, "RUNNING", "sunk-pod:ml/a/u1", "cpu-0", user="mallory")
    server.add(2, "RUNNING", "sunk-pod:ml/b/u2", "cpu-1")
    assert [v.job_id for v in slurm.jobs()] == [2]


def test_an_immediate_allocation_first_and_a_queued_batch_job_when_refused(server: Slurmrestd) -> None:
    clock = [0.0]
    placed: list[str] = []
    rest = rest_client(server)
    slurm = RestSlurm(rest, clock=lambda: clock[0], immediate=True, on_placed=placed.append)
    request, marker = JobRequest(nodes=1, cpus_per_task=1, memory_mib=1), Marker("pod", "ml", "a", "u1")

    assert slurm.submit(request, marker) == 78  # started in the request
    assert server.paths == [f"POST {API}/job/allocate"]
    server.reset()
    server.busy = True
    assert slurm.submit(request, marker) == 77  # refused: queued as a batch placeholder
    assert server.paths == [f"POST {API}/job/allocate", f"POST {API}/job/submit"]
    assert server.bodies[1]["job"]["script"].startswith("#!")
    server.reset()
    server.busy = False
    clock[0] = 0.5  # within the pause after a refusal: straight to the queue, one request
    assert slurm.submit(request, marker) == 77 and server.paths == [f"POST {API}/job/submit"]
    server.reset()
    slurm.cancel([5])  # a cancel makes room: allocations at once again
    assert slurm.submit(request, marker) == 78 and server.paths[-1] == f"POST {API}/job/allocate"
    server.reset()
    clock[0] = 9.0
    server.busy = True
    slurm.submit(request, marker)
    clock[0] = 10.5  # the pause is over
    server.reset()
    server.busy = False
    assert slurm.submit(request, marker) == 78 and server.paths == [f"POST {API}/job/allocate"]
    assert placed == ["allocation", "batch", "batch", "allocation", "batch", "allocation"]


def test_a_refused_gang_keeps_no_smaller_pod_off_immediate_allocations(server: Slurmrestd) -> None:
    """The pause after a refusal covers requests no smaller than the refused one: a 64-node gang
    that can't start (or never can) at the head of the queue leaves single pods their fast path."""
    clock = [0.0]
    slurm = RestSlurm(rest_client(server), clock=lambda: clock[0], immediate=True)
    gang, marker = JobRequest(nodes=64, cpus_per_task=1, memory_mib=1), Marker("group", "ml", "g")
    single = JobRequest(nodes=1, cpus_per_task=1, memory_mib=1)
    server.busy = True
    assert slurm.submit(gang, marker) == 77
    server.reset()
    server.busy = False
    assert slurm.submit(single, Marker("pod", "ml", "a", "u1")) == 78
    assert server.paths == [f"POST {API}/job/allocate"]  # not paused by the gang's refusal
    server.reset()
    bigger = JobRequest(nodes=64, cpus_per_task=2, memory_mib=1)
    assert slurm.submit(bigger, Marker("group", "ml", "h")) == 77
    assert server.paths == [f"POST {API}/job/submit"]  # no smaller than the refused gang: paused
    server.reset()
    clock[0] = 1.5
    assert slurm.submit(bigger, Marker("group", "ml", "h")) == 78  # the pause is over


def test_without_immediate_every_placeholder_is_a_batch_job(server: Slurmrestd) -> None:
    slurm = client(server, [0.0])
    slurm.submit(JobRequest(nodes=1, cpus_per_task=1, memory_mib=1), Marker("pod", "ml", "a", "u1"))
    assert server.paths == [f"POST {API}/job/submit"]


@pytest.mark.parametrize(
    ("extra", "immediate"),
    [([], True), (["MessageTimeout=30"], True), (["InactiveLimit=300"], False), (["inactivelimit=60"], False)],
)
def test_the_deployment_allows_immediate_allocations_unless_inactive_limit_is_set(
    extra: list[str], immediate: bool
) -> None:
    """An allocation has no srun for slurmctld to ping: with an InactiveLimit it would be ended."""
    data = load_stack("acme-dev", FIXTURE_STACKS).spec.model_dump(mode="json", by_alias=True, exclude_defaults=True)
    data.setdefault("controller", {})["extraSlurmConf"] = extra
    spec = load_spec(data)
    env = deployment(spec, auth_refs(spec), "scheduler")["spec"]["template"]["spec"]["containers"][0]["env"]
    assert ({"name": "SUNK_IMMEDIATE_ALLOCATION", "value": "true"} in env) is immediate
    assert Settings.from_env({**SETTINGS, "SUNK_IMMEDIATE_ALLOCATION": "true"}).immediate_allocation
    assert not Settings.from_env(SETTINGS).immediate_allocation


def test_an_allocation_is_read_by_the_thread_that_made_it_not_by_the_next_pass(server: Slurmrestd) -> None:
    """The job read of a burst's new jobs happens beside the cycle: the submitting thread reads the
    allocation it was just granted, and the pass takes that copy while the state is unchanged."""

    connect = partial(rest_client, server)
    clock = [0.0]
    slurm = RestSlurm(connect(), connect=connect, immediate=True, bulk_over=2, clock=lambda: clock[0])
    request = JobRequest(nodes=1, cpus_per_task=1, memory_mib=1)
    server.add(78, "RUNNING", "sunk-pod:ml/a/u1", "cpu-3")
    assert slurm.submit(request, Marker("pod", "ml", "a", "u1")) == 78
    assert server.paths == [f"POST {API}/job/allocate", f"GET {API}/job/78"]

    server.reset()
    [view] = slurm.jobs()
    assert server.paths == [f"GET {API}/jobs/state/"]  # no read of job 78: the copy was taken
    assert (view.job_id, view.running, view.nodes) == (78, True, ("cpu-3",))

    slurm.close()

    again = RestSlurm(connect(), connect=connect, immediate=True, bulk_over=2, clock=lambda: clock[0])
    assert again.submit(request, Marker("pod", "ml", "a", "u1")) == 78
    server.jobs[78]["job_state"] = ["COMPLETED"]  # ended after its thread read it: read again
    server.reset()
    [view] = again.jobs()
    assert server.paths == [f"GET {API}/jobs/state/", f"GET {API}/job/78"] and view.state == "COMPLETED"
    again.close()


def _node(name: str, cpus: int, alloc: int, state: str = "MIXED") -> dict[str, Any]:
    return {"name": name, "state": [state], "cpus": cpus, "alloc_cpus": alloc, "real_memory": 8192, "alloc_memory": 0}


def test_a_single_cpu_pod_is_put_on_a_node_the_scheduler_names_and_not_read_back(server: Slurmrestd) -> None:
    """After Slurm placed one allocation of a kind (partition, constraint), the next of that kind is
    asked for on a node where Slurm placed it (runtime/scheduler/room.py): one request a pod, the
    job's node known from its name, not from a read."""

    connect = partial(rest_client, server)
    clock = [0.0]
    placed: list[str] = []
    slurm = RestSlurm(connect(), connect=connect, immediate=True, clock=lambda: clock[0], on_placed=placed.append)
    single = JobRequest(nodes=1, cpus_per_task=2, memory_mib=1024, partition="gpu")
    server.add(78, "RUNNING", "sunk-pod:ml/a/u1", "gpu-0")
    server.jobs[78]["partition"] = "gpu"
    assert slurm.submit(single, Marker("pod", "ml", "a", "u1")) == 78
    assert server.paths == [f"POST {API}/job/allocate", f"GET {API}/job/78"]  # Slurm chose: read back
    server.nodes = [_node("gpu-0", 16, 2), _node("gpu-1", 16, 0), _node("gpu-2", 16, 15)]
    server.reset()
    server.allocated = [79, 80]
    assert slurm.submit(single, Marker("pod", "ml", "b", "u2")) == 79
    assert server.paths == [f"GET {API}/nodes/", f"POST {API}/job/allocate"]  # the count, then one request
    assert server.bodies[1]["job"]["required_nodes"] == ["gpu-0"]  # learned (gpu-1 never held one)
    server.reset()
    assert slurm.submit(single, Marker("pod", "ml", "c", "u3")) == 80
    assert server.paths == [f"POST {API}/job/allocate"]  # the count is kept ROOM_MAX_AGE
    assert placed == ["allocation", "named", "named"]

    server.add(79, "RUNNING", "sunk-pod:ml/b/u2", "gpu-0")
    server.add(80, "RUNNING", "sunk-pod:ml/c/u3", "gpu-0")
    server.reset()
    views = {v.job_id: v for v in slurm.jobs()}
    assert server.paths == [f"GET {API}/jobs/state/"]  # neither named job is read
    assert views[79].nodes == ("gpu-0",) and views[79].running and not views[79].start_exact
    assert views[78].start_exact  # read from Slurm

    # A GPU pod, a gang, a request with exclusions or a switch count: Slurm chooses, as before.
    for other in (
        replace(single, gpus=1),
        replace(single, nodes=2),
        replace(single, exclude=("gpu-1",)),
        replace(single, switches=1),
        replace(single, partition="batch"),  # no allocation of that kind placed yet
    ):
        server.reset()
        slurm.submit(other, Marker("pod", "ml", "x", "ux"))
        assert "required_nodes" not in server.bodies[0]["job"], other
    slurm.close()


def test_a_named_node_slurm_refuses_is_left_and_the_pod_goes_the_usual_way(server: Slurmrestd) -> None:
    connect = partial(rest_client, server)
    clock = [0.0]
    placed: list[str] = []
    slurm = RestSlurm(connect(), connect=connect, immediate=True, clock=lambda: clock[0], on_placed=placed.append)
    single = JobRequest(nodes=1, cpus_per_task=1, memory_mib=1, partition="gpu")
    for job_id, node in ((78, "gpu-0"), (79, "gpu-1")):
        server.add(job_id, "RUNNING", f"sunk-pod:ml/p{job_id}/u{job_id}", node)
    server.allocated = [78, 79]
    slurm.submit(single, Marker("pod", "ml", "p78", "u78"))  # learned gpu-0
    server.busy = True  # a refusal of an unnamed allocation: the usual pause, and no learning
    server.nodes = [_node("gpu-0", 16, 10), _node("gpu-1", 16, 1)]
    server.full = {"gpu-0"}  # a training job took it since Slurm's count was read
    server.reset()
    slurm.submit(single, Marker("pod", "ml", "p80", "u80"))
    # Named gpu-0 (the learned one), refused; then Slurm's own choice, refused too: queued.
    assert server.paths == [
        f"GET {API}/nodes/",
        f"POST {API}/job/allocate",
        f"POST {API}/job/allocate",
        f"POST {API}/job/submit",
    ]
    assert server.bodies[1]["job"]["required_nodes"] == ["gpu-0"] and "required_nodes" not in server.bodies[2]["job"]
    server.busy = False
    clock[0] = 0.5  # within the pause after the refusal: straight to the queue
    server.reset()
    slurm.submit(single, Marker("pod", "ml", "p81", "u81"))
    assert server.paths == [f"POST {API}/job/submit"]
    clock[0] = 1.0  # the pause is over; gpu-0 is no longer named (until Slurm places one there)
    server.allocated = [79]
    server.reset()
    slurm.submit(single, Marker("pod", "ml", "p79", "u79"))
    assert server.paths == [f"POST {API}/job/allocate", f"GET {API}/job/79"]  # Slurm chose gpu-1
    assert "required_nodes" not in server.bodies[0]["job"] and placed[-1] == "allocation"
    clock[0] = 2.5  # the count is read again: gpu-0 has room by it, yet only gpu-1 is named
    server.full = set()
    server.allocated = [83]
    server.reset()
    slurm.submit(single, Marker("pod", "ml", "p83", "u83"))
    assert server.paths == [f"GET {API}/nodes/", f"POST {API}/job/allocate"]
    assert server.bodies[1]["job"]["required_nodes"] == ["gpu-1"] and placed[-1] == "named"
    # A cancel makes room: Slurm's count is read again at the next name.
    slurm.cancel([78])
    server.reset()
    server.allocated = [82]
    server.full = set()
    slurm.submit(single, Marker("pod", "ml", "p82", "u82"))
    assert server.paths == [f"GET {API}/nodes/", f"POST {API}/job/allocate"]
    slurm.close()
