"""The harness itself: nodes added and removed at runtime, secrets kept out of files and logs,
and nothing left behind after stop or a failed start."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from sunk.runtime.harness import LocalSlurm, SimNode
from sunk.runtime.harness.jail import lookup_ids

from sunk.spec.cluster import ClusterSpec
from sunk.stackfile import load_stack
from tests.support.stacks import FIXTURE_STACKS

pytestmark = pytest.mark.slurm


def _acme_with_spare_cpu_slot() -> ClusterSpec:
    spec = load_stack("acme-dev", FIXTURE_STACKS).spec
    cpu, *rest = spec.nodesets
    # Small bounds (MaxNodeCount=5) so the limit is reached after a few extra slurmd.
    cpu = cpu.model_copy(update={"replicas": 3, "max_nodes": 3})
    return spec.model_copy(update={"nodesets": [cpu, *(n.model_copy(update={"max_nodes": 2}) for n in rest)]})


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalSlurm]:
    spec = _acme_with_spare_cpu_slot()
    nodes = [SimNode("cpu-0", "cpu", {k: f"{k.rsplit('/', 1)[-1]}-a" for k in spec.topology.label_keys})]
    with LocalSlurm.start(spec, nodes, accounting=False, restapi=False, workdir=tmp_path_factory.mktemp("h")) as s:
        yield s


def test_a_node_added_at_runtime_joins_topology_after_reconfigure(small: LocalSlurm) -> None:
    keys = small.spec.topology.label_keys
    small.start_slurmd(SimNode("cpu-1", "cpu", {keys[0]: "spine-b", keys[1]: "leaf-b"}))
    assert "cpu-1" in small.files["topology.conf"]
    small.reconfigure()
    topology = small.run("scontrol", "show", "topology", check=True).stdout
    assert "SwitchName=spine-b-leaf-b" in topology and "Nodes=cpu-1" in topology
    done = small.run("srun", "-N2", "-l", "printenv", "SLURMD_NODENAME", check=True)
    assert sorted(line.split(": ")[1] for line in done.stdout.splitlines()) == ["cpu-0", "cpu-1"]


def test_stopped_slurmd_stops_responding(small: LocalSlurm) -> None:
    small.start_slurmd(SimNode("gpu-0", "gpu"))
    small.stop_slurmd("gpu-0")
    assert "gpu-0" not in {n.name for n in small.nodes}
    # slurmctld notices on its next ping; the node record stays (a pod that died).
    out = small.run("scontrol", "show", "node", "gpu-0", check=True).stdout
    assert "NodeName=gpu-0" in out


def test_max_node_count_is_enforced_with_a_clear_error(small: LocalSlurm) -> None:
    with pytest.raises(ValueError, match="MaxNodeCount"):
        for i in range(2, 9):
            small.start_slurmd(SimNode(f"cpu-{i}", "cpu"))


def _holding(root: Path, secret: str) -> list[str]:
    found = []
    for folder in ("etc", "run", "tmp", "var/lib/mysql"):
        for path in (root / folder).rglob("*"):
            if path.is_file() and not path.is_symlink() and secret.encode() in path.read_bytes():
                found.append("/" + path.relative_to(root).as_posix())
    return sorted(found)


def test_secrets_stay_in_private_files_and_out_of_logs(acme_cluster: LocalSlurm) -> None:
    dbd_root = acme_cluster.role_root("slurmdbd")
    assert "StoragePass=" not in acme_cluster.files["slurmdbd.conf"]
    # slurmdbd's start script (the manifest's) wrote the one slurmdbd.conf holding the password.
    dbd = dbd_root / "run/slurm/slurmdbd.conf"
    password = next(line for line in dbd.read_text().splitlines() if line.startswith("StoragePass="))
    password = password.partition("=")[2]
    assert len(password) >= 32
    slurm = lookup_ids(dbd_root, "slurm")
    for path in (dbd, acme_cluster.jwt_key_path):
        info = path.stat()
        assert stat.S_IMODE(info.st_mode) == 0o600 and (info.st_uid, info.st_gid) == slurm
    for role in ("slurmctld", "slurmd", "login"):
        munge_key = (acme_cluster.role_root(role) / "etc/munge/munge.key").stat()
        assert stat.S_IMODE(munge_key.st_mode) == 0o400
    for log in acme_cluster.log_dir.iterdir():
        assert password not in log.read_text(errors="replace"), log
    # Only the Secret mounts (0400) and slurmdbd's private copy hold it: not /etc/slurm (the
    # ConfigMaps), not the clients, not the database files.
    assert _holding(dbd_root, password) == ["/etc/slurm-db/password", "/run/slurm/slurmdbd.conf"]
    assert _holding(acme_cluster.role_root("mariadb"), password) == ["/etc/mariadb-secret/password"]
    for role in ("slurmctld", "slurmd", "login"):
        assert _holding(acme_cluster.role_root(role), password) == [], role


def _in_namespace(ns: str) -> list[int]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.readlink(f"/proc/{pid}/ns/mnt") == ns:
                found.append(int(pid))
        except OSError:
            pass
    return found


def test_stop_kills_unmounts_and_deletes(tmp_path: Path) -> None:
    spec = load_stack("globex-dev", FIXTURE_STACKS).spec
    slurm = LocalSlurm.start(spec, [SimNode("cpu-0", "cpu")], restapi=False, workdir=tmp_path)
    ns = slurm.jail.namespace
    pids = [p.pid for p in slurm.jail.processes.values()]
    job = slurm.sbatch("#!/bin/sh\nsleep 300\n")
    slurm.wait_job(job, {"RUNNING"})
    slurm.stop()
    slurm.stop()  # idempotent
    assert not slurm.jail.workdir.exists()
    assert list(tmp_path.iterdir()) == []
    assert _in_namespace(ns) == []
    assert not any(os.path.exists(f"/proc/{pid}") for pid in pids)
    assert str(slurm.jail.workdir) not in Path("/proc/self/mountinfo").read_text()


def test_failed_start_cleans_up_and_shows_the_log(tmp_path: Path) -> None:
    spec = load_stack("globex-dev", FIXTURE_STACKS).spec
    broken = spec.model_copy(
        update={"controller": spec.controller.model_copy(update={"extra_slurm_conf": ["NoSuchDirective=1"]})}
    )
    with pytest.raises(RuntimeError, match="NoSuchDirective"):
        LocalSlurm.start(broken, restapi=False, workdir=tmp_path)
    assert list(tmp_path.iterdir()) == []
