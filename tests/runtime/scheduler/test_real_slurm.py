"""The scheduler process against real slurmctld + slurmrestd (harness, acme-dev) and kmock."""

from __future__ import annotations

import json
import re
from collections import Counter
from datetime import datetime, timedelta
from functools import partial
from typing import Any

import jsonpatch
import pytest
from sunk.runtime.harness import LocalSlurm
from sunk.runtime.scheduler.marker import Marker
from sunk.runtime.scheduler.request import JobRequest
from sunk.runtime.scheduler.slurm import RestSlurm
from sunk.runtime.slurmrest.connect import SlurmAccess
from sunk.runtime.webhook.admission import parse_namespaces, pod_patch

from sunk import keys
from sunk.hostlist import expand
from sunk.manifests.webhook import namespaces_json
from tests.support.rawclient import as_body
from tests.support.slurmalloc import allocations

from .conftest import Cluster, StartScheduler

pytestmark = pytest.mark.slurm

FILL = "#!/bin/bash\nsleep 300\n"


def squeue(slurm: LocalSlurm) -> dict[int, tuple[str, str, str]]:
    """job id -> (name, state, nodes)."""
    out = slurm.run("squeue", "-h", "-o", "%i|%j|%T|%N", check=True).stdout
    rows = [line.split("|") for line in out.splitlines() if line]
    return {int(r[0]): (r[1], r[2], r[3]) for r in rows}


def placeholder_jobs(slurm: LocalSlurm) -> dict[int, tuple[str, str, str]]:
    return {i: row for i, row in squeue(slurm).items() if row[0].startswith("sunk-")}


SHARED = {keys.PARTITION: "gpu"}
"""acme-dev's gpu partition holds the shared NodeSet: the Nodes where pods fit beside slurmd."""


def test_pods_are_bound_to_the_nodes_slurm_chose(
    slurm: LocalSlurm, k8s: Cluster, start_scheduler: StartScheduler
) -> None:
    k8s.sim.add_namespace("ml", {keys.TIME_LIMIT: "0:30:00", **SHARED})  # Namespace defaults
    proc = start_scheduler()
    k8s.create_pod(
        "cpu-pod", cpu="2", memory="1Gi", annotations={keys.NICE: "10", keys.PRIORITY: "5000", keys.ACCOUNT: "root"}
    )
    k8s.create_pod("gpu-pod", gpus=1, annotations={keys.GPU_TYPE: "h100"})
    k8s.create_pod("w-0", annotations={keys.GROUP: "pair", keys.GROUP_SIZE: "2"})
    k8s.create_pod("w-1", annotations={keys.GROUP: "pair", keys.GROUP_SIZE: "2"})
    k8s.create_pod("not-ours", ns="other-tenant")  # outside SUNK_POD_NAMESPACES
    for name in ("cpu-pod", "gpu-pod", "w-0", "w-1"):
        pod = k8s.wait_bound(name)
        annotations = pod["metadata"]["annotations"]
        job_id, slurm_node = int(annotations[keys.JOB_ID]), annotations[keys.SLURM_NODE]
        # The pod sits on the Kubernetes Node whose slurmd is the Slurm node of its job.
        assert pod["spec"]["nodeName"] == k8s.node_of[slurm_node]
        job = slurm.run("scontrol", "show", "job", "-o", str(job_id), check=True).stdout
        assert "JobState=RUNNING" in job
        assert slurm_node in expand(re.search(r" NodeList=(\S+)", job).group(1))  # type: ignore[union-attr]
        assert "Comment=sunk-" in job
        assert "TimeLimit=00:30:00" in job
        # Room everywhere: an immediate allocation, started in the submit itself (no batch step).
        assert "BatchFlag=0" in job
        if name == "cpu-pod":
            assert "NumCPUs=2" in job and "mem=1G" in job
            assert "Nice=10" in job and "Priority=5000" in job and "Account=root" in job
        if name == "gpu-pod":
            assert slurm_node.startswith("gpu-") and "TresPerNode=gres/gpu:h100:1" in job
        assert [e["reason"] for e in k8s.events(name)] == ["Scheduled"]
    # One job for the group, one node per member.
    w0, w1 = (k8s.existing_pod(n)["metadata"]["annotations"] for n in ("w-0", "w-1"))
    assert w0[keys.JOB_ID] == w1[keys.JOB_ID] and w0[keys.SLURM_NODE] != w1[keys.SLURM_NODE]
    assert len(placeholder_jobs(slurm)) == 3
    assert not k8s.existing_pod("not-ours", "other-tenant")["spec"].get("nodeName")
    assert proc.metric('sunk_scheduler_placeholders_total{kind="allocation"}') == 3
    assert proc.metric('sunk_scheduler_placeholders_total{kind="batch"}') == 0


