"""Pod requests -> the placeholder job Slurm is asked for, and the v0.0.42 submit body. Pure.

One job per pod (nodes=1) or per group (nodes=N, one task per node): a single allocation is
all-or-nothing in Slurm itself, and preempting it preempts the whole group. A heterogeneous job
would allow mixed shapes but Slurm cannot preempt parts of one and schedules its components in
lockstep anyway; a job array is N independent jobs, which is exactly not all-or-nothing. Members of
a group therefore share one shape: the largest request of any member, per resource. A gang of
mixed shapes (a CPU-only driver beside GPU workers) asks Slurm for its GPU workers' GPUs on every
node, the driver's included: Slurm gives one job one GRES count per node. The driver never sees
them: it is bound with no GPU indices, and the webhook gave its containers
NVIDIA_VISIBLE_DEVICES=void; those GPUs stay idle for the gang's life, and no one else gets them.

A gang (nodes > 1) is placed close together, from the topology the stack renders (`Topology`):
- block: Slurm's block plugin already keeps a job of N nodes inside the smallest block level that
  holds N (eval_nodes_block.c, _get_block_level, at slurm-26-05-3-1); a gang larger than the
  largest block would be spread over the whole topology instead, so it is refused before
  submitting (`gang_refusal`);
- tree: `required_switches` 1 with `wait_for_switch`: one leaf switch if Slurm finds one within
  SWITCH_WAIT seconds, else any nodes (Slurm caps the wait at max_switch_wait, 300 s by default).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from sunk import keys
from sunk.spec.nodeset import SHARED_FEATURE

from ..slurmrest.models import JobSubmit
from .marker import REQUEST_KEYS, Marker
from .model import PodView

MIB = 2**20
PLACEHOLDER_SCRIPT = (
    "#!/bin/bash\n"
    "# sunk placeholder: holds this allocation for a Kubernetes pod until the scheduler cancels it.\n"
    "exec sleep infinity\n"
)
_TIME = re.compile(r"^(?:(\d+)-)?(\d+)(?::([0-5]?\d))?(?::([0-5]?\d))?$")


@dataclass(frozen=True)
class JobRequest:
    nodes: int
    cpus_per_task: int
    memory_mib: int
    gpus: int = 0
    gpu_type: str | None = None
    partition: str | None = None
    qos: str | None = None
    account: str | None = None
    time_limit: int | None = None
    """Minutes; None leaves the partition's DefaultTime (else MaxTime)."""
    nice: int | None = None
    priority: int | None = None
    exclude: tuple[str, ...] = ()
    """Slurm nodes to avoid (--exclude): where an earlier placement did not fit the kubelet."""
    switches: int | None = None
    """--switches: the most leaf switches the job may span (topology/tree), waiting up to
    `switch_wait` seconds for them."""
    switch_wait: int | None = None
    constraint: str = SHARED_FEATURE
    """--constraint: only nodes of shared NodeSets, where slurmd leaves room for pods. An exclusive
    NodeSet's slurmd pod requests the whole node, so no pod would ever be admitted there."""


SWITCH_WAIT = 300
"""Seconds a gang waits for one leaf switch before Slurm places it on any nodes (Slurm's own
max_switch_wait default: a longer wait is cut to it anyway)."""


@dataclass(frozen=True)
class Topology:
    """The network topology the stack renders, as the scheduler's settings carry it."""

    kind: str = "none"
    """none, tree or block (spec topology.plugin, or the default of `topologies`)."""
    block_nodes: int = 0
    """Nodes of the largest block (the last of BlockSizes); 0: not known, nothing refused."""


NO_TOPOLOGY = Topology()


@dataclass(frozen=True)
class Invalid:
    """A request Slurm would never run: reported once, not retried until the pod changes."""

    reason: str
    message: str


def parse_slurm_time(text: str) -> int:
    """Slurm time string -> minutes, rounded up; UNLIMITED/INFINITE -> -1."""
    text = text.strip()
    if text.upper() in ("UNLIMITED", "INFINITE"):
        return -1
    m = _TIME.match(text)
    if m is None:
        raise ValueError(f"{text!r} is not a Slurm time (minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS)")
    days, a, b, c = m.group(1), int(m.group(2)), m.group(3), m.group(4)
    if days is None:
        # minutes | minutes:seconds | hours:minutes:seconds
        if b is None:
            seconds = a * 60
        elif c is None:
            seconds = a * 60 + int(b)
        else:
            seconds = a * 3600 + int(b) * 60 + int(c)
    else:
        # days-hours[:minutes[:seconds]]
        seconds = int(days) * 86400 + a * 3600 + int(b or 0) * 60 + int(c or 0)
    return max(1, math.ceil(seconds / 60))


