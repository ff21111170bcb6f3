#!/bin/sh
# The munge sidecar of every pod that runs a Slurm daemon or client: controller, login, slurmdbd,
# the accounting-setup Job (sunk/manifests/pods.py) and the operator's slurmd pods
# (sunk/manifests/nodeset_pod.py), which authenticate every job step and get more threads.
set -eu
run=@MUNGE_DIR@
secret=@KEY_SECRET@
key=@KEY_FILE@
threads=@THREADS@
# munged refuses a key it does not own, and Secret volumes are root-owned: copy the key into a
# munge-owned directory (0400), create the socket directory the way munged wants it (0755), then
# drop to munge.
install -d -o munge -g munge -m 0755 "$run" /var/lib/munge /var/log/munge
install -d -o munge -g munge -m 0700 /etc/munge
install -o munge -g munge -m 0400 "$secret/$key" "/etc/munge/$key"
exec runuser -u munge -- munged --foreground --key-file="/etc/munge/$key" --num-threads="$threads"
