"""Directory settings: no value can add a line or a section to a generated file (sssd.conf, the
sshd drop-in), every invalid combination is refused with the field named, and the defaults are
the safe ones (TLS verified with demand, StartTLS for ldap://)."""

from __future__ import annotations

import configparser
from typing import Any

import pytest

from sunk.manifests.scripts import sshd_identity_conf
from sunk.manifests.sssd import SssdTextError, render_sssd_conf
from sunk.render.slurm_conf import render_slurm_conf
from sunk.spec import SpecError, load_spec
from sunk.spec.identity import LdapSpec
from tests.support.specs import MINIMAL, spec_document

LDAP: dict[str, Any] = {
    "uris": ["ldaps://ldap.acme.example:636"],
    "baseDn": "dc=acme,dc=example",
    "bindDn": "cn=sssd,ou=services,dc=acme,dc=example",
    "bindPasswordSecret": {"name": "ldap", "key": "password"},
    "caSecret": {"name": "ldap", "key": "ca.crt"},
}
INJECTIONS = (
    "\n[domain/evil]\nldap_tls_reqcert = never",
    "\nldap_uri = ldap://evil.example",
    "\rldap_tls_reqcert = never",
    "\x00",
    "\x0bx",
    "\x85ldap_tls_reqcert = never",
    "\u2028ldap_tls_reqcert = never",
    "\u2029[domain/evil]",
    "\tx",
    "\x9bx",
    "\ufeffx",
)
INJECTION_IDS = ["section", "second-uri", "carriage-return", "nul", "vtab", "nel", "line-sep", "para-sep", "tab", "c1"]
INJECTION_IDS += ["bom"]


def problems(ldap: dict[str, Any] | None = None, login: dict[str, Any] | None = None) -> list[str]:
    data = spec_document(**({"auth": {"ldap": ldap}} if ldap is not None else {}))
    if login is not None:
        data["login"] = login
    with pytest.raises(SpecError) as info:
        load_spec(data)
    return info.value.problems


def ldap_spec(**changes: Any) -> LdapSpec:
    spec = load_spec({**MINIMAL, "auth": {"ldap": {**LDAP, **changes}}})
    assert spec.auth.ldap is not None
    return spec.auth.ldap


# (field path under auth.ldap, how to put a value there, a valid value it starts from)
LDAP_FIELDS: list[tuple[str, Any]] = [
    ("uris[0]", lambda v: {"uris": [f"ldaps://ldap.acme.example{v}"]}),
    ("baseDn", lambda v: {"baseDn": f"dc=acme,dc=example{v}"}),
    ("userSearchBase", lambda v: {"userSearchBase": f"ou=people,dc=acme{v}"}),
    ("groupSearchBase", lambda v: {"groupSearchBase": f"ou=groups{v},dc=acme"}),
    ("bindDn", lambda v: {"bindDn": f"cn=sssd{v},dc=acme,dc=example"}),
    ("userFilter", lambda v: {"userFilter": f"(objectClass=posixAccount){v}"}),
    ("groupFilter", lambda v: {"groupFilter": f"(&(objectClass=posixGroup)(cn=hpc{v}))"}),
    ("sshPublicKeyAttribute", lambda v: {"sshPublicKeyAttribute": f"sshPublicKey{v}"}),
    ("groupMemberAttribute", lambda v: {"groupMemberAttribute": f"member{v}"}),
    ("overrideHomedir", lambda v: {"overrideHomedir": f"/home/%u{v}"}),
    ("bindPasswordSecret.key", lambda v: {"bindPasswordSecret": {"name": "ldap", "key": f"password{v}"}}),
    ("caSecret.key", lambda v: {"caSecret": {"name": "ldap", "key": f"ca.crt{v}"}}),
    ("clientCertSecret.certKey", lambda v: {"clientCertSecret": {"name": "ldap-client", "certKey": f"tls.crt{v}"}}),
]


