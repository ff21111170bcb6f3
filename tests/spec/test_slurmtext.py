"""Lines smuggled into Slurm files and secrets spelled past a check: every Slurm file is written by
sunk.spec.slurmtext.conf_file, whose checks read a line as Slurm's parser does, and the spec's
verbatim lines are refused at load by the same functions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sunk.render import render_slurm_files
from sunk.spec import SpecError, load_spec
from sunk.spec.slurmtext import (
    OVERRIDABLE,
    RECORDS,
    RENDERED,
    SlurmTextError,
    conf_file,
    line_problem,
    read_keys,
    secret_keys,
)
from tests.support.specs import build_spec, spec_document

BASE = spec_document(
    nodesets=[{"name": "gpu", "cpus": 8, "memoryMib": 8192, "gpus": {"type": "h100", "count": 2}}],
    **{"partitions.0.nodesets": ["gpu"]},
)
"""MINIMAL with one GPU NodeSet instead of the CPU one."""
GOLDEN = Path(__file__).parents[1] / "golden" / "slurm"


def _problems(**sections: Any) -> list[str]:
    """Problems of BASE with `sections` set; `a__b=v` sets b under a (a keyword can't hold a dot)."""
    with pytest.raises(SpecError) as info:
        build_spec(BASE, {path.replace("__", "."): value for path, value in sections.items()})
    return info.value.problems


SMUGGLED = {
    # A trailing backslash (then blanks, which Slurm skips) joins sunk's next line to the user's.
    "slurmdbd.conf continuation": ("accounting__extraSlurmdbdConf", ["DebugLevel=info\\"], "ends with a backslash"),
    "slurm.conf continuation": ("controller__extraSlurmConf", ["MessageTimeout=30 \\  "], "ends with a backslash"),
    "cgroup.conf continuation": ("extraConfig__cgroupConf", ["# note \\"], "ends with a backslash"),
    "next line": ("controller__extraSlurmConf", ["NEL=1\x85PreemptType=preempt/none"], "control character U+0085"),
    "line separator": ("controller__extraSlurmConf", ["A=1\u2028B=2"], "control character U+2028"),
    "paragraph separator": ("extraConfig__topologyConf", ["A=1\u2029B=2"], "control character U+2029"),
    "CR in gres.conf": ("extraConfig__gresConf", ["Name=mps Count=1\rAutoDetect=off"], "control character U+000D"),
    "NUL in gres.conf": ("extraConfig__gresConf", ["Name=mps\x00 Count=1"], "control character U+0000"),
    "CR in plugstack.conf": ("extraConfig__plugstackConf", ["optional x.so\rrequired y.so"], "plugstackConf[0]"),
    "NUL in plugstack.conf": ("extraConfig__plugstackConf", ["optional x.so\x00"], "plugstackConf[0]"),
    "backslash in plugstack.conf": ("extraConfig__plugstackConf", ["optional x.so \\"], "plugstackConf[0]"),
    "re-set ConstrainDevices": ("extraConfig__cgroupConf", ["ConstrainDevices=no"], "ConstrainDevices is rendered"),
    "undo enforcement": ("controller__extraSlurmConf", ["AccountingStorageEnforce=none"], "is rendered by sunk"),
    "re-set, other case": ("controller__extraSlurmConf", ["proctracktype=proctrack/linuxproc"], "is rendered"),
    "re-set, escaped": ("controller__extraSlurmConf", ["Proctrack\\Type=proctrack/linuxproc"], "is rendered"),
    "include": ("controller__extraSlurmConf", ["Include /etc/slurm/other.conf"], "not one configuration line"),
    "include as key": ("controller__extraSlurmConf", ["include=/x"], "include is rendered"),
    "partition record": ("controller__extraSlurmConf", ["PartitionName=batch Nodes=ALL"], "PartitionName is rendered"),
    # Slurm's parser refuses a second key on a line that starts no record (fatal to every daemon).
    "second key, slurm.conf": ("controller__extraSlurmConf", ["KillWait=30 EnforcePartLimits=NO"], "no record"),
    "second key, cgroup.conf": ("extraConfig__cgroupConf", ["MaxRAMPercent=90 ConstrainDevices=no"], "no record"),
    "password, escaped key": ("controller__extraSlurmConf", ["Accounting\\StoragePass=x"], "holds a password"),
    "password, second word": ("accounting__extraSlurmdbdConf", ["DebugLevel=info StoragePass=x"], "holds a password"),
    "password, as a value": ("controller__extraSlurmConf", ["ConstrainDevices= StoragePass=x"], "holds a password"),
    "password, lower case": ("controller__extraSlurmConf", ["jobcomppass=x"], "holds a password"),
    "comment mid-line": ("controller__extraSlurmConf", ["MessageTimeout=30 # x"], "'#' starts a comment"),
    "comment in a word": ("partitions__0__extra", ["OverSubscribe=NO#"], "'#' starts a comment"),
    "NUL in a word": ("partitions__0__extra", ["OverSubscribe=NO\x00"], "control character U+0000"),
    "backslash ends a word": ("scheduling__schedulerParameters", ["bf_interval=30\\"], "ends with a backslash"),
    "NEL in a pyxis argument": ("pyxis__args", ["runtime_path=/run\x85x"], "control character U+0085"),
}


@pytest.mark.parametrize("case", sorted(SMUGGLED))
def test_smuggled_lines_are_refused_at_load_naming_the_field(case: str) -> None:
    where, lines, expected = SMUGGLED[case]
    if where == "partitions__0__extra":
        data = {"partitions": [{**BASE["partitions"][0], "extra": lines}]}
        problems = _problems(**data)
    else:
        problems = _problems(**{where: lines})
    field = where.replace("__0__", "[0].").replace("__", ".")
    assert any(expected in p for p in problems), problems
    assert all(p.startswith(field) for p in problems), (field, problems)


def test_tuning_defaults_may_be_replaced_and_new_keys_added() -> None:
    spec = load_spec(
        {
            **BASE,
            "controller": {"extraSlurmConf": ["InactiveLimit=120", "# site tuning", "MessageTimeout=30"]},
            "extraConfig": {"gresConf": ["Name=mps Count=100"], "cgroupConf": ["MaxRAMPercent=90"]},
        }
    )
    files = render_slurm_files(spec)
    assert files["slurm.conf"].endswith(
        "# controller.extraSlurmConf\nInactiveLimit=120\n# site tuning\nMessageTimeout=30\n"
    )
    assert files["cgroup.conf"].endswith("MaxRAMPercent=90\n")


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("Foo=1\nStorage\\Pass=x\n", [(2, "StoragePass")]),
        ("Foo=1 Accounting\\\nStoragePass=x\n", [(1, "AccountingStoragePass")]),
        ("Foo=1 \\\n  \\\nJobCompPass=x\n", [(1, "JobCompPass")]),
        ("# StoragePass=x\nA=1 # JobCompPass=y\n", []),
        ("A=\\#StoragePass=x\n", [(1, "StoragePass")]),
    ],
)
def test_secret_keys_are_read_as_slurm_reads_them(body: str, expected: list[tuple[int, str]]) -> None:
    assert secret_keys(body) == expected


