"""A Slurm client command (scontrol, squeue) run as a token's user: the environment it gets and
how its failures read. Shared by the syncer's node read (nodetext.py) and the exporter's job read
(jobtext.py), which authenticate with SLURM_JWT (auth/jwt) and so need slurm.conf and the JWT key,
no Slurm or munge key."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import ClassVar

from .auth import TokenProvider
from .errors import SlurmRestError

PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class TokenClient:
    """Runs `command` + arguments with only PATH, LANG, SLURM_CONF, SLURM_JWT (and what a subclass
    adds) in its environment. `command` is how the client is started (a test runs it inside a
    Slurm image's root). `reads` counts runs, like SlurmRestClient.requests. A client that can't
    be started, times out or exits non-zero raises `error` with its last line of stderr (never
    the token)."""

    error: ClassVar[type[SlurmRestError]] = SlurmRestError

    def __init__(self, token: TokenProvider, conf: Path | str, *, command: Sequence[str], timeout: float) -> None:
        self.token = token
        self.conf = str(conf)
        self.command = tuple(command)
        self.timeout = timeout
        self.reads = 0

    def _run(self, args: Sequence[str], what: str, env: Mapping[str, str] | None = None) -> bytes:
        environment = {
            "PATH": PATH,
            "LANG": "C",
            **(env or {}),
            "SLURM_CONF": self.conf,
            "SLURM_JWT": self.token.token(),
        }
        self.reads += 1
        try:
            done = subprocess.run(
                [*self.command, *args], env=environment, capture_output=True, timeout=self.timeout, check=False
            )
        except (OSError, subprocess.SubprocessError) as exc:
            raise self.error(f"{what}: {type(exc).__name__}: {exc}") from exc
        if done.returncode != 0:
            detail = done.stderr.decode("utf-8", "replace").strip().splitlines()
            raise self.error(f"{what}: exit {done.returncode}: {detail[-1] if detail else 'no message'}")
        return done.stdout
