#!/bin/sh
# The accounting-setup Job (sunk/manifests/accounting.py): registers the cluster in slurmdbd
# (idempotent), then runs the rendered accounting-setup.sh (the spec's QOS), if there is one.
# From the container's environment:
#   SUNK_CLUSTER     the cluster's ClusterName
#   SUNK_QOS_SCRIPT  the path of the rendered accounting-setup.sh, or empty
set -eu
tries=0
until sacctmgr -n list cluster format=cluster >/dev/null 2>&1; do
  tries=$((tries + 1)); [ "$tries" -gt 120 ] && { echo "slurmdbd never answered" >&2; exit 1; }
  echo waiting for slurmdbd; sleep 5
done
sacctmgr -n -P list cluster format=cluster | grep -qx "$SUNK_CLUSTER" || sacctmgr -i add cluster "$SUNK_CLUSTER"
if [ -n "$SUNK_QOS_SCRIPT" ]; then sh "$SUNK_QOS_SCRIPT"; fi
echo accounting ready