def test_a_password_in_an_extra_file_split_by_a_continuation_is_refused() -> None:
    problems = _problems(extraConfig__files={"acct_gather.conf": "ProfileInfluxDBUser=u Profile\\\nInfluxDBPass=x\n"})
    assert any("files.acct_gather.conf: line 1 sets ProfileInfluxDBPass, a password" in p for p in problems), problems


def test_the_writer_refuses_what_validation_missed() -> None:
    with pytest.raises(SlurmTextError, match=r"slurm.conf: rendered line 2 .*ends with a backslash"):
        conf_file("# header", ["ClusterName=x", "Partition=a\\", "EnforcePartLimits=ALL"], file="slurm.conf")
    with pytest.raises(SlurmTextError, match="U\\+2028"):
        conf_file("# header", ["ClusterName=x\u2028AuthType=auth/none"], file="slurm.conf")
    with pytest.raises(SlurmTextError, match=r"cgroup\.conf: verbatim line 'ConstrainCores=no'"):
        conf_file("# header", ["ConstrainCores=yes"], ["ConstrainCores=no"], file="cgroup.conf")
    # A key sunk renders in this file is refused even when this spec didn't render it.
    assert line_problem("IgnoreSystemd=yes", "cgroup.conf") is not None


def test_read_keys_follows_the_slurm_parser() -> None:
    assert read_keys('A=1  b = 2 C="x y" D\\E=3') == ["A", "b", "C", "DE"]
    assert read_keys("# comment") == []
    assert read_keys("A=1 stray") is None


