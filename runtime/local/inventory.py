"""The local cluster's Nodes: a small inventory derived from the render, or read from a file.

Derived (`derive`), from what the rendered objects ask of the Nodes under them:
- a **system** pool for the pods the render creates itself (Deployments, StatefulSets, Jobs):
  one Node per distinct placement (nodeSelector and required node affinity), labelled as it
  asks; a placement with a nodeSelector is a dedicated pool, so it also carries the NoSchedule and
  NoExecute taints every pod placed there tolerates (acme-prod's `slurm-system` taint). Its size
  is what those pods request, plus the largest of them again (a rolling replacement starts the
  new pod before the old one goes) and a small margin; so a NodeSet's slurmd pod, which asks for
  a whole Slurm node, does not fit there and goes to its own pool. A hard topology spread over
  hostnames there (`minDomains`: slurmctld with backups) gets that many Nodes, sharing those
  pods' requests among them, each still with room for the largest and the margin.
- one **pool per NodeSet**: `replicas` Nodes (all-matching-nodes: ALL_MATCHING_NODES) plus one
  spare, so `kubectl scale nodeset --replicas N+1` has somewhere to go. Each has the labels its
  slurmd pods select (nodeSelector with kubernetes.io/arch, instance type, required node
  affinity), the topology labels the NodeSet's topology reads, the taints it tolerates, and room
  for one slurmd pod (exclusive: what it requests; shared: the NodeSet's CPUs and memory beside
  slurmd's own). GPU NodeSets' Nodes get the labels NVIDIA GPU feature discovery writes
  (nvidia.com/gpu.present, .product, .count), an `nvidia.com/gpu` capacity, and device files
  (keys.LOCAL_DEVICES: `<devicePattern>0..N-1`) that the node agent binds into the containers
  given them, as the NVIDIA device plugin does (fakes: /dev/null, which is all Slurm checks).
  Each compute Node also carries a PreferNoSchedule taint (keys.LOCAL_COMPUTE) so that the control plane's
  pods, which tolerate none of it, prefer the system pool while it has room, as on a cluster with
  a dedicated node pool; kube-scheduler scores such taints (TaintToleration).
  Where the render lists inference namespaces (it holds sunk's MutatingWebhookConfiguration), the
  shared NodeSets' Nodes are tainted `slurm.sunk.dev/shared=true:NoSchedule` (keys.SHARED), as
  docs/how-to/inference.md asks of a real node pool: a pod the webhook missed stays Pending, while
  the sunk scheduler's Bindings pass (the node agent, as the kubelet, enforces NoExecute only).

A file (`sunk local up --nodes FILE`) replaces the derived inventory: YAML with a `nodes` list,
each `{name, labels, taints, capacity, devices}` (see `NodeFile`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

import pydantic
import yaml

from sunk import keys

from .container import ConfigError, quantity

Obj = dict[str, Any]

ALL_MATCHING_NODES = 2
"""Nodes made for a NodeSet in all-matching-nodes mode (it has no replica count of its own)."""
SPARE_NODES = 1
"""Nodes a NodeSet's pool has beyond its replicas: room for a scale-up or a replacement pod."""
GPU_RESOURCE = "nvidia.com/gpu"
SYSTEM_MARGIN_MILLICORES, SYSTEM_MARGIN_MIB = 500, 1024
"""Room on each system Node beyond its pods and one replacement: a test's or a user's small pod."""
COMPUTE_MARGIN_MILLICORES, COMPUTE_MARGIN_MIB = 500, 1024
"""Room on each compute Node beyond its slurmd pod."""
DEFAULT_NODE = "local-system"

_WORKLOADS = ("Deployment", "StatefulSet", "Job", "DaemonSet", "ReplicaSet")


