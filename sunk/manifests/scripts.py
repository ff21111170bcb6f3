"""Container start scripts: the files in scripts/ beside this module (package data), plain POSIX
sh — every Slurm image has /bin/sh, none needs Python — each checked by shellcheck in `make lint`.
A pod receives a file's text as its container's `/bin/sh -c` command.

How values reach a script. What varies per cluster is an environment variable of the container
(`env:` in the manifest) where nothing else runs the script: accounting-setup-job.sh reads
$SUNK_CLUSTER and $SUNK_QOS_SCRIPT. Everything else is an input line `name=@NAME@` at the top of
the script, which `render` fills with the shell-quoted value:
- sunk's own paths and timings (mount paths, key file names, the restart-class keys): the
  manifests beside the script use them too, so they are spelled once, in Python;
- the per-cluster choices of login-start.sh and sssd-start.sh: the real-Slurm harness
  (runtime/harness/identity.py, like daemons.py for slurmdbd-start.sh) runs them from the
  container's command alone, in a clean environment (`env -i`), so the command says everything.
A placeholder stands only as the whole value of an input line, so a quoted value stays one word.
"""

from __future__ import annotations

from collections.abc import Sequence

from sunk import naming
from sunk.manifests.config import RESTART_KEYS
from sunk.manifests.meta import Manifest
from sunk.render.script import render, source
from sunk.spec.cluster import ClusterSpec

__all__ = ["render", "source"]  # re-exported: the scripts are read and filled here too


def munge_start(run: str, secret: str, key: str, threads: int = 2) -> str:
    """The one munged start script (munge-start.sh); slurmd pods ask for more threads (every job
    step authenticates), everyone else has munged's default of 2."""
    return render("munge-start.sh", MUNGE_DIR=run, KEY_SECRET=secret, KEY_FILE=key, THREADS=str(threads))


def sh(script: str) -> list[str]:
    return ["/bin/sh", "-c", script]


RECONFIGURE_HEARTBEAT = "/tmp/reconfigure.alive"
RECONFIGURE_PERIOD = 15
"""Seconds between checks. The kubelet refreshes projected volumes about once a minute anyway."""


def reconfigure_watcher(
    directory: str = naming.SLURM_ETC, period: float = RECONFIGURE_PERIOD, heartbeat: str = RECONFIGURE_HEARTBEAT
) -> str:
    """The reconfigure path: when the mounted Slurm files change, run `scontrol reconfigure`
    (24.11 re-executes slurmctld and every slurmd in place, jobs keep running). Changes to the
    restart-class settings are left alone: they change the pod template hash, and the
    StatefulSet replaces slurmctld instead (a reconfigure that changes MaxNodeCount kills it)."""
    return render(
        "reconfigure-watcher.sh",
        SLURM_ETC=directory,
        RESTART_KEYS="|".join(sorted(RESTART_KEYS)),
        HEARTBEAT=heartbeat,
        PERIOD=f"{period:g}",
    )


def slurmctld_start(state: str = naming.STATE_SAVE) -> str:
    """slurmctld's container: `slurmctld -D "$@"` under the controllers' lock (slurmctld-start.sh)."""
    return render("slurmctld-start.sh", LOCK=f"{state}/{naming.CONTROLLER_LOCK}")


def primary_probe() -> str:
    """With backups: succeed only where this pod's slurmctld is the primary (primary-probe.sh)."""
    return render("primary-probe.sh", MARK=naming.PRIMARY_MARK)


def heartbeat_probe_command(path: str = RECONFIGURE_HEARTBEAT, max_age: int = 120) -> list[str]:
    return sh(f"test $(( $(date +%s) - $(stat -c %Y {path}) )) -lt {max_age}")


SLURMDBD_RUN = "/run/slurm"
DB_PASSWORD_FILE = "/etc/slurm-db/password"


