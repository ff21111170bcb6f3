"""What may stand in a Slurm file, read the way Slurm's own parser reads it.

Slurm's config parser (src/common/parse_config.c) reads a file line by line up to a newline; on
each line an unescaped `#` starts a comment, a line ending in an odd number of backslashes (then
only blanks) continues on the next line, a backslash escapes the character after it, keys match
case-insensitively, and a key given twice keeps its last value. So text that is harmless to Python
changes what Slurm reads: a trailing backslash swallows the next rendered line (the password line
of slurmdbd.conf, EnforcePartLimits of slurm.conf), `Storage\\Pass=` is StoragePass to Slurm,
and U+0085 or U+2028 split a line for Python's `splitlines` but not for Slurm.

Every Slurm file sunk writes goes through `conf_file`: sunk's own lines and the spec's verbatim
lines alike pass `text_problem`, and a verbatim line may set no key that holds a secret or that
sunk renders in that file. The spec's fields use the same functions at load (`SlurmText`,
`conf_line`), so a value refused here is refused before any resource or file exists.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Collection, Iterable
from typing import Annotated

from pydantic import AfterValidator

NO_VAL = 0xFFFFFFFE
"""Slurm's "not set" for 32-bit fields; INFINITE (0xFFFFFFFF) is "unlimited". A number the spec
passes to a 32-bit field stays below both."""
MAX_U32 = NO_VAL - 1
MAX_U16 = 0xFFFE - 1
"""Below NO_VAL16 (0xFFFE) and INFINITE16."""

_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\ufeff]")
"""Every C0 control (tab too: no value needs one), DEL, every C1 control (U+0085 among them), the
Unicode line and paragraph separators and the byte-order mark."""


class SlurmTextError(ValueError):
    """A rendered Slurm file would hold a line Slurm reads otherwise than sunk meant (a value the
    spec should have refused reached a renderer)."""


def text_problem(text: str, *, comment: bool = False) -> str | None:
    """Why `text` can't be (part of) a line of a Slurm file, or None. `comment`: the text is a
    whole comment line, where `#` is expected."""
    if (bad := _CONTROL.search(text)) is not None:
        return (
            f"control character U+{ord(bad.group()):04X}: Slurm reads a line up to its newline and other "
            "readers break lines elsewhere; use printable characters only"
        )
    if text.rstrip().endswith("\\"):
        return "ends with a backslash, which makes Slurm join the next line to this one; drop it"
    if not comment and "#" in text:
        return "'#' starts a comment for Slurm, which drops the rest of the line; leave it out"
    return None


def _unescape(line: str) -> str:
    """The line as Slurm's parser sees it: comment cut at an unescaped `#`, escapes removed."""
    out: list[str] = []
    escaped = False
    for ch in line:
        if escaped:
            out.append(ch)
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == "#":
            break
        else:
            out.append(ch)
    return "".join(out)


_KEY_VALUE = re.compile(r'\s*([A-Za-z0-9_.]+)\s*[-*+/]?=\s*("[^"]*"|\S*)')


def read_keys(line: str) -> list[str] | None:
    """The keys of a line's `Key=Value` words as Slurm reads them (escapes removed; Slurm matches
    them in any case), in order; None if some word is not `Key=Value`. A comment line has none."""
    text = _unescape(line)
    keys, pos = [], 0
    while pos < len(text):
        if not text[pos:].strip():
            break
        match = _KEY_VALUE.match(text, pos)
        if match is None:
            return None
        keys.append(match.group(1))
        pos = match.end()
    return keys


def is_secret_key(key: str) -> bool:
    """A key whose value is a password (StoragePass, AccountingStoragePass, JobCompPass...)."""
    return "pass" in key.lower()


