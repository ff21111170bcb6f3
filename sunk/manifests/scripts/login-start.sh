#!/bin/sh
# The login pod's sshd container (sunk/manifests/login.py).
#   host_keys        the host-key Secret's folder, or empty: this pod generates its own keys
#   authorized_keys  root's authorized_keys from its ConfigMap, or empty: none
#   identity_conf    sshd settings from the spec (directory users' keys, AllowGroups), or empty
#   identity_path    where sshd reads them
set -eu
host_keys=@HOST_KEYS@
authorized_keys=@AUTHORIZED_KEYS@
identity_conf=@IDENTITY_CONF@
identity_path=@IDENTITY_PATH@
mkdir -p /run/sshd /root/.ssh
chmod 0700 /root/.ssh
if [ -n "$host_keys" ]; then
  for key in "$host_keys"/*; do install -m 0600 "$key" "/etc/ssh/$(basename "$key")"; done
else
  ssh-keygen -A
fi
if [ -n "$authorized_keys" ]; then install -m 0600 "$authorized_keys" /root/.ssh/authorized_keys; fi
if [ -n "$identity_conf" ]; then printf '%s' "$identity_conf" > "$identity_path"; fi
exec /usr/sbin/sshd -D -e "$@"