def test_a_high_priority_pod_preempts_a_low_priority_batch_job(
    slurm: LocalSlurm, k8s: Cluster, start_scheduler: StartScheduler
) -> None:
    low = [slurm.sbatch(FILL, "--qos=low", "--exclusive", "-N1", f"-w{n.name}") for n in slurm.nodes]
    for job_id in low:
        slurm.wait_job(job_id, {"RUNNING"})
    start_scheduler()
    k8s.create_pod("urgent", annotations={keys.QOS: "high", keys.PARTITION: "gpu"})
    pod = k8s.wait_bound("urgent")
    node = pod["metadata"]["annotations"][keys.SLURM_NODE]
    # Slurm requeued the low job that held that node (PreemptMode=requeue on QOS low).
    victims = [j for j in low if slurm.job_state(j) != "RUNNING"]
    assert len(victims) == 1
    # slurmdbd records the preemption shortly after slurmctld does it.
    k8s.wait_for(
        f"job {victims[0]} PREEMPTED on {node} in sacct",
        lambda: (
            f"PREEMPTED|{node}"
            in slurm.run("sacct", "-D", "-n", "-P", "-o", "State,NodeList", "-j", str(victims[0]), check=True).stdout
        ),
    )


def test_a_high_priority_batch_job_preempts_a_low_priority_pod(
    slurm: LocalSlurm, k8s: Cluster, start_scheduler: StartScheduler
) -> None:
    start_scheduler()
    k8s.create_pod("batchable", annotations={keys.QOS: "low", **SHARED})
    pod = k8s.wait_bound("batchable")
    node = pod["metadata"]["annotations"][keys.SLURM_NODE]
    high = slurm.sbatch(FILL, "--qos=high", "--exclusive", "-N1", f"-w{node}")
    slurm.wait_job(high, {"RUNNING"})
    k8s.wait_for("the preempted pod to be evicted", lambda: k8s.pod("batchable") is None)
    assert k8s.sim.evictions == [("ml", "batchable")]  # through the Eviction API
    reasons = [(e["type"], e["reason"]) for e in k8s.events("batchable")]
    assert ("Warning", "Preempted") in reasons
    [message] = [e["message"] for e in k8s.events("batchable") if e["reason"] == "Preempted"]
    assert "preempted by a higher-priority Slurm job" in message
    k8s.wait_for("the placeholder to leave the queue", lambda: placeholder_jobs(slurm) == {})


def test_deleting_the_pod_cancels_its_job(slurm: LocalSlurm, k8s: Cluster, start_scheduler: StartScheduler) -> None:
    start_scheduler()
    k8s.create_pod("short-lived", annotations=SHARED)
    job_id = int(k8s.wait_bound("short-lived")["metadata"]["annotations"][keys.JOB_ID])
    k8s.delete_pod("short-lived")
    assert slurm.wait_job(job_id, {"CANCELLED"}, timeout=120) == "CANCELLED"


def test_a_group_that_starts_at_its_first_member_gets_all_its_nodes_at_once(
    slurm: LocalSlurm, k8s: Cluster, start_scheduler: StartScheduler
) -> None:
    """LeaderWorkerSet's LeaderReady: the worker exists only once the leader runs. The leader alone
    gets the whole group's job (both shared nodes); the worker, created after, takes the other.
    acme-dev's topology is a tree (as its Deployment renders SUNK_GANG_TOPOLOGY): the gang's job
    asks Slurm for one leaf switch, and gets it (both gpu nodes hang off one leaf)."""
    start_scheduler(SUNK_GANG_TOPOLOGY="tree")
    group = {keys.GROUP: "lws-4f2a", keys.GROUP_SIZE: "2", keys.GROUP_START: "first-member", **SHARED}
    k8s.create_pod("lws-0", annotations=group)
    leader = k8s.wait_bound("lws-0")["metadata"]["annotations"]
    job_id = int(leader[keys.JOB_ID])
    job = slurm.run("scontrol", "show", "job", "-o", str(job_id), check=True).stdout
    assert "JobState=RUNNING" in job and " NumNodes=2 " in job, job
    assert " Switches=1@00:05:00 " in job, job
    k8s.create_pod("lws-0-1", annotations=group)
    worker = k8s.wait_bound("lws-0-1")["metadata"]["annotations"]
    assert int(worker[keys.JOB_ID]) == job_id
    assert {leader[keys.SLURM_NODE], worker[keys.SLURM_NODE]} == {"gpu-0", "gpu-1"}
    assert len([j for j in placeholder_jobs(slurm).values() if "lws-4f2a" in j[0]]) == 1
    k8s.delete_pod("lws-0")
    k8s.delete_pod("lws-0-1")
    assert slurm.wait_job(job_id, {"CANCELLED"}, timeout=120) == "CANCELLED"


