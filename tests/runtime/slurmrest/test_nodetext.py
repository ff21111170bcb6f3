"""`scontrol show nodes` text -> NodeState (runtime/slurmrest/nodetext.py), and the reader that
runs scontrol. The sample is real Slurm 24.11.5 output (captured from the harness: a drained node
whose reason holds brackets and `Extra=`, a node with a JSON Extra and trailing spaces, a FUTURE
node, a DOWN node); tests/runtime/slurmrest/test_nodetext_real.py compares the reader with
slurmrestd on live daemons."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from sunk.runtime.slurmrest import StaticToken
from sunk.runtime.slurmrest.nodestate import NodeState
from sunk.runtime.slurmrest.nodetext import NodeTextError, ScontrolError, ScontrolNodes, parse_show_nodes

SAMPLE = (
    "NodeName=cpu-1 Arch=x86_64 CoresPerSocket=1 \n   CPUAlloc=0 CPUEfctv=4 CPUTot=4 CPULoad=0.38\n"
    "   AvailableFeatures=cpu\n   ActiveFeatures=cpu\n   Gres=(null)\n"
    "   NodeAddr=127.0.0.1 NodeHostName=vm Port=30159 Version=24.11.5\n"
    "   OS=Linux 6.18.44-fc-v509 #1 SMP PREEMPT_DYNAMIC @0 \n"
    "   RealMemory=4096 AllocMem=0 FreeMem=16594 Sockets=4 Boards=1\n"
    "   State=IDLE+DYNAMIC_NORM ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A\n"
    "   Partitions=batch \n   BootTime=2026-11-23T15:38:19 SlurmdStartTime=2026-11-23T23:31:12\n"
    "   LastBusyTime=2026-11-23T23:31:12 ResumeAfterTime=None\n   CfgTRES=cpu=4,mem=4G,billing=4\n"
    "   AllocTRES=\n   CurrentWatts=0 AveWatts=0\n   \n"
    "   Comment=hello Reason=zz State=IDLE\n"
    '   Extra={"a": "b c"}  \n\n'
    "NodeName=cpu-0 Arch=x86_64 CoresPerSocket=1 \n   CPUAlloc=0 CPUEfctv=4 CPUTot=4 CPULoad=0.38\n"
    "   AvailableFeatures=cpu\n   ActiveFeatures=cpu\n   Gres=(null)\n"
    "   NodeAddr=127.0.0.1 NodeHostName=vm Port=21515 Version=24.11.5\n"
    "   OS=Linux 6.18.44-fc-v509 #1 SMP PREEMPT_DYNAMIC @0 \n"
    "   RealMemory=4096 AllocMem=0 FreeMem=16593 Sockets=4 Boards=1\n"
    "   State=IDLE+DRAIN+DYNAMIC_NORM ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A\n"
    "   Partitions=batch \n   BootTime=2026-11-23T15:38:19 SlurmdStartTime=2026-11-23T23:31:12\n"
    "   LastBusyTime=2026-11-23T23:31:12 ResumeAfterTime=None\n   CfgTRES=cpu=4,mem=4G,billing=4\n"
    "   AllocTRES=\n   CurrentWatts=0 AveWatts=0\n   \n"
    "   Reason=sunk: cordoned [x@y] Extra=q [root@2026-11-23T23:31:12]\n\n"
    "NodeName=cpu-2 CoresPerSocket=1 \n   CPUAlloc=0 CPUEfctv=4 CPUTot=4 CPULoad=0.00\n"
    "   AvailableFeatures=(null)\n   ActiveFeatures=(null)\n   Gres=(null)\n"
    "   NodeAddr=cpu-2 NodeHostName=cpu-2 \n   RealMemory=4096 AllocMem=0 FreeMem=N/A Sockets=4 Boards=1\n"
    "   State=FUTURE+DYNAMIC_NORM ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A\n"
    "   BootTime=None SlurmdStartTime=None\n   LastBusyTime=Unknown ResumeAfterTime=None\n"
    "   CfgTRES=cpu=4,mem=4G,billing=4\n   AllocTRES=\n   CurrentWatts=0 AveWatts=0\n   \n\n"
    "NodeName=cpu-3 CoresPerSocket=1 \n   CPUAlloc=0 CPUEfctv=4 CPUTot=4 CPULoad=0.00\n"
    "   AvailableFeatures=(null)\n   ActiveFeatures=(null)\n   Gres=(null)\n"
    "   NodeAddr=cpu-3 NodeHostName=cpu-3 \n   RealMemory=4096 AllocMem=0 FreeMem=N/A Sockets=4 Boards=1\n"
    "   State=DOWN+DYNAMIC_NORM ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A\n"
    "   BootTime=None SlurmdStartTime=None\n   LastBusyTime=Unknown ResumeAfterTime=None\n"
    "   CfgTRES=cpu=4,mem=4G,billing=4\n   AllocTRES=\n   CurrentWatts=0 AveWatts=0\n   \n"
    "   Reason=gone [root@2026-11-23T23:31:12]\n\n"
)

EXPECTED = [
    NodeState("cpu-1", ("IDLE", "DYNAMIC_NORM"), "", '{"a": "b c"}  '),
    NodeState("cpu-0", ("IDLE", "DRAIN", "DYNAMIC_NORM"), "sunk: cordoned [x@y] Extra=q", ""),
    NodeState("cpu-2", ("FUTURE", "DYNAMIC_NORM"), "", ""),
    NodeState("cpu-3", ("DOWN", "DYNAMIC_NORM"), "gone", ""),
]


def test_real_output_parses_to_what_slurmrestd_reports() -> None:
    # The same four nodes read through slurmrestd at the same moment gave exactly these.
    assert parse_show_nodes(SAMPLE) == EXPECTED
    assert parse_show_nodes(SAMPLE)[1].drain and parse_show_nodes(SAMPLE)[1].base_state == "IDLE"


@pytest.mark.parametrize("text", ["", "No nodes in the system\n"])
def test_no_nodes(text: str) -> None:
    assert parse_show_nodes(text) == []


def test_a_reason_without_a_stamp_is_kept_whole() -> None:
    text = SAMPLE.replace(" [root@2026-11-23T23:31:12]\n\n", "\n\n")
    assert parse_show_nodes(text)[1].reason == "sunk: cordoned [x@y] Extra=q"


def test_the_last_record_without_a_trailing_blank_line() -> None:
    assert parse_show_nodes(SAMPLE.rstrip("\n")) == EXPECTED


@pytest.mark.parametrize(
    ("text", "message"),
    [
        # A comment with a line break: the next line is neither a field line nor a new node.
        (SAMPLE.replace("Comment=hello Reason=zz", "Comment=hello\nReason=zz"), "line 18 is neither"),
        # A line break written to look like a second Extra line.
        (SAMPLE.replace("Comment=hello Reason=zz State=IDLE", "Comment=x\n   Extra=forged"), "appears twice"),
        (SAMPLE.replace("   State=DOWN+DYNAMIC_NORM", "   Status=DOWN"), "3 State lines"),
        (SAMPLE.replace("State=IDLE+DYNAMIC_NORM ", "State= "), "empty State"),
        ("slurm_load_node error: Unable to contact slurm controller\n", "not NodeName="),
        (SAMPLE.replace("\n\nNodeName=cpu-2", "\n\n\nNodeName=cpu-2"), "not NodeName="),
    ],
)
def test_output_it_cannot_place_is_refused(text: str, message: str) -> None:
    with pytest.raises(NodeTextError, match=message):
        parse_show_nodes(text)


def _script(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "scontrol"
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_the_reader_runs_scontrol_with_only_the_token_and_the_config(tmp_path: Path) -> None:
    seen = tmp_path / "seen"
    sample = tmp_path / "sample"
    sample.write_text(SAMPLE)
    scontrol = _script(tmp_path, f'env > {seen}\necho "$@" >> {seen}\ncat {sample}\n')
    os.environ["SUNK_LEAK_CHECK"] = "host"
    try:
        reader = ScontrolNodes(StaticToken("tok-123"), "/etc/slurm/slurm.conf", command=(str(scontrol),))
        assert reader.node_states(future=True) == EXPECTED
    finally:
        del os.environ["SUNK_LEAK_CHECK"]
    lines = seen.read_text().splitlines()
    env = dict(line.split("=", 1) for line in lines[:-1] if "=" in line)
    assert env["SLURM_JWT"] == "tok-123"
    assert env["SLURM_CONF"] == "/etc/slurm/slurm.conf"
    assert "SUNK_LEAK_CHECK" not in env  # the host's environment stays out
    assert lines[-1] == "show nodes --future"
    assert reader.reads == 1


def test_a_failing_scontrol_raises_with_its_last_message_and_never_the_token(tmp_path: Path) -> None:
    scontrol = _script(tmp_path, 'echo "slurm_load_node error: Protocol authentication error" >&2\nexit 1\n')
    reader = ScontrolNodes(StaticToken("tok-secret"), "/x", command=(str(scontrol),))
    with pytest.raises(ScontrolError, match="exit 1: slurm_load_node error: Protocol authentication error") as err:
        reader.node_states()
    assert "tok-secret" not in str(err.value)


def test_a_missing_or_hung_scontrol_raises(tmp_path: Path) -> None:
    with pytest.raises(ScontrolError, match="FileNotFoundError"):
        ScontrolNodes(StaticToken("t"), "/x", command=(str(tmp_path / "none"),)).node_states()
    hung = _script(tmp_path, "exec sleep 30\n")
    with pytest.raises(ScontrolError, match="TimeoutExpired"):
        ScontrolNodes(StaticToken("t"), "/x", command=(str(hung),), timeout=0.5).node_states()
