"""SSSD's TLS to a real slapd (TLS only, test CA), run by the sidecar's own script from the login
image: StartTLS and LDAPS verify the server against the CA from the Secret (demand by default);
a CA that did not sign the server's certificate, or the system CAs, get nothing, and no spec may
send the bind password to an unverified server (a weak tlsReqcert with a bind password is refused); Google Secure LDAP's client certificate is
presented (slapd demands one) and no bind password is needed; a bind password that would add a
line to sssd.conf stops the sidecar."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError
from sunk.runtime.harness.directory import DirectoryGroup, DirectoryUser, LocalLdap, make_test_ca
from sunk.runtime.harness.identity import DirectorySecrets, start_sssd, stop_sssd
from sunk.runtime.harness.jail import Jail
from sunk.runtime.harness.layout import short_hostname, write_file
from sunk.runtime.images.build import Builder

from sunk.manifests.sssd import SSSD_DIR, sssd_refs, sssd_sidecar
from sunk.spec.cluster import ClusterSpec

pytestmark = pytest.mark.slurm

USERS = [DirectoryUser("alice", 20001, 20000)]
GROUPS = [DirectoryGroup("research", 20000, ("alice",))]
ALICE = "alice:*:20001:20000:alice:/home/alice:/bin/sh\n"


@pytest.fixture(scope="module")
def login_root(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Jail]:
    """The login image's root alone, as the login pod's sssd sidecar sees it."""
    jail = Jail(tmp_path_factory.mktemp("tls-jail"), {"login": Builder().rootfs("login")})
    try:
        jail.open()
        write_file(jail.root("login") / "etc/hosts", f"127.0.0.1 localhost {short_hostname()}\n", 0o644)
        yield jail
    finally:
        jail.close()
        jail.remove()


@pytest.fixture(scope="module")
def slapd() -> Iterator[LocalLdap]:
    with LocalLdap.start(USERS, GROUPS) as ldap:
        yield ldap


@pytest.fixture(scope="module")
def google_like() -> Iterator[LocalLdap]:
    """slapd demanding a client certificate from the test CA, which is then the credential."""
    with LocalLdap.start(USERS, GROUPS, require_client_cert=True) as ldap:
        yield ldap


def spec_with(ldap: dict[str, Any]) -> ClusterSpec:
    return ClusterSpec.model_validate(
        {
            "name": "tls",
            "tenant": "acme",
            "auth": {"ldap": ldap},
            "nodesets": [{"name": "cpu", "replicas": 1, "cpus": 2, "memoryMib": 1000}],
            "partitions": [{"name": "batch", "nodesets": ["cpu"], "default": True}],
        }
    )


def bound(server: LocalLdap, uri: str, **extra: Any) -> dict[str, Any]:
    return {
        "uris": [uri],
        "baseDn": server.base_dn,
        "bindDn": server.service_dn,
        "bindPasswordSecret": {"name": "ldap", "key": "password"},
        **extra,
    }


CA = {"caSecret": {"name": "ldap", "key": "ca.crt"}}


WINDOW = 5.0
"""Seconds a refused connection is given to turn into an answer. sssd's NSS socket exists a moment
before its LDAP back end is connected, so the first lookups may come back empty either way."""

ANSWER_WINDOW = 120.0
"""Seconds a lookup that should resolve is given: it returns as soon as it does, and sssd's TLS
connection may take far longer than WINDOW on a loaded machine."""


def lookup(jail: Jail, spec: ClusterSpec, secrets: DirectorySecrets, window: float = WINDOW) -> str:
    """alice's passwd line as the login root resolves her through a fresh sssd, asked until she
    resolves or `window` seconds have passed ('' then)."""
    stop_sssd(jail, "login")
    start_sssd(jail, "login", spec, secrets)
    try:
        deadline = time.monotonic() + window
        while True:
            answer = jail.run(["getent", "passwd", "alice"], role="login", timeout=60).stdout
            if answer or time.monotonic() > deadline:
                return answer
            time.sleep(0.25)
    finally:
        stop_sssd(jail, "login")


def test_starttls_and_ldaps_verify_the_server_against_the_ca(login_root: Jail, slapd: LocalLdap) -> None:
    secrets = DirectorySecrets(bind_password=slapd.bind_password, ca=slapd.tls.ca)
    for uri in (slapd.uri, slapd.ldaps_uri):
        spec = spec_with(bound(slapd, uri, **CA))
        assert spec.auth.ldap is not None and spec.auth.ldap.tls_reqcert == "demand"
        assert lookup(login_root, spec, secrets, ANSWER_WINDOW) == ALICE, uri


def test_a_server_the_ca_did_not_sign_is_refused(login_root: Jail, slapd: LocalLdap, tmp_path: Path) -> None:
    other = make_test_ca(tmp_path / "other-ca")
    wrong = DirectorySecrets(bind_password=slapd.bind_password, ca=other.ca)
    for uri in (slapd.uri, slapd.ldaps_uri):
        assert lookup(login_root, spec_with(bound(slapd, uri, **CA)), wrong) == "", uri
    # Without a CA the image's system CAs are used, and they do not know the test CA either.
    system = DirectorySecrets(bind_password=slapd.bind_password)
    assert lookup(login_root, spec_with(bound(slapd, slapd.ldaps_uri)), system) == ""
    # And no spec may send the bind password to an unverified server: a weak tlsReqcert with a
    # bind password is refused before anything is rendered.
    with pytest.raises(ValidationError, match="tlsReqcert: never would send the bind password"):
        spec_with(bound(slapd, slapd.ldaps_uri, tlsReqcert="never"))


def test_the_bind_password_comes_from_the_secret(login_root: Jail, slapd: LocalLdap) -> None:
    spec = spec_with(bound(slapd, slapd.ldaps_uri, **CA))
    assert lookup(login_root, spec, DirectorySecrets(bind_password="not-it", ca=slapd.tls.ca)) == ""
    # The Secret's usual trailing newline (kubectl create secret --from-file) is not part of it.
    right = DirectorySecrets(bind_password=slapd.bind_password + "\n", ca=slapd.tls.ca)
    assert lookup(login_root, spec, right, ANSWER_WINDOW) == ALICE


def test_a_bind_password_that_would_add_a_line_stops_the_sidecar(login_root: Jail, slapd: LocalLdap) -> None:
    spec = spec_with(bound(slapd, slapd.ldaps_uri, **CA))
    refs = sssd_refs(spec)
    assert refs is not None
    root = login_root.root("login")
    for evil in (f"{slapd.bind_password}\nldap_tls_reqcert = never", "x\r[domain/evil]", "x\x1b"):
        with pytest.raises(RuntimeError, match="sssd-login"):
            start_sssd(login_root, "login", spec, DirectorySecrets(bind_password=evil, ca=slapd.tls.ca))
        log = login_root.log_tail("sssd-login")
        stop_sssd(login_root, "login")
        assert "bind password:" in log
        conf = (root / SSSD_DIR.lstrip("/") / "sssd.conf").read_text()
        assert "ldap_default_authtok =" not in conf and "never" not in conf and "evil" not in conf
    assert sssd_sidecar("", refs)["command"][2].count("exit 1") == 2


def test_google_secure_ldap_presents_the_client_certificate(login_root: Jail, google_like: LocalLdap) -> None:
    ldap = {
        "provider": "google",
        "uris": [google_like.ldaps_uri],
        "baseDn": google_like.base_dn,
        "clientCertSecret": {"name": "google-ldap"},
        **CA,
    }
    tls = google_like.tls
    secrets = DirectorySecrets(ca=tls.ca, client_cert=tls.client_cert, client_key=tls.client_key)
    google = spec_with(ldap)
    assert google.auth.ldap is not None and google.auth.ldap.bind_dn is None
    # rfc2307bis is Google's schema; the test directory is rfc2307, so say so (memberUid groups).
    assert lookup(login_root, spec_with({**ldap, "schema": "rfc2307"}), secrets, ANSWER_WINDOW) == ALICE
    # The same without the certificate: slapd ends the handshake, nothing resolves.
    plain = {k: v for k, v in ldap.items() if k not in ("provider", "clientCertSecret")}
    assert lookup(login_root, spec_with(plain), DirectorySecrets(ca=tls.ca)) == ""
