"""Operator settings, read from the environment (the Deployment sets them; runtime/common/settings.py)."""

from __future__ import annotations

import json
import socket

from pydantic import Field, ValidationError, field_validator

from sunk import naming
from sunk.spec.errors import format_errors
from sunk.spec.operator import TenantPolicy

from ..common.settings import EnvSettings


class Settings(EnvSettings):
    ENV = {
        "identity": "SUNK_OPERATOR_ID",
        "lease_namespace": "SUNK_OPERATOR_NAMESPACE",
        "lease_name": "SUNK_OPERATOR_LEASE",
        "resync": "SUNK_RESYNC_SECONDS",
        "lease_duration": "SUNK_LEASE_SECONDS",
        "renew_deadline": "SUNK_RENEW_DEADLINE_SECONDS",
        "topology_delay": "SUNK_TOPOLOGY_DELAY_SECONDS",
        "topology_retry": "SUNK_TOPOLOGY_RETRY_SECONDS",
        "policy": "SUNK_OPERATOR_POLICY",
    }

    identity: str = Field(default_factory=socket.gethostname, min_length=1)
    """This replica in the Lease (SUNK_OPERATOR_ID). Default: the host name (the pod name)."""
    lease_namespace: str = "sunk-system"
    """Where the Lease lives (SUNK_OPERATOR_NAMESPACE)."""
    lease_name: str = "sunk-operator"
    """SUNK_OPERATOR_LEASE."""
    resync: float = Field(default=10.0, gt=0)
    """Seconds between resyncs while leading (SUNK_RESYNC_SECONDS)."""
    lease_duration: float = Field(default=15.0, gt=0)
    """SUNK_LEASE_SECONDS."""
    renew_deadline: float = Field(default=10.0, gt=0)
    """SUNK_RENEW_DEADLINE_SECONDS."""
    topology_delay: float = Field(default=90.0, ge=0)
    """Seconds after a topology.conf write by which the kubelet has surely put it in slurmctld's
    volume: the last reconfigure for that text (SUNK_TOPOLOGY_DELAY_SECONDS)."""
    topology_retry: float = Field(default=10.0, ge=0)
    """Seconds after a topology.conf write of the first reconfigure tried before topology_delay,
    the next ones at 2x, 4x... that age, so a new node joins its switch (and multi-node jobs) soon
    after the kubelet refreshes the file, not topology_delay after the write
    (SUNK_TOPOLOGY_RETRY_SECONDS; 0: no tries, only the reconfigure at topology_delay)."""
    slurmrestd_url: str = f"http://{{cluster}}-restapi.{{namespace}}.svc.cluster.local:{naming.SLURMRESTD_PORT}"
    """Each tenant's slurmrestd, {cluster} and {namespace} filled in (SUNK_SLURMRESTD_URL)."""
    slurm_user: str = "slurm"
    """SUNK_SLURM_USER."""
    metrics_port: int = Field(default=8080, ge=1, le=65535)
    """/metrics, /healthz and /readyz (SUNK_METRICS_PORT)."""
    policy: TenantPolicy = Field(default_factory=TenantPolicy)
    """The tenant policy as camelCase JSON (SUNK_OPERATOR_POLICY; sunk.policy). Default: tenant
    namespaces only, images from ghcr.io/sunk-dev/, no hostPath."""

    @field_validator("policy", mode="before")
    @classmethod
    def _policy_json(cls, value: object) -> object:
        if not isinstance(value, str):
            return value
        try:
            return TenantPolicy.model_validate(json.loads(value), by_alias=True, by_name=False)
        except json.JSONDecodeError as err:
            raise ValueError(f"not JSON: {err}") from None
        except ValidationError as err:
            raise ValueError("; ".join(str(p) for p in format_errors(err, TenantPolicy))) from None
