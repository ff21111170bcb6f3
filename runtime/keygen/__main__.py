"""`python -m sunk.runtime.keygen`: create every wanted Secret that does not exist yet, then exit
(0: each Secret exists; 1: the API refused one, so the Job retries; 2: bad settings)."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from pydantic import field_validator

from ..common.settings import EnvSettings, SettingsError
from .plan import PlanError, Wanted, parse, secret_body
from .values import make

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


def generate(api: SecretApi, namespace: str, wanted: list[Wanted], value: Callable[[Wanted, str], bytes]) -> list[str]:
    """Create each wanted Secret (values from `value(secret, key)`); returns one line per Secret,
    naming it and its keys, never a value."""
    lines = []
    for w in wanted:
        body = secret_body(w, namespace, {key: value(w, key) for key, _ in w.items})
        keys = ", ".join(k for k, _ in w.items)
        if api.create(namespace, body):
            lines.append(f"created Secret {namespace}/{w.name} ({keys})")
        else:
            lines.append(f"kept Secret {namespace}/{w.name}: it exists, and the generator never changes one")
    return lines


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
            KubeSecrets(), settings.namespace, wanted, lambda w, k: make(kinds[(w.name, k)], settings.work_dir)
        ):
            log.info(line)
    except (RuntimeError, OSError) as err:
        log.error("%s", err)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
