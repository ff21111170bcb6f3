"""The off-cluster differences are one short list, repeated in the docs' local cluster page word for word."""

from __future__ import annotations

from pathlib import Path

import yaml
from sunk.runtime.local.offcluster import DIFFERENCES, override_render

PAGE = Path(__file__).resolve().parents[3] / "docs" / "concepts" / "local-cluster.md"


def test_the_docs_list_every_off_cluster_difference() -> None:
    readme = " ".join(PAGE.read_text().split())
    for difference in DIFFERENCES:
        assert difference.why
        assert " ".join(difference.what.split()) in readme


def test_the_render_overrides_are_the_listed_ones(tmp_path: Path) -> None:
    conf = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "c"},
        "data": {
            "slurm.conf": "ClusterName=x\nProctrackType=proctrack/cgroup\nTaskPlugin=task/cgroup,task/affinity\n"
            "JobAcctGatherType=jobacct_gather/cgroup\n",
            "cgroup.conf": "CgroupPlugin=cgroup/v2\n",
        },
    }
    placeholder = "-----BEGIN OPENSSH PRIVATE KEY-----\noffline placeholder for x-host-key-rsa, not a key\n-----END OPENSSH PRIVATE KEY-----\n"
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
              "stringData": {"ssh_host_rsa_key": placeholder, "other": "kept"}}  # fmt: skip
    script = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "sh"}, "data": {"run.sh": "echo cgroup/v2"}}
    for name, obj in (("04-configmap-c.yaml", conf), ("04-secret-s.yaml", secret), ("04-configmap-sh.yaml", script)):
        (tmp_path / name).write_text(yaml.safe_dump(obj))
    changed = override_render(tmp_path, keygen=lambda kind: f"new {kind} key\n")
    assert changed == ["04-configmap-c.yaml", "04-secret-s.yaml"]
    data = yaml.safe_load((tmp_path / "04-configmap-c.yaml").read_text())["data"]
    assert "ProctrackType=proctrack/linuxproc" in data["slurm.conf"] and "ClusterName=x" in data["slurm.conf"]
    assert "TaskPlugin=task/affinity\n" in data["slurm.conf"] and "jobacct_gather/linux" in data["slurm.conf"]
    assert "CgroupPlugin=disabled" in data["cgroup.conf"]
    assert "SlurmdParameters=config_overrides" in data["slurm.conf"]
    keys = yaml.safe_load((tmp_path / "04-secret-s.yaml").read_text())["stringData"]
    assert keys == {"ssh_host_rsa_key": "new rsa key\n", "other": "kept"}
