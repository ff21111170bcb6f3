"""Where every key and password lives, and the ConfigMap holding SSSD's configuration.

Keys are generated at deploy time (the components fill `data` from pulumi-random, so the values
live only in the encrypted Pulumi state and the cluster) or referenced in existing Secrets. These
builders return the Secrets without data: nothing secret ever passes through the pure core."""

from __future__ import annotations

from dataclasses import dataclass

from sunk import keys, naming
from sunk.manifests.config import SecretKey
from sunk.manifests.meta import Manifest, metadata, obj
from sunk.manifests.sssd import SSSD_CONF_KEY, render_sssd_conf, sssd_config_name
from sunk.roles import ROLES, SecretPurpose
from sunk.spec.cluster import ClusterSpec


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
    return naming.auth_secret(spec)


def jwt_secret_name(spec: ClusterSpec) -> str:
    return naming.jwt_secret(spec)


def db_secret_name(spec: ClusterSpec) -> str:
    return naming.db_secret(spec)


def host_keys_secret_name(spec: ClusterSpec) -> str:
    return naming.login_host_keys(spec)


def auth_key_name(spec: ClusterSpec) -> str:
    return keys.MUNGE_KEY if spec.auth.type == "munge" else keys.SLURM_KEY


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
        else SecretKey(jwt_secret_name(spec), keys.JWT_KEY)
    )
    db: SecretKey | None = None
    acct = spec.accounting
    if acct.enabled:
        ext = acct.external
        db = (
            SecretKey(ext.password_secret.name, ext.password_secret.key)
            if ext is not None
            else SecretKey(db_secret_name(spec), keys.DB_PASSWORD)
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


def sssd_config_map(spec: ClusterSpec) -> Manifest | None:
    """sssd.conf as a ConfigMap: it names the directory's layout but no password (the sidecar
    appends the bind password from its Secret into a private copy at start), so a plain render
    carries it whole and applied as is, the sidecars start. SSSD's demand for a 0600 file is met by
    that private copy, not by where the template lives."""
    if spec.auth.ldap is None:
        return None
    meta = metadata(spec, sssd_config_name(spec.name), "login")
    return obj("v1", "ConfigMap", meta, data={SSSD_CONF_KEY: render_sssd_conf(spec.auth.ldap)})


def secret_purposes(spec: ClusterSpec) -> dict[str, frozenset[SecretPurpose]]:
    """Every Secret a pod of this cluster may mount, by name -> what it holds (sunk.roles). One
    Secret may serve several purposes (an LDAP Secret with both the bind password and the CA)."""
    refs = auth_refs(spec)
    named: list[tuple[str, SecretPurpose]] = [(refs.auth.secret, "auth"), (refs.jwt.secret, "jwt")]
    if refs.db_password is not None:
        named.append((refs.db_password.secret, "database"))
    if spec.login.enabled and spec.login.persist_host_keys:
        named.append((host_keys_secret_name(spec), "ssh-host-keys"))
    ldap = spec.auth.ldap
    if ldap is not None:
        if ldap.bind_password_secret is not None:
            named.append((ldap.bind_password_secret.name, "ldap-bind"))
        if ldap.ca_secret is not None:
            named.append((ldap.ca_secret.name, "ldap-ca"))
        if ldap.client_cert_secret is not None:
            named.append((ldap.client_cert_secret.name, "ldap-client"))
    if spec.inference.namespaces:
        named.append((naming.webhook_tls_secret(spec), "webhook-tls"))
    out: dict[str, set[SecretPurpose]] = {}
    for name, purpose in named:
        out.setdefault(name, set()).add(purpose)
    return {name: frozenset(purposes) for name, purposes in sorted(out.items())}


def allowed_secret_names(spec: ClusterSpec, role: str, container: str | None = None) -> frozenset[str]:
    """The Secrets a pod of `role` (sunk.roles.ROLES) may mount in this cluster, or with
    `container` that one container may reach (none for a container the row does not list): those
    holding at least one purpose the row allows there. A Secret holding several purposes is
    allowed when any is, as long as the container reaches only the keys it names (sunk's mounts
    name them); reaching the whole Secret needs all (sunk.podgate checks that)."""
    row = ROLES[role]
    allowed = row.secrets if container is None else row.container_secrets.get(container, frozenset())
    return frozenset(name for name, purposes in secret_purposes(spec).items() if purposes & allowed)