@pytest.mark.parametrize("payload", INJECTIONS, ids=INJECTION_IDS)
@pytest.mark.parametrize(("field", "put"), LDAP_FIELDS, ids=[f for f, _ in LDAP_FIELDS])
def test_no_ldap_value_can_add_a_line(field: str, put: Any, payload: str) -> None:
    assert put("") and ldap_spec(**put(""))  # the value without the payload is valid
    found = problems({**LDAP, **put(payload)})
    assert len(found) == 1, found
    path, _, message = found[0].partition(": ")
    assert path == f"auth.ldap.{field}", found[0]
    assert "such as" in message or "letters" in message or "not valid" in message, message


@pytest.mark.parametrize("payload", INJECTIONS, ids=INJECTION_IDS)
def test_every_ldap_string_passes_the_sssd_check_even_without_its_own_validator(payload: str) -> None:
    """A field with no validator of its own (one added later) still meets the one check, by its
    path; and a value that reached the renderer anyway is refused there, not written."""
    ldap = ldap_spec()
    sneaked = ldap.model_copy(update={"ca_secret": ldap.ca_secret.model_copy(update={"key": f"ca{payload}"})})  # type: ignore[union-attr]
    found = [str(p) for rule in LdapSpec.RULES for p in rule(sneaked)]
    assert [p.partition(": ")[0] for p in found] == ["caSecret.key"], found
    assert "control character U+" in found[0]
    with pytest.raises(SssdTextError, match=r"sssd\.conf: .*control character"):
        render_sssd_conf(ldap.model_copy(update={"base_dn": f"dc=acme{payload}"}))


@pytest.mark.parametrize("payload", INJECTIONS[:3])
def test_no_login_value_can_add_a_line_to_sshd_config(payload: str) -> None:
    found = problems(login={"allowGroups": [f"research{payload}"]})
    assert [p.partition(": ")[0] for p in found] == ["login.allowGroups[0]"], found
    assert "a group name" in found[0]
    key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHq5v9mZ2wG2i3d0cFh3pQkU4sXJm0vYQn8x1bL2cD3e ops"
    found = problems(login={"authorizedKeys": [f"{key}{payload}"]})
    assert [p.partition(": ")[0] for p in found] == ["login.authorizedKeys[0]"], found


def test_partition_allow_groups() -> None:
    partition = {"name": "gpu", "nodesets": ["cpu"], "allowGroups": ["hpc", "gpu-users"]}
    spec = load_spec({**MINIMAL, "partitions": [*MINIMAL["partitions"], partition]})
    line = next(x for x in render_slurm_conf(spec).splitlines() if x.startswith("PartitionName=gpu "))
    assert " AllowGroups=hpc,gpu-users " in f"{line} "
    for bad, path, valid in (
        (["hpc,ops"], "partitions[1].allowGroups[0]", "a group name"),
        (["hpc\nPartitionName=evil"], "partitions[1].allowGroups[0]", "a group name"),
        (["hpc", "hpc"], "partitions[1].allowGroups[1]", "listed twice"),
    ):
        with pytest.raises(SpecError) as info:
            load_spec({**MINIMAL, "partitions": [*MINIMAL["partitions"], {**partition, "allowGroups": bad}]})
        assert [p.partition(": ")[0] for p in info.value.problems] == [path], info.value.problems
        assert valid in info.value.problems[0]
    with pytest.raises(SpecError) as info:
        load_spec({**MINIMAL, "partitions": [*MINIMAL["partitions"], {**partition, "extra": ["AllowGroups=x"]}]})
    assert "set it through its own field (allowGroups)" in info.value.problems[0]


def test_awkward_but_valid_values_stay_on_their_line() -> None:
    """Escaped DN characters, filters with every operator, % templates: each is still exactly
    one setting of the one domain section."""
    ldap = ldap_spec(
        baseDn=r"ou=Smith\, John+cn=x,dc=acme,dc=example",
        userFilter="(&(objectClass=posixAccount)(|(memberOf=cn=hpc,ou=groups,dc=acme)(!(uid=svc-*)))(cn=a\\29b))",
        overrideHomedir="/home/%d/%u",
        uris=["ldaps://ldap1.acme.example", "ldaps://[2001:db8::1]:636"],
    )
    conf = render_sssd_conf(ldap)
    parsed = configparser.ConfigParser(interpolation=None, comment_prefixes=("#",))
    parsed.read_string(conf)
    assert parsed.sections() == ["sssd", "nss", "pam", "ssh", "domain/ldap"]
    domain = parsed["domain/ldap"]
    assert domain["ldap_uri"] == "ldaps://ldap1.acme.example, ldaps://[2001:db8::1]:636"
    assert domain["ldap_user_search_base"] == f"{ldap.base_dn}?subtree?{ldap.user_filter}"
    assert domain["override_homedir"] == "/home/%d/%u"
    assert "ldap_default_authtok" not in domain  # only the sidecar appends it, last
    assert conf.rstrip().splitlines()[-1] == "ldap_default_authtok_type = password"
    assert len([line for line in conf.splitlines() if line.startswith("ldap_uri")]) == 1


