"""`python -m sunk.runtime.keygen`: create every wanted Secret that does not exist yet, then exit
(0: each Secret exists; 1: the API refused one, so the Job retries; 2: bad settings)."""

from __future__ import annotations

import base64
import json
import logging
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Protocol

from pydantic import field_validator

from ..common.settings import EnvSettings, SettingsError
from .plan import PlanError, Wanted, parse, renewal_due, renewed_body, secret_body
from .values import make, tls, validity

log = logging.getLogger("sunk.keygen")


class Settings(EnvSettings):
    namespace: str
    """The tenant namespace the Secrets are made in (SUNK_NAMESPACE)."""
    keygen_secrets: str
    """The JSON list of Secrets to make: names, keys, kinds and labels, never a value
    (SUNK_KEYGEN_SECRETS; sunk.manifests.keygen.secrets_json)."""
    work_dir: Path = Path("/tmp")
    """A memory-backed folder ssh-keygen writes each host key to before it is read and removed
    (SUNK_WORK_DIR)."""

    @field_validator("keygen_secrets")
    @classmethod
    def _parses(cls, value: str) -> str:
        parse(value)
        return value


class SecretApi(Protocol):
    def create(self, namespace: str, body: dict[str, object]) -> bool:
        """Create the Secret; False when one of that name exists (409). Raises on anything else."""

    def read(self, namespace: str, name: str) -> Mapping[str, object]:
        """The Secret as JSON (only a certificate's, by name: the Role allows no other)."""

    def replace(self, namespace: str, body: dict[str, object]) -> None:
        """Replace the Secret (its resourceVersion: 409 if it changed meanwhile). Raises on failure."""


class Certificates(Protocol):
    def make(self, dns_names: list[str], ca: tuple[bytes, bytes] | None) -> dict[str, bytes]:
        """The TLS_KEYS: a serving certificate signed by `ca` (certificate, key), or by a new CA."""

    def validity(self, cert: bytes) -> tuple[float, float]:
        """(notBefore, notAfter) of a PEM certificate, in seconds since the epoch."""


class KubeSecrets:
    """The Kubernetes API through the official client (in-cluster, or the kubeconfig outside)."""

    def __init__(self) -> None:
        from kubernetes import client, config

        try:
            config.load_incluster_config()  # type: ignore[no-untyped-call]
        except config.ConfigException:
            config.load_kube_config()  # type: ignore[no-untyped-call]
        self._core = client.CoreV1Api()

    def create(self, namespace: str, body: dict[str, object]) -> bool:
        from kubernetes.client.exceptions import ApiException

        name = f"{namespace}/{body['metadata']['name']}"  # type: ignore[index]
        try:
            # _preload_content=False: the reply echoes the values; nothing here parses or keeps it.
            self._core.create_namespaced_secret(namespace, body, _preload_content=False)  # type: ignore[arg-type]
        except ApiException as err:
            if err.status == 409:
                return False
            raise RuntimeError(f"creating Secret {name}: {err.status} {err.reason}") from None
        return True

    def read(self, namespace: str, name: str) -> Mapping[str, object]:
        from kubernetes.client.exceptions import ApiException

        try:
            # _preload_content=False: the raw reply, parsed here, never kept by the client or logged.
            reply = self._core.read_namespaced_secret(name, namespace, _preload_content=False)
        except ApiException as err:
            raise RuntimeError(f"reading Secret {namespace}/{name}: {err.status} {err.reason}") from None
        out: Mapping[str, object] = json.loads(reply.data)  # type: ignore[arg-type]  # the raw urllib3 reply
        return out

    def replace(self, namespace: str, body: dict[str, object]) -> None:
        from kubernetes.client.exceptions import ApiException

        name = body["metadata"]["name"]  # type: ignore[index]
        try:
            self._core.replace_namespaced_secret(name, namespace, body, _preload_content=False)  # type: ignore[arg-type]
        except ApiException as err:
            raise RuntimeError(f"replacing Secret {namespace}/{name}: {err.status} {err.reason}") from None


class OpensslCertificates:
    def __init__(self, work_dir: Path) -> None:
        self._dir = work_dir

    def make(self, dns_names: list[str], ca: tuple[bytes, bytes] | None) -> dict[str, bytes]:
        return tls(dns_names, self._dir, ca)

    def validity(self, cert: bytes) -> tuple[float, float]:
        return validity(cert, self._dir)


def generate(
    api: SecretApi,
    namespace: str,
    wanted: list[Wanted],
    value: Callable[[Wanted, str], bytes],
    certificates: Certificates,
    now: float,
) -> list[str]:
    """Create each wanted Secret (values from `value(secret, key)`, a TLS Secret's from
    `certificates`), and renew the serving certificate of a TLS Secret that exists once it is
    due; returns one line per Secret, naming it and its keys, never a value."""
    lines = []
    for w in wanted:
        values = certificates.make(list(w.dns_names), None) if w.tls else {key: value(w, key) for key, _ in w.items}
        keys = ", ".join(k for k, _ in w.items)
        if api.create(namespace, secret_body(w, namespace, values)):
            lines.append(f"created Secret {namespace}/{w.name} ({keys})")
        elif w.tls:
            lines.append(renew(api, namespace, w, certificates, now))
        else:
            lines.append(f"kept Secret {namespace}/{w.name}: it exists, and the generator never changes one")
    return lines


def renew(api: SecretApi, namespace: str, wanted: Wanted, certificates: Certificates, now: float) -> str:
    """A TLS Secret that exists: its serving certificate renewed (same CA, new key) once due; a
    Secret without ca.key is someone else's (cert-manager's, an administrator's) and left alone."""
    where = f"Secret {namespace}/{wanted.name}"
    current = api.read(namespace, wanted.name)
    data = current.get("data") or {}
    assert isinstance(data, Mapping)
    if not all(isinstance(data.get(k), str) for k in ("ca.crt", "ca.key", "tls.crt")):
        return f"kept {where}: it has no ca.key (not made by the generator), so its maker renews it"
    pem = {k: base64.b64decode(data[k]) for k in ("ca.crt", "ca.key", "tls.crt")}
    not_before, not_after = certificates.validity(pem["tls.crt"])
    until = time.strftime("%Y-%m-%d", time.gmtime(not_after))
    if not renewal_due(not_before, not_after, now):
        return f"kept {where}: its certificate is valid until {until}, not yet due for renewal"
    made = certificates.make(list(wanted.dns_names), (pem["ca.crt"], pem["ca.key"]))
    api.replace(namespace, renewed_body(current, {k: made[k] for k in ("tls.crt", "tls.key")}))
    return f"renewed the serving certificate of {where} (tls.crt, tls.key; the old one ended {until})"


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for noisy in ("urllib3", "kubernetes"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    try:
        settings = Settings.from_env()
    except (SettingsError, PlanError) as err:
        print(f"sunk-keygen: {err}", file=sys.stderr)
        return 2
    wanted = parse(settings.keygen_secrets)
    kinds = {(w.name, k): kind for w in wanted for k, kind in w.items}
    try:
        for line in generate(
            KubeSecrets(),
            settings.namespace,
            wanted,
            lambda w, k: make(kinds[(w.name, k)], settings.work_dir),
            OpensslCertificates(settings.work_dir),
            time.time(),
        ):
            log.info(line)
    except (RuntimeError, OSError) as err:
        log.error("%s", err)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
