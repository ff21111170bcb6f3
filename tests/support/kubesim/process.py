"""KubeSimProcess: KubeSim served from a child process of its own, for benchmarks.

KubeSim serves from a thread of the caller's process, so its requests share one interpreter lock
with whatever else that process does: in a benchmark, the bench's own pod creation and simulated
kubelet. Here kmock has a process (and an interpreter lock) to itself, as an API server would,
and its CPU can be measured apart. (That lock was first blamed for the slow creation of
bench/scheduler_bench.py's 1,000-pod burst; measured, the cause was kubesim's admission scanning
every pod, since fixed: with the fix both ways meet the rate goal, bench/RESULTS.md.)

What tests read of KubeSim (bound_at, bindings, rejections, requests) crosses a pipe as a copy
taken when asked. time.monotonic() is the system's CLOCK_MONOTONIC, so bound_at's times compare
with the caller's. Setting KubeSim's switches (admission, fail_bindings...) is not offered: the
benchmarks that use this process don't.
"""

from __future__ import annotations

import collections
import contextlib
import os
import socket
import subprocess
import sys
import threading
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from kubernetes import client

from tests.support.kubesim.server import KubeSim, write_kubeconfig

READS = frozenset({"bound_at", "bindings", "rejections", "requests"})
"""KubeSim's properties a caller may read across the pipe."""
CALLS = frozenset({"add_namespace"})
"""KubeSim's methods a caller may call across the pipe."""


def serve(conn: Connection) -> None:
    """The child: KubeSim, then one answer per request until the pipe closes or None arrives."""
    with KubeSim() as sim:
        conn.send(sim.url)
        while True:
            try:
                request = conn.recv()
            except EOFError:
                return
            if request is None:
                return
            name, args, kwargs = request
            if name not in READS | CALLS:
                conn.send((False, f"not offered across the pipe: {name}"))
                continue
            try:
                value = getattr(sim, name)(*args, **kwargs) if name in CALLS else getattr(sim, name)
                conn.send((True, value))
            except Exception as e:  # the caller raises it, with the child's message
                conn.send((False, f"{type(e).__name__}: {e}"))


class KubeSimProcess:
    """KubeSim's reads and add_namespace, with the server in a child process."""

    def __init__(self) -> None:
        self.url = ""
        self._lock = threading.Lock()  # one request and its answer at a time on the pipe
        self._conn: Connection | None = None
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> KubeSimProcess:
        # A plain child process (not multiprocessing's spawn, which imports the caller's main
        # module again): `python -m` this module, its end of a socket pair as a Connection.
        ours, theirs = socket.socketpair()
        root = Path(__file__).resolve().parents[3]
        self._process = subprocess.Popen(
            [sys.executable, "-m", "tests.support.kubesim.process", str(theirs.fileno())],
            pass_fds=[theirs.fileno()],
            cwd=root,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))},
        )
        theirs.close()
        self._conn = Connection(ours.detach())
        if not self._conn.poll(60):
            self.stop()
            raise RuntimeError("kmock's process did not start within 60 s")
        self.url = self._conn.recv()
        return self

    def stop(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(OSError):  # the child is gone already
                self._conn.send(None)
            self._conn.close()
            self._conn = None
        if self._process is not None:
            try:
                self._process.wait(10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait(5)

    def __enter__(self) -> KubeSimProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def pid(self) -> int:
        """The child's process id (benchmarks sample its CPU)."""
        assert self._process is not None, "KubeSimProcess not started"
        return self._process.pid

    def _ask(self, name: str, *args: Any, **kwargs: Any) -> Any:
        assert self._conn is not None, "KubeSimProcess not started"
        with self._lock:
            self._conn.send((name, args, kwargs))
            ok, value = self._conn.recv()
        if not ok:
            raise RuntimeError(f"kmock's process: {name}: {value}")
        return value

    @property
    def bound_at(self) -> dict[tuple[str, str], float]:
        """(namespace, pod) -> time.monotonic() of its accepted binding."""
        return dict(self._ask("bound_at"))

    @property
    def bindings(self) -> list[tuple[str, str, str]]:
        return list(self._ask("bindings"))

    @property
    def rejections(self) -> list[tuple[str, str, str, str]]:
        return list(self._ask("rejections"))

    @property
    def requests(self) -> collections.Counter[tuple[str, str]]:
        return collections.Counter(self._ask("requests"))

    def add_namespace(self, name: str, **kwargs: Any) -> None:
        self._ask("add_namespace", name, **kwargs)

    def api_client(self) -> client.ApiClient:
        return client.ApiClient(client.Configuration(host=self.url))

    def kubeconfig(self, path: Path) -> Path:
        return write_kubeconfig(self.url, path)


if __name__ == "__main__":
    serve(Connection(int(sys.argv[1])))
