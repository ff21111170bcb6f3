# openssh-server's postinst generated host keys: every pod would share them. The login pod
# installs its own (persisted in a Secret) or generates fresh ones at start.
rm -f /etc/ssh/ssh_host_*
# A container cannot set its audit login uid: with pam_loginuid required, every SSH session fails.
sed -i -E 's/^session(\s+)required(\s+)pam_loginuid\.so/session\1optional\2pam_loginuid.so/' /etc/pam.d/sshd
grep -q 'optional.*pam_loginuid' /etc/pam.d/sshd
# A directory user's first login creates their home (on the shared volume mounted at its parent),
# owned by them, from /etc/skel: the session stack runs pam_mkhomedir, which only acts when the
# folder is missing.
pam-auth-update --enable mkhomedir
grep -q pam_mkhomedir /etc/pam.d/common-session