def test_tls_defaults_verify_the_server() -> None:
    ldaps = render_sssd_conf(ldap_spec())
    assert "ldap_tls_reqcert = demand" in ldaps
    assert "ldap_id_use_start_tls = false" in ldaps
    assert "ldap_tls_cacert = /etc/sssd-ca/ca.crt" in ldaps
    starttls = render_sssd_conf(ldap_spec(uris=["ldap://ldap.acme.example"]))
    assert "ldap_id_use_start_tls = true" in starttls and "ldap_tls_reqcert = demand" in starttls
    # Weaker only when the spec says so.
    # (anonymous: a bind password never goes to an unverified server)
    anonymous = {"bindDn": None, "bindPasswordSecret": None, "caSecret": None}
    assert "ldap_tls_reqcert = never" in render_sssd_conf(ldap_spec(**anonymous, tlsReqcert="never"))


def test_providers() -> None:
    google = ldap_spec(
        provider="google",
        uris=["ldaps://ldap.google.com"],
        bindDn=None,
        bindPasswordSecret=None,
        clientCertSecret={"name": "google-ldap"},
    )
    conf = render_sssd_conf(google)
    for line in (
        "ldap_schema = rfc2307bis",
        "ldap_tls_cert = /etc/sssd-client/tls.crt",
        "ldap_tls_key = /etc/sssd-client/tls.key",
        "ldap_user_uuid = entryUUID",
        "ldap_groups_use_matching_rule_in_chain = true",
    ):
        assert line in conf
    assert "ldap_default_bind_dn" not in conf
    okta = render_sssd_conf(ldap_spec(provider="okta", baseDn="dc=acme,dc=okta,dc=com"))
    assert "ldap_schema = rfc2307bis" in okta and "ldap_group_member = uniqueMember" in okta
    authentik = render_sssd_conf(ldap_spec(provider="authentik", schema="rfc2307"))
    assert "ldap_schema = rfc2307\n" in authentik
    assert "ldap_schema = rfc2307\n" in render_sssd_conf(ldap_spec())
    cm = render_sssd_conf(ldap_spec(caSecret=None, caConfigMap={"name": "ldap-ca", "key": "ca.crt"}))
    assert "ldap_tls_cacert = /etc/sssd-ca/ca.crt" in cm


