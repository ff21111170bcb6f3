"""Where every key and password lives, and SSSD's configuration.

Keys are generated at deploy time (the components fill `data` from pulumi-random, so the values
live only in the encrypted Pulumi state and the cluster) or referenced in existing Secrets. These
builders return the Secrets without data: nothing secret ever passes through the pure core."""

from __future__ import annotations

from dataclasses import dataclass

from sunk.manifests.config import DB_PASSWORD_KEY, JWT_KEY, MUNGE_KEY, SLURM_KEY, SecretKey
from sunk.manifests.meta import Manifest, metadata, obj
from sunk.spec.cluster import ClusterSpec

SSSD_CONF_KEY = "sssd.conf"
SSSD_DIR = "/etc/sssd"
SSSD_CA_PATH = "/etc/sssd-ca/ca.crt"
LDAP_BIND_PASSWORD_PATH = "/etc/sssd-bind/password"


@dataclass(frozen=True)
class AuthRefs:
    """The Secret keys pods mount: Slurm auth (munge or slurm.key), JWT, and the DB password."""

    auth: SecretKey
    jwt: SecretKey
    db_password: SecretKey | None
    generate_auth: bool
    generate_jwt: bool
    generate_db: bool


def auth_secret_name(spec: ClusterSpec) -> str:
    return f"{spec.name}-auth"


def jwt_secret_name(spec: ClusterSpec) -> str:
    return f"{spec.name}-jwt"


def db_secret_name(spec: ClusterSpec) -> str:
    return f"{spec.name}-mariadb"


def sssd_secret_name(spec: ClusterSpec) -> str:
    return f"{spec.name}-sssd"


def host_keys_secret_name(spec: ClusterSpec) -> str:
    return f"{spec.name}-login-host-keys"


def auth_key_name(spec: ClusterSpec) -> str:
    return MUNGE_KEY if spec.auth.type == "munge" else SLURM_KEY


def auth_refs(spec: ClusterSpec) -> AuthRefs:
    key, jwt = spec.auth.key, spec.auth.jwt
    auth = (
        SecretKey(key.existing_secret.name, key.existing_secret.key)
        if key.existing_secret is not None
        else SecretKey(auth_secret_name(spec), auth_key_name(spec))
    )
    jwt_ref = (
        SecretKey(jwt.existing_secret.name, jwt.existing_secret.key)
        if jwt.existing_secret is not None
        else SecretKey(jwt_secret_name(spec), JWT_KEY)
    )
    db: SecretKey | None = None
    acct = spec.accounting
    if acct.enabled:
        ext = acct.external
        db = (
            SecretKey(ext.password_secret.name, ext.password_secret.key)
            if ext is not None
            else SecretKey(db_secret_name(spec), DB_PASSWORD_KEY)
        )
    return AuthRefs(
        auth=auth,
        jwt=jwt_ref,
        db_password=db,
        generate_auth=key.existing_secret is None,
        generate_jwt=jwt.existing_secret is None,
        generate_db=acct.enabled and acct.external is None,
    )


def empty_secret(spec: ClusterSpec, name: str, component: str) -> Manifest:
    """A Secret shell; the component adds `data` (base64) from generated Outputs."""
    return obj("v1", "Secret", metadata(spec, name, component), type="Opaque")


def render_sssd_conf(spec: ClusterSpec) -> str:
    """sssd.conf for LDAP identities (https://sssd.io/docs/). The bind password is never in it:
    the sssd container appends `ldap_default_authtok` from the referenced Secret at start, to a
    0600 copy (SSSD refuses a config readable by others)."""
    ldap = spec.auth.ldap
    if ldap is None:
        raise ValueError("auth.ldap is not set")
    lines = [
        "# Rendered by sunk; ldap_default_authtok is appended at start from the bind password Secret.",
        "[sssd]",
        "config_file_version = 2",
        "services = nss, pam",
        "domains = ldap",
        "",
        "[nss]",
        "filter_users = root,slurm,munge",
        "filter_groups = root,slurm,munge",
        "",
        "[pam]",
        "",
        "[domain/ldap]",
        "id_provider = ldap",
        "auth_provider = ldap",
        "chpass_provider = none",
        f"ldap_uri = {', '.join(ldap.uris)}",
        f"ldap_search_base = {ldap.base_dn}",
        f"ldap_user_search_base = {ldap.base_dn}?subtree?{ldap.user_filter}",
        f"ldap_group_search_base = {ldap.base_dn}?subtree?{ldap.group_filter}",
        "ldap_schema = rfc2307",
        # ldaps:// is already TLS; plain ldap:// URIs upgrade with StartTLS, never cleartext binds.
        f"ldap_id_use_start_tls = {'true' if any(u.startswith('ldap://') for u in ldap.uris) else 'false'}",
        "ldap_tls_reqcert = demand",
        "cache_credentials = true",
        "enumerate = false",
    ]
    if ldap.ca_secret is not None:
        lines.append(f"ldap_tls_cacert = {SSSD_CA_PATH}")
    if ldap.bind_dn:
        lines += [f"ldap_default_bind_dn = {ldap.bind_dn}", "ldap_default_authtok_type = password"]
    return "\n".join(lines) + "\n"


def sssd_secret(spec: ClusterSpec) -> Manifest | None:
    """sssd.conf as a Secret (the issue's choice: SSSD insists on a private file, and the file
    reveals the directory layout). Holds no password."""
    if spec.auth.ldap is None:
        return None
    shell = empty_secret(spec, sssd_secret_name(spec), "login")
    shell["stringData"] = {SSSD_CONF_KEY: render_sssd_conf(spec)}
    return shell
