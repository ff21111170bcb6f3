"""Claims provisioned as host folders, for the real control plane (issue 37's switch, item 9).

kube-controller-manager's PersistentVolume controller binds a claim to a volume but makes no volume:
a dynamic claim waits for the provisioner its StorageClass names. This is that provisioner for the
local cluster, as rancher's local-path or the host-path one of kube-controller-manager's test mode
are elsewhere: a claim of one of our classes gets a `hostPath` PersistentVolume on the cluster's
folder (`volumes.pvc_dir`, the folder the node agent mounts for the claim), pre-bound to it by
`claimRef`, which the PV controller then binds. A volume of ours that its claim released is
deleted with its folder when its reclaim policy is Delete (our classes' default), kept when Retain.

`storage_classes(names)` gives the classes a render needs: `local-path`, marked the default one (the
API server's DefaultStorageClass admission gives it to a claim naming none), and one per class name
the render's claims use (an `nfs-client` or `gp3` of a real cluster), each provisioned here. The
binding mode is Immediate: every Node of the local cluster is the same host, so a folder serves a
pod on any of them, and ReadWriteMany is a plain shared folder (no NFS semantics: no locking across
hosts, no attribute caching).

`plan()` is pure (the claims, volumes and classes as the API has them, in; what to create and what to
delete, out); `Provisioner` is its thin edge: a thread that lists the three every second through
`HttpApi` (the admin's certificate: a Node's may not list claims) and acts on the plan.

Not modelled: WaitForFirstConsumer and a volume's nodeAffinity, capacity (a claim's size is recorded,
not enforced), resizing, volume modes other than Filesystem, snapshots and data sources.
"""

from __future__ import annotations

import logging
import shutil
import ssl
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import httpx

from sunk import keys

from .apitypes import ApiError
from .resources import Resource
from .volumes import pvc_dir

log = logging.getLogger("sunk.local.provisioner")

DEFAULT_CLASS = "local-path"
PROVISIONED_BY = "pv.kubernetes.io/provisioned-by"
DEFAULT_ANNOTATION = "storageclass.kubernetes.io/is-default-class"

CLAIMS = Resource("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", True, status=True)
PERSISTENT_VOLUMES = Resource("", "v1", "persistentvolumes", "PersistentVolume", False, status=True)
STORAGE_CLASSES = Resource("storage.k8s.io", "v1", "storageclasses", "StorageClass", False)

Obj = dict[str, Any]


def storage_classes(names: Iterable[str] = ()) -> list[Obj]:
    """`local-path` (the default) and a class of ours for every other name in `names`."""
    wanted = [DEFAULT_CLASS, *sorted({n for n in names if n and n != DEFAULT_CLASS})]
    return [
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {
                "name": name,
                **({"annotations": {DEFAULT_ANNOTATION: "true"}} if name == DEFAULT_CLASS else {}),
            },
            "provisioner": keys.LOCAL_PROVISIONER,
            "reclaimPolicy": "Delete",
            "volumeBindingMode": "Immediate",
        }
        for name in wanted
    ]


def claim_classes(manifests: Iterable[Mapping[str, Any]]) -> set[str]:
    """The storage class names a render's claims use: its PersistentVolumeClaims' and its
    StatefulSets' volumeClaimTemplates'."""
    found: set[str] = set()
    for m in manifests:
        if m.get("kind") == "PersistentVolumeClaim":
            specs = [m.get("spec") or {}]
        elif m.get("kind") == "StatefulSet":
            specs = [t.get("spec") or {} for t in (m.get("spec") or {}).get("volumeClaimTemplates") or []]
        else:
            continue
        found |= {str(s["storageClassName"]) for s in specs if s.get("storageClassName")}
    return found


@dataclass(frozen=True)
class Provision:
    """Create `volume`, pre-bound to its claim."""

    volume: Obj


@dataclass(frozen=True)
class Reclaim:
    """Delete the released volume `name` and its folder."""

    name: str
    folder: Path


def volume_name(claim: Mapping[str, Any]) -> str:
    """`pvc-<claim uid>`, as the in-tree and CSI provisioners name theirs."""
    return f"pvc-{claim['metadata']['uid']}"


def _ours(classes: Mapping[str, Mapping[str, Any]], name: str | None) -> Mapping[str, Any] | None:
    found = classes.get(name or "")
    return found if found is not None and found.get("provisioner") == keys.LOCAL_PROVISIONER else None


def _volume(claim: Mapping[str, Any], klass: Mapping[str, Any], root: Path) -> Obj:
    meta, spec = claim["metadata"], claim.get("spec") or {}
    storage = ((spec.get("resources") or {}).get("requests") or {}).get("storage", "1Gi")
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": volume_name(claim), "annotations": {PROVISIONED_BY: keys.LOCAL_PROVISIONER}},
        "spec": {
            "capacity": {"storage": storage},
            "accessModes": spec.get("accessModes") or ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": klass.get("reclaimPolicy") or "Delete",
            "storageClassName": klass["metadata"]["name"],
            "volumeMode": "Filesystem",
            "hostPath": {"path": str(pvc_dir(root, meta["namespace"], meta["name"])), "type": "DirectoryOrCreate"},
            "claimRef": {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "namespace": meta["namespace"],
                "name": meta["name"],
                "uid": meta["uid"],
            },
        },
    }


