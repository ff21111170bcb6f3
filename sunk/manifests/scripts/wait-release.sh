#!/bin/sh
# An init container during a Slurm release upgrade (slurm.upgradeFrom; sunk/manifests/upgrade.py):
# holds its pod until the daemon it depends on answers at the new release, whatever order the
# objects were applied in. slurmctld's pod waits for slurmdbd (which converts the database
# first), login's for slurmctld (a client may not be newer than the daemons it calls). A client
# of the new release asking a daemon of the old one gets an error or the old version: both wait.
set -u
daemon=@DAEMON@
release=@RELEASE@
period=@PERIOD@
# The container's PID 1: without a handler SIGTERM does nothing, and a pod deleted while it waits
# (going back after a failed upgrade) would wait out its whole grace period (slurmctld's is 120 s).
trap 'exit 143' TERM INT
said=""
while :; do
  case "$daemon" in
    slurmdbd) version=$(sacctmgr -n show config 2>/dev/null | sed -n 's/^SLURMDBD_VERSION *= *//p') ;;
    *) version=$(scontrol show config 2>/dev/null | sed -n 's/^SLURM_VERSION *= *//p') ;;
  esac
  case "$version" in
    "$release".*)
      echo "$daemon answers at Slurm $version"
      exit 0 ;;
  esac
  now="waiting for $daemon at Slurm $release; it answers ${version:-nothing yet}"
  # One line per change, not one per try: a conversion may take hours.
  [ "$now" = "$said" ] || echo "$now"
  said=$now
  sleep "$period"
done
