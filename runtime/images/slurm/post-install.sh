# munge's postinst generates a key; every pod gets the cluster's key from a Secret instead, and a
# key baked into a public image would be the same everywhere.
rm -f /etc/munge/munge.key
# Users and groups come from the files, then from SSSD (a no-op while no sssd runs beside: the NSS
# module finds no socket and answers "unavailable" at once). libnss-sss's postinst adds it; make
# sure, since every directory lookup depends on it.
sed -i -E 's/^(passwd|group|shadow):(\s+)files( systemd)?\s*$/\1:\2files sss/' /etc/nsswitch.conf
grep -Eq '^passwd:\s+files.* sss' /etc/nsswitch.conf
grep -Eq '^group:\s+files.* sss' /etc/nsswitch.conf