def test_an_unplaceable_gang_first_in_the_queue_holds_back_no_pod_behind_it(
    slurm: LocalSlurm, k8s: Cluster, start_scheduler: StartScheduler
) -> None:
    """No starvation (issue 35): a gang of three, larger than the two shared nodes, is the oldest
    work when the scheduler starts. slurmctld refuses its job (the immediate allocation and then
    the batch job); the single pods behind it are bound meanwhile, each on an immediate
    allocation: the gang's refusal pauses allocations only for requests no smaller than its own."""
    for i in range(3):
        k8s.create_pod(f"big-{i}", annotations={keys.GROUP: "big", keys.GROUP_SIZE: "3", **SHARED})
    for i in range(4):
        k8s.create_pod(f"web-{i}", annotations=SHARED)
    proc = start_scheduler()
    for i in range(4):
        k8s.wait_bound(f"web-{i}")
    # A gang Slurm refuses has its own reason (GangRefused), apart from a single pod's Unschedulable.
    k8s.wait_for("the gang refused", lambda: (k8s.condition("big-0") or {}).get("reason") == "GangRefused")
    assert not any(k8s.existing_pod(f"big-{i}")["spec"].get("nodeName") for i in range(3))
    # Allocations where Slurm chose and on nodes the scheduler named (once Slurm placed one there).
    allocations_made = [
        proc.metric(f'sunk_scheduler_placeholders_total{{kind="{k}"}}') for k in ("allocation", "named")
    ]
    assert sum(allocations_made) == 4 and allocations_made[0] >= 1
    assert proc.metric('sunk_scheduler_placeholders_total{kind="batch"}') == 0


def test_invalid_requests_are_reported_once_without_a_retry_storm(
    slurm: LocalSlurm, k8s: Cluster, start_scheduler: StartScheduler
) -> None:
    proc = start_scheduler()
    k8s.create_pod("lost", annotations={keys.PARTITION: "nope"})
    k8s.create_pod("greedy", gpus=9)
    for name, why in (
        ("lost", "Invalid partition name specified"),
        ("greedy", "Requested node configuration is not available"),
    ):
        condition = k8s.wait_for(f"{name} marked unschedulable", partial(k8s.condition, name))
        assert (condition["status"], condition["reason"]) == ("False", "Unschedulable")
        assert why in condition["message"]
    cycles = proc.metric("sunk_scheduler_cycle_seconds_count")
    k8s.wait_for("ten more cycles", lambda: proc.metric("sunk_scheduler_cycle_seconds_count") >= cycles + 10)
    assert proc.metric("sunk_scheduler_rejects_total") == 2
    assert proc.metric("sunk_scheduler_submits_total") == 0
    for name in ("lost", "greedy"):
        assert [e["reason"] for e in k8s.events(name)] == ["FailedScheduling"]
        assert k8s.pod(name) is not None  # reported, not evicted


def test_a_killed_scheduler_restarts_adopts_its_jobs_and_binds_each_pod_once(
    slurm: LocalSlurm, k8s: Cluster, start_scheduler: StartScheduler
) -> None:
    # The API server refuses bindings: jobs get submitted and start, but no pod is bound yet.
    k8s.sim.fail_bindings = True
    first = start_scheduler()
    for name in ("a", "b", "c"):
        k8s.create_pod(name, annotations=SHARED)
    jobs = k8s.wait_for(
        "three running placeholder jobs",
        lambda: (j := placeholder_jobs(slurm)) and len(j) == 3 and all(r[1] == "RUNNING" for r in j.values()) and j,
    )
    first.kill()
    k8s.delete_pod("c")  # gone while no scheduler ran: its job is an orphan
    k8s.sim.fail_bindings = False

    second = start_scheduler()
    bound = {name: k8s.wait_bound(name) for name in ("a", "b")}
    job_of = {n: int(p["metadata"]["annotations"][keys.JOB_ID]) for n, p in bound.items()}
    assert set(job_of.values()) < set(jobs)  # the same jobs, adopted by marker
    c_job = (set(jobs) - set(job_of.values())).pop()
    assert slurm.wait_job(c_job, {"CANCELLED"}, timeout=120) == "CANCELLED"

    # Kill again right after binding; a third run must find nothing to do.
    second.kill()
    third = start_scheduler()
    cycles = third.metric("sunk_scheduler_cycle_seconds_count")
    k8s.wait_for("ten cycles", lambda: third.metric("sunk_scheduler_cycle_seconds_count") >= cycles + 10)
    assert sorted(k8s.sim.bindings) == [
        ("ml", "a", bound["a"]["spec"]["nodeName"]),
        ("ml", "b", bound["b"]["spec"]["nodeName"]),
    ]
    assert third.metric("sunk_scheduler_submits_total") == 0
    assert sorted(placeholder_jobs(slurm)) == sorted(job_of.values())


