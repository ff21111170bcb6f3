"""The release a running slurmctld reports (`scontrol show config`'s SLURM_VERSION), for the
harness tests that must know which release they ran on (`make test-compat` asks for 24.11)."""

from __future__ import annotations

from sunk.runtime.harness import LocalSlurm


def slurmctld_release(slurm: LocalSlurm) -> str:
    """SLURM_VERSION as slurmctld reports it to the login image's scontrol ("" if absent)."""
    config = slurm.run("scontrol", "show", "config", timeout=120).stdout
    return next((line.split("=", 1)[1].strip() for line in config.splitlines() if line.startswith("SLURM_VERSION")), "")