@pytest.mark.parametrize("stack", sorted(p.name for p in GOLDEN.iterdir()))
def test_every_global_key_sunk_renders_is_one_a_verbatim_line_may_not_set(stack: str) -> None:
    """RENDERED is what keeps a verbatim line from re-setting a key, whatever this spec renders:
    every key of every shipped stack's files must be in it (or start a record, or be a tuning
    default a line may replace)."""
    for name, file in (
        ("slurm.conf", "slurm.conf"),
        ("cgroup.conf", "cgroup.conf"),
        ("slurmdbd.conf", "slurmdbd.conf"),
    ):
        path = GOLDEN / stack / name
        if not path.exists():
            continue
        for line in path.read_text().splitlines():
            keys = read_keys(line)
            if not keys or line.startswith("#"):
                continue
            key = keys[0].lower()
            assert key in RENDERED[file] | OVERRIDABLE.get(file, frozenset()) | RECORDS, (stack, name, line)


NUMBERS = {
    "20-digit partition time": (
        "partitions",
        [{"name": "batch", "nodesets": ["gpu"], "maxTime": "9" * 20}],
        "68 years",
    ),
    "21-digit partition time": (
        "partitions",
        [{"name": "batch", "nodesets": ["gpu"], "maxTime": "9" * 21}],
        "at most 20",
    ),
    "time beyond an int": ("partitions", [{"name": "batch", "nodesets": ["gpu"], "maxTime": "99999999"}], "68 years"),
    "QOS wall beyond an int": ("qos", [{"name": "long", "maxWall": "30000-00:00:00"}], "68 years"),
    "PreemptExemptTime": ("scheduling", {"preemptExemptTime": "99999999999"}, "68 years"),
    "block base beyond 16 bits": (
        "topology",
        {"plugin": "block", "labelKeys": ["nvidia.com/gpu.clique"], "blockSizes": [70000]},
        "Slurm holds at most 65533",
    ),
    "block size beyond 32 bits": (
        "topology",
        {"plugin": "block", "labelKeys": ["nvidia.com/gpu.clique"], "blockSizes": [18, 10**30]},
        "less than or equal to 4294967293",
    ),
    "400-digit quantity": ("controller", {"resources": {"limits": {"memory": "9" * 400}}}, "at most 64"),
    "quantity beyond 64 bits": ("controller", {"resources": {"limits": {"memory": "99999999999Ei"}}}, "64-bit"),
    "5000-digit integer": ("partitions", [{"name": "batch", "nodesets": ["gpu"], "defMemPerCpu": 10**5000}], "less"),
    "QOS priority at NO_VAL": (
        "qos",
        [{"name": "high", "priority": 4_294_967_294}],
        "less than or equal to 4294967293",
    ),
    "DefCpuPerGPU beyond 16 bits": (
        "partitions",
        [{"name": "batch", "nodesets": ["gpu"], "defCpuPerGpu": 70000}],
        "less than or equal to 65533",
    ),
    "TmpDisk at NO_VAL": (
        "nodesets",
        [{"name": "gpu", "cpus": 8, "memoryMib": 8192, "tmpDiskMib": 4_294_967_294}],
        "less than or equal to 4294967293",
    ),
    "registry port": ("images", {"registry": "registry.example.com:99999999/hpc"}, "is not a port (1-65535)"),
    "QOS named where": ("qos", [{"name": "where"}], "sacctmgr as its keyword 'where'"),
    "account named set": ("accounts", [{"name": "set"}], "sacctmgr as its keyword 'set'"),
    "account named as a prefix of an option": ("accounts", [{"name": "withd"}], "keyword 'withdeleted'"),
    "user named where": ("accounts", [{"name": "lab", "users": ["where"]}], "keyword 'where'"),
    "toleration seconds without NoExecute": (
        "controller",
        {"tolerations": [{"key": "a", "operator": "Exists", "effect": "NoSchedule", "tolerationSeconds": 5}]},
        "only with effect NoExecute",
    ),
    "toleration seconds 2**63": (
        "controller",
        {"tolerations": [{"key": "a", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 2**63}]},
        "less than or equal to",
    ),
}


