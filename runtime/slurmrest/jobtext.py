"""Every job slurmctld holds, read through `squeue` with a token, for the exporter: the same rows
as `SlurmRestClient.list_jobs()` gives it, for a fraction of slurmrestd's cost.

Why not slurmrestd for this read: `GET /jobs/` serialises all ~130 fields of every job, ~7.7 KB
of JSON per job (2,000 held jobs: 15.3 MB, 0.84-1.5 s of slurmrestd on an idle machine,
bench/RESULTS.md), on the slurmrestd the scheduler and syncer write through, at every collection.
`squeue` asks slurmctld over Slurm's own protocol and prints the columns asked for: 2,000 jobs in
0.02-0.03 s. It authenticates with SLURM_JWT like the syncer's scontrol (nodetext.py), so the
exporter needs slurm.conf and the JWT key it already has, no Slurm or munge key.

One read is `squeue -r -a -h -t all -O <columns>` with SLURM_TIME_FORMAT=%s (times as epoch
seconds; TZ=UTC so no local time is involved): columns end with \\x1f, records with \\x1e (the
ASCII unit and record separators, which no Slurm name holds), the free-form Reason last. A row
maps to slurmrestd's values this way (Slurm 24.11; measured 2026-11 in tests/runtime/slurmrest/
test_jobtext_real.py):

- `hold`: PriorityLong is 0 (slurmrestd's `hold` is exactly `priority == 0`).
- times: `N/A` (0, e.g. the eligible time of a held job or one waiting on a dependency) -> 0,
  `Unknown` -> 4294967295 and `None` -> 4294967294 (32-bit INFINITE and NO_VAL, which
  slurmrestd reports as numbers too), a number -> itself (NO_VAL64 and INFINITE64 -> None, as
  slurmrestd leaves them unset).
- `cpus`: NumCPUs; 4294967294 and 4294967295 (NO_VAL, INFINITE) -> None.
- `gpus`: the `gres/gpu` entry of tres-alloc (the allocated TRES once the job has them, else the
  requested: slurmrestd's `tres_alloc_str`, else its `tres_req_str`); `(null)` or no entry -> 0.
- `account`, `partition`: `(null)` (never set) -> "".
- `user_name`: UserName, or "" where the reader's image can't resolve the uid (squeue then prints
  the uid, which UserId shows; slurmrestd prints "" for it).
- array jobs: slurmrestd lists each job record once, and a pending array is one record however
  many tasks it holds (`8_[0-9]`), while a task that was modified or requeued is a record of its
  own. Plain squeue merges such split pending tasks back into the array's row; `-r` prints every
  task, each with its record's JobID, so the reader keeps one row per JobID: slurmrestd's records.
  A pending array of N tasks costs N lines of text.
- `state` and `state_reason`: squeue's State shows a flag instead of the base state while one is
  set (COMPLETING, CONFIGURING, REQUEUED, ...), and Reason shows slurmctld's description instead
  of the reason code when it set one. Rows whose State is not a base state or whose Reason is not
  a reason name (jobreasons.py) are read again, by JobID, with `squeue --json=VERSION -j ...`:
  Slurm's own serialiser, slurmrestd's field for field, paid only for those rows (a job gone
  between the two reads is left out, as a read a moment later would). VERSION is the newest
  data_parser of versions.SPOKEN that this squeue has (v0.0.45 on 26.05, v0.0.42 on 24.11,
  whose squeue has no v0.0.45): found at the first such read, kept after.

Anything else the parser can't place raises JobTextError; a failing squeue raises SqueueError.
The exporter then reads that collection through slurmrestd (runtime/exporter/slurm.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

import msgspec

from .auth import TokenProvider
from .errors import SlurmRestError
from .jobreasons import JOB_REASONS
from .models import Job, job_gpus
from .tokenclient import TokenClient
from .versions import SPOKEN

BASE_STATES = frozenset(
    {
        "PENDING", "RUNNING", "SUSPENDED", "COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL", "PREEMPTED",
        "BOOT_FAIL", "DEADLINE", "OUT_OF_MEMORY",
    }
)  # fmt: skip
"""What squeue's State prints when no state flag is set: the base state, slurmrestd's `job_state[0]`."""

UNIT, RECORD = "\x1f", "\x1e"
COLUMNS = (
    "JobID", "State", "PriorityLong", "SubmitTime", "EligibleTime", "NumCPUs", "UserId", "UserName", "Account",
    "Partition", "tres-alloc", "Reason",
)  # fmt: skip
"""Fixed-form columns first, the free-form Reason last (it may hold the separators)."""
FORMAT = ",".join(f"{c}:{UNIT}" for c in COLUMNS[:-1]) + f",{COLUMNS[-1]}:{RECORD}"
"""`-O` spec: no width (printed untruncated), the separator as suffix."""

NO_VAL, INFINITE = 0xFFFFFFFE, 0xFFFFFFFF
NO_VAL64, INFINITE64 = 0xFFFFFFFFFFFFFFFE, 0xFFFFFFFFFFFFFFFF
_TIMES = {"N/A": 0, "Unknown": INFINITE, "None": NO_VAL}
"""squeue's words for a time: 0 (never set), then slurm_make_time_str's for INFINITE and NO_VAL."""
NULL = "(null)"
"""What squeue prints for a string slurmctld never set (a job without an account when accounting
is off); slurmrestd reports ""."""
JSON_BATCH = 5000
"""Job ids per `squeue --json -j` call: ~45 KB of arguments, well under Linux's 128 KiB per argument."""


