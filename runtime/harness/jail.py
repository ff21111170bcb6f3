"""Root filesystems of several images, one private mount namespace holding their mounts, and the
processes run in them.

Each role's image root filesystem (read-only, unpacked once per image hash by
runtime/images/build.py) is mounted as the lower layer of an overlay with a private upper folder,
so instances start in milliseconds and never change the image. A holder process (`unshare --mount
--propagation private sleep`) owns the namespace; every daemon and client enters it with nsenter
and runs `chroot ROOT env -i PATH=...`, so no host SLURM_* variable leaks in and the host's mount
table never sees any of it: the mounts vanish with the holder. From the host, a root is read and
written through `/proc/<holder>/root/...`, which resolves inside the namespace. Every process
started here is tracked by PID; teardown also sweeps any process left in the namespace (job steps
whose slurmd is gone), which by construction were all started by this jail.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO

PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
CLOSE_GRACE = 1.0
"""Seconds daemons get to exit on SIGTERM at teardown before SIGKILL."""
BASE_ENV = {"PATH": PATH, "HOME": "/root", "LANG": "C.UTF-8", "USER": "root"}


def _ns(pid: int) -> str:
    return os.readlink(f"/proc/{pid}/ns/mnt")


def lookup_ids(root: Path, user: str, group: str | None = None) -> tuple[int, int]:
    """uid and gid of `user` (and `group`) in a root's /etc/passwd: they differ from the host's."""
    uid = gid = None
    for line in (root / "etc/passwd").read_text().splitlines():
        fields = line.split(":")
        if fields[0] == user:
            uid, gid = int(fields[2]), int(fields[3])
    if uid is None or gid is None:
        raise KeyError(f"user {user} is not in {root}/etc/passwd")
    if group is not None:
        for line in (root / "etc/group").read_text().splitlines():
            fields = line.split(":")
            if fields[0] == group:
                gid = int(fields[2])
    return uid, gid


class Jail:
    """Processes chrooted into overlays of image root filesystems inside one private mount namespace.

    `lowers` maps a role (slurmctld, slurmd, login, ...) to its image's unpacked root filesystem;
    everything this jail creates lives under `workdir` (uppers, logs, shared folders)."""

    def __init__(
        self, workdir: Path, lowers: Mapping[str, Path], *, namespaces: Sequence[str] = (), hostname: str | None = None
    ) -> None:
        self.workdir = workdir
        self.lowers = dict(lowers)
        self.namespaces = tuple(namespaces)
        """More namespaces the holder owns besides the mount one ("net", "uts", "ipc"): a pod's."""
        self.hostname = hostname
        """Set in the holder's UTS namespace (needs "uts" in `namespaces`)."""
        self.log_dir = workdir / "logs"
        self._holder: subprocess.Popen[bytes] | None = None
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self._logs: dict[str, IO[bytes]] = {}
        self._mounts: dict[str, list[tuple[list[str], str]]] = {}
        """Per role, the mounts made on top of its overlay (arguments, target inside the root), in
        order: what a new image under the same root gets again (replace_lower)."""
        self._role_of: dict[str, str] = {}
        """The role whose root each process (by name) runs in."""

    # -- namespace -------------------------------------------------------------------------
    def open(self) -> None:
        self._holder = subprocess.Popen(
            [
                "unshare",
                "--mount",
                *(f"--{ns}" for ns in self.namespaces),
                "--propagation",
                "private",
                "sleep",
                "infinity",
            ],
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # Ctrl-C in a terminal reaches us, not the holder directly
        )
        # Until unshare has run, /proc/<pid>/ns/mnt is still ours: entering it then would put
        # the mounts into the host's namespace.
        mine = _ns(os.getpid())
        deadline = time.monotonic() + 10
        while _ns(self._holder.pid) == mine:
            if self._holder.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("unshare --mount failed (root and util-linux needed)")
            time.sleep(0.005)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        if self.hostname is not None:
            done = subprocess.run(
                ["nsenter", f"--uts=/proc/{self._holder.pid}/ns/uts", "hostname", self.hostname],
                capture_output=True,
                text=True,
            )
            if done.returncode != 0:
                raise RuntimeError(f"hostname {self.hostname}: {done.stderr.strip()}")
        for role, lower in self.lowers.items():
            self._mount_root(role, lower)

    def _mount_root(self, role: str, lower: Path) -> None:
        base = self.workdir / "roots" / role
        for part in ("upper", "work", "merged"):
            (base / part).mkdir(parents=True, exist_ok=True)
        options = f"lowerdir={lower},upperdir={base / 'upper'},workdir={base / 'work'}"
        self._ns_mount(["-t", "overlay", "-o", options, "overlay"], base / "merged")
        self._ns_mount(["-t", "proc", "proc"], self.real(role) / "proc")
        # Read-only sysfs lets slurmd read the CPU layout.
        self._ns_mount(["-t", "sysfs", "-o", "ro", "sysfs"], self.real(role) / "sys")
        for args, target in self._mounts.get(role, []):
            self._ns_mount(args, self.real(role) / target.lstrip("/"))

    def add_root(self, role: str, lower: Path) -> None:
        """A root for one more image, in the open jail (a pod of another image joining)."""
        if role in self.lowers:
            raise ValueError(f"{role} already has a root")
        self.lowers[role] = lower
        self._mount_root(role, lower)

    def replace_lower(self, role: str, lower: Path) -> None:
        """The role's root on another image, keeping what was written in it (its upper layer:
        state folders, keys) and the mounts made on it: a pod replaced by one of a new image
        with the same volumes. Nothing may run in the root (stop its processes first)."""
        running = [n for n, proc in self.processes.items() if proc.poll() is None and self._role_of.get(n) == role]
        if running:
            raise RuntimeError(f"{role}: stop {', '.join(running)} before replacing its image")
        done = subprocess.run([*self._enter(), "umount", "-R", str(self.real(role))], capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"umount -R {self.real(role)} failed: {done.stderr.strip()}")
        self.lowers[role] = lower
        self._mount_root(role, lower)

    @property
    def holder(self) -> int:
        """The PID owning the namespaces (nsenter --target it)."""
        assert self._holder is not None, "jail not open"
        return self._holder.pid

    @property
    def namespace(self) -> str:
        assert self._holder is not None
        return _ns(self._holder.pid)

    def real(self, role: str) -> Path:
        """The role's root as processes inside the namespace see it (what they chroot into)."""
        return self.workdir / "roots" / role / "merged"

    def root(self, role: str) -> Path:
        """The role's root as this (host) process reads and writes it: through the holder."""
        assert self._holder is not None, "jail not open"
        return Path(f"/proc/{self._holder.pid}/root") / str(self.real(role)).lstrip("/")

    def bind(self, role: str, source: Path, target: str, *, read_only: bool = False) -> None:
        """Mount host folder `source` at `target` inside the role's root (shared between roles
        that bind the same source, as a volume several pods mount)."""
        point = self.root(role) / target.lstrip("/")
        if source.is_dir():
            point.mkdir(parents=True, exist_ok=True)
        else:  # a file onto a file (a subPath or a single config file)
            point.parent.mkdir(parents=True, exist_ok=True)
            if not point.exists():
                point.touch()
        self._role_mount(role, ["--bind", str(source)], target)
        if read_only:
            self._role_mount(role, ["-o", "remount,bind,ro"], target)

    def mount_tmpfs(self, role: str, target: str) -> None:
        """An empty tmpfs at `target` in the role's root (the folder must exist there)."""
        self._role_mount(role, ["-t", "tmpfs", "-o", "mode=0755", "tmpfs"], target)

    def _role_mount(self, role: str, args: list[str], target: str) -> None:
        self._ns_mount(args, self.real(role) / target.lstrip("/"))
        self._mounts.setdefault(role, []).append((args, target))

    def mount_at(self, args: list[str], target: Path) -> None:
        """`mount ARGS TARGET` inside the namespace (TARGET as processes there see it)."""
        self._ns_mount(args, target)

    def makedirs(self, path: Path) -> None:
        """`mkdir -p PATH` inside the namespace: a tmpfs mounted there hides what the host sees."""
        done = subprocess.run([*self._enter(), "mkdir", "-p", str(path)], capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"mkdir {path} failed: {done.stderr.strip()}")

    def _enter(self) -> list[str]:
        assert self._holder is not None, "jail not open"
        return ["nsenter", f"--mount=/proc/{self._holder.pid}/ns/mnt", "--"]

    def _ns_mount(self, args: list[str], target: Path) -> None:
        done = subprocess.run([*self._enter(), "mount", *args, str(target)], capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"mount {' '.join(args)} {target} failed: {done.stderr.strip()}")

    def command(
        self,
        argv: Sequence[str],
        *,
        role: str,
        env: Mapping[str, str] | None = None,
        user: str | None = None,
        cwd: str = "/tmp",
        inherit: bool = False,
        hostname: str | None = None,
        private: Mapping[str, int] | None = None,
    ) -> list[str]:
        """The host command line that runs `argv` inside the role's root with a clean environment
        (`inherit`: with the caller's environment instead, e.g. a secret the caller passes there
        rather than on the command line). `hostname`: what `hostname` says inside, if not the jail's;
        `private`: folders of the root (path -> owner uid) that this process alone sees, empty."""
        private = private or {}
        if role not in self.lowers:
            raise KeyError(f"no {role} root in this jail (roles: {', '.join(self.lowers)})")
        chroot = ["chroot"]
        if user is not None:
            chroot.append(f"--userspec={user}")
        variables = [f"{k}={v}" for k, v in {**BASE_ENV, **(env or {})}.items()]
        clean = [] if inherit else ["-i"]
        inner = [*chroot, str(self.real(role)), "/usr/bin/env", *clean, "-C", cwd, *variables, *argv]
        if hostname is None and not private:
            return [*self._enter(), *inner]
        # A pod of its own beside the role's others: a UTS namespace with `hostname` set and a copy
        # of the jail's mount namespace with fresh folders at `private`, then exec the rest (one
        # PID throughout). A backup slurmctld on this host needs both: the SlurmctldHost name of its
        # pod, and its own /run (slurmctld kills the process named in an existing pid file).
        steps = [f'hostname "{hostname}"'] if hostname is not None else []
        for folder, uid in private.items():
            target = self.real(role) / folder.lstrip("/")
            steps.append(f"mount -t tmpfs -o mode=0755,uid={uid},gid={uid} tmpfs {shlex.quote(str(target))}")
        script = " && ".join([*steps, 'exec "$@"'])
        unshare = ["unshare", "--uts", "--mount", "--propagation", "private", "--"]
        return [*self._enter(), *unshare, "/bin/sh", "-c", script, "sh", *inner]

    def run(
        self,
        argv: Sequence[str],
        *,
        role: str = "login",
        input: str | None = None,
        check: bool = False,
        timeout: float = 120,
        env: Mapping[str, str] | None = None,
        user: str | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """A command to completion; by default a Slurm client on the login root (as users run them)."""
        return subprocess.run(
            self.command(argv, role=role, env=env, user=user),
            input=input,
            capture_output=True,
            text=True,
            check=check,
            timeout=timeout,
        )

    # -- daemons ---------------------------------------------------------------------------
    def run_beside(self, name: str, argv: Sequence[str], *, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """A command in daemon `name`'s root and namespaces (its own hostname and private folders,
        see command()), as a probe in its pod runs."""
        proc = self.processes[name]
        line = self.command(argv, role=self._role_of[name])[len(self._enter()) :]
        enter = ["nsenter", f"--target={proc.pid}", "--mount", "--uts", "--"]
        return subprocess.run([*enter, *line], capture_output=True, text=True, timeout=timeout)

    def log_path(self, name: str) -> Path:
        return self.log_dir / f"{name}.log"

    def spawn(
        self,
        name: str,
        argv: Sequence[str],
        *,
        role: str,
        env: Mapping[str, str] | None = None,
        user: str | None = None,
        hostname: str | None = None,
        private: Mapping[str, int] | None = None,
    ) -> subprocess.Popen[bytes]:
        """Start a long-running daemon (foreground mode) in the role's root; its output goes to
        logs/<name>.log. nsenter, chroot and env all exec, so the PID tracked is the daemon's own."""
        if name in self.processes and self.processes[name].poll() is None:
            raise RuntimeError(f"{name} is already running")
        log = self.log_path(name)
        log.parent.mkdir(parents=True, exist_ok=True)
        handle = log.open("ab")
        self._logs[name] = handle
        proc = subprocess.Popen(
            self.command(argv, role=role, env=env, user=user, cwd="/", hostname=hostname, private=private),
            stdin=subprocess.DEVNULL,
            stdout=handle,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.processes[name] = proc
        self._role_of[name] = role
        return proc

    def log_tail(self, name: str, lines: int = 30) -> str:
        path = self.log_path(name)
        if not path.exists():
            return ""
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])

    def stop(self, name: str, timeout: float = 10) -> None:
        """SIGTERM the daemon by PID, SIGKILL after `timeout`, and reap it."""
        proc = self.processes.pop(name, None)
        if proc is not None:
            _terminate(proc, timeout)
        handle = self._logs.pop(name, None)
        if handle is not None:
            handle.close()

    def kill(self, name: str) -> None:
        """SIGKILL the daemon by PID (no shutdown work at all) and reap it."""
        proc = self.processes.pop(name, None)
        if proc is not None:
            proc.kill()
            proc.wait()
        handle = self._logs.pop(name, None)
        if handle is not None:
            handle.close()

    def close(self) -> None:
        """Stop every daemon (reverse start order), sweep leftovers, end the namespace (and with
        it every mount)."""
        # SIGTERM all at once, then SIGKILL what is left after a short grace: the roots are deleted
        # next, so nothing needs a clean shutdown, and slurmd with a job ending waits ~10 s.
        for proc in self.processes.values():
            if proc.poll() is None:
                proc.terminate()
        deadline = time.monotonic() + CLOSE_GRACE
        for name in reversed(list(self.processes)):
            self.stop(name, timeout=max(0.0, deadline - time.monotonic()))
        if self._holder is not None and self._holder.poll() is None:
            self._sweep()
            _terminate(self._holder, 5)
        self._holder = None

    def _sweep(self) -> None:
        """Kill, by PID, processes still in this jail's private namespace (e.g. slurmstepd of a job
        whose slurmd was stopped). Only this jail ever enters that namespace."""
        assert self._holder is not None
        ns, holder = self.namespace, self._holder.pid
        for _ in range(50):
            left = [pid for pid in _pids() if pid != holder and _same_ns(pid, ns)]
            if not left:
                return
            for pid in left:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.1)

    def remove(self) -> None:
        """Delete the work folder (uppers, logs, shared folders), after checking nothing of the
        host's is mounted under it."""
        top = str(self.workdir.resolve())
        with open("/proc/self/mountinfo") as info:
            mounted = [line.split()[4] for line in info if line.split()[4].startswith(top + "/")]
        if mounted:
            raise RuntimeError(f"refusing to delete {top}: still mounted {mounted}")
        shutil.rmtree(top, ignore_errors=True)


def _pids() -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def _same_ns(pid: int, ns: str) -> bool:
    try:
        return _ns(pid) == ns
    except OSError:
        return False


def _terminate(proc: subprocess.Popen[bytes], timeout: float) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