def node(
    name: str,
    capacity: Mapping[str, str],
    labels: Mapping[str, str] | None = None,
    taints: Iterable[Mapping[str, str]] = (),
    devices: Iterable[str] = (),
) -> Obj:
    """A Ready Node object with `capacity` allocatable and 110 pods."""
    spec: Obj = {}
    if taints:
        spec["taints"] = [dict(t) for t in taints]
    metadata: Obj = {
        "name": name,
        "labels": {
            "kubernetes.io/hostname": name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            **(labels or {}),
        },
    }
    devices = list(devices)
    if devices:
        metadata["annotations"] = {keys.LOCAL_DEVICES: ",".join(devices)}
    sizes = {"pods": "110", **capacity}
    return {
        "metadata": metadata,
        "spec": spec,
        "status": {
            "capacity": dict(sizes),
            "allocatable": dict(sizes),
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "KubeletReady",
                    "message": "sunk local node agent is posting ready status",
                }
            ],
            "nodeInfo": {
                "kubeletVersion": "v1.32.0-sunk-local",
                "containerRuntimeVersion": "sunk-local://1",
                "operatingSystem": "linux",
                "architecture": (labels or {}).get("kubernetes.io/arch", "amd64"),
            },
        },
    }


def default() -> list[Obj]:
    """The inventory without a render: one large Node for everything."""
    return [node(DEFAULT_NODE, {"cpu": "64", "memory": "256Gi"}, {keys.LOCAL_POOL: "system"})]


# -- from a render (pure) -----------------------------------------------------------------------


def _pod_spec(obj: Mapping[str, Any]) -> Obj | None:
    kind = obj.get("kind")
    if kind == "Pod":
        return dict(obj.get("spec") or {})
    if kind in _WORKLOADS:
        return dict(((obj.get("spec") or {}).get("template") or {}).get("spec") or {})
    return None


def _replicas(obj: Mapping[str, Any]) -> int:
    if obj.get("kind") in ("Deployment", "StatefulSet", "ReplicaSet"):
        return int((obj.get("spec") or {}).get("replicas", 1))
    return 1


def _requests_of(container: Mapping[str, Any]) -> dict[str, float]:
    res = container.get("resources") or {}
    wanted = {**(res.get("limits") or {}), **(res.get("requests") or {})}
    return {k: quantity(str(v)) for k, v in wanted.items()}


def pod_requests(spec: Mapping[str, Any]) -> dict[str, float]:
    """A pod's effective requests, as the scheduler counts them: its main containers and native
    sidecars (init containers with restartPolicy Always) together, or an init container with the
    sidecars started before it, whichever is larger, per resource."""
    total: dict[str, float] = {}
    sidecars: dict[str, float] = {}
    peak: dict[str, float] = {}
    for c in spec.get("initContainers") or []:
        asked = _requests_of(c)
        if c.get("restartPolicy") == "Always":
            for k, v in asked.items():
                sidecars[k] = sidecars.get(k, 0) + v
            continue
        for k, v in asked.items():
            peak[k] = max(peak.get(k, 0), v + sidecars.get(k, 0))
    for c in spec.get("containers") or []:
        for k, v in _requests_of(c).items():
            total[k] = total.get(k, 0) + v
    for k, v in sidecars.items():
        total[k] = total.get(k, 0) + v
    return {k: max(total.get(k, 0), peak.get(k, 0)) for k in sorted({*total, *peak})}


