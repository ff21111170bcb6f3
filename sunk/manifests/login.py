"""Login pods: sshd with persisted host keys and authorized keys, SSSD for LDAP users, the Slurm
clients (authenticated through a munged or sackd sidecar), shared volumes, and a Service."""

from __future__ import annotations

from sunk import keys, naming, roles
from sunk.manifests import scripts, upgrade
from sunk.manifests.auth import AuthRefs, host_keys_secret_name
from sunk.manifests.config import client_hash, slurm_projection
from sunk.manifests.meta import (
    Manifest,
    content_hash,
    labels,
    metadata,
    obj,
    resources,
    selector,
    tcp_probe,
)
from sunk.manifests.pods import auth_mounts, auth_sidecars, auth_volumes, shared_volumes
from sunk.manifests.podsettings import apply_pod, apply_service, object_meta
from sunk.manifests.sssd import render_sssd_conf, with_sssd
from sunk.spec.cluster import ClusterSpec
from sunk.spec.pod import SSHD_CAPABILITIES

COMPONENT = "login"
SSH_PORT = roles.SSH_PORT
HOST_KEY_FILES = ("ssh_host_ed25519_key", "ssh_host_rsa_key")
"""Keys of the host-key Secret: OpenSSH private keys, copied to /etc/ssh at start."""

# sshd must run as root: it binds port 22, chroots its privilege-separated child, and switches
# to each user who logs in. No other privileges: not privileged, a minimal capability set.
_SSHD_SECURITY: Manifest = {
    "runAsUser": 0,
    "runAsNonRoot": False,
    "allowPrivilegeEscalation": True,
    "capabilities": {
        "drop": ["ALL"],
        "add": list(SSHD_CAPABILITIES),
    },
    "seccompProfile": {"type": "RuntimeDefault"},
}


def login_config_name(spec: ClusterSpec) -> str:
    return naming.login(spec)


def authorized_keys_config(spec: ClusterSpec) -> Manifest | None:
    """Public keys only, so a ConfigMap."""
    if not spec.login.enabled or not spec.login.authorized_keys:
        return None
    text = "\n".join(spec.login.authorized_keys) + "\n"
    return obj("v1", "ConfigMap", metadata(spec, login_config_name(spec), COMPONENT), data={"authorized_keys": text})


def login_hash(spec: ClusterSpec) -> str:
    sssd = render_sssd_conf(spec.auth.ldap) if spec.auth.ldap is not None else ""
    return client_hash(spec, sssd, content_hash(spec.login.authorized_keys, spec.login.allow_groups))


def deployment(spec: ClusterSpec, refs: AuthRefs) -> Manifest:
    login = spec.login
    image = spec.login_image.ref
    shared_vols, shared_mounts = shared_volumes(spec, "login")
    mounts: list[Manifest] = [
        {"name": "slurm-config", "mountPath": naming.SLURM_ETC, "readOnly": True},
        *auth_mounts(spec, sackd=True),
        *shared_mounts,
    ]
    volumes: list[Manifest] = [
        slurm_projection(spec, "login"),
        *auth_volumes(spec, refs.auth, sackd=True),
        *shared_vols,
    ]
    if login.persist_host_keys:
        mounts.append({"name": "host-keys", "mountPath": scripts.LOGIN_HOST_KEYS, "readOnly": True})
        volumes.append(
            {"name": "host-keys", "secret": {"secretName": host_keys_secret_name(spec), "defaultMode": 0o400}}
        )
    if login.authorized_keys:
        mounts.append({"name": "authorized-keys", "mountPath": scripts.LOGIN_AUTHORIZED_KEYS_DIR, "readOnly": True})
        volumes.append({"name": "authorized-keys", "configMap": {"name": login_config_name(spec)}})
    sidecars = auth_sidecars(spec, image, sackd=True)
    if spec.auth.type == "slurm":
        # sackd reads slurm.key from its own projection; login users never see the key.
        volumes.append({**slurm_projection(spec, "login", auth_key=refs.auth), "name": "sackd-config"})
        sidecars = [
            {
                **c,
                "volumeMounts": [
                    m if m["name"] != "slurm-config" else {**m, "name": "sackd-config"} for m in c["volumeMounts"]
                ],
            }
            for c in sidecars
        ]
    with_sssd(spec, image, sidecars, volumes, mounts)  # login_hash covers sssd.conf
    if upgrade.upgrading(spec):
        # A client may not be newer than slurmctld: the old login pod serves until this one is ready.
        config = {"name": "slurm-config", "mountPath": naming.SLURM_ETC, "readOnly": True}
        sidecars.append(
            upgrade.wait_release_container(spec, "slurmctld", image, [config, *auth_mounts(spec, sackd=True)])
        )
    sshd = {
        "name": "sshd",
        "image": image,
        "command": scripts.sh(
            scripts.login_start(
                login.persist_host_keys,
                bool(login.authorized_keys),
                directory=spec.auth.ldap is not None,
                allow_groups=login.allow_groups,
            )
        ),
        "ports": [{"name": "ssh", "containerPort": SSH_PORT, "protocol": "TCP"}],
        "securityContext": _SSHD_SECURITY,
        "resources": resources(login.resources),
        "readinessProbe": tcp_probe("ssh", period=10),
        "livenessProbe": tcp_probe("ssh", period=20, failures=6),
        "volumeMounts": mounts,
    }
    pod = {
        "metadata": {"labels": labels(spec, COMPONENT), "annotations": {keys.CONFIG_HASH: login_hash(spec)}},
        "spec": {
            "automountServiceAccountToken": False,
            "enableServiceLinks": False,
            "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
            "initContainers": sidecars,
            "containers": [sshd],
            "volumes": volumes,
        },
    }
    pod = apply_pod(pod, login, main="sshd", pull_secrets=spec.images.pull_secrets, extra_args=login.extra_args)
    return obj(
        "apps/v1",
        "Deployment",
        object_meta(metadata(spec, naming.login(spec), COMPONENT), login),
        spec={"replicas": login.replicas, "selector": {"matchLabels": selector(spec, COMPONENT)}, "template": pod},
    )


def service(spec: ClusterSpec) -> Manifest:
    login = spec.login
    svc: Manifest = {
        "type": login.service_kind,
        "selector": selector(spec, COMPONENT),
        "ports": [{"name": "ssh", "port": SSH_PORT, "targetPort": "ssh", "protocol": "TCP"}],
    }
    if login.ranges:
        svc["loadBalancerSourceRanges"] = login.ranges
        # Keep the client address, or the source ranges would see the node's address instead.
        svc["externalTrafficPolicy"] = "Local"
    meta = object_meta(metadata(spec, naming.login(spec), COMPONENT), login)
    return apply_service(obj("v1", "Service", meta, spec=svc), login.service)


def login_manifests(spec: ClusterSpec, refs: AuthRefs) -> list[Manifest]:
    if not spec.login.enabled:
        return []
    authorized = authorized_keys_config(spec)
    return [*([authorized] if authorized else []), deployment(spec, refs), service(spec)]
