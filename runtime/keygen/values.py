"""Key material, made where it is used: random bytes and passwords from the kernel's CSPRNG
(`secrets`), OpenSSH host keys from ssh-keygen, written into a memory-backed folder, read and
removed at once."""

from __future__ import annotations

import secrets
import ssl
import string
import subprocess
import tempfile
from pathlib import Path

from sunk.manifests.keygen import TLS_KEYS, Kind

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


CA_DAYS = 365
"""The webhook's CA lives a year and is renewed by a rollover (rollover.py) once a third of its life
is left: a yearly rollover is exercised while someone remembers it, and the 121 days left when it
starts exceed a serving certificate's life, so none outlives the CA that signed it."""
SERVING_DAYS = 90
"""The serving certificate's life (cert-manager's default); renewed a third before its end."""
_EC = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")


def _openssl(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"openssl {args[0]} failed: {done.stderr.strip()[-300:]}")
    return done


def _serial() -> str:
    return str(int.from_bytes(secrets.token_bytes(15), "big"))


def new_ca(subject: str, work_dir: Path) -> tuple[bytes, bytes]:
    """A self-signed CA for CN `subject` (certificate, key PEM), valid CA_DAYS from now. ECDSA P-256."""
    with tempfile.TemporaryDirectory(dir=work_dir) as tmp:
        folder = Path(tmp)
        # A random serial: two CAs of one subject (old and new, side by side in a rollover) differ.
        _openssl(["req", "-x509", "-new", *_EC, "-keyout", "ca.key", "-out", "ca.crt", "-days", str(CA_DAYS),
                  "-set_serial", _serial(), "-subj", f"/CN={subject}"], folder)  # fmt: skip
        return (folder / "ca.crt").read_bytes(), (folder / "ca.key").read_bytes()


def serving(dns_names: list[str], ca: tuple[bytes, bytes], work_dir: Path) -> tuple[bytes, bytes]:
    """A serving certificate for `dns_names` (the first is its subject) signed by `ca` (certificate,
    key PEM), valid SERVING_DAYS from now, and its key (certificate, key PEM). ECDSA P-256."""
    with tempfile.TemporaryDirectory(dir=work_dir) as tmp:
        folder = Path(tmp)
        (folder / "ca.crt").write_bytes(ca[0])
        (folder / "ca.key").write_bytes(ca[1])
        (folder / "ext.cnf").write_text(
            "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\n"
            "extendedKeyUsage=serverAuth\nsubjectAltName=" + ",".join(f"DNS:{n}" for n in dns_names) + "\n"
        )
        _openssl(["req", "-new", *_EC, "-keyout", "tls.key", "-out", "tls.csr", "-subj", f"/CN={dns_names[0]}"], folder)
        _openssl(["x509", "-req", "-in", "tls.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-set_serial", _serial(),
                  "-days", str(SERVING_DAYS), "-extfile", "ext.cnf", "-out", "tls.crt"], folder)  # fmt: skip
        return (folder / "tls.crt").read_bytes(), (folder / "tls.key").read_bytes()


def tls(dns_names: list[str], work_dir: Path, ca: tuple[bytes, bytes] | None = None) -> dict[str, bytes]:
    """The four TLS_KEYS: a serving certificate for `dns_names` and its key, signed by `ca`
    (ca.crt, ca.key PEM), or by a new CA made here."""
    ca = ca or new_ca(f"{dns_names[0]} CA", work_dir)
    crt, key = serving(dns_names, ca, work_dir)
    return dict(zip(TLS_KEYS, (ca[0], ca[1], crt, key), strict=True))


def signed_by(cert_pem: bytes, ca_pem: bytes, work_dir: Path) -> bool:
    """Whether the CA certificate `ca_pem` signed `cert_pem` (its signature, whatever the dates)."""
    with tempfile.TemporaryDirectory(dir=work_dir) as tmp:
        folder = Path(tmp)
        (folder / "ca.crt").write_bytes(ca_pem)
        (folder / "cert.crt").write_bytes(cert_pem)
        # -no_check_time: an expired pair is still a pair; the plan reads the dates itself.
        done = subprocess.run(["openssl", "verify", "-no_check_time", "-CAfile", "ca.crt", "cert.crt"],
                              cwd=folder, capture_output=True, text=True, check=False)  # fmt: skip
    return done.returncode == 0


def validity(cert_pem: bytes, work_dir: Path) -> tuple[float, float]:
    """(notBefore, notAfter) of a PEM certificate, as seconds since the epoch."""
    with tempfile.TemporaryDirectory(dir=work_dir) as tmp:
        path = Path(tmp) / "cert.pem"
        path.write_bytes(cert_pem)
        done = subprocess.run(["openssl", "x509", "-noout", "-startdate", "-enddate", "-in", str(path)],
                              capture_output=True, text=True, check=False)  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"the certificate can't be read: {done.stderr.strip()[-300:]}")
    dates = dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)
    return ssl.cert_time_to_seconds(dates["notBefore"]), ssl.cert_time_to_seconds(dates["notAfter"])
