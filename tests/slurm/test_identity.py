"""Directory users end to end, against a real OpenLDAP (the host's slapd on loopback, TLS only):
a user logs in to the login image's sshd with a key the directory serves (sss_ssh_authorizedkeys
through SSSD), submits a job, and the job runs on slurmd as that user, with their groups and a
home on the shared volume; `id` and `getent` agree in every Slurm root; a partition restricted by
group admits members and rejects others; login host keys survive a restart of sshd.

Every sssd runs from its role's image by the sidecar's own script, with the files its Secrets
would mount; sshd runs by the login container's own script."""

from __future__ import annotations

import stat
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from sunk.runtime.harness import LocalSlurm
from sunk.runtime.harness.directory import DirectoryGroup, DirectoryUser, LocalLdap
from sunk.runtime.harness.identity import DirectorySecrets, start_sshd
from sunk.runtime.harness.ports import free_ports

from sunk.images import SLURM_UID
from sunk.manifests.login import HOST_KEY_FILES
from sunk.manifests.sssd import MEMCACHE, NSS_SOCKET, PIPES, SSSD_DIR
from sunk.spec.cluster import ClusterSpec

pytestmark = pytest.mark.slurm

ALICE, BOB, CAROL, DAVE = 20001, 20002, 20003, 20004
RESEARCH, HPC, GUESTS = 20000, 30000, 30001


def keygen(folder: Path, name: str, kind: str = "ed25519") -> Path:
    path = folder / name
    extra = ["-b", "2048"] if kind == "rsa" else []
    subprocess.run(["ssh-keygen", "-q", "-t", kind, *extra, "-N", "", "-C", name, "-f", str(path)], check=True)
    return path


