"""Syncer settings, read from the environment (the Deployment sets them; runtime/common/settings.py)."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, field_validator

from ..common.settings import EnvSettings


class Settings(EnvSettings):
    cluster: str = Field(min_length=1)
    """Slurm ClusterName; labels metrics and logs (SUNK_CLUSTER)."""
    namespace: str = Field(min_length=1)
    """The tenant namespace whose slurmd pods this syncer manages (SUNK_NAMESPACE)."""
    slurmrestd_url: str = Field(pattern=r"^https?://")
    """SUNK_SLURMRESTD_URL."""
    jwt_key_file: Path
    """HS256 key the syncer mints its own tokens with (the JWT Secret, mounted; SUNK_JWT_KEY_FILE)."""
    slurm_user: str = "slurm"
    """Slurm user the tokens name; must be an operator/admin to drain and resume nodes (SUNK_SLURM_USER)."""
    slurm_conf_file: Path | None = None
    """slurm.conf for `scontrol show nodes`, the cheap read of every node each cycle
    (runtime/slurmrest/nodetext.py; SUNK_SLURM_CONF_FILE, the Deployment mounts the cluster's).
    Unset, or no scontrol in the image: every read goes through slurmrestd."""
    metrics_port: int = Field(default=8080, ge=1, le=65535)
    """/metrics, /healthz and /readyz (SUNK_METRICS_PORT)."""
    sync_interval: float = Field(default=1.0, gt=0)
    """Seconds between cycle starts (SUNK_SYNC_INTERVAL; the Deployment sets 1, see
    sunk/manifests/runtime.SYNC_INTERVAL for why)."""
    drain_conditions: tuple[str, ...] = ()
    """Node condition types that drain the slurmd on a Node while True, e.g. KernelDeadlock,
    ReadonlyFilesystem (SUNK_DRAIN_CONDITIONS, comma-separated; from spec.healthCheck.nodeConditions).
    Default: none."""

    @field_validator("drain_conditions", mode="before")
    @classmethod
    def _comma_list(cls, value: object) -> object:
        return tuple(t.strip() for t in value.split(",") if t.strip()) if isinstance(value, str) else value
