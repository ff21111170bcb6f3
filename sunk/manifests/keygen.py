"""The key generator: a one-shot Job in the tenant namespace that creates every key and password
the cluster needs in the cluster itself, so no key passes through a render, a Pulumi state or a
Git repository (sunk.runtime.keygen runs it).

It creates each Secret of `wanted_secrets(spec)` that does not exist yet: the Slurm auth key
(munge.key or slurm.key, 1024 random bytes), the JWT key (32 bytes), the in-cluster MariaDB's two
passwords and the login host keys (ed25519 and RSA). A Secret that exists is never read or
changed, whoever made it (an earlier run, ExternalSecrets, SealedSecrets, an administrator), and
no value is ever logged. Secrets the spec names instead (`existingSecret`, an external database's
`passwordSecret`) are not the generator's.

With inference namespaces listed it also makes the webhook's `<cluster>-webhook-tls`: a CA
(a year) and a serving certificate for the webhook Service's names (90 days) that it signs, and
a CronJob runs the same pod daily, renewing each once less than a third of its life is left: the
serving certificate with the same CA and a new key, the CA by a rollover that keeps the old and
the new CA side by side in `ca.crt` (so in the webhook's caBundle) until the new CA's serving
certificate is served (sunk.runtime.keygen.rollover).

Its ServiceAccount may `create` Secrets in the namespace and nothing else, but for the Secrets
holding a certificate it made: `get` and `update` those, by name (resourceNames), to renew them.
It never reads another, so it learns nothing of a Secret that exists (its create answers 409
AlreadyExists and it moves on). The Job's name carries a hash of its pod, what it makes included,
so a change runs a new Job (Jobs are immutable) and an unchanged one is left alone."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal

from sunk import keys, naming, roles
from sunk.manifests.auth import AuthRefs, auth_refs, db_secret_name, host_keys_secret_name
from sunk.manifests.meta import (
    RUNTIME_UID,
    Manifest,
    bound_role,
    content_hash,
    fixed_resources,
    labels,
    metadata,
    obj,
    restricted,
)
from sunk.manifests.podsettings import apply_pod
from sunk.spec.cluster import ClusterSpec

COMPONENT = "keygen"
MODULE = "sunk.runtime.keygen"
SECRETS_ENV = "SUNK_KEYGEN_SECRETS"
"""The JSON list of Secrets to make (names, keys, kinds and labels; never a value)."""
WORK_DIR = "/tmp"
"""A memory-backed folder (the root filesystem is read-only): ssh-keygen writes each host key there
before it is read and removed."""

Kind = Literal["random-1024", "random-32", "password-32", "ssh-ed25519", "ssh-rsa-3072", "tls"]
KINDS: tuple[Kind, ...] = ("random-1024", "random-32", "password-32", "ssh-ed25519", "ssh-rsa-3072", "tls")
"""random-N: N bytes from the kernel's CSPRNG (munge's `mungekey` default and Slurm's slurm.key
size are 1024; Slurm's JWT guide asks 32 for HS256); password-32: 32 letters and digits (the
password ends up in a `Key=Value` line of slurmdbd.conf); ssh-*: an OpenSSH private key from
ssh-keygen; tls: one of TLS_KEYS, made together (a CA, and a serving certificate for the Secret's
DNS names that it signs), both renewed before they end by the renewal CronJob."""
TLS_KEYS = ("ca.crt", "ca.key", "tls.crt", "tls.key")
"""The keys of a TLS Secret the generator makes: the CA's certificate and key (kept to sign the
renewals; the webhook mounts every key but ca.key; during a CA rollover ca.crt holds the old and
the new CA, and ca.key is the new one's) and the serving certificate and its key."""
RENEW_SCHEDULE = "17 3 * * *"
"""Daily (at an odd minute, away from the hour's crowd): a 90-day serving certificate is renewed
in its last 30 days, so a month of runs may fail before it lapses."""


@dataclass(frozen=True)
class WantedSecret:
    """One Secret the generator makes: its name, purpose (sunk.roles), keys and their kinds."""

    name: str
    purpose: roles.SecretPurpose
    items: tuple[tuple[str, Kind], ...]
    labels: tuple[tuple[str, str], ...]
    dns_names: tuple[str, ...] = ()
    """A TLS Secret's: the names its serving certificate holds (the first is its subject)."""

    def as_json(self) -> dict[str, object]:
        out: dict[str, object] = {
            "name": self.name,
            "purpose": self.purpose,
            "items": [{"key": k, "kind": kind} for k, kind in self.items],
            "labels": dict(self.labels),
        }
        if self.dns_names:
            out["dnsNames"] = list(self.dns_names)
        return out


def _labels(spec: ClusterSpec, component: str) -> tuple[tuple[str, str], ...]:
    return tuple(sorted({**labels(spec, component), keys.GENERATED_BY: COMPONENT}.items()))


