"""The syncer: keeps Slurm's and Kubernetes' views of every slurmd node in step.

The shape every controller shares: settings.py (environment), model.py (what is observed, pure),
plan.py (decisions, pure), kube.py and slurm.py (the servers), loop.py (observe, plan, apply),
metrics.py, __main__.py (the process); in-memory servers for tests and benchmarks are
tests/support/fakes/syncer.py.
Run: `python -m sunk.runtime.syncer`. Nothing is imported here, so importing the pure modules
pulls in no client library."""
