"""The Slurm metrics exporter: reads slurmctld through slurmrestd (jobs, nodes, partitions,
scheduler statistics) on an interval and serves them in Prometheus' text format."""
