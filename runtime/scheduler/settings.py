"""Settings from the environment (the Deployment's env)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

REQUIRED = ("SUNK_CLUSTER", "SUNK_NAMESPACE", "SUNK_SLURMRESTD_URL", "SUNK_JWT_KEY_FILE")


@dataclass(frozen=True)
class Settings:
    cluster: str
    """Slurm ClusterName; names this scheduler in logs and Events."""
    namespace: str
    """Namespace of the cluster's slurmd pods."""
    slurmrestd_url: str
    jwt_key_file: str
    """HS256 key the scheduler mints its own slurmrestd tokens with (a mounted Secret)."""
    slurm_user: str = "slurm"
    """Slurm user the placeholder jobs run as; an operator if admin priorities are used."""
    metrics_port: int = 8080
    scheduler_name: str = "sunk-scheduler"
    interval: float = 1.0
    """Seconds between cycles when no watch event arrives (SUNK_SCHEDULER_INTERVAL)."""
    bind_grace: float = 60.0
    """Seconds from a job's start during which a pod that does not fit the Node Slurm chose is
    retried there before the job is resubmitted without that node (SUNK_BIND_GRACE)."""
    job_cwd: str = "/tmp"
    """Working directory of placeholder jobs, as slurmd sees it (SUNK_JOB_CWD)."""
    pod_namespaces: tuple[str, ...] = ()
    """Namespaces whose pods this scheduler places (SUNK_POD_NAMESPACES, comma-separated; `*` for
    all, which needs cluster-wide pod RBAC). Default: SUNK_NAMESPACE only, what the per-tenant
    Role grants; every tenant's scheduler shares the schedulerName, so scope keeps them apart."""

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Settings:
        missing = [k for k in REQUIRED if not env.get(k)]
        if missing:
            raise ValueError(f"missing environment: {', '.join(missing)}")
        try:
            port = int(env.get("SUNK_METRICS_PORT", "8080"))
            interval = float(env.get("SUNK_SCHEDULER_INTERVAL", "1.0"))
            grace = float(env.get("SUNK_BIND_GRACE", "60"))
        except ValueError as e:
            raise ValueError(f"SUNK_METRICS_PORT / SUNK_SCHEDULER_INTERVAL / SUNK_BIND_GRACE: {e}") from None
        if interval <= 0:
            raise ValueError("SUNK_SCHEDULER_INTERVAL: must be positive")
        if grace < 0:
            raise ValueError("SUNK_BIND_GRACE: must not be negative")
        return cls(
            cluster=env["SUNK_CLUSTER"],
            namespace=env["SUNK_NAMESPACE"],
            slurmrestd_url=env["SUNK_SLURMRESTD_URL"],
            jwt_key_file=env["SUNK_JWT_KEY_FILE"],
            slurm_user=env.get("SUNK_SLURM_USER") or "slurm",
            metrics_port=port,
            scheduler_name=env.get("SUNK_SCHEDULER_NAME") or "sunk-scheduler",
            interval=interval,
            bind_grace=grace,
            job_cwd=env.get("SUNK_JOB_CWD") or "/tmp",
            pod_namespaces=tuple(
                ns.strip() for ns in (env.get("SUNK_POD_NAMESPACES") or env["SUNK_NAMESPACE"]).split(",") if ns.strip()
            ),
        )
