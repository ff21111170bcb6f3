"""The harness's off-cluster overrides: pure, and limited to the directives that must differ."""

from __future__ import annotations

from pathlib import Path

import pytest
from sunk.runtime.harness import SimNode, default_nodes
from sunk.runtime.harness.layout import write_node_conf
from sunk.runtime.harness.overrides import (
    MARKER,
    LocalPorts,
    directive,
    gres_device_files,
    local_cgroup_conf,
    local_files,
    local_plugstack_conf,
    local_slurm_conf,
    local_slurmdbd_conf,
    set_directives,
)

from sunk.render import render_slurm_files
from sunk.stackfile import list_stacks, load_stack
from tests.support.stacks import FIXTURE_STACKS

PORTS = LocalPorts(slurmctld=21001, slurmd=21002, slurmdbd=21003, mariadb=21004, slurmrestd=21005)

# Every directive the harness may change, and nothing else (the point: boot the rendered bytes).
ALLOWED = {
    "slurm.conf": {
        "slurmctldhost",
        "slurmctldport",
        "slurmdport",
        "slurmdspooldir",
        "slurmdpidfile",
        "proctracktype",
        "taskplugin",
        "jobacctgathertype",
        "slurmdparameters",
        "logtimeformat",
        "accountingstoragehost",
        "accountingstorageport",
    },
    "slurmdbd.conf": {"storagehost", "storageport", "dbdport"},
    "cgroup.conf": {"cgroupplugin"},
}