def job_detail(slurm: LocalSlurm, job_id: int) -> tuple[str, set[int], set[int]]:
    """(node, CPU ids, GPU indices) of a running one-node job, from `scontrol show job -d`."""
    out = slurm.run("scontrol", "show", "job", "-d", str(job_id), check=True).stdout
    [(node, (cpus, gpus))] = allocations(out)[job_id].items()
    return node, cpus, gpus


def test_a_slurm_job_and_a_sunk_scheduled_pod_share_a_node(
    slurm: LocalSlurm, k8s: Cluster, start_scheduler: StartScheduler
) -> None:
    # gpu-1 is busy, so Slurm places both the batch job and the pod's placeholder on gpu-0.
    fill = slurm.sbatch(FILL, "--exclusive", "-N1", "-wgpu-1", "-pgpu")
    batch = slurm.sbatch(FILL, "-N1", "-wgpu-0", "-pgpu", "-c8", "--mem=8G", "--gres=gpu:h100:1")
    for job_id in (fill, batch):
        slurm.wait_job(job_id, {"RUNNING"})
    start_scheduler()
    k8s.create_pod("infer", cpu="4", memory="8Gi", gpus=1, annotations=SHARED)
    pod = k8s.wait_bound("infer")
    assert pod["spec"]["nodeName"] == "k8s-gpu-0"
    placeholder = int(pod["metadata"]["annotations"][keys.JOB_ID])
    # Both run on gpu-0 at once, on disjoint CPUs and GPUs (Slurm's allocation of each).
    assert slurm.job_state(batch) == "RUNNING" and slurm.job_state(placeholder) == "RUNNING"
    node_a, cpus_a, gpus_a = job_detail(slurm, batch)
    node_b, cpus_b, gpus_b = job_detail(slurm, placeholder)
    assert node_a == node_b == "gpu-0"
    assert len(cpus_a) == 8 and len(cpus_b) == 4 and not cpus_a & cpus_b
    assert len(gpus_a) == len(gpus_b) == 1 and not gpus_a & gpus_b
    # The kubelet model admitted it beside the shared slurmd pod: nothing was rejected.
    assert k8s.sim.rejections == []
    assert (k8s.pod("infer") or {})["status"]["phase"] != "Failed"


def test_a_single_cpu_pods_allocation_goes_to_the_node_named_and_a_node_slurm_refuses_is_left(
    slurm: LocalSlurm,
) -> None:
    """Named nodes (runtime/scheduler/room.py) on real slurmctld: once Slurm placed one allocation
    of a kind, the next goes to a node the scheduler names, in one request, and Slurm's record
    agrees; a named node that a job filled since Slurm's count was read is refused by Slurm, and
    the pod's allocation goes where Slurm chooses."""
    access = SlurmAccess.from_key_file(slurm.rest_url, "slurm", slurm.jwt_key_path)
    clock = [0.0]  # Slurm's count of free room is not read again unless a test moves this
    placed: list[str] = []
    rest = access.client()
    api = RestSlurm(rest, connect=access.client, immediate=True, clock=lambda: clock[0], on_placed=placed.append)
    single = JobRequest(nodes=1, cpus_per_task=2, memory_mib=512, partition="gpu")
    try:
        first = api.submit(single, Marker("pod", "ml", "a", "u1"))
        second = api.submit(single, Marker("pod", "ml", "b", "u2"))
        assert placed == ["allocation", "named"]
        where = {job_id: row[2] for job_id, row in squeue(slurm).items()}
        node = where[first]
        assert where[second] == node  # the learned node, which the request fills most
        # (Not read back: test_slurm_cache.py counts the requests; here other tests' jobs may make
        # the first pass read every job at once, this one with them.)
        views = {v.job_id: v for v in api.jobs()}
        assert views[second].running and views[second].nodes == (node,)
        # A batch job takes the rest of the node's CPUs behind the count's back.
        fill = slurm.sbatch(FILL, "-N1", f"-w{node}", "-pgpu", "-c12", "--mem=1G")
        slurm.wait_job(fill, {"RUNNING"})
        third = api.submit(single, Marker("pod", "ml", "c", "u3"))
        assert placed[-1] == "allocation"  # named, refused by Slurm, then placed by Slurm
        other = squeue(slurm)[third][2]
        assert other != node and other.startswith("gpu-")
        clock[0] = 5.0  # the count is read again: the full node has no room, the other is learned
        fourth = api.submit(single, Marker("pod", "ml", "d", "u4"))
        assert placed[-1] == "named" and squeue(slurm)[fourth][2] == other
        assert all(slurm.job_state(j) == "RUNNING" for j in (first, second, third, fourth))
    finally:
        api.close()
        rest.close()
        slurm.cancel_all()


