"""Real slurmdbd is the oracle for slurmdbd.conf, as slurmctld is for slurm.conf (test_parse_back).

slurmdbd started with `-vvv` logs, at debug2, every setting it read from its own file once its
storage plugin is up (log_config: `AllowNoDefAcct = no` ... `TrackSlurmctldDown = no`). That dump
is the read-back: `sacctmgr show configuration` is not, since its SlurmDBD section reports
MessageTimeout, PrivateData, TCPTimeout and the Storage* values from the slurm.conf sacctmgr
itself reads (measured on 26.05: MessageTimeout 13 from slurm.conf while slurmdbd held 20).

Two checks, on one booted cluster:
- awkward but valid verbatim lines (a key in lower case, a quoted list, a value holding '=', an
  escaped key, a comment) are held as sunk meant, by the file's reading in
  tests.support.slurmread (not the writer's own functions);
- each hostile line the spec refuses (a trailing backslash, U+0085, U+2028, CR, NUL, an escaped
  password key) is refused naming its field, and, forced into the file past every check, changes
  what the real slurmdbd holds: the refusal guards a real effect, and slurmread predicts it."""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from typing import Any

import pytest
from sunk.runtime.harness import LocalSlurm

from sunk.render.files import render_slurmdbd_conf
from sunk.spec import SpecError
from sunk.stackfile import parse_config
from tests.support.slurmread import refused_lines
from tests.support.slurmread import settings as slurm_settings

pytestmark = pytest.mark.slurm

STACK: dict[str, Any] = {
    "name": "research",
    "tenant": "acme",
    "scheduling": {"preemptType": "none"},
    "nodesets": [{"name": "cpu", "replicas": 1, "cpus": 2, "memoryMib": 2048}],
    "partitions": [{"name": "batch", "nodesets": ["cpu"], "default": True}],
    "accounting": {
        "extraSlurmdbdConf": [
            "commitdelay=1",
            "MessageTimeout=20",
            "# site tuning",
            'PrivateData="accounts,users"',
            "StorageParameters=SSL_CIPHER=DEFAULT",
            "Track\\WCKey=yes",
            "TCPTimeout=7",
            "PurgeJobAfter=12months",
        ]
    },
}
HARNESS = {"storagehost", "storageport", "dbdport"}
"""What runtime/harness/overrides.local_slurmdbd_conf moves onto this host."""
VERBATIM = {"commitdelay", "messagetimeout", "privatedata", "storageparameters", "trackwckey", "tcptimeout"}
VERBATIM |= {"purgejobafter"}

HOSTILE: dict[str, tuple[list[str], str]] = {
    # name -> (the verbatim lines, what the real slurmdbd does with them forced past the checks)
    "trailing backslash": (["PrivateData=accounts\\", "TrackSlurmctldDown=yes"], "swallows"),
    "U+0085 (NEL)": (["PrivateData=accounts\x85TrackSlurmctldDown=yes"], "swallows"),
    "U+2028": (["PrivateData=accounts\u2028TrackSlurmctldDown=yes"], "swallows"),
    "NUL": (["PrivateData=accounts\x00TrackSlurmctldDown=yes"], "swallows"),
    "CR": (["PrivateData=accounts\rTrackSlurmctldDown=yes"], "exits"),
    "escaped password key": (["Storage\\Pass=smuggled"], "password"),
    "trailing backslash on the last line": (["PrivateData=accounts\\"], "no password"),
    "two keys on one line": (["ArchiveEvents=no TrackSlurmctldDown=yes"], "exits"),
}
"""`swallows`: the TrackSlurmctldDown after the hostile character is not read (one line to Slurm, two to
Python's splitlines); `exits`: slurmdbd refuses the file; `password`: Slurm reads the key as
StoragePass (set again by the start script, so it says it is set twice); `no password`: the line
the start script appends (StoragePass from the Secret) is joined to it, and slurmdbd logs in to
MariaDB without a password. A second key on a line (CR is a blank to Slurm) is a parse error."""
PROBE = "trackslurmctlddown"
"""The setting the hostile lines try to slip past a reader: `no` unless a line sets it."""

_DUMP = re.compile(r"debug2: ([A-Za-z]+) *= (.*)")


