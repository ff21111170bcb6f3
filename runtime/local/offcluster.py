"""Every way the local cluster differs from a real one in what a pod sees, with its reason.

The rendered objects are applied as they are: no Slurm file, script or manifest is rewritten for
the local cluster (runtime/harness/overrides.py, which the one-host harness needs, is not used
here: each pod has its own hostname, address and filesystem, so the loopback hosts, per-instance
ports and shared /etc/slurm it works around do not arise). What differs is the node under the
pods, and only where this host can't do what a Kubernetes node does:
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Difference:
    what: str
    why: str


DIFFERENCES: tuple[Difference, ...] = (
    Difference(
        "No cgroup per container: resource limits are not enforced and /sys/fs/cgroup is the host's "
        "read-only view. Slurm's cgroup/v2 plugin (cgroup.conf CgroupPlugin, proctrack/cgroup, "
        "task/cgroup, jobacct_gather/cgroup) fails in slurmd pods.",
        "This host mounts cgroups in hybrid mode: the v1 controllers are each mounted and the "
        "unified (v2) tree has no controllers, so no cgroup v2 subtree can be delegated to a pod. "
        "runtime/harness/overrides.py's local_cgroup_conf is the override the harness applies for "
        "the same reason; the local cluster applies no override, so pods that need cgroup v2 fail "
        "as they would on such a node.",
    ),
    Difference(
        "Service names resolve through each pod's /etc/hosts, to the first Ready pod behind the "
        "Service (headless Services' pod names to each pod), not through a DNS server to a ClusterIP.",
        "No kube-proxy or cluster DNS server runs here; a name bound to a pod address behaves like a "
        "ClusterIP with one backend for the TCP clients sunk's pods are (no load balancing across "
        "replicas).",
    ),
    Difference(
        "KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT name the bridge's address and the local "
        "API server's port, not a ClusterIP of the `kubernetes` Service.",
        "The API server runs on the host, reachable from pods only at the bridge address; the "
        "in-cluster clients read exactly these variables and the mounted CA and token.",
    ),
    Difference(
        "Secrets hold the render's deterministic offline placeholders (`sunk render --show-secrets`), "
        "not values generated at deploy time.",
        "There is no Pulumi engine here to generate them; the placeholders are valid keys of the "
        "right length for munge and JWT, but SSH host keys are not real keys.",
    ),
    Difference(
        "No seccomp, AppArmor or SELinux confinement; capabilities, users, groups, no_new_privs and "
        "read-only roots are enforced.",
        "The container runtime is sunk's own launcher (runtime/local/enter.py), which installs no seccomp filter.",
    ),
)
"""The list README's local cluster section repeats; a test keeps the two in step."""
