#!/bin/sh
# The readiness probe of a slurmctld pod with backups (sunk/manifests/controller.py ready_probe):
# ready only where this pod's slurmctld is the primary and answers. The mark is written by
# SlurmctldPrimaryOnProg and removed by SlurmctldPrimaryOffProg (primary-mark.sh). `scontrol ping`
# prints "Slurmctld(primary|backup|backupN) at <host> is UP|DOWN" by place in the SlurmctldHost
# list, not by role, and exits 0 if any controller answers (Slurm 26.05, measured in
# tests/slurm/test_controller_ha.py): only this host's line is read.
set -u
mark=@MARK@
test -e "$mark" || exit 1
host=$(hostname -s)
scontrol ping 2>/dev/null | grep -q "^Slurmctld([a-z0-9]*) at $host is UP$"
