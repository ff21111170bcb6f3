"""The local cluster's certificates and tokens: a CA of its own, the API server's certificate
signed by it (valid for loopback, the bridge address and the in-cluster Service names) and random
bearer tokens. Made with the openssl command (every Debian has it); kept in the cluster's folder,
readable by root only, and gone with `sunk local down`."""

from __future__ import annotations

import base64
import secrets
import subprocess
from collections.abc import Sequence
from pathlib import Path

DAYS = "825"
"""Validity of the CA and server certificates: a local cluster lives for hours, but clients
refuse certificates longer than 825 days."""


def _openssl(*args: str) -> None:
    done = subprocess.run(["openssl", *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"openssl {args[0]} failed: {done.stderr.strip().splitlines()[-1:]}")


def make_certificates(folder: Path, addresses: Sequence[str], names: Sequence[str]) -> tuple[Path, Path, Path]:
    """(ca.crt, server.crt, server.key) in `folder`: made once, reused after."""
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    ca_key, ca, key, cert = folder / "ca.key", folder / "ca.crt", folder / "server.key", folder / "server.crt"
    if ca.is_file() and cert.is_file() and key.is_file():
        return ca, cert, key
    ec = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
    _openssl(
        "req",
        "-x509",
        *ec,
        "-keyout",
        str(ca_key),
        "-out",
        str(ca),
        "-days",
        DAYS,
        "-subj",
        "/CN=sunk-local-ca",
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign,cRLSign",
    )
    csr = folder / "server.csr"
    _openssl("req", "-new", *ec, "-keyout", str(key), "-out", str(csr), "-subj", "/CN=kube-apiserver")
    alt = ",".join([*(f"IP:{a}" for a in addresses), *(f"DNS:{n}" for n in names)])
    ext = folder / "server.ext"
    ext.write_text(
        f"subjectAltName={alt}\nextendedKeyUsage=serverAuth\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
    )
    _openssl(
        "x509",
        "-req",
        "-in",
        str(csr),
        "-CA",
        str(ca),
        "-CAkey",
        str(ca_key),
        "-CAcreateserial",
        "-out",
        str(cert),
        "-days",
        DAYS,
        "-extfile",
        str(ext),
    )
    csr.unlink()
    ext.unlink()
    for path in folder.iterdir():
        path.chmod(0o600)
    return ca, cert, key


def token() -> str:
    return secrets.token_urlsafe(32)


def kubeconfig(server: str, ca: Path, bearer: str, name: str = "sunk-local") -> str:
    """A kubeconfig for `server` trusting the cluster's CA and sending `bearer`."""
    ca_data = base64.b64encode(ca.read_bytes()).decode()
    return (
        "apiVersion: v1\nkind: Config\n"
        f"current-context: {name}\n"
        f"clusters:\n- name: {name}\n  cluster:\n    server: {server}\n    certificate-authority-data: {ca_data}\n"
        f"users:\n- name: {name}-admin\n  user:\n    token: {bearer}\n"
        f"contexts:\n- name: {name}\n  context:\n    cluster: {name}\n    user: {name}-admin\n"
    )


def client_certificate(folder: Path, name: str, user: str, groups: Sequence[str] = ()) -> tuple[Path, Path]:
    """(NAME.crt, NAME.key) in `folder`, signed by its CA (make_certificates first): a client
    certificate the API server reads as user `user` (CN) in `groups` (O). Made once, reused after."""
    ca_key, ca = folder / "ca.key", folder / "ca.crt"
    key, cert = folder / f"{name}.key", folder / f"{name}.crt"
    if cert.is_file() and key.is_file():
        return cert, key
    csr, ext = folder / f"{name}.csr", folder / f"{name}.ext"
    subject = "".join(f"/O={g}" for g in groups) + f"/CN={user}"
    ec = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
    _openssl("req", "-new", *ec, "-keyout", str(key), "-out", str(csr), "-subj", subject)
    ext.write_text("extendedKeyUsage=clientAuth\nkeyUsage=critical,digitalSignature,keyEncipherment\n")
    _openssl(
        "x509", "-req", "-in", str(csr), "-CA", str(ca), "-CAkey", str(ca_key), "-CAcreateserial",
        "-out", str(cert), "-days", DAYS, "-extfile", str(ext),
    )  # fmt: skip
    csr.unlink()
    ext.unlink()
    key.chmod(0o600)
    cert.chmod(0o600)
    return cert, key


def signing_key_pair(folder: Path, name: str = "sa") -> tuple[Path, Path]:
    """(NAME.key, NAME.pub): an ECDSA P-256 key pair the API server signs ServiceAccount tokens
    with (ES256) and checks them by. Made once, reused after."""
    key, pub = folder / f"{name}.key", folder / f"{name}.pub"
    if not (key.is_file() and pub.is_file()):
        _openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-out", str(key))
        _openssl("pkey", "-in", str(key), "-pubout", "-out", str(pub))
        key.chmod(0o600)
    return key, pub


def client_kubeconfig(server: str, ca: Path, cert: Path, key: Path, name: str = "sunk-local") -> str:
    """A kubeconfig for `server` trusting the cluster's CA and presenting a client certificate."""

    def data(path: Path) -> str:
        return base64.b64encode(path.read_bytes()).decode()

    return (
        "apiVersion: v1\nkind: Config\n"
        f"current-context: {name}\n"
        f"clusters:\n- name: {name}\n  cluster:\n    server: {server}\n    certificate-authority-data: {data(ca)}\n"
        f"users:\n- name: {name}-user\n  user:\n    client-certificate-data: {data(cert)}\n"
        f"    client-key-data: {data(key)}\n"
        f"contexts:\n- name: {name}\n  context:\n    cluster: {name}\n    user: {name}-user\n"
    )
