"""The Kubernetes definitions sunk ships (sunk/spec/kubernetes_schema.json) are kubernetes-validate's,
and the checker over them agrees with kubernetes-validate on what it accepts and refuses."""

from __future__ import annotations

import copy
import json
from importlib.metadata import version
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest

from sunk.spec import kubeschema

SHIPPED = Path(kubeschema.__file__).with_name(kubeschema.SCHEMA_FILE)


def _strict_definitions() -> dict[str, Any]:
    folder = Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema"
    path = folder / f"v{kubeschema.KUBERNETES_VERSION}.0-local-strict" / "_definitions.json"
    defs: dict[str, Any] = json.loads(path.read_text())["$defs"]
    return defs


def _strip(node: Any) -> Any:
    """Without descriptions; `$ref`s pointing into the one `definitions` map."""
    if isinstance(node, dict):
        out = {}
        for key, value in node.items():
            if key == "description" or key.startswith("x-kubernetes-"):
                continue
            if key == "$ref":
                value = "#/definitions/" + str(value).rsplit("/", 1)[-1]
            out[key] = _strip(value)
        return out
    if isinstance(node, list):
        return [_strip(v) for v in node]
    return node


def extract() -> str:
    """The definitions ROOTS reach, from kubernetes-validate's strict schema, as shipped."""
    defs = _strict_definitions()
    wanted: dict[str, Any] = {}
    todo = list(kubeschema.ROOTS.values())
    while todo:
        name = todo.pop()
        if name in wanted:
            continue
        wanted[name] = _strip(defs[name])
        text = json.dumps(defs[name])
        todo += [ref.split('"', 1)[0] for ref in text.split("#/$defs/")[1:]]
    doc = {
        "source": f"kubernetes-validate {version('kubernetes-validate')}, Kubernetes {kubeschema.KUBERNETES_VERSION}, strict",
        "definitions": dict(sorted(wanted.items())),
    }
    return json.dumps(doc, indent=0, sort_keys=True, separators=(",", ":")) + "\n"


def test_shipped_definitions_are_kubernetes_validates(request: pytest.FixtureRequest) -> None:
    text = extract()
    if request.config.getoption("--update-golden"):
        SHIPPED.write_text(text)
    assert SHIPPED.read_text() == text, (
        f"{SHIPPED} differs from kubernetes-validate's schema; rerun with --update-golden"
    )


def _volume_pod(volume: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "x"}], "volumes": [volume]},
    }


GOOD_VOLUMES: list[dict[str, Any]] = [
    {"name": "data", "nfs": {"server": "10.0.0.5", "path": "/exports/data", "readOnly": True}},
    {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "64Gi"}},
    {"name": "csi", "csi": {"driver": "secrets-store.csi.k8s.io", "readOnly": True, "volumeAttributes": {"a": "b"}}},
    {"name": "cm", "configMap": {"name": "x", "items": [{"key": "k", "path": "p", "mode": 420}]}},
    {"name": "sec", "secret": {"secretName": "x", "defaultMode": 256}},
    {"name": "pvc", "persistentVolumeClaim": {"claimName": "c"}},
    {"name": "host", "hostPath": {"path": "/mnt/x", "type": "Directory"}},
    {
        "name": "eph",
        "ephemeral": {
            "volumeClaimTemplate": {
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
            }
        },
    },
]
BAD_VOLUMES: list[tuple[dict[str, Any], str]] = [
    ({"name": "data", "nfs": {"path": "/exports"}}, "nfs.server: required field is missing"),
    ({"name": "data", "nfs": {"server": "a", "path": "/b", "readonly": True}}, "nfs.readonly: unknown field"),
    ({"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": True}}, "emptyDir.sizeLimit: "),
    (
        {"name": "cm", "configMap": {"name": "x", "items": [{"key": "k", "path": "p", "mode": "0644"}]}},
        "configMap.items[0].mode: integer is required",
    ),
    ({"name": "x", "csi": "driver"}, "csi: object is required, not string"),
    ({"name": "x", "gluster": {}}, "gluster: unknown field"),
]


@pytest.mark.parametrize("volume", GOOD_VOLUMES, ids=lambda v: str(v["name"]))
def test_checker_accepts_what_kubernetes_validate_accepts(volume: dict[str, Any]) -> None:
    kubernetes_validate.validate(_volume_pod(volume), kubeschema.KUBERNETES_VERSION, strict=True)
    assert kubeschema.problems("Volume", volume) == []


@pytest.mark.parametrize(("volume", "expected"), BAD_VOLUMES, ids=lambda v: str(v)[:30])
def test_checker_refuses_what_kubernetes_validate_refuses(volume: dict[str, Any], expected: str) -> None:
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(_volume_pod(copy.deepcopy(volume)), kubeschema.KUBERNETES_VERSION, strict=True)
    found = kubeschema.problems("Volume", volume)
    assert any(f"{p.path}: {p.message}".startswith(expected) for p in found), found


def test_every_root_resolves() -> None:
    for kind in kubeschema.ROOTS:
        assert kubeschema.problems(kind, {}) == [] or all(
            p.message == "required field is missing" or "exactly one of" in p.message
            for p in kubeschema.problems(kind, {})
        )
