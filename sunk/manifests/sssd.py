"""SSSD on every Slurm pod: sssd.conf from the spec, and the sidecar that serves it.

Where users resolve: an sssd native sidecar runs beside sshd (login), slurmd (every NodeSet pod),
slurmctld and slurmdbd, and shares two folders with the pod's main container: SSSD's sockets
(/var/lib/sss/pipes: NSS, PAM and SSH keys) and its memory cache (/var/lib/sss/mc). The images'
nsswitch.conf reads `files sss`, so getpwnam, initgroups and `id` see directory users and groups
in every one of those containers; SSSD's own cache stays in the sidecar.

sssd.conf holds no secret, so it lives in a ConfigMap (`<cluster>-sssd-conf`) and a plain render
carries it whole. The bind password never passes through here: the sidecar mounts its Secret and appends
`ldap_default_authtok` to a private (0600, in-memory) copy of sssd.conf at start, refusing a
password that would add a line. The TLS files (CA, client certificate and key) are mounted from
their Secret or ConfigMap where sssd.conf names them.
"""

from __future__ import annotations

from sunk import naming
from sunk.manifests.meta import Manifest, content_hash, exec_probe, resources
from sunk.manifests.scripts import render, sh
from sunk.nodeset_resource import SssdRefs
from sunk.roles import SSSD_CAPABILITIES
from sunk.spec.cluster import ClusterSpec
from sunk.spec.identity import LdapSpec, sssd_text_problem
from sunk.spec.nodeset import SSSD_RESOURCES

SSSD_CONF_KEY = "sssd.conf"
SSSD_DIR = "/etc/sssd"
TEMPLATE_DIR = "/etc/sssd-template"
BIND_DIR = "/etc/sssd-bind"
LDAP_BIND_PASSWORD_PATH = f"{BIND_DIR}/password"
CA_DIR = "/etc/sssd-ca"
SSSD_CA_PATH = f"{CA_DIR}/ca.crt"
CLIENT_DIR = "/etc/sssd-client"
CLIENT_CERT_PATH = f"{CLIENT_DIR}/tls.crt"
CLIENT_KEY_PATH = f"{CLIENT_DIR}/tls.key"
PIPES = "/var/lib/sss/pipes"
MEMCACHE = "/var/lib/sss/mc"
NSS_SOCKET = f"{PIPES}/nss"
DOMAIN = "ldap"
FILTERED = "root,slurm,munge"
"""Names never looked up in the directory: the images' own accounts always come from files."""


def render_sssd_conf(ldap: LdapSpec) -> str:
    """sssd.conf for LDAP identities (https://sssd.io/docs/, sssd-ldap(5)). Every value is one
    validated line (sunk.spec.identity). The bind password is never in it: the sssd container
    appends `ldap_default_authtok` at start, so the domain section is last."""
    base = ldap.base_dn
    lines = [
        "# Rendered by sunk; ldap_default_authtok is appended at start from the bind password Secret.",
        "[sssd]",
        "config_file_version = 2",
        "services = nss, pam, ssh",
        f"domains = {DOMAIN}",
        "",
        "[nss]",
        f"filter_users = {FILTERED}",
        f"filter_groups = {FILTERED}",
        "",
        "[pam]",
        "",
        "[ssh]",
        "",
        f"[domain/{DOMAIN}]",
        "id_provider = ldap",
        "auth_provider = ldap",
        "chpass_provider = none",
        f"ldap_uri = {', '.join(ldap.uris)}",
        f"ldap_search_base = {base}",
        f"ldap_user_search_base = {ldap.user_search_base or base}?subtree?{ldap.user_filter}",
        f"ldap_group_search_base = {ldap.group_search_base or base}?subtree?{ldap.group_filter}",
        f"ldap_schema = {ldap.effective_schema}",
    ]
    if (member := ldap.effective_group_member) is not None:
        lines.append(f"ldap_group_member = {member}")
    lines += [
        f"ldap_user_ssh_public_key = {ldap.ssh_public_key_attribute}",
        # ldaps:// is TLS already; ldap:// upgrades with StartTLS: never a cleartext bind.
        f"ldap_id_use_start_tls = {'true' if ldap.start_tls else 'false'}",
        f"ldap_tls_reqcert = {ldap.tls_reqcert}",
    ]
    if ldap.ca_secret is not None or ldap.ca_config_map is not None:
        lines.append(f"ldap_tls_cacert = {SSSD_CA_PATH}")
    if ldap.client_cert_secret is not None:
        lines += [f"ldap_tls_cert = {CLIENT_CERT_PATH}", f"ldap_tls_key = {CLIENT_KEY_PATH}"]
    lines += ldap.defaults.extra
    if ldap.override_homedir is not None:
        lines.append(f"override_homedir = {ldap.override_homedir}")
    lines += [
        # Users log in with keys: no password hash is kept in any pod.
        "cache_credentials = false",
        "enumerate = false",
    ]
    if ldap.bind_dn:
        lines += [f"ldap_default_bind_dn = {ldap.bind_dn}", "ldap_default_authtok_type = password"]
    for line in lines:
        if (problem := sssd_text_problem(line)) is not None:
            raise SssdTextError(f"sssd.conf: {problem}")
    return "\n".join(lines) + "\n"


class SssdTextError(ValueError):
    """A line of sssd.conf would read otherwise than sunk meant (a value the spec should have
    refused at load reached the renderer)."""


def sssd_config_name(cluster: str) -> str:
    return naming.sssd_config(cluster)