def wanted_secrets(spec: ClusterSpec, refs: AuthRefs | None = None) -> list[WantedSecret]:
    """The Secrets this cluster's generator makes (none the spec names instead)."""
    refs = refs if refs is not None else auth_refs(spec)
    out: list[WantedSecret] = []
    if refs.generate_auth:
        out.append(WantedSecret(refs.auth.secret, "auth", ((refs.auth.key, "random-1024"),), _labels(spec, "auth")))
    if refs.generate_jwt:
        out.append(WantedSecret(refs.jwt.secret, "jwt", ((keys.JWT_KEY, "random-32"),), _labels(spec, "auth")))
    if refs.generate_db:
        out.append(
            WantedSecret(
                db_secret_name(spec),
                "database",
                ((keys.DB_PASSWORD, "password-32"), (keys.DB_ROOT_PASSWORD, "password-32")),
                _labels(spec, "mariadb"),
            )
        )
    if spec.login.enabled and spec.login.persist_host_keys:
        out.append(
            WantedSecret(
                host_keys_secret_name(spec),
                "ssh-host-keys",
                (("ssh_host_ed25519_key", "ssh-ed25519"), ("ssh_host_rsa_key", "ssh-rsa-3072")),
                _labels(spec, "login"),
            )
        )
    if spec.inference.namespaces:
        out.append(
            WantedSecret(
                naming.webhook_tls_secret(spec),
                "webhook-tls",
                tuple((key, "tls") for key in TLS_KEYS),
                _labels(spec, "webhook"),
                webhook_dns_names(spec),
            )
        )
    return out


def webhook_dns_names(spec: ClusterSpec) -> tuple[str, ...]:
    """The names the API server reaches the webhook's Service by: `<service>.<namespace>.svc`
    (what it verifies), then the shorter forms."""
    svc = naming.webhook(spec)
    return (f"{svc}.{spec.ns}.svc", f"{svc}.{spec.ns}", svc)


def renewed(wanted: list[WantedSecret]) -> list[WantedSecret]:
    """Those with a certificate to renew (the renewal CronJob runs while there is one)."""
    return [w for w in wanted if w.dns_names]


def secrets_json(wanted: list[WantedSecret]) -> str:
    return json.dumps([w.as_json() for w in wanted], sort_keys=True, separators=(",", ":"))


def keygen_name(spec: ClusterSpec) -> str:
    return naming.keygen(spec)


def job_name(spec: ClusterSpec, pod: Manifest) -> str:
    """Named by a hash of its pod (what it makes included): a Job's template is immutable, so a
    change is a new Job, and an unchanged one is left alone."""
    return naming.keygen_job(spec, content_hash(pod)[:8])


def made_here(spec: ClusterSpec, refs: AuthRefs | None = None, keys_in_cluster: bool = True) -> list[WantedSecret]:
    """What the generator makes: every wanted Secret with the keys in the cluster; with keys from
    Pulumi only the certificates (Pulumi makes the rest), which the generator still makes and
    renews in the cluster."""
    wanted = wanted_secrets(spec, refs)
    return wanted if keys_in_cluster else renewed(wanted)


def keygen_manifests(spec: ClusterSpec, refs: AuthRefs | None = None, keys_in_cluster: bool = True) -> list[Manifest]:
    """ServiceAccount, Role, RoleBinding and Job (and the renewal CronJob where it makes a
    certificate); nothing when every Secret is the user's or Pulumi's."""
    wanted = made_here(spec, refs, keys_in_cluster)
    if not wanted:
        return []
    name = keygen_name(spec)
    meta = metadata(spec, name, COMPONENT)
    container = {
        "name": COMPONENT,
        "image": spec.images.runtime.ref,
        "command": ["python", "-m", MODULE],
        "env": [
            {"name": "SUNK_NAMESPACE", "value": spec.ns},
            {"name": SECRETS_ENV, "value": secrets_json(wanted)},
            {"name": "SUNK_WORK_DIR", "value": WORK_DIR},
        ],
        "securityContext": {**restricted(RUNTIME_UID), "readOnlyRootFilesystem": True},
        "resources": fixed_resources("10m", "32Mi", "128Mi"),
        "volumeMounts": [{"name": "work", "mountPath": WORK_DIR}],
    }
    pod: Manifest = {
        "metadata": {"labels": labels(spec, COMPONENT)},
        "spec": {
            "serviceAccountName": name,
            "restartPolicy": "OnFailure",
            "enableServiceLinks": False,
            # fsGroup: the work folder is the image user's to write ssh-keygen's files into.
            "securityContext": {
                "runAsNonRoot": True,
                "fsGroup": RUNTIME_UID,
                "seccompProfile": {"type": "RuntimeDefault"},
            },
            "containers": [container],
            "volumes": [{"name": "work", "emptyDir": {"medium": "Memory", "sizeLimit": "1Mi"}}],
        },
    }
    # Placed and pulled like the runtime, whose image it runs.
    pod = apply_pod(pod, spec.runtime, main=None, pull_secrets=spec.images.pull_secrets)
    rules: list[Manifest] = [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]}]
    certificates = renewed(wanted)
    if certificates:
        # Renewal reads and replaces only the Secrets holding a certificate it made, by name.
        names = sorted(w.name for w in certificates)
        rules.append({"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "update"], "resourceNames": names})
    out = [
        obj("v1", "ServiceAccount", meta, automountServiceAccountToken=True),
        *bound_role(metadata(spec, name, COMPONENT), rules, name, spec.ns),
        obj(
            "batch/v1",
            "Job",
            metadata(spec, job_name(spec, pod), COMPONENT),
            spec={"backoffLimit": 10, "activeDeadlineSeconds": 1800, "template": pod},
        ),
    ]
    if certificates:
        # The same pod, daily: it creates what is missing and renews a certificate near its end.
        out.append(
            obj(
                "batch/v1",
                "CronJob",
                metadata(spec, naming.keygen_renew(spec), COMPONENT),
                spec={
                    "schedule": RENEW_SCHEDULE,
                    "concurrencyPolicy": "Forbid",
                    "successfulJobsHistoryLimit": 1,
                    "failedJobsHistoryLimit": 3,
                    "jobTemplate": {"spec": {"backoffLimit": 3, "activeDeadlineSeconds": 1800, "template": pod}},
                },
            )
        )
    return out