def plan(
    claims: Iterable[Mapping[str, Any]],
    volumes: Iterable[Mapping[str, Any]],
    classes: Iterable[Mapping[str, Any]],
    root: Path,
) -> list[Provision | Reclaim]:
    """What to do now: the volumes to provision (`_provisions`), then the volumes to reclaim
    (`_reclaims`). Volumes of other provisioners are never touched."""
    volumes = list(volumes)
    return [*_provisions(claims, volumes, {c["metadata"]["name"]: c for c in classes}, root), *_reclaims(volumes)]


def _provisions(
    claims: Iterable[Mapping[str, Any]],
    volumes: list[Mapping[str, Any]],
    by_class: Mapping[str, Mapping[str, Any]],
    root: Path,
) -> list[Provision | Reclaim]:
    """A volume for each Pending claim of one of our classes that has none: not one naming a
    volume itself, nor one being deleted."""
    claimed = {((v.get("spec") or {}).get("claimRef") or {}).get("uid") for v in volumes}
    out: list[Provision | Reclaim] = []
    for claim in claims:
        spec, meta = claim.get("spec") or {}, claim["metadata"]
        klass = _ours(by_class, spec.get("storageClassName"))
        pending = ((claim.get("status") or {}).get("phase") or "Pending") == "Pending"
        wanted = pending and not spec.get("volumeName") and not meta.get("deletionTimestamp")
        if klass is not None and wanted and meta["uid"] not in claimed:
            out.append(Provision(_volume(claim, klass, root)))
    return out


def _reclaims(volumes: list[Mapping[str, Any]]) -> list[Provision | Reclaim]:
    """Each of our volumes that its claim released, under the Delete policy."""
    out: list[Provision | Reclaim] = []
    for volume in volumes:
        spec = volume.get("spec") or {}
        ours = (volume["metadata"].get("annotations") or {}).get(PROVISIONED_BY) == keys.LOCAL_PROVISIONER
        released = (volume.get("status") or {}).get("phase") in ("Released", "Failed")
        if ours and released and spec.get("persistentVolumeReclaimPolicy") == "Delete":
            out.append(Reclaim(volume["metadata"]["name"], Path(spec["hostPath"]["path"])))
    return out


class Api(Protocol):
    """What the provisioner asks of the API server."""

    def list(self, res: Resource) -> list[Obj]: ...
    def create(self, res: Resource, obj: Obj) -> None: ...
    def delete(self, res: Resource, name: str) -> None: ...


class HttpApi:
    """`Api` over HTTPS with a client certificate (the local cluster's admin, as kube-controller-
    manager's own host-path provisioner acts with the controller manager's rights)."""

    def __init__(self, server: str, ca: Path, cert: Path, key: Path) -> None:
        context = ssl.create_default_context(cafile=str(ca))
        context.load_cert_chain(str(cert), str(key))
        self.client = httpx.Client(base_url=server, verify=context, timeout=30)

    @staticmethod
    def _path(res: Resource) -> str:
        return f"/api/{res.version}/{res.plural}" if not res.group else f"/apis/{res.group}/{res.version}/{res.plural}"

    def _check(self, answer: httpx.Response) -> httpx.Response:
        if answer.status_code >= 300:
            status = answer.json() if answer.headers.get("content-type", "").startswith("application/json") else {}
            raise ApiError(answer.status_code, str(status.get("reason", "Unknown")), str(status.get("message", "")))
        return answer

    def list(self, res: Resource) -> list[Obj]:
        items: list[Obj] = self._check(self.client.get(self._path(res))).json()["items"]
        return items

    def create(self, res: Resource, obj: Obj) -> None:
        self._check(self.client.post(self._path(res), json=obj))

    def delete(self, res: Resource, name: str) -> None:
        self._check(self.client.delete(f"{self._path(res)}/{name}"))

    def close(self) -> None:
        self.client.close()


class Provisioner:
    """`plan()` acted on every `period` seconds, on a thread of its own (three lists of a local
    cluster's API server per pass: milliseconds)."""

    def __init__(self, api: Api, root: Path, period: float = 1.0) -> None:
        self.api = api
        self.root = root
        self.period = period
        self._closed = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="provisioner", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._closed.set()
        if self._thread is not None:
            self._thread.join(10)

    def _run(self) -> None:
        while not self._closed.is_set():
            try:
                self.reconcile()
            except (ApiError, httpx.HTTPError) as error:  # the API server restarting: the next pass
                log.warning("provisioner: %s", error)
            self._closed.wait(self.period)

    def reconcile(self) -> None:
        actions = plan(
            self.api.list(CLAIMS), self.api.list(PERSISTENT_VOLUMES), self.api.list(STORAGE_CLASSES), self.root
        )
        for action in actions:
            try:
                if isinstance(action, Provision):
                    self.api.create(PERSISTENT_VOLUMES, action.volume)
                    ref = action.volume["spec"]["claimRef"]
                    log.info(
                        "provisioned %s for %s/%s", action.volume["metadata"]["name"], ref["namespace"], ref["name"]
                    )
                else:
                    self._reclaim(action)
            except (ApiError, OSError) as error:  # the next pass redoes a step a race lost
                log.warning("%s: %s", action, error)

    def _reclaim(self, action: Reclaim) -> None:
        # Only a folder under the cluster's own claims folder is ever removed.
        if action.folder.resolve().is_relative_to((self.root / "claims").resolve()):
            shutil.rmtree(action.folder, ignore_errors=True)
        self.api.delete(PERSISTENT_VOLUMES, action.name)
        log.info("reclaimed %s (its folder deleted)", action.name)
