"""The local cluster's claim provisioner's plan (runtime/local/provisioner.py), pure: which claims
get a host-folder volume and which volumes are reclaimed. The real PV controller's binding of what
it creates is in tests/runtime/local/controlplane/test_provisioner.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sunk.runtime.local import provisioner
from sunk.runtime.local.provisioner import Provision, Reclaim, plan, storage_classes

from sunk import keys

ROOT = Path("/var/cluster")
CLASSES = storage_classes(["fast"])


def claim(name: str, *, klass: str | None = "local-path", phase: str = "Pending", **spec: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}"},
        "spec": {
            "accessModes": ["ReadWriteMany"],
            "resources": {"requests": {"storage": "5Gi"}},
            **({"storageClassName": klass} if klass is not None else {}),
            **spec,
        },
        "status": {"phase": phase},
    }
    return out


def test_the_classes_are_the_default_and_each_name_the_render_uses_once() -> None:
    classes = storage_classes(["nfs-client", "local-path", "nfs-client", ""])
    assert [c["metadata"]["name"] for c in classes] == ["local-path", "nfs-client"]
    assert classes[0]["metadata"]["annotations"] == {"storageclass.kubernetes.io/is-default-class": "true"}
    assert "annotations" not in classes[1]["metadata"]
    assert {c["provisioner"] for c in classes} == {keys.LOCAL_PROVISIONER}


def test_a_pending_claim_of_our_class_gets_a_volume_pre_bound_to_it_on_its_folder() -> None:
    (action,) = plan([claim("state", klass="fast")], [], CLASSES, ROOT)
    assert isinstance(action, Provision)
    volume = action.volume
    assert volume["metadata"]["name"] == "pvc-uid-state"
    assert volume["spec"]["claimRef"] == {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "namespace": "ns",
        "name": "state",
        "uid": "uid-state",
    }
    assert volume["spec"]["hostPath"]["path"] == "/var/cluster/claims/ns/state"
    assert volume["spec"]["capacity"] == {"storage": "5Gi"}
    assert volume["spec"]["accessModes"] == ["ReadWriteMany"]
    assert volume["spec"]["storageClassName"] == "fast"
    assert volume["spec"]["persistentVolumeReclaimPolicy"] == "Delete"


def test_claims_left_alone() -> None:
    foreign = {**storage_classes()[0], "metadata": {"name": "ebs"}, "provisioner": "ebs.csi.aws.com"}
    claims = [
        claim("bound", phase="Bound"),
        claim("static", klass=""),  # "" asks for a volume made by hand
        claim("no-class", klass=None),  # no default class when it was made
        claim("unknown", klass="gp3"),
        claim("theirs", klass="ebs"),
        claim("named", volumeName="pv-by-hand"),
        {**claim("going"), "metadata": {**claim("going")["metadata"], "deletionTimestamp": "2026-12-05T00:00:00Z"}},
    ]
    assert plan(claims, [], [*CLASSES, foreign], ROOT) == []


def test_a_claim_whose_volume_exists_gets_no_second_one() -> None:
    first = plan([claim("a")], [], CLASSES, ROOT)
    assert len(first) == 1
    made = first[0]
    assert isinstance(made, Provision)
    assert plan([claim("a")], [made.volume], CLASSES, ROOT) == []


def test_our_released_volumes_are_reclaimed_under_delete_and_kept_under_retain() -> None:
    (made,) = plan([claim("a"), claim("b")][:1], [], CLASSES, ROOT)
    assert isinstance(made, Provision)
    released = {**made.volume, "status": {"phase": "Released"}}
    kept = {**released, "metadata": {**released["metadata"], "name": "pvc-kept"}}
    kept["spec"] = {**released["spec"], "persistentVolumeReclaimPolicy": "Retain"}
    theirs = {**released, "metadata": {"name": "pvc-theirs"}}  # no provisioned-by annotation
    bound = {**made.volume, "status": {"phase": "Bound"}}
    assert plan([], [released, kept, theirs, bound], CLASSES, ROOT) == [
        Reclaim("pvc-uid-a", Path("/var/cluster/claims/ns/a"))
    ]


def test_the_render_s_claim_classes_from_claims_and_claim_templates() -> None:
    render = [
        {"kind": "PersistentVolumeClaim", "spec": {"storageClassName": "nfs-client"}},
        {"kind": "PersistentVolumeClaim", "spec": {}},
        {
            "kind": "StatefulSet",
            "spec": {"volumeClaimTemplates": [{"spec": {"storageClassName": "fast-ssd"}}, {"spec": {}}]},
        },
        {"kind": "ConfigMap", "data": {"storageClassName": "not-a-claim"}},
    ]
    assert provisioner.claim_classes(render) == {"nfs-client", "fast-ssd"}


class FakeApi:
    """Lists what the test put in and records writes. Can't model: the PV controller's binding,
    which the controlplane test shows on the real one."""

    def __init__(self, claims: list[dict[str, Any]], volumes: list[dict[str, Any]]) -> None:
        self.objects = {"persistentvolumeclaims": claims, "persistentvolumes": volumes, "storageclasses": CLASSES}
        self.created: list[str] = []
        self.deleted: list[str] = []

    def list(self, res: Any) -> list[dict[str, Any]]:
        return self.objects[res.plural]

    def create(self, res: Any, obj: dict[str, Any]) -> None:
        self.created.append(obj["metadata"]["name"])

    def delete(self, res: Any, name: str) -> None:
        self.deleted.append(name)


def test_the_edge_deletes_a_reclaimed_folder_only_under_the_cluster_s_claims(tmp_path: Path) -> None:
    folder = tmp_path / "claims" / "ns" / "a"
    folder.mkdir(parents=True)
    (folder / "data").write_text("x")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    volume: dict[str, Any] = {
        "metadata": {"name": "pvc-a", "annotations": {provisioner.PROVISIONED_BY: keys.LOCAL_PROVISIONER}},
        "spec": {"persistentVolumeReclaimPolicy": "Delete", "hostPath": {"path": str(folder)}},
        "status": {"phase": "Released"},
    }
    stray = {**volume, "metadata": {**volume["metadata"], "name": "pvc-b"}}
    stray["spec"] = {**volume["spec"], "hostPath": {"path": str(outside)}}
    store = FakeApi([claim("c")], [volume, stray])
    provisioner.Provisioner(store, tmp_path).reconcile()
    assert not folder.exists() and outside.exists()
    assert sorted(store.deleted) == ["pvc-a", "pvc-b"]
    assert store.created == ["pvc-uid-c"]
