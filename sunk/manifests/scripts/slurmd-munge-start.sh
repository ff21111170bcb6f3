#!/bin/sh
# The munge sidecar of the slurmd pods the operator creates (sunk/manifests/nodeset_pod.py).
set -e
run=@MUNGE_DIR@
secret=@KEY_SECRET@
key=@KEY_FILE@
# munged refuses a key it does not own, and Secret volumes are root-owned: copy the key into a
# munge-owned directory, create the socket directory the way munged wants it, then drop to munge.
install -d -o munge -g munge -m 0700 /etc/munge
install -o munge -g munge -m 0400 "$secret/$key" "/etc/munge/$key"
install -d -o munge -g munge -m 0755 "$run"
exec runuser -u munge -- munged --foreground --num-threads=4
