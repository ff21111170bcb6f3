"""`squeue -r -O ...` text -> JobRow (runtime/slurmrest/jobtext.py), the JSON second read of the
rows the text can't settle, and the reader that runs squeue. SAMPLE is real Slurm 24.11.5 output
captured from the harness (a pending array expanded by -r with a split task of its own, a job on
a dependency, a description instead of a reason code, a running job, an admin-held job with a
begin time, a throttled array, a user hold), with the tres-alloc column added after it was
captured, in the form squeue 26.05 prints it (the harness, 2026-12: the allocated TRES of a running
job, the requested of a pending one, `...,billing=1,gres/gpu=2`); JSON is a real
`squeue --json=v0.0.42` reply for the described job, cut to the fields read plus a few, with the
TRES strings slurmrestd gives a pending job (`tres_alloc_str` "", `tres_req_str` set). tests/runtime/slurmrest/test_jobtext_real.py
compares the reader with slurmrestd on live daemons."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from sunk.runtime.slurmrest import StaticToken
from sunk.runtime.slurmrest.jobtext import (
    FORMAT,
    JobRow,
    JobTextError,
    SqueueError,
    SqueueJobs,
    job_row,
    parse_squeue,
    parse_squeue_json,
)
from sunk.runtime.slurmrest.models import Job

SAMPLE = (
    "12\x1fPENDING\x1f11000\x1f1795478187\x1f1795478188\x1f1\x1f0\x1froot\x1fbio\x1fbatch\x1fcpu=1,mem=1G,node=1,billing=1\x1fResources\x1e\n"
    + "8\x1fPENDING\x1f11000\x1f1795478187\x1f1795478188\x1f1\x1f0\x1froot\x1fbio\x1fbatch\x1fcpu=1,mem=1G,node=1,billing=1\x1fResources\x1e\n"
    * 3
    + "3\x1fPENDING\x1f11000\x1f1795478187\x1fN/A\x1f1\x1f0\x1froot\x1fbio\x1fbatch\x1fcpu=1,mem=1G,node=1,billing=1\x1fDependency\x1e\n"
    "2014\x1fPENDING\x1f5000\x1f1795478591\x1f1795478591\x1f1\x1f0\x1froot\x1fphysics\x1fbatch\x1f"
    "cpu=1,mem=4G,node=1,billing=1,gres/gpu=1\x1fReqNodeNotAvail, May be reserved for other job\x1e\n"
    "1\x1fRUNNING\x1f1000\x1f1795478187\x1f1795478187\x1f4\x1f0\x1froot\x1fphysics\x1fbatch\x1fcpu=4,mem=4G,node=1,billing=4\x1fNone\x1e\n"
    "5\x1fPENDING\x1f0\x1f1795478187\x1f1795481787\x1f1\x1f0\x1froot\x1fbio\x1fgpu\x1fcpu=1,mem=4G,node=1,billing=1,gres/gpu=2\x1fJobHeldAdmin\x1e\n"
    + "9\x1fPENDING\x1f5000\x1f1795478187\x1fN/A\x1f2\x1f0\x1froot\x1froot\x1fgpu\x1fcpu=2,mem=8G,node=1,billing=2,gres/gpu=1\x1fJobArrayTaskLimit\x1e\n"
    * 4
    + "4\x1fPENDING\x1f0\x1f1795478187\x1fN/A\x1f1\x1f0\x1froot\x1froot\x1fgpu\x1f(null)\x1fJobHeldUser\x1e\n"
)
EXPECTED = [
    JobRow(12, "PENDING", "batch", "bio", "root", 1, "Resources", 1795478187, 1795478188, False, 0),
    JobRow(8, "PENDING", "batch", "bio", "root", 1, "Resources", 1795478187, 1795478188, False, 0),
    JobRow(3, "PENDING", "batch", "bio", "root", 1, "Dependency", 1795478187, 0, False, 0),
    JobRow(1, "RUNNING", "batch", "physics", "root", 4, "None", 1795478187, 1795478187, False, 0),
    JobRow(5, "PENDING", "gpu", "bio", "root", 1, "JobHeldAdmin", 1795478187, 1795481787, True, 2),
    JobRow(9, "PENDING", "gpu", "root", "root", 2, "JobArrayTaskLimit", 1795478187, 0, False, 1),
    JobRow(4, "PENDING", "gpu", "root", "root", 1, "JobHeldUser", 1795478187, 0, True, 0),
]
JSON = (
    b'{"jobs": [{"job_id": 2014, "job_state": ["PENDING"], "partition": "batch", "account": "physics", '
    b'"user_name": "root", "user_id": 0, "cpus": {"set": true, "infinite": false, "number": 1}, '
    b'"state_reason": "ReqNodeNotAvail", "state_description": "ReqNodeNotAvail, May be reserved for other job", '
    b'"submit_time": {"set": true, "infinite": false, "number": 1795478591}, '
    b'"eligible_time": {"set": true, "infinite": false, "number": 1795478591}, "hold": false, '
    b'"priority": {"set": true, "infinite": false, "number": 5000}, '
    b'"array_job_id": {"set": true, "infinite": false, "number": 0}, "tres_alloc_str": "", '
    b'"tres_req_str": "cpu=1,mem=4G,node=1,billing=1,gres/gpu=1"}], "errors": [], "warnings": []}'
)
DESCRIBED = JobRow(2014, "PENDING", "batch", "physics", "root", 1, "ReqNodeNotAvail", 1795478591, 1795478591, False, 1)


def test_real_output_gives_one_row_per_job_record_and_leaves_descriptions_to_json() -> None:
    rows, unsettled = parse_squeue(SAMPLE)
    assert rows == EXPECTED
    assert unsettled == [2014]  # squeue printed slurmctld's description, not the reason code
    assert parse_squeue("") == ([], [])


def test_the_json_read_of_a_described_job_is_slurmrestds_row() -> None:
    assert parse_squeue_json(JSON, [2014]) == [DESCRIBED]
    assert parse_squeue_json(JSON, [7]) == []  # -j 8 also lists 8's split tasks: only wanted ids are kept


def test_a_row_equals_slurmrestds_job_as_the_exporter_reads_it() -> None:
    job = Job.model_validate(
        {
            "job_id": 5, "job_state": ["PENDING"], "partition": "gpu", "account": "bio", "user_name": "root",
            "cpus": {"set": True, "infinite": False, "number": 1}, "state_reason": "JobHeldAdmin",
            "submit_time": {"set": True, "infinite": False, "number": 1795478187},
            "eligible_time": {"set": True, "infinite": False, "number": 1795481787}, "hold": True,
            "tres_alloc_str": "", "tres_req_str": "cpu=1,mem=4G,node=1,billing=1,gres/gpu=2",
        }
    )  # fmt: skip
    assert job_row(job) == EXPECTED[4]
    for field in ("state", "partition", "account", "cpus", "user_name", "state_reason", "submit_time", "hold", "gpus"):
        assert getattr(EXPECTED[4], field) == getattr(job, field)


@pytest.mark.parametrize(
    ("column", "value", "field", "expected"),
    [
        ("EligibleTime", "N/A", "eligible_time", 0),  # never set: slurmrestd {"set": true, "number": 0}
        ("EligibleTime", "Unknown", "eligible_time", 0xFFFFFFFF),  # 32-bit INFINITE, a number to slurmrestd
        ("SubmitTime", "None", "submit_time", 0xFFFFFFFE),  # NO_VAL
        ("SubmitTime", "-2", "submit_time", None),  # NO_VAL64: unset
        ("SubmitTime", "-1", "submit_time", None),  # INFINITE64: infinite, read as None
        ("NumCPUs", "4294967294", "cpus", None),
        ("NumCPUs", "4294967295", "cpus", None),
        ("PriorityLong", "1", "hold", False),
        ("PriorityLong", "0", "hold", True),
        ("UserName", "0", "user_name", ""),  # squeue prints the uid it can't resolve; slurmrestd ""
        ("UserName", "alice", "user_name", "alice"),
        ("Account", "(null)", "account", ""),  # never set (no accounting, no -A): slurmrestd ""
        ("Partition", "(null)", "partition", ""),
        ("tres-alloc", "cpu=2,mem=8G,node=1,billing=2,gres/gpu=3", "gpus", 3),
        ("tres-alloc", "cpu=2,mem=8G,node=2,billing=2,gres/gpu:h100=4,gres/gpu=4", "gpus", 4),  # typed: counted once
        ("tres-alloc", "cpu=2,mem=2G,node=1,billing=2", "gpus", 0),
        ("tres-alloc", "(null)", "gpus", 0),
    ],
)
def test_values_map_to_slurmrestds(column: str, value: str, field: str, expected: object) -> None:
    columns = FORMAT.replace("\x1e", "\x1f").split(":\x1f,")
    values = {"JobID": "7", "State": "PENDING", "PriorityLong": "9", "SubmitTime": "5", "EligibleTime": "6"}
    values |= {"NumCPUs": "2", "UserId": "0", "UserName": "root", "Account": "a", "Partition": "p", "Reason": "None"}
    values |= {"tres-alloc": "cpu=2,mem=2G,node=1,billing=2"}
    values[column] = value
    text = "\x1f".join(values[c.rstrip(":\x1f")] for c in columns) + "\x1e\n"
    (row,), _ = parse_squeue(text)
    assert getattr(row, field) == expected


def test_a_flag_state_is_read_as_json_and_a_reason_may_hold_the_separators() -> None:
    completing = SAMPLE.replace("1\x1fRUNNING", "1\x1fCOMPLETING")
    assert parse_squeue(completing)[1] == [2014, 1]
    odd = SAMPLE.replace("May be reserved for other job", "a\x1fb\nc")
    assert parse_squeue(odd) == (EXPECTED, [2014])


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (SAMPLE[:-2], "not a record separator"),
        ("slurm_load_jobs error: Unable to contact slurm controller\n", "not a record separator"),
        (SAMPLE.replace("\x1f4\x1f0\x1froot\x1fphysics", "\x1f4\x1froot\x1fphysics"), "11 columns, not 12"),
        (SAMPLE.replace("1\x1fRUNNING\x1f1000", "1\x1fRUNNING\x1fhigh"), "PriorityLong 'high' is not a number"),
        (SAMPLE.replace("\x1f1795478187\x1f4\x1f", "\x1f2026-11-23T23:31:12\x1f4\x1f"), "EligibleTime"),
        (SAMPLE.replace("\x1f4\x1f0\x1f", "\x1f4\x1f\x1f"), "UserId '' is not a number"),
        (SAMPLE.replace("12\x1fPENDING", "x\x1fPENDING"), "JobID 'x' is not a number"),
        (SAMPLE.replace("9\x1fPENDING\x1f5000", "9\x1fPENDING\x1f5001", 1), "printed twice with different"),
    ],
)
def test_output_it_cannot_place_is_refused(text: str, message: str) -> None:
    with pytest.raises(JobTextError, match=message):
        parse_squeue(text)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"not json", "squeue --json"),
        (b'{"jobs": null, "errors": []}', "no jobs list"),
        (b'{"jobs": [], "errors": [{"error_number": 1007, "error": "Protocol authentication error"}]}', "1007"),
        (b'{"jobs": [{"job_id": "x"}]}', "Expected `int`"),
    ],
)
def test_json_it_cannot_place_is_refused(data: bytes, message: str) -> None:
    with pytest.raises(JobTextError, match=message):
        parse_squeue_json(data, [1])


def _script(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "squeue"
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_the_reader_runs_squeue_with_only_the_token_and_the_config(tmp_path: Path) -> None:
    seen, text, json = tmp_path / "seen", tmp_path / "text", tmp_path / "json"
    text.write_text(SAMPLE)
    json.write_bytes(JSON)
    body = f'env > {seen}.$$\necho "$@" >> {seen}.args\ncase "$1" in --json*) cat {json};; *) cat {text};; esac\n'
    squeue = _script(tmp_path, body)
    os.environ["SUNK_LEAK_CHECK"] = "host"
    try:
        reader = SqueueJobs(StaticToken("tok-123"), "/etc/slurm/slurm.conf", command=(str(squeue),))
        assert reader.jobs() == [*EXPECTED, DESCRIBED]
    finally:
        del os.environ["SUNK_LEAK_CHECK"]
    assert (reader.reads, reader.json_rows) == (2, 1)
    args = (tmp_path / "seen.args").read_text().split("\n")[:-1]  # (splitlines would split at \\x1e too)
    assert args == [f"-r -a -h -t all -O {FORMAT}", "--json=v0.0.45 -a -t all -j 2014"]
    for env_file in tmp_path.glob("seen.[0-9]*"):
        env = dict(line.split("=", 1) for line in env_file.read_text().splitlines() if "=" in line)
        assert env["SLURM_JWT"] == "tok-123" and env["SLURM_CONF"] == "/etc/slurm/slurm.conf"
        assert (env["SLURM_TIME_FORMAT"], env["TZ"], env["LANG"]) == ("%s", "UTC", "C")
        assert "SUNK_LEAK_CHECK" not in env  # the host's environment stays out


def test_an_older_squeue_gets_the_newest_version_it_has_and_keeps_it(tmp_path: Path) -> None:
    """24.11's squeue has no data_parser v0.0.45: the reader falls back to v0.0.42 once, then
    asks for it directly."""
    (tmp_path / "text").write_text(SAMPLE)
    (tmp_path / "json").write_bytes(JSON)
    body = (
        f'echo "$@" >> {tmp_path}/args\n'
        'case "$1" in --json=v0.0.45) echo "squeue: error: unknown data_parser v0.0.45" >&2; exit 1;; esac\n'
        f'case "$1" in --json*) cat {tmp_path}/json;; *) cat {tmp_path}/text;; esac\n'
    )
    reader = SqueueJobs(StaticToken("t"), "/x", command=(str(_script(tmp_path, body)),))
    assert reader.jobs() == [*EXPECTED, DESCRIBED]
    assert reader.data_parser == "v0.0.42"
    assert reader.jobs() == [*EXPECTED, DESCRIBED]
    asked = [a.split()[0] for a in (tmp_path / "args").read_text().split("\n")[:-1] if a.startswith("--json")]
    assert asked == ["--json=v0.0.45", "--json=v0.0.42", "--json=v0.0.42"]


def test_many_described_jobs_are_read_as_json_in_batches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sunk.runtime.slurmrest.jobtext.JSON_BATCH", 2)
    described = "".join(
        f"{i}\x1fCONFIGURING\x1f1\x1f5\x1f6\x1f1\x1f0\x1froot\x1fa\x1fp\x1fcpu=1,mem=1G,node=1,billing=1\x1fNone\x1e\n"
        for i in range(1, 6)
    )
    (tmp_path / "text").write_text(described)
    (tmp_path / "json").write_bytes(b'{"jobs": [{"job_id": 1, "job_state": ["RUNNING", "CONFIGURING"]}]}')
    squeue = _script(
        tmp_path,
        f'echo "$@" >> {tmp_path}/args\ncase "$1" in --json*) cat {tmp_path}/json;; *) cat {tmp_path}/text;; esac\n',
    )
    reader = SqueueJobs(StaticToken("t"), "/x", command=(str(squeue),))
    rows = reader.jobs()
    assert [r.job_id for r in rows] == [1] and rows[0].state == "RUNNING"  # jobs gone by the second read: left out
    assert [a.split()[-1] for a in (tmp_path / "args").read_text().split("\n")[1:-1]] == ["1,2", "3,4", "5"]
    assert reader.reads == 4


def test_a_failing_squeue_raises_with_its_last_message_and_never_the_token(tmp_path: Path) -> None:
    squeue = _script(tmp_path, 'echo "slurm_load_jobs error: Protocol authentication error" >&2\nexit 1\n')
    reader = SqueueJobs(StaticToken("tok-secret"), "/x", command=(str(squeue),))
    with pytest.raises(SqueueError, match="exit 1: slurm_load_jobs error: Protocol authentication error") as err:
        reader.jobs()
    assert "tok-secret" not in str(err.value)


def test_a_missing_or_hung_squeue_raises(tmp_path: Path) -> None:
    with pytest.raises(SqueueError, match="FileNotFoundError"):
        SqueueJobs(StaticToken("t"), "/x", command=(str(tmp_path / "none"),)).jobs()
    hung = _script(tmp_path, "exec sleep 30\n")
    with pytest.raises(SqueueError, match="TimeoutExpired"):
        SqueueJobs(StaticToken("t"), "/x", command=(str(hung),), timeout=0.5).jobs()
