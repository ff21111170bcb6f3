"""In-cluster runtime: operator, syncer, scheduler, and the local Slurm harness
(installed as `sunk.runtime`). Never imports pulumi."""