def _int(text: str, key: str, lo: int, hi: int) -> int:
    try:
        value = int(text.strip())
    except ValueError:
        raise ValueError(f"{key}: {text!r} is not an integer") from None
    if not lo <= value <= hi:
        raise ValueError(f"{key}: {value} is outside {lo}..{hi}")
    return value


def _settings(pod: PodView, defaults: Mapping[str, str]) -> dict[str, str]:
    """slurm.sunk.dev/* request annotations: the pod's, else its Namespace's."""
    return {k: (pod.annotations.get(k) or defaults.get(k, "")).strip() for k in REQUEST_KEYS}


def gang_refusal(nodes: int, topology: Topology) -> Invalid | None:
    """A gang Slurm could not place in one block: larger than the largest block."""
    if topology.kind == "block" and topology.block_nodes and nodes > topology.block_nodes:
        return Invalid(
            "GangRefused",
            f"the gang needs {nodes} nodes and the largest block of the topology holds {topology.block_nodes}: a gang "
            "is placed inside one block, so this one never runs; make it smaller (nothing behind it waits for it)",
        )
    return None


def build_request(
    pods: Sequence[PodView],
    defaults: Mapping[str, str],
    *,
    nodes: int | None = None,
    topology: Topology = NO_TOPOLOGY,
) -> JobRequest | Invalid:
    """The job for one pod, or for the members of a group (complete, or those there so far of a
    group that starts at its first member: `nodes` its size): the members' one set of request
    annotations, the numbers read from them, the names checked, then the job sized from the pods'
    resources."""
    members = sorted(pods, key=lambda p: p.name)
    s = _group_settings(members, defaults)
    if isinstance(s, Invalid):
        return s
    numbers = _numbers(s)
    if isinstance(numbers, Invalid):
        return numbers
    time_limit, nice, priority, annotated_gpus = numbers
    refused = _refused_names(s, annotated_gpus, members)
    if refused is not None:
        return refused
    res = [p.resources for p in members]
    count = max(nodes or 0, len(members))
    if (refused := gang_refusal(count, topology)) is not None:
        return refused
    tree = topology.kind == "tree" and count > 1
    return JobRequest(
        nodes=count,
        # Slurm allocates whole CPUs; a pod without a CPU request still takes one.
        cpus_per_task=max(1, max(math.ceil(r.cpu_millis / 1000) for r in res)),
        # --mem=0 would mean "the whole node" to Slurm; a pod without a request reserves 1 MiB.
        memory_mib=max(1, max(math.ceil(r.memory_bytes / MIB) for r in res)),
        gpus=annotated_gpus or max(r.gpus for r in res),
        gpu_type=s[keys.GPU_TYPE] or None,
        partition=s[keys.PARTITION] or None,
        qos=s[keys.QOS] or None,
        account=s[keys.ACCOUNT] or None,
        time_limit=time_limit,
        nice=nice,
        priority=priority,
        switches=1 if tree else None,
        switch_wait=SWITCH_WAIT if tree else None,
    )


def _group_settings(members: Sequence[PodView], defaults: Mapping[str, str]) -> dict[str, str] | Invalid:
    """The request annotations every member carries alike, once every member's resources read."""
    bad = [p for p in members if p.resource_error]
    if bad:
        return Invalid("InvalidResources", f"pod {bad[0].name}: {bad[0].resource_error}")
    settings = [_settings(p, defaults) for p in members]
    # GPUs may differ (a CPU-only driver beside GPU workers): the job asks each node for the most.
    alike = [{k: v for k, v in s.items() if k != keys.GPUS} for s in settings]
    if any(a != alike[0] for a in alike):
        return Invalid("GroupMismatch", "members of a group must carry the same slurm.sunk.dev/* request annotations")
    asked = [s[keys.GPUS] for s in settings if s[keys.GPUS]]
    unread = [g for g in asked if not g.isdigit()]
    most = unread[0] if unread else max(asked, key=int, default="")
    return {**settings[0], keys.GPUS: most}


