"""Starts one container process: run by the node agent on the host's Python, inside the pod's
namespaces (nsenter and unshare put it there), it turns itself into the container's process and
execs the container's command.

In order: read the launch file (root only; it holds the environment, Secret values included, so
they never appear on a command line), make the root filesystem read-only in this container's own
mount namespace if asked, chroot into it, change to the working directory, drop the capabilities
the container does not have from the bounding set, set no_new_privs when privilege escalation is
off, take the user, group and supplementary groups, and exec. A root container keeps exactly its
capabilities (CapEff is the bounding set after exec); a non-root one has none in effect, as with
containerd (no ambient capabilities).

Not modelled: seccomp profiles, AppArmor and SELinux labels, user namespaces.
"""

from __future__ import annotations

import ctypes
import fcntl
import json
import os
import sys
import termios

PR_CAPBSET_DROP = 24
PR_SET_NO_NEW_PRIVS = 38
MS_RDONLY, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 1, 32, 4096, 16384, 1 << 18
CLONE_NEWNS = 0x00020000
CAPABILITIES = [
    "CHOWN", "DAC_OVERRIDE", "DAC_READ_SEARCH", "FOWNER", "FSETID", "KILL", "SETGID", "SETUID", "SETPCAP",
    "LINUX_IMMUTABLE", "NET_BIND_SERVICE", "NET_BROADCAST", "NET_ADMIN", "NET_RAW", "IPC_LOCK", "IPC_OWNER",
    "SYS_MODULE", "SYS_RAWIO", "SYS_CHROOT", "SYS_PTRACE", "SYS_PACCT", "SYS_ADMIN", "SYS_BOOT", "SYS_NICE",
    "SYS_RESOURCE", "SYS_TIME", "SYS_TTY_CONFIG", "MKNOD", "LEASE", "AUDIT_WRITE", "AUDIT_CONTROL", "SETFCAP",
    "MAC_OVERRIDE", "MAC_ADMIN", "SYSLOG", "WAKE_ALARM", "BLOCK_SUSPEND", "AUDIT_READ", "PERFMON", "BPF",
    "CHECKPOINT_RESTORE",
]  # fmt: skip
"""Linux capabilities by number (capability.h), without the CAP_ prefix."""


def _fail(message: str) -> None:
    sys.stderr.write(f"sunk local: {message}\n")
    raise SystemExit(128)


def _terminal_inside(libc: ctypes.CDLL, root: str) -> None:
    """The terminal's device at its own path in the container's /dev (ttyname finds it there, as
    under a runtime's devpts), bound in a mount namespace of this process alone."""
    device = os.ttyname(0)
    if libc.unshare(CLONE_NEWNS) != 0 or libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None) != 0:
        return
    target = root + device
    os.makedirs(os.path.dirname(target), exist_ok=True)
    with open(target, "a"):
        pass
    libc.mount(device.encode(), target.encode(), None, MS_BIND, None)


def main(argv: list[str]) -> None:
    with open(argv[1]) as handle:
        spec = json.load(handle)
    if len(argv) > 2:  # an exec: another command in the same container
        spec["argv"] = argv[2:]
    libc = ctypes.CDLL(None, use_errno=True)
    root = spec["root"]
    if os.environ.get("SUNK_LOCAL_TTY") and os.isatty(0):  # `kubectl exec -it`: its terminal controls it
        os.setsid()
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)
        spec["env"].setdefault("TERM", "xterm")
        _terminal_inside(libc, root)
    if spec.get("readOnlyRoot") and libc.mount(None, root.encode(), None, MS_REMOUNT | MS_BIND | MS_RDONLY, None) != 0:
        _fail(f"read-only root: {os.strerror(ctypes.get_errno())}")
    with open("/proc/sys/kernel/cap_last_cap") as handle:
        last = int(handle.read())
    os.chroot(root)
    try:
        os.chdir(spec.get("cwd") or "/")
    except OSError as err:
        _fail(f"workingDir {spec.get('cwd')}: {err.strerror}")
    keep = set(spec["capabilities"])
    for number in range(last + 1):
        name = CAPABILITIES[number] if number < len(CAPABILITIES) else str(number)
        if name not in keep and libc.prctl(PR_CAPBSET_DROP, number, 0, 0, 0) != 0:
            _fail(f"dropping CAP_{name}: {os.strerror(ctypes.get_errno())}")
    if spec.get("noNewPrivs") and libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        _fail("no_new_privs refused")
    os.setgroups(spec["groups"])
    os.setresgid(spec["gid"], spec["gid"], spec["gid"])
    os.setresuid(spec["uid"], spec["uid"], spec["uid"])
    os.umask(0o022)
    env = spec["env"]
    command = spec["argv"]
    try:
        os.execvpe(command[0], command, env)
    except OSError as err:
        sys.stderr.write(f'exec: "{command[0]}": {err.strerror}\n')
        raise SystemExit(127) from None


if __name__ == "__main__":
    main(sys.argv)
