"""Pieces of the Slurm pods: the auth sidecars, shared volumes, pod-level security."""

from __future__ import annotations

from typing import Literal

from sunk import keys, naming
from sunk.manifests.config import SecretKey
from sunk.manifests.meta import SLURM_UID, Manifest, exec_probe, fixed_resources, metadata, obj
from sunk.manifests.scripts import munge_start, sh
from sunk.roles import MUNGE_CAPABILITIES
from sunk.spec.cluster import ClusterSpec
from sunk.spec.scheduling import SharedVolumeSpec

MUNGE_DIR = "/run/munge"
MUNGE_KEY_SECRET = "/etc/munge-key"
"""Where the auth Secret's munge key mounts; munged gets a copy it owns (munge-start.sh)."""
MUNGE_STATE = (("/etc/munge", "etc"), ("/var/lib/munge", "lib"), ("/var/log/munge", "log"))
"""Where munged writes (its key copy, its random seed, its log): folders of one emptyDir."""
SACK_DIR = "/run/slurm"
"""sackd's socket directory (auth/slurm on hosts that must not hold slurm.key, such as login)."""

Role = Literal["login", "compute", "controller"]


def munge_sidecar(image: str) -> Manifest:
    """munged as a native sidecar (an init container that keeps running, Kubernetes >= 1.29), so
    it is up before the Slurm daemon starts and stops after it, also in Jobs."""
    return {
        "name": "munge",
        "image": image,
        "restartPolicy": "Always",
        "command": sh(munge_start(MUNGE_DIR, MUNGE_KEY_SECRET, keys.MUNGE_KEY)),
        # Starts as root only to chown the key and socket directory, then runs munged as `munge`.
        # Its root stays read-only: what munged writes (the key copy, its seed, its log) is in
        # the munge-state volume.
        "securityContext": {
            "runAsUser": 0,
            "runAsNonRoot": False,
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"], "add": sorted(MUNGE_CAPABILITIES)},
            "readOnlyRootFilesystem": True,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "resources": fixed_resources("10m", "16Mi", "64Mi"),
        "startupProbe": exec_probe(["/bin/sh", "-c", "munge -n >/dev/null"], period=2, failures=30),
        "livenessProbe": exec_probe(["/bin/sh", "-c", "munge -n >/dev/null"], period=30),
        "volumeMounts": [
            {"name": "munge-socket", "mountPath": MUNGE_DIR},
            {"name": "munge-key", "mountPath": MUNGE_KEY_SECRET, "readOnly": True},
            *({"name": "munge-state", "mountPath": path, "subPath": sub} for path, sub in MUNGE_STATE),
        ],
    }


def sackd_sidecar(image: str) -> Manifest:
    """sackd serves auth/slurm credentials over a socket, so login users never read slurm.key."""
    return {
        "name": "sackd",
        "image": image,
        "restartPolicy": "Always",
        "command": ["sackd", "-D"],
        # Root without a single capability: it reads the root-owned slurm.key of its own volume.
        # Login pods get no fsGroup, which would re-own the users' shared home volumes.
        "securityContext": {
            "runAsUser": 0,
            "runAsNonRoot": False,
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "resources": fixed_resources("10m", "16Mi", "64Mi"),
        "startupProbe": exec_probe(["test", "-S", f"{SACK_DIR}/sack.socket"], period=2, failures=30),
        "livenessProbe": exec_probe(["test", "-S", f"{SACK_DIR}/sack.socket"], period=30),
        "volumeMounts": [
            {"name": "sack-socket", "mountPath": SACK_DIR},
            {"name": "slurm-config", "mountPath": naming.SLURM_ETC, "readOnly": True},
        ],
    }


def auth_volumes(spec: ClusterSpec, auth: SecretKey, *, sackd: bool = False) -> list[Manifest]:
    """munge: the socket directory and the key (for the munge sidecar only). auth/slurm daemons
    read slurm.key from the projected /etc/slurm instead; sackd pods share its socket."""
    if spec.auth.type == "munge":
        return [
            {"name": "munge-socket", "emptyDir": {"medium": "Memory", "sizeLimit": "1Mi"}},
            {"name": "munge-state", "emptyDir": {"medium": "Memory", "sizeLimit": "4Mi"}},
            {
                "name": "munge-key",
                "secret": {
                    "secretName": auth.secret,
                    "defaultMode": 0o400,
                    "items": [{"key": auth.key, "path": keys.MUNGE_KEY}],
                },
            },
        ]
    return [{"name": "sack-socket", "emptyDir": {"medium": "Memory", "sizeLimit": "1Mi"}}] if sackd else []


def auth_sidecars(spec: ClusterSpec, image: str, *, sackd: bool = False) -> list[Manifest]:
    if spec.auth.type == "munge":
        return [munge_sidecar(image)]
    return [sackd_sidecar(image)] if sackd else []


def auth_mounts(spec: ClusterSpec, *, sackd: bool = False) -> list[Manifest]:
    """What the Slurm container itself mounts to authenticate."""
    if spec.auth.type == "munge":
        return [{"name": "munge-socket", "mountPath": MUNGE_DIR}]
    return [{"name": "sack-socket", "mountPath": SACK_DIR}] if sackd else []


def slurm_pod_security(fs_group: int = SLURM_UID) -> Manifest:
    """Pod-level: files from Secrets and PVCs are group-readable by the slurm group. The kubelet
    applies fsGroup only where the volume driver supports ownership changes (CSI default
    fsGroupPolicy: ReadWriteOnce volumes with a filesystem type), so ReadWriteMany shared volumes
    mounted beside the state PVC keep their owners."""
    return {
        "fsGroup": fs_group,
        "fsGroupChangePolicy": "OnRootMismatch",
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def shared_claim(spec: ClusterSpec, vol: SharedVolumeSpec) -> str:
    """The PVC a shared volume mounts: the existing one, or `<cluster>-<volume>` created by sunk."""
    return vol.existing_claim if vol.existing_claim is not None else naming.shared_claim(spec.name, vol.name)


def shared_volumes(spec: ClusterSpec, role: Role) -> tuple[list[Manifest], list[Manifest]]:
    """(volumes, volumeMounts) of the cluster's shared volumes that mount on `role`."""
    vols, mounts = [], []
    for v in spec.shared_volumes:
        if role not in v.mount_on:
            continue
        name = naming.shared_volume(v.name)
        vols.append(
            {"name": name, "persistentVolumeClaim": {"claimName": shared_claim(spec, v), "readOnly": v.read_only}}
        )
        mounts.append({"name": name, "mountPath": v.mount_path, "readOnly": v.read_only})
    return vols, mounts


def shared_claim_manifest(spec: ClusterSpec, vol: SharedVolumeSpec) -> Manifest:
    """The PVC sunk creates for a shared volume with `create:`."""
    assert vol.create is not None
    claim: Manifest = {
        "accessModes": [vol.create.access_mode],
        "resources": {"requests": {"storage": vol.create.size}},
    }
    if vol.create.storage_class:
        claim["storageClassName"] = vol.create.storage_class
    return obj("v1", "PersistentVolumeClaim", metadata(spec, shared_claim(spec, vol), "storage"), spec=claim)


def shared_claims(spec: ClusterSpec) -> list[Manifest]:
    """PVCs for shared volumes that sunk creates (`create:`)."""
    return [shared_claim_manifest(spec, v) for v in spec.shared_volumes if v.create is not None]
