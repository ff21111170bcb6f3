"""A real LDAP directory on loopback for the identity tests: the host's Debian slapd (OpenLDAP),
seeded with users (posixAccount with an OpenSSH public key), groups (posixGroup) and a service
account SSSD binds as, behind TLS from a throwaway test CA.

slapd listens on ldap:// (StartTLS) and ldaps://, and refuses every operation without TLS
(`security tls=1`), so a directory lookup that works proves the client spoke TLS and verified
the server against the CA. With `require_client_cert` it also demands a client certificate
signed by that CA, as Google Secure LDAP does. Only the service account may read the tree,
except in client-certificate mode, where the certificate is the credential. Everything lives in
a fresh folder; slapd runs in the foreground, is tracked by PID and stopped with the instance.
"""

from __future__ import annotations

import secrets
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Self

from .layout import short_hostname, write_file
from .ports import free_ports, listening, wait_until

SLAPD = "/usr/sbin/slapd"
SLAPADD = "/usr/sbin/slapadd"
SCHEMA_DIR = Path("/etc/ldap/schema")
HOST = "localhost"
"""The name in the URIs and in the server certificate (the roots' /etc/hosts resolve it)."""

# The openssh-lpk attribute and class (the OIDs OpenSSH-LPK registered), written out here: the
# Debian slapd package ships no schema for SSH keys.
OPENSSH_LPK = """\
attributetype ( 1.3.6.1.4.1.24552.500.1.1.1.13 NAME 'sshPublicKey'
  DESC 'An OpenSSH public key, one per value'
  EQUALITY octetStringMatch
  SYNTAX 1.3.6.1.4.1.1466.115.121.1.40 )
objectclass ( 1.3.6.1.4.1.24552.500.1.1.2.0 NAME 'ldapPublicKey' SUP top AUXILIARY
  DESC 'Holder of OpenSSH public keys'
  MAY ( sshPublicKey $ uid ) )
"""


@dataclass(frozen=True)
class DirectoryUser:
    name: str
    uid: int
    gid: int
    """Primary group id."""
    ssh_keys: tuple[str, ...] = ()
    """OpenSSH public keys (sshPublicKey values)."""
    home: str = ""
    """homeDirectory. Default: /home/<name>."""
    shell: str = "/bin/sh"


@dataclass(frozen=True)
class DirectoryGroup:
    name: str
    gid: int
    members: tuple[str, ...] = ()
    """memberUid values (rfc2307)."""


@dataclass(frozen=True)
class TlsFiles:
    """PEM texts of the test CA and the certificates it signed."""

    ca: str
    server_cert: str
    server_key: str
    client_cert: str
    client_key: str


def _openssl(*args: str, cwd: Path) -> None:
    done = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"openssl {' '.join(args[:2])} failed: {done.stderr.strip()}")


