"""The parts of the Kubernetes API schema a stack may write verbatim (volume sources, affinity,
topology spread constraints, environment variables, container securityContext), and a strict
check of a value against them, so a stack is refused before any resource exists, with the field
path the API server would name.

The definitions are the Kubernetes 1.33 OpenAPI schema as kubernetes-validate ships it (strict
variant: unknown fields are errors), cut to what these types reach and without descriptions:
`kubernetes_schema.json`, generated and kept equal to kubernetes-validate's by
tests/spec/test_kubeschema.py (`--update-golden` rewrites it). The core stays free of that 100 MB
package; this file is about 60 KB.

The checker understands the keywords those definitions use: `$ref`, `type` (one or a list),
`properties`, `required`, `additionalProperties` (false or a schema), `items`, `enum` and
`oneOf` (Kubernetes uses it for Quantity and IntOrString only). Like kubernetes-validate it checks
shape; on top of it `_RULES` holds the API server's value rules that a stack has reached (a
quantity's syntax, one source per env var, file modes, maxSkew, tolerationSeconds only with
NoExecute, resource names, 32- and 64-bit integers), so that what passes here the API server
accepts too."""

from __future__ import annotations

import json
import re
from functools import cache
from importlib import resources
from typing import Any

from sunk.problem import Problem, Problems
from sunk.spec.base import _label_key, _label_value, object_key_problem

KUBERNETES_VERSION = "1.33"
"""The schema version the definitions come from (the oldest the manifests are validated against)."""
SCHEMA_FILE = "kubernetes_schema.json"

ROOTS = {
    "Volume": "io.k8s.api.core.v1.Volume",
    "VolumeMount": "io.k8s.api.core.v1.VolumeMount",
    "Affinity": "io.k8s.api.core.v1.Affinity",
    "TopologySpreadConstraint": "io.k8s.api.core.v1.TopologySpreadConstraint",
    "EnvVarSource": "io.k8s.api.core.v1.EnvVarSource",
    "SecurityContext": "io.k8s.api.core.v1.SecurityContext",
    "Toleration": "io.k8s.api.core.v1.Toleration",
    "PodSpec": "io.k8s.api.core.v1.PodSpec",
}
"""The types a stack may write, by the short name errors use."""

Schema = dict[str, Any]


@cache
def definitions() -> dict[str, Schema]:
    text = resources.files("sunk.spec").joinpath(SCHEMA_FILE).read_text()
    defs: dict[str, Schema] = json.loads(text)["definitions"]
    return defs


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _types_match(value: Any, allowed: str | list[str]) -> bool:
    kinds = [allowed] if isinstance(allowed, str) else allowed
    got = _json_type(value)
    return got in kinds or (got == "integer" and "number" in kinds)


