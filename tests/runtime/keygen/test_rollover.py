"""The webhook certificate's renewal plan, with a moved clock: each step at its boundary, then years
of runs (daily, by hand, missed) against a model of the lags between the Secret, the caBundle and
the served certificate, checking at every minute around each change that the API server would
accept the certificate the webhook serves; last, the edge with real certificates, the webhook's
caBundle writer and its HTTPS server."""

from __future__ import annotations

import base64
import os
import random
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from sunk.runtime.keygen import values
from sunk.runtime.keygen.__main__ import OpensslCertificates, generate, renew
from sunk.runtime.keygen.plan import RENEW_FRACTION, Wanted
from sunk.runtime.keygen.rollover import PROPAGATION, Observed, Validity, new_keys, plan, split_pem
from sunk.runtime.keygen.values import CA_DAYS, SERVING_DAYS
from sunk.runtime.webhook.cabundle import CaBundle
from sunk.runtime.webhook.server import Certificate, WebhookServer

from tests.runtime.keygen.test_keygen import _Secrets
from tests.runtime.webhook.test_cabundle import NAME, FakeConfigurations
from tests.support.webhookcall import CallFailed, post

DAY = 86400.0
CA = Validity(0.0, CA_DAYS * DAY)
CA_DUE = CA.not_after - CA_DAYS * DAY * RENEW_FRACTION


def _serving(start: float) -> Validity:
    return Validity(start, start + SERVING_DAYS * DAY)


def test_a_serving_certificate_never_outlives_the_ca_that_signs_it() -> None:
    """A serving certificate is signed only while the CA is not due (more than a third of its life
    left) or by a new CA: that third must exceed a serving certificate's life."""
    assert CA_DAYS * RENEW_FRACTION > SERVING_DAYS


@pytest.mark.parametrize(
    ("observed", "now", "step"),
    [
        # One CA: the serving certificate is renewed in its last third, the CA in its own.
        (Observed((CA,), _serving(0), 0), 60 * DAY - 1, "keep"),
        (Observed((CA,), _serving(0), 0), 60 * DAY, "renew-serving"),
        (Observed((CA,), _serving(CA_DUE - DAY), 0), CA_DUE - 1, "keep"),
        (Observed((CA,), _serving(CA_DUE - DAY), 0), CA_DUE, "add-ca"),
        # Both due: the CA first (its new serving certificate follows in the rollover).
        (Observed((CA,), _serving(CA_DUE - 80 * DAY), 0), CA_DUE, "add-ca"),
        # An expired serving certificate is replaced at once, even when the CA is due.
        (Observed((CA,), _serving(CA_DUE - 90 * DAY), 0), CA_DUE, "renew-serving"),
        # Rollover, step 2: the new CA must have reached the caBundle.
        (Observed((CA, Validity(CA_DUE, CA_DUE + 365 * DAY)), _serving(CA_DUE - DAY), 0),
         CA_DUE + PROPAGATION - 1, "keep"),
        (Observed((CA, Validity(CA_DUE, CA_DUE + 365 * DAY)), _serving(CA_DUE - DAY), 0),
         CA_DUE + PROPAGATION, "sign-with-new-ca"),
        # ...unless the old serving certificate has expired: nothing left to protect.
        (Observed((CA, Validity(CA_DUE, CA_DUE + 365 * DAY)), _serving(CA_DUE - 90 * DAY), 0),
         CA_DUE + 1, "sign-with-new-ca"),
        # Step 3: the new CA's certificate must be served before the old CA leaves the caBundle.
        (Observed((CA, Validity(CA_DUE, CA_DUE + 365 * DAY)), _serving(CA_DUE + DAY), 1),
         CA_DUE + DAY + PROPAGATION - 1, "keep"),
        (Observed((CA, Validity(CA_DUE, CA_DUE + 365 * DAY)), _serving(CA_DUE + DAY), 1),
         CA_DUE + DAY + PROPAGATION, "drop-old-ca"),
        # Broken or lapsed: start over.
        (Observed((CA,), _serving(0), 0), CA.not_after, "reissue"),
        (Observed((CA,), _serving(0), None), DAY, "reissue"),
        (Observed((), _serving(0), None), DAY, "reissue"),
    ],
)  # fmt: skip
def test_each_step_at_its_boundary(observed: Observed, now: float, step: str) -> None:
    decision = plan(observed, now)
    assert decision.step == step, decision.reason


