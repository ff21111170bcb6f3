"""The PersistentVolumeClaim controller: every claim is Bound at once, with the capacity it
requests (1Gi when it names none); the node agent makes its folder (volumes.py).

Not modelled: PersistentVolumes, StorageClasses and their provisioners, WaitForFirstConsumer
(a claim binds before any pod uses it), resizing, retention policies."""

from __future__ import annotations

from ..store import Store


def reconcile(store: Store) -> None:
    res = store.resource("v1/persistentvolumeclaims")
    for pvc in list(store.items(res)):
        if (pvc.get("status") or {}).get("phase") != "Bound":
            meta = pvc["metadata"]
            storage = (((pvc.get("spec") or {}).get("resources") or {}).get("requests") or {}).get("storage", "1Gi")
            status = {
                "phase": "Bound",
                "accessModes": (pvc.get("spec") or {}).get("accessModes") or [],
                "capacity": {"storage": storage},
            }
            store.patch(res, meta["namespace"], meta["name"], "merge", {"status": status}, "status")
