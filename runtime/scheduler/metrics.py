"""Prometheus metrics and the /metrics, /healthz, /readyz endpoints."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

# Pending -> bound spans Slurm's own scheduling (sub-second) up to long queue waits.
_LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300, 1800, 3600)


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.queue = Gauge("sunk_scheduler_pending_pods", "Pods of this scheduler not yet bound", registry=r)
        self.bind_latency = Histogram(
            "sunk_scheduler_bind_latency_seconds",
            "From first seen pending to bound",
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.submits = Counter("sunk_scheduler_submits", "Placeholder jobs submitted", registry=r)
        self.rejects = Counter("sunk_scheduler_rejects", "Requests refused (invalid or by Slurm)", registry=r)
        self.binds = Counter("sunk_scheduler_binds", "Pods bound", registry=r)
        self.evictions = Counter("sunk_scheduler_evictions", "Pods evicted", ["reason"], registry=r)
        self.cancels = Counter("sunk_scheduler_cancels", "Placeholder jobs cancelled", registry=r)
        self.errors = Counter("sunk_scheduler_errors", "Failed API operations", ["op"], registry=r)
        self.cycle_seconds = Histogram("sunk_scheduler_cycle_seconds", "One observe-plan-apply cycle", registry=r)
        self.last_cycle = Gauge(
            "sunk_scheduler_last_success_timestamp_seconds",
            "End of the last cycle that observed everything",
            registry=r,
        )


class Health:
    """Liveness: the loop keeps cycling. Readiness: the last cycle observed Slurm and Kubernetes."""

    def __init__(self, stale_after: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._stale_after = stale_after
        self._clock = clock
        self.last_attempt: float | None = None
        self.last_success: float | None = None

    def _now(self) -> float:
        return self._clock()

    def attempted(self, ok: bool) -> None:
        self.last_attempt = self._now()
        if ok:
            self.last_success = self.last_attempt

    def live(self) -> bool:
        return self.last_attempt is None or self._now() - self.last_attempt < self._stale_after

    def ready(self) -> bool:
        return self.last_success is not None and self._now() - self.last_success < self._stale_after


def serve(metrics: Metrics, health: Health, port: int, host: str = "0.0.0.0") -> ThreadingHTTPServer:
    """Start the endpoints in a daemon thread; `shutdown()` the returned server to stop."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/metrics":
                body, ctype, code = generate_latest(metrics.registry), CONTENT_TYPE_LATEST, 200
            elif self.path in ("/healthz", "/readyz"):
                ok = health.live() if self.path == "/healthz" else health.ready()
                body, ctype, code = (b"ok\n" if ok else b"not ok\n"), "text/plain", 200 if ok else 503
            else:
                body, ctype, code = b"not found\n", "text/plain", 404
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass  # scrapes every few seconds would drown the scheduler's own log

    server = ThreadingHTTPServer((host, port), Handler)
    threading.Thread(target=server.serve_forever, name="sunk-scheduler-http", daemon=True).start()
    return server