def test_pods_never_land_on_exclusive_nodes(slurm: LocalSlurm, k8s: Cluster, start_scheduler: StartScheduler) -> None:
    # Only the exclusive cpu nodes are free; the placeholder asks for sunk_shared and waits.
    fills = [slurm.sbatch(FILL, "--exclusive", "-N1", f"-w{n}", "-pgpu") for n in ("gpu-0", "gpu-1")]
    for job_id in fills:
        slurm.wait_job(job_id, {"RUNNING"})
    proc = start_scheduler()
    k8s.create_pod("web", cpu="1", memory="512Mi", annotations={keys.PARTITION: "batch"})
    # No room now: the immediate allocation is refused, and a batch placeholder waits in the queue.
    k8s.wait_for("the placeholder pending", lambda: [r for r in placeholder_jobs(slurm).values() if r[1] == "PENDING"])
    assert proc.metric('sunk_scheduler_placeholders_total{kind="batch"}') == 1
    k8s.wait_for(
        "PodScheduled=False, SlurmJobPending", lambda: (k8s.condition("web") or {}).get("reason") == "SlurmJobPending"
    )
    assert k8s.sim.bindings == []
    slurm.run("scancel", str(fills[0]), check=True)
    assert k8s.wait_bound("web", timeout=120)["spec"]["nodeName"] == "k8s-gpu-0"
    assert k8s.sim.rejections == []


def test_a_pod_that_cannot_fit_is_never_bound(slurm: LocalSlurm, k8s: Cluster, start_scheduler: StartScheduler) -> None:
    # Pods Slurm does not know about (another scheduler's) fill both shared Nodes' CPUs.
    for n in ("gpu-0", "gpu-1"):
        hog: dict[str, Any] = {"metadata": {"name": f"hog-{n}"}, "spec": {"nodeName": f"k8s-{n}"}}
        hog["spec"]["containers"] = [{"name": "m", "image": "llm", "resources": {"requests": {"cpu": "16"}}}]
        k8s.api.create_namespaced_pod("serving", as_body(hog), _preload_content=False)
    proc = start_scheduler()
    k8s.create_pod("web", cpu="1", memory="512Mi", annotations=SHARED)

    def events(reason: str) -> list[str]:
        return [e["message"] for e in k8s.events("web") if e["reason"] == reason]

    first = k8s.wait_for("a FailedScheduling event", lambda: events("FailedScheduling"))[0]
    assert "would not admit it (cpu: requested 1000m, 16510m of 17000m allocatable in use (490m free))" in first
    # Rerouted off the first node after the grace (3 s here); excluding both leaves Slurm no node,
    # so it refuses and the second allocation is kept.
    k8s.wait_for("a refused reroute", lambda: [m for m in events("FailedScheduling") if "keeping job" in m])
    assert proc.metric("sunk_scheduler_reroutes_total") == 1
    assert k8s.sim.bindings == [] and k8s.sim.rejections == []
    [(_, state, node)] = placeholder_jobs(slurm).values()
    assert state == "RUNNING"
    # Room appears where the kept job runs: the pod is bound there, and the kubelet admits it.
    k8s.api.delete_namespaced_pod(f"hog-{node}", "serving", _preload_content=False)
    assert k8s.wait_bound("web")["spec"]["nodeName"] == f"k8s-{node}"
    assert k8s.sim.rejections == []