NO_BIND = {k: v for k, v in LDAP.items() if k not in ("bindDn", "bindPasswordSecret")}
COMBOS = [
    (
        "mixed-schemes",
        {**LDAP, "uris": ["ldaps://a.example", "ldap://b.example"]},
        "uris",
        "all ldaps:// or all ldap://",
    ),
    ("bind-dn-alone", {**NO_BIND, "bindDn": "cn=x,dc=acme"}, "bindPasswordSecret", "required when bindDn"),
    ("password-alone", {**NO_BIND, "bindPasswordSecret": {"name": "l", "key": "p"}}, "bindDn", "required when"),
    ("okta-anonymous", {**NO_BIND, "provider": "okta"}, "bindDn", "required for provider okta"),
    ("authentik-anonymous", {**NO_BIND, "provider": "authentik"}, "bindDn", "required for provider authentik"),
    ("google-no-cert", {**NO_BIND, "provider": "google"}, "clientCertSecret", "required for provider google"),
    ("two-cas", {**LDAP, "caConfigMap": {"name": "ca", "key": "ca.crt"}}, "caConfigMap", "give the CA once"),
    (
        "never-with-ca",
        {**NO_BIND, "caSecret": {"name": "ldap", "key": "ca.crt"}, "tlsReqcert": "never"},
        "tlsReqcert",
        "never checks no certificate",
    ),
    ("weak-reqcert-with-bind-password", {**LDAP, "tlsReqcert": "allow"}, "tlsReqcert", "would send the bind password"),
    (
        "cert-key-same",
        {**LDAP, "clientCertSecret": {"name": "c", "keyKey": "tls.crt"}},
        "clientCertSecret.keyKey",
        "two keys",
    ),
    ("uri-path", {**LDAP, "uris": ["ldaps://ldap.acme.example/dc=acme"]}, "uris[0]", "no path"),
    ("uri-port", {**LDAP, "uris": ["ldaps://ldap.acme.example:70000"]}, "uris[0]", "a port 1-65535"),
    ("uri-http", {**LDAP, "uris": ["https://ldap.acme.example"]}, "uris[0]", "ldap:// or ldaps://"),
    ("filter-unbalanced", {**LDAP, "userFilter": "(uid=a))(|(uid=*)"}, "userFilter", "balanced"),
    ("filter-question", {**LDAP, "groupFilter": "(cn=a?b)"}, "groupFilter", "without '?'"),
    ("dn-question", {**LDAP, "baseDn": "dc=acme?one?(uid=*)"}, "baseDn", "no '?'"),
    ("dn-unescaped", {**LDAP, "baseDn": "cn=Smith, John,dc=acme"}, "baseDn", "an LDAP DN"),
    ("homedir-relative", {**LDAP, "overrideHomedir": "home/%u"}, "overrideHomedir", "/home/%u"),
    ("homedir-bad-template", {**LDAP, "overrideHomedir": "/home/%x"}, "overrideHomedir", "SSSD's %u"),
    ("weak-reqcert-typo", {**LDAP, "tlsReqcert": "off"}, "tlsReqcert", "'demand'"),
    ("unknown-provider", {**LDAP, "provider": "ad"}, "provider", "'openldap'"),
]


@pytest.mark.parametrize(("ldap", "path", "valid"), [c[1:] for c in COMBOS], ids=[c[0] for c in COMBOS])
def test_invalid_combinations_name_the_field(ldap: dict[str, Any], path: str, valid: str) -> None:
    found = problems(ldap)
    assert len(found) == 1, found
    where, _, message = found[0].partition(": ")
    assert where == f"auth.ldap.{path}", found[0]
    assert valid in message, found[0]


def test_login_allow_groups() -> None:
    found = problems(login={"allowGroups": ["hpc", "hpc"]})
    assert len(found) == 1 and found[0].endswith("allowGroups: each group at most once"), found
    assert sshd_identity_conf(directory=True, allow_groups=[], root_keys=False) == (
        "AuthorizedKeysCommand /usr/bin/sss_ssh_authorizedkeys %u\nAuthorizedKeysCommandUser nobody\n"
    )
    assert (
        sshd_identity_conf(directory=False, allow_groups=["hpc", "ops"], root_keys=True) == "AllowGroups root hpc ops\n"
    )
    assert sshd_identity_conf(directory=False, allow_groups=[], root_keys=True) == ""


def test_nodesets_leave_room_for_the_sssd_sidecar() -> None:
    """A NodeSet sized to the last millicore its Nodes give fits without LDAP and not with it."""
    cpu = {"name": "cpu", "cpus": 4, "memoryMib": 4096, "nodeAllocatable": {"cpu": "4010m", "memory": "64Gi"}}
    data = {**MINIMAL, "nodesets": [cpu]}
    assert load_spec(data).nodesets[0].cpus == 4  # 4 CPUs and munge's 10m
    with pytest.raises(SpecError) as info:
        load_spec({**data, "auth": {"ldap": LDAP}})
    assert len(info.value.problems) == 1
    assert info.value.problems[0].startswith("nodesets[0].cpus: 4 plus 0.03 for munge and sidecars exceed"), info
    assert info.value.problems[0].endswith("(auth.ldap adds an sssd sidecar to the slurmd pod)")
