# munge's postinst generates a key; every pod gets the cluster's key from a Secret instead, and a
# key baked into a public image would be the same everywhere.
rm -f /etc/munge/munge.key
