"""Container start scripts. Plain POSIX sh: every Slurm image has /bin/sh, none needs Python."""

from __future__ import annotations

import shlex
from collections.abc import Sequence

from sunk import naming
from sunk.manifests.config import RESTART_KEYS

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
    keys = "|".join(sorted(RESTART_KEYS))
    return f"""set -u
dir={directory}
# The projected volume swaps a `..data` symlink atomically; read through it, skip the keys.
fingerprint() {{
  find -L "$dir" -type f ! -path '*/..*' ! -name '*.key' | sort | xargs cat | grep -v -E '^({keys})=' | sha256sum
}}
restart_class() {{ grep -h -E '^({keys})=' "$dir/slurm.conf" | sort | sha256sum; }}
seen=$(fingerprint)
boot=$(restart_class)
while :; do
  touch {heartbeat}
  sleep {period:g}
  now=$(fingerprint)
  [ "$now" = "$seen" ] && continue
  if [ "$(restart_class)" != "$boot" ]; then
    echo "restart-class settings changed: the new pod template replaces slurmctld; not reconfiguring"
    seen=$now
  elif scontrol reconfigure; then
    echo "configuration changed: scontrol reconfigure done"
    seen=$now
  else
    echo "scontrol reconfigure failed; retrying in {period:g}s" >&2
  fi
done
"""


def heartbeat_probe_command(path: str = RECONFIGURE_HEARTBEAT, max_age: int = 120) -> list[str]:
    return ["/bin/sh", "-c", f"test $(( $(date +%s) - $(stat -c %Y {path}) )) -lt {max_age}"]


SLURMDBD_RUN = "/run/slurm"
DB_PASSWORD_FILE = "/etc/slurm-db/password"


def slurmdbd_start(
    etc: str = naming.SLURM_ETC, password_file: str = DB_PASSWORD_FILE, run_dir: str = SLURMDBD_RUN
) -> str:
    """What sunk.render.finalize_slurmdbd_conf does, at container start: the rendered file plus
    `StoragePass=` from the mounted Secret, written 0600 (slurmdbd refuses a readable file).
    slurmdbd finds slurmdbd.conf beside $SLURM_CONF."""
    return f"""set -eu
umask 077
password=$(cat {password_file})
case "$password" in *'
'*) echo "database password must be one line" >&2; exit 1 ;; esac
cp {etc}/slurm.conf {run_dir}/slurm.conf
# auth/slurm reads slurm.key beside $SLURM_CONF (measured: slurmdbd 24.11 dies without it there).
if [ -e {etc}/slurm.key ]; then ln -sf {etc}/slurm.key {run_dir}/slurm.key; fi
{{ cat {etc}/slurmdbd.conf; printf 'StoragePass=%s\\n' "$password"; }} > {run_dir}/slurmdbd.conf
chmod 0600 {run_dir}/slurmdbd.conf
export SLURM_CONF={run_dir}/slurm.conf
exec slurmdbd -D
"""


def accounting_setup(cluster: str, has_qos_script: bool) -> str:
    """Registers the cluster in slurmdbd (idempotent) and creates the spec's QOS."""
    lines = [
        "set -eu",
        "tries=0",
        "until sacctmgr -n list cluster format=cluster >/dev/null 2>&1; do",
        '  tries=$((tries + 1)); [ "$tries" -gt 120 ] && { echo "slurmdbd never answered" >&2; exit 1; }',
        "  echo waiting for slurmdbd; sleep 5",
        "done",
        f"sacctmgr -n -P list cluster format=cluster | grep -qx {shlex.quote(cluster)} "
        f"|| sacctmgr -i add cluster {shlex.quote(cluster)}",
    ]
    if has_qos_script:
        lines.append(f"sh {naming.SLURM_ETC}/accounting-setup.sh")
    lines.append("echo accounting ready")
    return "\n".join(lines) + "\n"


SSHD_IDENTITY_CONF = "/etc/ssh/sshd_config.d/50-sunk-identity.conf"
"""Written by the login container at start: where sshd finds directory users' keys, who may log in."""


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
    lines = ["set -eu", "mkdir -p /run/sshd /root/.ssh", "chmod 0700 /root/.ssh"]
    if persist_host_keys:
        lines.append(
            'for key in /etc/ssh/sunk-host-keys/*; do install -m 0600 "$key" "/etc/ssh/$(basename "$key")"; done'
        )
    else:
        lines.append("ssh-keygen -A")
    if authorized_keys:
        lines.append("install -m 0600 /etc/sunk-login/authorized_keys /root/.ssh/authorized_keys")
    conf = sshd_identity_conf(directory=directory, allow_groups=allow_groups, root_keys=authorized_keys)
    if conf:
        lines.append(f"printf '%s' {shlex.quote(conf)} > {SSHD_IDENTITY_CONF}")
    lines.append("exec /usr/sbin/sshd -D -e")
    return "\n".join(lines) + "\n"
