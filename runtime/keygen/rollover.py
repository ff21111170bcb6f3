"""When the webhook's certificate and CA are renewed: a pure plan from the certificates' dates and
now (no I/O, no clock), and the Secret's new keys from the step it chose.

The API server trusts the webhook's serving certificate through the configuration's caBundle, which
the webhook writes from the Secret's `ca.crt` (runtime/webhook/cabundle.py), and the webhook serves
`tls.crt` as the kubelet updates the mount (runtime/webhook/server.py). Both follow the Secret with
a lag. A new CA therefore goes in three steps, one per run, each at least PROPAGATION after the last:

1. `add-ca`: a new CA is added to `ca.crt` beside the old one (its key becomes `ca.key`); the
   serving certificate is still the old CA's, so the API server trusts it throughout.
2. `sign-with-new-ca`: once the caBundle holds both CAs, a serving certificate from the new CA.
3. `drop-old-ca`: once the webhook serves it, `ca.crt` holds the new CA alone.

At no moment does the webhook serve a certificate whose CA the caBundle lacks, so no admission call
fails during the switch. `ca.key` always belongs to the last certificate of `ca.crt`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .plan import renewal_due

PROPAGATION = 3600.0
"""Seconds between two steps of a rollover: longer than a change of the Secret takes to reach the
caBundle and the served certificate. The kubelet refreshes a Secret volume within its sync period
plus its cache's TTL (a minute each by default), and the webhook checks `ca.crt` every 10 s
(runtime/webhook/__main__.py CA_INTERVAL); an hour leaves a wide margin. The daily CronJob spaces its
runs a day apart anyway; this holds the margin for runs started by hand."""

Step = Literal["keep", "renew-serving", "add-ca", "sign-with-new-ca", "drop-old-ca", "reissue"]


@dataclass(frozen=True)
class Validity:
    not_before: float
    not_after: float
    """Seconds since the epoch."""


@dataclass(frozen=True)
class Observed:
    """What a TLS Secret made by the generator holds, as dates."""

    cas: tuple[Validity, ...]
    """The certificates of `ca.crt`, in their order: the last is the one `ca.key` signs with."""
    serving: Validity
    """`tls.crt`."""
    serving_ca: int | None
    """The index in `cas` of the CA that signed `tls.crt`; None: none of them did."""


@dataclass(frozen=True)
class Decision:
    step: Step
    reason: str
    """Why, in words for the log (dates, never a value)."""


def plan(observed: Observed, now: float) -> Decision:
    """The one step to take at `now` (at most one per run: each needs the last to have propagated)."""
    if not observed.cas:
        return Decision("reissue", "ca.crt holds no certificate")
    signer, serving = observed.cas[-1], observed.serving
    if now >= signer.not_after:
        return Decision("reissue", "its CA has expired")
    if observed.serving_ca is None:
        return Decision("reissue", "no CA of ca.crt signed its serving certificate")
    expired = now >= serving.not_after
    if len(observed.cas) > 1 and observed.serving_ca < len(observed.cas) - 1:
        # The new CA is in ca.crt; the serving certificate is still an old CA's.
        if now >= signer.not_before + PROPAGATION or expired:
            return Decision("sign-with-new-ca", "the caBundle has held the new CA for long enough")
        return Decision("keep", "waiting for the new CA to reach the caBundle")
    if len(observed.cas) > 1:
        # The serving certificate is the new CA's; the old CAs are still trusted beside it.
        if now >= serving.not_before + PROPAGATION:
            return Decision("drop-old-ca", "the webhook has served the new CA's certificate for long enough")
        return Decision("keep", "waiting for the webhook to serve the new CA's certificate")
    if expired:
        # Admission already fails; a new serving certificate now, before any CA rollover.
        return Decision("renew-serving", "its serving certificate has expired")
    if renewal_due(signer.not_before, signer.not_after, now):
        return Decision("add-ca", "less than a third of its CA's life is left")
    if renewal_due(serving.not_before, serving.not_after, now):
        return Decision("renew-serving", "less than a third of its serving certificate's life is left")
    return Decision("keep", "not yet due for renewal")


def split_pem(bundle: bytes) -> list[bytes]:
    """The PEM certificates of a bundle, each with its END line's newline, in order."""
    out, current = [], b""
    for line in bundle.splitlines(keepends=True):
        if line.startswith(b"-----BEGIN "):
            current = line
        elif current:
            current += line
            if line.startswith(b"-----END "):
                out.append(current if current.endswith(b"\n") else current + b"\n")
                current = b""
    return out


def new_keys(
    step: Step,
    cas: list[bytes],
    new_ca: tuple[bytes, bytes] | None,
    new_serving: tuple[bytes, bytes] | None,
) -> dict[str, bytes]:
    """The keys of the Secret that `step` replaces: `cas` are the PEMs of `ca.crt` as read,
    `new_ca` (certificate, key) the CA made for add-ca and reissue, `new_serving` (certificate, key)
    the serving certificate made for every step that signs one (by `new_ca` on reissue, else by the
    last of `cas`). Raises ValueError when the step needs one that is missing."""

    def need(pair: tuple[bytes, bytes] | None, what: str) -> tuple[bytes, bytes]:
        if pair is None:
            raise ValueError(f"{step} needs {what}")
        return pair

    if step == "keep":
        return {}
    if step in ("renew-serving", "sign-with-new-ca"):
        crt, key = need(new_serving, "a serving certificate")
        return {"tls.crt": crt, "tls.key": key}
    if step == "add-ca":
        ca_crt, ca_key = need(new_ca, "a new CA")
        return {"ca.crt": b"".join([*cas, ca_crt]), "ca.key": ca_key}
    if step == "drop-old-ca":
        return {"ca.crt": cas[-1]}
    ca_crt, ca_key = need(new_ca, "a new CA")
    crt, key = need(new_serving, "a serving certificate")
    return {"ca.crt": ca_crt, "ca.key": ca_key, "tls.crt": crt, "tls.key": key}
