"""The controllers' lock (slurmctld-start.sh, state-guard.sh): a slurmctld that no longer answers
may still be saving its state, so an upgrade's state-guard copies StateSaveLocation only once
every slurmctld of the folder has exited. Here on plain folders with a stand-in slurmctld on PATH
(a shell that answers on no port and, told to stop, saves its state two seconds later, as a real
one does after closing its port); real daemons in tests/slurm/test_upgrade_drill_ha.py and the
pods in tests/runtime/local/test_local_ha.py. What the stand-in can't show: slurmctld's own
handling of the descriptor it inherits (the shell holds the lock either way)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import subprocess
import time
from pathlib import Path

from sunk import naming
from sunk.manifests import scripts, upgrade
from tests.support.specs import build_spec
from tests.support.statefiles import free_port, state_file

RWX = {"accessMode": "ReadWriteMany", "storageClass": "nfs-client"}


def _stand_in(tmp_path: Path, state: Path) -> dict[str, str]:
    """PATH with a `slurmctld` that records its arguments, and on SIGTERM waits 2 s, writes the
    state it saves at exit and exits 7 (a status the start script must pass on)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (tmp_path / "saved").write_bytes(state_file(42, b"24.11 jobs, saved at exit"))
    fake = bin_dir / "slurmctld"
    fake.write_text(
        "#!/bin/sh\n"
        f'echo "$@" > {tmp_path}/args\n'
        f"trap 'sleep 2; cp {tmp_path}/saved {state}/job_state; exit 7' TERM\n"
        "while :; do sleep 0.1; done\n"
    )
    fake.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}


def _start(state: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    script = scripts.slurmctld_start(str(state))
    # A session of its own: the stand-in is the shell's child, and _stop ends both.
    return subprocess.Popen(
        ["sh", "-c", script, "slurmctld", "-v"], env=env, text=True, stderr=subprocess.PIPE, start_new_session=True
    )


def _stop(start: subprocess.Popen[str]) -> None:
    """SIGKILL to the start script's session: it and the stand-in (no PID namespace here to take
    the child with its PID 1, as a container's has)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(start.pid, signal.SIGKILL)
    start.wait()


def _locked_by_another(lock: Path) -> bool:
    with lock.open("a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(f, fcntl.LOCK_UN)
        return False


def _until(what: str, check: object, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def test_the_start_script_holds_the_lock_while_slurmctld_runs_and_passes_its_stop_on(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    lock = state / naming.CONTROLLER_LOCK
    start = _start(state, _stand_in(tmp_path, state))
    try:
        _until("slurmctld started with the extra arguments", lambda: (tmp_path / "args").exists())
        assert (tmp_path / "args").read_text() == "-D -v\n"
        assert _locked_by_another(lock)
        start.send_signal(signal.SIGTERM)
        time.sleep(1)
        assert start.poll() is None and _locked_by_another(lock), "ended before slurmctld saved its state"
        assert start.wait(20) == 7
        assert not _locked_by_another(lock)
        assert (state / "job_state").read_bytes() == (tmp_path / "saved").read_bytes()
    finally:
        _stop(start)


def test_a_volume_without_the_lock_file_still_starts_slurmctld_and_says_so(tmp_path: Path) -> None:
    state = tmp_path / "missing" / "state"  # the lock can't be opened
    env = _stand_in(tmp_path, tmp_path)
    start = _start(state, env)
    try:
        _until("slurmctld started", lambda: (tmp_path / "args").exists())
        start.send_signal(signal.SIGTERM)
        assert start.wait(20) == 7
        _, err = start.communicate()
        assert "can't be opened" in err, err
    finally:
        _stop(start)


def test_the_guard_copies_only_once_a_slurmctld_that_stopped_answering_has_saved_and_exited(
    tmp_path: Path,
) -> None:
    """The window CI found: the old slurmctld's port is closed (it answers at no address), but it
    is still saving. The guard waits on the lock, and the copy holds what was saved at exit."""
    state = tmp_path / "state"
    state.mkdir()
    (state / "job_state").write_bytes(state_file(42, b"24.11 jobs"))
    old = _start(state, _stand_in(tmp_path, state))
    try:
        _until("the old slurmctld runs", lambda: (tmp_path / "args").exists())
        old.send_signal(signal.SIGTERM)  # its pod deleted: the port is closed from now on
        spec = build_spec(
            slurm={"version": "26.05", "upgradeFrom": "24.11"}, controller={"replicas": 2, "stateStorage": RWX}
        )
        script = upgrade.state_guard(
            spec, str(tmp_path / "backup"), str(state), peers=[f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"]
        )
        guard = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=60)
        assert guard.returncode == 0, guard.stdout + guard.stderr
        assert "a slurmctld still runs on" in guard.stdout and "every slurmctld on" in guard.stdout, guard.stdout
        assert old.poll() == 7
        copy = tmp_path / "backup" / "statesave-24.11" / "job_state"
        assert copy.read_bytes() == state_file(42, b"24.11 jobs, saved at exit")
    finally:
        _stop(old)


def test_no_slurmctld_starts_while_the_guard_holds_the_lock(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    lock = state / naming.CONTROLLER_LOCK
    with lock.open("a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # a guard copying the state
        start = _start(state, _stand_in(tmp_path, state))
        try:
            time.sleep(2)
            assert not (tmp_path / "args").exists(), "slurmctld started while the state was copied"
            fcntl.flock(held, fcntl.LOCK_UN)
            _until("slurmctld started once the guard was done", lambda: (tmp_path / "args").exists())
        finally:
            _stop(start)
