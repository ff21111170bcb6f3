"""The NodeSet CustomResourceDefinition, its schema generated from the pydantic model the operator
parses (sunk.nodeset_resource.NodeSetResourceSpec), so the API server rejects what the operator would.

pydantic emits JSON Schema 2020-12; Kubernetes wants an OpenAPI v3 *structural* schema
(https://kubernetes.io/docs/tasks/extend-kubernetes/custom-resources/custom-resource-definitions/#specifying-a-structural-schema):
every node typed, no $ref, `nullable` instead of a null branch, int-or-string marked. Fields that
hold Kubernetes' own types (volume sources, affinity, topologySpreadConstraints, securityContext,
an env var's valueFrom) get Kubernetes' definitions (sunk.spec.kubeschema), so the API server
checks a hand-written NodeSet's volumes as it checks a pod's.

Models are *not* closed with `additionalProperties: false` in the CRD: the API server rejects a
schema that has both `properties` and `additionalProperties` ("additionalProperties and
properties are mutual exclusive", apiextensions validation). It prunes unknown fields instead,
and `kubectl apply` (strict field validation, the default) turns them into errors. `closed()`
gives the schema with every model closed, which is what that strict validation enforces; the
tests validate NodeSet objects against it."""

from __future__ import annotations

from typing import Any

from sunk.manifests.meta import Manifest
from sunk.nodeset_resource import API_VERSION, GROUP, KIND, PLURAL, VERSION, NodeSetResourceSpec, NodeSetStatus
from sunk.spec import kubeschema
from sunk.spec.pod import KUBERNETES_TYPE

Schema = dict[str, Any]

# Annotations, not validation: pydantic's titles repeat the field name and defaults are applied
# by the operator's model, so the API server stores what the user wrote.
_DROP = frozenset({"title", "default", "examples", "$defs"})

PRINTER_COLUMNS: list[Manifest] = [
    {"name": "Mode", "type": "string", "jsonPath": ".spec.mode", "priority": 1},
    {"name": "Desired", "type": "integer", "jsonPath": ".status.desired"},
    {"name": "Ready", "type": "integer", "jsonPath": ".status.ready"},
    {"name": "Idle", "type": "integer", "jsonPath": ".status.idle"},
    {"name": "Allocated", "type": "integer", "jsonPath": ".status.allocated"},
    {"name": "Drained", "type": "integer", "jsonPath": ".status.drained"},
    {"name": "Protected", "type": "integer", "jsonPath": ".status.protected", "priority": 1},
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
]


class UnsupportedSchema(ValueError):
    """A model construct with no structural-schema equivalent; change the model, not this code."""


def _resolve(node: Schema, defs: dict[str, Schema]) -> Schema:
    ref = node.get("$ref")
    if ref is None:
        return node
    target = defs[ref.rsplit("/", 1)[-1]]
    # Siblings of $ref (a field's description) win over the referenced model's.
    return {**target, **{k: v for k, v in node.items() if k != "$ref"}}


_INT_OR_STRING: Schema = {"x-kubernetes-int-or-string": True, "anyOf": [{"type": "integer"}, {"type": "string"}]}


def kubernetes_structural(name: str, path: str = "", seen: tuple[str, ...] = ()) -> Schema:
    """Kubernetes' own definition `name` (sunk.spec.kubeschema) as a structural OpenAPI v3 node:
    `type: [x, "null"]` becomes `nullable`, Quantity and IntOrString are int-or-string, open maps
    keep their value schema and untyped objects (FieldsV1) are free-form. Models stay unclosed,
    as for sunk's own (the API server prunes unknown fields; `closed()` is for validators)."""
    if name in seen:
        raise UnsupportedSchema(f"{path}: {name} refers to itself; no structural schema")
    return _kube(kubeschema.definitions()[name], path, (*seen, name))


