"""A pod of an opted-in namespace -> the JSONPatch that hands it to sunk's scheduler, or the reason
it is refused. Pure: AdmissionReview v1 in, AdmissionReview v1 out, no I/O, no clock.

What a pod gets (docs/how-to/inference.md):
- `spec.schedulerName` sunk's, unless it chose a scheduler of its own (neither empty nor
  default-scheduler: the API server has already defaulted an unset one to default-scheduler, so
  the two cannot be told apart and both mean "no choice"). Such a pod is left to its scheduler and
  its patch is empty; the shared Nodes' taint keeps it off them.
- `slurm.sunk.dev/account` the namespace's account (a pod naming another is refused: the team is
  charged for what it uses), and the namespace's partition and QOS where the pod names none.
- its `nvidia.com/gpu` request turned into Slurm's: removed from requests and limits (the device
  plugin then never picks devices for it), `slurm.sunk.dev/gpus: N` on the pod, and on each
  container that asked for GPUs NVIDIA_VISIBLE_DEVICES read from `slurm.sunk.dev/gpu-indices`,
  which the scheduler's Binding writes with the GPUs Slurm allocated. Every other container gets
  NVIDIA_VISIBLE_DEVICES=void: a CUDA image sets `all` in its own environment, and on a shared
  Node a CPU-only container would otherwise see every GPU, those Slurm gave to jobs included.
- the pods of a LeaderWorkerSet group, an indexed Job, a JobSet attempt or a PodGroup, one sunk group
  (`slurm.sunk.dev/group`, `group-size`; runtime/webhook/gangs.py): placed all together or not at all.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sunk import keys

from . import gangs

GPU = "nvidia.com/gpu"
VISIBLE = "NVIDIA_VISIBLE_DEVICES"
NO_GPU = "void"
"""The NVIDIA container runtime's value for "no GPU and no driver files"."""
MAX_GPUS = 64
"""What the scheduler takes in slurm.sunk.dev/gpus (runtime/scheduler/request.py)."""
UNCHANGED_SCHEDULERS = frozenset({"", "default-scheduler"})
"""schedulerName values that mean the pod chose none."""


@dataclass(frozen=True)
class NamespaceDefaults:
    """What the stack says of one opted-in namespace (sunk.spec.inference)."""

    account: str
    partition: str | None = None
    qos: str | None = None


@dataclass(frozen=True)
class Refusal:
    """Why a pod is refused: the field at fault and what would be valid."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


Patch = list[dict[str, Any]]
Owned = Mapping[str, Any] | Refusal | None
"""The owner object read for a pod's gang; a Refusal when it could not be read."""


