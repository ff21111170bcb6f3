"""One table of every Secret key a stack names, with the purpose it serves: the check that a key
serves one purpose only.

A key used for two purposes is a hole whichever two they are: the munge key as the JWT signing
key lets whoever holds one forge the other; a public CA certificate (readable by design) as the
JWT key lets anyone sign tokens for any user; a client certificate's private key as the JWT key
hands LDAP's identity to slurmrestd's users. And a Secret sunk makes itself (the cluster's keys,
the database passwords, SSSD's configuration, login's host keys) named as another purpose's secret
would feed one purpose's bytes to another.

So the rule is by class, not by case: every field typed SecretRef or ClientCertRef is a row of
USES (tests/spec/test_key_use.py walks the spec's models and fails on a field missing here), and
`key_use_problems` refuses any (Secret, key) pair that two rows name, and any row naming a Secret
sunk makes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sunk.problem import Problem

ClusterSpec = Any
"""sunk.spec.cluster.ClusterSpec, which calls this module: named here without importing it (the
package's modules form no import circle, not even one for types)."""


@dataclass(frozen=True)
class KeyUse:
    """One Secret key the stack names, and what it is used for."""

    path: str
    """The field the user wrote, as validate names it: `auth.jwt.existingSecret`."""
    secret: str
    key: str
    purpose: str
    """What the bytes are, in words an error can use: `the JWT signing key`."""


Ref = tuple[str, str] | None
"""A Secret's name and key, or None when the stack leaves the field unset."""


def _ref(value: object | None) -> Ref:
    name, key = getattr(value, "name", None), getattr(value, "key", None)
    return (name, key) if isinstance(name, str) and isinstance(key, str) else None


def _client_cert(spec: ClusterSpec, part: str) -> Ref:
    cert = spec.auth.ldap.client_cert_secret if spec.auth.ldap is not None else None
    if cert is None:
        return None
    return (cert.name, cert.cert_key if part == "cert" else cert.key_key)


USES: tuple[tuple[str, str, Callable[[ClusterSpec], Ref]], ...] = (
    ("auth.key.existingSecret", "the cluster's auth key (munge key or slurm.key)", lambda s: _ref(s.auth.key.existing_secret)),
    ("auth.jwt.existingSecret", "the JWT signing key", lambda s: _ref(s.auth.jwt.existing_secret)),
    (
        "accounting.external.passwordSecret",
        "the accounting database password",
        lambda s: _ref(s.accounting.external.password_secret) if s.accounting.external is not None else None,
    ),
    (
        "auth.ldap.bindPasswordSecret",
        "the LDAP bind password",
        lambda s: _ref(s.auth.ldap.bind_password_secret) if s.auth.ldap is not None else None,
    ),
    (
        "auth.ldap.caSecret",
        "the LDAP CA certificate (public)",
        lambda s: _ref(s.auth.ldap.ca_secret) if s.auth.ldap is not None else None,
    ),
    ("auth.ldap.clientCertSecret.certKey", "the LDAP client certificate (public)", lambda s: _client_cert(s, "cert")),
    ("auth.ldap.clientCertSecret.keyKey", "the LDAP client certificate's private key", lambda s: _client_cert(s, "key")),
)  # fmt: skip
"""Every field of a stack that names a Secret key: (path, purpose, its value in a spec)."""

FIELDS: frozenset[str] = frozenset(path.removesuffix(".certKey").removesuffix(".keyKey") for path, _, _ in USES)
"""The SecretRef and ClientCertRef fields USES covers, as paths of the spec's models; the test that
walks the models compares its findings with this set."""


_CLIENT_CERT = "auth.ldap.clientCertSecret."


def key_uses(spec: ClusterSpec) -> list[KeyUse]:
    """Every Secret key the stack names, in USES order."""
    out = []
    for path, purpose, get in USES:
        ref = get(spec)
        if ref is not None:
            out.append(KeyUse(path, ref[0], ref[1], purpose))
    return out


def key_use_problems(spec: ClusterSpec, made_by_sunk: dict[str, str]) -> list[Problem]:
    """A (Secret, key) pair named by two fields, and a field naming a Secret sunk makes
    (`made_by_sunk`: its name -> what it holds), each refused at the field that named it."""
    problems = []
    first: dict[tuple[str, str], KeyUse] = {}
    for use in key_uses(spec):
        if use.secret in made_by_sunk:
            problems.append(
                Problem(
                    use.path,
                    f"Secret {use.secret} is one sunk makes, holding {made_by_sunk[use.secret]}; "
                    f"{use.purpose} needs a Secret of its own (another name)",
                )
            )
            continue
        earlier = first.setdefault((use.secret, use.key), use)
        # One certificate Secret's two keys being equal is its own field's refusal (ClientCertRef).
        if earlier is not use and not (earlier.path.startswith(_CLIENT_CERT) and use.path.startswith(_CLIENT_CERT)):
            problems.append(
                Problem(
                    use.path,
                    f"Secret {use.secret} key {use.key} is also {earlier.path} ({earlier.purpose}); one key serves "
                    f"one purpose: {use.purpose} must be other bytes, under a key of its own",
                )
            )
    return problems