def test_a_spoofed_marker_on_another_users_job_is_neither_adopted_nor_cancelled(
    slurm: LocalSlurm, k8s: Cluster, start_scheduler: StartScheduler
) -> None:
    """Runtime trust: a user names a job like a placeholder of a pod that does not exist.
    The scheduler cancels marked jobs whose pod is gone, but only its own Slurm user's: this one
    (submitted as games) keeps running."""
    done = slurm.jail.run(
        [
            "sbatch",
            "--parsable",
            "-J",
            "sunk-pod:ml/ghost/0000",
            "--comment",
            "sunk-pod:ml/ghost/0000",
            "-o",
            "/dev/null",
        ],
        input="#!/bin/sh\nsleep 300\n",
        user="games:games",
    )
    assert done.returncode == 0, done.stderr
    spoofed = int(done.stdout.strip().split(";")[0])
    slurm.wait_job(spoofed, {"RUNNING"})
    proc = start_scheduler()
    cycles = proc.metric("sunk_scheduler_cycle_seconds_count")
    k8s.wait_for("ten more cycles", lambda: proc.metric("sunk_scheduler_cycle_seconds_count") >= cycles + 10)
    assert slurm.job_state(spoofed) == "RUNNING"
    assert proc.metric("sunk_scheduler_cancels_total") == 0


def test_binding_reads_nothing_and_a_steady_scheduler_lists_nothing(
    slurm: LocalSlurm, k8s: Cluster, start_scheduler: StartScheduler
) -> None:
    """API server load: pods, slurmd pods and Nodes come from watches. Counted at kubesim while this
    test makes no read of its own (it waits on kubesim's in-process record of Bindings): binding
    makes no GET of the pod or its Node and no list; idle cycles afterwards make no request to
    the Kubernetes API at all."""
    k8s.sim.add_namespace("ml", SHARED)
    scheduler = start_scheduler()  # ready: its informers have listed
    before = k8s.sim.requests
    for name in ("a", "b", "c"):
        k8s.create_pod(name)
    k8s.wait_for("3 bindings", lambda: len(k8s.sim.bindings) == 3)
    during = k8s.sim.requests - before
    # kubesim counts by (verb, resource plural); a GET is a `fetch`.
    assert {(verb, res) for verb, res in during if verb in ("fetch", "list") and res in ("pods", "nodes")} == set()
    # The Scheduled Events are written beside the cycles (EVENT_WORKERS): news of the bindings,
    # not requests of the idle cycles after them.
    k8s.wait_for("3 Scheduled Events", lambda: (k8s.sim.requests - before)[("create", "events")] >= 3)
    cycles = scheduler.metric("sunk_scheduler_cycle_seconds_count")
    steady = k8s.sim.requests
    k8s.wait_for("10 more cycles", lambda: scheduler.metric("sunk_scheduler_cycle_seconds_count") >= cycles + 10)
    assert k8s.sim.requests - steady == {}  # not one request: no list, no get, no write


def test_each_namespace_runs_under_its_account_and_its_qos_caps_it(
    slurm: LocalSlurm, k8s: Cluster, start_scheduler: StartScheduler
) -> None:
    """Charged to each team, end to end (issue 35): pods of the stack's two inference namespaces
    get what the webhook writes for them (its admission on the stack's SUNK_WEBHOOK_NAMESPACES),
    the scheduler submits their placeholders under that account and QOS, and sacct charges each
    team's account beside a training job of another. Each QOS caps its namespace: team-a's
    GrpTRES cpu=2 and team-b's MaxTRESPerAccount cpu=1 leave the pods beyond them pending with
    Slurm's reason on the pod."""
    teams = parse_namespaces(namespaces_json(slurm.spec.inference.namespaces))
    training = slurm.jail.run(
        ["sbatch", "--parsable", "-A", "people", "-o", "/dev/null"], input=FILL, user="games:games"
    )
    assert training.returncode == 0, training.stderr
    training_job = int(training.stdout.strip().split(";")[0])
    for ns, count in (("team-a", 3), ("team-b", 2)):
        k8s.sim.add_namespace(ns)
        for i in range(count):
            pod: dict[str, Any] = {
                "metadata": {"name": f"serve-{i}", "namespace": ns},
                "spec": {"containers": [{"name": "main", "resources": {"requests": {"cpu": "1", "memory": "100Mi"}}}]},
            }
            patch = pod_patch(pod, teams[ns], "sunk-scheduler")
            assert isinstance(patch, list)
            k8s.api.create_namespaced_pod(ns, as_body(jsonpatch.apply_patch(pod, patch)), _preload_content=False)
    start_scheduler()
    caps = {"team-a": 2, "team-b": 1}  # one-CPU pods under GrpTRES cpu=2 and MaxTRESPerAccount cpu=1
    limits = {"team-a": "QOSGrpCpuLimit", "team-b": "MaxCpuPerAccount"}  # Slurm's pending reasons (26.05)

    def settled(ns: str) -> tuple[list[dict[str, Any]], list[str]] | None:
        """The namespace's bound pods and the messages of the others, once as many as its QOS
        allows are bound and every other one says it waits on its QOS's limit."""
        pods = [k8s.existing_pod(f"serve-{i}", ns) for i in range(3 if ns == "team-a" else 2)]
        bound = [p for p in pods if p["spec"].get("nodeName")]
        waiting = [k8s.condition(p["metadata"]["name"], ns) or {} for p in pods if not p["spec"].get("nodeName")]
        seen[ns] = (len(bound), [c.get("message") for c in waiting])
        # Slurm names the limit once its scheduler has looked at the job (a pending job's copy
        # is re-read within 15 s): until then the message has no reason.
        if len(bound) != caps[ns] or any(c.get("reason") != "SlurmJobPending" for c in waiting):
            return None
        if not all(f"({limits[ns]})" in str(c.get("message")) for c in waiting):
            return None
        return bound, [str(c["message"]) for c in waiting]

    seen: dict[str, tuple[int, list[Any]]] = {}
    try:
        outcome = {ns: k8s.wait_for(f"{ns}: {caps[ns]} bound, the rest pending", partial(settled, ns)) for ns in caps}
    except AssertionError as e:
        qos = slurm.run("sacctmgr", "-n", "-P", "show", "qos", "format=Name,GrpTRES,MaxTRESPA").stdout
        raise AssertionError(f"{e}; pods bound and messages: {seen}; QOS: {qos}") from None
    assert [len(waiting) for _, waiting in outcome.values()] == [1, 1]
    charged = {
        ns: {int(p["metadata"]["annotations"][keys.JOB_ID]) for p in bound} for ns, (bound, _) in outcome.items()
    }
    ids = ",".join(str(i) for i in [training_job, *charged["team-a"], *charged["team-b"]])
    out = slurm.run("sacct", "-X", "-n", "-P", "-a", "-o", "JobID,Account,QOS", "-j", ids, check=True).stdout
    rows = {int(r.split("|")[0]): tuple(r.split("|")[1:]) for r in out.splitlines() if r}
    assert rows[training_job][0] == "people"
    assert {rows[j] for j in charged["team-a"]} == {("serving", "serving")}
    assert {rows[j] for j in charged["team-b"]} == {("research", "research")}