def _pointer(*parts: str | int) -> str:
    """An RFC 6901 JSON Pointer: '~' and '/' in a key escaped."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def _containers(spec: Mapping[str, Any]) -> list[tuple[str, int, Mapping[str, Any], bool]]:
    """(list, index, container, runs beside the others): app containers and native sidecars
    (init containers with restartPolicy Always) run together; plain init containers run alone,
    one after another, before them."""
    out = []
    for field in ("initContainers", "containers"):
        for i, c in enumerate(spec.get(field) or []):
            beside = field == "containers" or c.get("restartPolicy") == "Always"
            out.append((field, i, c, beside))
    return out


def _gpu_count(field: str, i: int, c: Mapping[str, Any]) -> int | Refusal:
    """The container's nvidia.com/gpu, the same in requests and limits, as a whole number; other
    nvidia.com resources (MIG slices, shared GPUs) cannot be turned into a Slurm GPU request."""
    res = c.get("resources") or {}
    values: dict[str, Any] = {}
    for part in ("limits", "requests"):
        for name, value in (res.get(part) or {}).items():
            path = f"spec.{field}[{i}].resources.{part}[{name}]"
            if name.startswith("nvidia.com/") and name != GPU:
                return Refusal(
                    path,
                    "Slurm hands out whole GPUs on the shared pool; a MIG slice or a shared GPU cannot be "
                    f"turned into a Slurm request: ask for {GPU} (or run the pod outside the opted-in namespaces)",
                )
            if name == GPU:
                values[path] = value
    counts = set()
    for path, value in values.items():
        text = str(value).strip()
        if not text.isdigit():
            return Refusal(path, f"{value!r} is not a whole number of GPUs")
        counts.add(int(text))
    if len(counts) > 1:
        return Refusal(f"spec.{field}[{i}].resources", f"{GPU} differs between requests and limits: {sorted(counts)}")
    return counts.pop() if counts else 0


def _gpus(spec: Mapping[str, Any], annotations: Mapping[str, str]) -> tuple[int, set[tuple[str, int]]] | Refusal:
    """(GPUs the pod asks Slurm for, the containers that see them)."""
    asking: dict[tuple[str, int], int] = {}
    beside: list[tuple[str, int]] = []
    for field, i, c, together in _containers(spec):
        count = _gpu_count(field, i, c)
        if isinstance(count, Refusal):
            return count
        if count:
            asking[(field, i)] = count
            if together:
                beside.append((field, i))
    if not asking:
        return 0, set()
    where = ", ".join(f"spec.{f}[{i}]" for f, i in sorted(asking))
    if len(beside) > 1:
        second = sorted(beside)[1]
        return Refusal(
            f"spec.{second[0]}[{second[1]}].resources",
            f"{len(beside)} containers that run together ask for GPUs ({where}); Slurm gives the pod one set "
            "of GPUs, which sunk cannot split between them: ask for them in one container",
        )
    if len(set(asking.values())) > 1:
        second = sorted(asking)[1]
        return Refusal(
            f"spec.{second[0]}[{second[1]}].resources",
            f"containers ask for different numbers of GPUs ({where}); the pod gets one set from Slurm: "
            "ask for the same number in each",
        )
    count = next(iter(asking.values()))
    if count > MAX_GPUS:
        field, i = sorted(asking)[0]
        return Refusal(f"spec.{field}[{i}].resources.limits[{GPU}]", f"{count} is more than {MAX_GPUS} GPUs")
    if annotations.get(keys.GPUS, "").strip():
        return Refusal(
            f"metadata.annotations[{keys.GPUS}]",
            f"set beside an {GPU} request ({where}); keep one of them",
        )
    return count, set(asking)


def _env_refusal(spec: Mapping[str, Any]) -> Refusal | None:
    for field, i, c, _ in _containers(spec):
        for j, e in enumerate(c.get("env") or []):
            if e.get("name") == VISIBLE:
                return Refusal(
                    f"spec.{field}[{i}].env[{j}]",
                    f"{VISIBLE} is set by sunk from the GPUs Slurm allocates (none for a container without a "
                    f"{GPU} request); drop it",
                )
    return None


def _env_patch(spec: Mapping[str, Any], seeing: set[tuple[str, int]]) -> Patch:
    patch: Patch = []
    for field, i, c, _ in _containers(spec):
        var: dict[str, Any] = (
            {
                "name": VISIBLE,
                "valueFrom": {"fieldRef": {"fieldPath": f"metadata.annotations['{keys.GPU_INDICES}']"}},
            }
            if (field, i) in seeing
            else {"name": VISIBLE, "value": NO_GPU}
        )
        if c.get("env"):
            patch.append({"op": "add", "path": _pointer("spec", field, i, "env", "-"), "value": var})
        else:
            patch.append({"op": "add", "path": _pointer("spec", field, i, "env"), "value": [var]})
    return patch


def _resources_patch(spec: Mapping[str, Any], seeing: set[tuple[str, int]]) -> Patch:
    patch: Patch = []
    for field, i in sorted(seeing):
        res = spec[field][i].get("resources") or {}
        for part in ("limits", "requests"):
            if GPU in (res.get(part) or {}):
                patch.append({"op": "remove", "path": _pointer("spec", field, i, "resources", part, GPU)})
    return patch


def _annotations_patch(meta: Mapping[str, Any], wanted: Mapping[str, str]) -> Patch:
    if not wanted:
        return []
    if not meta.get("annotations"):
        return [{"op": "add", "path": "/metadata/annotations", "value": dict(sorted(wanted.items()))}]
    return [
        {"op": "add", "path": _pointer("metadata", "annotations", k), "value": v} for k, v in sorted(wanted.items())
    ]


def _template_gpus(template: Mapping[str, Any]) -> int | None:
    """The GPUs a pod template asks for, as this webhook would turn them; None if it would refuse them."""
    meta = template.get("metadata") or {}
    got = _gpus(template.get("spec") or {}, meta.get("annotations") or {})
    if isinstance(got, Refusal):
        return None
    return got[0] or _annotated_gpus(meta.get("annotations") or {})


def _annotated_gpus(annotations: Mapping[str, str]) -> int:
    text = (annotations.get(keys.GPUS) or "").strip()
    return int(text) if text.isdigit() else 0


def _gang(meta: Mapping[str, Any], spec: Mapping[str, Any], owner: Owned) -> dict[str, str] | Refusal:
    """The group annotations of a gang the pod's controller made (runtime/webhook/gangs.py)."""
    if isinstance(owner, Refusal):
        return owner
    wanted = gangs.owner_to_read(meta, spec)
    # Where the pod's PodGroup can't be read (the API not served: the field is then dropped anyway).
    found: gangs.Gang | gangs.GangRefusal = gangs.lws_gang(meta)
    if wanted is not None and owner is not None:
        if wanted.kind == "PodGroup":
            found = gangs.podgroup_gang(meta, owner)
        elif wanted.kind == "Job":
            found = gangs.job_gang(meta, owner)
        else:
            found = gangs.jobset_gang(meta, owner, _template_gpus)
    if isinstance(found, gangs.GangRefusal):
        return Refusal(found.path, found.message)
    return found


