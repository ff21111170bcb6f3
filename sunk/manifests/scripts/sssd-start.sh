#!/bin/sh
# The sssd sidecar (sunk/manifests/sssd.py): SSSD's folders in the shared volumes, sssd.conf
# from its Secret plus the bind password (refused if it would add a line), 0600, then sssd in
# the foreground.
#   bind_password  the mounted bind password file, or empty: no bind password
set -eu
pipes=@PIPES@
memcache=@MEMCACHE@
template=@TEMPLATE@
conf=@CONF@
bind_password=@BIND_PASSWORD@
umask 077
# The socket folder outlives a restarted sidecar (an emptyDir): no stale socket may pass
# the startup probe while this one is still starting or refuses to.
rm -f /run/sssd.pid "$pipes/nss" "$pipes/pam" "$pipes/ssh"
install -d -m 0755 "$pipes" "$memcache"
install -d -m 0700 "$pipes/private" /var/lib/sss/db
# A pod's fsGroup (slurmctld's, slurmdbd's) makes each emptyDir setgid to that group, so the
# sockets sssd makes there would carry it, and sssd checks each socket it makes for root:root
# ("check_file failed for [.../sbus-master]", then it exits). Root's folders, without setgid.
chown 0:0 "$pipes" "$memcache" "$pipes/private"
chmod g-s "$pipes" "$memcache" "$pipes/private"
cp "$template" "$conf"
if [ -n "$bind_password" ]; then
  password=$(cat "$bind_password")
  case "$password" in *'
'*) echo 'bind password: one line only (it would add a line to sssd.conf)' >&2; exit 1 ;; esac
  if printf '%s' "$password" | LC_ALL=C grep -q '[[:cntrl:]]'; then
    echo 'bind password: control characters are not allowed' >&2; exit 1
  fi
  printf 'ldap_default_authtok = %s\n' "$password" >> "$conf"
fi
# SSSD refuses a config not owned by root:root ("Unexpected group owner"), and the folder is an
# emptyDir that a pod's fsGroup makes setgid to that group (slurmctld's and slurmdbd's pods),
# so the copy would carry the fsGroup.
chown 0:0 "$conf"
chmod 0600 "$conf"
exec sssd -i --logger=stderr
