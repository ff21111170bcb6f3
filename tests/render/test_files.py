"""The other Slurm files, table-driven against literal text."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from sunk.render import (
    ACCOUNTING_SETUP,
    finalize_slurmdbd_conf,
    render_cgroup_conf,
    render_gres_conf,
    render_plugstack_conf,
    render_sacctmgr,
    render_slurm_files,
    render_slurmdbd_conf,
)
from sunk.render.slurm_conf import HEADER
from sunk.spec import ClusterSpec

MakeSpec = Callable[..., ClusterSpec]  # the make_spec fixture of conftest.py
SECRET = {"name": "research-db", "key": "password"}


def body(text: str) -> list[str]:
    """The lines after the header every rendered file starts with."""
    assert text.startswith(HEADER)
    return text.removeprefix(HEADER).splitlines()


# ----- cgroup.conf
@pytest.mark.parametrize(
    ("cgroup", "expected"),
    [
        (
            {},
            [
                "CgroupPlugin=cgroup/v2",
                "ConstrainCores=yes",
                "ConstrainDevices=yes",
                "ConstrainRAMSpace=yes",
                "ConstrainSwapSpace=no",
                "AllowedRAMSpace=100",
                "IgnoreSystemd=yes",
            ],
        ),
        (
            {
                "plugin": "cgroup/v1",
                "constrainDevices": False,
                "constrainSwapSpace": True,
                "allowedRamSpace": 97.5,
                "ignoreSystemd": False,
            },
            [
                "CgroupPlugin=cgroup/v1",
                "ConstrainCores=yes",
                "ConstrainDevices=no",
                "ConstrainRAMSpace=yes",
                "ConstrainSwapSpace=yes",
                "AllowedRAMSpace=97.5",
            ],
        ),
        ({"plugin": "disabled"}, ["CgroupPlugin=disabled"]),
    ],
    ids=["defaults", "v1-tuned", "disabled"],
)
def test_cgroup_conf(make_spec: MakeSpec, cgroup: dict[str, Any], expected: list[str]) -> None:
    assert body(render_cgroup_conf(make_spec(cgroup=cgroup))) == expected


def test_cgroup_conf_extra_lines(make_spec: MakeSpec) -> None:
    spec = make_spec(extraConfig={"cgroupConf": ["MinRAMSpace=100"]})
    assert body(render_cgroup_conf(spec))[-1] == "MinRAMSpace=100"


# ----- gres.conf
@pytest.mark.parametrize(
    ("gpus", "expected"),
    [
        (None, []),
        ({"type": "h100", "count": 8}, ["Name=gpu Type=h100 File=/dev/nvidia[0-7]"]),
        ({"type": "l40s", "count": 1}, ["Name=gpu Type=l40s File=/dev/nvidia0"]),
        (
            {"type": "mi300x", "count": 4, "devicePattern": "/dev/dri_render"},
            ["Name=gpu Type=mi300x File=/dev/dri_render[0-3]"],
        ),
    ],
    ids=["no-gpus", "h100x8", "one-gpu", "device-pattern"],
)
def test_gres_conf(make_spec: MakeSpec, gpus: dict[str, Any] | None, expected: list[str]) -> None:
    ns = {"name": "cpu", "cpus": 4, "memoryMib": 4096, **({"gpus": gpus} if gpus else {})}
    spec = make_spec(nodesets=[ns])
    assert body(render_gres_conf(spec, spec.nodesets[0])) == expected


def test_gres_conf_per_nodeset_files(make_spec: MakeSpec) -> None:
    spec = make_spec(
        nodesets=[
            {"name": "cpu", "cpus": 4, "memoryMib": 4096},
            {"name": "gpu", "cpus": 4, "memoryMib": 4096, "gpus": {"type": "a100", "count": 2}},
        ],
        partitions=[{"name": "all", "nodesets": ["cpu", "gpu"]}],
        extraConfig={"gresConf": ["Name=mps Count=100"]},
    )
    files = render_slurm_files(spec)
    assert body(files["gres.conf"]) == ["Name=mps Count=100"]
    assert body(files["gres-cpu.conf"]) == ["AutoDetect=off", "Name=mps Count=100"]  # 26.05: no GPU probe
    assert body(files["gres-gpu.conf"]) == ["Name=gpu Type=a100 File=/dev/nvidia[0-1]", "Name=mps Count=100"]


# ----- plugstack.conf
@pytest.mark.parametrize(
    ("sections", "expected"),
    [
        ({}, ["include /etc/slurm/plugstack.conf.d/*"]),
        (
            {"pyxis": {"enabled": True}},
            [
                "required /usr/local/lib/sunk/spank/spank_pyxis.so runtime_path=/run/pyxis",
                "include /etc/slurm/plugstack.conf.d/*",
            ],
        ),
        (
            {
                "pyxis": {"enabled": True, "args": ["runtime_path=/tmp/p", "execute_entrypoint=0"]},
                "extraConfig": {"plugstackConf": ["optional /usr/lib/spank_x.so"]},
            },
            [
                "required /usr/local/lib/sunk/spank/spank_pyxis.so runtime_path=/tmp/p execute_entrypoint=0",
                "include /etc/slurm/plugstack.conf.d/*",
                "optional /usr/lib/spank_x.so",
            ],
        ),
        ({"pyxis": {"enabled": False, "args": ["runtime_path=/x"]}}, ["include /etc/slurm/plugstack.conf.d/*"]),
    ],
    ids=["no-pyxis", "pyxis", "pyxis-args-and-extra", "pyxis-off-args-ignored"],
)
def test_plugstack_conf(make_spec: MakeSpec, sections: dict[str, Any], expected: list[str]) -> None:
    assert body(render_plugstack_conf(make_spec(**sections))) == expected


def test_plugstack_conf_names_one_path_for_every_architecture(make_spec: MakeSpec) -> None:
    """The pyxis variant links the plugin into an architecture-neutral folder: no multiarch triplet."""
    arm = {"name": "gb200", "cpus": 144, "memoryMib": 880_000, "architecture": "arm64"}
    spec = make_spec(
        nodesets=[{"name": "cpu", "cpus": 4, "memoryMib": 4096}, arm],
        partitions=[{"name": "all", "nodesets": ["cpu", "gb200"]}],
        pyxis={"enabled": True},
    )
    (line,) = [x for x in body(render_plugstack_conf(spec)) if "pyxis" in x]
    assert line == "required /usr/local/lib/sunk/spank/spank_pyxis.so runtime_path=/run/pyxis"
    assert "linux-gnu" not in line


# ----- prolog, epilog, job_submit.lua
def test_scripts_become_files(make_spec: MakeSpec) -> None:
    lua = "function slurm_job_submit(d, p, u)\n  return slurm.SUCCESS\nend\nfunction slurm_job_modify(d, j, p, u)\n  return slurm.SUCCESS\nend"
    spec = make_spec(
        scripts={
            "prolog": {"10-b.sh": "#!/bin/sh\necho b", "00-a.sh": "#!/bin/sh\necho a\n\n"},
            "epilog": {"99-clean.sh": "#!/bin/bash\nrm -rf /tmp/job\n"},
            "jobSubmitLua": lua,
        }
    )
    files = render_slurm_files(spec)
    assert files["prolog.d/00-a.sh"] == "#!/bin/sh\necho a\n"
    assert files["prolog.d/10-b.sh"] == "#!/bin/sh\necho b\n"
    assert files["epilog.d/99-clean.sh"] == "#!/bin/bash\nrm -rf /tmp/job\n"
    assert files["job_submit.lua"] == lua + "\n"
    assert list(files) == sorted(files)


def test_no_scripts_no_files(make_spec: MakeSpec) -> None:
    files = render_slurm_files(make_spec())
    assert not [f for f in files if f.startswith(("prolog.d/", "epilog.d/")) or f == "job_submit.lua"]


# ----- slurmdbd.conf and the database password
def test_slurmdbd_conf_in_cluster(make_spec: MakeSpec) -> None:
    assert body(render_slurmdbd_conf(make_spec())) == [
        "AuthType=auth/munge",
        "AuthAltTypes=auth/jwt",
        "AuthAltParameters=jwt_key=/etc/slurm/jwt/jwt_hs256.key",
        "DbdHost=localhost",
        "DbdPort=6819",
        "SlurmUser=slurm",
        "PidFile=/run/slurmdbd/slurmdbd.pid",
        "StorageType=accounting_storage/mysql",
        "StorageHost=research-mariadb",
        "StoragePort=3306",
        "StorageUser=slurm",
        "StorageLoc=slurm_acct_db",
        "# StoragePass is appended when slurmdbd starts, from the password Secret.",
    ]


def test_slurmdbd_conf_external_has_no_password(make_spec: MakeSpec) -> None:
    spec = make_spec(
        auth={"type": "slurm"},
        accounting={
            "external": {"host": "mysql.db", "port": 3307, "database": "acct", "user": "su", "passwordSecret": SECRET},
            "extraSlurmdbdConf": ["CommitDelay=1"],
        },
    )
    lines = body(render_slurmdbd_conf(spec))
    assert lines[0] == "AuthType=auth/slurm"
    assert {"StorageHost=mysql.db", "StoragePort=3307", "StorageUser=su", "StorageLoc=acct"} <= set(lines)
    assert lines[-1] == "CommitDelay=1"
    assert not [line for line in lines if line.lower().startswith("storagepass")]
    assert "research-db" not in "\n".join(lines)  # not even the Secret's name


def test_finalize_appends_the_password_last() -> None:
    rendered = "# Rendered\nStorageUser=slurm\n"
    assert finalize_slurmdbd_conf(rendered, "s3cr3t") == "# Rendered\nStorageUser=slurm\nStoragePass=s3cr3t\n"


def test_finalize_refuses_a_multiline_password() -> None:
    with pytest.raises(ValueError, match="one line"):
        finalize_slurmdbd_conf("x\n", "a\nDbdHost=evil")


@pytest.mark.parametrize(
    ("sections", "present", "absent"),
    [
        # Always the setup script: the runtime's user needs its association, and QOS or accounts
        # dropped from the spec are removed by it.
        ({}, ["slurmdbd.conf", ACCOUNTING_SETUP], []),
        ({"qos": [{"name": "low"}]}, ["slurmdbd.conf", ACCOUNTING_SETUP], []),
        (
            {"accounting": {"enabled": False}, "scheduling": {"preemptType": "none"}},
            [],
            ["slurmdbd.conf", ACCOUNTING_SETUP],
        ),
    ],
    ids=["accounting", "accounting-with-qos", "accounting-disabled"],
)
def test_accounting_files(make_spec: MakeSpec, sections: dict[str, Any], present: list[str], absent: list[str]) -> None:
    files = render_slurm_files(make_spec(**sections))
    assert set(present) <= set(files)
    assert not set(absent) & set(files)


# ----- QOS in accounting
NO_LIMITS = [
    *(
        f"{field}=cpu=-1,mem=-1,node=-1,billing=-1"
        for field in ("MaxTRESPerJob", "MaxTRESPerUser", "MaxTRESPerAccount", "GrpTRES")
    ),
    "MaxJobsPerUser=-1",
    "MaxSubmitJobsPerUser=-1",
]
"""A QOS without limits (no GPU NodeSet: gres/gpu untracked): each cleared."""


def test_sacctmgr_commands(make_spec: MakeSpec) -> None:
    spec = make_spec(
        qos=[
            {"name": "low", "priority": 10, "preemptMode": "requeue", "usageFactor": 0.5},
            {"name": "high", "priority": 1000, "preempt": ["low"], "maxWall": "3-00:00:00"},
        ]
    )
    # Every managed field given, unset ones at Slurm's default (so clearing in the spec clears).
    assert render_sacctmgr(spec) == [
        ["modify", "qos", "where", "name=low", "set", "Description=sunk-managed", "Priority=10",
         "PreemptMode=requeue", "MaxWall=-1", "UsageFactor=0.5", "Flags=DenyOnLimit", *NO_LIMITS, "Preempt="],
        ["modify", "qos", "where", "name=high", "set", "Description=sunk-managed", "Priority=1000",
         "PreemptMode=cluster", "MaxWall=3-00:00:00", "UsageFactor=1", "Flags=DenyOnLimit", *NO_LIMITS, "Preempt="],
        ["modify", "qos", "where", "name=high", "set", "Preempt=low"],
        ["modify", "account", "where", "name=root", "set", "QOS+=normal,low,high"],
    ]  # fmt: skip
    script = render_slurm_files(spec)[ACCOUNTING_SETUP]
    assert script.startswith("#!/bin/sh\n") and "\nset -eu\n" in script
    assert "|| true" not in script  # a failure fails the setup Job
    assert "qos_exists low || sacctmgr -i add qos low\n" in script
    assert "sacctmgr -i modify qos where name=high set Preempt=low\n" in script
