#!/bin/sh
# The controller pod's wait-qos init container (sunk/manifests/controller.py): slurmctld 26.05
# exits at start on a partition whose AllowQos or DenyQos names a QOS accounting lacks ("invalid
# AllowQOS", measured), and the accounting-setup Job creates the spec's QOS. So wait until every
# QOS the partitions name exists. If slurmdbd is unreachable and slurmctld has saved state, it
# starts from the QOS it saved (a restart must not wait on accounting).
set -u
qos=@QOS@
state=@STATE@
period=@PERIOD@
while :; do
  if have=$(sacctmgr -n -P show qos format=name 2>/dev/null); then
    missing=""
    for q in $qos; do
      printf '%s\n' "$have" | grep -qxF "$q" || missing="$missing $q"
    done
    if [ -z "$missing" ]; then
      echo "every QOS the partitions name exists"
      exit 0
    fi
    echo "waiting for QOS$missing (the accounting-setup Job creates them)"
  elif [ -e "$state/assoc_mgr_state" ]; then
    echo "slurmdbd unreachable: slurmctld starts from the QOS it saved"
    exit 0
  else
    echo "waiting for slurmdbd"
  fi
  sleep "$period"
done
