"""Auth: the Slurm auth key (munge.key or slurm.key) and the JWT key, generated or referenced,
and SSSD's configuration for LDAP users."""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s
import pulumi_random as random

from sunk import keys
from sunk.manifests.auth import (
    AuthRefs,
    auth_refs,
    auth_secret_name,
    empty_secret,
    jwt_secret_name,
    sssd_config_map,
)
from sunk.spec.cluster import ClusterSpec

from ._k8s import Component, child, create, text, typed

AUTH_KEY_BYTES = 1024
"""munge's `mungekey` default and Slurm's documented slurm.key size."""
JWT_KEY_BYTES = 32
"""HS256 key size from Slurm's JWT guide (https://slurm.schedmd.com/jwt.html)."""


class Auth(Component):
    """Secrets `<cluster>-auth` and `<cluster>-jwt` from pulumi-random bytes (kept encrypted in
    the Pulumi state), unless the spec points at existing Secrets or the keys are made in the
    cluster (`keys_in_cluster`: the KeyGenerator's Job creates them); the ConfigMap
    `<cluster>-sssd-conf` with sssd.conf when the cluster uses LDAP (it names no password). The LDAP
    bind password is only ever referenced."""

    refs: AuthRefs
    """Which Secret key every pod mounts, generated or existing."""
    auth_secret: pulumi.Output[str]
    """Name of the Secret holding the Slurm auth key (generated or existing)."""
    jwt_secret: pulumi.Output[str]
    """Name of the Secret holding the JWT key (generated or existing)."""
    auth_key: k8s.core.v1.Secret | None
    """The generated auth-key Secret; None when the spec names an existing one or the cluster makes it."""
    jwt_key: k8s.core.v1.Secret | None
    """The generated JWT-key Secret; None when the spec names an existing one or the cluster makes it."""
    sssd: k8s.core.v1.ConfigMap | None
    """sssd.conf for LDAP users; None without LDAP."""

    def __init__(
        self,
        name: str,
        spec: ClusterSpec,
        *,
        namespace: pulumi.Input[str],
        keys_in_cluster: bool = False,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        """`keys_in_cluster`: the keys are the in-cluster generator's (KeyGenerator), not made here."""
        super().__init__("sunk:index:Auth", name, opts)
        self.refs = auth_refs(spec)
        self.auth_key = self.jwt_key = self.sssd = None
        if self.refs.generate_auth and not keys_in_cluster:
            key = random.RandomBytes(f"{name}-auth-key", length=AUTH_KEY_BYTES, opts=child(self))
            self.auth_key = typed(
                k8s.core.v1.Secret,
                create(
                    f"{name}-auth-secret",
                    empty_secret(spec, auth_secret_name(spec), "auth"),
                    child(self),
                    namespace=namespace,
                    data={self.refs.auth.key: pulumi.Output.secret(key.base64)},
                ),
            )
        if self.refs.generate_jwt and not keys_in_cluster:
            jwt = random.RandomBytes(f"{name}-jwt-key", length=JWT_KEY_BYTES, opts=child(self))
            self.jwt_key = typed(
                k8s.core.v1.Secret,
                create(
                    f"{name}-jwt-secret",
                    empty_secret(spec, jwt_secret_name(spec), "auth"),
                    child(self),
                    namespace=namespace,
                    data={keys.JWT_KEY: pulumi.Output.secret(jwt.base64)},
                ),
            )
        sssd = sssd_config_map(spec)
        if sssd is not None:
            # A ConfigMap, not the Secret `<cluster>-sssd` of earlier releases: sssd.conf holds no
            # secret, and a plain render must carry it for the sidecars to start. The update
            # creates this and deletes that (pods roll once, onto the ConfigMap).
            self.sssd = typed(
                k8s.core.v1.ConfigMap, create(f"{name}-sssd-conf", sssd, child(self), namespace=namespace)
            )
        self.auth_secret = text(self.refs.auth.secret)
        self.jwt_secret = text(self.refs.jwt.secret)
        self.register_outputs({"auth_secret": self.auth_secret, "jwt_secret": self.jwt_secret})
