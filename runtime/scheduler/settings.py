"""Scheduler settings, read from the environment (the Deployment sets them; runtime/common/settings.py)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from ..common.settings import EnvSettings


class Settings(EnvSettings):
    ENV = {"interval": "SUNK_SCHEDULER_INTERVAL"}

    cluster: str = Field(min_length=1)
    """Slurm ClusterName; names this scheduler in logs and Events (SUNK_CLUSTER)."""
    namespace: str = Field(min_length=1)
    """Namespace of the cluster's slurmd pods (SUNK_NAMESPACE)."""
    slurmrestd_url: str = Field(pattern=r"^https?://")
    """SUNK_SLURMRESTD_URL."""
    jwt_key_file: str = Field(min_length=1)
    """HS256 key the scheduler mints its own slurmrestd tokens with (a mounted Secret; SUNK_JWT_KEY_FILE)."""
    slurm_user: str = "slurm"
    """Slurm user the placeholder jobs run as; an operator if admin priorities are used (SUNK_SLURM_USER)."""
    metrics_port: int = Field(default=8080, ge=1, le=65535)
    """/metrics, /healthz and /readyz (SUNK_METRICS_PORT)."""
    scheduler_name: str = "sunk-scheduler"
    """The schedulerName of the pods it places (SUNK_SCHEDULER_NAME)."""
    interval: float = Field(default=1.0, gt=0)
    """Seconds between cycles when no watch event arrives (SUNK_SCHEDULER_INTERVAL)."""
    bind_grace: float = Field(default=60.0, ge=0)
    """Seconds from a job's start during which a pod that does not fit the Node Slurm chose is
    retried there before the job is resubmitted without that node (SUNK_BIND_GRACE)."""
    immediate_allocation: bool = False
    """Place each pod first as an immediate allocation, started in the submit request, and only
    when that is refused as a queued batch placeholder (SUNK_IMMEDIATE_ALLOCATION;
    docs/concepts/scheduler.md). Needs InactiveLimit=0 (an allocation has no srun for slurmctld to
    ping), which sunk renders: the Deployment sets it unless controller.extraSlurmConf sets
    InactiveLimit. Default: off."""
    job_cwd: str = "/tmp"
    """Working directory of placeholder jobs, as slurmd sees it (SUNK_JOB_CWD)."""
    pod_namespaces: tuple[str, ...] = ()
    """Namespaces whose pods this scheduler places (SUNK_POD_NAMESPACES, comma-separated; `*` for
    all, which needs cluster-wide pod RBAC). Default: SUNK_NAMESPACE only, what the per-tenant
    Role grants; every tenant's scheduler shares the schedulerName, so scope keeps them apart."""

    gang_topology: Literal["none", "tree", "block"] = "none"
    """The topology gangs are placed in (SUNK_GANG_TOPOLOGY; rendered from the stack's topology):
    block keeps a gang inside one block, tree asks for one leaf switch. Default: none."""
    gang_block_nodes: int = Field(default=0, ge=0)
    """Nodes of the topology's largest block (SUNK_GANG_BLOCK_NODES, the last of blockSizes); a
    gang larger is refused, as it could never be placed in one. Default: 0 (not known)."""

    @field_validator("pod_namespaces", mode="before")
    @classmethod
    def _comma_list(cls, value: object) -> object:
        return tuple(ns.strip() for ns in value.split(",") if ns.strip()) if isinstance(value, str) else value

    def model_post_init(self, context: object) -> None:
        if not self.pod_namespaces:
            object.__setattr__(self, "pod_namespaces", (self.namespace,))
