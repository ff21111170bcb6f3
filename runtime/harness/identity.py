"""Directory users in the harness, as the pods get them: an sssd per Slurm root started by the
sidecar's own script (sunk.manifests.sssd) from the files its Secrets would mount, and sshd in the
login root started by the login container's own script (sunk.manifests.login), on a loopback port.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass

from sunk.manifests import accounting, controller, login
from sunk.manifests.auth import auth_refs
from sunk.manifests.meta import Manifest
from sunk.manifests.sssd import (
    CLIENT_CERT_PATH,
    CLIENT_KEY_PATH,
    LDAP_BIND_PASSWORD_PATH,
    NSS_SOCKET,
    SSSD_CA_PATH,
    SSSD_CONF_KEY,
    TEMPLATE_DIR,
    render_sssd_conf,
    sssd_refs,
    sssd_sidecar,
)
from sunk.spec.cluster import ClusterSpec

from .jail import Jail
from .layout import write_file
from .ports import listening, wait_until

SSSD_ROLES = ("slurmctld", "slurmdbd", "slurmd", "login")
"""Roots whose pods run an sssd sidecar (slurmrestd resolves no user)."""
HOST_KEYS = "/etc/ssh/sunk-host-keys"
"""Where the login pod mounts its host-key Secret."""
LOCAL_SSHD_CONF = "/etc/ssh/sshd_config.d/00-sunk-local.conf"
"""The harness's only sshd override: a loopback port instead of 22 (sshd takes the first value
it reads, and the drop-ins are read in name order, before the image's)."""
START_TIMEOUT = 120.0
"""A ceiling, not a wait (as the daemons' in daemons.py)."""


@dataclass(frozen=True)
class DirectorySecrets:
    """What the cluster's Secrets and ConfigMaps hold for SSSD: the bind password, the CA and the
    client certificate and key (PEM). Each is written only where the spec references it."""

    bind_password: str | None = None
    ca: str | None = None
    client_cert: str | None = None
    client_key: str | None = None


def _pod(spec: ClusterSpec, role: str) -> Manifest | None:
    """The rendered pod spec of the pod that runs `role`'s daemon (None for slurmd: the operator
    builds those pods, and they set no fsGroup)."""
    refs = auth_refs(spec)
    if role == "slurmctld":
        workload = controller.statefulset(spec, refs)
    elif role == "slurmdbd":
        workload = next(m for m in accounting.slurmdbd_manifests(spec, refs) if m["kind"] == "Deployment")
    elif role == "login":
        workload = login.deployment(spec, refs)
    else:
        return None
    return dict(workload["spec"]["template"]["spec"])


def sssd_empty_dirs(spec: ClusterSpec, role: str) -> tuple[list[str], int | None]:
    """The emptyDir folders of `role`'s sssd sidecar and its pod's fsGroup: with an fsGroup the
    kubelet makes each emptyDir root-owned with that group and setgid (mode 2777)."""
    pod = _pod(spec, role)
    if pod is None:
        return [], None
    empty = {v["name"] for v in pod["volumes"] if "emptyDir" in v}
    sssd = next(c for c in pod["initContainers"] if c["name"] == "sssd")
    group = (pod.get("securityContext") or {}).get("fsGroup")
    return [m["mountPath"] for m in sssd["volumeMounts"] if m["name"] in empty], None if group is None else int(group)


def confined(container: Manifest, fs_group: int | None = None) -> list[str]:
    """The container's command held to its securityContext as the pod's runtime holds it: the
    bounding set only what it adds to a dropped ALL (root then has just those, as in the pod),
    no_new_privs where privilege escalation is off, and the pod's fsGroup among its groups (the
    kubelet adds it to every container's). util-linux's setpriv is in every image."""
    security = container.get("securityContext") or {}
    caps = security.get("capabilities") or {}
    if "ALL" not in (caps.get("drop") or []):
        raise ValueError(f"{container['name']}: the harness confines only containers that drop ALL")
    bounding = ",".join(["-all", *(f"+{cap.lower()}" for cap in caps.get("add") or [])])
    escalation = ["--no-new-privs"] if security.get("allowPrivilegeEscalation") is False else []
    groups = [f"--groups={fs_group}"] if fs_group is not None else []
    return ["setpriv", *groups, f"--bounding-set={bounding}", *escalation, "--", *container["command"]]


