"""`python -m sunk.runtime.webhook`: the admission webhook process (runtime/common/process.py)."""

from __future__ import annotations

import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import Field, field_validator

from ..common.process import Process, run
from ..common.settings import EnvSettings
from .admission import owner_wanted, parse_namespaces, review
from .cabundle import CaBundle, KubeConfigurations
from .metrics import Metrics
from .owners import KubeOwners, Owners, read_owner
from .server import Certificate, WebhookServer


class Settings(EnvSettings):
    webhook_namespaces: str
    """The opted-in namespaces and their Slurm account, partition and QOS, as JSON
    (SUNK_WEBHOOK_NAMESPACES; rendered from the stack's inference.namespaces)."""
    scheduler_name: str = "sunk-scheduler"
    """The schedulerName it sets (SUNK_SCHEDULER_NAME)."""
    webhook_port: int = Field(default=8443, ge=1, le=65535)
    """HTTPS port of POST /mutate (SUNK_WEBHOOK_PORT)."""
    tls_cert_file: Path = Path("/etc/sunk-webhook/tls.crt")
    """The serving certificate, re-read when it changes (SUNK_TLS_CERT_FILE)."""
    tls_key_file: Path = Path("/etc/sunk-webhook/tls.key")
    """Its private key (SUNK_TLS_KEY_FILE)."""
    tls_ca_file: Path = Path("/etc/sunk-webhook/ca.crt")
    """The CA that signed it, written into the configuration's caBundle (SUNK_TLS_CA_FILE)."""
    webhook_configuration: str = ""
    """The MutatingWebhookConfiguration whose caBundle it keeps equal to the CA; empty: none
    (the caller provides the caBundle) (SUNK_WEBHOOK_CONFIGURATION)."""
    metrics_port: int = Field(default=8080, ge=1, le=65535)
    """/metrics, /healthz and /readyz (SUNK_METRICS_PORT)."""

    @field_validator("webhook_namespaces")
    @classmethod
    def _parses(cls, value: str) -> str:
        parse_namespaces(value)
        return value


CA_INTERVAL = 10.0


def build(settings: Settings, owners: Owners | None = None) -> Process:
    namespaces = parse_namespaces(settings.webhook_namespaces)
    metrics = Metrics()
    readers: list[Owners] = [owners] if owners is not None else []

    def answer(body: Mapping[str, Any]) -> dict[str, Any]:
        # The Job or JobSet that sizes the pod's gang, read first (the review itself is pure).
        wanted = owner_wanted(body, namespaces)
        owner = None
        if wanted is not None:
            if not readers:
                readers.append(KubeOwners())  # on the first gang pod: no API access needed before
            owner = read_owner(readers[0], *wanted)
        out = review(body, namespaces, settings.scheduler_name, owner)
        response = out["response"]
        metrics.reviews.labels(
            "refused" if not response["allowed"] else "patched" if "patch" in response else "unchanged"
        ).inc()
        return out

    certificate = Certificate(settings.tls_cert_file, settings.tls_key_file)
    server = WebhookServer(("0.0.0.0", settings.webhook_port), certificate, answer)  # the API server calls the pod IP

    bundle = (
        CaBundle(KubeConfigurations(), settings.webhook_configuration, settings.tls_ca_file)
        if settings.webhook_configuration
        else None
    )

    def loop(stop: threading.Event) -> None:
        thread = threading.Thread(target=server.serve_forever, name="webhook", daemon=True)
        thread.start()
        # The CA is checked every CA_INTERVAL seconds: a renewed certificate reaches the mount
        # within the kubelet's sync period (about a minute) anyway.
        while not stop.is_set():
            if bundle is not None:
                bundle.sync()
            stop.wait(CA_INTERVAL)
        server.shutdown()
        server.server_close()

    def ready() -> tuple[bool, str]:
        # Not ready (not in the Service) until the certificate is there: the API server would
        # get a TLS failure from it, which failurePolicy Fail turns into refused pods.
        return (True, "serving") if certificate.context() is not None else (False, "no serving certificate yet")

    return Process(registry=metrics.registry, alive=lambda: (True, "alive"), ready=ready, loop=loop)


if __name__ == "__main__":
    sys.exit(run("webhook", Settings, build))
