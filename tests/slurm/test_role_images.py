"""Each role proven from its own image, beside the harness's real slurmctld: the login image's sshd
takes an SSH key login that runs the Slurm clients, and the slurmd image's sunk-init runs s6
one-shots before slurmd and supervises s6 services beside it."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator

import pytest
from sunk.runtime.harness import LocalSlurm
from sunk.runtime.harness.ports import free_ports, listening, wait_until

from sunk.images import S6_INIT
from sunk.manifests import scripts
from sunk.stackfile import load_stack
from tests.support.stacks import FIXTURE_STACKS

pytestmark = pytest.mark.slurm

SSH = ["ssh", "-i", "/root/.ssh/id_ed25519", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null"]


@pytest.fixture(scope="module")
def sshd(acme_cluster: LocalSlurm) -> Iterator[int]:
    """The login pod's sshd container: the manifest's start script on the login image, with an
    authorized key where its ConfigMap mounts. Off-cluster only: a free loopback port, not 22."""
    acme = acme_cluster
    (port,) = free_ports(1)
    acme.run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", "/root/.ssh/id_ed25519", check=True)
    root = acme.root
    (root / "etc/sunk-login").mkdir(exist_ok=True)
    (root / "etc/sunk-login/authorized_keys").write_bytes((root / "root/.ssh/id_ed25519.pub").read_bytes())
    (root / "etc/ssh/sshd_config.d/zz-harness.conf").write_text(f"Port {port}\nListenAddress 127.0.0.1\n")
    start = scripts.login_start(persist_host_keys=False, authorized_keys=True)
    proc = acme.jail.spawn("sshd", ["/bin/sh", "-c", start], role="login")
    wait_until("sshd", lambda: listening(port), timeout=60, alive=proc, on_fail=lambda: acme.log("sshd"))
    yield port
    acme.jail.stop("sshd")


def test_sshd_accepts_the_image_configuration_and_refuses_a_broken_one(acme: LocalSlurm, sshd: int) -> None:
    assert acme.run("/usr/sbin/sshd", "-t").returncode == 0
    # OpenSSH 10 (sid, the 26.05 images) prints options as written and the new keyword; 9 (trixie)
    # lowercases them and prints the old one.
    effective = acme.run("/usr/sbin/sshd", "-T", check=True).stdout.lower()
    assert "passwordauthentication no" in effective
    assert re.search(r"^permitrootlogin (without|prohibit)-password$", effective, re.M), effective
    # Baked host keys would be shared by every pod: the image has none until its start script runs.
    assert "ssh_host_ed25519_key" in acme.run("ls", "/etc/ssh", check=True).stdout
    bad = acme.root / "etc/ssh/sshd_config.d/zz-broken.conf"
    bad.write_text("NoSuchSshdOption yes\n")
    try:
        done = acme.run("/usr/sbin/sshd", "-t")
        assert done.returncode != 0 and "NoSuchSshdOption" in done.stderr
    finally:
        bad.unlink()


def test_an_ssh_key_login_runs_sinfo_and_sbatch(acme: LocalSlurm, sshd: int) -> None:
    remote = "sinfo -h -o %P && sbatch --parsable -o /tmp/ssh-%j.out --wrap 'echo ran on $SLURMD_NODENAME'"
    done = acme.run(*SSH, "-p", str(sshd), "root@127.0.0.1", remote, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.split()
    assert "batch*" in lines and "gpu" in lines
    job = int(lines[-1])
    acme.wait_job(job)
    out = (acme.root / f"tmp/ssh-{job}.out").read_text()
    assert re.fullmatch(r"ran on (cpu|gpu)-\d\n", out), out


def test_a_key_not_authorized_is_refused(acme: LocalSlurm, sshd: int) -> None:
    acme.run("sh", "-c", "rm -f /root/other_key*; ssh-keygen -q -t ed25519 -N '' -f /root/other_key", check=True)
    other = [*SSH[:1], "-i", "/root/other_key", "-o", "BatchMode=yes", *SSH[3:]]
    done = acme.run(*other, "-p", str(sshd), "root@127.0.0.1", "sinfo", timeout=60)
    assert done.returncode != 0 and "Permission denied" in done.stderr


ONESHOT = '#!/bin/sh\necho "oneshot ran on $SLURMD_NODENAME"\ntouch /tmp/oneshot-$SLURMD_NODENAME\n'
SERVICE = "#!/bin/sh\necho $$ >> /tmp/service-$SLURMD_NODENAME.pids\nexec sleep 1000\n"


@pytest.fixture(scope="module")
def s6_cluster() -> Iterator[LocalSlurm]:
    spec = load_stack("globex-dev", FIXTURE_STACKS).spec
    cpu = spec.nodeset("cpu")
    extra = {"s6_scripts": {"heartbeat": SERVICE}, "s6_oneshots": {"prepare": ONESHOT}}
    spec = spec.model_copy(update={"nodesets": [cpu.model_copy(update=extra)]})
    with LocalSlurm.start(spec, accounting=False, restapi=False) as slurm:
        yield slurm


def _pids(slurm: LocalSlurm, node: str) -> list[int]:
    path = slurm.root / f"tmp/service-{node}.pids"
    return [int(p) for p in path.read_text().split()] if path.exists() else []


def test_s6_runs_the_oneshot_first_and_supervises_the_service_beside_slurmd(s6_cluster: LocalSlurm) -> None:
    node = s6_cluster.nodes[0].name
    log = s6_cluster.log(f"slurmd-{node}", 200)
    assert f"sunk-init: supervising 1 service(s) in /run/sunk-s6/{node}" in log
    lines = log.splitlines()
    first_slurmd = next(i for i, line in enumerate(lines) if "slurmd version" in line)
    assert lines.index(f"oneshot ran on {node}") < first_slurmd
    wait_until("s6 service started", lambda: len(_pids(s6_cluster, node)) == 1, timeout=60)
    # s6-supervise restarts a service that dies.
    s6_cluster.run("kill", str(_pids(s6_cluster, node)[0]), role="slurmd", check=True)
    wait_until("s6 service restarted", lambda: len(_pids(s6_cluster, node)) == 2, timeout=60)
    # slurmd under sunk-init registered and runs jobs.
    job = s6_cluster.sbatch("#!/bin/sh\ntrue\n", "-w", node)
    assert s6_cluster.wait_job(job) == "COMPLETED"


def test_a_failing_oneshot_stops_the_container_before_its_command(s6_cluster: LocalSlurm) -> None:
    folder = s6_cluster.role_root("slurmd") / "etc/sunk-failing/cont-init.d"
    folder.mkdir(parents=True)
    (folder / "broken").write_text("#!/bin/sh\nexit 3\n")
    (folder / "broken").chmod(0o755)
    env = {"SUNK_ONESHOTS": "/etc/sunk-failing/cont-init.d", "SUNK_SERVICES": "/nonexistent"}
    started = time.monotonic()
    done = s6_cluster.jail.run([S6_INIT, "echo", "command ran"], role="slurmd", env=env, timeout=30)
    assert done.returncode == 1 and "command ran" not in done.stdout
    assert "one-shot broken failed" in done.stderr
    assert time.monotonic() - started < 30
