"""The containers' start scripts are files (sunk/manifests/scripts/); `render` fills their input
lines with shell-quoted values, and nothing else."""

from __future__ import annotations

import os
import stat
import subprocess
from importlib import resources
from pathlib import Path

import pytest

from sunk.manifests import scripts
from sunk.manifests.accounting import setup_job
from sunk.manifests.auth import auth_refs
from sunk.render import finalize_slurmdbd_conf, script
from sunk.stackfile import load_stack

FOLDER = Path(str(resources.files("sunk.manifests").joinpath("scripts")))


def test_a_value_missing_or_without_a_placeholder_is_refused() -> None:
    with pytest.raises(ValueError, match="RUN_DIR"):
        scripts.render("slurmdbd-start.sh", SLURM_ETC="/etc/slurm", PASSWORD_FILE="/p")
    with pytest.raises(ValueError, match="EXTRA"):
        scripts.render("accounting-setup-job.sh", EXTRA="x")


def test_a_placeholder_outside_an_input_line_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(script, "source", lambda name: 'dir=@DIR@\ncat "@DIR@/x"\n')
    with pytest.raises(ValueError, match="outside an input line"):
        scripts.render("any.sh", DIR="/d")


def test_every_script_is_plain_sh_and_every_input_is_declared_first() -> None:
    names = sorted(p.name for p in FOLDER.glob("*.sh"))
    assert names == [
        "accounting-setup-job.sh",
        "health-check.sh",
        "login-start.sh",
        "munge-start.sh",
        "reconfigure-watcher.sh",
        "slurmdbd-start.sh",
        "sssd-start.sh",
    ]
    for name in names:
        text = scripts.source(name)
        assert text.startswith("#!/bin/sh\n"), name
        body = [line for line in text.splitlines() if line and not line.startswith("#")]
        inputs = [i for i, line in enumerate(body) if "=@" in line]
        assert inputs == list(range(1, len(inputs) + 1)), f"{name}: inputs right after `set`"


def test_values_stay_one_word_whatever_they_hold(tmp_path: Path) -> None:
    """slurmdbd-start.sh run with paths holding a space, a quote and a `$`."""
    odd = tmp_path / "it's a $dir"
    etc, run = odd / "etc", odd / "run"
    etc.mkdir(parents=True)
    run.mkdir()
    (etc / "slurm.conf").write_text("ClusterName=c\n")
    (etc / "slurmdbd.conf").write_text("DbdHost=x\n")
    (odd / "password").write_text("pw\n")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "slurmdbd"
    fake.write_text('#!/bin/sh\necho "$SLURM_CONF"\n')
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    script = scripts.slurmdbd_start(str(etc), str(odd / "password"), str(run))
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    done = subprocess.run(["/bin/sh", "-c", script], env=env, capture_output=True, text=True, check=True)
    assert done.stdout == f"{run}/slurm.conf\n"
    assert (run / "slurmdbd.conf").read_text() == "DbdHost=x\nStoragePass=pw\n"


def test_the_accounting_setup_job_reads_its_cluster_from_the_environment() -> None:
    spec = load_stack("acme-dev").spec
    container = setup_job(spec, auth_refs(spec))["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env == {"SUNK_CLUSTER": spec.name, "SUNK_QOS_SCRIPT": "/etc/slurm/accounting-setup.sh"}
    assert container["command"] == ["/bin/sh", "-c", scripts.source("accounting-setup-job.sh")]


@pytest.mark.parametrize("password", ["a#b", "ab\\", "a b", 'a"b', "a\tb", ""])
def test_slurmdbd_start_refuses_a_password_slurm_would_read_otherwise(tmp_path: Path, password: str) -> None:
    etc, run = tmp_path / "etc", tmp_path / "run"
    etc.mkdir()
    run.mkdir()
    (etc / "slurm.conf").write_text("ClusterName=c\n")
    (etc / "slurmdbd.conf").write_text("DbdHost=x\n")
    (tmp_path / "password").write_text(password + "\n")
    script = scripts.slurmdbd_start(str(etc), str(tmp_path / "password"), str(run))
    done = subprocess.run(["/bin/sh", "-c", script], capture_output=True, text=True)
    assert done.returncode == 1 and "slurmdbd.conf can't hold as written" in done.stderr
    assert not (run / "slurmdbd.conf").exists()
    with pytest.raises(ValueError, match="can't hold as written"):
        finalize_slurmdbd_conf("x\n", password)
