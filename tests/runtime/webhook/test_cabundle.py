"""The caBundle follows the mounted CA: written once, again when the file changes, retried when
the API refuses, nothing before the file exists."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jsonpatch
from sunk.runtime.webhook.cabundle import CaBundle, ca_bundle_patch

NAME = "sunk-acme-research-research-webhook"


class FakeConfigurations:
    def __init__(self) -> None:
        self.obj: dict[str, Any] = {
            "metadata": {"name": NAME},
            "webhooks": [{"name": "pods.research.acme-research.slurm.sunk.dev", "clientConfig": {"service": {}}}],
        }
        self.patches = 0
        self.fail = False

    def get(self, name: str) -> Mapping[str, Any]:
        assert name == NAME
        if self.fail:
            raise RuntimeError("503 Service Unavailable")
        return self.obj

    def patch(self, name: str, ops: list[dict[str, Any]]) -> None:
        assert name == NAME
        self.patches += 1
        self.obj = jsonpatch.apply_patch(self.obj, ops)


def _bundle(api: FakeConfigurations) -> str:
    value: str = api.obj["webhooks"][0]["clientConfig"]["caBundle"]
    return value


def test_patch_is_empty_once_written() -> None:
    obj = {"webhooks": [{"clientConfig": {"caBundle": base64.b64encode(b"CA").decode()}}]}
    assert ca_bundle_patch(obj, b"CA") == []
    assert ca_bundle_patch(obj, b"NEW") == [
        {"op": "replace", "path": "/webhooks/0/clientConfig/caBundle", "value": base64.b64encode(b"NEW").decode()}
    ]


def test_follows_the_file(tmp_path: Path) -> None:
    api, ca = FakeConfigurations(), tmp_path / "ca.crt"
    bundle = CaBundle(api, NAME, ca)
    assert bundle.sync() is False and api.patches == 0  # no certificate yet
    ca.write_bytes(b"-----BEGIN CERTIFICATE-----\nfirst\n")
    assert bundle.sync() is True and base64.b64decode(_bundle(api)) == ca.read_bytes()
    assert bundle.sync() is True and api.patches == 1  # unchanged: not read again, not patched
    ca.write_bytes(b"-----BEGIN CERTIFICATE-----\nrenewed\n")
    api.fail = True
    assert bundle.sync() is False  # refused: retried next time
    api.fail = False
    assert bundle.sync() is True and base64.b64decode(_bundle(api)).endswith(b"renewed\n")
    assert api.patches == 2
