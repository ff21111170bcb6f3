groupadd --system --gid 10001 sunk
useradd --system --uid 10001 --gid 10001 --home-dir /nonexistent --no-create-home --shell /usr/sbin/nologin sunk
# slurm-client pulls in munge, whose postinst generates a key: the runtime never uses munge (its
# Slurm clients authenticate with JWT), and a key baked into a public image would be the same everywhere.
rm -f /etc/munge/munge.key
test ! -e /etc/munge/munge.key
