"""An AdmissionReview POSTed to a webhook as kube-apiserver posts it: over HTTPS, the server's
certificate verified against the configuration's caBundle for the Service's name."""

from __future__ import annotations

import base64
import http.client
import json
import socket
import ssl
from typing import Any


class CallFailed(Exception):
    """The webhook could not be called, or its answer was not JSON."""


def post(address: tuple[str, int], server_name: str, path: str, ca_bundle: str, body: Any, timeout: float) -> Any:
    """POST `body` to https://server_name/path at `address`, verified against `ca_bundle` (PEM,
    base64 as in clientConfig); the answer as JSON."""
    try:
        context = ssl.create_default_context(cadata=base64.b64decode(ca_bundle).decode() if ca_bundle else None)
    except (ValueError, ssl.SSLError) as err:
        raise CallFailed(f"caBundle can't be read: {err}") from None
    try:
        with (
            socket.create_connection(address, timeout=timeout) as raw,
            context.wrap_socket(raw, server_hostname=server_name) as sock,
        ):
            connection = http.client.HTTPConnection(server_name, timeout=timeout)
            connection.sock = sock
            headers = {"Content-Type": "application/json", "Accept": "application/json"}
            connection.request("POST", path, json.dumps(body).encode(), headers)
            reply = connection.getresponse()
            text = reply.read()
    except (OSError, http.client.HTTPException) as err:
        raise CallFailed(f"failed to call https://{server_name}{path}: {err}") from None
    if reply.status != 200:
        raise CallFailed(f"the webhook answered {reply.status}: {text[:200]!r}")
    try:
        return json.loads(text)
    except ValueError as err:
        raise CallFailed(f"the answer is not JSON: {err}") from None
