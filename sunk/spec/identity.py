"""Who may log in and as whom jobs run: Slurm daemon authentication, SSH login pods, and directory
users through SSSD (LDAP: OpenLDAP, or the LDAP front ends of Okta, Authentik and Google).

Every directory setting ends up in a generated file (sssd.conf on every Slurm pod), one per line.
So each value is checked against what that setting can be, and none may hold a line break, a
control character or anything else that would end its line: no value can add a setting or a
`[section]` (a second `ldap_uri`, `ldap_tls_reqcert = never`, a `[domain/...]` that would receive
the bind password). The bind password itself is never in the spec, only a Secret reference.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Literal

from pydantic import AfterValidator, Field, model_validator

from sunk.problem import Problem, Problems
from sunk.spec.base import Cidr, ConfigMapKey, DnsSubdomain, Model, Resources, SecretKey, SecretRef, _matcher, resources
from sunk.spec.pod import ExtraArgs, PodRole, PodSettings, ServiceSettings

_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\ufeff]")
"""What may end or hide a line of sssd.conf for some reader: every C0 control (newline, CR, NUL,
tab), DEL, every C1 control (U+0085 NEL among them), the Unicode line and paragraph separators and
the byte-order mark. sssd's INI parser (ding-libs) splits at newlines and reads a line that starts
with blanks as the continuation of the one above; other tools that read or patch the file split
elsewhere. Without them no value can begin a line, so none can add a key or a `[section]`."""


def sssd_text_problem(value: str) -> str | None:
    """Why `value` can't stand in a line of sssd.conf, or None: the one check every spec value that
    reaches sssd.conf passes at load, and every line the renderer writes passes again."""
    if (hit := _CONTROL.search(value)) is not None:
        return (
            f"{value[:60]!r} holds the control character U+{ord(hit.group()):04X}, which ends or hides a "
            "line of sssd.conf; one line of printable text only"
        )
    return None


def _one_line(value: str, example: str) -> None:
    """No character that ends or hides a line of a generated file."""
    if (problem := sssd_text_problem(value)) is not None:
        raise ValueError(f"{problem}, such as {example}")


def _strings(value: Any, path: str) -> list[tuple[str, str]]:
    """Every string inside a model's fields, each with its field path (by the names the stack uses)."""
    if isinstance(value, str):
        return [(path, value)]
    if isinstance(value, Model):
        return [
            found
            for name, info in type(value).model_fields.items()
            for found in _strings(
                getattr(value, name, None), f"{path}.{info.alias or name}" if path else info.alias or name
            )
        ]
    if isinstance(value, list | tuple):
        return [found for i, item in enumerate(value) for found in _strings(item, f"{path}[{i}]")]
    return []


_SSH_KEY = re.compile(
    r"(ssh-ed25519|ssh-rsa|ecdsa-sha2-nistp(256|384|521)|sk-ssh-ed25519@openssh\.com"
    r"|sk-ecdsa-sha2-nistp256@openssh\.com) [A-Za-z0-9+/]+={0,3}( [^\n]*)?"
)


def _ssh_key(value: str) -> str:
    """An OpenSSH public key (`ssh-ed25519 AAAA... comment`), one line."""
    if not _SSH_KEY.fullmatch(value.strip()):
        raise ValueError(
            f"{value[:40]!r}... is not an OpenSSH public key (`ssh-ed25519 AAAA... comment`); "
            "private keys never belong here"
        )
    _one_line(value.strip(), "ssh-ed25519 AAAA... ops@example.com")
    return value.strip()


GroupName = Annotated[
    str,
    _matcher(
        r"[A-Za-z_][A-Za-z0-9_.-]*",
        "a group name: a letter or '_', then letters, digits, '_', '.', '-' (no spaces or wildcards)",
        64,
    ),
]
"""A Unix or directory group, as sshd's AllowGroups and Slurm's AllowGroups take it."""


