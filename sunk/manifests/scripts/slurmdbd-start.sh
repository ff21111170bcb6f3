#!/bin/sh
# The slurmdbd container (sunk/manifests/accounting.py).
# What sunk.render.finalize_slurmdbd_conf does, at container start: the rendered file plus
# `StoragePass=` from the mounted Secret, written 0600 (slurmdbd refuses a readable file).
# slurmdbd finds slurmdbd.conf beside $SLURM_CONF.
# While an upgrade is under way (`guard` set: the dump's path on the backup volume, without
# `.sql`), it also tells the database guard (db-guard.sh) how the conversion went: `.served` once
# slurmdbd listens (its conversion is done), `.failed` when it exits non-zero before that; and it
# does not start slurmdbd again after a failure (the guard restores the dump meanwhile).
set -eu
etc=@SLURM_ETC@
password_file=@PASSWORD_FILE@
run=@RUN_DIR@
guard=@GUARD@
release=@RELEASE@
umask 077
password=$(cat "$password_file")
case "$password" in *'
'*) echo "database password must be one line" >&2; exit 1 ;; esac
# Slurm cuts a line at '#', joins it to the next at a trailing backslash, drops backslashes and
# ends a value at a blank: a password holding one of them would reach MariaDB changed.
tab=$(printf '\t')
case "$password" in *'#'* | *\\* | *' '* | *"$tab"* | *'"'* | '')
  echo "database password: empty, or holds '#', a backslash, a quote or a blank, which slurmdbd.conf can't hold as written; use another" >&2
  exit 1 ;;
esac
# A restarted container finds the last start's files in its emptyDir, slurm.conf read-only (0400).
rm -f "$run/slurm.conf" "$run/slurm.key" "$run/slurmdbd.conf"
cp "$etc/slurm.conf" "$run/slurm.conf"
# auth/slurm reads slurm.key beside $SLURM_CONF (measured: slurmdbd 24.11 dies without it there).
if [ -e "$etc/slurm.key" ]; then ln -sf "$etc/slurm.key" "$run/slurm.key"; fi
{ cat "$etc/slurmdbd.conf"; printf 'StoragePass=%s\n' "$password"; } > "$run/slurmdbd.conf"
chmod 0600 "$run/slurmdbd.conf"
export SLURM_CONF="$run/slurm.conf"
if [ -z "$guard" ]; then
  exec slurmdbd -D "$@"
fi
if [ -e "$guard.failed" ]; then
  echo "slurmdbd $release: not started again: $(head -n 1 "$guard.failed"). The database guard (container db-guard) restores the dump taken before the conversion; set slurm.version back to slurm.upgradeFrom's release and deploy (docs/upgrading.md)" >&2
  exit 1
fi
port=$(sed -n 's/^DbdPort=//p' "$run/slurmdbd.conf" | tail -n 1)
hex=$(printf '%04X' "${port:-6819}")
listening() {
  cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | grep -Eq "^ *[0-9]+: [0-9A-F]+:$hex [0-9A-F]+:0000 0A "
}
slurmdbd -D "$@" &
pid=$!
trap 'kill -TERM "$pid" 2>/dev/null || true' TERM INT
while kill -0 "$pid" 2>/dev/null; do
  if [ ! -e "$guard.served" ] && listening; then
    echo "slurmdbd $release listened at $(date -u +%Y-%m-%dT%H:%M:%SZ)" > "$guard.served"
  fi
  sleep 1
done
code=0
wait "$pid" || code=$?
if [ "$code" -ne 0 ] && [ ! -e "$guard.served" ]; then
  echo "slurmdbd $release exited with $code at $(date -u +%Y-%m-%dT%H:%M:%SZ) before it served (its conversion of the database failed)" > "$guard.failed"
fi
exit "$code"
