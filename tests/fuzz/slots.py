"""The spec's JSON schema as slots the fuzzer writes (tests/fuzz/schema_stacks.py draws the values):
every field of ClusterSpec, and inside each Kubernetes object the spec passes through, the fields
of its Kubernetes definition (sunk/spec/kubernetes_schema.json), each with the class of sink it
reaches and a weight, all read from the schema (its `x-sunk-kubernetes-type` marks and its
descriptions) and from sunk's role table, not from a list of field paths."""

from __future__ import annotations

import random
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from typing import Any

from sunk import roles
from sunk.spec import kubeschema
from sunk.spec.cluster import ClusterSpec

SCHEMA = ClusterSpec.model_json_schema(by_alias=True, mode="validation")
DEFS: dict[str, Any] = SCHEMA["$defs"]
KUBE_MARK = "x-sunk-kubernetes-type"
Path = tuple[str, ...]
"""A slot's place: property names, `[]` for a list's item, `{}` for a map's value."""


POD_SINKS = frozenset(
    f"io.k8s.api.core.v1.{name}"
    for name in ("Capabilities", "SecretVolumeSource", "SecretKeySelector", "SecretEnvSource",
                 "SecretProjection", "HostPathVolumeSource", "ServiceAccountTokenProjection", "SecurityContext")
)  # fmt: skip
"""The Kubernetes types whose contents the role table (sunk.roles) governs: capabilities and
privilege, Secrets by volume, env and projection, host paths, ServiceAccount tokens."""
SINK_GAIN = 20.0
INSIDE_GAIN = 3.0
AIM_GAIN = 300.0
"""How much more a slot is drawn than its neighbours when it names what the role table governs
(`aims`), or its text goes into a file as written; INSIDE_GAIN for the rest of a POD_SINKS type."""
KUBE_DEPTH = 5
"""How deep a pass-through Kubernetes object is walked (Affinity nests deeper; its far leaves are
label selectors again)."""


# ----- the schema's slots


@dataclass(frozen=True)
class Slot:
    path: Path
    node: dict[str, Any]
    """The slot's schema, one variant of it, resolved."""
    sink: str
    weight: float


def _resolve(node: dict[str, Any]) -> dict[str, Any]:
    while True:
        if "$ref" in node:
            ref = node["$ref"].rsplit("/", 1)[-1]
            target = DEFS[ref] if ref in DEFS else kubeschema.definitions()[ref]
            node = {**target, **{k: v for k, v in node.items() if k != "$ref"}, "x-def": ref}
        elif KUBE_MARK in node and "x-def" not in node:
            kind = node[KUBE_MARK]
            node = {**kubeschema.definitions()[kind], "description": node.get("description", ""), "x-def": kind}
        else:
            return node


def variants(node: dict[str, Any]) -> list[dict[str, Any]]:
    """The schema's alternatives for one place, without null."""
    node = _resolve(node)
    alternatives = node.get("anyOf") or node.get("oneOf")
    if alternatives:
        outer = {k: v for k, v in node.items() if k not in ("anyOf", "oneOf")}
        return [v for a in alternatives for v in variants({**outer, **a})]
    kind = node.get("type")
    if isinstance(kind, list):
        kinds = [k for k in kind if k != "null"]
        return [{**node, "type": k} for k in kinds] if kinds else []
    return [] if kind == "null" else [node]


def kind_of(node: dict[str, Any]) -> str:
    if "enum" in node or "const" in node:
        return "enum"
    kind = node.get("type")
    if kind == "object" or "properties" in node:
        if node.get("properties"):
            return "object"
        extra = node.get("additionalProperties")
        return "map" if isinstance(extra, dict) and extra else "any"
    if node.get("x-kubernetes-int-or-string"):
        return "string"
    return str(kind or "any")


_SINK_WORDS = [
    ("sssd", re.compile(r"SSSD|sssd\.conf|\bldap_")),
    ("pod", re.compile(r"[Kk]ubernetes|container|Secret|[Vv]olume|\bpods?\b|securityContext")),
    ("script", re.compile(r"[Ss]cript|#!|\blua\b")),
    ("slurm", re.compile(r"\.conf\b|schedmd|Slurm|\b[A-Z][a-z]+[A-Z][A-Za-z]*\b")),
]


def sink_of(node: dict[str, Any], inherited: str) -> str:
    """The slot's own description decides; else its parent's class holds. Inside a Kubernetes
    definition everything goes into a pod as written."""
    if inherited == "kube" or ("x-def" in node and node["x-def"] not in DEFS):
        return "kube"
    text = node.get("description", "")
    for sink, words in _SINK_WORDS:
        if words.search(text):
            return sink
    return inherited


KIND_WEIGHT = {"array": 4.0, "string": 3.0, "map": 3.0, "any": 1.0, "object": 1.0, "integer": 1.0, "number": 1.0,
               "enum": 1.0, "boolean": 0.3}  # fmt: skip
"""Free text and lists of lines carry hostile values; an enum or a flag has few to try."""