class LoginSpec(PodSettings):
    """SSH login pods (sshd + sssd + Slurm clients), their pod settings (sunk.spec.pod.PodSettings,
    for sshd) and their Service."""

    POD_ROLE: ClassVar[PodRole] = "login"

    enabled: bool = True
    """Default: true."""
    replicas: Annotated[int, Field(ge=1, le=20)] = 1
    """Default: 1."""
    service_type: Literal["LoadBalancer", "NodePort", "ClusterIP"] | None = None
    """How users reach sshd; the same as service.type (set one). Default: LoadBalancer when
    sourceRanges are given, else ClusterIP (reached from inside the cluster, or with `kubectl
    port-forward`). (https://kubernetes.io/docs/concepts/services-networking/service/)"""
    source_ranges: list[Cidr] = []
    """loadBalancerSourceRanges: who may connect; the same as service.sourceRanges (set one). A
    LoadBalancer login needs them: `[0.0.0.0/0]` opens sshd to everyone, on purpose, and `sunk
    validate` warns about it. Default: none."""
    service: ServiceSettings = ServiceSettings()
    """The login Service: type, annotations (a cloud's load-balancer settings), loadBalancerIP,
    loadBalancerClass, nodePort, externalTrafficPolicy, sourceRanges. Default: ClusterIP, or
    LoadBalancer when sourceRanges are given."""
    authorized_keys: list[Annotated[str, AfterValidator(_ssh_key)]] = []
    """OpenSSH public keys for root. Default: none (users come from LDAP)."""
    allow_groups: list[GroupName] = []
    """sshd AllowGroups: only members of these groups (and root, with authorizedKeys) may log in.
    Default: none (every user the directory resolves).
    https://man.openbsd.org/sshd_config#AllowGroups"""
    persist_host_keys: bool = True
    """Keep sshd host keys in a Secret so they survive pod restarts. Default: true."""
    resources: Resources = resources("250m", "512Mi", "2Gi")
    """Default: requests 250m/512Mi, limit 2Gi memory."""
    extra_args: ExtraArgs = []
    """Arguments appended to `sshd -D -e`, e.g. `[-o, LogLevel=VERBOSE]`. Default: none."""

    @property
    def service_kind(self) -> Literal["LoadBalancer", "NodePort", "ClusterIP"]:
        """The type in effect: service.type, else serviceType, else LoadBalancer with source
        ranges and ClusterIP without: sshd is never reachable by anyone unless the stack says so."""
        return self.service.type or self.service_type or ("LoadBalancer" if self.ranges else "ClusterIP")

    @property
    def ranges(self) -> list[str]:
        """loadBalancerSourceRanges in effect: service.sourceRanges, else sourceRanges."""
        return list(self.service.source_ranges or self.source_ranges)

    @model_validator(mode="after")
    def _ranges_need_lb(self) -> LoginSpec:
        errors: list[Problem] = []
        if self.service_type is not None and self.service.type is not None:
            errors.append(Problem("serviceType", "also given as service.type; set only service.type"))
        if self.source_ranges and self.service.source_ranges:
            errors.append(Problem("sourceRanges", "also given as service.sourceRanges; set only service.sourceRanges"))
        if self.source_ranges and self.service_kind != "LoadBalancer":
            errors.append(Problem("sourceRanges", f"only applies to serviceType LoadBalancer, not {self.service_kind}"))
        errors += [p.under("service") for p in self.service.problems(self.service_kind, self.ranges)]
        if self.enabled and self.service_kind == "LoadBalancer" and not self.ranges:
            errors.append(
                Problem(
                    "service.sourceRanges",
                    "a LoadBalancer login with no sourceRanges lets anyone who can reach the "
                    "load balancer try sshd; list who may connect (e.g. [203.0.113.0/24]), or [0.0.0.0/0] to open "
                    "it to everyone on purpose; or use type ClusterIP (kubectl port-forward) or NodePort",
                )
            )
        if len(set(self.allow_groups)) != len(self.allow_groups):
            errors.append(Problem("allowGroups", "each group at most once"))
        if errors:
            raise Problems(errors)
        return self