def sssd_refs(spec: ClusterSpec) -> SssdRefs | None:
    """What an sssd sidecar mounts, for a cluster with auth.ldap."""
    ldap = spec.auth.ldap
    if ldap is None:
        return None
    return SssdRefs(
        config_map=sssd_config_name(spec.name),
        config_hash=content_hash(render_sssd_conf(ldap)),
        bind_password_secret=ldap.bind_password_secret,
        ca_secret=ldap.ca_secret,
        ca_config_map=ldap.ca_config_map,
        client_cert_secret=ldap.client_cert_secret,
    )


def sssd_start(bind_password: bool) -> str:
    """The sidecar's start (sssd-start.sh): SSSD's folders in the shared volumes, sssd.conf from its
    ConfigMap plus the bind password (refused if it would add a line), 0600, then sssd."""
    return render(
        "sssd-start.sh",
        PIPES=PIPES,
        MEMCACHE=MEMCACHE,
        TEMPLATE=f"{TEMPLATE_DIR}/{SSSD_CONF_KEY}",
        CONF=f"{SSSD_DIR}/sssd.conf",
        BIND_PASSWORD=LDAP_BIND_PASSWORD_PATH if bind_password else "",
    )


# sssd starts as root to read its 0600 config and the client key, and to serve NSS, PAM and SSH
# keys to the pod's other containers through the shared socket folder.
SSSD_SECURITY: Manifest = {
    "runAsUser": 0,
    "runAsNonRoot": False,
    "allowPrivilegeEscalation": False,
    "capabilities": {
        "drop": ["ALL"],
        "add": sorted(SSSD_CAPABILITIES),
    },
    "seccompProfile": {"type": "RuntimeDefault"},
}

CLIENT_MOUNTS: list[Manifest] = [
    {"name": "sunk-sss-pipes", "mountPath": PIPES},
    {"name": "sunk-sss-mc", "mountPath": MEMCACHE, "readOnly": True},
]
"""What the pod's main container mounts to resolve users through the sidecar."""


def sssd_volumes(refs: SssdRefs) -> list[Manifest]:
    volumes: list[Manifest] = [
        {"name": "sunk-sss-pipes", "emptyDir": {"medium": "Memory", "sizeLimit": "1Mi"}},
        {"name": "sunk-sss-mc", "emptyDir": {"medium": "Memory", "sizeLimit": "64Mi"}},
        {"name": "sunk-sssd-conf", "emptyDir": {"medium": "Memory", "sizeLimit": "1Mi"}},
        {
            "name": "sunk-sssd-template",
            "configMap": {
                "name": refs.config_map,
                "defaultMode": 0o400,
                "items": [{"key": SSSD_CONF_KEY, "path": SSSD_CONF_KEY}],
            },
        },
    ]
    if (bind := refs.bind_password_secret) is not None:
        volumes.append(
            {
                "name": "sunk-ldap-bind",
                "secret": {
                    "secretName": bind.name,
                    "defaultMode": 0o400,
                    "items": [{"key": bind.key, "path": "password"}],
                },
            }
        )
    if (ca := refs.ca_secret) is not None:
        volumes.append(
            {"name": "sunk-ldap-ca", "secret": {"secretName": ca.name, "items": [{"key": ca.key, "path": "ca.crt"}]}}
        )
    elif (cm := refs.ca_config_map) is not None:
        volumes.append(
            {"name": "sunk-ldap-ca", "configMap": {"name": cm.name, "items": [{"key": cm.key, "path": "ca.crt"}]}}
        )
    if (client := refs.client_cert_secret) is not None:
        volumes.append(
            {
                "name": "sunk-ldap-client",
                "secret": {
                    "secretName": client.name,
                    "defaultMode": 0o400,
                    "items": [{"key": client.cert_key, "path": "tls.crt"}, {"key": client.key_key, "path": "tls.key"}],
                },
            }
        )
    return volumes


def sssd_sidecar(image: str, refs: SssdRefs) -> Manifest:
    """sssd as a native sidecar (an init container that keeps running): its NSS socket exists
    before the main container starts, and it serves until the pod ends."""
    mounts: list[Manifest] = [
        {"name": "sunk-sss-pipes", "mountPath": PIPES},
        {"name": "sunk-sss-mc", "mountPath": MEMCACHE},
        {"name": "sunk-sssd-conf", "mountPath": SSSD_DIR},
        {"name": "sunk-sssd-template", "mountPath": TEMPLATE_DIR, "readOnly": True},
    ]
    if refs.bind_password_secret is not None:
        mounts.append({"name": "sunk-ldap-bind", "mountPath": BIND_DIR, "readOnly": True})
    if refs.ca_secret is not None or refs.ca_config_map is not None:
        mounts.append({"name": "sunk-ldap-ca", "mountPath": CA_DIR, "readOnly": True})
    if refs.client_cert_secret is not None:
        mounts.append({"name": "sunk-ldap-client", "mountPath": CLIENT_DIR, "readOnly": True})
    return {
        "name": "sssd",
        "image": image,
        "restartPolicy": "Always",
        "command": sh(sssd_start(refs.bind_password_secret is not None)),
        "securityContext": SSSD_SECURITY,
        "resources": resources(SSSD_RESOURCES),
        "startupProbe": exec_probe(["test", "-S", NSS_SOCKET], period=2, failures=60),
        "livenessProbe": exec_probe(["test", "-S", NSS_SOCKET], period=30),
        "volumeMounts": mounts,
    }


def with_sssd(
    spec: ClusterSpec, image: str, sidecars: list[Manifest], volumes: list[Manifest], mounts: list[Manifest]
) -> str | None:
    """Adds the sssd sidecar, its volumes and the main container's mounts to a pod being built
    (in place); returns the hash of sssd.conf for the pod template (None without LDAP)."""
    refs = sssd_refs(spec)
    if refs is None:
        return None
    sidecars.append(sssd_sidecar(image, refs))
    volumes.extend(sssd_volumes(refs))
    mounts.extend(CLIENT_MOUNTS)
    return refs.config_hash