def make_test_ca(folder: Path, host: str = HOST, address: str = "127.0.0.1") -> TlsFiles:
    """A CA, a server certificate for `host`, this machine's short name (libldap checks the name
    127.0.0.1 resolves to, which /etc/hosts may give as the machine's), 127.0.0.1 and `address`,
    and a client certificate (P-256 keys, valid for a day: long enough for a test run, useless after)."""
    folder.mkdir(parents=True, exist_ok=True)
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "1"]
    _openssl("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.crt", "-subj", "/CN=sunk test CA", cwd=folder)
    for name, subject, ext in (
        (
            "server",
            f"/CN={host}",
            f"subjectAltName=DNS:{host},DNS:{short_hostname()},IP:127.0.0.1,IP:{address}\nextendedKeyUsage=serverAuth\n",
        ),
        ("client", "/CN=sunk-sssd-client", "extendedKeyUsage=clientAuth\n"),
    ):
        (folder / f"{name}.ext").write_text(ext)
        _openssl("req", *ec, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", subject, cwd=folder)
        _openssl(
            "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
            "-days", "1", "-extfile", f"{name}.ext", "-out", f"{name}.crt", cwd=folder,
        )  # fmt: skip
    text = {p.stem + p.suffix: p.read_text() for p in folder.iterdir() if p.suffix in (".crt", ".key")}
    return TlsFiles(text["ca.crt"], text["server.crt"], text["server.key"], text["client.crt"], text["client.key"])


def _escape(value: str) -> str:
    """An LDIF value that is safe as is (the seed data is ours: plain names and keys)."""
    if any(c in value for c in "\n\r\x00") or value.startswith((" ", ":", "<")):
        raise ValueError(f"{value!r} needs base64 in LDIF; use plain values in test data")
    return value


def seed_ldif(
    base_dn: str,
    users: Sequence[DirectoryUser],
    groups: Sequence[DirectoryGroup],
    *,
    service_dn: str,
    service_password: str,
) -> str:
    top = base_dn.split(",")[0].split("=")[1]
    entries = [
        [f"dn: {base_dn}", "objectClass: dcObject", "objectClass: organization", f"o: {top}", f"dc: {top}"],
        *(
            [f"dn: ou={ou},{base_dn}", "objectClass: organizationalUnit", f"ou: {ou}"]
            for ou in ("people", "groups", "services")
        ),
        [
            f"dn: {service_dn}",
            "objectClass: organizationalRole",
            "objectClass: simpleSecurityObject",
            f"cn: {service_dn.split(',')[0].split('=')[1]}",
            f"userPassword: {_escape(service_password)}",
        ],
    ]
    for user in users:
        entries.append(
            [
                f"dn: uid={user.name},ou=people,{base_dn}",
                "objectClass: inetOrgPerson",
                "objectClass: posixAccount",
                "objectClass: ldapPublicKey",
                f"uid: {user.name}",
                f"cn: {user.name}",
                f"sn: {user.name}",
                f"uidNumber: {user.uid}",
                f"gidNumber: {user.gid}",
                f"homeDirectory: {user.home or f'/home/{user.name}'}",
                f"loginShell: {user.shell}",
                *(f"sshPublicKey: {_escape(key)}" for key in user.ssh_keys),
            ]
        )
    for group in groups:
        entries.append(
            [
                f"dn: cn={group.name},ou=groups,{base_dn}",
                "objectClass: posixGroup",
                f"cn: {group.name}",
                f"gidNumber: {group.gid}",
                *(f"memberUid: {m}" for m in group.members),
            ]
        )
    return "\n".join("\n".join(entry) + "\n" for entry in entries)


def slapd_conf(work: Path, base_dn: str, *, service_dn: str, require_client_cert: bool) -> str:
    includes = [*(SCHEMA_DIR / f"{s}.schema" for s in ("core", "cosine", "nis", "inetorgperson")), work / "lpk.schema"]
    # With a client certificate as the credential (Google Secure LDAP), TLS itself admits the
    # client; otherwise only the service account reads the tree.
    readers = "by * read" if require_client_cert else f'by dn.exact="{service_dn}" read by * none'
    return "\n".join(
        [
            *(f"include {p}" for p in includes),
            f"pidfile {work}/slapd.pid",
            f"argsfile {work}/slapd.args",
            "modulepath /usr/lib/ldap",
            "moduleload back_mdb",
            f"TLSCACertificateFile {work}/tls/ca.crt",
            f"TLSCertificateFile {work}/tls/server.crt",
            f"TLSCertificateKeyFile {work}/tls/server.key",
            f"TLSVerifyClient {'demand' if require_client_cert else 'never'}",
            # Every operation needs TLS: a lookup that works was encrypted.
            "security tls=1",
            "database mdb",
            f'suffix "{base_dn}"',
            f'rootdn "cn=admin,{base_dn}"',
            f"directory {work}/data",
            "access to attrs=userPassword by anonymous auth by * none",
            f"access to * {readers}",
            "",
        ]
    )


class LocalLdap:
    """slapd on loopback. `with LocalLdap.start(users, groups) as ldap:`; stop() is idempotent."""

    base_dn = "dc=sunk,dc=test"
    service_dn = "cn=sssd,ou=services,dc=sunk,dc=test"

    def __init__(
        self,
        work: Path,
        tls: TlsFiles,
        password: str,
        ports: Sequence[int],
        client_cert: bool,
        address: str = "127.0.0.1",
        netns: str | None = None,
    ) -> None:
        self.work = work
        self.address = address
        self.netns = netns
        self.tls = tls
        self.bind_password = password
        self.port, self.tls_port = ports
        self.require_client_cert = client_cert
        self._proc: subprocess.Popen[bytes] | None = None

    @classmethod
    def start(
        cls,
        users: Iterable[DirectoryUser],
        groups: Iterable[DirectoryGroup],
        *,
        require_client_cert: bool = False,
        workdir: Path | None = None,
        address: str = "127.0.0.1",
        netns: str | None = None,
    ) -> Self:
        """`address`, `netns`: slapd listens on `address` inside the named network namespace
        (`ip netns`) instead of on the host's loopback: a directory on another host of a network,
        such as the local cluster's bridge, that this process reaches through the bridge."""
        if not Path(SLAPD).exists():
            raise RuntimeError("slapd is not installed: apt-get install slapd ldap-utils (bash .ci/bootstrap does)")
        work = Path(tempfile.mkdtemp(prefix="sunk-ldap-", dir=workdir))
        try:
            tls = make_test_ca(work / "tls", address=address)
            password = secrets.token_urlsafe(18)
            self = cls(work, tls, password, free_ports(2), require_client_cert, address, netns)
            (work / "data").mkdir()
            (work / "lpk.schema").write_text(OPENSSH_LPK)
            conf = slapd_conf(work, cls.base_dn, service_dn=cls.service_dn, require_client_cert=require_client_cert)
            write_file(work / "slapd.conf", conf, 0o600)
            ldif = seed_ldif(
                cls.base_dn, list(users), list(groups), service_dn=cls.service_dn, service_password=password
            )
            write_file(work / "seed.ldif", ldif, 0o600)
            done = subprocess.run(
                [SLAPADD, "-f", str(work / "slapd.conf"), "-l", str(work / "seed.ldif")], capture_output=True, text=True
            )
            if done.returncode != 0:
                raise RuntimeError(f"slapadd failed: {done.stderr.strip()}")
            self._spawn()
        except BaseException:
            shutil.rmtree(work, ignore_errors=True)
            raise
        return self

    def _spawn(self) -> None:
        urls = f"ldap://{self.address}:{self.port}/ ldaps://{self.address}:{self.tls_port}/"
        inside = ["ip", "netns", "exec", self.netns] if self.netns else []
        log = (self.work / "slapd.log").open("ab")
        # -d keeps slapd in the foreground (tracked by PID); level 0 logs little.
        self._proc = subprocess.Popen(
            [*inside, SLAPD, "-d", "0", "-h", urls, "-f", str(self.work / "slapd.conf")],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        wait_until(
            "slapd",
            lambda: listening(self.port, self.address) and listening(self.tls_port, self.address),
            timeout=30,
            alive=self._proc,
            on_fail=lambda: (self.work / "slapd.log").read_text(errors="replace")[-2000:],
        )

    @property
    def uri(self) -> str:
        """ldap:// (StartTLS) by host name, as the certificate names it."""
        return f"ldap://{HOST}:{self.port}"

    @property
    def address_uri(self) -> str:
        """ldap:// (StartTLS) by address (the certificate names it too): for clients that do not
        resolve this machine's names, as pods on the local cluster's bridge."""
        return f"ldap://{self.address}:{self.port}"

    @property
    def ldaps_uri(self) -> str:
        return f"ldaps://{HOST}:{self.tls_port}"

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        shutil.rmtree(self.work, ignore_errors=True)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