RENDERED: dict[str, frozenset[str]] = {
    "slurm.conf": frozenset(
        k.lower()
        for k in (
            "ClusterName", "SlurmctldHost", "SlurmctldPort", "SlurmdPort", "SlurmUser", "SlurmdUser",
            "StateSaveLocation", "SlurmdSpoolDir", "SlurmctldPidFile", "SlurmdPidFile", "AuthType", "CredType",
            "AuthAltTypes", "AuthAltParameters", "AuthInfo", "SelectType", "SelectTypeParameters",
            "ProctrackType", "TaskPlugin", "JobAcctGatherType", "MaxNodeCount", "GresTypes", "TopologyPlugin",
            "Prolog", "Epilog", "PrologSlurmctld", "EpilogSlurmctld", "JobSubmitPlugins", "HealthCheckProgram",
            "HealthCheckInterval", "HealthCheckNodeState", "PreemptType", "PreemptMode", "PreemptExemptTime",
            "PriorityType", "PriorityWeightAge", "PriorityWeightFairshare", "PriorityWeightJobSize",
            "PriorityWeightPartition", "PriorityWeightQOS", "SchedulerParameters", "EnforcePartLimits",
            "AccountingStorageType", "AccountingStorageHost", "AccountingStoragePort", "AccountingStoreFlags",
            "AccountingStorageTRES", "AccountingStorageEnforce", "SuspendProgram", "ResumeProgram",
            "SuspendTime", "ResumeTimeout", "SuspendExcStates", "SuspendExcNodes", "SlurmctldParameters",
            "NodeName", "NodeSet", "PartitionName", "DownNodes", "Include", "MetricsType",
            "SlurmctldPrimaryOnProg", "SlurmctldPrimaryOffProg",
        )
    ),
    "slurmdbd.conf": frozenset(
        k.lower()
        for k in (
            "AuthType", "AuthAltTypes", "AuthAltParameters", "AuthInfo", "DbdHost", "DbdPort", "SlurmUser",
            "PidFile", "StorageType", "StorageHost", "StoragePort", "StorageUser", "StorageLoc", "Include",
        )
    ),
    "cgroup.conf": frozenset(
        k.lower()
        for k in (
            "CgroupPlugin", "ConstrainCores", "ConstrainDevices", "ConstrainRAMSpace", "ConstrainSwapSpace",
            "AllowedRAMSpace", "IgnoreSystemd", "Include",
        )
    ),
    "gres.conf": frozenset(k.lower() for k in ("AutoDetect", "Include")),
    "topology.conf": frozenset(k.lower() for k in ("BlockSizes", "Include")),
}  # fmt: skip
"""Keys sunk renders in each file under some spec (lower case): a verbatim line may not set them
again, since Slurm keeps a repeated key's last value (`ConstrainDevices=no` after sunk's yes).
`Include` is here too: an included file's keys are out of sight of every check."""

RECORDS = frozenset(k.lower() for k in ("Name", "NodeName", "SwitchName", "BlockName"))
"""Keys that start a record of their own (one per GRES, switch, block): a verbatim line may add
one beside sunk's (gres.conf's `Name=mps`, a switch of topology.conf); slurm.conf's records
(NodeName, NodeSet, PartitionName) are in RENDERED, since the spec says which exist."""

MULTI_KEY = RECORDS | frozenset(k.lower() for k in ("NodeSet", "PartitionName", "DownNodes", "FrontendName"))
"""Keys that start a line of several `Key=Value` words (a record). Any other line holds one:
measured with Slurm 26.05, `MessageTimeout=30 EnforcePartLimits=NO` in slurm.conf and
`ArchiveEvents=no TrackSlurmctldDown=yes` in slurmdbd.conf are parse errors, fatal to the daemons
and clients (tests/slurm/test_dbd_parse_back.py)."""

OVERRIDABLE: dict[str, frozenset[str]] = {
    "slurm.conf": frozenset(
        k.lower() for k in ("InactiveLimit", "KillWait", "MinJobAge", "SlurmdTimeout", "Waittime", "ReturnToService",
                            "MpiDefault", "TreeWidth")
    ),
}  # fmt: skip
"""Defaults sunk renders that a verbatim line may replace: tuning with no part in security,
isolation or what sunk itself relies on (the scheduler reads an InactiveLimit line itself)."""


def line_problem(line: str, file: str, owned: Collection[str] = ()) -> str | None:
    """Why the verbatim line `line` (extra*Conf) can't go into `file`, or None: `text_problem`,
    then every word `Key=Value`, no key a secret, the first not one sunk renders there (`owned`:
    the keys of the rendered file, lower case; RENDERED[file] always)."""
    stripped = line.strip()
    if stripped.startswith("#"):
        return text_problem(line, comment=True)
    if (problem := text_problem(line)) is not None:
        return problem
    keys = read_keys(line)
    if not keys:
        return "not one configuration line `Key=Value ...` (or a `#` comment)"
    # Every `Key=` on the line, values included: `ConstrainDevices= StoragePass=x` is one key to
    # Slurm (a blank after '=' is skipped, so the value is `StoragePass=x`), yet the text is a
    # password line to any other reader of the ConfigMap.
    for key in [*keys, *_ANY_KEY.findall(_unescape(line))]:
        if is_secret_key(key):
            return (
                f"{key} holds a password, which would render into a ConfigMap that pods mount; "
                "passwords come from a Secret (accounting.external.passwordSecret)"
            )
    reserved = (RENDERED.get(file, frozenset()) | frozenset(owned)) - OVERRIDABLE.get(file, frozenset())
    if keys[0].lower() in reserved:
        return f"{keys[0]} is rendered by sunk in {file} (from the spec); set it through the spec, not a verbatim line"
    if len(keys) > 1 and keys[0].lower() not in MULTI_KEY:
        return (
            f"one `Key=Value` per line, without spaces; got {len(keys)} words: Slurm refuses the whole file at "
            f"{keys[1]} (a second key on a line that starts no record), and every daemon reading it exits"
        )
    return None


