"""Key material, made where it is used: random bytes and passwords from the kernel's CSPRNG
(`secrets`), OpenSSH host keys from ssh-keygen, written into a memory-backed folder, read and
removed at once."""

from __future__ import annotations

import secrets
import string
import subprocess
import tempfile
from pathlib import Path

from sunk.manifests.keygen import Kind

PASSWORD_ALPHABET = string.ascii_letters + string.digits
"""Letters and digits only: a database password ends up in a `Key=Value` line of slurmdbd.conf."""


def make(kind: Kind, work_dir: Path) -> bytes:
    if kind == "random-1024":
        return secrets.token_bytes(1024)
    if kind == "random-32":
        return secrets.token_bytes(32)
    if kind == "password-32":
        return "".join(secrets.choice(PASSWORD_ALPHABET) for _ in range(32)).encode()
    if kind == "ssh-ed25519":
        return _ssh_key(["-t", "ed25519"], work_dir)
    if kind == "ssh-rsa-3072":
        return _ssh_key(["-t", "rsa", "-b", "3072"], work_dir)
    raise ValueError(f"unknown kind {kind!r}")


def _ssh_key(args: list[str], work_dir: Path) -> bytes:
    with tempfile.TemporaryDirectory(dir=work_dir) as tmp:
        path = Path(tmp) / "key"
        # -q: ssh-keygen prints the fingerprint and randomart otherwise (not secret, but noise).
        result = subprocess.run(
            ["ssh-keygen", "-q", *args, "-N", "", "-C", "", "-f", str(path)],
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode != 0:
            raise RuntimeError(f"ssh-keygen {' '.join(args)} failed: {result.stderr.strip()}")
        return path.read_bytes()
