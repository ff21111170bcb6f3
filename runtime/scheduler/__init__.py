"""Slurm-backed Kubernetes scheduler: pods whose schedulerName is ours are placed by Slurm.

Each pending pod (or all-or-nothing group of pods) becomes a placeholder Slurm job; when Slurm
starts the job, the pod is bound to the Kubernetes Node that hosts the allocated Slurm node.
Layers: `plan` (pure decisions), `kube` / `slurm` (clients), `loop` (observe, plan, apply).
"""
