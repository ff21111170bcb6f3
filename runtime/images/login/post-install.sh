# openssh-server's postinst generated host keys: every pod would share them. The login pod
# installs its own (persisted in a Secret) or generates fresh ones at start.
rm -f /etc/ssh/ssh_host_*
