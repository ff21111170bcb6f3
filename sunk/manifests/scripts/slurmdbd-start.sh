#!/bin/sh
# The slurmdbd container (sunk/manifests/accounting.py).
# What sunk.render.finalize_slurmdbd_conf does, at container start: the rendered file plus
# `StoragePass=` from the mounted Secret, written 0600 (slurmdbd refuses a readable file).
# slurmdbd finds slurmdbd.conf beside $SLURM_CONF.
set -eu
etc=@SLURM_ETC@
password_file=@PASSWORD_FILE@
run=@RUN_DIR@
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
exec slurmdbd -D "$@"