def _wanted_annotations(
    meta: Mapping[str, Any], spec: Mapping[str, Any], defaults: NamespaceDefaults, gpus: int, owner: Owned
) -> dict[str, str] | Refusal:
    """The slurm.sunk.dev/* annotations the pod gets: the namespace's account and defaults where it
    names none, its GPUs, and its gang's."""
    annotations: Mapping[str, str] = meta.get("annotations") or {}
    wanted: dict[str, str] = {}
    if not (annotations.get(keys.ACCOUNT) or "").strip():
        wanted[keys.ACCOUNT] = defaults.account
    for key, value in ((keys.PARTITION, defaults.partition), (keys.QOS, defaults.qos)):
        if value and not (annotations.get(key) or "").strip():
            wanted[key] = value
    if gpus:
        wanted[keys.GPUS] = str(gpus)
    gang = _gang(meta, spec, owner)
    if isinstance(gang, Refusal):
        return gang
    return wanted | gang


def pod_patch(
    pod: Mapping[str, Any], defaults: NamespaceDefaults, scheduler_name: str, owner: Owned = None
) -> Patch | Refusal:
    """The JSONPatch for one pod being created in an opted-in namespace, or why it is refused.
    `owner`: the Job, JobSet or PodGroup that `owner_wanted` named, as read (None: none named or
    not found)."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    chosen = spec.get("schedulerName") or ""
    if chosen not in UNCHANGED_SCHEDULERS and chosen != scheduler_name:
        return []  # left to the scheduler it chose
    annotations: Mapping[str, str] = meta.get("annotations") or {}
    account = (annotations.get(keys.ACCOUNT) or "").strip()
    if account and account != defaults.account:
        return Refusal(
            f"metadata.annotations[{keys.ACCOUNT}]",
            f"{account!r}: pods of this namespace run under Slurm account {defaults.account!r}, which the stack "
            "gives it (inference.namespaces); drop the annotation",
        )
    gpus = _gpus(spec, annotations)
    if isinstance(gpus, Refusal):
        return gpus
    if (refused := _env_refusal(spec)) is not None:
        return refused
    count, seeing = gpus
    wanted = _wanted_annotations(meta, spec, defaults, count, owner)
    if isinstance(wanted, Refusal):
        return wanted
    patch: Patch = []
    if chosen != scheduler_name:
        op = "replace" if "schedulerName" in spec else "add"
        patch.append({"op": op, "path": "/spec/schedulerName", "value": scheduler_name})
    return patch + _annotations_patch(meta, wanted) + _resources_patch(spec, seeing) + _env_patch(spec, seeing)


def owner_wanted(
    body: Mapping[str, Any], namespaces: Mapping[str, NamespaceDefaults]
) -> tuple[str, gangs.Owner] | None:
    """(namespace, owner) whose spec sizes the gang of the pod this review creates, or None: what
    the caller reads before `review` (the Job; the JobSet where its CRD is served; the PodGroup where
    the API server serves scheduling.k8s.io/v1alpha2)."""
    request = body.get("request") or {}
    namespace = request.get("namespace") or ""
    resource = request.get("resource") or {}
    if namespace not in namespaces or resource.get("resource") != "pods" or request.get("operation") != "CREATE":
        return None
    pod = request.get("object") or {}
    wanted = gangs.owner_to_read(pod.get("metadata") or {}, pod.get("spec") or {})
    return (namespace, wanted) if wanted is not None else None


def review(
    body: Mapping[str, Any],
    namespaces: Mapping[str, NamespaceDefaults],
    scheduler_name: str,
    owner: Owned = None,
) -> dict[str, Any]:
    """An AdmissionReview v1 request -> its AdmissionReview v1 response. Anything but a pod being
    created in a listed namespace is allowed untouched (the API server sends only those; a
    request that is not one changes nothing)."""
    request = body.get("request") or {}
    response: dict[str, Any] = {"uid": request.get("uid", ""), "allowed": True}
    resource = request.get("resource") or {}
    namespace = request.get("namespace") or ""
    is_pod_create = (
        resource.get("group", "") == ""
        and resource.get("resource") == "pods"
        and not request.get("subResource")
        and request.get("operation") == "CREATE"
    )
    if is_pod_create and namespace in namespaces:
        outcome = pod_patch(request.get("object") or {}, namespaces[namespace], scheduler_name, owner)
        if isinstance(outcome, Refusal):
            response["allowed"] = False
            response["status"] = {"code": 422, "reason": "Invalid", "message": f"sunk: {outcome}"}
        elif outcome:
            response["patchType"] = "JSONPatch"
            response["patch"] = base64.b64encode(json.dumps(outcome).encode()).decode()
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}


def parse_namespaces(text: str) -> dict[str, NamespaceDefaults]:
    """SUNK_WEBHOOK_NAMESPACES (JSON, sunk.manifests.webhook.namespaces_json): {namespace: {account,
    partition?, qos?}}."""
    data = json.loads(text)
    if not isinstance(data, dict):
        raise ValueError("a JSON object of namespace -> {account, partition, qos}")
    out = {}
    for name, entry in data.items():
        if not isinstance(entry, dict) or not isinstance(entry.get("account"), str) or not entry["account"]:
            raise ValueError(f"{name}: needs an account")
        extra = set(entry) - {"account", "partition", "qos"}
        if extra:
            raise ValueError(f"{name}: unknown keys {sorted(extra)}")
        out[name] = NamespaceDefaults(entry["account"], entry.get("partition"), entry.get("qos"))
    return out
