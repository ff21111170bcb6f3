"""Gangs from the workloads users run, recognised from what their controllers set on the pods, without
a `slurm.sunk.dev/group` of their own. Pure: the pod's metadata (and the owner object the caller read)
in, the group annotations out.

- LeaderWorkerSet: one group per group key, sized by the size annotation the pods carry, allocated
  whole at its first member (LeaderReady creates the workers only once the leader runs).
  Subgroups (LWS's subGroupPolicy: the subgroup-index, subgroup-key and subgroup-size keys) are
  nothing to Slurm: the whole group stays one gang. A subgroup is a part of one model replica
  (a tensor-parallel shard, a slice), which serves only when every part runs, so all-or-nothing
  holds for the group; sunk asks Slurm for the group as one job in one block or leaf switch, which
  keeps each subgroup in that domain too. The one subgroup key that asks something of placement,
  subgroup-exclusive-topology (each subgroup alone in its own topology domain, through pod
  affinity that sunk's scheduler does not read), can't be honoured by one job in one domain: such a
  group is refused, naming the annotation, rather than placed against it.
- Indexed Job with parallelism = completions (every index runs at once): one group per Job, its
  size the Job's completions. A pod does not carry the Job's size, so the caller reads the Job
  (batch/v1: always served). Any other Job is placed pod by pod: its pods do not all run together.
- JobSet: one group per JobSet and restart attempt, its size the pods of every replicated Job
  (replicas x pods per Job), read from the JobSet (jobset.x-k8s.io; a missing CRD reads as no
  owner, and the pods are placed one by one). A restart recreates every Job under attempt n+1:
  pods of attempt n still terminating keep their own group name and never join the new gang.
  Exclusive placement (`alpha.jobset.sigs.k8s.io/exclusive-topology`) changes nothing here: the
  gang is still the whole attempt, one Slurm job; sunk places it in one block (or leaf switch)
  when the topology has them, which holds every child Job in one domain, and JobSet's own
  affinity terms are not read (Slurm chooses the nodes).
  With startupPolicy InOrder or dependsOn the controller creates later replicated Jobs only once
  earlier ones are ready: the group is allocated whole at its first pod (as for LeaderReady), so
  its replicated Jobs must ask for the same GPUs; a JobSet that starts in order with mixed GPU
  counts is refused, naming them.

- Kubernetes' own PodGroup (scheduling.k8s.io/v1alpha2, served behind the GenericWorkload feature
  gate): a pod that names one in `spec.schedulingGroup.podGroupName` is one group per PodGroup
  (named by its uid), sized by its gang policy's minCount and waiting for that many pods. A basic
  policy, or a minCount below 2, is no gang: the pods are placed one by one. The pod carries only
  the name, so the caller reads the PodGroup where the API server serves the API (and refuses the
  pod, for its controller to retry, while the PodGroup does not exist yet: the API lets a pod name
  a group before it is created, and a pod placed alone would split the gang). A pod's own
  slurm.sunk.dev/group wins over it; it wins over every other controller's grouping.

Constants, as the projects define them:
- Kubernetes v1.36.3 (in sunk/keys.py: JOB_COMPLETION_INDEX, JOB_NAME, CONTROLLER_UID); the Job
  controller sets the index as annotation and label and the hostname `<job>-<index>`
  (pkg/controller/job/job_controller.go:1942-1944).
- JobSet v0.12.0, api/jobset/v1alpha2/jobset_types.go: JobSetNameKey (24), JobSetUIDKey (25),
  ExclusiveKey (48), ReplicatedJob.Template (330), Replicas (335), DependsOn (353), InOrder (545);
  pkg/constants/constants.go: RestartsKey (34); the controller sets each on the Job and its pod
  template as label and annotation (pkg/controllers/jobset_controller.go:1014, labelAndAnnotateObject).
- Kubernetes v1.36.3 (k8s.io/api v0.36.3): core/v1/types.go: PodSpec.SchedulingGroup (4499),
  PodSchedulingGroup.PodGroupName (4647); scheduling/v1alpha2/register.go: the group and version
  (26, 29); types.go: PodGroupSpec.SchedulingPolicy (374), PodGroupSchedulingPolicy.Basic and
  .Gang (218, 226), GangSchedulingPolicy.MinCount (247).
- LeaderWorkerSet v0.10.0 (commit 2161f38f), api/leaderworkerset/v1/leaderworkerset_types.go:
  SizeAnnotationKey (49), GroupUniqueHashLabelKey (57), SubGroupExclusiveKeyAnnotationKey (33),
  SubGroupIndexLabelKey (79), SubGroupSizeAnnotationKey (83), SubGroupUniqueHashLabelKey (86); the
  controllers copy subgroup-exclusive-topology from the LeaderWorkerSet onto the leader's and the
  workers' templates (leaderworkerset_controller.go:806-807, pod_controller.go:426-427). Both are on every pod of a group: the size
  from the leader's and the workers' StatefulSet templates (pkg/controllers/leaderworkerset_controller.go:799,
  pod_controller.go:416), the group key on the leader from LWS's own pod webhook
  (pkg/webhooks/pod_webhook.go:116-118) and on the workers from their template
  (pod_controller.go:405-410). The API server calls mutating webhook configurations in name order,
  and `lws-mutating-webhook-configuration` sorts before `sunk-<namespace>-<cluster>-webhook` today;
  a leader that reaches sunk first (another configuration name, a reinvocation) carries no key
  yet. LWS's webhook takes a pod for a leader when it has the set-name label (SetNameLabelKey, 37)
  and worker-index "0" (WorkerIndexLabelKey, 45; pkg/utils/pod/pod_utils.go:53-54), and gives it
  the key sha1-hex of "<namespace>/<pod name>" (pod_webhook.go:88, 101, 117, 180-181;
  pkg/utils/utils.go:39-42) unless the label is already there: sunk computes the same for such a
  leader, so the group is the same whichever webhook runs first, and a key the pod carries is
  always the one used.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from sunk import keys

JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
JOBSET_UID = "jobset.sigs.k8s.io/jobset-uid"
JOBSET_RESTART = "jobset.sigs.k8s.io/restart-attempt"
JOBSET_EXCLUSIVE = "alpha.jobset.sigs.k8s.io/exclusive-topology"
JOBSET_API = ("jobset.x-k8s.io", "v1alpha2", "jobsets")
"""group, version, plural of the JobSet CRD (api/jobset/v1alpha2/groupversion_info.go:27)."""
PODGROUP_API = ("scheduling.k8s.io", "v1alpha2", "podgroups")
"""group, version, plural of Kubernetes' PodGroup (k8s.io/api v0.36.3 scheduling/v1alpha2/register.go:26, 29)."""
LWS_GROUP_KEY = "leaderworkerset.sigs.k8s.io/group-key"
LWS_SIZE = "leaderworkerset.sigs.k8s.io/size"
LWS_SET_NAME = "leaderworkerset.sigs.k8s.io/name"
LWS_WORKER_INDEX = "leaderworkerset.sigs.k8s.io/worker-index"
LWS_SUBGROUP_EXCLUSIVE = "leaderworkerset.sigs.k8s.io/subgroup-exclusive-topology"
FIRST_MEMBER = "first-member"
MAX_SIZE = 100_000
"""What the scheduler takes in slurm.sunk.dev/group-size (runtime/scheduler/plan.py)."""


