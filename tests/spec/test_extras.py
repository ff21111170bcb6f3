"""Extra Slurm files, controller prolog/epilog, slurmd arguments and extra node parameters: what is
accepted, how it renders, and every refusal naming its field and what would be valid."""

from __future__ import annotations

from typing import Any

import pytest

from sunk.manifests.config import config_maps, nodeset_files, nodeset_hash, role_files, slurm_projection
from sunk.manifests.nodeset_pod import slurmd_command
from sunk.nodeset_resource import NodeSetResourceSpec
from sunk.render import node_conf, render_slurm_files
from sunk.spec import SpecError
from sunk.spec.cluster import ClusterSpec
from tests.support.specs import build_spec, spec_document

BASE = spec_document(**{"nodesets.cpu.cpus": 8, "nodesets.cpu.memoryMib": 16384})
SCRIPT = "#!/bin/sh\ntrue\n"


def spec(**changes: Any) -> ClusterSpec:
    """BASE with top-level sections replaced; `nodeset={...}` changes fields of NodeSet cpu."""
    nodeset = changes.pop("nodeset", {})
    return build_spec(BASE, {f"nodesets.cpu.{field}": value for field, value in nodeset.items()}, **changes)


def problems(**changes: Any) -> list[str]:
    with pytest.raises(SpecError) as info:
        spec(**changes)
    return info.value.problems


# -- extra files ---------------------------------------------------------------------------------


def test_extra_files_render_beside_slurm_conf_with_a_final_newline() -> None:
    s = spec(extraConfig={"files": {"mpi.conf": "PMIxTimeout=600", "acct_gather.conf": "SysfsInterfaces=ib0\n"}})
    files = render_slurm_files(s)
    assert files["mpi.conf"] == "PMIxTimeout=600\n"
    assert files["acct_gather.conf"] == "SysfsInterfaces=ib0\n"


def test_extra_files_are_mounted_by_controller_login_and_slurmd_but_not_slurmdbd() -> None:
    s = spec(extraConfig={"files": {"mpi.conf": "PMIxTimeout=600\n"}})
    assert "mpi.conf" in role_files(s, "controller")
    assert "mpi.conf" in role_files(s, "login")
    assert "mpi.conf" not in role_files(s, "accounting")
    assert nodeset_files(s, s.nodesets[0])["mpi.conf"] == "mpi.conf"
    maps = {m["metadata"]["name"]: m for m in config_maps(s)}
    assert maps["research-mpi-conf"]["data"] == {"mpi.conf": "PMIxTimeout=600\n"}


def test_an_extra_file_change_rolls_the_slurmd_pods() -> None:
    a = spec(extraConfig={"files": {"mpi.conf": "PMIxTimeout=600\n"}})
    b = spec(extraConfig={"files": {"mpi.conf": "PMIxTimeout=900\n"}})
    plain = spec()
    hashes = {nodeset_hash(s, s.nodesets[0]) for s in (a, b, plain)}
    assert len(hashes) == 3


@pytest.mark.parametrize(
    ("name", "fragment"),
    [
        ("slurm.conf", "sunk renders slurm.conf; set controller.extraSlurmConf instead"),
        ("cgroup.conf", "set cgroup and extraConfig.cgroupConf instead"),
        ("job_submit.lua", "set scripts.jobSubmitLua instead"),
        ("gres.conf", "set nodesets[].gpus and extraConfig.gresConf instead"),
        ("slurm.key", "not a file Slurm 24.11 reads beside slurm.conf; one of: acct_gather.conf, burst_buffer.conf"),
        ("../etc/passwd", "not a file Slurm 24.11 reads"),
    ],
)
def test_extra_files_refuse_what_sunk_renders_and_what_slurm_never_reads(name: str, fragment: str) -> None:
    (problem,) = problems(extraConfig={"files": {name: "x=1\n"}})
    where = f"extraConfig.files.{name}: " if "/" not in name else f"extraConfig.files: {name!r} is "
    assert problem.startswith(where), problem
    assert fragment in problem, problem


def test_extra_files_refuse_a_password_and_control_characters() -> None:
    found = problems(extraConfig={"files": {"acct_gather.conf": "ProfileInfluxDBPass=hunter2\n", "mpi.conf": "a\x00"}})
    text = "\n".join(found)
    assert "extraConfig.files.acct_gather.conf: line 1 sets ProfileInfluxDBPass, a password" in text
    assert "hunter2" not in text  # the error never echoes the secret
    assert "extraConfig.files.mpi.conf: control character" in text


