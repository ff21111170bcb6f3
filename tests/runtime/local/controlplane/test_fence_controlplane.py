"""The fence (sunk.runtime.fence) against the real kube-apiserver: the Lease written through its
rendered Role only, two controller pods' fences contending, and a pod force-deleted while its
slurmctld runs on: its bound ServiceAccount token stops working, its fence can't renew, and the
slurmctld stand-in is stopped by SlurmctldPrimaryOnProg's watcher before the other takes the Lease.

On demand (marker `controlplane`, `make test-controlplane`), like the module beside it. The fences'
decisions run on a fake monotonic clock stepped by the test; the API server and the tokens are real."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sunk.runtime.fence.lease import Fence, KubeLeases, Marks
from sunk.runtime.local.controlplane import ControlPlane

from sunk import naming
from sunk.fence import Refuse, Renew, Stop, Take, Timing, Wait
from sunk.manifests.controller import fence_access
from sunk.render.script import render
from tests.support.controlplane import get, kubectl, kubectl_run, wait_for
from tests.support.specs import build_spec

pytestmark = pytest.mark.controlplane

SPEC = build_spec(
    controller={"replicas": 2, "stateStorage": {"accessMode": "ReadWriteMany", "storageClass": "nfs-client"}}
)
NS = SPEC.ns
LEASE = naming.controller_fence(SPEC)
TIMING = Timing(duration=15, renew_deadline=10, grace=15)


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    assert shutil.which("kubectl"), "the real kubectl must be on the PATH"
    with ControlPlane(tmp_path_factory.mktemp("fence")) as cp:
        kubectl(cp, "create", "namespace", NS)
        kubectl(
            cp, "apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": fence_access(SPEC)})
        )
        yield cp


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


class Pod:
    """One controller pod: its API object, a token bound to it, its marks and its fence."""

    def __init__(self, plane: ControlPlane, name: str, folder: Path, clock: Clock) -> None:
        from kubernetes import client

        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"serviceAccountName": LEASE, "containers": [{"name": "fence", "image": "sunk-runtime"}]},
        }
        kubectl(plane, "apply", "-f", "-", stdin=json.dumps(pod))
        self.plane, self.name = plane, name
        self.uid = get(plane, "pod", "-n", NS, name)["metadata"]["uid"]
        token = kubectl(
            plane, "create", "token", LEASE, "-n", NS, "--duration=10m",
            "--bound-object-kind=Pod", f"--bound-object-name={name}", f"--bound-object-uid={self.uid}",
        ).strip()  # fmt: skip
        config = client.Configuration()
        config.host = plane.server
        config.ssl_ca_cert = str(plane.folder / "pki" / "ca.crt")
        config.api_key = {"authorization": f"Bearer {token}"}
        self.api = KubeLeases(NS, LEASE, client.ApiClient(config))
        self.other = KubeLeases(NS, "someone-elses", client.ApiClient(config))
        self.folder = folder / name
        self.folder.mkdir()
        self.marks = Marks(self.folder / "primary", self.folder / "fence-stop")
        self.fence = Fence(self.api, NS, LEASE, f"{name}_{self.uid}", self.marks, TIMING, clock,
                           lambda: datetime.now(UTC))  # fmt: skip
        self.slurmctld: subprocess.Popen[bytes] | None = None

    def take_control(self) -> None:
        """A slurmctld stand-in that runs the rendered SlurmctldPrimaryOnProg as slurmctld does."""
        script = render(
            "primary-mark.sh",
            MARK=str(self.marks.mark),
            STANDBY=str(self.folder / "standby"),
            STOP=str(self.marks.stop_file),
            PRIMARY="yes",
        )
        self.slurmctld = subprocess.Popen(["/bin/sh", "-c", '/bin/sh -c "$0"; exec sleep 600', script])
        wait_for(f"{self.name}'s primary mark", self.marks.mark.exists, timeout=10, interval=0.05)

    def close(self) -> None:
        if self.slurmctld is not None and self.slurmctld.poll() is None:
            self.slurmctld.kill()
            self.slurmctld.wait()


@pytest.fixture
def pods(plane: ControlPlane, tmp_path: Path) -> Iterator[tuple[Clock, Pod, Pod]]:
    kubectl_run(plane, "delete", "lease", "-n", NS, LEASE, "--ignore-not-found", check=False)
    clock = Clock()
    made = [Pod(plane, f"research-controller-{i}", tmp_path, clock) for i in (0, 1)]
    yield clock, made[0], made[1]
    for pod in made:
        pod.close()
        kubectl_run(plane, "delete", "pod", "-n", NS, pod.name, "--force", "--grace-period=0", "--ignore-not-found",
                    check=False)  # fmt: skip


def holder(plane: ControlPlane) -> str:
    return str(get(plane, "lease", "-n", NS, LEASE)["spec"].get("holderIdentity") or "")


def step(clock: Clock, seconds: float, *pods: Pod) -> list[list[Any]]:
    out = []
    end = clock.t + seconds
    while clock.t < end:
        out.append([p.fence.tick() for p in pods])
        clock.t += 2
    return out


def test_the_rendered_role_lets_a_fence_write_its_lease_and_no_other(pods: tuple[Clock, Pod, Pod]) -> None:
    _, c0, _ = pods
    assert c0.api.read() is None
    body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": LEASE, "namespace": NS},
            "spec": {"holderIdentity": "x"}}  # fmt: skip
    assert c0.api.create(body) is True
    assert c0.api.create(body) is False  # 409: it exists
    read = c0.api.read()
    assert read is not None and read["spec"]["holderIdentity"] == "x"
    stale = {**read, "spec": {"holderIdentity": "y"}}
    assert c0.api.replace(stale) is True
    assert c0.api.replace(stale) is False  # 409: its resourceVersion is gone
    with pytest.raises(Exception) as refused:
        c0.other.read()
    assert getattr(refused.value, "status", None) == 403  # resourceNames: this cluster's Lease only


def test_two_controllers_contend_and_one_holds_the_lease(plane: ControlPlane, pods: tuple[Clock, Pod, Pod]) -> None:
    """Both slurmctld took control (the orphan and the new pod): the first fence takes the Lease
    and renews it; the other waits through its grace and is refused, its slurmctld stopped."""
    clock, c0, c1 = pods
    c0.take_control()
    c1.take_control()
    assert [type(a) for a in step(clock, 2, c0, c1)[0]] == [Take, Wait]
    assert holder(plane) == f"{c0.name}_{c0.uid}"
    ticks = step(clock, 16, c0, c1)
    assert all(isinstance(t[0], Renew) for t in ticks), ticks
    assert isinstance(ticks[-1][1], Refuse), ticks
    assert c1.slurmctld is not None and c1.slurmctld.wait(10) == -signal.SIGTERM
    assert c0.slurmctld is not None and c0.slurmctld.poll() is None
    assert holder(plane) == f"{c0.name}_{c0.uid}"


def test_a_force_deleted_pods_fence_cant_renew_and_its_slurmctld_stops_before_the_other_takes(
    plane: ControlPlane, pods: tuple[Clock, Pod, Pod]
) -> None:
    clock, c0, c1 = pods
    c0.take_control()
    step(clock, 6, c0, c1)
    assert holder(plane) == f"{c0.name}_{c0.uid}"
    kubectl(plane, "delete", "pod", "-n", NS, c0.name, "--force", "--grace-period=0")
    # Its bound token dies with the pod (the API server checks the pod's uid on every request).
    wait_for("the deleted pod's token refused", lambda: _refused(c0.api), timeout=60, interval=0.5)
    renewed = clock.t - 2
    c1.take_control()
    stopped = took = None
    while took is None:
        a0, a1 = c0.fence.tick(), c1.fence.tick()
        if isinstance(a0, Stop) and stopped is None:
            stopped = clock.t
        if isinstance(a1, Take):
            took = clock.t
        assert not isinstance(a1, Refuse), a1
        clock.t += 1
        assert clock.t < 60, (a0, a1)
    assert stopped is not None and stopped - renewed >= TIMING.renew_deadline
    assert took - renewed >= TIMING.duration and took > stopped
    assert c0.slurmctld is not None and c0.slurmctld.wait(10) == -signal.SIGTERM
    assert holder(plane) == f"{c1.name}_{c1.uid}"
    assert c1.slurmctld is not None and c1.slurmctld.poll() is None


def _refused(api: KubeLeases) -> bool:
    try:
        api.read()
    except Exception as err:
        return getattr(err, "status", None) == 401
    return False