class KeySource(Model):
    """A key generated at deploy time or taken from an existing Secret."""

    generate: bool = True
    """Generate a random key (pulumi-random, kept secret in state). Default: true, or false when existingSecret is given."""
    existing_secret: SecretRef | None = None
    """Use this Secret key instead. Default: none."""

    @model_validator(mode="before")
    @classmethod
    def _secret_means_no_generate(cls, data: Any) -> Any:
        # `existingSecret` alone is unambiguous; only an explicit `generate: true` beside it is a conflict.
        given = isinstance(data, dict) and data.get("existingSecret", data.get("existing_secret")) is not None
        if given and "generate" not in data:
            return {**data, "generate": False}
        return data

    @model_validator(mode="after")
    def _one_source(self) -> KeySource:
        if self.existing_secret is not None and self.generate:
            raise Problems(
                [
                    Problem(
                        "generate",
                        "true conflicts with existingSecret; give one source (drop generate or existingSecret)",
                    )
                ]
            )
        if self.existing_secret is None and not self.generate:
            raise Problems([Problem("existingSecret", "required when generate is false (or set generate: true)")])
        return self


# -- LDAP values -----------------------------------------------------------------------------------

_ATTRIBUTE = r"(?:[A-Za-z][A-Za-z0-9-]*|[0-9]+(?:\.[0-9]+)+)"
# An RDN value (RFC 4514) without the characters that would end it, start a search-base option
# (`?`, sssd's base?scope?filter) or a comment; any of them may appear escaped (`\,`).
_RDN_VALUE = r"(?:[^,=+<>#;\\\"?\x00-\x1f\x7f]|\\[^\x00-\x1f\x7f])+"
_RDN = rf"{_ATTRIBUTE}={_RDN_VALUE}(?:\+{_ATTRIBUTE}={_RDN_VALUE})*"
_DN = re.compile(rf"{_RDN}(?:,\s*{_RDN})*")
_DN_RULE = (
    "an LDAP DN such as dc=example,dc=com: attribute=value pairs separated by ',', "
    "with ',', '+', '=', '#', ';', '\"', '<', '>' escaped by '\\' and no '?'"
)


def _dn(value: str) -> str:
    """An LDAP distinguished name such as dc=example,dc=com, one line, at most 512 characters."""
    _one_line(value, "dc=example,dc=com")
    if len(value) > 512:
        raise ValueError(f"{value[:40]!r}... is {len(value)} characters; at most 512 allowed")
    if value != value.strip() or not _DN.fullmatch(value):
        raise ValueError(f"{value!r} is not {_DN_RULE}")
    return value


Dn = Annotated[str, AfterValidator(_dn)]

_HOST = (
    r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*"
    r"|\[[0-9A-Fa-f:.]+\])"
)
_URI = re.compile(rf"(ldaps?)://({_HOST})(?::([0-9]{{1,5}}))?/?")


def _ldap_uri(value: str) -> str:
    """An LDAP URI such as ldaps://ldap.example.com:636: ldap:// or ldaps://, a host, a port 1-65535, no path."""
    _one_line(value, "ldaps://ldap.example.com:636")
    match = _URI.fullmatch(value)
    if not match or (match.group(3) is not None and not 1 <= int(match.group(3)) <= 65535):
        raise ValueError(
            f"{value!r} is not an LDAP URI such as ldaps://ldap.example.com:636 or ldap://ldap.example.com "
            "(ldap:// or ldaps://, a host name or address, a port 1-65535, no path, user or options)"
        )
    return value


LdapUri = Annotated[str, AfterValidator(_ldap_uri)]

_FILTER_CHARS = re.compile(r"[^?\x00-\x1f\x7f]+")


def _filter(value: str) -> str:
    """An LDAP search filter such as (objectClass=posixAccount), one line, balanced parentheses."""
    _one_line(value, "(objectClass=posixAccount)")
    depth, closed_at = 0, -1
    for i, char in enumerate(value):
        if char == "(" and (i == 0 or value[i - 1] != "\\"):
            depth += 1
        elif char == ")" and value[i - 1] != "\\":
            depth -= 1
            if depth < 0:
                break
            if depth == 0:
                closed_at = i
    if (
        len(value) > 1024
        or not _FILTER_CHARS.fullmatch(value)
        or not value.startswith("(")
        or depth != 0
        or closed_at != len(value) - 1
        or "=" not in value
    ):
        raise ValueError(
            f"{value[:80]!r} is not an LDAP filter such as (objectClass=posixAccount) or "
            "(&(objectClass=posixAccount)(memberOf=cn=hpc,ou=groups,dc=example,dc=com)): one parenthesised "
            "expression, balanced, without '?', at most 1024 characters"
        )
    return value


