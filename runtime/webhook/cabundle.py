"""The webhook writes its CA into its own MutatingWebhookConfiguration, so the render never holds
it: the configuration's caBundle follows the `ca.crt` of the mounted serving-certificate Secret
(read at start and again whenever the file changes). Its ServiceAccount may get and patch that one
configuration by name (sunk.manifests.webhook)."""

from __future__ import annotations

import base64
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

log = logging.getLogger("sunk.webhook")


def ca_bundle_patch(configuration: Mapping[str, Any], ca_pem: bytes) -> list[dict[str, Any]]:
    """The JSONPatch that sets every webhook's caBundle of `configuration` to `ca_pem`; empty when
    each already holds it. Pure."""
    want = base64.b64encode(ca_pem).decode()
    ops = []
    for i, hook in enumerate(configuration.get("webhooks") or []):
        client = hook.get("clientConfig") or {}
        if client.get("caBundle") != want:
            op = "replace" if "caBundle" in client else "add"
            ops.append({"op": op, "path": f"/webhooks/{i}/clientConfig/caBundle", "value": want})
    return ops


class Configurations(Protocol):
    def get(self, name: str) -> Mapping[str, Any]:
        """The MutatingWebhookConfiguration as JSON."""

    def patch(self, name: str, ops: list[dict[str, Any]]) -> None:
        """Apply a JSONPatch to it."""


class KubeConfigurations:
    """Through the official client (in-cluster, or the kubeconfig outside)."""

    def __init__(self) -> None:
        from kubernetes import client, config

        try:
            config.load_incluster_config()  # type: ignore[no-untyped-call]
        except config.ConfigException:
            config.load_kube_config()  # type: ignore[no-untyped-call]
        self._api = client.AdmissionregistrationV1Api()
        self._client = client.ApiClient()

    def get(self, name: str) -> Mapping[str, Any]:
        obj = self._api.read_mutating_webhook_configuration(name)
        out: Mapping[str, Any] = self._client.sanitize_for_serialization(obj)  # type: ignore[no-untyped-call]
        return out

    def patch(self, name: str, ops: list[dict[str, Any]]) -> None:
        # A list body goes out as application/json-patch+json.
        self._api.patch_mutating_webhook_configuration(name, ops)


class CaBundle:
    """Keeps one configuration's caBundle equal to the CA file, whenever `sync` is called."""

    def __init__(self, api: Configurations, name: str, ca_file: Path) -> None:
        self._api, self._name, self._file = api, name, ca_file
        self._written: bytes | None = None

    def sync(self) -> bool:
        """True once the configuration holds the file's CA; False while the file is missing or
        the API refused (retried on the next call)."""
        try:
            ca = self._file.read_bytes()
        except OSError:
            return False
        if ca == self._written:
            return True
        try:
            ops = ca_bundle_patch(self._api.get(self._name), ca)
            if ops:
                self._api.patch(self._name, ops)
                log.info("wrote the CA of %s into MutatingWebhookConfiguration %s", self._file, self._name)
        except Exception as err:
            log.warning("MutatingWebhookConfiguration %s: caBundle not written: %s", self._name, err)
            return False
        self._written = ca
        return True