def _kube(node: Schema, path: str, seen: tuple[str, ...]) -> Schema:
    ref = node.get("$ref")
    if ref is not None:
        return kubernetes_structural(str(ref).rsplit("/", 1)[-1], path, seen)
    if "oneOf" in node:  # Quantity (string or number) and IntOrString: what the API server takes
        return dict(_INT_OR_STRING)
    kinds = node.get("type")
    listed = [kinds] if isinstance(kinds, str) else list(kinds or [])
    typed = [k for k in listed if k != "null"]
    if len(typed) != 1:
        raise UnsupportedSchema(f"{path}: Kubernetes type {listed} has no structural schema")
    out: Schema = {"type": typed[0]}
    if "null" in listed:
        out["nullable"] = True
    for key in ("enum", "format"):
        if key in node:
            out[key] = node[key]
    if typed[0] == "object":
        props = node.get("properties")
        extra = node.get("additionalProperties")
        if props:
            out["properties"] = {k: _kube(v, f"{path}.{k}", seen) for k, v in props.items()}
            if node.get("required"):
                out["required"] = list(node["required"])
        elif isinstance(extra, dict):
            out["additionalProperties"] = _kube(extra, f"{path}[*]", seen)
        else:
            out["x-kubernetes-preserve-unknown-fields"] = True
    elif typed[0] == "array":
        out["items"] = _kube(node.get("items") or {}, f"{path}[]", seen)
    return out


def structural(node: Schema, defs: dict[str, Schema], path: str = "") -> Schema:
    """One pydantic schema node -> a structural OpenAPI v3 node, in three phases: a Kubernetes type
    or a union is settled whole; otherwise the node's own keywords are translated, then its
    children (properties, map values, items) are made structural in turn."""
    node = _resolve(node, defs)
    kube = node.get(KUBERNETES_TYPE)
    if kube is not None:
        return _kubernetes_typed(node, str(kube), path)
    branches = node.get("anyOf")
    if branches is not None:
        return _union(node, [_resolve(b, defs) for b in branches], defs, path)
    kind = node.get("type")
    out = _keywords(node, kind, path)
    _children(node, kind, defs, path, out)
    return out


def _kubernetes_typed(node: Schema, kube: str, path: str) -> Schema:
    """A field holding one of Kubernetes' own types (a volume source, affinity...): its Kubernetes
    definition, so the API server checks a NodeSet as it would a pod."""
    typed = kubernetes_structural(kube, path)
    if any(b.get("type") == "null" for b in node.get("anyOf") or []):
        typed["nullable"] = True
    if "description" in node:
        typed["description"] = node["description"]
    return typed


def _union(node: Schema, branches: list[Schema], defs: dict[str, Schema], path: str) -> Schema:
    """`anyOf`: an optional value (one branch beside null), int-or-string, or refused."""
    nullable = any(b.get("type") == "null" for b in branches)
    rest = [b for b in branches if b.get("type") != "null"]
    types = sorted(str(b.get("type")) for b in rest)
    if len(rest) == 1:
        merged = {**{k: v for k, v in node.items() if k != "anyOf"}, **rest[0]}
        if "description" in node:
            merged["description"] = node["description"]
        out = structural(merged, defs, path)
    elif types == ["integer", "string"]:
        out = {"x-kubernetes-int-or-string": True, "anyOf": [{"type": "integer"}, {"type": "string"}]}
        if "description" in node:
            out["description"] = node["description"]
    else:
        raise UnsupportedSchema(f"{path or '(root)'}: a union of {types} has no structural schema")
    if nullable:
        out["nullable"] = True
    return out


_CHILD_KEYS = frozenset({"anyOf", "properties", "items", "additionalProperties", "required"})


