"""Base model and constrained types shared by every spec section.

Every model is frozen and forbids unknown fields; YAML keys are camelCase (Kubernetes style),
Python attributes snake_case. Error messages name what would be valid.
"""

from __future__ import annotations

import functools
import ipaddress
import re
from collections.abc import Mapping
from typing import Annotated, Any, Self

from pydantic import AfterValidator, BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from sunk.spec.slurmtext import SacctmgrName


class Model(BaseModel):
    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        alias_generator=to_camel,
        populate_by_name=True,
        use_attribute_docstrings=True,
        validate_default=True,
        # No coercion: `cpus: true` is not 1, `8192.0` is not an int, `"4"` is not a number
        # (loose types would let `yes` or `0440` mean what the reader did not write). Stack files are read with YAML 1.2 types, so each value
        # arrives as what it is.
        strict=True,
    )

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """A copy. pydantic copies the instance's __dict__, and with it every functools.cached_property
        value computed from the old fields: a copy with `update` would answer from the fields it
        replaced (a NodeSet looked up by name, has_gpus). Those values are dropped from the copy."""
        copy = super().model_copy(update=update, deep=deep)
        for name in _cached_properties(type(self)):
            copy.__dict__.pop(name, None)
        return copy


@functools.cache
def _cached_properties(cls: type) -> tuple[str, ...]:
    return tuple(
        name
        for klass in cls.__mro__
        for name, value in vars(klass).items()
        if isinstance(value, functools.cached_property)
    )


def _matcher(pattern: str, what: str, max_len: int | None = None) -> AfterValidator:
    rx = re.compile(pattern)

    def check(value: str) -> str:
        if max_len is not None and len(value) > max_len:
            raise ValueError(f"{value!r} is {len(value)} characters; at most {max_len} allowed")
        if not rx.fullmatch(value):
            raise ValueError(f"{value!r} is not valid: {what}")
        return value

    check.__doc__ = (
        f"{what[0].upper()}{what[1:]}" + (f", at most {max_len} characters" if max_len is not None else "") + "."
    )
    return AfterValidator(check)


DNS_LABEL_RULE = "a DNS-1123 label: lowercase letters, digits and '-', starting and ending with a letter or digit"


