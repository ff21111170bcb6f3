"""AdmissionReview over HTTPS: POST /mutate. The serving certificate and key are files (a mounted
Secret); each connection is wrapped with the context of the files' current contents, so a renewed
certificate is served as soon as the kubelet updates the mount, with no restart."""

from __future__ import annotations

import json
import logging
import os
import socket
import ssl
import threading
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

log = logging.getLogger("sunk.webhook")

MAX_BODY = 3 * 2**20
"""The API server caps an object at 1.5 MiB (etcd's request limit); its AdmissionReview carries it
once or twice (object, oldObject): a larger body is no review."""

Review = Callable[[Mapping[str, Any]], dict[str, Any]]


class Certificate:
    """The TLS context of a certificate and key file pair, rebuilt when either file changes."""

    def __init__(self, cert_file: Path, key_file: Path) -> None:
        self._files = (cert_file, key_file)
        self._lock = threading.Lock()
        self._stamp: tuple[float, float] | None = None
        self._context: ssl.SSLContext | None = None

    def context(self) -> ssl.SSLContext | None:
        """The current context; None while the files are missing or unreadable (not yet issued)."""
        try:
            stamp = (os.stat(self._files[0]).st_mtime, os.stat(self._files[1]).st_mtime)
        except OSError:
            return None
        with self._lock:
            if stamp != self._stamp:
                context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
                # The API server speaks TLS 1.2 and 1.3; nothing older is needed.
                context.minimum_version = ssl.TLSVersion.TLSv1_2
                try:
                    context.load_cert_chain(*self._files)
                except (OSError, ssl.SSLError) as err:
                    log.warning("serving certificate not loaded: %s", err)
                    return self._context
                self._stamp, self._context = stamp, context
                log.info("serving certificate loaded from %s", self._files[0])
            return self._context


class WebhookServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(
        self, address: tuple[str, int], certificate: Certificate, review: Review, *, timeout: float = 10.0
    ) -> None:
        self.certificate = certificate
        self.review = review
        self.timeout = timeout
        """Seconds a connection may take for its handshake and each read (the API server's own
        timeout is shorter; never hold a thread longer)."""
        super().__init__(address, _Handler)

    def get_request(self) -> tuple[socket.socket, Any]:
        """The accepted connection, wrapped but not yet shaken hands: the TLS handshake runs in
        the connection's own thread (finish_request), so a client that connects and says nothing
        holds only its own thread, never the accept loop and the admissions behind it."""
        sock, addr = super().get_request()
        context = self.certificate.context()
        if context is None:
            sock.close()
            raise OSError("no serving certificate yet")
        sock.settimeout(self.timeout)
        return context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False), addr

    def finish_request(self, request: Any, client_address: Any) -> None:
        try:
            request.do_handshake()
        except (ssl.SSLError, OSError):
            return  # a client that fails or never finishes its handshake gets nothing; the socket is closed
        super().finish_request(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    server: WebhookServer
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        if self.path.split("?", 1)[0] != "/mutate":
            self._send(404, {"error": "POST /mutate"})
            return
        length = int(self.headers.get("Content-Length") or 0)
        if not 0 < length <= MAX_BODY:
            self._send(413, {"error": f"body of {length} bytes"})
            return
        try:
            body = json.loads(self.rfile.read(length))
            if not isinstance(body, dict) or body.get("kind") != "AdmissionReview":
                raise ValueError("not an AdmissionReview")
        except ValueError as err:
            self._send(400, {"error": str(err)})
            return
        self._send(200, self.server.review(body))

    def _send(self, code: int, doc: Mapping[str, Any]) -> None:
        data = json.dumps(doc).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        pass  # one line per pod created would drown the log; the metrics count them
