"""A pod's sandbox, as a container runtime makes it before any of the pod's containers starts, and
how a container is entered into it.

- the holder process owning the pod's mount, network, UTS (hostname) and IPC namespaces
  (runtime/harness/jail.py), with an eth0 on the cluster's bridge (net.py);
- one overlay per container over its image's unpacked root filesystem (images.py), with a minimal
  /dev (the Node's fake GPU device files among it, as a device plugin gives them), /etc/hosts,
  /etc/hostname and /etc/resolv.conf bound in;
- the pod's volumes as host folders (volumes.py): ConfigMap, Secret, projected (service account
  tokens from the API server's issuer, renewed before they expire: tokens.py), downwardAPI, emptyDir (a tmpfs for medium Memory), claims
  and hostPath, bound at their mount points resolved inside each root (`in_root`), and refreshed
  when their sources change;
- the launch file of each container (what container.py decides: argv, env, user, groups,
  capabilities) that enter.py reads, and the argv that runs a command in a running container.

PodSandbox is the half of the pod runner (podrunner.py) that owns these; it has no life of its own.

Not modelled: image pulls (images are built locally), CSI and other volume kinds, mount
propagation, volume ownership changes beyond fsGroup, a pod's shared PID namespace, the kubelet's
projected token rotation (a token lives as long as its pod).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import os
import re
import shutil
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from ..harness.jail import Jail
from . import container as spec_of
from . import net, tokens, volumes
from .apitypes import ApiError, Obj, Store
from .events import Recorder
from .images import Images, Unpacked
from .tokens import Issuer, Token

SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
DEVICES = ("null", "zero", "full", "random", "urandom", "tty")
AUTOMOUNT_SECONDS = 3607
"""The lifetime of the token mounted where the pod declares no volume for it (the ServiceAccount
admission adds a kube-api-access volume to every pod that mounts its token; this is what it asks)."""


class MountFailed(Exception):
    """A volume that can't be set up yet (its ConfigMap, Secret, key or claim missing): the pod
    waits in ContainerCreating and the kubelet reports FailedMount, as this message says."""


class NodeAgent(Protocol):
    """What a pod's sandbox and runner ask of the node agent that holds them (agent.py)."""

    @property
    def store(self) -> Store: ...
    @property
    def workdir(self) -> Path: ...
    @property
    def network(self) -> net.Network: ...
    @property
    def images(self) -> Images: ...
    @property
    def cluster_env(self) -> dict[str, str]: ...
    @property
    def ca(self) -> Path: ...
    @property
    def issuer(self) -> Issuer: ...
    @property
    def threads(self) -> concurrent.futures.ThreadPoolExecutor: ...
    @property
    def recorder(self) -> Recorder: ...

    def give_devices(self, pod: Obj) -> dict[str, list[str]]: ...

    def hosts(self, namespace: str) -> list[tuple[str, list[str]]]: ...

    def release(self, runner: PodSandbox, keep_address: bool = False) -> None: ...


@dataclass
class Running:
    """One container of a pod: its spec and what happened to it so far."""

    spec: Obj
    kind: str
    """"init", "sidecar" or "main"."""
    restarts: int = 0
    state: Obj = field(default_factory=lambda: {"waiting": {"reason": "PodInitializing"}})
    last: Obj = field(default_factory=dict)
    started: bool = False
    ready: bool = False
    pid: int | None = None
    """The container's first process, as the host sees it."""
    proc: asyncio.subprocess.Process | None = None
    done: bool = False
    """An init container that exited 0."""
    image: Unpacked | None = None

    @property
    def name(self) -> str:
        return str(self.spec["name"])


def in_root(root: Path, target: str, limit: int = 40) -> str:
    """`target` inside a container's root with every symlink on the way resolved inside that root
    (an absolute link starts again from the root, `..` stops at it), as a container runtime
    resolves a mount point: Debian's /var/run is a link to /run, and the host's /run must never be
    what a volume is mounted on."""
    parts = [p for p in target.split("/") if p and p != "."]
    done: list[str] = []
    hops = 0
    while parts:
        part = parts.pop(0)
        if part == "..":
            if done:
                done.pop()
            continue
        candidate = root.joinpath(*done, part)
        if candidate.is_symlink():
            hops += 1
            if hops > limit:
                raise spec_of.ConfigError(f"mount point {target}: too many levels of symbolic links")
            link = os.readlink(candidate)
            if link.startswith("/"):
                done = []
            parts = [p for p in link.split("/") if p and p != "."] + parts
            continue
        done.append(part)
    return "/" + "/".join(done)


