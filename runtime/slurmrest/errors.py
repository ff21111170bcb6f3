"""Typed errors of the slurmrestd client.

slurmrestd reports user errors as HTTP 500 with an `errors[]` list in the body (unknown node is
2018, unknown job 2017), and some calls answer 200 with the error inside: callers cannot rely on
the status code, so every reply is inspected and turned into one of these."""

from __future__ import annotations

from dataclasses import dataclass

from ..common.errors import PermanentError, RetriableError

# Slurm errno values (slurm_errno.h) that mean "slurmctld could not be reached", not "your request
# was wrong": slurmrestd is up but its controller is restarting or gone. Retried, then reported as
# SlurmUnavailable so controllers fail closed instead of acting on a bogus answer.
CONTROLLER_UNREACHABLE = frozenset(
    {
        1001,  # SLURM_COMMUNICATIONS_CONNECTION_ERROR
        1002,  # SLURM_COMMUNICATIONS_SEND_ERROR
        1003,  # SLURM_COMMUNICATIONS_RECEIVE_ERROR
        1004,  # SLURM_COMMUNICATIONS_SHUTDOWN_ERROR
        1800,  # SLURMCTLD_COMMUNICATIONS_CONNECTION_ERROR
        1801,  # SLURMCTLD_COMMUNICATIONS_SEND_ERROR
        1802,  # SLURMCTLD_COMMUNICATIONS_RECEIVE_ERROR
        1803,  # SLURMCTLD_COMMUNICATIONS_SHUTDOWN_ERROR
        1804,  # SLURMCTLD_COMMUNICATIONS_BACKOFF
        5004,  # SLURM_PROTOCOL_SOCKET_IMPL_TIMEOUT
        5005,  # SLURM_PROTOCOL_SOCKET_ZERO_BYTES_SENT
    }
)

INVALID_JOB_ID = 2017
"""ESLURM_INVALID_JOB_ID: the job does not exist (or was purged)."""
INVALID_NODE_NAME = 2018
"""ESLURM_INVALID_NODE_NAME: the node does not exist."""
NODES_BUSY = 2016
"""ESLURM_NODES_BUSY: e.g. DELETE /node of a node that is not DOWN."""


@dataclass(frozen=True)
class SlurmError:
    """One entry of a reply's `errors[]`."""

    code: int
    description: str
    source: str = ""
    message: str = ""


class SlurmRestError(Exception):
    """Base of everything this client raises."""


class SlurmApiError(SlurmRestError, PermanentError):
    """slurmrestd answered and Slurm refused the request (bad input, unknown object, denied)."""

    def __init__(self, method: str, path: str, status: int, errors: list[SlurmError]) -> None:
        self.method = method
        self.path = path
        self.status = status
        self.errors = errors
        first = errors[0] if errors else SlurmError(0, f"HTTP {status}")
        self.code = first.code
        self.description = first.description or first.message
        super().__init__(f"{method} {path}: HTTP {status}, Slurm error {self.code}: {self.description}")

    @property
    def not_found(self) -> bool:
        return self.code in (INVALID_JOB_ID, INVALID_NODE_NAME)


class SlurmUnavailable(SlurmRestError, RetriableError):
    """No usable answer: connection refused, timeout, 502-504, or slurmctld unreachable behind
    slurmrestd, still so after the bounded retries."""

    def __init__(self, method: str, path: str, detail: str) -> None:
        self.method = method
        self.path = path
        self.detail = detail
        super().__init__(f"{method} {path}: Slurm unavailable: {detail}")