def _required_labels(affinity: Mapping[str, Any] | None) -> dict[str, str]:
    """Labels that satisfy the first required node affinity term (In: its first value; Exists: "true")."""
    node_aff = (affinity or {}).get("nodeAffinity") or {}
    terms = (node_aff.get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms") or []
    labels: dict[str, str] = {}
    for expr in (terms[0].get("matchExpressions") or []) if terms else []:
        if expr.get("operator") == "In" and expr.get("values"):
            labels[expr["key"]] = str(expr["values"][0])
        elif expr.get("operator") == "Exists":
            labels[expr["key"]] = "true"
    return labels


def _taints(tolerations: Iterable[Mapping[str, Any]]) -> list[Obj]:
    """The taints a list of tolerations admits: each keyed NoSchedule/NoExecute toleration (no
    effect: NoSchedule)."""
    out: list[Obj] = []
    for t in tolerations:
        key, effect = t.get("key"), t.get("effect") or "NoSchedule"
        if not key or effect not in ("NoSchedule", "NoExecute"):
            continue
        taint = {
            "key": key,
            "value": "" if t.get("operator") == "Exists" else str(t.get("value") or ""),
            "effect": effect,
        }
        if taint not in out:
            out.append(taint)
    return out


def _cpu(millicores: float) -> str:
    return f"{math.ceil(millicores)}m"


def _memory(mib: float) -> str:
    return f"{math.ceil(mib)}Mi"


def _system_pools(objects: list[Obj]) -> list[Obj]:
    """The system Nodes: the render's pods grouped by where they must run (nodeSelector and
    required node affinity), one pool per group (`_pool`)."""
    groups: dict[tuple[tuple[str, str], ...], list[tuple[Obj, int]]] = {}
    for obj in objects:
        spec = _pod_spec(obj)
        if spec is None:
            continue
        placement = {**(spec.get("nodeSelector") or {}), **_required_labels(spec.get("affinity"))}
        groups.setdefault(tuple(sorted(placement.items())), []).append((spec, _replicas(obj)))
    if not groups:
        groups[()] = []
    nodes: list[Obj] = []
    for where, members in sorted(groups.items()):
        nodes += _pool(where, members, len(nodes))
    return nodes


def _pool(where: tuple[tuple[str, str], ...], members: list[tuple[Obj, int]], first: int) -> list[Obj]:
    """One group's Nodes: as many as its pods' hard hostname spread asks, sharing their requests
    (the scheduler spreads them) plus the largest pod and a margin each; a dedicated pool (`where`
    not empty) carries the taints all its pods tolerate. `first`: the Nodes made before it."""
    asked = [pod_requests(spec) for spec, _ in members]
    cpu = sum(r.get("cpu", 0) * n for r, (_, n) in zip(asked, members, strict=True))
    mem = sum(r.get("memory", 0) * n for r, (_, n) in zip(asked, members, strict=True))
    largest_cpu = max((r.get("cpu", 0) for r in asked), default=0)
    largest_mem = max((r.get("memory", 0) for r in asked), default=0)
    taints: list[Obj] = []
    if where:
        common = [_taints(spec.get("tolerations") or []) for spec, _ in members]
        taints = [t for t in common[0] if all(t in c for c in common[1:])] if common else []
    count = max((_spread_domains(spec) for spec, _ in members), default=1)
    capacity = {
        "cpu": _cpu((cpu / count + largest_cpu) * 1000 + SYSTEM_MARGIN_MILLICORES),
        "memory": _memory((mem / count + largest_mem) / 2**20 + SYSTEM_MARGIN_MIB),
    }
    names = [DEFAULT_NODE if first + i == 0 else f"{DEFAULT_NODE}-{first + i}" for i in range(count)]
    return [node(name, capacity, {**dict(where), keys.LOCAL_POOL: "system"}, taints) for name in names]


def _spread_domains(spec: Mapping[str, Any]) -> int:
    """The Nodes a pod's hard topology spread over hostnames asks for: its `minDomains` (slurmctld
    with backups: one Node per controller, or the backups stay Pending), else one."""
    return max(
        [1]
        + [
            int(c.get("minDomains") or 1)
            for c in spec.get("topologySpreadConstraints") or []
            if c.get("topologyKey") == "kubernetes.io/hostname" and c.get("whenUnsatisfiable") == "DoNotSchedule"
        ]
    )


def _compute_pool(nodeset: Obj, inference: bool = False) -> list[Obj]:
    from sunk.nodeset_resource import NodeSetResourceSpec  # the CRD's model: the operator reads it the same way

    cr_name = nodeset["metadata"]["name"]
    try:
        spec = NodeSetResourceSpec.model_validate(nodeset.get("spec") or {})
    except pydantic.ValidationError as err:
        raise ConfigError(f"NodeSet {cr_name}: its spec does not validate: {err}") from None
    count = spec.desired_replicas if spec.desired_replicas is not None else ALL_MATCHING_NODES
    millicores, mib = spec.pod_requests
    if spec.resource_mode == "shared":  # the node's CPUs and memory are Slurm's, beside slurmd's own
        millicores, mib = millicores + spec.cpus * 1000, mib + spec.memory_mib
    capacity = {
        "cpu": _cpu(millicores + COMPUTE_MARGIN_MILLICORES),
        "memory": _memory(mib + COMPUTE_MARGIN_MIB),
    }
    labels = {
        **spec.pod_node_selector,
        **_required_labels(spec.affinity),
    }
    if spec.instance_type:
        labels.setdefault("node.kubernetes.io/instance-type", spec.instance_type)
    single = [spec.topology.label_keys] if spec.topology.plugin != "none" else []
    for levels in [*single, *(t.label_keys for t in spec.topologies)]:
        for level, key in enumerate(levels):
            labels[key] = "0" if level == 0 and len(levels) > 1 else spec.name
    devices: list[str] = []
    if spec.gpus is not None:
        gpus = spec.gpus
        capacity[gpus.resource_name] = str(gpus.count)
        devices = [f"{gpus.device_pattern}{i}" for i in range(gpus.count)]
        labels |= {
            "nvidia.com/gpu.present": "true",
            "nvidia.com/gpu.product": f"NVIDIA-{gpus.type.upper()}",
            "nvidia.com/gpu.count": str(gpus.count),
        }
    labels[keys.LOCAL_POOL] = cr_name
    tolerations = [t.model_dump(by_alias=True, exclude_none=True) for t in spec.tolerations]
    taints = [*_taints(tolerations), {"key": keys.LOCAL_COMPUTE, "value": cr_name, "effect": "PreferNoSchedule"}]
    if inference and spec.resource_mode == "shared":
        taints = _with_shared_taint(taints)
    return [node(f"local-{cr_name}-{i}", capacity, labels, taints, devices) for i in range(count + SPARE_NODES)]


def _with_shared_taint(taints: list[Obj]) -> list[Obj]:
    shared = {k: keys.SHARED_TOLERATION[k] for k in ("key", "value", "effect")}
    return [t for t in taints if t != shared] + [shared]


def derive(objects: Iterable[Mapping[str, Any]]) -> list[Obj]:
    """The Nodes a render's objects need (see the module's docstring)."""
    objs = [dict(o) for o in objects if isinstance(o, Mapping)]
    nodes = _system_pools(objs)
    inference = any(_is_sunk_webhook(o) for o in objs)
    for nodeset in sorted((o for o in objs if o.get("kind") == "NodeSet"), key=lambda o: o["metadata"]["name"]):
        nodes += _compute_pool(nodeset, inference)
    return nodes


def _is_sunk_webhook(obj: Mapping[str, Any]) -> bool:
    """sunk's MutatingWebhookConfiguration: the render lists inference namespaces."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return obj.get("kind") == "MutatingWebhookConfiguration" and labels.get(keys.APP_COMPONENT) == "webhook"


def read_render(folder: Path) -> list[Obj]:
    """Every object of a rendered folder (its YAML files, the CRD folder's too)."""
    out: list[Obj] = []
    for path in sorted(folder.rglob("*.yaml")):
        out += [d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict)]
    return out


# -- from a file ---------------------------------------------------------------------------------

_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")
_QUANTITY = re.compile(r"[0-9]+(\.[0-9]+)?(m|[kMGT]i?)?")


class _Model(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)


class TaintFile(_Model):
    key: str
    value: str = ""
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]


