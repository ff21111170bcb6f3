"""How every controller reaches Slurm, built one way: a token minted from the cluster's JWT key
(mounted as a file, or read from the tenant's Secret by the operator), a slurmrestd client with
the timeouts the caller's cycle wants, and, beside it, the Slurm client command (scontrol,
squeue) some reads go through when the image has it and slurm.conf is mounted.

The syncer, the scheduler and the exporter call it from their `__main__`, the operator for each
tenant it serves (operator/slurm.py). The client is imported when one is made, so this module
stays importable where urllib3 and httpx are not (the pure modules' rule, .importlinter)."""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from .auth import JwtMinter
from .versions import Discovered

if TYPE_CHECKING:
    from .client import SlurmRestClient

log = logging.getLogger(__name__)

LONG_READ_TIMEOUT = 30.0
LONG_READ_RETRIES = 1
"""For a controller whose cycle reads every node or job: slurmrestd itself waits ~9 s for an
unreachable slurmctld before answering 502, and a 10,000-node list takes seconds, so a long
timeout and one retry; the next cycle is the real retry."""


@dataclass(frozen=True)
class SlurmAccess:
    """One controller's way into one Slurm cluster's slurmrestd."""

    url: str
    user: str
    """The Slurm user the tokens name (SlurmUser, to drain and resume)."""
    token: JwtMinter
    timeout: float = 10.0
    """Seconds per request (the client's default)."""
    retries: int = 3
    """Retries of a request slurmrestd could not answer (the client's default)."""
    discovered: Discovered = field(default_factory=Discovered, compare=False, repr=False)
    """The data_parser version the first client found, which the later ones start from."""

    @classmethod
    def from_key(cls, url: str, user: str, key: bytes, *, timeout: float = 10.0, retries: int = 3) -> SlurmAccess:
        """From the JWT key's bytes (the operator reads them from the tenant's Secret)."""
        return cls(url, user, JwtMinter(key, user), timeout=timeout, retries=retries)

    @classmethod
    def from_key_file(
        cls, url: str, user: str, key_file: str | Path, *, timeout: float = 10.0, retries: int = 3
    ) -> SlurmAccess:
        """From the mounted JWT key Secret (SUNK_JWT_KEY_FILE)."""
        return cls(url, user, JwtMinter.from_file(key_file, user), timeout=timeout, retries=retries)

    def client(self) -> SlurmRestClient:
        """A new client (each holds its own connections; the caller closes it)."""
        from .client import SlurmRestClient

        return SlurmRestClient(
            self.url,
            user=self.user,
            token=self.token,
            timeout=self.timeout,
            retries=self.retries,
            discovered=self.discovered,
        )


@dataclass(frozen=True)
class SlurmCommand:
    """A Slurm client command beside slurmrestd, and the slurm.conf it reads."""

    command: tuple[str, ...]
    slurm_conf: Path


def slurm_command(
    name: str, slurm_conf: Path | None, *, which: Callable[[str], str | None] = shutil.which
) -> SlurmCommand | None:
    """`name` (scontrol, squeue) for the reads that go through it, or None: then every read goes
    through slurmrestd (said once in the log where slurm.conf is mounted but the image lacks it)."""
    if slurm_conf is None:
        return None
    path = which(name)
    if path is None:
        log.warning("no %s in this image: every read it would serve goes through slurmrestd", name)
        return None
    return SlurmCommand((path,), slurm_conf)