def start_sssd(jail: Jail, role: str, spec: ClusterSpec, secrets: DirectorySecrets) -> None:
    """sssd in one role's root, by the sidecar's script, with the Secrets' files where it mounts
    them, and its emptyDir folders as its pod's fsGroup would leave them."""
    refs = sssd_refs(spec)
    if refs is None or spec.auth.ldap is None:
        raise ValueError("the spec has no auth.ldap")
    root = jail.root(role)
    folders, group = sssd_empty_dirs(spec, role)
    for folder in folders:  # empty, as a new pod's emptyDir: the image's files there are hidden
        empty = root / folder.lstrip("/")
        shutil.rmtree(empty, ignore_errors=True)
        empty.mkdir(parents=True)
        if group is not None:
            os.chown(empty, 0, group)
            empty.chmod(0o2777)
    write_file(root / TEMPLATE_DIR.lstrip("/") / SSSD_CONF_KEY, render_sssd_conf(spec.auth.ldap), 0o400)
    files = (
        (refs.bind_password_secret, LDAP_BIND_PASSWORD_PATH, secrets.bind_password, 0o400),
        (refs.ca_secret or refs.ca_config_map, SSSD_CA_PATH, secrets.ca, 0o644),
        (refs.client_cert_secret, CLIENT_CERT_PATH, secrets.client_cert, 0o400),
        (refs.client_cert_secret, CLIENT_KEY_PATH, secrets.client_key, 0o400),
    )
    for ref, path, text, mode in files:
        if ref is None:
            continue
        if text is None:
            raise ValueError(f"the spec references {path} (from {ref}) but DirectorySecrets has no value for it")
        write_file(root / path.lstrip("/"), text, mode)
    name = f"sssd-{role}"
    proc = jail.spawn(name, confined(sssd_sidecar("", refs), group), role=role)
    socket = root / NSS_SOCKET.lstrip("/")
    wait_until(
        name, socket.exists, timeout=START_TIMEOUT, alive=proc, on_fail=lambda: f"--- {name} ---\n{jail.log_tail(name)}"
    )


def sshd_command(spec: ClusterSpec) -> list[str]:
    """The login container's command, from the login Deployment the spec renders."""
    pod = login.deployment(spec, auth_refs(spec))["spec"]["template"]["spec"]
    sshd = next(c for c in pod["containers"] if c["name"] == "sshd")
    return list(sshd["command"])


def start_sshd(jail: Jail, spec: ClusterSpec, port: int, host_keys: Mapping[str, str]) -> subprocess.Popen[bytes]:
    """sshd in the login root as the login container starts it, with `host_keys` (file name ->
    OpenSSH private key) where the host-key Secret mounts, listening on 127.0.0.1:`port`."""
    root = jail.root("login")
    write_file(root / LOCAL_SSHD_CONF.lstrip("/"), f"Port {port}\nListenAddress 127.0.0.1\n", 0o644)
    for name, key in host_keys.items():
        write_file(root / HOST_KEYS.lstrip("/") / name, key, 0o400)
    if spec.login.authorized_keys:
        write_file(root / "etc/sunk-login/authorized_keys", "\n".join(spec.login.authorized_keys) + "\n", 0o644)
    proc = jail.spawn("sshd", sshd_command(spec), role="login")
    wait_until(
        "sshd", lambda: listening(port), timeout=START_TIMEOUT, alive=proc, on_fail=lambda: jail.log_tail("sshd")
    )
    return proc


def stop_sssd(jail: Jail, role: str) -> None:
    """Stop a root's sssd and forget what it cached (as a new pod would start without a cache)."""
    jail.stop(f"sssd-{role}")
    root = jail.root(role)
    for folder in ("var/lib/sss/db", "var/lib/sss/mc", "var/lib/sss/pipes"):
        for entry in (root / folder).glob("*"):
            if entry.is_file() or entry.is_socket():
                entry.unlink()
