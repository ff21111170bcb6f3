"""The syncer: keeps Slurm's and Kubernetes' views of every slurmd node in step.

plan.py decides (pure), kube.py and ..slurmrest talk to the servers, loop.py runs the cycle,
fakes.py holds the in-memory servers for tests and the benchmark. Run: `python -m sunk.runtime.syncer`."""

from .loop import CycleReport, SlurmApi, Syncer
from .plan import Action, plan

__all__ = ["Action", "CycleReport", "SlurmApi", "Syncer", "plan"]