def _directives(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#") and "=" in line and " " not in line:
            key, _, value = line.partition("=")
            out[key.lower()] = value
    return out


def test_set_directives_replaces_in_place_and_appends_missing() -> None:
    text = "# head\nClusterName=x\nproctracktype=proctrack/cgroup\nPartitionName=p Nodes=a State=UP\n"
    out = set_directives(text, {"ProctrackType": "proctrack/linuxproc", "SlurmdParameters": "config_overrides"})
    assert out.splitlines() == [
        "# head",
        "ClusterName=x",
        "ProctrackType=proctrack/linuxproc",
        "PartitionName=p Nodes=a State=UP",
        MARKER,
        "SlurmdParameters=config_overrides",
    ]


def test_set_directives_removes_keys_mapped_to_empty() -> None:
    assert set_directives("A=1\nB=2\n", {"b": ""}) == "A=1\n"


def test_record_lines_are_never_taken_for_directives() -> None:
    # `NodeSet=cpu Feature=cpu` starts with a key but names a record; it must survive untouched.
    text = "NodeSet=cpu Feature=cpu\n"
    assert set_directives(text, {"NodeSet": "gpu"}) == text + f"{MARKER}\nNodeSet=gpu\n"
    assert directive(text, "NodeSet") is None


@pytest.mark.parametrize("stack", list_stacks(FIXTURE_STACKS))
def test_only_allowed_directives_change(stack: str) -> None:
    spec = load_stack(stack, FIXTURE_STACKS).spec
    rendered = render_slurm_files(spec, [])
    booted = local_files(rendered, host="vm", ports=PORTS, accounting=spec.accounting.enabled, exists=lambda _: True)
    assert set(booted) == set(rendered)
    for rel, text in rendered.items():
        before, after = _directives(text), _directives(booted[rel])
        changed = {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}
        assert changed <= ALLOWED.get(rel, set()), f"{stack} {rel}: unexpected overrides {changed - ALLOWED[rel]}"


def test_slurm_conf_points_at_this_host_and_free_ports() -> None:
    spec = load_stack("acme-dev", FIXTURE_STACKS).spec
    out = _directives(local_slurm_conf(render_slurm_files(spec)["slurm.conf"], host="vm", ports=PORTS, accounting=True))
    assert out["slurmctldhost"] == "vm(127.0.0.1)"
    assert (out["slurmctldport"], out["slurmdport"]) == ("21001", "21002")
    assert (out["accountingstoragehost"], out["accountingstorageport"]) == ("127.0.0.1", "21003")
    assert out["proctracktype"] == "proctrack/linuxproc"
    assert out["taskplugin"] == "task/affinity"
    assert out["jobacctgathertype"] == "jobacct_gather/linux"
    assert out["slurmdparameters"] == "config_overrides"
    assert out["logtimeformat"] == "iso8601_ms,format_stderr"  # the daemons log to stderr (-D)
    assert "%n" in out["slurmdspooldir"] and "%n" in out["slurmdpidfile"]


def test_existing_slurmd_parameters_are_kept() -> None:
    out = local_slurm_conf("SlurmdParameters=l3cache_as_socket\n", host="h", ports=PORTS, accounting=False)
    assert directive(out, "SlurmdParameters") == "l3cache_as_socket,config_overrides"


def test_without_accounting_slurmdbd_is_not_contacted() -> None:
    spec = load_stack("acme-dev", FIXTURE_STACKS).spec
    rendered = render_slurm_files(spec)
    booted = local_files(rendered, host="vm", ports=PORTS, accounting=False, exists=lambda _: True)
    conf = _directives(booted["slurm.conf"])
    assert conf["accountingstoragetype"] == "accounting_storage/none"
    assert "accountingstoragehost" not in conf
    assert "slurmdbd.conf" not in booted and "accounting-setup.sh" not in booted


def test_slurmdbd_conf_uses_the_local_mariadb_and_keeps_no_password() -> None:
    spec = load_stack("acme-dev", FIXTURE_STACKS).spec
    out = local_slurmdbd_conf(render_slurm_files(spec)["slurmdbd.conf"], ports=PORTS)
    d = _directives(out)
    assert (d["storagehost"], d["storageport"], d["dbdport"]) == ("127.0.0.1", "21004", "21003")
    assert "storagepass" not in d


def test_cgroup_plugin_disabled_rest_kept() -> None:
    out = local_cgroup_conf("CgroupPlugin=cgroup/v2\nConstrainCores=yes\n")
    assert out == "CgroupPlugin=disabled\nConstrainCores=yes\n"


def test_plugstack_drops_only_missing_plugins() -> None:
    text = "required /x/spank_pyxis.so a=b\noptional /y/present.so\ninclude /etc/slurm/plugstack.conf.d/*\n"
    out = local_plugstack_conf(text, exists=lambda p: p == "/y/present.so").splitlines()
    assert out[0].startswith("# dropped by the local harness (/x/spank_pyxis.so")
    assert out[1:] == ["optional /y/present.so", "include /etc/slurm/plugstack.conf.d/*"]


def test_gres_device_files_expand_ranges_and_skip_comments() -> None:
    text = "# File=/dev/ignored0\nName=gpu Type=h100 File=/dev/nvidia[0-1]\nName=gpu Type=a File=/dev/nvidia1\n"
    assert gres_device_files(text) == ["/dev/nvidia0", "/dev/nvidia1"]
    assert gres_device_files("Name=gpu Count=2\n") == []


def test_default_nodes_cap_replicas_and_carry_topology_labels() -> None:
    spec = load_stack("acme-dev", FIXTURE_STACKS).spec
    nodes = default_nodes(spec)
    assert [(n.name, n.nodeset) for n in nodes] == [
        ("cpu-0", "cpu"),
        ("cpu-1", "cpu"),
        ("gpu-0", "gpu"),
        ("gpu-1", "gpu"),
    ]
    keys = spec.topology.label_keys
    assert all(set(n.labels) == set(keys) for n in nodes)
    leaves = {n.labels[keys[-1]] for n in nodes}
    assert len(leaves) == 2  # one leaf per NodeSet, under one spine
    assert len({n.labels[keys[0]] for n in nodes}) == 1


def test_node_conf_dir_gets_its_nodesets_gres_and_no_db_password(tmp_path: Path) -> None:
    files = {
        "slurm.conf": "a\n",
        "gres.conf": "none\n",
        "gres-gpu.conf": "Name=gpu\n",
        "slurmdbd.conf": "StoragePass=x\n",
        "prolog.d/a.sh": "#!/bin/sh\n",
    }
    conf = write_node_conf(tmp_path, tmp_path / "etc", SimNode("gpu-0", "gpu"), files)
    folder = tmp_path / conf.lstrip("/")
    assert folder.name == "slurm.conf"
    assert (folder.parent / "gres.conf").read_text() == "Name=gpu\n"
    assert not (folder.parent / "slurmdbd.conf").exists()
    assert not (folder.parent / "prolog.d").exists()
