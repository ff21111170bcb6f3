"""Container start scripts. Plain POSIX sh: every Slurm image has /bin/sh, none needs Python."""

from __future__ import annotations

import shlex

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


def login_start(persist_host_keys: bool, authorized_keys: bool) -> str:
    lines = ["set -eu", "mkdir -p /run/sshd /root/.ssh", "chmod 0700 /root/.ssh"]
    if persist_host_keys:
        lines.append(
            'for key in /etc/ssh/sunk-host-keys/*; do install -m 0600 "$key" "/etc/ssh/$(basename "$key")"; done'
        )
    else:
        lines.append("ssh-keygen -A")
    if authorized_keys:
        lines.append("install -m 0600 /etc/sunk-login/authorized_keys /root/.ssh/authorized_keys")
    lines.append("exec /usr/sbin/sshd -D -e")
    return "\n".join(lines) + "\n"


def sssd_start(bind_password: bool) -> str:
    """sssd.conf from the Secret, plus the bind password (never stored with the file), 0600."""
    lines = ["set -eu", "umask 077", "cp /etc/sssd-template/sssd.conf /etc/sssd/sssd.conf"]
    if bind_password:
        lines.append("printf 'ldap_default_authtok = %s\\n' \"$(cat /etc/sssd-bind/password)\" >> /etc/sssd/sssd.conf")
    lines += ["chmod 0600 /etc/sssd/sssd.conf", "exec sssd -i --logger=stderr"]
    return "\n".join(lines) + "\n"
