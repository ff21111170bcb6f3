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

from sunk.manifests.keygen import TLS_KEYS

from ..common.settings import EnvSettings, SettingsError
from .plan import PlanError, Wanted, parse, renewed_body, secret_body
from .rollover import Observed, Validity, new_keys, plan, split_pem
from .values import make, new_ca, serving, signed_by, validity

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
    def new_ca(self, subject: str) -> tuple[bytes, bytes]:
        """A new self-signed CA (certificate, key PEM)."""

    def serving(self, dns_names: list[str], ca: tuple[bytes, bytes]) -> tuple[bytes, bytes]:
        """A serving certificate for `dns_names` signed by `ca` (certificate, key), and its key."""

    def validity(self, cert: bytes) -> tuple[float, float]:
        """(notBefore, notAfter) of a PEM certificate, in seconds since the epoch."""

    def signed_by(self, cert: bytes, ca: bytes) -> bool:
        """Whether the CA certificate `ca` signed `cert`."""


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

    def new_ca(self, subject: str) -> tuple[bytes, bytes]:
        return new_ca(subject, self._dir)

    def serving(self, dns_names: list[str], ca: tuple[bytes, bytes]) -> tuple[bytes, bytes]:
        return serving(dns_names, ca, self._dir)

    def validity(self, cert: bytes) -> tuple[float, float]:
        return validity(cert, self._dir)

    def signed_by(self, cert: bytes, ca: bytes) -> bool:
        return signed_by(cert, ca, self._dir)


def ca_subject(wanted: Wanted) -> str:
    return f"{wanted.dns_names[0]} CA"


def make_tls(wanted: Wanted, certificates: Certificates) -> dict[str, bytes]:
    """The TLS_KEYS of a new TLS Secret: a new CA and the serving certificate it signs."""
    ca = certificates.new_ca(ca_subject(wanted))
    crt, key = certificates.serving(list(wanted.dns_names), ca)
    return dict(zip(TLS_KEYS, (*ca, crt, key), strict=True))


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
        values = make_tls(w, certificates) if w.tls else {key: value(w, key) for key, _ in w.items}
        keys = ", ".join(k for k, _ in w.items)
        if api.create(namespace, secret_body(w, namespace, values)):
            lines.append(f"created Secret {namespace}/{w.name} ({keys})")
        elif w.tls:
            lines.append(renew(api, namespace, w, certificates, now))
        else:
            lines.append(f"kept Secret {namespace}/{w.name}: it exists, and the generator never changes one")
    return lines


def renew(api: SecretApi, namespace: str, wanted: Wanted, certificates: Certificates, now: float) -> str:
    """A TLS Secret that exists: its serving certificate and CA renewed as rollover.plan says, one
    step per run; a Secret without ca.key is someone else's (cert-manager's, an administrator's)
    and left alone."""
    where = f"Secret {namespace}/{wanted.name}"
    current = api.read(namespace, wanted.name)
    data = current.get("data") or {}
    assert isinstance(data, Mapping)
    if not all(isinstance(data.get(k), str) for k in ("ca.crt", "ca.key", "tls.crt")):
        return f"kept {where}: it has no ca.key (not made by the generator), so its maker renews it"
    pem = {k: base64.b64decode(data[k]) for k in ("ca.crt", "ca.key", "tls.crt")}
    cas = split_pem(pem["ca.crt"])
    dates = [Validity(*certificates.validity(ca)) for ca in cas]
    served = Validity(*certificates.validity(pem["tls.crt"]))
    # The newest CA first: in a rollover the serving certificate moves to the last one.
    signer = next((i for i in reversed(range(len(cas))) if certificates.signed_by(pem["tls.crt"], cas[i])), None)
    decision = plan(Observed(tuple(dates), served, signer), now)
    state = (f"its serving certificate ends {_day(served.not_after)}, its CA"
             f"{'s end ' if len(cas) > 1 else ' ends '}{', '.join(_day(d.not_after) for d in dates)}")  # fmt: skip
    if decision.step == "keep":
        return f"kept {where}: {decision.reason} ({state})"
    ca = certificates.new_ca(ca_subject(wanted)) if decision.step in ("add-ca", "reissue") else None
    made = None
    if decision.step in ("renew-serving", "sign-with-new-ca", "reissue"):
        # ca.key belongs to the last CA of ca.crt; a reissue signs with the CA it just made.
        made = certificates.serving(list(wanted.dns_names), ca or (cas[-1], pem["ca.key"]))
    keys = new_keys(decision.step, cas, ca, made)
    api.replace(namespace, renewed_body(current, keys))
    return f"{decision.step} in {where} ({', '.join(sorted(keys))}): {decision.reason} ({state})"


def _day(seconds: float) -> str:
    return time.strftime("%Y-%m-%d", time.gmtime(seconds))


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