def test_oci_conf_is_either_rendered_or_given() -> None:
    (problem,) = problems(containers={"enabled": True}, extraConfig={"files": {"oci.conf": "RunTimeRun=x\n"}})
    assert problem.startswith("extraConfig.files.oci.conf: containers.enabled renders oci.conf"), problem
    assert (
        render_slurm_files(spec(extraConfig={"files": {"oci.conf": "RunTimeRun=x\n"}}))["oci.conf"] == "RunTimeRun=x\n"
    )


# -- controller prolog and epilog ----------------------------------------------------------------


def test_controller_scripts_are_one_line_each_in_name_order_and_executable_on_the_controller_only() -> None:
    s = spec(scripts={"prologSlurmctld": {"20-b": SCRIPT, "10-a": SCRIPT}, "epilogSlurmctld": {"x": SCRIPT}})
    conf = render_slurm_files(s)["slurm.conf"]
    lines = [line for line in conf.splitlines() if "Slurmctld=" in line]
    assert lines == [
        "PrologSlurmctld=/etc/slurm/prolog-slurmctld.d/10-a",
        "PrologSlurmctld=/etc/slurm/prolog-slurmctld.d/20-b",
        "EpilogSlurmctld=/etc/slurm/epilog-slurmctld.d/x",
    ]
    sources = slurm_projection(s, "controller")["projected"]["sources"]
    items = {i["path"]: i for src in sources for i in src.get("configMap", {}).get("items", [])}
    assert items["prolog-slurmctld.d/10-a"]["mode"] == 0o555
    assert "prolog-slurmctld.d/10-a" not in nodeset_files(s, s.nodesets[0])
    assert "prolog-slurmctld.d/10-a" not in role_files(s, "login")


def test_controller_scripts_need_a_shebang() -> None:
    (problem,) = problems(scripts={"epilogSlurmctld": {"notify": "echo done\n"}})
    assert problem == "scripts.epilogSlurmctld.notify: a script must start with '#!'"


# -- slurmd arguments ----------------------------------------------------------------------------


def _resource(s: ClusterSpec) -> NodeSetResourceSpec:
    data = s.nodesets[0].model_dump(by_alias=True, exclude_unset=True)
    return NodeSetResourceSpec.model_validate(
        {
            **data,
            "clusterName": s.name,
            "slurmdImage": "img",
            "configFiles": {"slurm.conf": "research-slurm-conf"},
            "authSecret": "a",
            "jwtSecret": "j",
        }
    )


def test_slurmd_args_follow_the_ones_sunk_sets() -> None:
    s = spec(nodeset={"slurmdArgs": ["-vv", "--extra", '{"rack":"r7"}', "-M", "-n", "-5", "-L", "/var/log/slurmd.log"]})
    cmd = slurmd_command(_resource(s), "cpu-0")
    assert cmd[:7] == ["slurmd", "-D", "-Z", "-N", "cpu-0", "--conf", node_conf(s.nodesets[0])]
    assert cmd[7:] == ["-vv", "--extra", '{"rack":"r7"}', "-M", "-n", "-5", "-L", "/var/log/slurmd.log"]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            ["--conf", "CPUs=999"],
            "slurmdArgs[0]: '--conf' is not allowed: sunk renders it; add parameters with extraNodeConf",
        ),
        (["--conf=CPUs=999"], "slurmdArgs[0]: '--conf=CPUs=999' is not allowed: sunk renders it"),
        (["-N", "other"], "slurmdArgs[0]: '-N' is not allowed: the node name is the pod's"),
        (["-Nother"], "slurmdArgs[0]: '-Nother' is not allowed: the node name is the pod's"),
        (["-Fgpu"], "slurmdArgs[0]: '-Fgpu' is not allowed: features come from"),
        (["-C"], "slurmdArgs[0]: '-C' is not allowed: it prints the node's configuration and exits"),
        (
            ["-v", "--frobnicate"],
            "slurmdArgs[1]: '--frobnicate' is not a slurmd option sunk passes; allowed: -v..-vvvvv",
        ),
        (["-vvvvvv"], "slurmdArgs[0]: '-vvvvvv' is not a slurmd option sunk passes"),
        (["-n", "40"], "slurmdArgs[0]: -n '40': a nice value from -20 to 19"),
        (["-L", "relative.log"], "slurmdArgs[0]: -L 'relative.log': an absolute log file path"),
        (["--extra"], "slurmdArgs[0]: --extra needs a value after it"),
        (["--extra=a\nb"], "slurmdArgs[0]: --extra 'a\\nb': printable characters"),
    ],
)
def test_slurmd_args_refusals_name_the_word(args: list[str], expected: str) -> None:
    (problem,) = problems(nodeset={"slurmdArgs": args})
    assert problem.startswith(f"nodesets[0].{expected}"), problem