def _join(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


_QUANTITY = re.compile(r"[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)(([KMGTPE]i)|[numkMGTPE]|[eE][+-]?[0-9]+)?")
_STANDARD_RESOURCES = re.compile(r"cpu|memory|ephemeral-storage|storage|hugepages-[0-9A-Za-z]+")
_FILE_MODES = ("defaultMode", "mode")
_INT_BOUNDS = {"int32": 2**31, "int64": 2**63}


def _quantity(value: Any, path: str) -> list[Problem]:
    if isinstance(value, str) and (len(value) > 40 or not _QUANTITY.fullmatch(value)):
        return [Problem(path, f"{_short(value)} is not a Kubernetes quantity such as 500m, 2, 512Mi or 10Gi")]
    if isinstance(value, (int, float)) and not 0 <= value < 2**63:
        return [Problem(path, f"{value!r} is not a quantity Kubernetes holds")]
    return []


def _env_source(value: dict[str, Any], path: str) -> list[Problem]:
    given = sorted(k for k, v in value.items() if v is not None)
    if len(given) != 1:
        return [
            Problem(
                path, f"exactly one of configMapKeyRef, fieldRef, resourceFieldRef, secretKeyRef; got {given or 'none'}"
            )
        ]
    return []


def _spread(value: dict[str, Any], path: str) -> list[Problem]:
    skew = value.get("maxSkew")
    return [Problem(_join(path, "maxSkew"), f"{skew} must be at least 1")] if isinstance(skew, int) and skew < 1 else []


def _node_selector(value: dict[str, Any], path: str) -> list[Problem]:
    if not value.get("nodeSelectorTerms"):
        return [
            Problem(_join(path, "nodeSelectorTerms"), "at least one term is required (an empty list matches no Node)")
        ]
    return []


def _toleration(value: dict[str, Any], path: str) -> list[Problem]:
    out = []
    if value.get("tolerationSeconds") is not None and value.get("effect") != "NoExecute":
        out.append(Problem(_join(path, "tolerationSeconds"), "only with effect NoExecute"))
    if value.get("operator") == "Exists" and value.get("value"):
        out.append(Problem(_join(path, "value"), "must be empty when operator is Exists"))
    return out


def _resources(value: dict[str, Any], path: str) -> list[Problem]:
    out = []
    for part in ("requests", "limits"):
        for name in value.get(part) or {}:
            prefix, _, short = str(name).rpartition("/")
            extended = bool(prefix) and not prefix.endswith("kubernetes.io") and not name.startswith("requests.")
            if not (
                _STANDARD_RESOURCES.fullmatch(name)
                or (extended and re.fullmatch(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?", short))
            ):
                out.append(
                    Problem(
                        _join(_join(path, part), name),
                        "not a resource name: cpu, memory, ephemeral-storage, hugepages-<size>, or an extended "
                        "resource `<domain>/<name>` outside kubernetes.io",
                    )
                )
    return out


def _file_modes(value: dict[str, Any], path: str) -> list[Problem]:
    return [
        Problem(_join(path, key), f"{value[key]} is not a file mode (0 to 0o777, 511 in decimal)")
        for key in _FILE_MODES
        if isinstance(value.get(key), int) and not 0 <= value[key] <= 0o777
    ]


def _label_problems(key: Any, value: Any, path: str) -> list[Problem]:
    """A label key and, when given, its value, as the API server checks them in selectors."""
    out = []
    for check, item in ((_label_key, key), (_label_value, value)):
        if isinstance(item, str):
            try:
                check(item)
            except ValueError as err:
                out.append(Problem(path, str(err)))
    return out


def _label_selector(value: dict[str, Any], path: str) -> list[Problem]:
    """matchLabels keys and values, matchExpressions keys and In/NotIn values: label syntax."""
    out = []
    for key, val in (value.get("matchLabels") or {}).items():
        out += _label_problems(key, val, _join(_join(path, "matchLabels"), key))
    for i, expr in enumerate(value.get("matchExpressions") or ()):
        if not isinstance(expr, dict):
            continue
        where = _join(_join(path, "matchExpressions"), i)
        out += _label_problems(expr.get("key"), None, _join(where, "key"))
        if expr.get("operator") in ("In", "NotIn"):
            for j, val in enumerate(expr.get("values") or ()):
                out += _label_problems(None, val, _join(_join(where, "values"), j))
    return out


def _weight(value: dict[str, Any], path: str) -> list[Problem]:
    """A preferred term's weight: 1 to 100."""
    weight = value.get("weight")
    if isinstance(weight, int) and not 1 <= weight <= 100:
        return [Problem(_join(path, "weight"), f"{weight} is not a weight from 1 to 100")]
    return []


def _topology_key(value: dict[str, Any], path: str) -> list[Problem]:
    """A pod (anti-)affinity term's or spread constraint's topologyKey: a non-empty label key."""
    key = value.get("topologyKey")
    if key == "":
        return [Problem(_join(path, "topologyKey"), "required: a Node label key such as kubernetes.io/hostname")]
    return _label_problems(key, None, _join(path, "topologyKey"))


def _spread_rules(value: dict[str, Any], path: str) -> list[Problem]:
    return _spread(value, path) + _topology_key(value, path)


def _linux_only(value: dict[str, Any], path: str) -> list[Problem]:
    """Windows options on a Linux pod: the API server refuses them beside Linux-only fields, and no
    sunk pod runs on Windows."""
    if value.get("windowsOptions") is not None:
        return [Problem(_join(path, "windowsOptions"), "Windows options; sunk's pods run on Linux Nodes only")]
    return []


def _key_to_path(value: dict[str, Any], path: str) -> list[Problem]:
    """A volume item: a key Kubernetes allows (not '.', '..' or '..*': the kubelet keeps its own
    `..data` link there) and a relative path without '..' segments; its file mode."""
    out = _file_modes(value, path)
    key = value.get("key")
    problem = object_key_problem(key, "a key Kubernetes allows") if isinstance(key, str) else None
    if problem is not None:
        out.append(Problem(_join(path, "key"), problem))
    item = value.get("path")
    if isinstance(item, str) and (not item or item.startswith("/") or ".." in item.split("/") or item.startswith("..")):
        out.append(
            Problem(_join(path, "path"), f"{item!r} must be a relative path without '..' (a file inside the volume)")
        )
    return out


_RULES: dict[str, Any] = {
    "io.k8s.apimachinery.pkg.api.resource.Quantity": _quantity,
    "io.k8s.api.core.v1.EnvVarSource": _env_source,
    "io.k8s.api.core.v1.TopologySpreadConstraint": _spread_rules,
    "io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector": _label_selector,
    "io.k8s.api.core.v1.WeightedPodAffinityTerm": _weight,
    "io.k8s.api.core.v1.PreferredSchedulingTerm": _weight,
    "io.k8s.api.core.v1.PodAffinityTerm": _topology_key,
    "io.k8s.api.core.v1.SecurityContext": _linux_only,
    "io.k8s.api.core.v1.PodSecurityContext": _linux_only,
    "io.k8s.api.core.v1.KeyToPath": _key_to_path,
    "io.k8s.api.core.v1.NodeSelector": _node_selector,
    "io.k8s.api.core.v1.Toleration": _toleration,
    "io.k8s.api.core.v1.ResourceRequirements": _resources,
    "io.k8s.api.core.v1.VolumeResourceRequirements": _resources,
    **dict.fromkeys(
        (
            "io.k8s.api.core.v1.SecretVolumeSource", "io.k8s.api.core.v1.ConfigMapVolumeSource",
            "io.k8s.api.core.v1.DownwardAPIVolumeSource", "io.k8s.api.core.v1.ProjectedVolumeSource",
            "io.k8s.api.core.v1.DownwardAPIVolumeFile",
        ),
        _file_modes,
    ),
}  # fmt: skip
"""Value rules of the API server beyond the schema's shape, by definition."""


def _check(value: Any, node: Schema, path: str, out: list[Problem]) -> None:
    """Every problem the schema `node` finds in `value`, appended to `out`, in three phases: the
    node is resolved (a definition with its own value rule may settle the value whole); the value
    itself is checked (integer format, one-of, type, enum), and a mismatch there ends it; then
    its fields or items are checked in turn."""
    node, settled = _resolve_ref(value, node, path, out)
    if settled or not _check_value(value, node, path, out):
        return
    if isinstance(value, dict):
        _check_fields(value, node, path, out)
    elif isinstance(value, list) and isinstance(node.get("items"), dict):
        for i, item in enumerate(value):
            _check(item, node["items"], _join(path, i), out)


def _resolve_ref(value: Any, node: Schema, path: str, out: list[Problem]) -> tuple[Schema, bool]:
    """`node`, or the definition its `$ref` names; True when that definition's value rule found
    problems (they are in `out`, and nothing deeper is checked)."""
    ref = node.get("$ref")
    if ref is None:
        return node, False
    name = ref.rsplit("/", 1)[-1]
    node = definitions()[name]
    rule = _RULES.get(name)
    if rule is not None and (isinstance(value, dict) or name.endswith("Quantity")):
        found = rule(value, path)
        if found:
            out += found
            return node, True
    return node, False


def _check_value(value: Any, node: Schema, path: str, out: list[Problem]) -> bool:
    """The value against the node's own constraints; False when it is the wrong kind of value
    altogether (its fields are then not worth checking)."""
    bound = _INT_BOUNDS.get(node.get("format", ""))
    if bound is not None and isinstance(value, int) and not isinstance(value, bool) and not -bound <= value < bound:
        out.append(Problem(path, f"{value} does not fit a {node['format']}"))
        return False
    branches = node.get("oneOf")
    if branches is not None:
        if not any(_types_match(value, b.get("type", [])) for b in branches):
            kinds = " or ".join(sorted({str(t) for b in branches for t in _listed(b.get("type")) if t != "null"}))
            out.append(Problem(f"{path}", f"{kinds} is required, not {_json_type(value)} ({value!r})"))
        return False
    kind = node.get("type")
    if kind is not None and not _types_match(value, kind):
        want = " or ".join(t for t in _listed(kind) if t != "null")
        out.append(Problem(f"{path}", f"{want} is required, not {_json_type(value)} ({_short(value)})"))
        return False
    if "enum" in node and value not in node["enum"] and value is not None:
        out.append(Problem(f"{path}", f"{value!r} is not one of {', '.join(map(str, node['enum']))}"))
    return True


def _check_fields(value: dict[str, Any], node: Schema, path: str, out: list[Problem]) -> None:
    """Required fields present; each field checked against its property or the map's value
    schema; a field the object does not know is named with the ones it does."""
    props: dict[str, Schema] = node.get("properties") or {}
    for key in node.get("required") or ():
        if key not in value:
            out.append(Problem(_join(path, key), "required field is missing"))
    extra = node.get("additionalProperties")
    for key, item in value.items():
        if key in props:
            _check(item, props[key], _join(path, key), out)
        elif isinstance(extra, dict):
            _check(item, extra, _join(path, key), out)
        elif props or extra is False:
            known = ", ".join(sorted(props)) or "none"
            out.append(Problem(_join(path, key), f"unknown field; known: {known}"))


def _listed(kind: Any) -> list[str]:
    if kind is None:
        return []
    return [kind] if isinstance(kind, str) else list(kind)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def problems(kind: str, value: Any, path: str = "") -> list[Problem]:
    """What in `value` the Kubernetes schema of `kind` (a key of ROOTS) refuses, each problem
    with its path under `path`."""
    out: list[Problem] = []
    _check(value, {"$ref": f"#/definitions/{ROOTS[kind]}"}, path, out)
    return out


def check(kind: str, value: Any) -> Any:
    """`value` if the schema of `kind` accepts it; else Problems listing every problem, each
    with its path relative to the value (sunk.spec.errors joins it to the field's)."""
    found = problems(kind, value)
    if found:
        raise Problems(found)
    return value
