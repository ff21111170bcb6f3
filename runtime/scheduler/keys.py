"""Annotation keys the scheduler reads and writes, and the marker that links a job to its pods.

Users set the request annotations on a pod, or on its Namespace as defaults for every pod in it.
The scheduler writes the binding annotations through the Binding object, so they land on the pod
in the same API call that sets spec.nodeName: after a crash, a bound pod says which Slurm job and
node it holds without any other state.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from sunk import keys

PREFIX = keys.PREFIX

# Requests (pod annotation, else Namespace annotation).
PARTITION = keys.PARTITION
QOS = keys.QOS
ACCOUNT = keys.ACCOUNT
TIME_LIMIT = keys.TIME_LIMIT
"""A Slurm time: minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS or UNLIMITED."""
NICE = keys.NICE
"""Slurm nice (-2147483645..2147483645); lower runs first."""
PRIORITY = keys.PRIORITY
"""Admin priority: a fixed job priority (the scheduler's Slurm user must be an operator)."""
GPU_TYPE = keys.GPU_TYPE
"""GRES type, e.g. h100: `--gres=gpu:h100:N` instead of `--gres=gpu:N`."""
GPUS = keys.GPUS
"""GPUs per pod counted by Slurm alone (1..64), instead of an `nvidia.com/gpu` request: the device
plugin then never picks devices for the pod, and the container gets exactly Slurm's GPUs through
NVIDIA_VISIBLE_DEVICES from `gpu-indices` (the NVIDIA container runtime's environment-variable
device selection). Setting both is refused."""
REQUEST_KEYS = (PARTITION, QOS, ACCOUNT, TIME_LIMIT, NICE, PRIORITY, GPU_TYPE, GPUS)

# All-or-nothing groups (pod annotations only).
GROUP = keys.GROUP
"""Pods of one namespace sharing this value are placed together by one Slurm job, or not at all."""
GROUP_SIZE = keys.GROUP_SIZE
"""How many pods the group has; the job is submitted once that many are pending."""

# Written by the scheduler at binding time.
JOB_ID = keys.JOB_ID
SLURM_NODE = keys.SLURM_NODE
JOB_START = keys.JOB_START
"""The job's start time (epoch seconds) when the pod was bound: a requeued job restarts later."""
GPU_INDICES = keys.GPU_INDICES
"""The GPU indices Slurm allocated to the job on this pod's node, e.g. "0,1" (GRES IDX, the
order of gres.conf's File= devices: /dev/nvidia0, /dev/nvidia1). Absent when the job has no GPUs."""

# The slurmd pods of the cluster carry this label; spec.hostname is the Slurm node name.
NODESET_LABEL = PREFIX + "nodeset"

_NAME = r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?"
_MARKER = re.compile(rf"^sunk-(pod|group):({_NAME})/({_NAME})(?:/([0-9A-Za-z-]+))?$")


@dataclass(frozen=True, order=True)
class Marker:
    """Job comment (and name) `sunk-pod:<ns>/<name>/<uid>` or `sunk-group:<ns>/<group>`.

    A pod's marker holds its uid, so a pod recreated under the same name gets a new job and the
    old one is an orphan. A group's marker has no uid: replacement members join the group.
    """

    kind: Literal["pod", "group"]
    namespace: str
    name: str
    uid: str = ""

    @property
    def text(self) -> str:
        if self.kind == "pod":
            return f"sunk-pod:{self.namespace}/{self.name}/{self.uid}"
        return f"sunk-group:{self.namespace}/{self.name}"

    @classmethod
    def parse(cls, text: str) -> Marker | None:
        m = _MARKER.match(text or "")
        if m is None:
            return None
        kind, ns, name, uid = m.group(1), m.group(2), m.group(4), m.group(6)
        if (kind == "pod") != (uid is not None):
            return None
        return cls("pod" if kind == "pod" else "group", ns, name, uid or "")


def valid_group_name(name: str) -> bool:
    """Group names are DNS labels, so the marker stays parseable."""
    return re.fullmatch(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", name) is not None