def _keywords(node: Schema, kind: object, path: str) -> Schema:
    """The node's own keywords in OpenAPI v3.0 terms (const -> enum, numeric exclusive bounds on
    integers -> inclusive ones); pydantic-only keywords are dropped."""
    out: Schema = {}
    for key, value in node.items():
        if key in _DROP or key in _CHILD_KEYS:
            continue
        if key == "const":
            out["enum"] = [value]
        elif key == "exclusiveMinimum" and kind == "integer":
            out["minimum"] = value + 1
        elif key == "exclusiveMaximum" and kind == "integer":
            out["maximum"] = value - 1
        elif key in {"exclusiveMinimum", "exclusiveMaximum"}:
            raise UnsupportedSchema(f"{path}: numeric {key} on {kind} (OpenAPI v3.0 has only the boolean form)")
        else:
            out[key] = value
    if kind is None and "enum" in out:
        out["type"] = "string"
    return out


def _children(node: Schema, kind: object, defs: dict[str, Schema], path: str, out: Schema) -> None:
    """Properties, map values or items, each made structural; an untyped node is refused."""
    if kind == "object":
        props = node.get("properties")
        extra = node.get("additionalProperties")
        if props is not None:
            out["properties"] = {k: structural(v, defs, f"{path}.{k}" if path else k) for k, v in props.items()}
            if node.get("required"):
                out["required"] = list(node["required"])
        elif isinstance(extra, dict) and extra:
            out["additionalProperties"] = structural(extra, defs, f"{path}[*]")
        else:
            # dict[str, Any]: a free-form map (Kubernetes affinity, verbatim).
            out["x-kubernetes-preserve-unknown-fields"] = True
    elif kind == "array":
        out["items"] = structural(node.get("items", {}), defs, f"{path}[]")
    elif kind is None:
        raise UnsupportedSchema(f"{path or '(root)'}: untyped schema node {sorted(node)}")


def model_schema(model: type[NodeSetResourceSpec] | type[NodeSetStatus]) -> Schema:
    raw = model.model_json_schema(by_alias=True)
    return structural(raw, raw.get("$defs", {}))


def open_api_schema() -> Schema:
    return {
        "type": "object",
        "description": "A group of identical Slurm compute nodes, one slurmd pod each.",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": model_schema(NodeSetResourceSpec),
            "status": model_schema(NodeSetStatus),
        },
        "required": ["spec"],
    }


def closed(schema: Schema) -> Schema:
    """`schema` with `additionalProperties: false` on every node that lists properties: an
    unknown field anywhere is an error, as under `kubectl apply`'s strict field validation.
    For validators only; the API server refuses it in a CRD."""
    out = dict(schema)
    if "properties" in out:
        out["properties"] = {k: closed(v) for k, v in out["properties"].items()}
        if out.get("x-kubernetes-preserve-unknown-fields") is not True:
            out["additionalProperties"] = False
    for key in ("items", "additionalProperties"):
        if isinstance(out.get(key), dict):
            out[key] = closed(out[key])
    return out


def nodeset_crd(labels: dict[str, str] | None = None) -> Manifest:
    meta: Manifest = {"name": f"{PLURAL}.{GROUP}"}
    if labels:
        meta["labels"] = dict(labels)
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": meta,
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {
                "kind": KIND,
                "listKind": f"{KIND}List",
                "plural": PLURAL,
                "singular": KIND.lower(),
                "categories": ["sunk"],
            },
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": open_api_schema()},
                    "subresources": {
                        "status": {},
                        # kubectl scale, HorizontalPodAutoscaler and KEDA drive replicas here.
                        "scale": {
                            "specReplicasPath": ".spec.replicas",
                            "statusReplicasPath": ".status.replicas",
                            "labelSelectorPath": ".status.selector",
                        },
                    },
                    "additionalPrinterColumns": PRINTER_COLUMNS,
                }
            ],
        },
    }


__all__ = [
    "API_VERSION",
    "PRINTER_COLUMNS",
    "UnsupportedSchema",
    "closed",
    "nodeset_crd",
    "open_api_schema",
    "structural",
]