@dataclass
class Site:
    """A booted cluster with directory users, and what a user's laptop holds."""

    slurm: LocalSlurm
    ldap: LocalLdap
    keys: Path
    port: int
    known_hosts: Path

    def ssh(
        self, user: str, command: str, *, key: str | None = None, input: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        """`ssh user@login command` from the host's OpenSSH client, verifying the host key."""
        argv = [
            "ssh", "-F", "/dev/null", "-i", str(self.keys / (key or user)), "-p", str(self.port),
            "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes", "-o", "StrictHostKeyChecking=yes",
            "-o", f"UserKnownHostsFile={self.known_hosts}", "-o", "ConnectTimeout=10",
            f"{user}@127.0.0.1", command,
        ]  # fmt: skip
        return subprocess.run(argv, input=input, capture_output=True, text=True, timeout=60)

    @property
    def home(self) -> Path:
        """The shared home volume as the host sees it."""
        return self.slurm.jail.workdir / "shared" / "volumes" / "home"


def identity_spec(ldap: LocalLdap) -> ClusterSpec:
    return ClusterSpec.model_validate(
        {
            "name": "ident",
            "tenant": "acme",
            "login": {"serviceType": "ClusterIP", "allowGroups": ["research"]},
            "auth": {
                "ldap": {
                    "uris": [ldap.uri],  # ldap:// + StartTLS, verified against the CA (demand)
                    "baseDn": ldap.base_dn,
                    "bindDn": ldap.service_dn,
                    "bindPasswordSecret": {"name": "ident-ldap", "key": "password"},
                    "caSecret": {"name": "ident-ldap", "key": "ca.crt"},
                }
            },
            "sharedVolumes": [
                {"name": "home", "mountPath": "/home", "mountOn": ["login", "compute"], "create": {"size": "10Gi"}}
            ],
            # Accounting enforces associations: directory users run jobs only with an account
            # (slurmctld maps their names to uids through its sssd).
            "accounts": [{"name": "research", "users": ["alice", "bob", "carol"]}],
            "nodesets": [{"name": "cpu", "replicas": 1, "cpus": 2, "memoryMib": 1000}],
            "partitions": [
                {"name": "batch", "nodesets": ["cpu"], "default": True},
                {"name": "hpc", "nodesets": ["cpu"], "allowGroups": ["hpc"]},
            ],
        }
    )


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    keys = tmp_path_factory.mktemp("keys")
    for name in ("alice", "bob", "carol", "dave", "stranger"):
        keygen(keys, name)
    users = [
        DirectoryUser(name, uid, gid, ((keys / f"{name}.pub").read_text().strip(),))
        for name, uid, gid in (
            ("alice", ALICE, RESEARCH),
            ("bob", BOB, RESEARCH),
            ("carol", CAROL, GUESTS),
            ("dave", DAVE, RESEARCH),  # in the directory, in no account
        )
    ]
    groups = [
        DirectoryGroup("research", RESEARCH, ("alice", "bob", "dave")),
        DirectoryGroup("hpc", HPC, ("alice",)),
        DirectoryGroup("guests", GUESTS, ("carol",)),
    ]
    host_keys = {name: keygen(keys, name, "rsa" if "rsa" in name else "ed25519") for name in HOST_KEY_FILES}
    with LocalLdap.start(users, groups) as ldap:
        spec = identity_spec(ldap)
        secrets = DirectorySecrets(bind_password=ldap.bind_password, ca=ldap.tls.ca)
        with LocalSlurm.start(spec, directory=secrets, restapi=False) as slurm:
            port = free_ports(1, {*vars(slurm.ports).values(), *slurm.node_ports.values()})[0]
            start_sshd(slurm.jail, spec, port, {name: path.read_text() for name, path in host_keys.items()})
            # The laptop trusts exactly the persisted host keys: StrictHostKeyChecking proves sshd uses them.
            known = keys / "known_hosts"
            known.write_text(
                "".join(f"[127.0.0.1]:{port} {Path(f'{p}.pub').read_text().split(' ')[0]} "
                        f"{Path(f'{p}.pub').read_text().split(' ')[1]}\n" for p in host_keys.values())
            )  # fmt: skip
            yield Site(slurm, ldap, keys, port, known)


def test_directory_user_logs_in_with_the_directorys_key_and_the_job_runs_as_them(site: Site) -> None:
    login = site.ssh("alice", "id; pwd; stat -c '%u:%g %a' .")
    assert login.returncode == 0, login.stderr + site.slurm.log("sshd")
    ident, cwd, home = login.stdout.splitlines()
    assert ident == f"uid={ALICE}(alice) gid={RESEARCH}(research) groups={RESEARCH}(research),{HPC}(hpc)"
    # pam_mkhomedir made the home on the shared volume at first login, owned by the user.
    assert (cwd, home) == ("/home/alice", f"{ALICE}:{RESEARCH} 700")

    script = "#!/bin/sh\nid\npwd\ngetent passwd alice\ntouch made-by-job\n"
    submitted = site.ssh("alice", "sbatch --parsable", input=script)
    assert submitted.returncode == 0, submitted.stderr
    job = int(submitted.stdout.strip().split(";")[0])
    site.slurm.wait_job(job)

    # The job ran on slurmd as alice, with her groups, in her home (the same volume on compute).
    out = (site.home / "alice" / f"slurm-{job}.out").read_text().splitlines()
    assert out == [ident, "/home/alice", f"alice:*:{ALICE}:{RESEARCH}:alice:/home/alice:/bin/sh"]
    made = (site.home / "alice" / "made-by-job").stat()
    assert (made.st_uid, made.st_gid) == (ALICE, RESEARCH)
    assert (
        f"UserId=alice({ALICE}) GroupId=research({RESEARCH})"
        in site.slurm.run("scontrol", "show", "job", str(job)).stdout
    )


def test_id_and_getent_agree_on_login_compute_and_the_controllers(site: Site) -> None:
    roles = ("login", "slurmd", "slurmctld", "slurmdbd")
    for query in (["id", "alice"], ["id", "bob"], ["getent", "passwd", "carol"], ["getent", "group", "hpc"]):
        answers = {role: site.slurm.run(*query, role=role).stdout for role in roles}
        assert len(set(answers.values())) == 1, answers
        assert answers["login"].strip(), query
    assert site.slurm.run("getent", "group", "hpc", role="slurmd").stdout == f"hpc:*:{HPC}:alice\n"
    # Unknown names stay unknown (no wildcard or enumeration answers).
    assert site.slurm.run("id", "nobody-here", role="slurmd").returncode != 0


def test_sssd_serves_from_folders_an_fsgroup_made_setgid(site: Site) -> None:
    """slurmctld's and slurmdbd's pods have an fsGroup, so their sssd's emptyDirs are setgid to
    it, as the harness makes them (sssd.conf's folder stays so); sssd refuses sockets of that
    group, and serves: its start keeps the socket folders root's."""
    for role in ("slurmctld", "slurmdbd"):
        root = site.slurm.jail.root(role)
        conf = (root / SSSD_DIR.lstrip("/")).stat()
        assert (conf.st_gid, conf.st_mode & stat.S_ISGID) == (SLURM_UID, stat.S_ISGID), role
        for folder in (PIPES, f"{PIPES}/private", MEMCACHE):
            made = (root / folder.lstrip("/")).stat()
            assert (made.st_uid, made.st_gid, made.st_mode & stat.S_ISGID) == (0, 0, 0), (role, folder)
        assert (root / NSS_SOCKET.lstrip("/")).is_socket(), role


def test_group_restricted_partition_admits_members_and_rejects_others(site: Site) -> None:
    member = site.ssh("alice", "sbatch --parsable -p hpc --wrap 'id -Gn'")
    assert member.returncode == 0, member.stderr
    job = int(member.stdout.strip().split(";")[0])
    site.slurm.wait_job(job)
    assert (site.home / "alice" / f"slurm-{job}.out").read_text() == "research hpc\n"

    # slurmctld resolves bob's groups through its own sssd: not in hpc. With EnforcePartLimits=ALL
    # (scheduling.enforcePartLimits, the default) the job is refused at submission, saying why.
    other = site.ssh("bob", "sbatch --parsable -p hpc --wrap true")
    assert other.returncode != 0
    assert "User's group not permitted to use this partition" in other.stderr, other.stderr
    open_ = site.ssh("bob", "sbatch --parsable -p batch --wrap true")
    assert open_.returncode == 0, open_.stderr
    site.slurm.wait_job(int(open_.stdout.strip().split(";")[0]))  # bob runs elsewhere


def test_a_directory_user_without_an_account_cannot_submit(site: Site) -> None:
    """Associations are enforced (accounting.enforce): dave logs in, but slurmctld finds no
    association for his uid, while alice's (by name, resolved to her uid) lets her run."""
    assert site.ssh("dave", "id -u").stdout == f"{DAVE}\n"
    refused = site.ssh("dave", "sbatch --parsable --wrap true")
    assert refused.returncode != 0
    assert "Invalid account or account/partition combination specified" in refused.stderr
    users = site.slurm.run("sacctmgr", "-n", "-P", "show", "assoc", "format=user,account", check=True).stdout
    assert "alice|research" in users.split() and "dave" not in users


def test_only_the_directorys_key_for_that_user_and_only_allowed_groups_log_in(site: Site) -> None:
    # bob's key is not alice's; a key the directory does not hold opens nothing.
    assert site.ssh("alice", "true", key="bob").returncode == 255
    assert site.ssh("alice", "true", key="stranger").returncode == 255
    # carol is in the directory with her own key, but not in login.allowGroups (research).
    assert site.ssh("carol", "true").returncode == 255
    assert "not allowed because none of user's groups are listed in AllowGroups" in site.slurm.log("sshd", 200)
    assert site.ssh("bob", "true").returncode == 0


def test_login_host_keys_persist_across_restarts(site: Site) -> None:
    image = site.slurm.jail.lowers["login"]
    # The image carries no host key of its own (every pod would share it).
    assert not list((image / "etc/ssh").glob("ssh_host_*"))
    root = site.slurm.role_root("login")
    site.slurm.jail.stop("sshd")
    for installed in (root / "etc/ssh").glob("ssh_host_*"):
        installed.unlink()  # a new container starts from the image: no key until the start script installs them
    start_sshd(site.slurm.jail, site.slurm.spec, site.port, {})  # the Secret's files are still mounted
    # StrictHostKeyChecking against the keys the laptop learned before the restart.
    again = site.ssh("alice", "true")
    assert again.returncode == 0, again.stderr
    assert sorted(p.name for p in (root / "etc/ssh").glob("ssh_host_*")) == sorted(HOST_KEY_FILES)