class NodeEntry(_Model):
    name: str
    """A DNS subdomain, as Kubernetes requires of a Node's name."""
    labels: dict[str, str] = {}
    taints: list[TaintFile] = []
    capacity: dict[str, str]
    """cpu and memory required (Kubernetes quantities); extended resources such as nvidia.com/gpu."""
    devices: list[str] = []
    """Device files the Node's GPUs are (e.g. /dev/nvidia0): bound into the containers given them."""

    @pydantic.field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not _SUBDOMAIN.fullmatch(value):
            raise ValueError(f"{value!r} is not a DNS subdomain: lowercase letters, digits, '-' and '.', at most 253")
        return value

    @pydantic.field_validator("capacity")
    @classmethod
    def _sizes(cls, value: dict[str, str]) -> dict[str, str]:
        for needed in ("cpu", "memory"):
            if needed not in value:
                raise ValueError(f"{needed} is required (a quantity such as 8 or 32Gi)")
        for key, amount in value.items():
            if not _QUANTITY.fullmatch(str(amount)):
                raise ValueError(f"{key}: {amount!r} is not a Kubernetes quantity such as 8, 500m or 32Gi")
        return value


class NodeFile(_Model):
    nodes: list[NodeEntry] = pydantic.Field(min_length=1)


def _where(loc: tuple[int | str, ...]) -> str:
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def from_file(path: Path) -> list[Obj]:
    """The Nodes a file lists; ConfigError naming the field and what would be valid otherwise."""
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as err:
        raise ConfigError(f"{path}: not readable as YAML: {err}") from None
    try:
        parsed = NodeFile.model_validate(data)
    except pydantic.ValidationError as err:
        problems = [f"{_where(e['loc'])}: {e['msg'].removeprefix('Value error, ')}" for e in err.errors()]
        raise ConfigError(f"{path}: " + "; ".join(problems)) from None
    names = [n.name for n in parsed.nodes]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ConfigError(f"{path}: nodes: the name {twice[0]} is used twice (each Node needs its own)")
    return [
        node(
            n.name,
            {k: str(v) for k, v in n.capacity.items()},
            n.labels,
            [t.model_dump() for t in n.taints],
            n.devices,
        )
        for n in parsed.nodes
    ]


