"""Claims on the real control plane (runtime/local/provisioner.py): kube-controller-manager's
PersistentVolume controller binds what our provisioner makes. A claim naming no class gets the
default one (the API server's DefaultStorageClass admission), a claim of a class the render names
gets its own, each is Bound to a host-folder volume; deleting the claim reclaims the volume and its
folder. On demand (marker `controlplane`, `make test-controlplane`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from sunk.runtime.local.controlplane import ControlPlane
from sunk.runtime.local.provisioner import HttpApi, Provisioner, storage_classes

from tests.support.controlplane import get, kubectl, wait_for

pytestmark = pytest.mark.controlplane


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ControlPlane, Path]]:
    folder = tmp_path_factory.mktemp("provisioner")
    with ControlPlane(folder / "plane") as plane:
        pki = plane.folder / "pki"
        api = HttpApi(plane.server, pki / "ca.crt", pki / "admin.crt", pki / "admin.key")
        provisioner = Provisioner(api, folder / "cluster", period=0.5)
        provisioner.start()
        try:
            yield plane, folder / "cluster"
        finally:
            provisioner.close()
            api.close()


def claim(name: str, klass: str | None, mode: str) -> str:
    spec: dict[str, Any] = {"accessModes": [mode], "resources": {"requests": {"storage": "2Gi"}}}
    if klass:
        spec["storageClassName"] = klass
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "namespace": "default"},
            "spec": spec,
        }
    )


def test_claims_bind_to_host_folders_and_a_deleted_claim_takes_its_volume(cluster: tuple[ControlPlane, Path]) -> None:
    plane, root = cluster
    kubectl(plane, "apply", "-f", "-", stdin=yaml.safe_dump_all(storage_classes(["nfs-client"])))
    kubectl(plane, "apply", "-f", "-", stdin=claim("state", None, "ReadWriteMany"))
    kubectl(plane, "apply", "-f", "-", stdin=claim("home", "nfs-client", "ReadWriteOnce"))

    def bound(name: str) -> dict[str, Any] | None:
        pvc = get(plane, "pvc", "-n", "default", name)
        return pvc if pvc["status"].get("phase") == "Bound" else None

    state = wait_for("state Bound", lambda: bound("state"))
    home = wait_for("home Bound", lambda: bound("home"))
    # DefaultStorageClass admission gave the classless claim the default class.
    assert state["spec"]["storageClassName"] == "local-path"
    assert state["spec"]["volumeName"] == f"pvc-{state['metadata']['uid']}"
    assert state["status"]["accessModes"] == ["ReadWriteMany"]
    assert state["status"]["capacity"] == {"storage": "2Gi"}
    volume = get(plane, "pv", home["spec"]["volumeName"])
    assert volume["status"]["phase"] == "Bound"
    assert volume["spec"]["storageClassName"] == "nfs-client"
    assert volume["spec"]["hostPath"]["path"] == str(root / "claims" / "default" / "home")

    folder = Path(volume["spec"]["hostPath"]["path"])
    folder.mkdir(parents=True)  # as the node agent does when a pod mounts the claim
    (folder / "data").write_text("kept until the claim goes")
    kubectl(plane, "delete", "pvc", "-n", "default", "home")
    wait_for(
        "the released volume reclaimed",
        lambda: not any(v["metadata"]["name"] == volume["metadata"]["name"] for v in get(plane, "pv")["items"]),
    )
    assert not folder.exists()
    assert get(plane, "pv", state["spec"]["volumeName"])["status"]["phase"] == "Bound"