LINES = re.compile(r"[Ll]ines appended|`Key=Value` words|file name -> content")
"""A description saying the text goes into a file as written (lines, `Key=Value` words)."""


SECTION_ROLES = {"nodesets": ("slurmd",), "runtime": ("syncer", "scheduler", "exporter"), "mariadb": ("mariadb",)}
"""The spec sections whose pods' role has another name (the rest share their role's name)."""


def pod_secrets(path: Path) -> frozenset[str]:
    """What the pods a slot writes into hold for a container other than the main one (the role
    table's first), by the role table: a Secret the slot's container is not meant to reach."""
    section = "mariadb" if "mariadb" in path else path[0]
    rows = [roles.ROLES[r] for r in SECTION_ROLES.get(section, (section,)) if r in roles.ROLES]
    out: set[str] = set()
    for row in rows:
        main = next(iter(row.container_secrets.values()), frozenset())
        out |= row.secrets - main
    return frozenset(out)


def aims(path: Path, owner: str) -> bool:
    """A slot that names what the role table governs: a Secret's name in a Secret reference, in a
    pod that holds Secrets for another container than the one written to; a capability added (the
    table lists what each container adds)."""
    secret = any(kind in owner for kind in SECRET_KINDS) and path[-1] in ("name", "secretName")
    secret = secret and bool(pod_secrets(path))
    return secret or (owner.endswith(".Capabilities") and "add" in path[-2:])


def _walk(node: dict[str, Any], path: Path, sink: str, boost: float, depth: int, seen: frozenset[str],
          out: list[Slot], owner: str = "") -> None:  # fmt: skip
    for v in variants(node):
        here = sink_of(v, sink) if path else sink
        kind = kind_of(v)
        ref = v.get("x-def", "")
        if ref in seen or depth > KUBE_DEPTH:
            continue
        inner = seen | {ref} if ref else seen
        owner_here = ref or owner
        gain = INSIDE_GAIN if ref in POD_SINKS else boost  # everything inside a governed type
        lines = SINK_GAIN if LINES.search(v.get("description", "")) else 1.0  # this slot and its items
        aimed = AIM_GAIN if path and aims(path, owner) else 1.0
        if path:
            weight = KIND_WEIGHT.get(kind, 1.0) * max(gain, lines, aimed)
            out.append(Slot(path, v, "pod" if here == "kube" else here, weight))
        down = depth + (1 if ref not in DEFS and (ref or depth) else 0)
        if kind == "object":
            for name, sub in v["properties"].items():
                _walk(sub, (*path, name), here, gain, down, inner, out, owner_here)
        elif kind == "map":
            _walk(v["additionalProperties"], (*path, "{}"), here, gain, down, inner, out, owner_here)
        elif kind == "array" and isinstance(v.get("items"), dict):
            _walk(v["items"], (*path, "[]"), here, max(gain, lines), down, inner, out, owner_here)


@cache
def slots() -> tuple[Slot, ...]:
    out: list[Slot] = []
    _walk(SCHEMA, (), "other", 1.0, 0, frozenset(), out)
    return tuple(out)


@cache
def by_sink() -> dict[str, tuple[list[Slot], list[float]]]:
    groups: dict[str, tuple[list[Slot], list[float]]] = {}
    for slot in slots():
        group = groups.setdefault(slot.sink, ([], []))
        group[0].append(slot)
        group[1].append(slot.weight)
    return groups


@cache
def nodes_at() -> dict[Path, list[dict[str, Any]]]:
    out: dict[Path, list[dict[str, Any]]] = {}
    for slot in slots():
        out.setdefault(slot.path, []).append(slot.node)
    return out


SECRET_KINDS = {"SecretVolumeSource", "SecretKeySelector", "SecretEnvSource", "SecretProjection", "SecretRef"}


def first_variant(node: dict[str, Any]) -> dict[str, Any]:
    found = variants(node)
    return found[0] if found else {"type": "any"}


CLASS_WEIGHT = {"slurm": 1.0, "pod": 1.0, "sssd": 1.0, "script": 0.25, "other": 0.5}
"""`other` fields reach no sink the schema names, and scripts' text reaches no judge (the test
says so): drawn less often than the sinks the judges read."""


def draw_slots(rng: random.Random) -> list[Slot]:
    """One or two slots, each from a sink class of its own (CLASS_WEIGHT)."""
    groups = by_sink()
    picked = []
    classes = sorted(groups)
    for sink in {rng.choices(classes, [CLASS_WEIGHT[c] for c in classes])[0] for _ in range(rng.choice([1, 1, 1, 2]))}:
        candidates, weights = groups[sink]
        picked.append(rng.choices(candidates, weights)[0])
    return picked


def describe() -> Iterator[str]:
    """The slots per sink class, for a reader checking what the fuzzer reaches."""
    for sink, (candidates, weights) in sorted(by_sink().items()):
        yield f"{sink}: {len(candidates)} slots, weight {sum(weights):.0f}"


if __name__ == "__main__":
    for line in describe():
        print(line)
