"""ServiceAccount JWTs read and checked as a relying party would: the claims, and the ES256
signature verified with openssl against the cluster's public key."""

from __future__ import annotations

import base64
import json
import subprocess
import tempfile
from pathlib import Path
from typing import Any


def b64(segment: str) -> bytes:
    return base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4))


def claims(token: str) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(b64(token.split(".")[1]))
    return found


def der_signature(raw: bytes) -> bytes:
    """An ES256 JWT signature (r || s, 32 bytes each) as the DER sequence openssl verifies."""

    def integer(half: bytes) -> bytes:
        half = half.lstrip(b"\0") or b"\0"
        if half[0] & 0x80:
            half = b"\0" + half
        return b"\x02" + bytes([len(half)]) + half

    body = integer(raw[:32]) + integer(raw[32:])
    return b"\x30" + bytes([len(body)]) + body


def verifies(token: str, public_key: Path) -> bool:
    """Whether `token`'s signature is the private half of `public_key`'s over its header and payload."""
    header, payload, signature = token.split(".")
    with tempfile.TemporaryDirectory() as folder:
        signed, sig = Path(folder) / "signed", Path(folder) / "sig"
        signed.write_bytes(f"{header}.{payload}".encode())
        sig.write_bytes(der_signature(b64(signature)))
        verify = ["openssl", "dgst", "-sha256", "-verify", str(public_key), "-signature", str(sig), str(signed)]
        return subprocess.run(verify, capture_output=True, check=False).returncode == 0