def allocate_devices(pod: Mapping[str, Any], node: Mapping[str, Any], taken: set[str]) -> dict[str, list[str]]:
    """Container name -> the device files of `node` it gets, as a device plugin allocates them: a
    privileged container sees all of them; one that requests the GPU resource gets that many of
    those not `taken` (held by other pods on the Node)."""
    files = [f for f in (node["metadata"].get("annotations") or {}).get(keys.LOCAL_DEVICES, "").split(",") if f]
    if not files:
        return {}
    spec = pod.get("spec") or {}
    free = [f for f in files if f not in taken]
    out: dict[str, list[str]] = {}
    for c in (spec.get("initContainers") or []) + (spec.get("containers") or []):
        if (c.get("securityContext") or {}).get("privileged"):
            out[c["name"]] = list(files)
            continue
        wanted = int(pod_requests({"containers": [c]}).get(GPU_RESOURCE, 0))
        if wanted:
            out[c["name"]], free = free[:wanted], free[wanted:]
    return out


def summary(nodes: Iterable[Mapping[str, Any]]) -> list[str]:
    """One line per Node: name, capacity and taints (what `sunk local up` prints)."""
    lines = []
    for n in nodes:
        cap = n["status"]["capacity"]
        sizes = ", ".join(f"{k} {v}" for k, v in cap.items() if k != "pods")
        taints = [
            f"{t['key']}{'=' + t['value'] if t.get('value') else ''}:{t['effect']}"
            for t in n["spec"].get("taints") or []
        ]
        lines.append(f"{n['metadata']['name']}: {sizes}" + (f"; taints {', '.join(taints)}" if taints else ""))
    return lines
