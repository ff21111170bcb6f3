"""One small HTTP server per process: Prometheus metrics on /metrics, liveness on /healthz,
readiness on /readyz. Probes answer 200 or 503 with a one-line reason."""

from __future__ import annotations

import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

Check = Callable[[], tuple[bool, str]]
"""Returns (ok, why)."""


def fresh_view(ok: bool, ended: float, now: float, bound: float) -> tuple[bool, str]:
    """Readiness of a loop that reads Slurm: its last cycle read everything *and* ended less than
    `bound` seconds ago (monotonic `ended` and `now`). Without the bound a cycle blocked on a call
    (a slurmctld failing over, a hung connection) keeps the last verdict, ready while blind."""
    if not ok:
        return False, "the last cycle could not read Slurm or Kubernetes"
    age = now - ended
    if age >= bound:
        return False, f"no cycle has ended for {age:.0f}s (bound {bound:.0f}s): the view is stale"
    return True, f"both sides read {age:.0f}s ago"


class HealthServer:
    def __init__(
        self,
        port: int,
        registry: CollectorRegistry,
        *,
        alive: Check,
        ready: Check,
        host: str = "0.0.0.0",  # probes and Prometheus scrape the pod IP
    ) -> None:
        routes: dict[str, Check] = {"/healthz": alive, "/readyz": ready}

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                if path == "/metrics":
                    self._send(200, generate_latest(registry), CONTENT_TYPE_LATEST)
                elif path in routes:
                    ok, why = routes[path]()
                    self._send(200 if ok else 503, f"{why}\n".encode(), "text/plain")
                else:
                    self._send(404, b"not found\n", "text/plain")

            def _send(self, code: int, body: bytes, content_type: str) -> None:
                self.send_response(code)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass  # probes every few seconds would drown the log

        self._server = ThreadingHTTPServer((host, port), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, name="health", daemon=True)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def start(self) -> HealthServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
