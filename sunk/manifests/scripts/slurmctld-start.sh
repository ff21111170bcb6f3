#!/bin/sh
# slurmctld's container in every render (sunk/manifests/controller.py): `slurmctld -D` and the
# controller's extra arguments, run as a child of this shell, which holds a shared lock on LOCK
# (in StateSaveLocation) from before slurmctld starts until after it has exited.
#
# Why: before a state-guard (state-guard.sh) copies or restores the state, every slurmctld that
# could write the folder must have exited. No answer at its address is not enough: a slurmctld
# told to stop closes its port first and saves its state afterwards (CI saw a copy begin in that
# window). So the guard takes this lock exclusively, which it gets only once every controller's
# shell, of every pod on the volume, has ended; and no slurmctld starts while the guard holds it.
# slurmctld inherits the lock's descriptor too: should this shell die first, the lock lasts as
# long as slurmctld does.
#
# The shell is the container's PID 1, which receives only the signals it handles: it passes
# SIGTERM and SIGINT on to slurmctld and ends with slurmctld's status. A volume that takes no
# locks (an NFS mount with `nolock`) is said in the log, and slurmctld runs all the same: the
# guards then go by the controllers' addresses alone.
set -u
lock=@LOCK@
if true 9<>"$lock" 2>/dev/null; then
  exec 9<>"$lock"
  if ! flock -s 9; then
    echo "slurmctld-start: $lock takes no lock on this volume: an upgrade's state-guard will know a running slurmctld only by its address" >&2
  fi
else
  echo "slurmctld-start: $lock can't be opened: an upgrade's state-guard will know a running slurmctld only by its address" >&2
fi
slurmctld -D "$@" &
pid=$!
trap 'kill -TERM "$pid" 2>/dev/null' TERM
trap 'kill -INT "$pid" 2>/dev/null' INT
while :; do
  status=0
  wait "$pid" || status=$?
  # `wait` also returns when a trapped signal arrives: it ends here only once slurmctld has.
  if ! kill -0 "$pid" 2>/dev/null; then
    exit "$status"
  fi
done