class PodSandbox:
    """The namespaces, root filesystems, volumes and mounts of one pod (the state PodRunner sets)."""

    agent: NodeAgent
    pod: Obj
    uid: str
    namespace: str
    name: str
    index: int
    ip: str
    folder: Path
    containers: dict[str, Running]
    detached: bool
    jail: Jail | None
    sandbox: bool
    volume_sources: dict[str, Obj]
    devices: dict[str, list[str]]
    """Container name -> the Node's (fake) GPU device files bound into its /dev."""
    tokens: dict[tuple[str | None, int], Token]
    """(audience, expirationSeconds) -> the pod's current token for it."""

    def _lookup(self, kind: str) -> Callable[[str, str], Mapping[str, bytes] | None]:
        res = self.agent.store.resource(f"v1/{kind}")

        def find(namespace: str, name: str) -> Mapping[str, bytes] | None:
            obj = self.agent.store.find(res, namespace, name)
            if obj is None:
                return None
            return spec_of.decoded(obj) if kind == "secrets" else spec_of.configmap_bytes(obj)

        return find

    def _text_lookup(self, kind: str) -> spec_of.Lookup:
        find = self._lookup(kind)

        def text(namespace: str, name: str) -> Mapping[str, str] | None:
            data = find(namespace, name)
            return None if data is None else {k: v.decode(errors="replace") for k, v in data.items()}

        return text

    @property
    def fs_group(self) -> int | None:
        group = ((self.pod.get("spec") or {}).get("securityContext") or {}).get("fsGroup")
        return None if group is None else int(group)

    def _volumes(self) -> None:
        """Host folders for every volume (files written, claims bound)."""
        spec = self.pod.get("spec") or {}
        base = self.folder / "volumes"
        for volume in spec.get("volumes") or []:
            try:
                self._volume(base / volume["name"], volume)
            except (spec_of.ConfigError, ApiError) as err:  # the kubelet's FailedMount, naming the volume
                reason = err.message if isinstance(err, ApiError) else str(err)
                raise MountFailed(f'MountVolume.SetUp failed for volume "{volume["name"]}" : {reason}') from None
        if self._automount():
            files = {
                "token": (self._token(None, AUTOMOUNT_SECONDS).encode(), 0o644),
                "ca.crt": (self.agent.ca.read_bytes(), 0o644),
                "namespace": (self.namespace.encode(), 0o644),
            }
            volumes.write_atomic(base / "..serviceaccount", files, self.fs_group)

    def _volume(self, folder: Path, volume: Obj) -> None:
        files = spec_of.volume_files(self.pod, volume, self._lookup("configmaps"), self._lookup("secrets"))
        if files is not None:
            files = self._with_token(volume, files)
            volumes.write_atomic(folder, files, self.fs_group)
            self.volume_sources[volume["name"]] = volume
        elif "emptyDir" in volume:
            volumes.empty_dir(folder, self.fs_group)
        elif "persistentVolumeClaim" in volume:
            claim = volume["persistentVolumeClaim"]["claimName"]
            pvc = self.agent.store.find(self.agent.store.resource("v1/persistentvolumeclaims"), self.namespace, claim)
            if pvc is None:
                raise ApiError(404, "NotFound", f'persistentvolumeclaim "{claim}" not found')
            volumes.claim_ownership(volumes.pvc_dir(self.agent.workdir, self.namespace, claim), self.fs_group)

    def _with_token(self, volume: Obj, files: dict[str, spec_of.File]) -> dict[str, spec_of.File]:
        for source in (volume.get("projected") or {}).get("sources") or []:
            if "serviceAccountToken" in source:
                wanted = source["serviceAccountToken"]
                path = wanted.get("path", "token")
                seconds = int(wanted.get("expirationSeconds") or tokens.DEFAULT_SECONDS)
                files[path] = (self._token(wanted.get("audience") or None, seconds).encode(), files[path][1])
        return files

    def _token(self, audience: str | None, seconds: int) -> str:
        """The pod's token for `audience` and lifetime, a new one when the current is due (tokens.py)."""
        issuer = self.agent.issuer
        held = self.tokens.get((audience, seconds))
        if held is None or tokens.due(held, issuer.now()):
            account = (self.pod.get("spec") or {}).get("serviceAccountName") or "default"
            held = self.tokens[(audience, seconds)] = issuer.issue(self.pod, account, audience, seconds)
        return held.value

    def _automount(self) -> bool:
        spec = self.pod.get("spec") or {}
        if spec.get("automountServiceAccountToken") is False:
            return False
        mounts = [m for c in self.containers.values() for m in c.spec.get("volumeMounts") or []]
        return not any(m.get("mountPath") == SERVICE_ACCOUNT_DIR for m in mounts)

    def _sandbox(self) -> None:
        """Namespaces, network, root filesystems and mounts (blocking: runs in a thread)."""
        spec = self.pod.get("spec") or {}
        hostname = spec.get("hostname") or self.name
        lowers = {name: r.image.rootfs for name, r in self.containers.items() if r.image is not None}
        (self.folder / "logs").mkdir(parents=True, exist_ok=True)
        self.jail = Jail(self.folder / "sandbox", lowers, namespaces=("net", "uts", "ipc"), hostname=hostname[:63])
        self.jail.open()
        # A cluster process killed with SIGKILL can't stop this holder: `sunk local down` finds it here.
        (self.folder / "holder.pid").write_text(str(self.jail.holder))
        net.run(net.pod_up(self.agent.network, self.index, self.jail.holder))
        etc = self.folder / "etc"
        etc.mkdir(exist_ok=True)
        (etc / "hostname").write_text(hostname + "\n")
        search = f"{self.namespace}.svc.cluster.local svc.cluster.local cluster.local"
        (etc / "resolv.conf").write_text(f"search {search}\nnameserver {self.agent.network.gateway}\noptions ndots:5\n")
        self.write_hosts()
        self.devices = self.agent.give_devices(self.pod)
        for name in self.containers:
            self._mount_container(name, etc)

    def _mount_container(self, name: str, etc: Path) -> None:
        assert self.jail is not None
        jail, real = self.jail, self.jail.real(name)
        dev = jail.root(name) / "dev"
        dev.mkdir(exist_ok=True)
        jail.mount_at(["-t", "tmpfs", "-o", "mode=0755,nosuid", "tmpfs"], real / "dev")
        for device in DEVICES:
            (jail.root(name) / "dev" / device).touch()
            jail.mount_at(["--bind", f"/dev/{device}"], real / "dev" / device)
        for link, target in (
            ("fd", "/proc/self/fd"),
            ("stdin", "/proc/self/fd/0"),
            ("stdout", "/proc/self/fd/1"),
            ("stderr", "/proc/self/fd/2"),
        ):
            (jail.root(name) / "dev" / link).symlink_to(target)
        for device in self.devices.get(name, []):  # the Node's GPUs: fakes, as the harness's (/dev/null)
            inside = jail.root(name) / device.lstrip("/")
            inside.parent.mkdir(parents=True, exist_ok=True)
            inside.touch()
            jail.mount_at(["--bind", "/dev/null"], real / device.lstrip("/"))
        (jail.root(name) / "dev" / "shm").mkdir()
        jail.mount_at(["-t", "tmpfs", "-o", "mode=1777,nosuid,nodev,size=64m", "tmpfs"], real / "dev" / "shm")
        for file in ("hosts", "hostname", "resolv.conf"):
            jail.bind(name, etc / file, in_root(jail.root(name), f"/etc/{file}"))
        mounts = sorted(self.containers[name].spec.get("volumeMounts") or [], key=lambda m: m["mountPath"].count("/"))
        if self._automount():
            mounts.append({"name": "..serviceaccount", "mountPath": SERVICE_ACCOUNT_DIR, "readOnly": True})
        vols = {v["name"]: v for v in (self.pod.get("spec") or {}).get("volumes") or []}
        for mount in mounts:
            source = self._source(vols.get(mount["name"]), mount["name"])
            if mount.get("subPath"):
                source = source / mount["subPath"]
                if source.is_symlink():  # a ConfigMap key: bind the file it names now (no updates)
                    source = source.resolve()
                if not source.exists():  # made where the container sees it (a Memory emptyDir is a tmpfs there)
                    jail.makedirs(source)
            target = in_root(jail.root(name), mount["mountPath"])
            jail.bind(name, source, target, read_only=bool(mount.get("readOnly")))

    def _source(self, volume: Obj | None, name: str) -> Path:
        if name == "..serviceaccount":
            return self.folder / "volumes" / name
        if volume is None:
            raise spec_of.ConfigError(f"volume {name} is mounted but not declared")
        if "persistentVolumeClaim" in volume:
            return volumes.pvc_dir(self.agent.workdir, self.namespace, volume["persistentVolumeClaim"]["claimName"])
        if "hostPath" in volume:
            path = Path(volume["hostPath"]["path"])
            if volume["hostPath"].get("type") in ("DirectoryOrCreate",) and not path.exists():
                path.mkdir(parents=True)
            return path
        if "emptyDir" in volume and (volume["emptyDir"] or {}).get("medium") == "Memory":
            folder = self.folder / "volumes" / name
            mounted = self.folder / "volumes" / f"{name}.tmpfs-mounted"
            if not mounted.exists():
                assert self.jail is not None
                size = (volume["emptyDir"] or {}).get("sizeLimit")
                options = "mode=0777" if self.fs_group is None else f"mode=2777,gid={self.fs_group}"
                if size:
                    options += f",size={int(spec_of.quantity(str(size)))}"
                self.jail.mount_at(["-t", "tmpfs", "-o", options, "tmpfs"], folder)
                mounted.touch()
            return folder
        return self.folder / "volumes" / name

    def write_hosts(self) -> None:
        spec = self.pod.get("spec") or {}
        hostname = spec.get("hostname") or self.name
        lines = [
            "# Kubernetes-managed hosts file (the local cluster's).",
            "127.0.0.1\tlocalhost",
            "::1\tlocalhost ip6-localhost ip6-loopback",
        ]
        own = [hostname]
        if spec.get("subdomain"):
            own.insert(0, f"{hostname}.{spec['subdomain']}.{self.namespace}.svc.cluster.local")
        lines.append(f"{self.ip}\t{' '.join(own)}")
        for address, names in self.agent.hosts(self.namespace):
            lines.append(f"{address}\t{' '.join(names)}")
        text = "\n".join(lines) + "\n"
        path = self.folder / "etc" / "hosts"
        if not path.exists() or path.read_text() != text:
            with path.open("r+" if path.exists() else "w") as handle:  # in place: it is bound into the roots
                handle.seek(0)
                handle.write(text)
                handle.truncate()

    def refresh(self) -> None:
        if not self.sandbox or self.jail is None:
            return
        self.write_hosts()  # names stand in for cluster DNS, which lives on without the kubelet
        if self.detached:  # volume contents are the kubelet's to refresh
            return
        base = self.folder / "volumes"
        for name, volume in self.volume_sources.items():
            with contextlib.suppress(spec_of.ConfigError):
                files = spec_of.volume_files(self.pod, volume, self._lookup("configmaps"), self._lookup("secrets"))
                if files is not None:
                    volumes.write_atomic(base / name, self._with_token(volume, files), self.fs_group)

    # -- entering a container ----------------------------------------------------------------
    def _launch_file(self, running: Running) -> Path:
        assert running.image is not None and self.jail is not None
        current = self.agent.store.find(self.agent.store.resource("v1/pods"), self.namespace, self.name) or self.pod
        current.setdefault("status", {})["podIP"] = self.ip
        current["status"]["hostIP"] = self.agent.network.gateway
        launch = spec_of.launch(
            current,
            running.spec,
            running.image.image,
            self._text_lookup("configmaps"),
            self._text_lookup("secrets"),
            self.agent.cluster_env,
        )
        caps = launch.capabilities
        if caps == (spec_of.ALL_CAPABILITIES,):
            from .enter import CAPABILITIES

            caps = tuple(CAPABILITIES)
        data = {
            "root": str(self.jail.real(running.name)),
            "argv": list(launch.argv),
            "env": dict(launch.env) | self._device_env(running.name),
            "uid": launch.uid,
            "gid": launch.gid,
            "groups": list(launch.groups),
            "capabilities": list(caps),
            "noNewPrivs": launch.no_new_privs,
            "readOnlyRoot": launch.read_only_root,
            "cwd": launch.cwd,
        }
        path = self.folder / "run" / f"{running.name}.json"
        path.parent.mkdir(mode=0o700, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as handle:
            json.dump(data, handle)
        return path

    def _device_env(self, container: str) -> dict[str, str]:
        """NVIDIA_VISIBLE_DEVICES, as the NVIDIA device plugin sets it, for a container given GPUs
        by request (indices here, where a real plugin names GPU UUIDs)."""
        given = self.devices.get(container, [])
        if not given or (self.containers[container].spec.get("securityContext") or {}).get("privileged"):
            return {}
        return {"NVIDIA_VISIBLE_DEVICES": ",".join(re.sub(r"^\D*", "", f) or f for f in given)}

    def _enter(self) -> list[str]:
        return [sys.executable, "-m", "sunk.runtime.local.enter"]

    def exec_argv(self, running: Running, command: Sequence[str]) -> list[str]:
        launch = self.folder / "run" / f"{running.name}.json"
        flags = ["--mount", "--net", "--uts", "--ipc", "--pid"]
        return ["nsenter", f"--target={running.pid}", *flags, "--", *self._enter(), str(launch), *command]

    def _close_jail(self, jail: Jail) -> None:
        net.run(net.pod_down(self.agent.network, self.index), check=False)
        jail.close()
        shutil.rmtree(jail.workdir, ignore_errors=True)