def conf_line(file: str) -> AfterValidator:
    """Pydantic check of one verbatim line of `file` (the same `line_problem` the writer runs)."""

    def check(line: str) -> str:
        if (problem := line_problem(line, file)) is not None:
            raise ValueError(f"{line[:80]!r}: {problem}")
        return line

    check.__doc__ = f"A {file} line `Key=Value ...` (or a `#` comment): no password, no key sunk renders there."
    return AfterValidator(check)


def _value(text: str) -> str:
    """Printable text Slurm reads back as written: no '#', no trailing backslash, not empty, no blanks around it."""
    if (problem := text_problem(text)) is not None:
        raise ValueError(f"{text[:80]!r}: {problem}")
    if text.strip() != text or not text:
        raise ValueError(f"{text[:80]!r}: empty or with blanks around it; Slurm would read it otherwise")
    return text


SlurmText = Annotated[str, AfterValidator(_value)]
"""Text sunk puts into a Slurm file as (part of) a value: printable, no `#`, no trailing backslash."""


def conf_file(header: str, own: Iterable[str], user: Iterable[str] = (), *, file: str) -> str:
    """The one writer of a Slurm file: `header`, sunk's `own` lines (a `#` line is sunk's comment),
    then the spec's verbatim `user` lines. Raises SlurmTextError for a line Slurm would read
    otherwise than sunk means (a value the spec should have refused)."""
    own = list(own)
    owned: set[str] = set()
    for n, line in enumerate(own, 1):
        comment = line.startswith("#")
        if (problem := text_problem(line, comment=comment)) is not None:
            raise SlurmTextError(f"{file}: rendered line {n} {line[:80]!r}: {problem}")
        if not comment and (keys := read_keys(line)) and keys[0].lower() not in RECORDS:
            owned.add(keys[0].lower())
    lines = [header.rstrip("\n"), *own]
    user = list(user)
    if repeats := repeated_keys(user):
        raise SlurmTextError(f"{file}: verbatim line {repeats[0]}")
    for line in user:
        if (problem := line_problem(line, file, owned)) is not None:
            raise SlurmTextError(f"{file}: verbatim line {line[:80]!r}: {problem}")
        lines.append(line)
    return "\n".join(lines) + "\n"


SACCTMGR_KEYWORDS = frozenset(
    (
        "where", "set", "withassoc", "withcoordinators", "withdeleted", "withsubaccounts", "withrawqoslevel",
        "wolimits", "woplimits", "wopinfo", "tree", "format", "names", "parsable", "parsable2", "noheader",
        "immediate", "readonly", "verbose", "quiet", "cluster", "clusters", "account", "accounts", "user",
        "users", "qos", "all", "none", "default", "parent", "partition",
    )
)  # fmt: skip
"""Words sacctmgr reads as part of its command (`where`, `set`, the `with...` options) rather than as
a name (a QOS named `where` makes `sacctmgr add qos where` fail). Refused as names, in any case."""
_PREFIX_KEYWORDS = ("where", "withassoc", "withcoordinators", "withdeleted", "withsubaccounts", "withrawqoslevel",
                    "wolimits", "woplimits", "wopinfo")  # fmt: skip
"""The options sacctmgr matches by a prefix (of 3 to 5 letters) where it expects a bare name: a name
that begins one is refused too (`withd` is withdeleted)."""


_KEYWORD_PREFIXES = {k[:n]: k for k in sorted(_PREFIX_KEYWORDS, reverse=True) for n in range(3, len(k) + 1)}
_KEYWORD_PREFIXES |= {k: k for k in SACCTMGR_KEYWORDS}


