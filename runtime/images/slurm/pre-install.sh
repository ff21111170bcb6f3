# munge gets a fixed id, so a key file chowned in one Slurm image means the same in every other.
groupadd --system --gid 990 munge
useradd --system --uid 990 --gid 990 --home-dir /nonexistent --no-create-home --shell /usr/sbin/nologin munge
