# Rootless crun (oci.conf, srun --container) keeps each job user's container state in
# /run/user/<uid>, which the user creates: world-writable and sticky, as /tmp.
install -d -m 1777 /run/user