def dns_label(max_len: int = 63) -> AfterValidator:
    """A DNS-1123 label check with a tighter length limit (names that prefix other names)."""
    return _matcher(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", DNS_LABEL_RULE, max_len)


DnsLabel = Annotated[str, dns_label()]
"""Kubernetes object name (RFC 1123 label)."""

SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
"""Namespaces Kubernetes itself owns (with every other kube-*): nothing of sunk's belongs there."""


def _own_namespace(value: str) -> str:
    """A namespace sunk may create, label and enforce Pod Security on: not `default` and no kube-*
    (labelling kube-system `enforce: restricted` would stop the cluster's own DaemonSets)."""
    if value in SYSTEM_NAMESPACES or value.startswith("kube-"):
        raise ValueError(
            f"{value!r} is Kubernetes' own namespace (default, kube-*); sunk labels and enforces Pod Security on "
            "its namespaces: choose one of its own, such as sunk-system"
        )
    return value


OwnNamespace = Annotated[str, dns_label(), AfterValidator(_own_namespace)]
"""A namespace sunk creates or takes over: a DNS label, not default and not kube-*."""

DnsSubdomain = Annotated[
    str,
    _matcher(
        r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*",
        "a DNS-1123 subdomain: lowercase labels separated by '.'",
        253,
    ),
]


_NAME_PART = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
_PREFIX = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def _label_key(key: str) -> str:
    """A Kubernetes label, selector or taint key: `[prefix/]name`, name at most 63 characters of
    letters, digits, '-', '_', '.' (alphanumeric at both ends), prefix a DNS subdomain (253)."""
    prefix, _, name = key.rpartition("/")
    if not (len(name) <= 63 and _NAME_PART.fullmatch(name)) or (
        prefix and not (len(prefix) <= 253 and _PREFIX.fullmatch(prefix))
    ):
        raise ValueError(
            f"{key!r} is not a Kubernetes label key: [prefix/]name, name up to 63 letters, digits, '-', '_', '.' "
            "(alphanumeric at both ends), prefix a DNS subdomain"
        )
    return key


def _label_value(value: str) -> str:
    """A Kubernetes label value: empty, or up to 63 letters, digits, '-', '_', '.', alphanumeric at both ends."""
    if value and not (len(value) <= 63 and _NAME_PART.fullmatch(value)):
        raise ValueError(
            f"{value!r} is not a Kubernetes label value: up to 63 letters, digits, '-', '_', '.', alphanumeric at both ends"
        )
    return value


LabelKey = Annotated[str, AfterValidator(_label_key)]
LabelValue = Annotated[str, AfterValidator(_label_value)]
Labels = dict[LabelKey, LabelValue]
"""Labels and node selectors: what the API server accepts, checked before any object exists."""

SlurmName = Annotated[
    str,
    _matcher(r"[a-z][a-z0-9_-]*", "lowercase letter first, then lowercase letters, digits, '_', '-'", 40),
]
"""Name of a Slurm partition, QOS or account."""
AccountingName = Annotated[SlurmName, SacctmgrName]
"""Name of a QOS or account: a SlurmName that sacctmgr does not read as one of its keywords."""


def _quantity_bounds(value: str) -> str:
    """Kubernetes keeps a quantity as a 64-bit count of its smallest unit (nano): more digits than
    that holds are refused rather than rounded, or overflowed into `inf` here."""
    whole, _, fraction = value.rstrip("kmMGTPEi").partition(".")
    if len(whole) > 18 or len(fraction) > 9 or quantity_value(value) >= 2**63:
        raise ValueError(f"{value[:40]!r}... is beyond what a Kubernetes quantity holds (a 64-bit number)")
    return value


Quantity = Annotated[
    str,
    _matcher(
        r"(0|[1-9][0-9]*)(\.[0-9]+)?(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?",
        "a Kubernetes quantity such as 500m, 2, 512Mi or 10Gi",
        64,
    ),
    AfterValidator(_quantity_bounds),
]


def _nonzero(value: str) -> str:
    """Greater than zero."""
    if float(value.rstrip("kmMGTPEi")) == 0:  # the Quantity pattern already matched: digits, then a suffix
        raise ValueError(f"{value!r} is zero; a size must be positive, such as 10Gi")
    return value


PositiveQuantity = Annotated[Quantity, AfterValidator(_nonzero)]
"""A Kubernetes quantity greater than zero (storage sizes)."""

_QUANTITY_SUFFIX = {"m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18}
_QUANTITY_SUFFIX |= {f"{s}i": 1024.0 ** (i + 1) for i, s in enumerate("KMGTPE")}


def quantity_value(value: str) -> float:
    """A Quantity as a number (bytes for memory): `3Gi` -> 3221225472.0, `500m` -> 0.5."""
    number = value.rstrip("kmMGTPEi")
    return float(number) * _QUANTITY_SUFFIX.get(value[len(number) :], 1.0)


MAX_SLURM_SECONDS = 2**31 - 1
"""Slurm parses a time (time_str2mins, time_str2secs) into a C int: longer wraps around."""


def _time_bounds(value: str) -> str:
    """At most what Slurm's time fields hold (about 68 years), or UNLIMITED."""
    if value not in ("UNLIMITED", "INFINITE") and slurm_seconds(value) > MAX_SLURM_SECONDS:
        raise ValueError(
            f"{value!r} is longer than Slurm's time fields hold ({MAX_SLURM_SECONDS} seconds, about 68 years); "
            "use UNLIMITED for no limit"
        )
    return value


SlurmTime = Annotated[
    str,
    _matcher(
        r"UNLIMITED|INFINITE|[0-9]+|[0-9]+:[0-5][0-9]|[0-9]+:[0-5][0-9]:[0-5][0-9]"
        r"|[0-9]+-[0-9]+(:[0-5][0-9](:[0-5][0-9])?)?",
        "a Slurm time: UNLIMITED, minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS",
        20,
    ),
    AfterValidator(_time_bounds),
]


def slurm_seconds(value: str) -> float:
    """A SlurmTime in seconds (infinity for UNLIMITED), to compare limits such as DefaultTime <= MaxTime."""
    if value in {"UNLIMITED", "INFINITE"}:
        return float("inf")
    days, _, rest = value.rpartition("-")
    parts = [int(p) for p in rest.split(":")]
    if days:  # D-HH[:MM[:SS]]
        parts += [0] * (3 - len(parts))
        h, m, s = parts
    elif len(parts) == 1:  # minutes
        h, m, s = 0, parts[0], 0
    elif len(parts) == 2:  # MM:SS
        h, m, s = 0, *parts
    else:
        h, m, s = parts
    return float(int(days or 0) * 86400 + h * 3600 + m * 60 + s)


def _normal_path(path: str) -> str:
    """No '.' or '..' segments."""
    if any(part in (".", "..") for part in path.split("/")):
        raise ValueError(f"{path!r}: '.' and '..' segments are not allowed; write the path they mean")
    return path


AbsPath = Annotated[
    str,
    _matcher(
        r"(/[^/\x00-\x1f\x7f]+)+",
        "a normalized absolute path such as /data (starting with '/', not '/' itself, no trailing '/' or '//')",
    ),
    AfterValidator(_normal_path),
]
"""A mount or host path as Kubernetes compares them: two spellings of one folder would pass a
uniqueness check and clash in the pod, and `..` in a hostPath escapes the folder it names."""

RESERVED_MOUNTS = (
    "/etc/cont-init.d",
    "/etc/munge",
    "/etc/munge-key",
    "/etc/services.d",
    "/etc/slurm",
    "/etc/slurm-db",
    "/etc/ssh",
    "/etc/sssd",
    "/etc/sunk-login",
    "/etc/sunk-webhook",
    "/run/munge",
    "/run/mysqld",
    "/run/slurm",
    "/run/slurmd",
    "/run/sunk-s6",
    "/var/lib/mysql",
    "/var/lib/sss",
    "/var/spool/slurmctld",
    "/var/spool/slurmd",
)
"""Where sunk's own volumes mount in its pods (Slurm files, keys, sockets, spools, s6 scripts)."""


def mount_clash(path: str) -> str | None:
    """The reserved mount `path` would hide or sit inside, if any."""
    for reserved in RESERVED_MOUNTS:
        if path == reserved or path.startswith(reserved + "/") or reserved.startswith(path + "/"):
            return reserved
    return None


Feature = Annotated[
    str,
    _matcher(r"[A-Za-z][A-Za-z0-9_.]*", "a Slurm feature: a letter, then letters, digits, '_', '.'", 64),
]

FileName = Annotated[str, _matcher(r"[A-Za-z0-9_][A-Za-z0-9_.-]*", "a file name without '/'", 200)]

PositiveInt = Annotated[int, Field(gt=0)]


def _cidr(value: str) -> str:
    """A CIDR as the Kubernetes API server takes it in loadBalancerSourceRanges and a NetworkPolicy's
    ipBlock: an address, '/', a prefix length, in canonical form (203.0.113.0/24, 2001:db8::/32).

    Python's ipaddress is kinder than the API server: it reads a bare address as /32, netmask and
    hostmask forms (10.0.0.0/255.255.0.0), a prefix with leading zeros (/08) and an IPv6 zone
    (fe80::1%eth0/128), and each of these would reach the render as written and be refused at
    deploy (or read differently by another parser). Only the one spelling every parser agrees on is
    accepted, and the error gives it."""
    try:
        net = ipaddress.ip_network(value, strict=True)
    except ValueError as err:
        raise ValueError(f"{value!r} is not a CIDR such as 203.0.113.0/24 ({err})") from None
    if "/" not in value:
        raise ValueError(f"{value!r} is an address, not a CIDR: write {net.with_prefixlen!r} (address/prefix length)")
    if "%" in value:
        raise ValueError(f"{value!r} carries an IPv6 zone ('%...'), which Kubernetes refuses: drop it")
    canonical = net.with_prefixlen
    if value != canonical:
        raise ValueError(
            f"{value!r} is not in the form Kubernetes accepts (address/prefix length, canonical): write {canonical!r}"
        )
    return value


Cidr = Annotated[str, AfterValidator(_cidr)]


_OBJECT_KEY = re.compile(r"[-._a-zA-Z0-9]+")


def object_key_problem(value: str, what: str) -> str | None:
    """Why `value` is not a key of a Secret's or ConfigMap's data, as Kubernetes validates it
    (IsConfigMapKey): at most 253 of letters, digits, '-', '_', '.'; not '.' or '..', and not starting
    with '..' (the kubelet's atomic writer keeps its own `..data` link and `..<timestamp>` folders beside
    the keys in a mounted volume, so such a key would be refused by the API server or shadow them).
    None when it is one."""
    if len(value) > 253:
        return f"{value!r} is {len(value)} characters; at most 253 allowed"
    if not _OBJECT_KEY.fullmatch(value):
        return f"{value!r} is not {what}: letters, digits, '-', '_', '.'"
    if value in (".", "..") or value.startswith(".."):
        return f"{value!r} is not {what}: Kubernetes refuses '.', '..' and keys starting with '..'"
    return None


def _object_key(what: str) -> AfterValidator:
    def check(value: str) -> str:
        problem = object_key_problem(value, what)
        if problem is not None:
            raise ValueError(problem)
        return value

    return AfterValidator(check)


SecretKey = Annotated[str, _object_key("a Secret key")]
ConfigMapKey = Annotated[str, _object_key("a ConfigMap key")]


class SecretRef(Model):
    """A key in an existing Kubernetes Secret in the cluster's namespace."""

    name: DnsSubdomain
    """Secret name. Required."""
    key: SecretKey
    """Key inside the Secret. Required."""


class ResourceList(Model):
    cpu: Quantity | None = None
    """CPU, e.g. `500m`. Default: unset."""
    memory: Quantity | None = None
    """Memory, e.g. `1Gi`. Default: unset."""


class Resources(Model):
    """Container requests and limits (https://kubernetes.io/docs/concepts/configuration/manage-resources-containers/)."""

    requests: ResourceList = ResourceList(cpu="100m", memory="128Mi")
    """Default: 100m CPU, 128Mi memory."""
    limits: ResourceList = ResourceList(memory="512Mi")
    """Default: 512Mi memory, no CPU limit (CPU limits throttle slurmctld under load)."""


def resources(req_cpu: str, req_mem: str, lim_mem: str, lim_cpu: str | None = None) -> Resources:
    return Resources(
        requests=ResourceList(cpu=req_cpu, memory=req_mem),
        limits=ResourceList(cpu=lim_cpu, memory=lim_mem),
    )


_REPOSITORY = r"[a-z0-9]+([._-][a-z0-9]+)*(:[0-9]+)?(/[a-z0-9]+([._-][a-z0-9]+)*)*"
"""A registry host (optional port), then path components: the reference grammar without tag or digest."""


def _port_bounds(value: str) -> str:
    """A registry port, when given, from 1 to 65535."""
    host = value.partition("/")[0]
    if ":" in host and not 1 <= int(host.rpartition(":")[2][:6]) <= 65535:
        raise ValueError(f"{value!r}: registry port {host.rpartition(':')[2][:20]} is not a port (1-65535)")
    return value


Registry = Annotated[
    str,
    _matcher(_REPOSITORY, "a registry and optional path such as registry.example.com:5000/hpc (no trailing '/')", 200),
    AfterValidator(_port_bounds),
]
"""Where a set of images lives: `<registry>/<image>` is a repository. At most 200 characters, so
the longest image name still fits a repository's 255."""


class Image(Model):
    """A container image (https://kubernetes.io/docs/concepts/containers/images/)."""

    repository: Annotated[
        str,
        _matcher(_REPOSITORY, "an image repository such as ghcr.io/org/slurmctld (no tag)", 255),
        AfterValidator(_port_bounds),
    ]
    """Repository without tag. Required."""
    tag: Annotated[str, _matcher(r"[A-Za-z0-9_][A-Za-z0-9_.-]*", "an image tag", 128)]
    """Tag. Required."""

    @property
    def ref(self) -> str:
        return f"{self.repository}:{self.tag}"
