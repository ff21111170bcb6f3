"""The fence of a controller with backups (`python -m sunk.runtime.fence`): a container beside
slurmctld in every controller pod that holds the cluster's Lease while this pod's slurmctld is the
primary, and stops slurmctld when it may not hold it (sunk.fence decides; lease.py reads and
writes the Lease and the pod's marks)."""