@dataclass(frozen=True)
class Owner:
    """The object the webhook reads to size a pod's gang."""

    kind: Literal["Job", "JobSet", "PodGroup"]
    name: str


@dataclass(frozen=True)
class GangRefusal:
    path: str
    message: str


Gang = dict[str, str]


def pod_group_name(spec: Mapping[str, Any]) -> str:
    """The PodGroup a pod's spec names (spec.schedulingGroup.podGroupName), or ""."""
    group = spec.get("schedulingGroup") or {}
    name = group.get("podGroupName") if isinstance(group, Mapping) else None
    return name if isinstance(name, str) else ""


def owner_to_read(meta: Mapping[str, Any], spec: Mapping[str, Any]) -> Owner | None:
    """The object whose spec sizes this pod's gang, or None (not a gang, or one the pod sizes itself)."""
    labels: Mapping[str, str] = meta.get("labels") or {}
    annotations: Mapping[str, str] = meta.get("annotations") or {}
    if annotations.get(keys.GROUP):
        return None
    if name := pod_group_name(spec):
        return Owner("PodGroup", name)
    if lws_group_key(meta):
        return None
    if labels.get(JOBSET_NAME) and labels.get(JOBSET_RESTART, "").isdigit():
        return Owner("JobSet", labels[JOBSET_NAME])
    if keys.JOB_COMPLETION_INDEX in annotations or keys.JOB_COMPLETION_INDEX in labels:
        for ref in meta.get("ownerReferences") or []:
            if ref.get("controller") and ref.get("kind") == "Job" and ref.get("apiVersion") == "batch/v1":
                return Owner("Job", str(ref.get("name", "")))
    return None