class JobTextError(SlurmRestError):
    """squeue's output is not what this parser knows how to read."""


class SqueueError(SlurmRestError):
    """squeue could not be run, timed out, or failed (slurmctld unreachable, token refused)."""


class JobRow(msgspec.Struct, frozen=True, gc=False):
    """What the exporter reads of a job (runtime/exporter/collect.py), named as `Job`'s fields
    (`state` is `Job.state`, the base state). Untracked by the cyclic collector (`gc=False`)."""

    job_id: int
    state: str
    partition: str
    account: str
    user_name: str
    cpus: int | None
    state_reason: str
    submit_time: int | None
    eligible_time: int | None
    hold: bool
    gpus: int
    """GPUs (gres/gpu TRES): allocated when running, requested when pending (`Job.gpus`)."""


def job_row(job: Job) -> JobRow:
    """slurmrestd's job as the same row (to compare the two readers)."""
    return JobRow(
        job.job_id, job.state, job.partition, job.account, job.user_name, job.cpus, job.state_reason,
        job.submit_time, job.eligible_time, job.hold, job.gpus,
    )  # fmt: skip


def _int(text: str, column: str, job: str) -> int:
    if not (text.isascii() and text.isdigit()):
        raise JobTextError(f"job {job}: {column} {text[:40]!r} is not a number")
    return int(text)


def _time(text: str, column: str, job: str) -> int | None:
    if text in _TIMES:
        return _TIMES[text]
    digits = text[1:] if text.startswith("-") else text
    value = _int(digits, column, job) * (-1 if text.startswith("-") else 1) % 2**64
    return None if value in (NO_VAL64, INFINITE64) else value


def parse_squeue(text: str) -> tuple[list[JobRow], list[int]]:
    """squeue's text (FORMAT, `-r`) -> (the rows it settles, the JobIDs to read as JSON), one per
    job record, in squeue's order."""
    if not text:
        return [], []
    if not text.endswith(RECORD + "\n"):
        raise JobTextError(f"output ends with {text[-40:]!r}, not a record separator")
    rows: list[JobRow] = []
    unsettled: list[int] = []
    seen: dict[str, str] = {}
    width = len(COLUMNS)
    for record in text[: -len(RECORD) - 1].split(RECORD + "\n"):
        job, _, rest = record.partition(UNIT)
        earlier = seen.get(job)
        if earlier is not None:  # another task of a pending array record (-r prints each)
            if earlier != rest:
                raise JobTextError(f"job {job[:40]!r} printed twice with different columns")
            continue
        seen[job] = rest
        values = record.split(UNIT, width - 1)
        if len(values) != width:
            raise JobTextError(f"a record has {len(values)} columns, not {width}: {record[:80]!r}")
        job_id = _int(job, "JobID", job)
        state, priority, submit, eligible, cpus, uid, user, account, partition, tres, reason = values[1:]
        if state not in BASE_STATES or reason not in JOB_REASONS:
            unsettled.append(job_id)
            continue
        number = _int(cpus, "NumCPUs", job)
        _int(uid, "UserId", job)
        rows.append(
            JobRow(
                job_id,
                state,
                "" if partition == NULL else partition,
                "" if account == NULL else account,
                "" if user == uid else user,  # squeue prints the uid of a name it can't resolve
                None if number in (NO_VAL, INFINITE) else number,
                reason,
                _time(submit, "SubmitTime", job),
                _time(eligible, "EligibleTime", job),
                _int(priority, "PriorityLong", job) == 0,
                job_gpus("" if tres == NULL else tres, ""),
            )
        )
    return rows, unsettled