def test_new_keys_of_each_step() -> None:
    old, new, crt = [b"-----BEGIN CERTIFICATE-----\nA\n-----END CERTIFICATE-----\n"], (b"B", b"Bkey"), (b"T", b"Tk")
    assert new_keys("keep", old, None, None) == {}
    assert new_keys("renew-serving", old, None, crt) == {"tls.crt": b"T", "tls.key": b"Tk"}
    assert new_keys("add-ca", old, new, None) == {"ca.crt": old[0] + b"B", "ca.key": b"Bkey"}
    assert new_keys("drop-old-ca", [*old, b"B"], None, None) == {"ca.crt": b"B"}
    assert new_keys("reissue", old, new, crt) == {"ca.crt": b"B", "ca.key": b"Bkey", "tls.crt": b"T", "tls.key": b"Tk"}
    with pytest.raises(ValueError, match="add-ca needs a new CA"):
        new_keys("add-ca", old, None, None)


def test_split_pem_keeps_each_certificate_and_its_order() -> None:
    a = b"-----BEGIN CERTIFICATE-----\nAAA\n-----END CERTIFICATE-----\n"
    b = b"-----BEGIN CERTIFICATE-----\nBBB\n-----END CERTIFICATE-----"
    assert split_pem(a + b"\n" + b) == [a, b + b"\n"]
    assert split_pem(b"") == []


# The model: certificates are PEM-shaped records "id", their dates and signer kept by FakeCertificates;
# the clock is the simulation's.


@dataclass(frozen=True)
class _Cert:
    validity: Validity
    signer: str  # the id of the CA that signed it (itself for a CA)


class FakeCertificates:
    """Certificates (runtime/keygen/__main__.py) dated by a moved clock."""

    def __init__(self) -> None:
        self.now = 0.0
        self.certs: dict[bytes, _Cert] = {}

    def _new(self, days: int, signer: str | None) -> tuple[bytes, bytes]:
        ident = f"c{len(self.certs)}"
        pem = f"-----BEGIN CERTIFICATE-----\n{ident}\n-----END CERTIFICATE-----\n".encode()
        self.certs[pem] = _Cert(Validity(self.now, self.now + days * DAY), signer or ident)
        return pem, f"key-of-{ident}".encode()

    def new_ca(self, subject: str) -> tuple[bytes, bytes]:
        return self._new(CA_DAYS, None)

    def serving(self, dns_names: list[str], ca: tuple[bytes, bytes]) -> tuple[bytes, bytes]:
        ident = ca[0].split(b"\n")[1].decode()
        assert ca[1] == f"key-of-{ident}".encode(), "signed with a key that is not the CA's"
        return self._new(SERVING_DAYS, ident)

    def validity(self, cert: bytes) -> tuple[float, float]:
        v = self.certs[cert].validity
        return v.not_before, v.not_after

    def signed_by(self, cert: bytes, ca: bytes) -> bool:
        return self.certs[cert].signer == ca.split(b"\n")[1].decode()

    def ident(self, pem: bytes) -> str:
        return pem.split(b"\n")[1].decode()


WANTED = Wanted("w-tls", tuple((k, "tls") for k in ("ca.crt", "ca.key", "tls.crt", "tls.key")), {}, ("w.ns.svc",))


def _accepted(certs: FakeCertificates, bundle: bytes, served: bytes, at: float) -> str | None:
    """Why the API server would refuse the served certificate at `at`; None: it accepts it."""
    cert = certs.certs[served]
    trusted = {certs.ident(p): certs.certs[p] for p in split_pem(bundle)}
    if cert.signer not in trusted:
        return "its CA is not in the caBundle"
    if not cert.validity.not_before <= at < cert.validity.not_after:
        return "it has expired"
    if not at < trusted[cert.signer].validity.not_after:
        return "its CA has expired"
    return None


def _daily(rng: random.Random, days: int) -> list[float]:
    """The CronJob's runs (03:17), some skipped (a failed Job), some followed by one by hand."""
    runs = []
    for day in range(days):
        if rng.random() < 0.05:
            continue
        runs.append(day * DAY + 3 * 3600 + 17 * 60)
        if rng.random() < 0.1:
            runs.append(runs[-1] + rng.uniform(60, 2 * PROPAGATION))
    return runs