def lws_group_key(meta: Mapping[str, Any]) -> str:
    """The pod's LeaderWorkerSet group key: its group-key label where it has one; for a leader
    without it yet, the key LWS's own pod webhook gives it (see the module docstring); else ""."""
    labels: Mapping[str, str] = meta.get("labels") or {}
    if key := labels.get(LWS_GROUP_KEY, ""):
        return key
    namespace, name = meta.get("namespace") or "", meta.get("name") or ""
    if LWS_SET_NAME not in labels or labels.get(LWS_WORKER_INDEX) != "0" or not namespace or not name:
        return ""
    return hashlib.sha1(f"{namespace}/{name}".encode(), usedforsecurity=False).hexdigest()


def lws_gang(meta: Mapping[str, Any]) -> Gang | GangRefusal:
    """A LeaderWorkerSet group as one sunk group, allocated whole at its first member, its
    subgroups included. A pod's own slurm.sunk.dev/group wins."""
    annotations: Mapping[str, str] = meta.get("annotations") or {}
    key, size = lws_group_key(meta), annotations.get(LWS_SIZE, "").strip()
    if annotations.get(keys.GROUP) or not key or not size.isdigit() or int(size) < 2:
        return {}
    if topology := annotations.get(LWS_SUBGROUP_EXCLUSIVE, "").strip():
        return GangRefusal(
            f"metadata.annotations[{LWS_SUBGROUP_EXCLUSIVE}]",
            f"{topology!r}: each subgroup alone in its own topology domain can't be honoured: sunk places the "
            "whole LeaderWorkerSet group as one Slurm job in one block or leaf switch; drop the annotation "
            "from the LeaderWorkerSet (its subgroups then share the group's domain)",
        )
    # The group key is a hex digest; the group name must stay a DNS label (the job's marker).
    return _gang("lws-" + _label(key)[:40], int(size), first_member=True)


