"""The webhook as it runs: `python -m sunk.runtime.webhook` serving AdmissionReview over HTTPS with
a certificate its client verifies against a CA (as the API server does with the caBundle), not
ready until the certificate exists, and serving a renewed certificate without a restart."""

from __future__ import annotations

import json
import os
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sunk.runtime.webhook.server import Certificate, WebhookServer

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "admission" / "vllm-pod-create.json"
HOST = "webhook.sunk-test.svc"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _issue(folder: Path, name: str) -> tuple[Path, Path, Path]:
    """A CA and a serving certificate for HOST it signed (openssl), as (ca, cert, key)."""
    ca_key, ca = folder / f"{name}-ca.key", folder / f"{name}-ca.crt"
    key, csr, cert = folder / f"{name}.key", folder / f"{name}.csr", folder / f"{name}.crt"

    def run(*args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True)

    run("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", str(ca_key),
        "-out", str(ca), "-days", "1", "-subj", f"/CN={name}-ca")  # fmt: skip
    run("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", str(key), "-out",
        str(csr), "-subj", f"/CN={HOST}")  # fmt: skip
    ext = folder / f"{name}.ext"
    ext.write_text(f"subjectAltName=DNS:{HOST}\n")
    run("x509", "-req", "-in", str(csr), "-CA", str(ca), "-CAkey", str(ca_key), "-CAcreateserial", "-out",
        str(cert), "-days", "1", "-extfile", str(ext))  # fmt: skip
    return ca, cert, key


def _wait(url: str, ready: bool = True, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if (httpx.get(url, timeout=1).status_code == 200) == ready:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"{url} not {'ready' if ready else 'unready'} within {timeout} s")


@pytest.fixture
def webhook(tmp_path: Path) -> Iterator[dict[str, Any]]:
    port, metrics = _free_port(), _free_port()
    tls = tmp_path / "tls"
    tls.mkdir()
    env = {
        **os.environ,
        "SUNK_WEBHOOK_NAMESPACES": json.dumps({"team-vision": {"account": "vision", "qos": "inference"}}),
        "SUNK_WEBHOOK_PORT": str(port),
        "SUNK_METRICS_PORT": str(metrics),
        "SUNK_TLS_CERT_FILE": str(tls / "tls.crt"),
        "SUNK_TLS_KEY_FILE": str(tls / "tls.key"),
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "sunk.runtime.webhook"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    try:
        yield {"port": port, "metrics": metrics, "tls": tls, "folder": tmp_path}
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=10)
        assert proc.returncode == 0, out.decode()


def _install(tls: Path, cert: Path, key: Path) -> None:
    """As the kubelet updates a Secret volume: both files replaced, each by a rename."""
    for src, dst in ((key, tls / "tls.key"), (cert, tls / "tls.crt")):
        tmp = dst.with_suffix(".new")
        tmp.write_bytes(src.read_bytes())
        tmp.replace(dst)


def _post(port: int, ca: Path) -> httpx.Response:
    # Connect to 127.0.0.1 but verify the certificate for the Service's DNS name, as the API server does.
    transport = httpx.HTTPTransport(verify=ssl.create_default_context(cafile=ca))
    with httpx.Client(transport=transport, timeout=5) as client:
        return client.post(
            f"https://127.0.0.1:{port}/mutate",
            content=FIXTURE.read_bytes(),
            headers={"Content-Type": "application/json", "Host": HOST},
            extensions={"sni_hostname": HOST},
        )


def test_serves_admission_over_https_and_follows_renewal(webhook: dict[str, Any]) -> None:
    ready_url = f"http://127.0.0.1:{webhook['metrics']}/readyz"
    _wait(f"http://127.0.0.1:{webhook['metrics']}/healthz")
    assert httpx.get(ready_url).status_code == 503  # no certificate yet: not in the Service

    ca1, cert1, key1 = _issue(webhook["folder"], "first")
    _install(webhook["tls"], cert1, key1)
    _wait(ready_url)
    reply = _post(webhook["port"], ca1)
    assert reply.status_code == 200
    response = reply.json()["response"]
    assert response["allowed"] is True and response["patchType"] == "JSONPatch"
    assert response["uid"] == json.loads(FIXTURE.read_text())["request"]["uid"]

    # Renewed (here by a new CA too, so the old one no longer verifies): served with no restart.
    time.sleep(0.01)  # a distinct modification time on filesystems with coarse stamps
    ca2, cert2, key2 = _issue(webhook["folder"], "second")
    _install(webhook["tls"], cert2, key2)
    assert _post(webhook["port"], ca2).json()["response"]["allowed"] is True
    with pytest.raises(httpx.ConnectError):
        _post(webhook["port"], ca1)

    metrics = httpx.get(f"http://127.0.0.1:{webhook['metrics']}/metrics").text
    assert 'sunk_webhook_reviews_total{outcome="patched"} 2.0' in metrics


def test_refuses_what_is_no_admission_review(webhook: dict[str, Any]) -> None:
    ca, cert, key = _issue(webhook["folder"], "only")
    _install(webhook["tls"], cert, key)
    _wait(f"http://127.0.0.1:{webhook['metrics']}/readyz")
    with httpx.Client(transport=httpx.HTTPTransport(verify=ssl.create_default_context(cafile=ca)), timeout=5) as client:
        url = f"https://127.0.0.1:{webhook['port']}/mutate"
        ext = {"sni_hostname": HOST}
        assert client.post(url, content=b'{"kind": "Pod"}', extensions=ext).status_code == 400
        assert client.post(url, content=b"not json", extensions=ext).status_code == 400
        assert client.post(url.replace("/mutate", "/other"), content=b"{}", extensions=ext).status_code == 404


def test_a_client_that_connects_and_says_nothing_holds_back_no_admission(tmp_path: Path) -> None:
    """The TLS handshake runs in the connection's thread, not the accept loop: with an idle TCP
    connection open (no ClientHello, as a stalled client or a port scan leaves), a review is still
    answered. The server's timeout is set far above the client's so that a handshake done in the
    accept loop would make this request time out."""
    ca, cert, key = _issue(tmp_path, "idle")
    server = WebhookServer(
        ("127.0.0.1", 0), Certificate(cert, key), lambda review: {"kind": "AdmissionReview", "seen": True}, timeout=300
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    port = server.server_address[1]
    try:
        with socket.create_connection(("127.0.0.1", port)) as idle:
            reply = _post(port, ca)
            assert reply.status_code == 200 and reply.json() == {"kind": "AdmissionReview", "seen": True}
            idle.sendall(b"")  # still open: the review above was answered beside it
    finally:
        server.shutdown()
        server.server_close()
