"""Auth: the Slurm auth key (munge.key or slurm.key) and the JWT key, generated or referenced,
and SSSD's configuration for LDAP users."""

from __future__ import annotations

import pulumi
import pulumi_random as random

from sunk.manifests.auth import (
    AuthRefs,
    auth_refs,
    auth_secret_name,
    empty_secret,
    jwt_secret_name,
    sssd_secret,
)
from sunk.manifests.config import JWT_KEY
from sunk.spec.cluster import ClusterSpec

from ._k8s import child, create

AUTH_KEY_BYTES = 1024
"""munge's `mungekey` default and Slurm's documented slurm.key size."""
JWT_KEY_BYTES = 32
"""HS256 key size from Slurm's JWT guide (https://slurm.schedmd.com/jwt.html)."""


class Auth(pulumi.ComponentResource):
    """Secrets `<cluster>-auth` and `<cluster>-jwt` from pulumi-random bytes (kept encrypted in
    the Pulumi state), unless the spec points at existing Secrets; `<cluster>-sssd` with
    sssd.conf when the cluster uses LDAP. The LDAP bind password is only ever referenced."""

    refs: AuthRefs
    """Which Secret key every pod mounts, generated or existing."""
    auth_secret: pulumi.Output[str]
    jwt_secret: pulumi.Output[str]

    def __init__(
        self,
        name: str,
        spec: ClusterSpec,
        *,
        namespace: pulumi.Input[str],
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("sunk:index:Auth", name, None, opts)
        self.refs = auth_refs(spec)
        if self.refs.generate_auth:
            key = random.RandomBytes(f"{name}-auth-key", length=AUTH_KEY_BYTES, opts=child(self))
            create(
                f"{name}-auth-secret",
                empty_secret(spec, auth_secret_name(spec), "auth"),
                child(self),
                namespace=namespace,
                data={self.refs.auth.key: pulumi.Output.secret(key.base64)},
            )
        if self.refs.generate_jwt:
            jwt = random.RandomBytes(f"{name}-jwt-key", length=JWT_KEY_BYTES, opts=child(self))
            create(
                f"{name}-jwt-secret",
                empty_secret(spec, jwt_secret_name(spec), "auth"),
                child(self),
                namespace=namespace,
                data={JWT_KEY: pulumi.Output.secret(jwt.base64)},
            )
        sssd = sssd_secret(spec)
        if sssd is not None:
            data = sssd.pop("stringData")
            create(
                f"{name}-sssd",
                sssd,
                child(self),
                namespace=namespace,
                string_data={k: pulumi.Output.secret(v) for k, v in data.items()},
            )
        self.auth_secret = pulumi.Output.from_input(self.refs.auth.secret)
        self.jwt_secret = pulumi.Output.from_input(self.refs.jwt.secret)
        self.register_outputs({"auth_secret": self.auth_secret, "jwt_secret": self.jwt_secret})
