"""Syncer settings, read from the environment (the Deployment sets them)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

ENV = {
    "cluster": "SUNK_CLUSTER",
    "namespace": "SUNK_NAMESPACE",
    "slurmrestd_url": "SUNK_SLURMRESTD_URL",
    "jwt_key_file": "SUNK_JWT_KEY_FILE",
    "slurm_user": "SUNK_SLURM_USER",
    "metrics_port": "SUNK_METRICS_PORT",
    "sync_interval": "SUNK_SYNC_INTERVAL",
}


class Settings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    cluster: str = Field(min_length=1)
    """Slurm ClusterName; labels metrics and logs."""
    namespace: str = Field(min_length=1)
    """The tenant namespace whose slurmd pods this syncer manages."""
    slurmrestd_url: str = Field(pattern=r"^https?://")
    jwt_key_file: Path
    """HS256 key the syncer mints its own tokens with (the JWT Secret, mounted)."""
    slurm_user: str = "slurm"
    """Slurm user the tokens name; must be an operator/admin to drain and resume nodes."""
    metrics_port: int = Field(default=8080, ge=1, le=65535)
    sync_interval: float = Field(default=15.0, gt=0)
    """Seconds between cycle starts."""


def from_env(env: Mapping[str, str] | None = None) -> Settings:
    """Raises ValueError naming each bad or missing variable."""
    env = os.environ if env is None else env
    values = {field: env[var] for field, var in ENV.items() if env.get(var, "") != ""}
    try:
        return Settings.model_validate(values)
    except ValidationError as exc:
        problems = [f"{ENV[str(e['loc'][0])]}: {e['msg']}" for e in exc.errors() if e["loc"]]
        raise ValueError("bad syncer settings: " + "; ".join(problems)) from None