def _label(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


def _gang(name: str, size: int, *, first_member: bool) -> Gang:
    gang = {keys.GROUP: name, keys.GROUP_SIZE: str(size)}
    if first_member:
        gang[keys.GROUP_START] = FIRST_MEMBER
    return gang


def _same_owner(meta: Mapping[str, Any], owner: Mapping[str, Any], label: str) -> GangRefusal | None:
    """The pod's owner uid against the object read: a Job or JobSet deleted and created again under
    the same name between the pod's creation and the read is not its owner."""
    uid = (owner.get("metadata") or {}).get("uid", "")
    mine = (meta.get("labels") or {}).get(label, "")
    if mine and uid and mine != uid:
        return GangRefusal(
            f"metadata.labels[{label}]",
            f"{mine} is not the uid of the {owner.get('kind', 'owner')} read ({uid}): it was replaced; "
            "its controller creates the pod again",
        )
    return None


def job_gang(meta: Mapping[str, Any], job: Mapping[str, Any]) -> Gang | GangRefusal:
    """An indexed Job whose indexes all run at once (parallelism = completions, 2 or more): one
    group per Job, named by its uid (a Job created again under the same name is a new gang)."""
    refused = _same_owner(meta, job, keys.CONTROLLER_UID)
    if refused is not None:
        return refused
    spec = job.get("spec") or {}
    completions, parallelism = spec.get("completions"), spec.get("parallelism", 1)
    if spec.get("completionMode") != "Indexed" or not isinstance(completions, int) or parallelism != completions:
        return {}
    if not 2 <= completions <= MAX_SIZE:
        return {}
    uid = _label(str((job.get("metadata") or {}).get("uid", "")))
    return _gang(f"job-{uid}"[:63], completions, first_member=False) if uid else {}


def _pods_per_job(job_spec: Mapping[str, Any]) -> int:
    """Pods one child Job runs at once: its parallelism (default 1), capped by its completions."""
    parallelism = job_spec.get("parallelism", 1)
    completions = job_spec.get("completions")
    return int(min(parallelism, completions) if isinstance(completions, int) else parallelism)


def _mixed_in_order(
    jobset: Mapping[str, Any], gpus_of: Callable[[Mapping[str, Any]], int | None]
) -> GangRefusal | None:
    """A JobSet started in order whose replicated Jobs ask for different GPUs: its gang would be
    shaped like its first pod alone."""
    replicated = (jobset.get("spec") or {}).get("replicatedJobs") or []
    gpus = {
        r.get("name", ""): gpus_of(((r.get("template") or {}).get("spec") or {}).get("template") or {})
        for r in replicated
    }
    if len({g for g in gpus.values() if g is not None}) < 2:
        return None
    name = (jobset.get("metadata") or {}).get("name", "")
    return GangRefusal(
        f"metadata.labels[{JOBSET_NAME}]",
        f"JobSet {name} starts its replicated Jobs in order (startupPolicy InOrder or dependsOn) and they ask "
        f"for different GPUs ({', '.join(f'{k}: {v}' for k, v in sorted(gpus.items()))}): sunk allocates the "
        "whole gang when its first pod appears, shaped like that pod; give every replicated Job the same GPU "
        "request, or start them together (no startupPolicy, no dependsOn)",
    )


def jobset_gang(
    meta: Mapping[str, Any], jobset: Mapping[str, Any], gpus_of: Callable[[Mapping[str, Any]], int | None]
) -> Gang | GangRefusal:
    """One group per JobSet and restart attempt (see the module docstring). `gpus_of` gives a pod
    template's GPU count (None when the webhook would refuse it anyway)."""
    refused = _same_owner(meta, jobset, JOBSET_UID)
    if refused is not None:
        return refused
    spec = jobset.get("spec") or {}
    replicated = spec.get("replicatedJobs") or []
    sizes = [int(r.get("replicas", 1)) * _pods_per_job((r.get("template") or {}).get("spec") or {}) for r in replicated]
    size = sum(sizes)
    if not 2 <= size <= MAX_SIZE:
        return {}
    in_order = (spec.get("startupPolicy") or {}).get("startupPolicyOrder") == "InOrder" or any(
        r.get("dependsOn") for r in replicated
    )
    if in_order and (refused := _mixed_in_order(jobset, gpus_of)) is not None:
        return refused
    uid = _label(str((jobset.get("metadata") or {}).get("uid", "")))
    attempt = (meta.get("labels") or {}).get(JOBSET_RESTART, "0")
    if not uid:
        return {}
    return _gang(f"js-{uid[:40]}-{attempt}", size, first_member=in_order)


def podgroup_gang(meta: Mapping[str, Any], podgroup: Mapping[str, Any]) -> Gang:
    """A PodGroup with a gang policy: one group per PodGroup, named by its uid (one created again
    under the same name is a new gang), sized by its minCount; its pods are placed when that many
    are there (the gang policy's own all-or-nothing). A basic policy is no gang."""
    policy = (podgroup.get("spec") or {}).get("schedulingPolicy") or {}
    gang = policy.get("gang") if isinstance(policy, Mapping) else None
    count = gang.get("minCount") if isinstance(gang, Mapping) else None
    uid = _label(str((podgroup.get("metadata") or {}).get("uid", "")))
    if not isinstance(count, int) or not 2 <= count <= MAX_SIZE or not uid:
        return {}
    return _gang(f"pg-{uid}"[:63], count, first_member=False)