class _Number(msgspec.Struct):
    set: bool = False
    infinite: bool = False
    number: int = 0


def _no_val(value: _Number | None) -> int | None:
    return value.number if value is not None and value.set and not value.infinite else None


class _JsonJob(msgspec.Struct):
    job_id: int
    job_state: list[str] = []
    partition: str = ""
    account: str = ""
    user_name: str = ""
    cpus: _Number | None = None
    state_reason: str = ""
    submit_time: _Number | None = None
    eligible_time: _Number | None = None
    hold: bool = False
    tres_alloc_str: str = ""
    tres_req_str: str = ""


class _Error(msgspec.Struct):
    error_number: int = 0
    error: str = ""


class _JsonJobs(msgspec.Struct):
    jobs: list[_JsonJob] | None = None
    errors: list[_Error] = []


_decode_jobs = msgspec.json.Decoder(_JsonJobs).decode


def parse_squeue_json(data: bytes, wanted: Iterable[int]) -> list[JobRow]:
    """`squeue --json` (data_parser v0.0.42 or v0.0.45, slurmrestd's shape) -> the rows of the `wanted` jobs
    it holds (`-j 8` also lists the records of array 8's split tasks: those are left out)."""
    try:
        reply = _decode_jobs(data)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise JobTextError(f"squeue --json: {exc}") from exc
    if reply.jobs is None or any(e.error_number for e in reply.errors):
        why = "; ".join(f"{e.error_number} {e.error}" for e in reply.errors) or "no jobs list"
        raise JobTextError(f"squeue --json: {why}")
    keep = set(wanted)
    return [
        JobRow(
            j.job_id,
            j.job_state[0] if j.job_state else "UNKNOWN",
            j.partition,
            j.account,
            j.user_name,
            _no_val(j.cpus),
            j.state_reason,
            _no_val(j.submit_time),
            _no_val(j.eligible_time),
            j.hold,
            job_gpus(j.tres_alloc_str, j.tres_req_str),
        )
        for j in reply.jobs
        if j.job_id in keep
    ]


class SqueueJobs(TokenClient):
    """Runs squeue as the token's user. `command` is how squeue is started (a test runs it inside
    a Slurm image's root); the process gets only PATH, LANG, TZ, SLURM_TIME_FORMAT, SLURM_CONF and
    SLURM_JWT. `reads` counts squeue runs; `json_rows` how many rows the last read took from JSON."""

    error = SqueueError

    def __init__(
        self, token: TokenProvider, conf: Path | str, *, command: Sequence[str] = ("squeue",), timeout: float = 60.0
    ) -> None:
        super().__init__(token, conf, command=command, timeout=timeout)
        self.json_rows = 0
        self.data_parser: str | None = None
        """The data_parser version `squeue --json` is asked for, once one has worked."""

    def _squeue(self, args: Sequence[str]) -> bytes:
        # Times as epoch seconds, in UTC: no local time is involved.
        return self._run(args, f"squeue {args[0]}", {"TZ": "UTC", "SLURM_TIME_FORMAT": "%s"})

    def _squeue_json(self, args: Sequence[str]) -> bytes:
        """`squeue --json=V ARGS` with the newest spoken version this squeue has (an older
        release's squeue refuses a newer version: the next one is tried)."""
        versions = [self.data_parser] if self.data_parser else list(SPOKEN)
        failed: SqueueError | None = None
        for version in versions:
            try:
                data = self._squeue([f"--json={version}", *args])
            except SqueueError as exc:
                failed = exc
                continue
            self.data_parser = version
            return data
        assert failed is not None
        raise failed

    def jobs(self) -> list[JobRow]:
        """Every job record slurmctld holds (hidden partitions and finished jobs included)."""
        text = self._squeue(["-r", "-a", "-h", "-t", "all", "-O", FORMAT]).decode("utf-8", "replace")
        rows, unsettled = parse_squeue(text)
        self.json_rows = 0
        for start in range(0, len(unsettled), JSON_BATCH):
            batch = unsettled[start : start + JSON_BATCH]
            data = self._squeue_json(["-a", "-t", "all", "-j", ",".join(map(str, batch))])
            more = parse_squeue_json(data, batch)
            self.json_rows += len(more)
            rows += more
        return rows