@pytest.mark.parametrize("case", sorted(NUMBERS))
def test_numbers_and_names_slurm_or_kubernetes_would_misread_are_refused(case: str) -> None:
    where, value, expected = NUMBERS[case]
    problems = _problems(**{where: value})
    assert any(expected in p for p in problems), problems
    assert all(p.startswith(where) for p in problems), problems


def test_partition_names_are_not_sacctmgr_names() -> None:
    spec = load_spec({**BASE, "partitions": [{"name": "all", "nodesets": ["gpu"]}]})
    assert "PartitionName=all " in render_slurm_files(spec)["slurm.conf"]


def test_the_longest_times_slurm_holds_still_validate() -> None:
    spec = load_spec(
        {
            **BASE,
            "partitions": [{"name": "batch", "nodesets": ["gpu"], "maxTime": "24855-03:14:07"}],
            "qos": [{"name": "q"}],
        }
    )
    assert spec.partitions[0].max_time == "24855-03:14:07"


LUA_OK = "function slurm_job_submit(j, p, u)\n  return slurm.SUCCESS\nend\nslurm_job_modify = function(j, d, p, u) return 0 end\n"


@pytest.mark.parametrize(
    ("lua", "missing"),
    [
        ("-- function slurm_job_submit(j)\n-- function slurm_job_modify(j)\nreturn 0\n", "slurm_job_submit"),
        ("--[[\nfunction slurm_job_submit(j) end\n]]\nfunction slurm_job_modify(j) end\n", "slurm_job_submit"),
        ("--[==[ ]] function slurm_job_submit(j) end ]==]\nfunction slurm_job_modify(j) end\n", "slurm_job_submit"),
        ('x = "function slurm_job_submit(j)"\nfunction slurm_job_modify(j) end\n', "slurm_job_submit"),
        ("x = [[\nfunction slurm_job_submit(j)]]\nfunction slurm_job_modify(j) end\n", "slurm_job_submit"),
        ("local function slurm_job_submit(j) end\nfunction slurm_job_modify(j) end\n", "slurm_job_submit"),
        ("function slurm_job_submit(j) end\nfunction my.slurm_job_modify(j) end\n", "slurm_job_modify"),
    ],
)
def test_job_submit_lua_must_define_its_functions_in_code(lua: str, missing: str) -> None:
    problems = _problems(scripts={"jobSubmitLua": lua})
    assert [p for p in problems if missing in p] == [
        f"scripts.jobSubmitLua: must define function {missing}(...) (in code, not a comment or string; "
        "global, not local)"
    ], problems


def test_job_submit_lua_defined_as_statement_or_assignment_is_accepted() -> None:
    assert load_spec({**BASE, "scripts": {"jobSubmitLua": LUA_OK}}).scripts.job_submit_lua == LUA_OK


@pytest.mark.parametrize("key", ["-bad.example/leaf", "a..b/leaf", "Upper.example/leaf", "a_b.example/leaf"])
def test_topology_label_key_prefix_must_be_a_dns_subdomain(key: str) -> None:
    problems = _problems(topology={"plugin": "tree", "labelKeys": [key]})
    assert any(p.startswith("topology.labelKeys[0]") and "prefix a DNS subdomain" in p for p in problems), problems


def test_cgroup_disabled_renders_plugins_that_need_no_cgroup() -> None:
    # CPU nodes only: with GPUs, a disabled plugin is refused (jobs would reach every GPU).
    cpu = {
        "nodesets": [{"name": "cpu", "cpus": 8, "memoryMib": 8192}],
        "partitions": [{"name": "batch", "nodesets": ["cpu"], "default": True}],
    }
    spec = load_spec({**BASE, **cpu, "cgroup": {"plugin": "disabled"}})
    conf = render_slurm_files(spec)["slurm.conf"]
    assert "ProctrackType=proctrack/linuxproc\n" in conf and "TaskPlugin=task/affinity\n" in conf
    assert "JobAcctGatherType=jobacct_gather/linux\n" in conf and "cgroup" not in conf.replace("cgroup.conf", "")


def test_operator_in_the_tenants_namespace_is_refused() -> None:
    from sunk.stackfile import parse_config

    with pytest.raises(SpecError) as info:
        parse_config({"sunk:cluster": BASE, "sunk:operator": {"namespace": "acme-research"}}, "stack")
    assert any(
        p.startswith("sunk:operator.namespace: 'acme-research' is also the cluster's") for p in info.value.problems
    )
