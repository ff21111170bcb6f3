"""The controllers' one bootstrap to Slurm (runtime/slurmrest/connect.py): the token minted from
the JWT key, the client built with the caller's timeouts, and the Slurm command beside it."""

from __future__ import annotations

import base64
import json
import logging
from pathlib import Path

import pytest
from sunk.runtime.slurmrest.connect import (
    LONG_READ_RETRIES,
    LONG_READ_TIMEOUT,
    SlurmAccess,
    SlurmCommand,
    slurm_command,
)

KEY = b"k" * 32


def claims(token: str) -> dict[str, object]:
    payload = token.split(".")[1]
    return dict(json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))))


def test_the_token_is_minted_from_the_mounted_key_for_the_user(tmp_path: Path) -> None:
    key_file = tmp_path / "jwt_hs256.key"
    key_file.write_bytes(KEY)
    access = SlurmAccess.from_key_file("http://c-restapi:6820", "slurm", key_file)
    assert claims(access.token.token())["sun"] == "slurm"
    assert access.token.token() == SlurmAccess.from_key("http://c-restapi:6820", "slurm", KEY).token.token()


def test_a_short_key_is_refused_before_any_request() -> None:
    with pytest.raises(ValueError, match="shorter than 16 bytes"):
        SlurmAccess.from_key("http://c-restapi:6820", "slurm", b"short")


def test_the_client_gets_the_url_user_timeout_and_retries() -> None:
    access = SlurmAccess.from_key(
        "http://c-restapi:6820/", "slurm", KEY, timeout=LONG_READ_TIMEOUT, retries=LONG_READ_RETRIES
    )
    with access.client() as client:
        assert client.user == "slurm" and client.retries == LONG_READ_RETRIES
        assert client._http.timeout == LONG_READ_TIMEOUT
        assert str(client._http.base_url) == "http://c-restapi:6820"
    default = SlurmAccess.from_key("http://c-restapi:6820", "slurm", KEY)
    with default.client() as client:
        assert client.retries == 3 and client._http.timeout == 10.0
        # Each call is a new client (the scheduler reconnects through it); the token is shared.
        with default.client() as other:
            assert other is not client and other._token is client._token


def test_the_slurm_command_is_used_only_with_a_slurm_conf_and_the_command(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    conf = tmp_path / "slurm.conf"
    found = {"scontrol": "/usr/bin/scontrol"}
    assert slurm_command("scontrol", None, which=found.get) is None
    assert slurm_command("scontrol", conf, which=found.get) == SlurmCommand(("/usr/bin/scontrol",), conf)
    with caplog.at_level(logging.WARNING):
        assert slurm_command("squeue", conf, which=found.get) is None
    assert "no squeue in this image" in caplog.text
