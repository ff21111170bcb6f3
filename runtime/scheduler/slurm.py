"""The Slurm side: a SlurmApi protocol and its implementation on the shared slurmrestd client."""

from __future__ import annotations

from typing import Any, Protocol

from ..slurmrest import JobSubmit, SlurmApiError, SlurmRestClient
from ..slurmrest.errors import INVALID_JOB_ID
from . import keys
from .model import JobView, job_view
from .request import JobRequest, submit_body

ALREADY_DONE = 2021
"""ESLURM_ALREADY_DONE: cancelling a job that already ended."""


class Rejected(Exception):
    """Slurm refused the submit (unknown partition, no node can ever satisfy it, QOS denied, ...)."""


class SlurmApi(Protocol):
    def jobs(self) -> list[JobView]:
        """Every job with a marker that slurmctld knows (pending, running, recently ended)."""
        ...

    def submit(self, request: JobRequest, marker: keys.Marker) -> int:
        """Submit a placeholder job; raises Rejected when Slurm says no."""
        ...

    def cancel(self, job_id: int) -> None:
        """Cancel; a job that is gone or already over is fine."""
        ...


class RestSlurm:
    """SlurmApi on SlurmRestClient (slurmrestd v0.0.42)."""

    def __init__(self, rest: SlurmRestClient, *, cwd: str = "/tmp") -> None:
        self._rest = rest
        self._cwd = cwd

    def jobs(self) -> list[JobView]:
        views = (job_view(j.model_dump()) for j in self._rest.list_jobs())
        return [v for v in views if v is not None]

    def submit(self, request: JobRequest, marker: keys.Marker) -> int:
        fields: dict[str, Any] = dict(submit_body(request, marker, cwd=self._cwd)["job"])
        # JobSubmit takes plain numbers where the wire format has {"set", "number"} objects.
        fields["memory_per_node"] = request.memory_mib
        fields["time_limit"] = request.time_limit
        fields["priority"] = request.priority
        try:
            return self._rest.submit_job(JobSubmit(**fields))
        except SlurmApiError as e:
            # The first line ("Batch job submission failed") is generic; `error` says why.
            why = "; ".join(dict.fromkeys(err.message or err.description for err in e.errors)) or str(e)
            raise Rejected(why) from e

    def cancel(self, job_id: int) -> None:
        try:
            self._rest.cancel_job(job_id)
        except SlurmApiError as e:
            if e.code not in (INVALID_JOB_ID, ALREADY_DONE):
                raise
