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
from sunk.manifests.controller import statefulset
from sunk.render import finalize_slurmdbd_conf, script
from sunk.stackfile import load_stack
from tests.support.stacks import FIXTURE_STACKS

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
        "accounting-db.sh",
        "accounting-setup-job.sh",
        "db-guard.sh",
        "health-check.sh",
        "login-start.sh",
        "munge-start.sh",
        "primary-mark.sh",
        "primary-probe.sh",
        "reconfigure-watcher.sh",
        "slurmctld-start.sh",
        "slurmdbd-start.sh",
        "sssd-start.sh",
        "state-guard.sh",
        "state-restore.sh",
        "state-snapshot.sh",
        "wait-qos.sh",
        "wait-release.sh",
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
    spec = load_stack("acme-dev", FIXTURE_STACKS).spec
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


def _wait_qos(tmp_path: Path, sacctmgr: str, *, state: bool = False, timeout: float = 5) -> tuple[int | None, str]:
    """wait-qos.sh for QOS `high low` with `sacctmgr` as the fake's body; (exit code or None if
    still waiting at `timeout`, output)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    fake = bin_dir / "sacctmgr"
    fake.write_text(f"#!/bin/sh\n{sacctmgr}\n")
    fake.chmod(0o755)
    (tmp_path / "state").mkdir(exist_ok=True)
    if state:
        (tmp_path / "state" / "assoc_mgr_state").write_text("")
    script = scripts.wait_qos(["high", "low"], state=str(tmp_path / "state"), period=0.1)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    try:
        done = subprocess.run(["/bin/sh", "-c", script], env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as waiting:
        out = waiting.stdout or b""
        return None, out.decode() if isinstance(out, bytes) else out
    return done.returncode, done.stdout


def test_slurmctld_waits_for_every_qos_its_partitions_name(tmp_path: Path) -> None:
    assert _wait_qos(tmp_path, "printf 'normal\\nhigh\\nlow\\n'") == (0, "every QOS the partitions name exists\n")
    code, out = _wait_qos(tmp_path, "printf 'normal\\nhigh\\n'", timeout=1)
    assert code is None and "waiting for QOS low (the accounting-setup Job creates them)" in out
    # A QOS whose name only contains a wanted one does not count.
    code, out = _wait_qos(tmp_path, "printf 'highest\\nlow\\n'", timeout=1)
    assert code is None and "waiting for QOS high (" in out


def test_a_restart_with_saved_state_does_not_wait_for_an_unreachable_slurmdbd(tmp_path: Path) -> None:
    code, out = _wait_qos(tmp_path, "exit 1", timeout=1)
    assert code is None and "waiting for slurmdbd" in out  # first start: nothing saved yet
    assert _wait_qos(tmp_path, "exit 1", state=True) == (
        0,
        "slurmdbd unreachable: slurmctld starts from the QOS it saved\n",
    )


def test_the_controller_waits_for_qos_only_where_partitions_name_some() -> None:
    spec = load_stack("acme-dev", FIXTURE_STACKS).spec
    assert scripts.partition_qos(spec) == ["high", "low", "normal"]
    init = {c["name"]: c for c in statefulset(spec, auth_refs(spec))["spec"]["template"]["spec"]["initContainers"]}
    assert list(init) == ["munge", "state-guard", "wait-qos"]
    wait = init["wait-qos"]
    assert "qos='high low normal'" in wait["command"][-1]
    assert {m["mountPath"]: m.get("readOnly", False) for m in wait["volumeMounts"]}["/var/spool/slurmctld"] is True
    open_spec = spec.model_validate(
        {
            **spec.model_dump(by_alias=True, exclude_unset=True),
            "partitions": [
                {**p.model_dump(by_alias=True, exclude_unset=True), "allowQos": []} for p in spec.partitions
            ],
        }
    )
    names = [
        c["name"] for c in statefulset(open_spec, auth_refs(open_spec))["spec"]["template"]["spec"]["initContainers"]
    ]
    assert "wait-qos" not in names