def _simulate(seed: int, runs: list[float]) -> list[str]:
    """Each change of the Secret reaches the caBundle and the served certificate each after its
    own lag below PROPAGATION. Asserts the API server accepts the webhook at every run and at every
    minute of the hour after each change."""
    rng = random.Random(seed)
    certs, api = FakeCertificates(), _Secrets()
    ca, key = certs.new_ca("w CA")
    crt, tls_key = certs.serving(["w.ns.svc"], (ca, key))
    made = {"ca.crt": ca, "ca.key": key, "tls.crt": crt, "tls.key": tls_key}
    api.create(
        "ns", {"metadata": {"name": WANTED.name}, "data": {k: base64.b64encode(v).decode() for k, v in made.items()}}
    )
    # (time the change is seen, what is seen): the caBundle's and the served certificate's histories.
    bundle: list[tuple[float, bytes]] = [(0.0, ca)]
    served: list[tuple[float, bytes]] = [(0.0, crt)]

    def at(history: list[tuple[float, bytes]], t: float) -> bytes:
        return [value for since, value in history if since <= t][-1]

    def check(t: float) -> None:
        why = _accepted(certs, at(bundle, t), at(served, t), t)
        assert why is None, f"seed {seed}, day {t / DAY:.3f}: the API server refuses the webhook: {why}"

    steps: list[str] = []
    for t in runs:
        certs.now = t
        check(t)
        before = api.read("ns", WANTED.name)["data"]
        steps.append(renew(api, "ns", WANTED, certs, t).split()[0])
        after = api.read("ns", WANTED.name)["data"]
        if after == before:
            continue
        pem = {k: base64.b64decode(v) for k, v in after.items()}
        bundle.append((t + rng.uniform(0, PROPAGATION * 0.99), pem["ca.crt"]))
        served.append((t + rng.uniform(0, PROPAGATION * 0.99), pem["tls.crt"]))
        bundle.sort(key=lambda entry: entry[0])
        served.sort(key=lambda entry: entry[0])
        for minute in range(int(PROPAGATION // 60) + 1):
            check(t + minute * 60)
    return steps


@pytest.mark.parametrize("seed", range(6))
def test_years_of_runs_never_serve_a_certificate_the_api_server_refuses(seed: int) -> None:
    """Three years: the CA rolls over four times (at 243 days of its 365), the serving certificate about every 60 days, and
    the webhook is accepted throughout; it never needs a reissue."""
    steps = _simulate(seed, _daily(random.Random(seed), 3 * 365))
    assert (
        steps.count("add-ca") == steps.count("sign-with-new-ca") == steps.count("drop-old-ca") == 4
        and "reissue" not in steps
    )
    assert steps.count("renew-serving") >= 15


@pytest.mark.parametrize("seed", range(4))
def test_runs_every_ten_minutes_through_a_rollover_wait_for_each_step_to_spread(seed: int) -> None:
    """Runs started far more often than the CronJob's (by hand, or a schedule changed): each
    rollover step still waits PROPAGATION for the last, so the webhook is accepted throughout."""
    start = CA_DUE - DAY
    runs = _daily(random.Random(seed), int(start // DAY)) + [start + i * 600 for i in range(2 * 144)]
    steps = _simulate(seed, runs)
    assert steps.count("add-ca") == 1 and steps.count("drop-old-ca") == 1


def test_the_rollover_walks_its_three_steps_in_order() -> None:
    """From one CA due to the new CA alone, one step per run, each waiting for the last to spread."""
    certs, api = FakeCertificates(), _Secrets()
    ca, key = certs.new_ca("w CA")
    due = CA_DAYS * DAY * (1 - RENEW_FRACTION)
    certs.now = due - DAY  # a serving certificate renewed the day before the CA is due
    crt, tls_key = certs.serving(["w.ns.svc"], (ca, key))
    data = {"ca.crt": ca, "ca.key": key, "tls.crt": crt, "tls.key": tls_key}
    api.create(
        "ns", {"metadata": {"name": WANTED.name}, "data": {k: base64.b64encode(v).decode() for k, v in data.items()}}
    )
    lines = []
    for t in (due, due + 60, due + PROPAGATION, due + PROPAGATION + 60, due + 2 * PROPAGATION):
        certs.now = t
        lines.append(renew(api, "ns", WANTED, certs, t).split(" in Secret")[0].split(":")[0])
    assert lines == ["add-ca", "kept Secret ns/w-tls", "sign-with-new-ca", "kept Secret ns/w-tls", "drop-old-ca"]
    final = {k: base64.b64decode(v) for k, v in api.read("ns", WANTED.name)["data"].items()}
    (only,) = split_pem(final["ca.crt"])
    assert only != ca and certs.signed_by(final["tls.crt"], only)
    assert final["ca.key"] == f"key-of-{certs.ident(only)}".encode()


def test_the_generator_rolls_the_ca_over_while_the_webhook_keeps_answering(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The edge with real certificates (openssl), the webhook's own caBundle writer against the fake
    configuration API (test_cabundle.py), and its HTTPS server: after each step of a rollover, an
    AdmissionReview posted as the API server posts it (verified against the configuration's
    caBundle, for the Service's name) is answered, whether the caBundle was written before or after
    the webhook took the new files; and the order matters: the new serving certificate against the
    old caBundle would be refused. The CA lives 3 days here, so it is due on a clock moved 2 days on
    while its 90-day serving certificate is not (openssl dates certificates by the real clock)."""
    monkeypatch.setattr(values, "CA_DAYS", 3)
    host = "w-webhook.ns.svc"
    wanted = Wanted("w-tls", WANTED.items, {}, (host,))
    api, certs = _Secrets(), OpensslCertificates(tmp_path)
    assert generate(api, "ns", [wanted], lambda w, k: b"", certs, time.time()) == [
        "created Secret ns/w-tls (ca.crt, ca.key, tls.crt, tls.key)"
    ]
    mount = tmp_path / "mount"
    mount.mkdir()

    def kubelet() -> dict[str, bytes]:
        """The Secret's keys written into the webhook's volume (all but ca.key), as the kubelet does."""
        data = {k: base64.b64decode(v) for k, v in api.read("ns", "w-tls")["data"].items()}
        for key in ("ca.crt", "tls.crt", "tls.key"):
            (mount / key).write_bytes(data[key])
        stamp = time.time() + len(kubelet_runs)  # a new mtime each time: the server reloads on it
        kubelet_runs.append(stamp)
        for key in ("tls.crt", "tls.key"):
            os.utime(mount / key, (stamp, stamp))
        return data

    kubelet_runs: list[float] = []
    configurations = FakeConfigurations()
    bundle = CaBundle(configurations, NAME, mount / "ca.crt")
    server = WebhookServer(("127.0.0.1", 0), Certificate(mount / "tls.crt", mount / "tls.key"),
                           lambda review: {"kind": "AdmissionReview", "response": {"allowed": True}})  # fmt: skip
    threading.Thread(target=server.serve_forever, daemon=True).start()

    def answered() -> bool:
        ca = configurations.obj["webhooks"][0]["clientConfig"]["caBundle"]
        try:
            reply = post(("127.0.0.1", server.server_address[1]), host, "/mutate", ca, {"kind": "AdmissionReview"}, 5)
        except CallFailed:
            return False
        return bool(reply["response"]["allowed"])

    try:
        kubelet()
        assert bundle.sync() and answered()
        assert renew(api, "ns", wanted, certs, time.time()).startswith("kept Secret ns/w-tls: not yet due")
        moved = time.time() + 2 * DAY + 60
        seen = []
        for step in ("add-ca", "sign-with-new-ca", "drop-old-ca"):
            line = renew(api, "ns", wanted, certs, moved)
            assert line.startswith(f"{step} in Secret ns/w-tls"), line
            seen.append(kubelet())
            assert answered(), f"after {step}, the webhook serving the new files, the caBundle not yet written"
            assert bundle.sync() and answered(), f"after {step}, the caBundle written"
        assert len(split_pem(seen[0]["ca.crt"])) == 2 and seen[1]["ca.crt"] == seen[0]["ca.crt"]
        (new,) = split_pem(seen[2]["ca.crt"])
        assert new == split_pem(seen[0]["ca.crt"])[1] and certs.signed_by(seen[2]["tls.crt"], new)
        # The order matters: the new CA's certificate against the old CA alone is refused.
        old = split_pem(seen[0]["ca.crt"])[0]
        configurations.obj["webhooks"][0]["clientConfig"]["caBundle"] = base64.b64encode(old).decode()
        assert not answered()
        assert renew(api, "ns", wanted, certs, time.time()).startswith("kept Secret ns/w-tls: not yet due")
    finally:
        server.shutdown()
        server.server_close()
