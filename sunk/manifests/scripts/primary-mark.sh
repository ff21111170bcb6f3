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
# one, in the background: slurmctld waits for this program, and the reconfigure waits for it.
set -eu
mark=@MARK@
standby=@STANDBY@
primary=@PRIMARY@
if [ "$primary" = no ]; then
  rm -f "$mark"
  : >"$standby"
  exit 0
fi
if [ -e "$standby" ]; then
  rm -f "$standby"
  setsid sh -c 'sleep 2; scontrol reconfigure' </dev/null >/dev/null 2>&1 &
fi
: >"$mark"