def _held(log: str) -> dict[str, str]:
    """slurmdbd's own settings, from the dump `-vvv` makes it log at start (lower-case keys)."""
    return {key.lower(): value.strip() for key, value in _DUMP.findall(log)}


def _same(ours: str, theirs: str) -> bool:
    """A value as slurmdbd prints it: case aside, with a unit (`20 secs`, `12 months`), a
    boolean as yes/no, or a list in any order."""
    a, b = ours.lower(), theirs.lower()
    if a in ("1", "yes") and b in ("1", "yes"):
        return True
    if b.startswith(a + "(") and b.endswith(")"):  # a user, with its uid: `slurm(64030)`
        return True
    unit = re.fullmatch(r"(\d+)([a-z]+)", a)
    if unit and b.startswith(f"{unit[1]} {unit[2]}"):
        return True
    return b == a or b.startswith(a + " ") or set(a.split(",")) == set(b.split(","))


@pytest.fixture(scope="module")
def slurm() -> Iterator[LocalSlurm]:
    spec, _ = parse_config({"sunk:cluster": STACK}, "dbd")
    with LocalSlurm.start(spec, restapi=False) as booted:
        yield booted


def _restart(slurm: LocalSlurm, conf: str | None = None) -> tuple[str, str | None]:
    """slurmdbd restarted with `-vvv` (on `conf` instead of the harness's file): what it logged,
    and why it did not come up (None: it did)."""
    log = slurm.jail.log_path("slurmdbd")
    at = log.stat().st_size
    failed = None
    try:
        slurm.restart_slurmdbd("-vvv", conf=conf)
    except (RuntimeError, TimeoutError) as err:
        failed = str(err)
    return log.read_bytes()[at:].decode(errors="replace"), failed


def test_slurmdbd_holds_what_the_writer_meant(slurm: LocalSlurm) -> None:
    meant = {k: v for k, v in slurm_settings(render_slurmdbd_conf(slurm.spec)).items() if k not in HARNESS}
    log, failed = _restart(slurm)
    assert failed is None, failed
    held = _held(log)
    compared = {key for key in meant if key in held}
    wrong = [f"{key}: sunk wrote {meant[key]!r}, slurmdbd holds {held[key]!r}" for key in sorted(compared)
             if not _same(meant[key], held[key])]  # fmt: skip
    assert wrong == []
    # The verbatim lines and most of sunk's own lines were compared (AuthType, SlurmUser, ...).
    assert compared >= VERBATIM and len(compared) >= 15, (sorted(compared), sorted(held))
    # The dump never holds the password (slurmdbd prints only StoragePassScript).
    assert "storagepass" not in held


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_lines_are_refused_and_would_change_what_slurmdbd_reads(case: str, slurm: LocalSlurm) -> None:
    lines, effect = HOSTILE[case]
    data = copy.deepcopy(STACK)
    data["accounting"]["extraSlurmdbdConf"] = ["CommitDelay=1", *lines]
    with pytest.raises(SpecError) as refused:
        parse_config({"sunk:cluster": data}, "hostile")
    assert all(p.startswith("accounting.extraSlurmdbdConf[") for p in refused.value.problems), refused.value.problems

    # Past every check: the harness's file with the lines appended, as the start script then
    # appends StoragePass from the Secret.
    forced = slurm.files["slurmdbd.conf"] + "\n".join(lines) + "\n"
    log, failed = _restart(slurm, forced)
    try:
        held = _held(log)
        predicted = slurm_settings(forced + "StoragePass=x\n")
        if effect == "swallows":
            assert failed is None, failed
            assert held[PROBE] == "no", held[PROBE]
            assert PROBE not in predicted, predicted
            assert held["privatedata"] == "accounts"
        elif effect == "exits":
            assert failed is not None and "Parse error" in log, log[-2000:]
            assert refused_lines(forced), forced
        elif effect == "password":
            assert failed is None, failed
            assert "StoragePass 1 specified more than once" in log, log[-2000:]
            assert predicted["storagepass"] == "x" and "storage\\pass" not in predicted
        else:  # no password
            assert failed is not None and "(using password: NO)" in log, log[-2000:]
            assert "storagepass" not in predicted, predicted
    finally:
        log, failed = _restart(slurm, slurm.files["slurmdbd.conf"])
        assert failed is None, failed