LdapFilter = Annotated[str, AfterValidator(_filter)]

Attribute = Annotated[
    str, _matcher(_ATTRIBUTE, "an LDAP attribute name: a letter, then letters, digits, '-' (or an OID)", 64)
]

_HOMEDIR = re.compile(r"(/[A-Za-z0-9_.%-]+)+")


def _homedir(value: str) -> str:
    """A home directory template such as /home/%u (SSSD's %u, %U, %d, %f, %l, %o, %h, %H, %P, %%)."""
    _one_line(value, "/home/%u")
    if not _HOMEDIR.fullmatch(value) or re.search(r"%[^uUdfloHhP%]|%$", value) or "/../" in f"{value}/":
        raise ValueError(
            f"{value!r} is not a home directory template such as /home/%u: an absolute path of letters, "
            "digits, '_', '.', '-', and SSSD's %u (user), %U (uid), %d (domain), %f, %l, %o, %h, %H, %P, %%"
        )
    return value


HomeTemplate = Annotated[str, AfterValidator(_homedir)]


class ConfigMapRef(Model):
    """A key in an existing ConfigMap in the cluster's namespace."""

    name: DnsSubdomain
    """ConfigMap name. Required."""
    key: ConfigMapKey
    """Key inside the ConfigMap. Required."""


class ClientCertRef(Model):
    """A client certificate and its private key in one Secret (a `kubernetes.io/tls` Secret by default)."""

    name: DnsSubdomain
    """Secret name. Required."""
    cert_key: SecretKey = "tls.crt"
    """Key of the PEM certificate (chain). Default: tls.crt."""
    key_key: SecretKey = "tls.key"
    """Key of the PEM private key. Default: tls.key."""

    @model_validator(mode="after")
    def _two_keys(self) -> ClientCertRef:
        if self.cert_key == self.key_key:
            raise Problems(
                [Problem("keyKey", f"the certificate and the private key need two keys; both are {self.key_key!r}")]
            )
        return self


Provider = Literal["openldap", "okta", "authentik", "google"]
ReqCert = Literal["demand", "hard", "try", "allow", "never"]
WEAK_REQCERT = ("try", "allow", "never")
"""ldap_tls_reqcert values that let a connection through without a verified server certificate."""


@dataclass(frozen=True)
class ProviderDefaults:
    """What a directory provider's LDAP front end serves, by its documentation."""

    schema: Literal["rfc2307", "rfc2307bis"]
    group_member: str | None = None
    """ldap_group_member, when it differs from the schema's (member / memberUid)."""
    needs_bind: bool = False
    needs_client_cert: bool = False
    extra: tuple[str, ...] = ()
    """Fixed sssd.conf lines this provider needs (no spec value in them)."""


PROVIDERS: dict[str, ProviderDefaults] = {
    # OpenLDAP with the nis schema: posixAccount / posixGroup with memberUid.
    "openldap": ProviderDefaults(schema="rfc2307"),
    # Okta's LDAP Interface: groups list members by DN in uniqueMember; no anonymous bind.
    "okta": ProviderDefaults(schema="rfc2307bis", group_member="uniqueMember", needs_bind=True),
    # authentik's LDAP outpost: groups list members by DN in member; binds as a service account.
    "authentik": ProviderDefaults(schema="rfc2307bis", needs_bind=True),
    # Google Secure LDAP: the client authenticates with a certificate and key; nested groups are
    # resolved by the server (LDAP_MATCHING_RULE_IN_CHAIN); users are identified by entryUUID.
    "google": ProviderDefaults(
        schema="rfc2307bis",
        needs_client_cert=True,
        extra=(
            "ldap_user_uuid = entryUUID",
            "ldap_groups_use_matching_rule_in_chain = true",
            "ldap_initgroups_use_matching_rule_in_chain = true",
        ),
    ),
}