def _numbers(s: Mapping[str, str]) -> tuple[int | None, int | None, int | None, int] | Invalid:
    """(time limit, nice, priority, GPUs) from the annotations, each within what Slurm takes."""
    try:
        time_limit = parse_slurm_time(s[keys.TIME_LIMIT]) if s[keys.TIME_LIMIT] else None
        if time_limit == -1:
            # An infinite limit on a partition with a MaxTime pends forever (PartitionTimeLimit,
            # measured 2026-11): "as long as allowed" is the partition's limit, i.e. no limit given.
            time_limit = None
        nice = _int(s[keys.NICE], keys.NICE, -2147483645, 2147483645) if s[keys.NICE] else None
        priority = _int(s[keys.PRIORITY], keys.PRIORITY, 1, 4294967293) if s[keys.PRIORITY] else None
        # 64: more GPUs than any node has is refused by Slurm anyway; bound the text here.
        annotated_gpus = _int(s[keys.GPUS], keys.GPUS, 1, 64) if s[keys.GPUS] else 0
    except ValueError as e:
        return Invalid("InvalidAnnotation", str(e))
    return time_limit, nice, priority, annotated_gpus


def _refused_names(s: Mapping[str, str], annotated_gpus: int, members: Sequence[PodView]) -> Invalid | None:
    """GPUs asked for twice, or a partition, QOS, account or GPU type that is no Slurm name."""
    if annotated_gpus and any(p.resources.gpus for p in members):
        return Invalid(
            "InvalidAnnotation",
            f"{keys.GPUS} and an nvidia.com/gpu request are both set: use one (the annotation keeps the "
            "device plugin out, so the container sees exactly Slurm's GPUs)",
        )
    for key in (keys.PARTITION, keys.QOS, keys.ACCOUNT, keys.GPU_TYPE):
        if s[key] and not re.fullmatch(r"[A-Za-z0-9_.-]+", s[key]):
            return Invalid("InvalidAnnotation", f"{key}: {s[key]!r} is not a Slurm name")
    return None


def spec_hash(outcome: JobRequest | Invalid, pods: Sequence[PodView]) -> str:
    """Identifies one attempt: the same pods asking for the same job. Failures are remembered by it."""
    doc = {"outcome": asdict(outcome), "kind": type(outcome).__name__, "uids": sorted(p.uid for p in pods)}
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:16]


def placeholder_job(request: JobRequest, marker: Marker, *, cwd: str = "/tmp") -> JobSubmit:
    """The placeholder job for a request, as the shared client submits it (plain numbers; the
    client wraps them for the wire)."""
    job: dict[str, Any] = {
        "name": marker.text,
        "comment": marker.text,
        "script": PLACEHOLDER_SCRIPT,
        # slurmrestd rejects a submit without an environment (error 2019).
        "environment": ["PATH=/usr/bin:/bin"],
        "current_working_directory": cwd,
        "standard_output": "/dev/null",
        "standard_error": "/dev/null",
        "nodes": str(request.nodes),
        "tasks": request.nodes,
        "tasks_per_node": 1,
        "cpus_per_task": request.cpus_per_task,
        "memory_per_node": request.memory_mib,
        # A preempted placeholder must end (and its pod be evicted), not wait in the queue for a pod
        # that is gone: with requeue off, PreemptMode=REQUEUE cancels it instead.
        "requeue": False,
        "time_limit": request.time_limit,
        "priority": request.priority,
        "nice": request.nice,
        "excluded_nodes": list(request.exclude) or None,
        "constraints": request.constraint or None,
        "required_switches": request.switches,
        "wait_for_switch": request.switch_wait,
    }
    if request.gpus:
        kind = f"gpu:{request.gpu_type}" if request.gpu_type else "gpu"
        job["tres_per_node"] = f"gres/{kind}:{request.gpus}"
    for field in ("partition", "qos", "account"):
        job[field] = getattr(request, field) or None
    return JobSubmit(**job)


def submit_body(request: JobRequest, marker: Marker, *, cwd: str = "/tmp") -> dict[str, Any]:
    """POST /slurm/v0.0.42/job/submit body for the placeholder job (what the client sends)."""
    return placeholder_job(request, marker, cwd=cwd).body()
