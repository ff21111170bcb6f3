"""The marker that links a Slurm job to its pods, and which annotations (sunk.keys) request a job.

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

REQUEST_KEYS = (
    keys.PARTITION,
    keys.QOS,
    keys.ACCOUNT,
    keys.TIME_LIMIT,
    keys.NICE,
    keys.PRIORITY,
    keys.GPU_TYPE,
    keys.GPUS,
)
"""The annotations a pod (or, as defaults for every pod in it, its Namespace) requests a job with."""

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