def slurmdbd_start(
    etc: str = naming.SLURM_ETC,
    password_file: str = DB_PASSWORD_FILE,
    run_dir: str = SLURMDBD_RUN,
    *,
    guard: str = "",
    release: str = "",
) -> str:
    """What sunk.render.finalize_slurmdbd_conf does, at container start (slurmdbd-start.sh).
    `guard`: while slurmdbd of `release` converts the database (an upgrade), the dump's path on
    the backup volume, beside which it marks how the conversion went (sunk.dbguard)."""
    return render(
        "slurmdbd-start.sh", SLURM_ETC=etc, PASSWORD_FILE=password_file, RUN_DIR=run_dir, GUARD=guard, RELEASE=release
    )


def accounting_setup() -> str:
    """The accounting-setup Job's script (accounting-setup-job.sh); its values come from
    `accounting_setup_env`."""
    return render("accounting-setup-job.sh")


def accounting_setup_env(cluster: str, qos_script: str | None) -> list[Manifest]:
    """The accounting-setup Job's environment: the cluster to register in slurmdbd, and the
    rendered QOS script to run after (empty: none)."""
    return [{"name": "SUNK_CLUSTER", "value": cluster}, {"name": "SUNK_QOS_SCRIPT", "value": qos_script or ""}]


WAIT_QOS_PERIOD = 5
"""Seconds between sacctmgr asks while slurmctld waits for the spec's QOS."""


def partition_qos(spec: ClusterSpec) -> list[str]:
    """The QOS partitions name (AllowQos, and QOS=), sorted: slurmctld needs them in accounting
    (26.05 exits on an unknown AllowQos, 24.11 and 26.05 on an unknown QOS=)."""
    return sorted({q for p in spec.partitions for q in p.allow_qos} | set(spec.partition_qos))


def wait_qos(qos: Sequence[str], state: str = naming.STATE_SAVE, period: float = WAIT_QOS_PERIOD) -> str:
    """The controller's wait-qos init container (wait-qos.sh): until every QOS in `qos` exists."""
    return render("wait-qos.sh", QOS=" ".join(qos), STATE=state, PERIOD=f"{period:g}")


SSHD_IDENTITY_CONF = "/etc/ssh/sshd_config.d/50-sunk-identity.conf"
"""Written by the login container at start: where sshd finds directory users' keys, who may log in."""
LOGIN_HOST_KEYS = "/etc/ssh/sunk-host-keys"
"""Where the host-key Secret mounts; the start script copies its keys to /etc/ssh."""
LOGIN_AUTHORIZED_KEYS_DIR = "/etc/sunk-login"
"""Where root's authorized_keys ConfigMap mounts."""


def sshd_identity_conf(*, directory: bool, allow_groups: Sequence[str], root_keys: bool) -> str:
    """sshd settings that depend on the spec: users' keys from the directory (SSSD's
    sss_ssh_authorizedkeys; the user's ~/.ssh/authorized_keys still counts) and AllowGroups.
    Group names are validated (sunk.spec.identity.GroupName: no space, no line break)."""
    lines = []
    if directory:
        lines += ["AuthorizedKeysCommand /usr/bin/sss_ssh_authorizedkeys %u", "AuthorizedKeysCommandUser nobody"]
    if allow_groups:
        # AllowGroups applies to root too: keep root's key login working when the spec gives one.
        groups = (["root"] if root_keys else []) + list(allow_groups)
        lines.append(f"AllowGroups {' '.join(groups)}")
    return "".join(f"{line}\n" for line in lines)


def login_start(
    persist_host_keys: bool, authorized_keys: bool, *, directory: bool = False, allow_groups: Sequence[str] = ()
) -> str:
    return render(
        "login-start.sh",
        HOST_KEYS=LOGIN_HOST_KEYS if persist_host_keys else "",
        AUTHORIZED_KEYS=f"{LOGIN_AUTHORIZED_KEYS_DIR}/authorized_keys" if authorized_keys else "",
        IDENTITY_CONF=sshd_identity_conf(directory=directory, allow_groups=allow_groups, root_keys=authorized_keys),
        IDENTITY_PATH=SSHD_IDENTITY_CONF,
    )
