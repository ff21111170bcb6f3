"""The Slurm node <-> pod mapping, kept in the Slurm node's `extra` field.

slurmctld saves `extra` in its state, so the mapping survives restarts of slurmctld, slurmrestd
and of the controllers, and it tells a Slurm node sunk manages (it names a pod) from one it does
not. `extra` holds a JSON object so other writers (and Slurm's extra_constraints, which match
JSON keys) can share it: only the `sunk.dev/...` keys are ours; any other key is kept as is."""

from __future__ import annotations

import json
from dataclasses import dataclass

from sunk import keys

_TEXT_KEY = "text"  # where a non-JSON `extra` someone else wrote is kept


@dataclass(frozen=True, order=True)
class PodRef:
    namespace: str
    name: str
    uid: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


def _decode(extra: str) -> dict[str, object]:
    if not extra.strip():
        return {}
    try:
        data = json.loads(extra)
    except ValueError:
        return {_TEXT_KEY: extra}
    return data if isinstance(data, dict) else {_TEXT_KEY: extra}


def read_pod_ref(extra: str) -> PodRef | None:
    data = _decode(extra)
    # Nodes written before the single key prefix carry the legacy keys until the syncer rewrites them.
    pod = data.get(keys.POD_REF, data.get(keys.LEGACY[keys.POD_REF]))
    uid = data.get(keys.POD_REF_UID, data.get(keys.LEGACY[keys.POD_REF_UID]))
    if not isinstance(pod, str) or "/" not in pod:
        return None
    namespace, _, name = pod.partition("/")
    return PodRef(namespace, name, uid if isinstance(uid, str) else "")


def write_pod_ref(extra: str, ref: PodRef | None) -> str:
    """`extra` with our keys set to `ref` (removed for None), other keys untouched."""
    data = _decode(extra)
    for key in (keys.POD_REF, keys.POD_REF_UID):
        data.pop(key, None)
        data.pop(keys.LEGACY[key], None)
    if ref is not None:
        data[keys.POD_REF] = str(ref)
        data[keys.POD_REF_UID] = ref.uid
    return json.dumps(data, sort_keys=True, separators=(",", ":")) if data else ""