def _tres(alloc: str) -> dict[str, int]:
    """sacct's AllocTRES (`billing=1,cpu=2,gres/gpu=1,mem=4G,node=1`) as counts; mem is left out."""
    pairs = (item.split("=", 1) for item in alloc.split(",") if item)
    return {k: int(v) for k, v in pairs if v.isdigit()}


def test_sreport_charges_each_team_gpu_and_cpu_hours_after_a_rollup(
    slurm: LocalSlurm, k8s: Cluster, start_scheduler: StartScheduler
) -> None:
    """Charged to each team in sreport (issue 35): a training job of `people` (sbatch, 2 GPUs) and
    a pod of team-a placed by sunk's scheduler (its placeholder job under the namespace's account,
    `serving`, 1 GPU) run side by side; once both have ended, slurmdbd rolls up the hour they ran
    in and `sreport cluster AccountUtilizationByUser` gives each account its CPU- and GPU-seconds.

    Real: slurmctld, slurmdbd, MariaDB, the job records, and slurmdbd's own rollup code (the one its
    hourly timer runs). Shifted: when the rollup runs. slurmdbd rolls up only complete hours, on its
    timer; here `sacctmgr -i rollup START END` (a command sacctmgr has but its man page does not
    list) asks slurmdbd to roll up at once, with END past the current hour, so the hour still under
    way is rolled up as if it had ended. What this can't model: the timer itself (a user sees the
    usage only after the hour ends), a job still running at the rollup (it would be charged up to
    END, and re-rolled later), and the re-roll of an hour whose late records reach slurmdbd after it.

    Before the rollup the hour has no usage in sreport (checked while that hour lasts). Every job
    the module ran is in the window, so each account's figures are compared with what sacct says
    its jobs held (AllocTRES x ElapsedRaw, summed): exact, whatever the tests before this one
    submitted."""
    teams = parse_namespaces(namespaces_json(slurm.spec.inference.namespaces))
    training = slurm.jail.run(
        ["sbatch", "--parsable", "-A", "people", "-p", "gpu", "--gres=gpu:2", "-o", "/dev/null"],
        input=FILL,
        user="games:games",
    )
    assert training.returncode == 0, training.stderr
    training_job = int(training.stdout.strip().split(";")[0])
    slurm.wait_job(training_job, {"RUNNING"})
    # team-a names no partition: its pods go to Slurm's default one (batch), which holds the GPU
    # nodes too. The pod asks for a GPU as a Deployment's would, in its limits.
    k8s.sim.add_namespace("team-a")
    resources = {"requests": {"cpu": "1", "memory": "100Mi"}, "limits": {"nvidia.com/gpu": "1"}}
    pod: dict[str, Any] = {
        "metadata": {"name": "serve", "namespace": "team-a"},
        "spec": {"containers": [{"name": "main", "resources": resources}]},
    }
    patch = pod_patch(pod, teams["team-a"], "sunk-scheduler")
    assert isinstance(patch, list), patch
    k8s.api.create_namespaced_pod("team-a", as_body(jsonpatch.apply_patch(pod, patch)), _preload_content=False)
    start_scheduler()
    pod_job = int(k8s.wait_bound("serve", "team-a")["metadata"]["annotations"][keys.JOB_ID])

    def ran(job: int) -> bool:
        """The job has run 2 s by slurmctld's count: sreport, in whole seconds, charges it more than 0."""
        shown = slurm.run("scontrol", "show", "job", "-o", str(job), check=True).stdout
        runtime = re.search(r" RunTime=(\d+):(\d+):(\d+) ", shown)
        assert runtime is not None, shown
        h, m, s = map(int, runtime.groups())
        return 3600 * h + 60 * m + s >= 2

    k8s.wait_for("both jobs to have run 2 s", lambda: ran(training_job) and ran(pod_job))
    k8s.delete_pod("serve", "team-a")  # the scheduler cancels its job
    slurm.run("scancel", str(training_job), check=True)
    for job in (training_job, pod_job):
        slurm.wait_accounted(job, {"CANCELLED"})

    # What each account's jobs held, by sacct: every record (-D: a requeued job's runs too).
    fields = "JobIDRaw,Account,AllocTRES,ElapsedRaw,Start,End"
    out = slurm.run("sacct", "-a", "-X", "-D", "-n", "-P", "-S", "2000-01-01", "-o", fields, check=True).stdout
    rows = [r.split("|") for r in out.splitlines() if r]
    charged = {int(r[0]): r[1] for r in rows}
    assert charged[training_job] == "people" and charged[pod_job] == "serving", rows
    assert all(r[5] != "Unknown" for r in rows), rows  # nothing left running
    held: dict[tuple[str, str], int] = Counter()
    for _, account, alloc, elapsed, *_ in rows:
        tres = _tres(alloc)
        for name in ("cpu", "gres/gpu"):
            held[account, name] += tres.get(name, 0) * int(elapsed)
    accounts = {account for account, _ in held}
    assert {"people", "serving"} <= accounts
    # The window: from the hour of the first start to the end of the hour of the last end.
    times = [datetime.fromisoformat(t) for r in rows for t in r[4:6] if t not in ("None", "Unknown")]
    start = min(times).replace(minute=0, second=0)
    end = max(times).replace(minute=0, second=0) + timedelta(hours=1)
    window = (start.isoformat(), end.isoformat())
    command = ["sreport", "-T", "cpu,gres/gpu", "-n", "-P", "-t", "Seconds", "cluster", "AccountUtilizationByUser"]
    last_hour = end - timedelta(hours=1)
    # Before the rollup, the hour the jobs ended in has no usage yet, while it lasts (slurmdbd's timer
    # rolls up an hour only once it is over; if it just ended, the timer may have got there first).
    if slurm.run("date", "+%Y-%m-%dT%H", check=True).stdout.strip() == last_hour.strftime("%Y-%m-%dT%H"):
        before = slurm.run(*command, f"start={last_hour.isoformat()}", f"end={window[1]}", check=True).stdout
        assert before.strip() == "", before
    rolled = slurm.run("sacctmgr", "-i", "rollup", *window, check=True)
    assert "SUCCESS" in rolled.stdout + rolled.stderr, rolled
    report = slurm.run(*command, f"start={window[0]}", f"end={window[1]}", check=True).stdout
    # Cluster|Account|Login|Proper Name|TRES Name|Used; an account's own row has no Login.
    used = {(r[1], r[4]): int(r[5]) for r in (line.split("|") for line in report.splitlines()) if r[2] == ""}
    for account in accounts - {"root"}:
        for name in ("cpu", "gres/gpu"):
            assert used[account, name] == held[account, name], (account, name, report, rows)
    # root is the top of the tree: everything, once.
    for name in ("cpu", "gres/gpu"):
        assert used["root", name] == sum(v for (_, n), v in held.items() if n == name), report
    # Each team's GPUs, apart: training's 2 GPUs in people, the pod's 1 in serving.
    assert used["people", "gres/gpu"] > 0 and used["serving", "gres/gpu"] > 0, report
    print(json.dumps({"window": window, "sreport": report.splitlines()}))