class LdapSpec(Model):
    """SSSD against an LDAP directory, on every Slurm pod: login (sshd, with users' SSH keys from
    the directory), slurmd (jobs run as the user, with the user's groups), slurmctld (AllowGroups,
    associations) and slurmdbd (accounts). The connection is always encrypted: ldaps:// URIs speak
    TLS, ldap:// ones upgrade with StartTLS, and the server certificate is verified (`demand`)
    unless tlsReqcert says otherwise. https://sssd.io/ https://man.archlinux.org/man/sssd-ldap.5"""

    provider: Provider = "openldap"
    """Which directory serves LDAP: sets the schema and what must be given (okta and authentik
    need bindDn, google needs clientCertSecret). Default: openldap."""
    uris: Annotated[list[LdapUri], Field(min_length=1, max_length=16)]
    """LDAP servers, tried in order (ldap_uri); all ldaps:// or all ldap:// (StartTLS). Required."""
    base_dn: Dn
    """Search base (ldap_search_base). Required."""
    user_search_base: Dn | None = None
    """Where users are searched. Default: baseDn."""
    group_search_base: Dn | None = None
    """Where groups are searched. Default: baseDn."""
    bind_dn: Dn | None = None
    """Bind identity (ldap_default_bind_dn). Default: none (anonymous, or the client certificate);
    needs bindPasswordSecret."""
    bind_password_secret: SecretRef | None = None
    """Secret holding the bind password: mounted only into the sssd containers, added to their
    private copy of sssd.conf at start, never rendered. Default: none; required with bindDn."""
    ca_secret: SecretRef | None = None
    """Secret holding the CA certificate(s) (PEM) that signed the server's (ldap_tls_cacert).
    Default: none (the image's system CAs)."""
    ca_config_map: ConfigMapRef | None = None
    """The same from a ConfigMap (a CA is public). Default: none; at most one of caSecret and caConfigMap."""
    client_cert_secret: ClientCertRef | None = None
    """Client certificate and key (ldap_tls_cert, ldap_tls_key): required by Google Secure LDAP,
    optional elsewhere. Default: none."""
    tls_reqcert: ReqCert = "demand"
    """ldap_tls_reqcert: demand (and hard) refuse a server whose certificate does not verify
    against the CA; try, allow and never are weaker and only used when set here explicitly.
    Default: demand."""
    user_filter: LdapFilter = "(objectClass=posixAccount)"
    """Which entries are users. Default: (objectClass=posixAccount)."""
    group_filter: LdapFilter = "(objectClass=posixGroup)"
    """Which entries are groups. Default: (objectClass=posixGroup)."""
    ldap_schema: Annotated[Literal["rfc2307", "rfc2307bis"] | None, Field(alias="schema")] = None
    """ldap_schema: rfc2307 (groups list memberUid) or rfc2307bis (groups list member DNs).
    Default: the provider's (openldap rfc2307; okta, authentik, google rfc2307bis)."""
    group_member_attribute: Attribute | None = None
    """ldap_group_member. Default: the provider's (okta uniqueMember), else the schema's."""
    ssh_public_key_attribute: Attribute = "sshPublicKey"
    """Attribute holding users' OpenSSH public keys (ldap_user_ssh_public_key), served to sshd by
    sss_ssh_authorizedkeys. Default: sshPublicKey (the openssh-lpk schema)."""
    override_homedir: HomeTemplate | None = None
    """Home directory for every user instead of the directory's homeDirectory, e.g. /home/%u
    (put a shared volume there). Default: the directory's."""

    @property
    def defaults(self) -> ProviderDefaults:
        return PROVIDERS[self.provider]

    @property
    def effective_schema(self) -> str:
        return self.ldap_schema or self.defaults.schema

    @property
    def effective_group_member(self) -> str | None:
        return self.group_member_attribute or self.defaults.group_member

    @property
    def start_tls(self) -> bool:
        """ldap:// URIs upgrade with StartTLS (never a cleartext bind); ldaps:// are TLS already."""
        return self.uris[0].startswith("ldap://")

    RULES: ClassVar[tuple[Callable[[LdapSpec], list[Problem]], ...]] = ()
    """Each combination rule on its own (set below): a bad URI does not hide a missing secret."""

    @model_validator(mode="after")
    def _combinations(self) -> LdapSpec:
        found = [problem for rule in self.RULES for problem in rule(self)]
        if found:
            raise Problems(found)
        return self


