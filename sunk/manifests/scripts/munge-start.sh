#!/bin/sh
# The munge sidecar of the controller, login, slurmdbd and accounting-setup pods (sunk/manifests/pods.py).
set -eu
run=@MUNGE_DIR@
secret=@KEY_SECRET@
key=@KEY_FILE@
# munged insists on its own user owning the key (0400) and the socket directory (0755).
install -d -o munge -g munge -m 0755 "$run" /var/lib/munge /var/log/munge
install -d -o munge -g munge -m 0700 /etc/munge
install -o munge -g munge -m 0400 "$secret/$key" "/etc/munge/$key"
exec runuser -u munge -- munged --foreground --key-file="/etc/munge/$key"
