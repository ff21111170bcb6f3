"""What the local cluster's controllers share: owner references, the template hash their pods are
labelled with, and the pod states they act on."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from ..store import Obj, Store


def template_hash(template: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(template, sort_keys=True).encode()).hexdigest()[:10]


def ready(obj: Obj) -> bool:
    """A pod's or a Node's Ready condition is True."""
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (obj.get("status") or {}).get("conditions") or []
    )


def owned(obj: Obj, owner: Obj) -> bool:
    return any(r.get("uid") == owner["metadata"]["uid"] for r in obj["metadata"].get("ownerReferences") or [])


def owner_ref(owner: Obj) -> Obj:
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def terminal(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def deleting(obj: Obj) -> bool:
    return bool(obj["metadata"].get("deletionTimestamp"))


def pods(store: Store, namespace: str) -> list[Obj]:
    return list(store.items(store.resource("v1/pods"), namespace))
