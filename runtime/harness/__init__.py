"""Local real-Slurm harness: the image package set in a chroot, daemons from rendered files.

from sunk.runtime.harness import LocalSlurm, SimNode
with LocalSlurm.start(load_stack("acme-dev").spec) as slurm:
    slurm.run("sinfo", check=True)
"""

from .layout import SimNode, default_nodes
from .local import LocalSlurm, SlurmCommandError

__all__ = ["LocalSlurm", "SimNode", "SlurmCommandError", "default_nodes"]