def _ldap_schemes(ldap: LdapSpec) -> list[Problem]:
    if len({uri.split(":", 1)[0] for uri in ldap.uris}) > 1:
        return [
            Problem(
                "uris",
                "all ldaps:// or all ldap:// (StartTLS); SSSD applies StartTLS to every server of a "
                "domain, so a mix fails on one kind",
            )
        ]
    return []


def _ldap_bind(ldap: LdapSpec) -> list[Problem]:
    if ldap.bind_dn and ldap.bind_password_secret is None:
        return [Problem("bindPasswordSecret", "required when bindDn is set")]
    if ldap.bind_password_secret is not None and not ldap.bind_dn:
        return [Problem("bindDn", "required when bindPasswordSecret is set")]
    return []


def _ldap_provider(ldap: LdapSpec) -> list[Problem]:
    found = []
    if ldap.defaults.needs_bind and not ldap.bind_dn:
        found.append(
            Problem(
                "bindDn",
                f"required for provider {ldap.provider} (its LDAP interface refuses anonymous "
                "searches); give bindDn and bindPasswordSecret",
            )
        )
    if ldap.defaults.needs_client_cert and ldap.client_cert_secret is None:
        found.append(
            Problem(
                "clientCertSecret",
                f"required for provider {ldap.provider} (Secure LDAP authenticates the "
                "client by certificate); give the Secret holding its certificate and key",
            )
        )
    return found


def _ldap_tls(ldap: LdapSpec) -> list[Problem]:
    found = []
    if ldap.ca_secret is not None and ldap.ca_config_map is not None:
        found.append(Problem("caConfigMap", "give the CA once, in caSecret or in caConfigMap, not both"))
    if ldap.tls_reqcert in WEAK_REQCERT and ldap.bind_password_secret is not None:
        found.append(
            Problem(
                "tlsReqcert",
                f"{ldap.tls_reqcert} would send the bind password to a server whose certificate "
                "is not verified; use demand (with caSecret or caConfigMap) or bind anonymously",
            )
        )
    if ldap.tls_reqcert == "never" and (ldap.ca_secret is not None or ldap.ca_config_map is not None):
        field = "caSecret" if ldap.ca_secret is not None else "caConfigMap"
        found.append(
            Problem(
                "tlsReqcert", f"never checks no certificate, so {field} would be ignored; drop {field} or use demand"
            )
        )
    return found


def _ldap_text(ldap: LdapSpec) -> list[Problem]:
    """Every string field, those added later included, passes the sssd.conf check: the fields
    with their own validator already did, this catches any that has none."""
    values = _strings(ldap, "")
    return [Problem(path, problem) for path, value in values if (problem := sssd_text_problem(value)) is not None]


LdapSpec.RULES = (_ldap_text, _ldap_schemes, _ldap_bind, _ldap_provider, _ldap_tls)


class AuthSpec(Model):
    """Daemon authentication (https://slurm.schedmd.com/authentication.html) and directory users."""

    type: Literal["munge", "slurm"] = "munge"
    """auth/munge (munged sidecars) or auth/slurm (shared slurm.key, no munged). Default: munge."""
    key: KeySource = KeySource()
    """The munge key or slurm.key. Default: generated."""
    jwt: KeySource = KeySource()
    """HS256 key for slurmrestd JWT (AuthAltTypes=auth/jwt). Default: generated."""
    ldap: LdapSpec | None = None
    """Directory users through SSSD on every Slurm pod. Default: none (local users only)."""


__all__ = [
    "PROVIDERS",
    "WEAK_REQCERT",
    "AuthSpec",
    "ClientCertRef",
    "ConfigMapRef",
    "GroupName",
    "KeySource",
    "LdapSpec",
    "LoginSpec",
]
