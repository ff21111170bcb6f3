"""slurmctld's state files as the state guard reads them, and controller addresses that don't
answer: what the state-guard, snapshot and lock tests build their StateSaveLocation and peers from."""

from __future__ import annotations

import socket
import struct


def state_file(protocol: int, body: bytes = b"jobs", next_job: int = 1000, saved: int = 1_796_000_000) -> bytes:
    """The head slurmctld writes: packstr("PROTOCOL_VERSION"), the protocol version, and (in
    job_state) the time saved and the next job id."""
    name = b"PROTOCOL_VERSION\0"
    return struct.pack(">I", len(name)) + name + struct.pack(">HQI", protocol << 8, saved, next_job) + body


def free_port() -> int:
    """A loopback port nothing listens on (a controller that does not answer)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
