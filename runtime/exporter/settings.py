"""Exporter settings, read from the environment (its Deployment sets them; runtime/common/settings.py)."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from ..common.settings import EnvSettings


class Settings(EnvSettings):
    cluster: str = Field(min_length=1)
    """Slurm ClusterName; named in logs (SUNK_CLUSTER)."""
    namespace: str = Field(min_length=1)
    """The tenant namespace (SUNK_NAMESPACE)."""
    slurmrestd_url: str = Field(pattern=r"^https?://")
    """SUNK_SLURMRESTD_URL."""
    jwt_key_file: Path
    """HS256 key the exporter mints its own tokens with (the JWT Secret, mounted; SUNK_JWT_KEY_FILE)."""
    slurm_user: str = "slurm"
    """Slurm user the tokens name; it must see every job (SlurmUser does, whatever PrivateData says; SUNK_SLURM_USER)."""
    slurm_conf_file: Path | None = None
    """slurm.conf for `squeue`, the cheap read of every job each collection
    (runtime/slurmrest/jobtext.py; SUNK_SLURM_CONF_FILE, the Deployment mounts the cluster's).
    Unset, or no squeue in the image: every read goes through slurmrestd."""
    metrics_port: int = Field(default=8080, ge=1, le=65535)
    """/metrics, /healthz and /readyz (SUNK_METRICS_PORT)."""
    collect_interval: float = Field(default=30.0, ge=5)
    """Seconds between reads of Slurm (SUNK_COLLECT_INTERVAL). Scrapes are served from the last
    read, so slurmctld's load does not grow with the number of Prometheus replicas."""
    per_user_metrics: bool = False
    """Also export jobs and CPUs per Slurm user (SUNK_PER_USER_METRICS). Off by default: one series
    per user and state grows with the user base."""
