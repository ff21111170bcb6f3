"""Free TCP ports and readiness waits for the harness's daemons."""

from __future__ import annotations

import random
import socket
import subprocess
import time
from collections.abc import Callable

# Below Linux's ephemeral range (32768+), so outgoing connections don't take a chosen port
# between picking and binding it.
LOW, HIGH = 20000, 32000


def free_ports(count: int, taken: set[int] | None = None) -> list[int]:
    """`count` distinct ports nothing listens on (Slurm daemons bind 0.0.0.0, so check that)."""
    avoid = set(taken or ())
    chosen: list[int] = []
    while len(chosen) < count:
        port = random.randint(LOW, HIGH)
        if port in avoid or port in chosen:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("0.0.0.0", port))
            except OSError:
                continue
        chosen.append(port)
    return chosen


def listening(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


def wait_until(
    what: str,
    ready: Callable[[], bool],
    *,
    timeout: float,
    alive: subprocess.Popen[bytes] | None = None,
    on_fail: Callable[[], str] = lambda: "",
    interval: float = 0.05,
) -> None:
    """Poll `ready` until true; fail early when the daemon `alive` has exited."""
    deadline = time.monotonic() + timeout
    while not ready():
        if alive is not None and alive.poll() is not None:
            raise RuntimeError(f"{what}: process exited with {alive.returncode}\n{on_fail()}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not ready after {timeout:.0f} s\n{on_fail()}")
        time.sleep(interval)