def keyword_problem(name: str) -> str | None:
    """Why `name` can't be a QOS, account, user or cluster name that sacctmgr reads, or None."""
    hit = _KEYWORD_PREFIXES.get(name.lower())
    if hit is not None:
        return f"{name!r} is read by sacctmgr as its keyword {hit!r}, not as a name; choose another name"
    return None


def shell_word(name: str) -> str:
    """A name on a sacctmgr command line of the accounting setup script: checked against sacctmgr's
    keywords, then quoted once for the shell (the spec's name patterns need no quotes, so the
    script reads as before)."""
    if (problem := keyword_problem(name)) is not None:
        raise SlurmTextError(problem)
    if (problem := text_problem(name)) is not None:
        raise SlurmTextError(f"{name!r}: {problem}")
    return shlex.quote(name)


def _not_keyword(name: str) -> str:
    """A name sacctmgr reads as a name, not as one of its keywords."""
    if (problem := keyword_problem(name)) is not None:
        raise ValueError(problem)
    return name


SacctmgrName = AfterValidator(_not_keyword)


def _plugstack_line(line: str) -> str:
    """A plugstack.conf line the writer accepts (printable, no trailing backslash)."""
    # SPANK's format, not `Key=Value`: the writer checks it as one of sunk's own lines.
    if (problem := text_problem(line, comment=line.startswith("#"))) is not None:
        raise ValueError(f"{line[:80]!r}: {problem}")
    return line


PlugstackLine = AfterValidator(_plugstack_line)
"""The check of a verbatim plugstack.conf line: the writer's `text_problem`, nothing else."""
"""The pydantic check of a name sacctmgr reads (`keyword_problem`)."""


def repeated_keys(lines: Iterable[str]) -> list[str]:
    """Keys that two verbatim lines of one file both set (records aside): Slurm keeps the last
    silently, so the first line would mean nothing."""
    seen: dict[str, int] = {}
    problems = []
    for i, line in enumerate(lines):
        keys = read_keys(line) if not line.lstrip().startswith("#") else []
        if not keys or keys[0].lower() in RECORDS:
            continue
        first = seen.setdefault(keys[0].lower(), i)
        if first != i:
            problems.append(f"[{i}]: {keys[0]} is set again (first at [{first}]); Slurm would keep only the last")
    return problems


def _once_each(lines: list[str]) -> list[str]:
    """Each key at most once."""
    if problems := repeated_keys(lines):
        raise ValueError("\n".join(problems))
    return lines


_ONCE = AfterValidator(_once_each)
SlurmConfLines = Annotated[list[Annotated[str, conf_line("slurm.conf")]], _ONCE]
"""Verbatim lines of slurm.conf (controller.extraSlurmConf): each `line_problem`-free, each key once."""
SlurmdbdConfLines = Annotated[list[Annotated[str, conf_line("slurmdbd.conf")]], _ONCE]
CgroupConfLines = Annotated[list[Annotated[str, conf_line("cgroup.conf")]], _ONCE]
GresConfLines = Annotated[list[Annotated[str, conf_line("gres.conf")]], _ONCE]
TopologyConfLines = Annotated[list[Annotated[str, conf_line("topology.conf")]], _ONCE]


def logical_lines(body: str) -> list[tuple[int, str]]:
    """A whole file as Slurm's parser reads it: (first physical line, text) per logical line,
    comments cut at an unescaped `#`, continuations joined, escapes removed."""
    out: list[tuple[int, str]] = []
    pending, start = "", 0
    for n, physical in enumerate(body.split("\n"), 1):
        text = _cut_comment(physical)
        stripped = text.rstrip()
        trailing = len(stripped) - len(stripped.rstrip("\\"))
        if not pending:
            start = n
        if trailing % 2 == 1:
            pending += stripped[:-1]
            continue
        out.append((start, _unescape(pending + text)))
        pending = ""
    if pending:
        out.append((start, _unescape(pending)))
    return out


def _cut_comment(line: str) -> str:
    backslashes = 0
    for i, ch in enumerate(line):
        if ch == "#" and backslashes % 2 == 0:
            return line[:i]
        backslashes = backslashes + 1 if ch == "\\" else 0
    return line


_ANY_KEY = re.compile(r"([A-Za-z0-9_.]+)\s*[-*+/]?=")


def secret_keys(body: str) -> list[tuple[int, str]]:
    """(line, key) of every password key a Slurm-style file sets, read as Slurm reads it: after
    continuations and escapes, anywhere on the line."""
    return [(n, key) for n, text in logical_lines(body) for key in _ANY_KEY.findall(text) if is_secret_key(key)]
