"""Every way the local cluster differs from a real one in what a pod sees, with its reason, and
the changes made to a render before it is applied (`override_render`).

The rendered manifests and scripts are applied as they are. The harness's other overrides
(runtime/harness/overrides.py: loopback hosts, per-instance ports, a shared /etc/slurm) are not
needed here: each pod has its own hostname, address and filesystem. What differs is the node under
the pods, and only where this host can't do what a Kubernetes node does:
"""

from __future__ import annotations

import base64
import re
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ..harness.overrides import directive, set_directives


@dataclass(frozen=True)
class Difference:
    what: str
    why: str


DIFFERENCES: tuple[Difference, ...] = (
    Difference(
        "No cgroup per container: resource limits are not enforced. In the rendered slurm.conf and "
        "cgroup.conf, CgroupPlugin=disabled, ProctrackType=proctrack/linuxproc, "
        "TaskPlugin=task/affinity and JobAcctGatherType=jobacct_gather/linux replace the cgroup "
        "plugins (`cgroup_free`).",
        "This host mounts cgroups in hybrid mode: the v1 controllers are each mounted and the "
        "unified (v2) tree has no controllers, so no cgroup v2 subtree can be delegated to a pod, "
        "and slurmd refuses to start with cgroup/v2. The same override as the harness's "
        "(runtime/harness/overrides.py); the pods' scripts are untouched.",
    ),
    Difference(
        "Slurm nodes report the CPUs and memory their NodeSet gives them, not this machine's: "
        "SlurmdParameters in the rendered slurm.conf gains config_overrides (`simulated_sizes`).",
        "A NodeSet asks for more CPUs and memory than this machine has (acme-dev's cpu nodes have 4 "
        "CPUs; CI machines have 2), and slurmd then registers a node that slurmctld drains as "
        "smaller than configured. The harness does the same for the same reason.",
    ),
    Difference(
        "A Service's name resolves to the first Ready pod behind it (headless Services' pod names to "
        "each pod), in each pod's /etc/hosts and from the cluster's DNS server (dns.py), not to a "
        "ClusterIP.",
        "No kube-proxy runs here to translate ClusterIPs; a name bound to a pod address behaves like "
        "a ClusterIP with one backend for the TCP clients sunk's pods are (no load balancing across "
        "replicas).",
    ),
    Difference(
        "A placeholder OpenSSH key in a program's own Secret (a Pulumi program rendered offline) is "
        "replaced by a new key (`real_ssh_keys`).",
        "Offline, the program can't make the keys it keeps in its encrypted state; the render's key "
        "generator Job makes every other key in the cluster, as on a real one.",
    ),
    Difference(
        "No seccomp, AppArmor or SELinux confinement; capabilities, users, groups, no_new_privs and "
        "read-only roots are enforced.",
        "The container runtime is sunk's own launcher (runtime/local/enter.py), which installs no seccomp filter.",
    ),
)
"""The list the docs' local cluster page (docs/concepts/local-cluster.md) repeats; a test keeps the two in step."""


# -- the overrides: applied to the render's files before they are applied to the cluster ---------

_PLACEHOLDER = re.compile(
    r"-----BEGIN OPENSSH PRIVATE KEY-----\noffline placeholder for (\S+), not a key\n-----END OPENSSH PRIVATE KEY-----\n?"
)
Keygen = Callable[[str], str]
"""Key type (ed25519, rsa, ecdsa) -> a new OpenSSH private key."""


def ssh_keygen(kind: str) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "key"
        subprocess.run(
            ["ssh-keygen", "-q", "-t", kind, "-N", "", "-C", "sunk-local", "-f", str(path)],
            check=True,
            capture_output=True,
        )
        return path.read_text()


def _key_type(name: str) -> str:
    return next((kind for kind in ("ed25519", "ecdsa", "rsa") if kind in name), "ed25519")


def real_ssh_keys(obj: dict[str, Any], keygen: Keygen) -> bool:
    """Replace a Secret's offline placeholder OpenSSH keys with new keys of the type each names."""
    if obj.get("kind") != "Secret":
        return False
    changed = False
    for field in ("stringData", "data"):
        for key, value in (obj.get(field) or {}).items():
            text = base64.b64decode(value).decode(errors="replace") if field == "data" else str(value)
            found = _PLACEHOLDER.search(text)
            if found is None:
                continue
            new = keygen(_key_type(found.group(1)))
            obj[field][key] = base64.b64encode(new.encode()).decode() if field == "data" else new
            changed = True
    return changed


def cgroup_free(obj: dict[str, Any]) -> bool:
    """slurm.conf and cgroup.conf of a ConfigMap without cgroups (the first difference above)."""
    if obj.get("kind") != "ConfigMap":
        return False
    data = obj.get("data") or {}
    changed = False
    if "cgroup.conf" in data:
        data["cgroup.conf"] = set_directives(data["cgroup.conf"], {"CgroupPlugin": "disabled"})
        changed = True
    if "slurm.conf" in data:
        text = data["slurm.conf"]
        values = {"ProctrackType": "proctrack/linuxproc", "TaskPlugin": "task/affinity"}
        if directive(text, "JobAcctGatherType"):
            values["JobAcctGatherType"] = "jobacct_gather/linux"
        data["slurm.conf"] = set_directives(text, values)
        changed = True
    return changed


def simulated_sizes(obj: dict[str, Any]) -> bool:
    """slurm.conf's SlurmdParameters with config_overrides (the second difference above)."""
    data = obj.get("data") or {}
    if obj.get("kind") != "ConfigMap" or "slurm.conf" not in data:
        return False
    text = data["slurm.conf"]
    parameters = [p for p in (directive(text, "SlurmdParameters") or "").split(",") if p]
    if "config_overrides" in parameters:
        return False
    data["slurm.conf"] = set_directives(text, {"SlurmdParameters": ",".join([*parameters, "config_overrides"])})
    return True


def override_render(folder: Path, keygen: Keygen = ssh_keygen) -> list[str]:
    """Apply the overrides to the YAML files of a render folder in place; the files changed."""
    changed = []
    for path in sorted(folder.glob("*.yaml")):
        obj = yaml.safe_load(path.read_text())
        if not isinstance(obj, dict):
            continue
        if cgroup_free(obj) | simulated_sizes(obj) | real_ssh_keys(obj, keygen):
            path.write_text(yaml.safe_dump(obj, sort_keys=False))
            changed.append(path.name)
    return changed
