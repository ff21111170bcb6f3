#!/bin/sh
# SlurmctldPrimaryOnProg and SlurmctldPrimaryOffProg of a controller with backups (rendered as
# /etc/slurm/ha.d/primary-on and primary-off): slurmctld runs On when it takes control (at start as
# primary, or a backup taking over) and Off when it stands by (a backup at start, or giving control
# back). The mark lets the pod's readiness probe (primary-probe.sh) say which pod is the primary,
# which `scontrol ping` can't: it labels controllers by their place in the SlurmctldHost list.
#
# A backup that takes over keeps its accounting records queued ("DBD Agent queue size" in sdiag
# grows, sacct misses every job it runs) until a reconfigure (Slurm 26.05.5, measured in
# tests/slurm/test_controller_ha.py). So a takeover, a primary mark after a standby one, asks for
# one, in the background: the reconfigure waits for this program to end. It is a SIGHUP to this
# slurmctld (slurmctld(8): reloads the configuration as `scontrol reconfigure` does), not
# `scontrol reconfigure`, which asks the SlurmctldHost list in order: after a takeover the first
# is the lost primary, whose address held the request back until the failback (the local
# cluster's kubelet-crash scenario, tests/runtime/local/test_local_ha.py).
#
# The fence (sunk.fence, the pod's `fence` container) holds the cluster's Lease while the mark is
# here, and writes the stop file when this slurmctld may not be the primary: it could not take
# the Lease, or lost it. slurmctld runs this program without waiting for it, so On starts a watcher
# that stops slurmctld (SIGTERM to this program's parent: slurmctld is the container's PID 1, which
# ignores SIGKILL from inside) once the stop file appears, and ends with the mark or slurmctld.
set -eu
mark=@MARK@
standby=@STANDBY@
stop=@STOP@
primary=@PRIMARY@
if [ "$primary" = no ]; then
  rm -f "$mark"
  : >"$standby"
  exit 0
fi
rm -f "$stop"
ctld=$PPID
if [ -e "$standby" ]; then
  rm -f "$standby"
  # shellcheck disable=SC2016  # expanded by the background shell, from its argument
  setsid sh -c 'sleep 2; kill -HUP "$1"' reconfigure "$ctld" </dev/null >/dev/null 2>&1 &
fi
: >"$mark"
# shellcheck disable=SC2016  # expanded by the watcher's own shell, from its arguments
setsid sh -c '
  while [ -e "$1" ] && kill -0 "$3" 2>/dev/null; do
    if [ -e "$2" ]; then
      echo "fence: stopping slurmctld ($3): $(cat "$2")" >"/proc/$3/fd/2" 2>/dev/null || true
      kill -TERM "$3"
      exit 0
    fi
    sleep 1
  done' fence-watch "$mark" "$stop" "$ctld" </dev/null >/dev/null 2>&1 &