# -- extra node-line parameters ------------------------------------------------------------------


def test_extra_node_conf_is_appended_sorted_to_the_node_line() -> None:
    s = spec(nodeset={"extraNodeConf": {"MemSpecLimit": "2048", "CoreSpecCount": "2", "CpuBind": "core"}})
    assert node_conf(s.nodesets[0]) == (
        "CPUs=8 RealMemory=16384 Feature=cpu CoreSpecCount=2 CpuBind=core MemSpecLimit=2048"
    )


@pytest.mark.parametrize(
    ("conf", "expected"),
    [
        ({"RealMemory": "99999"}, "extraNodeConf.RealMemory: sunk renders it from memoryMib; set that instead"),
        ({"cpus": "64"}, "extraNodeConf.cpus: sunk renders it from cpus"),
        ({"Features": "x"}, "extraNodeConf.Features: sunk renders it from features"),
        ({"Port": "1"}, "extraNodeConf.Port: sunk renders it from the cluster (SlurmdPort)"),
        ({"State": "DRAIN"}, "extraNodeConf.State: sunk renders it from Slurm and the operator"),
        ({"Bogus": "1"}, "extraNodeConf.Bogus: not a node parameter sunk passes; allowed: CoreSpecCount"),
        ({"corespeccount": "1"}, "extraNodeConf.corespeccount: write it CoreSpecCount"),
        ({"CoreSpecCount": "1 RealMemory=1"}, "extraNodeConf.CoreSpecCount: '1 RealMemory=1' is not valid"),
        ({"CpuBind": "everything"}, "extraNodeConf.CpuBind: 'everything' is not valid; expected none|socket"),
        ({"CoreSpecCount": "8"}, "extraNodeConf.CoreSpecCount: 8 cores kept would leave none of the 8 CPUs"),
        ({"MemSpecLimit": "16384"}, "extraNodeConf.MemSpecLimit: 16384 MiB kept would leave none of memoryMib 16384"),
        ({"CpuSpecList": "0,9"}, "extraNodeConf.CpuSpecList: '0,9' names a CPU id beyond the node's 8 CPUs (0-7)"),
        ({"CpuSpecList": "0", "CoreSpecCount": "1"}, "extraNodeConf.CpuSpecList: give CoreSpecCount or CpuSpecList"),
    ],
)
def test_extra_node_conf_refusals_name_the_key(conf: dict[str, str], expected: str) -> None:
    (problem,) = problems(nodeset={"extraNodeConf": conf})
    assert problem.startswith(f"nodesets[0].{expected}"), problem


def test_controller_scripts_and_extra_files_get_readable_config_map_names_that_never_collide() -> None:
    from sunk import naming

    names = {
        path: naming.config_file_map("c", path)
        for path in (
            "prolog-slurmctld.d/00-x.sh",
            "prolog.d/slurmctld-00-x.sh",  # the same slug: only one path may have the plain name
            "epilog-slurmctld.d/00-x.sh",
            "acct_gather.conf",
            "job_container.conf",
            "cli_filter.lua",
            "burst_buffer.conf",
        )
    }
    assert names["prolog-slurmctld.d/00-x.sh"] == "c-prolog-slurmctld-00-x-sh"
    assert names["prolog.d/slurmctld-00-x.sh"].startswith("c-prolog-slurmctld-00-x-sh.")  # hashed
    assert names["epilog-slurmctld.d/00-x.sh"] == "c-epilog-slurmctld-00-x-sh"
    assert names["acct_gather.conf"] == "c-acct-gather-conf"
    assert names["job_container.conf"] == "c-job-container-conf"
    assert names["cli_filter.lua"] == "c-cli-filter-lua"
    assert names["burst_buffer.conf"] == "c-burst-buffer-conf"
    assert len(set(names.values())) == len(names)
