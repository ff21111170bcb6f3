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
shape, not the API server's semantic rules (a `medium: Disk` passes); sunk adds those it needs
(quantities, names) in the models that use these types."""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

from sunk.spec.problem import Problem, Problems

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


def _check(value: Any, node: Schema, path: str, out: list[Problem]) -> None:
    ref = node.get("$ref")
    if ref is not None:
        node = definitions()[ref.rsplit("/", 1)[-1]]
    branches = node.get("oneOf")
    if branches is not None:
        if not any(_types_match(value, b.get("type", [])) for b in branches):
            kinds = " or ".join(sorted({str(t) for b in branches for t in _listed(b.get("type")) if t != "null"}))
            out.append(Problem(f"{path}", f"{kinds} is required, not {_json_type(value)} ({value!r})"))
        return
    kind = node.get("type")
    if kind is not None and not _types_match(value, kind):
        want = " or ".join(t for t in _listed(kind) if t != "null")
        out.append(Problem(f"{path}", f"{want} is required, not {_json_type(value)} ({_short(value)})"))
        return
    if "enum" in node and value not in node["enum"] and value is not None:
        out.append(Problem(f"{path}", f"{value!r} is not one of {', '.join(map(str, node['enum']))}"))
    if isinstance(value, dict):
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
    elif isinstance(value, list) and isinstance(node.get("items"), dict):
        for i, item in enumerate(value):
            _check(item, node["items"], _join(path, i), out)


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
