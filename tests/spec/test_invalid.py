"""Bad input is rejected before anything renders, naming the field path and what would be valid.

Each case starts from a small valid spec, changes it, and expects exactly one problem: the field
path (exact) and a fragment of the message that tells the user what would be valid."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
import yaml

from sunk.spec import SpecError, load_spec
from sunk.stackfile import CLUSTER_KEY, stack_path
from tests.support.specs import DELETE, MINIMAL, spec_document
from tests.support.stacks import FIXTURE_STACKS

GB200 = {
    "name": "gb200",
    "instanceType": "GB200x4",
    "cpus": 140,
    "memoryMib": 860_000,
    "gpus": {"type": "gb200", "count": 4},
}
GPU = {"name": "gpu", "instanceType": "H100x8", "cpus": 64, "memoryMib": 500_000, "gpus": {"type": "h100", "count": 8}}
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHq5v9mZ2wG2i3d0cFh3pQkU4sXJm0vYQn8x1bL2cD3e ops@acme"
LDAP = {"uris": ["ldaps://ldap.acme.example:636"], "baseDn": "dc=acme,dc=example"}
SECRET = {"name": "db", "key": "password"}
TREE = {"name": "fabric", "plugin": "tree", "labelKeys": ["example.com/leaf"], "default": True}
FLAT = {"name": "plain", "plugin": "flat"}
LUA = "function slurm_job_submit(j, p, u)\n  return slurm.SUCCESS\nend\n"


def patched(changes: dict[str, Any]) -> dict[str, Any]:
    """MINIMAL with `changes` applied: keys are paths like `nodesets[0].cpus`; an index one past
    the end appends; DELETE removes the key."""
    return spec_document("minimal", changes)


@dataclass(frozen=True)
class Bad:
    id: str
    changes: dict[str, Any]
    path: str
    valid: str
    """A fragment of the message that says what would be valid."""


# fmt: off
CASES = [
    # ----- the cluster and its names
    Bad("unknown-top-level-field", {"colour": "red"}, "colour", "known: accounting, accounts, auth, cgroup"),
    Bad("misspelt-nested-field", {"nodesets[0].gpu": {}}, "nodesets[0].gpu", "did you mean gpus?"),
    Bad("misspelt-partition-field", {"partitions[0].maxtime": "1:00:00"}, "partitions[0].maxtime", "did you mean maxTime?"),
    Bad("cluster-name-not-dns", {"name": "Research_1"}, "name", "DNS-1123 label: lowercase letters, digits and '-'"),
    Bad("cluster-name-too-long", {"name": "r" * 31}, "name", "at most 30 allowed"),
    Bad("tenant-not-dns", {"tenant": "ACME"}, "tenant", "DNS-1123 label"),
    Bad("namespace-not-dns", {"namespace": "acme.research"}, "namespace", "DNS-1123 label"),
    Bad("derived-namespace-too-long", {"tenant": "t" * 40, "name": "n" * 30}, "namespace", "longer than 63 characters; set namespace"),
    Bad("unsupported-slurm-version", {"slurm": {"version": "23.02"}}, "slurm.version", "not a Slurm release sunk supports; supported: 26.05, 24.11"),
    Bad("slurm-version-unquoted", {"slurm": {"version": 26.05}}, "slurm.version", "text is required"),
    Bad("slurm-downgrade", {"slurm": {"version": "24.11", "upgradeFrom": "26.05"}}, "slurm.upgradeFrom", "'26.05' is newer than slurm.version '24.11': Slurm can't be downgraded"),
    Bad("slurm-upgrade-from-unknown", {"slurm": {"upgradeFrom": "23.02"}}, "slurm.upgradeFrom", "not a Slurm release sunk supports; supported: 26.05, 24.11"),
    Bad("no-nodesets", {"nodesets": []}, "nodesets", "at least 1 item"),
    Bad("partitions-missing", {"partitions": DELETE}, "partitions", "required field is missing (Slurm partitions"),
    Bad("labels-not-strings", {"labels": {"team": ["a"]}}, "labels.team", "text is required, not a list (['a'])"),
    # ----- cross-references and uniqueness (ClusterSpec rules)
    Bad("duplicate-nodeset", {"nodesets[1]": {"name": "cpu", "cpus": 2, "memoryMib": 1024}}, "nodesets[1].name", "'cpu' repeats nodesets[0]"),
    Bad("duplicate-partition", {"partitions[1]": {"name": "batch", "nodesets": ["cpu"]}}, "partitions[1].name", "repeats partitions[0]"),
    Bad("duplicate-qos", {"qos": [{"name": "low"}, {"name": "low"}]}, "qos[1].name", "'low' repeats qos[0]"),
    Bad("partition-unknown-nodeset", {"partitions[0].nodesets[1]": "gpu"}, "partitions[0].nodesets[1]", "'gpu' is not a nodeset; known: cpu"),
    Bad("two-default-partitions", {"partitions[1]": {"name": "debug", "nodesets": ["cpu"], "default": True}}, "partitions[1].default", "partitions[0] is already the default; only one may be"),
    Bad("allow-unknown-qos", {"partitions[0].allowQos": ["gold"]}, "partitions[0].allowQos[0]", "'gold' is not a QOS; known: normal"),
    Bad("partition-preempt-mode-needs-tiers", {"partitions[0].preemptMode": "cancel"}, "partitions[0].preemptMode", "needs scheduling.preemptType partition_prio"),
    Bad("nodeset-in-no-partition", {"nodesets[1]": {"name": "spare", "cpus": 2, "memoryMib": 1024}}, "nodesets[1]", "add it to a partition's nodesets"),
    Bad("qos-preempts-unknown", {"qos": [{"name": "high", "preempt": ["low"]}]}, "qos[0].preempt[0]", "'low' is not a QOS; known: high, normal"),
    Bad("qos-preempts-itself", {"qos": [{"name": "high", "preempt": ["high"]}]}, "qos[0].preempt[0]", "a QOS cannot preempt itself"),
    Bad("qos-preempt-needs-preempt-qos", {"qos": [{"name": "low"}, {"name": "high", "preempt": ["low"]}], "scheduling": {"preemptType": "none"}}, "qos[1].preempt", "needs scheduling.preemptType qos"),
    Bad("partition-prio-needs-tiers", {"scheduling.preemptType": "partition_prio"}, "scheduling.preemptType", "needs partitions with different priorityTier values"),
    Bad("exporter-without-restapi", {"monitoring.enabled": True, "restapi.enabled": False}, "restapi.enabled", "keep restapi enabled"),
    Bad("runtime-without-restapi", {"restapi.enabled": False}, "restapi.enabled", "the syncer and the scheduler, which every cluster runs"),
    Bad("enforce-without-accounting", {"accounting": {"enabled": False, "enforce": ["qos"]}, "scheduling.preemptType": "none"}, "accounting.enforce", "nothing would be enforced"),
    Bad("exporter-interval-too-short", {"monitoring.exporter.interval": "2s"}, "monitoring.exporter.interval", "shorter than 5s"),
    Bad("exporter-interval-no-unit", {"monitoring.exporter.interval": "30"}, "monitoring.exporter.interval", "whole seconds or minutes, e.g. 30s or 1m"),
    Bad("exporter-per-user-not-bool", {"monitoring.exporter.perUserMetrics": "yes"}, "monitoring.exporter.perUserMetrics", "true or false is required"),
    Bad("exporter-unknown-field", {"monitoring.exporter.perUser": True}, "monitoring.exporter.perUser", "did you mean perUserMetrics?"),
    Bad("login-volume-without-login", {"login.enabled": False, "sharedVolumes": [{"name": "home", "mountPath": "/home", "existingClaim": "home"}]}, "sharedVolumes[0].mountOn", "login.enabled is false"),
    Bad("qos-without-accounting", {"accounting.enabled": False, "scheduling.preemptType": "none", "qos": [{"name": "low"}]}, "qos", "set accounting.enabled true or drop qos"),
    Bad("duplicate-account", {"accounts": [{"name": "ml"}, {"name": "ml"}]}, "accounts[1].name", "'ml' repeats accounts[0]"),
    Bad("account-named-root", {"accounts": [{"name": "root"}]}, "accounts[0].name", "root is Slurm's own top account"),
    Bad("account-unknown-parent", {"accounts": [{"name": "ml", "parent": "lab"}]}, "accounts[0].parent", "neither root nor an account of the spec; known: ml, root"),
    Bad("account-cycle", {"accounts": [{"name": "a", "parent": "a"}]}, "accounts[0].parent", "'a' would be its own ancestor"),
    Bad("account-unknown-qos", {"accounts": [{"name": "ml", "qos": ["gold"]}]}, "accounts[0].qos[0]", "'gold' is not a QOS; known: normal"),
    Bad("account-default-qos-not-allowed", {"qos": [{"name": "low"}, {"name": "high"}], "accounts": [{"name": "ml", "qos": ["low"], "defaultQos": "high"}]}, "accounts[0].defaultQos", "choose one of: low"),
    Bad("account-user-twice", {"accounts": [{"name": "ml", "users": ["ada", "ada"]}]}, "accounts[0].users", "'ada' listed twice"),
    Bad("account-bad-user", {"accounts": [{"name": "ml", "users": ["Ada Lovelace"]}]}, "accounts[0].users[0]", "a user name"),
    Bad("accounts-without-accounting", {"accounting.enabled": False, "scheduling.preemptType": "none", "accounts": [{"name": "ml"}]}, "accounts", "set accounting.enabled true or drop accounts"),
    Bad("enforce-unknown", {"accounting.enforce": ["nojobs"]}, "accounting.enforce[0]", "'associations', 'limits', 'qos', 'safe' or 'wckeys'"),
    Bad("enforce-twice", {"accounting.enforce": ["qos", "qos"]}, "accounting.enforce", "each value at most once"),
    Bad("preempt-qos-without-accounting", {"accounting.enabled": False}, "scheduling.preemptType", "qos needs accounting.enabled true"),
    Bad("pod-names-too-long", {"name": "c" * 30, "nodesets[0].name": "n" * 31, "partitions[0].nodesets": ["n" * 31]}, "nodesets[0].name", "at most 63 allowed: shorten the cluster or nodeset name"),
    Bad("duplicate-shared-volume", {"sharedVolumes": [{"name": "home", "mountPath": "/home", "existingClaim": "a"}, {"name": "home", "mountPath": "/data", "existingClaim": "b"}]}, "sharedVolumes[1].name", "repeats sharedVolumes[0]"),
    Bad("shared-volume-without-source", {"sharedVolumes": [{"name": "home", "mountPath": "/home"}]}, "sharedVolumes[0].existingClaim", "give exactly one of existingClaim or create"),
    Bad("shared-volume-two-sources", {"sharedVolumes": [{"name": "home", "mountPath": "/home", "existingClaim": "h", "create": {"size": "1Ti"}}]}, "sharedVolumes[0].existingClaim", "give exactly one of existingClaim or create"),
    Bad("shared-volume-roles-repeat", {"sharedVolumes": [{"name": "home", "mountPath": "/home", "existingClaim": "h", "mountOn": ["login", "login"]}]}, "sharedVolumes[0].mountOn", "roles repeat"),
    Bad("shared-volume-unknown-role", {"sharedVolumes": [{"name": "home", "mountPath": "/home", "existingClaim": "h", "mountOn": ["gpu"]}]}, "sharedVolumes[0].mountOn[0]", "'login', 'compute' or 'controller'"),
    Bad("shared-volume-zero-size", {"sharedVolumes": [{"name": "home", "mountPath": "/home", "create": {"size": "0Ti"}}]}, "sharedVolumes[0].create.size", "a size must be positive"),
    Bad("shared-volumes-same-path", {"sharedVolumes": [{"name": "home", "mountPath": "/home", "existingClaim": "a"}, {"name": "h2", "mountPath": "/home", "existingClaim": "b"}]}, "sharedVolumes[1].mountPath", "'/home' repeats sharedVolumes[0]"),
    # ----- nodesets: sizes, modes, shapes (NodeSetSpec rules)
    Bad("zero-cpus", {"nodesets[0].cpus": 0}, "nodesets[0].cpus", "greater than 0"),
    Bad("negative-cpus", {"nodesets[0].cpus": -8}, "nodesets[0].cpus", "greater than 0"),
    Bad("zero-memory", {"nodesets[0].memoryMib": 0}, "nodesets[0].memoryMib", "greater than 0"),
    Bad("cpus-not-a-number", {"nodesets[0].cpus": "many"}, "nodesets[0].cpus", "a whole number up to 65533 is required, not text ('many')"),
    Bad("negative-replicas", {"nodesets[0].replicas": -1}, "nodesets[0].replicas", "greater than or equal to 0"),
    Bad("zero-sockets", {"nodesets[0].sockets": 0}, "nodesets[0].sockets", "greater than 0"),
    Bad("negative-tmp-disk", {"nodesets[0].tmpDiskMib": -1}, "nodesets[0].tmpDiskMib", "greater than or equal to 0"),
    Bad("zero-weight", {"nodesets[0].weight": 0}, "nodesets[0].weight", "greater than or equal to 1"),
    Bad("unknown-mode", {"nodesets[0].mode": "daemonset"}, "nodesets[0].mode", "'replicas' or 'all-matching-nodes'"),
    Bad("replicas-with-all-matching-nodes", {"nodesets[0].mode": "all-matching-nodes", "nodesets[0].replicas": 3}, "nodesets[0].replicas", "must be unset in mode all-matching-nodes"),
    Bad("external-scaling-with-all-matching-nodes", {"nodesets[0].mode": "all-matching-nodes", "nodesets[0].externalScaling": True}, "nodesets[0].externalScaling", "only in mode replicas"),
    Bad("replicas-above-max-nodes", {"nodesets[0].maxNodes": 1, "nodesets[0].replicas": 2}, "nodesets[0].replicas", "exceeds maxNodes 1 (this NodeSet's share of MaxNodeCount); raise maxNodes to at least"),
    Bad("nodeset-name-not-dns", {"nodesets[0].name": "GPU_nodes"}, "nodesets[0].name", "DNS-1123 label"),
    Bad("nodeset-name-too-long", {"nodesets[0].name": "n" * 41}, "nodesets[0].name", "at most 40 allowed"),
    Bad("partial-socket-layout", {"nodesets[0].sockets": 2}, "nodesets[0].sockets", "sockets, coresPerSocket and threadsPerCore go together"),
    Bad("socket-layout-mismatch", {"nodesets[0].sockets": 2, "nodesets[0].coresPerSocket": 4, "nodesets[0].threadsPerCore": 2}, "nodesets[0].cpus", "4 != sockets*coresPerSocket*threadsPerCore = 16"),
    Bad("unknown-instance-type", {"nodesets[0].instanceType": "H100x16"}, "nodesets[0].instanceType", "known: A100x8, CPU-192"),
    Bad("cpus-beyond-instance-type", {"nodesets[0].instanceType": "CPU-64", "nodesets[0].cpus": 96}, "nodesets[0].cpus", "96 exceeds the 64 CPUs of instance type CPU-64"),
    Bad("memory-beyond-instance-type", {"nodesets[0].instanceType": "CPU-64", "nodesets[0].memoryMib": 300_000}, "nodesets[0].memoryMib", "exceeds the 256000 MiB of instance type CPU-64"),
    Bad("gpus-beyond-instance-type", {"nodesets[1]": {**GPU, "gpus": {"type": "h100", "count": 9}}, "partitions[0].nodesets[1]": "gpu"}, "nodesets[1].gpus.count", "9 exceeds the 8 GPUs of instance type H100x8"),
    Bad("gpu-type-unlike-instance-type", {"nodesets[1]": {**GPU, "gpus": {"type": "a100", "count": 8}}, "partitions[0].nodesets[1]": "gpu"}, "nodesets[1].gpus.type", "instance type H100x8 has 'h100'"),
    # ----- what a kubelet admits (sunk.spec.capacity: an H100x8 Node gives one pod 126.61 CPUs, 1950929 MiB)
    Bad("exclusive-cpus-beyond-allocatable", {"nodesets[1]": {**GPU, "cpus": 128}, "partitions[0].nodesets[1]": "gpu"}, "nodesets[1].cpus", "exceed the 126.61 CPUs a pod may request on H100x8 Nodes (after kube-reserved, the eviction threshold and DaemonSets) in resourceMode exclusive; at most 126 fit"),
    Bad("exclusive-memory-beyond-allocatable", {"nodesets[1]": {**GPU, "memoryMib": 1_960_000}, "partitions[0].nodesets[1]": "gpu"}, "nodesets[1].memoryMib", "exceed the 1950929 MiB a pod may request on H100x8 Nodes"),
    Bad("sidecars-count-against-allocatable", {"nodesets[1]": {**GPU, "cpus": 126, "sidecars": [{"name": "x", "image": {"repository": "r/x", "tag": "1"}, "resources": {"requests": {"cpu": "700m"}}}]}, "partitions[0].nodesets[1]": "gpu"}, "nodesets[1].cpus", "126 plus 0.71 for munge and sidecars exceed the 126.61 CPUs"),
    Bad("shared-slurm-node-beside-slurmd", {"nodesets[1]": {**GPU, "resourceMode": "shared", "cpus": 127}, "partitions[0].nodesets[1]": "gpu"}, "nodesets[1].cpus", "127 plus 0.51 for the slurmd pod exceed the 126.61 CPUs a pod may request on H100x8 Nodes (after kube-reserved, the eviction threshold and DaemonSets) in resourceMode shared; at most 126 fit"),
    Bad("shared-overhead-beyond-allocatable", {"nodesets[0].resourceMode": "shared", "nodesets[0].cpus": 1, "nodesets[0].slurmdOverhead": {"cpu": "5", "memory": "1Gi"}, "nodesets[0].nodeAllocatable": {"cpu": "4", "memory": "16Gi"}}, "nodesets[0].slurmdOverhead.cpu", "the slurmd pod requests 5.01 CPUs (0.01 of them munge and sidecars), above the 4 a pod may request on Nodes of the given nodeAllocatable; a kubelet would reject it (OutOfcpu)"),
    Bad("resources-override-beyond-allocatable", {"nodesets[0].resources": {"requests": {"cpu": "1", "memory": "20Gi"}, "limits": {"memory": "20Gi"}}, "nodesets[0].nodeAllocatable": {"cpu": "8", "memory": "16Gi"}}, "nodesets[0].resources.requests.memory", "above the 16384 MiB a pod may request on Nodes of the given nodeAllocatable; a kubelet would reject it (OutOfmemory)"),
    Bad("gpus-beyond-node-allocatable", {"nodesets[0].gpus": {"type": "h100", "count": 4}, "nodesets[0].nodeAllocatable": {"cpu": "8", "memory": "64Gi", "gpus": 2}}, "nodesets[0].gpus.count", "4 exceeds the 2 nvidia.com/gpu a pod may request on Nodes of the given nodeAllocatable"),
    Bad("shared-feature-by-hand", {"nodesets[0].features": ["sunk_shared"]}, "nodesets[0].features[0]", "reserved for the nodes of shared NodeSets; set resourceMode: shared"),
    Bad("slurmd-overhead-in-exclusive-mode", {"nodesets[0].slurmdOverhead": {"cpu": "1"}}, "nodesets[0].slurmdOverhead", "only used in resourceMode shared"),
    Bad("unknown-resource-mode", {"nodesets[0].resourceMode": "mixed"}, "nodesets[0].resourceMode", "'exclusive' or 'shared'"),
    Bad("node-allocatable-zero-cpu", {"nodesets[0].nodeAllocatable": {"cpu": "0", "memory": "1Gi"}}, "nodesets[0].nodeAllocatable.cpu", "must be positive"),
    Bad("gpu-count-beyond-any-node", {"nodesets[0].gpus": {"type": "h100", "count": 17}}, "nodesets[0].gpus.count", "less than or equal to 16"),
    Bad("zero-gpus", {"nodesets[0].gpus": {"type": "h100", "count": 0}}, "nodesets[0].gpus.count", "greater than or equal to 1"),
    Bad("gpu-type-uppercase", {"nodesets[0].gpus": {"type": "H100", "count": 1}}, "nodesets[0].gpus.type", "lowercase GRES type such as h100"),
    Bad("gpu-device-not-dev", {"nodesets[0].gpus": {"type": "h100", "count": 1, "devicePattern": "/tmp/gpu"}}, "nodesets[0].gpus.devicePattern", "a device prefix such as /dev/nvidia"),
    Bad("feature-repeats-name", {"nodesets[0].features": ["cpu"]}, "nodesets[0].features[0]", "repeats the NodeSet name, which is always a feature"),
    Bad("feature-with-space", {"nodesets[0].features": ["fast net"]}, "nodesets[0].features[0]", "a Slurm feature: a letter, then letters, digits"),
    Bad("volume-without-source", {"nodesets[0].volumes": [{"name": "v", "mountPath": "/v"}]}, "nodesets[0].volumes[0].name", "needs exactly one volume source (nfs, emptyDir, csi, configMap, secret, persistentVolumeClaim, hostPath, ... as in a pod); got none"),
    Bad("volume-two-sources", {"nodesets[0].volumes": [{"name": "v", "mountPath": "/v", "emptyDir": True, "claimName": "c"}]}, "nodesets[0].volumes[0].name", "got emptyDir, persistentVolumeClaim"),
    Bad("volume-relative-path", {"nodesets[0].volumes": [{"name": "v", "mountPath": "scratch", "emptyDir": True}]}, "nodesets[0].volumes[0].mountPath", "a normalized absolute path such as /data (starting with '/'"),
    Bad("duplicate-volume", {"nodesets[0].volumes": [{"name": "v", "mountPath": "/a", "emptyDir": True}, {"name": "v", "mountPath": "/b", "emptyDir": True}]}, "nodesets[0].volumes[1].name", "'v' repeats volumes[0]"),
    Bad("duplicate-volume-path", {"nodesets[0].volumes": [{"name": "a", "mountPath": "/x", "emptyDir": True}, {"name": "b", "mountPath": "/x", "emptyDir": True}]}, "nodesets[0].volumes[1].mountPath", "repeats volumes[0]"),
    Bad("reserved-sidecar", {"nodesets[0].sidecars": [{"name": "munge", "image": {"repository": "busybox", "tag": "1"}}]}, "nodesets[0].sidecars[0].name", "reserved for sunk's own containers"),
    Bad("duplicate-sidecar", {"nodesets[0].sidecars": [{"name": "a", "image": {"repository": "busybox", "tag": "1"}}] * 2}, "nodesets[0].sidecars[1].name", "repeats sidecars[0]"),
    Bad("sidecar-env-name", {"nodesets[0].sidecars": [{"name": "a", "image": {"repository": "busybox", "tag": "1"}, "env": [{"name": "1X"}]}]}, "nodesets[0].sidecars[0].env[0].name", "a letter or '_', then letters"),
    Bad("s6-oneshot-without-shebang", {"nodesets[0].s6Oneshots": {"prepare": "mkdir -p /scratch"}}, "nodesets[0].s6Oneshots.prepare", "a one-shot script must start with '#!'"),
    Bad("s6-oneshot-name-not-dns", {"nodesets[0].s6Oneshots": {"10_Prepare": "#!/bin/sh\n"}}, "nodesets[0].s6Oneshots.10_Prepare", "DNS-1123 label"),
    Bad("s6-script-without-shebang", {"nodesets[0].s6Scripts": {"exporter": "exec node_exporter"}}, "nodesets[0].s6Scripts.exporter", "must start with '#!'"),
    Bad("unknown-architecture", {"nodesets[0].architecture": "x86_64"}, "nodesets[0].architecture", "'amd64' or 'arm64'"),
    Bad("arch-selector-contradicts-architecture", {"nodesets[0].nodeSelector": {"kubernetes.io/arch": "arm64"}}, "nodesets[0].nodeSelector", "set architecture: arm64 (it adds the selector)"),
    Bad("toleration-exists-with-value", {"nodesets[0].tolerations": [{"key": "k", "operator": "Exists", "value": "v"}]}, "nodesets[0].tolerations[0].value", "must be empty when operator is Exists"),
    Bad("toleration-operator", {"nodesets[0].tolerations": [{"key": "k", "operator": "In"}]}, "nodesets[0].tolerations[0].operator", "'Exists' or 'Equal'"),
    Bad("max-unavailable-zero", {"nodesets[0].updateStrategy": {"maxUnavailable": 0}}, "nodesets[0].updateStrategy.maxUnavailable", "a count from 1 to 100000 or a percentage from 1% to 100%"),
    Bad("max-unavailable-over-100", {"nodesets[0].updateStrategy": {"maxUnavailable": "150%"}}, "nodesets[0].updateStrategy.maxUnavailable", "a percentage from 1% to 100%"),
    Bad("image-with-tag-in-repository", {"nodesets[0].image": {"repository": "ghcr.io/x/slurmd:1", "tag": "1"}}, "nodesets[0].image.repository", "an image repository such as ghcr.io/org/slurmctld (no tag)"),
    # ----- partitions and QOS
    Bad("partition-name-uppercase", {"partitions[0].name": "Batch"}, "partitions[0].name", "lowercase letter first"),
    Bad("partition-named-default", {"partitions[0].name": "default"}, "partitions[0].name", "reserved by Slurm"),
    Bad("partition-without-nodesets", {"partitions[0].nodesets": []}, "partitions[0].nodesets", "at least 1 item"),
    Bad("partition-nodeset-twice", {"partitions[0].nodesets": ["cpu", "cpu"]}, "partitions[0].nodesets[1]", "'cpu' is listed twice"),
    Bad("bad-max-time", {"partitions[0].maxTime": "1 day"}, "partitions[0].maxTime", "a Slurm time: UNLIMITED, minutes, MM:SS, HH:MM:SS, D-HH"),
    Bad("bad-minutes-in-time", {"partitions[0].maxTime": "12:75:00"}, "partitions[0].maxTime", "a Slurm time"),
    Bad("default-time-beyond-max", {"partitions[0].maxTime": "1-00:00:00", "partitions[0].defaultTime": "2-00:00:00"}, "partitions[0].defaultTime", "exceeds maxTime 1-00:00:00; use at most maxTime"),
    Bad("unknown-preempt-mode", {"partitions[0].preemptMode": "kill"}, "partitions[0].preemptMode", "'off', 'cancel', 'requeue' or 'suspend'"),
    Bad("negative-priority-tier", {"partitions[0].priorityTier": -1}, "partitions[0].priorityTier", "greater than or equal to 0"),
    Bad("def-mem-per-cpu-beyond-every-node", {"partitions[0].defMemPerCpu": 2000}, "partitions[0].defMemPerCpu", "more than any of its nodes has (cpu: 4096 MiB / 4 CPUs); a whole-node job without --mem could start nowhere: use at most 1024"),
    Bad("def-mem-per-cpu-zero", {"partitions[0].defMemPerCpu": 0}, "partitions[0].defMemPerCpu", "greater than or equal to 1"),
    Bad("def-mem-per-cpu-in-extra", {"partitions[0].extra": ["OverSubscribe=NO", "DefMemPerCPU=512"]}, "partitions[0].extra[1]", "set defMemPerCpu instead of DefMemPerCPU=512"),
    Bad("def-mem-per-node-in-extra", {"partitions[0].extra": ["defmempernode=2048"]}, "partitions[0].extra[0]", "excludes the DefMemPerCPU every partition gets; set defMemPerCpu instead"),
    Bad("partition-extra-password", {"partitions[0].extra": ["JobCompPass=1"]}, "partitions[0].extra[0]", "JobCompPass holds a password, which would render into slurm.conf's ConfigMap"),
    Bad("partition-extra-with-space", {"partitions[0].extra": ["OverSubscribe=YES LLN=YES"]}, "partitions[0].extra[0]", "one `Key=Value` word without spaces"),
    Bad("qos-negative-usage-factor", {"qos": [{"name": "low", "usageFactor": -1}]}, "qos[0].usageFactor", "greater than or equal to 0"),
    Bad("qos-bad-max-wall", {"qos": [{"name": "low", "maxWall": "forever"}]}, "qos[0].maxWall", "a Slurm time: UNLIMITED"),
    Bad("qos-unknown-preempt-mode", {"qos": [{"name": "low", "preemptMode": "gang"}]}, "qos[0].preemptMode", "'off', 'cancel', 'requeue' or 'suspend'"),
    # ----- scheduling (SchedulingSpec rules)
    Bad("unknown-preempt-type", {"scheduling.preemptType": "priority"}, "scheduling.preemptType", "'none', 'partition_prio' or 'qos'"),
    Bad("unknown-cluster-preempt-mode", {"scheduling.preemptMode": "gang"}, "scheduling.preemptMode", "'off', 'cancel', 'requeue' or 'suspend'"),
    Bad("weights-with-basic-priority", {"scheduling.priorityType": "basic", "scheduling.priorityWeights": {"age": 1}}, "scheduling.priorityWeights", "only used with priorityType multifactor"),
    Bad("preempt-mode-with-preempt-none", {"scheduling.preemptType": "none", "scheduling.preemptMode": "cancel"}, "scheduling.preemptMode", "has no effect with preemptType none; use off"),
    Bad("scheduler-parameter-with-comma", {"scheduling.schedulerParameters": ["bf_continue,bf_max_job_test=100"]}, "scheduling.schedulerParameters[0]", "one `name` or `name=value` without spaces or commas"),
    Bad("bad-preempt-exempt-time", {"scheduling.preemptExemptTime": "-5"}, "scheduling.preemptExemptTime", "a Slurm time"),
    # ----- topology (TopologySpec rules)
    Bad("tree-without-label-keys", {"topology.plugin": "tree"}, "topology.labelKeys", "plugin tree needs Node label keys (one or more keys, top level first)"),
    Bad("block-without-label-keys", {"topology.plugin": "block"}, "topology.labelKeys", "plugin block needs Node label keys (exactly one key)"),
    Bad("metrics-on-24.11", {"slurm.version": "24.11", "controller.metrics": True}, "controller.metrics", "slurmctld's metrics endpoints (MetricsType) came with Slurm 25.11; slurm.version '24.11' has none"),
    Bad("block-on-26.05", {"topology": {"plugin": "block", "labelKeys": ["c"]}}, "topology.plugin", 'block is not supported with slurm.version \'26.05\': slurmctld 26.05 exits at start unless a block holds a registered node'),
    Bad("block-with-two-keys", {"topology": {"plugin": "block", "labelKeys": ["a", "b"]}}, "topology.labelKeys", "plugin block takes exactly one key, got 2"),
    Bad("label-keys-without-plugin", {"topology.labelKeys": ["a"]}, "topology.labelKeys", "set plugin to tree or block, or drop labelKeys"),
    Bad("block-sizes-without-plugin", {"topology.blockSizes": [4]}, "topology.blockSizes", "only used with plugin block"),
    Bad("block-sizes-with-tree", {"topology": {"plugin": "tree", "labelKeys": ["a"], "blockSizes": [4]}}, "topology.blockSizes", "only used with plugin block"),
    Bad("label-keys-repeat", {"topology": {"plugin": "tree", "labelKeys": ["a", "a"]}}, "topology.labelKeys", "keys repeat"),
    Bad("block-sizes-decrease", {"topology": {"plugin": "block", "labelKeys": ["nvidia.com/gpu.clique"], "blockSizes": [72, 18]}}, "topology.blockSizes", "must increase, smallest (the base block) first"),
    Bad("zero-block-size", {"topology": {"plugin": "block", "labelKeys": ["c"], "blockSizes": [0]}}, "topology.blockSizes[0]", "greater than or equal to 1"),
    Bad("unknown-topology-plugin", {"topology.plugin": "torus"}, "topology.plugin", "'none', 'tree' or 'block'"),
    Bad("bad-label-key", {"topology": {"plugin": "tree", "labelKeys": ["Fabric/Leaf"]}}, "topology.labelKeys[0]", "prefix a DNS subdomain"),
    # slurmctld 24.11 exits unless each BlockSizes value is the base times a power of two (measured).
    Bad("block-size-not-base-times-power-of-two", {"topology": {"plugin": "block", "labelKeys": ["c"], "blockSizes": [18, 54]}}, "topology.blockSizes[1]", "not the base block size 18 times a power of two (slurmctld exits on it); use one of 36, 72, 144"),
    Bad("block-size-ratio-beyond-slurm", {"topology": {"plugin": "block", "labelKeys": ["c"], "blockSizes": [1, 65536]}}, "topology.blockSizes[1]", "65536 is more than 2^15 times the base block size 1 (slurmctld exits on it); use one of 2, 4, 8, ... up to 32768"),
    # A 4-node NodeSet can never fill an 18-node block, and beside GB200 nodes its nodes would idle.
    Bad("small-nodeset-beside-block-nodeset", {"nodesets[0].replicas": 4, "nodesets[1]": {**GB200, "mode": "all-matching-nodes"}, "partitions[0].nodesets[1]": "gb200", "topology": {"plugin": "block", "labelKeys": ["c"], "blockSizes": [18, 36]}}, "partitions[0].nodesets[0]", "Give cpu a partition of its own, or at least 18 replicas"),
    # ----- topologies (named topologies in topology.yaml, Slurm 26.05)
    Bad("topologies-on-24.11", {"slurm.version": "24.11", "topologies": [TREE, FLAT]}, "topologies", 'Slurm 24.11 reads one topology, from topology.conf, and no topology.yaml: describe one topology under `topology` (plugin, labelKeys), or set slurm.version "26.05" for several'),
    Bad("topologies-beside-topology", {"topology": {"plugin": "tree", "labelKeys": ["a"]}, "topologies": [TREE, FLAT]}, "topology.plugin", "add this one to `topologies` and set plugin none"),
    Bad("topologies-with-topology-conf-lines", {"topologies": [TREE, FLAT], "extraConfig.topologyConf": ["SwitchName=s1 Nodes=cpu-0"]}, "extraConfig.topologyConf", "Slurm ignores beside the topology.yaml"),
    Bad("topology-name-twice", {"topologies": [TREE, {**FLAT, "name": "fabric"}]}, "topologies[1].name", "'fabric' is listed twice; each topology needs a name of its own"),
    Bad("topology-name-not-slurm", {"topologies": [{**TREE, "name": "Fabric 1"}, FLAT]}, "topologies[0].name", "lowercase letter first, then lowercase letters, digits, '_', '-'"),
    Bad("topology-name-yaml-special", {"topologies": [{**TREE, "name": "1"}, FLAT]}, "topologies[0].name", "lowercase letter first"),
    Bad("topologies-without-default", {"topologies": [{**TREE, "default": False}, FLAT]}, "topologies", "none is the default; set `default: true` on one of fabric, plain"),
    Bad("topologies-with-two-defaults", {"topologies": [TREE, {**FLAT, "default": True}]}, "topologies[1].default", "topologies[0] is already the default; only one may be"),
    Bad("topology-unknown-plugin", {"topologies": [TREE, {**FLAT, "plugin": "none"}]}, "topologies[1].plugin", "'tree', 'block' or 'flat'"),
    Bad("flat-topology-with-label-keys", {"topologies": [TREE, {**FLAT, "labelKeys": ["a"]}]}, "topologies[1].labelKeys", "set plugin to tree or block, or drop labelKeys"),
    Bad("block-topology-with-two-keys", {"topologies": [TREE, {"name": "nvl", "plugin": "block", "labelKeys": ["a", "b"]}]}, "topologies[1].labelKeys", "plugin block takes exactly one key, got 2"),
    Bad("block-topology-bad-sizes", {"topologies": [TREE, {"name": "nvl", "plugin": "block", "labelKeys": ["c"], "blockSizes": [18, 54]}]}, "topologies[1].blockSizes[1]", "not the base block size 18 times a power of two"),
    Bad("partition-unknown-topology", {"topologies": [TREE, FLAT], "partitions[0].topology": "nvl"}, "partitions[0].topology", "'nvl' is not a topology of the spec; use one of fabric, plain"),
    Bad("partition-topology-without-topologies", {"partitions[0].topology": "nvl"}, "partitions[0].topology", "names a topology of `topologies`, which the spec has none of"),
    Bad("partition-topology-in-extra", {"topologies": [TREE, FLAT], "partitions[0].extra": ["Topology=plain"]}, "partitions[0].extra[0]", "set it through its own field (topology)"),
    Bad("small-nodeset-beside-block-nodeset-in-named-topology", {"nodesets[0].replicas": 4, "nodesets[1]": {**GB200, "mode": "all-matching-nodes"}, "partitions[0].nodesets[1]": "gb200", "partitions[0].topology": "nvl", "topologies": [TREE, {"name": "nvl", "plugin": "block", "labelKeys": ["c"], "blockSizes": [18, 36]}]}, "partitions[0].nodesets[0]", "fewer than the base block size 18 (topologies[1].blockSizes[0])"),
    # ----- cgroup, scripts, pyxis, escape hatches
    Bad("zero-allowed-ram", {"cgroup.allowedRamSpace": 0}, "cgroup.allowedRamSpace", "greater than 0"),
    Bad("allowed-ram-over-100", {"cgroup.allowedRamSpace": 150}, "cgroup.allowedRamSpace", "less than or equal to 100"),
    Bad("unknown-cgroup-plugin", {"cgroup.plugin": "cgroup/v3"}, "cgroup.plugin", "'cgroup/v2', 'cgroup/v1', 'autodetect' or 'disabled'"),
    Bad("prolog-without-shebang", {"scripts.prolog": {"00-a.sh": "echo hi"}}, "scripts.prolog.00-a.sh", "a script must start with '#!'"),
    Bad("epilog-without-shebang", {"scripts.epilog": {"99-z.sh": "echo bye"}}, "scripts.epilog.99-z.sh", "a script must start with '#!'"),
    Bad("prolog-name-with-slash", {"scripts.prolog": {"../x.sh": "#!/bin/sh\n"}}, "scripts.prolog.../x.sh", "a file name without '/'"),
    Bad("job-submit-without-modify", {"scripts.jobSubmitLua": LUA}, "scripts.jobSubmitLua", "must define function slurm_job_modify"),
    Bad("pyxis-bad-arg", {"pyxis": {"enabled": True, "args": ["--runtime /x"]}}, "pyxis.args[0]", "one `name=value` argument"),
    Bad("slurm-conf-line-with-newline", {"controller.extraSlurmConf": ["A=1\nB=2"]}, "controller.extraSlurmConf[0]", "control character U+000A: Slurm reads a line up to its newline"),
    # ----- "lines smuggled into generated files": values checked as a whole, not at their start
    Bad("slurm-conf-line-with-carriage-return", {"controller.extraSlurmConf": ["A=1\rB=2"]}, "controller.extraSlurmConf[0]", "use printable characters only"),
    Bad("slurm-conf-password-word", {"controller.extraSlurmConf": ["DebugFlags=Backfill AccountingStoragePass=hunter2"]}, "controller.extraSlurmConf[0]", "passwords come from a Secret"),
    Bad("slurmdbd-password-second-word", {"accounting.extraSlurmdbdConf": ["DebugLevel=info StoragePass=hunter2"]}, "accounting.extraSlurmdbdConf[0]", "passwords come from a Secret"),
    Bad("slurmdbd-two-settings-on-a-line", {"accounting.extraSlurmdbdConf": ["DebugLevel=info CommitDelay=1"]}, "accounting.extraSlurmdbdConf[0]", "one `Key=Value` per line, without spaces; got 2 words"),
    Bad("slurmdbd-rendered-key", {"accounting.extraSlurmdbdConf": ["StorageHost=evil.example"]}, "accounting.extraSlurmdbdConf[0]", "StorageHost is rendered by sunk"),
    # ----- "settings that contradict each other and pass"
    Bad("cpu-nodeset-with-the-gpu-nodesets-name-as-feature", {"nodesets[0].features": ["gpu"], "nodesets[1]": GPU, "partitions[1]": {"name": "gpu", "nodesets": ["gpu"]}}, "nodesets[0].features[0]", "'gpu' is NodeSet gpu's name, so these nodes would join its partitions; choose a feature that names no NodeSet"),
    Bad("two-all-matching-nodesets-on-the-same-nodes", {"nodesets[0]": {"name": "a", "mode": "all-matching-nodes", "cpus": 4, "memoryMib": 4096, "nodeSelector": {"pool": "x"}}, "nodesets[1]": {"name": "b", "mode": "all-matching-nodes", "cpus": 4, "memoryMib": 4096, "nodeSelector": {"pool": "x", "zone": "1"}}, "partitions[0].nodesets": ["a", "b"]}, "nodesets[1].nodeSelector", "one Node would run two slurmd with one Slurm node name (the Node's). Give them a nodeSelector key with different values"),
    Bad("slurmd-memory-limit-under-real-memory", {"nodesets[0].memoryMib": 65536, "nodesets[0].instanceType": "CPU-192", "nodesets[0].resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"memory": "1Gi"}}}, "nodesets[0].resources.limits.memory", "1Gi is below memoryMib 65536 (the RealMemory Slurm hands to jobs in this container); use at least 65536Mi"),
    # ----- "mount clashes caught only by the operator after pulumi up"
    Bad("nodeset-volume-on-etc-slurm", {"nodesets[0].volumes": [{"name": "v", "mountPath": "/etc/slurm", "emptyDir": True}]}, "nodesets[0].volumes[0].mountPath", "/etc/slurm would hide or sit inside sunk's own mount /etc/slurm"),
    Bad("nodeset-volume-under-run-munge", {"nodesets[0].volumes": [{"name": "v", "mountPath": "/run/munge/x", "emptyDir": True}]}, "nodesets[0].volumes[0].mountPath", "sit inside sunk's own mount /run/munge"),
    Bad("nodeset-volume-reserved-name", {"nodesets[0].volumes": [{"name": "sunk-spool", "mountPath": "/x", "emptyDir": True}]}, "nodesets[0].volumes[0].name", "'sunk-spool' is sunk's own in the slurmd pod (sunk names its volumes sunk-* and shared-*)"),
    Bad("nodeset-volume-trailing-slash", {"nodesets[0].volumes": [{"name": "v", "mountPath": "/scratch/", "emptyDir": True}]}, "nodesets[0].volumes[0].mountPath", "no trailing '/'"),
    Bad("host-path-dot-dot", {"nodesets[0].volumes": [{"name": "v", "mountPath": "/scratch", "hostPath": "/srv/../etc"}]}, "nodesets[0].volumes[0].hostPath.path", "'.' and '..' segments are not allowed"),
    Bad("shared-volume-on-etc-slurm", {"sharedVolumes": [{"name": "home", "mountPath": "/etc/slurm", "existingClaim": "h"}]}, "sharedVolumes[0].mountPath", "/etc/slurm would hide or sit inside sunk's own mount /etc/slurm"),
    Bad("nodeset-volume-where-a-shared-volume-mounts", {"sharedVolumes": [{"name": "home", "mountPath": "/home", "existingClaim": "h"}], "nodesets[0].volumes": [{"name": "v", "mountPath": "/home", "emptyDir": True}]}, "nodesets[0].volumes[0].mountPath", "/home is also where shared volume home mounts on compute; one path, one volume"),
    # ----- "numbers beyond what Slurm or Kubernetes accept"
    Bad("cpus-beyond-slurm", {"nodesets[0].cpus": 10**20}, "nodesets[0].cpus", "less than or equal to 65533"),
    Bad("memory-beyond-kubernetes", {"nodesets[0].memoryMib": 1e25}, "nodesets[0].memoryMib", "a whole number up to 1099511627776 is required, not a number with a fraction or exponent (1e+25)"),
    Bad("usage-factor-infinite", {"accounting.enabled": True, "qos": [{"name": "low", "priority": 1, "usageFactor": float("inf")}]}, "qos[0].usageFactor", "finite number"),
    Bad("weight-beyond-slurm", {"nodesets[0].weight": 2**40}, "nodesets[0].weight", "less than or equal to 65533"),
    # ----- "values Kubernetes rejects", checked before any resource exists
    Bad("label-key-with-space", {"labels": {"team name": "x"}}, "labels.team name", "'team name' is not a Kubernetes label key"),
    Bad("label-value-too-long", {"labels": {"team": "x" * 64}}, "labels.team", "is not a Kubernetes label value: up to 63"),
    Bad("node-selector-bad-prefix", {"nodesets[0].nodeSelector": {"Example.COM/pool": "a"}}, "nodesets[0].nodeSelector.Example.COM/pool", "prefix a DNS subdomain"),
    Bad("toleration-bad-key", {"nodesets[0].tolerations": [{"key": "gpu/", "operator": "Exists"}]}, "nodesets[0].tolerations[0].key", "is not a Kubernetes label key"),
    Bad("storage-class-uppercase", {"controller.stateStorage.storageClass": "Fast_SSD"}, "controller.stateStorage.storageClass", "a DNS-1123 subdomain"),
    Bad("prolog-bigger-than-a-config-map", {"scripts.prolog": {"00-big.sh": "#!/bin/sh\n" + "#" * 1_000_000}}, "scripts.prolog.00-big.sh", "1000010 bytes; each becomes one ConfigMap, which holds at most 1000000"),
    Bad("s6-scripts-bigger-than-annotations", {"nodesets[0].s6Scripts": {"big": "#!/bin/sh\n" + "#" * 200_000}}, "nodesets[0].s6Scripts", "pod annotations carry them and hold at most 262144 in all"),
    # ----- "snake_case keys accepted beside camelCase ones"
    Bad("snake-case-twin-of-a-field", {"nodesets[0].memory_mib": 65536}, "nodesets[0].memory_mib", "unknown field; did you mean memoryMib?"),
    Bad("partition-extra-default", {"partitions[0].extra": ["Default=YES"]}, "partitions[0].extra[0]", "Default is rendered by sunk on every PartitionName line; set it through its own field (default)"),
    Bad("partition-extra-nodes", {"partitions[0].extra": ["Nodes=ALL"]}, "partitions[0].extra[0]", "Nodes is rendered by sunk on every PartitionName line; set it through its own field (nodesets)"),
    Bad("slurmdbd-conf-storage-pass", {"accounting.extraSlurmdbdConf": ["StoragePass=hunter2"]}, "accounting.extraSlurmdbdConf[0]", "passwords come from a Secret (accounting.external.passwordSecret)"),
    Bad("cgroup-conf-not-a-setting", {"extraConfig.cgroupConf": ["just words"]}, "extraConfig.cgroupConf[0]", "one configuration line `Key=Value ...`"),
    Bad("plugstack-bad-line", {"extraConfig.plugstackConf": ["load x.so"]}, "extraConfig.plugstackConf[0]", "`required|optional <plugin.so> [args]`, `include <glob>`"),
    # ----- services: controller, accounting, restapi, login
    Bad("mariadb-limit-under-buffer-pool", {"accounting.mariadb.resources": {"limits": {"memory": "2Gi"}}}, "accounting.mariadb.resources.limits.memory", "use at least 2560Mi"),
    Bad("mariadb-request-under-buffer-pool", {"accounting.mariadb.resources": {"requests": {"memory": "1Gi"}, "limits": {"memory": "3Gi"}}}, "accounting.mariadb.resources.requests.memory", "request at least 2048Mi"),
    Bad("negative-state-storage", {"controller.stateStorage.size": "-1Gi"}, "controller.stateStorage.size", "a Kubernetes quantity such as 500m, 2, 512Mi or 10Gi"),
    Bad("zero-state-storage", {"controller.stateStorage.size": "0Gi"}, "controller.stateStorage.size", "a size must be positive, such as 10Gi"),
    Bad("bad-cpu-request", {"controller.resources": {"requests": {"cpu": "lots"}}}, "controller.resources.requests.cpu", "a Kubernetes quantity"),
    Bad("zero-mariadb-storage", {"accounting.mariadb.storageSize": "0"}, "accounting.mariadb.storageSize", "a size must be positive"),
    Bad("external-db-without-password", {"accounting.external": {"host": "db.example.com"}}, "accounting.external.passwordSecret", "required field is missing (Secret holding the password"),
    Bad("external-db-port-zero", {"accounting.external": {"host": "db", "port": 0, "passwordSecret": SECRET}}, "accounting.external.port", "greater than or equal to 1"),
    Bad("external-db-bad-host", {"accounting.external": {"host": "db host", "passwordSecret": SECRET}}, "accounting.external.host", "a host name or IP address"),
    Bad("external-db-without-accounting", {"accounting": {"enabled": False, "external": {"host": "db", "passwordSecret": SECRET}}, "scheduling.preemptType": "none"}, "accounting.external", "only used when accounting is enabled"),
    Bad("password-secret-bad-name", {"accounting.external": {"host": "db", "passwordSecret": {"name": "DB_Secret", "key": "p"}}}, "accounting.external.passwordSecret.name", "a DNS-1123 subdomain"),
    Bad("zero-restapi-replicas", {"restapi.replicas": 0}, "restapi.replicas", "greater than or equal to 1"),
    Bad("zero-login-replicas", {"login.replicas": 0}, "login.replicas", "greater than or equal to 1"),
    Bad("unknown-service-type", {"login.serviceType": "Ingress"}, "login.serviceType", "'LoadBalancer', 'NodePort' or 'ClusterIP'"),
    Bad("private-ssh-key", {"login.authorizedKeys": ["-----BEGIN OPENSSH PRIVATE KEY-----"]}, "login.authorizedKeys[0]", "is not an OpenSSH public key (`ssh-ed25519 AAAA... comment`)"),
    Bad("ssh-key-unknown-type", {"login.authorizedKeys": [KEY.replace("ssh-ed25519", "ssh-dss")]}, "login.authorizedKeys[0]", "is not an OpenSSH public key"),
    Bad("cidr-with-host-bits", {"login.sourceRanges": ["10.0.0.1/8"]}, "login.sourceRanges[0]", "is not a CIDR such as 203.0.113.0/24"),
    Bad("cidr-garbage", {"login.sourceRanges": ["office"]}, "login.sourceRanges[0]", "is not a CIDR such as 203.0.113.0/24"),
    Bad("source-ranges-without-load-balancer", {"login": {"serviceType": "ClusterIP", "sourceRanges": ["203.0.113.0/24"]}}, "login.sourceRanges", "only applies to serviceType LoadBalancer, not ClusterIP"),
    Bad("registry-with-trailing-slash", {"images.registry": "registry.example.com/"}, "images.registry", "a registry and optional path such as registry.example.com:5000/hpc"),
    Bad("registry-with-scheme", {"images.registry": "https://registry.example.com"}, "images.registry", "(no trailing '/')"),
    # ----- auth (KeySource and LdapSpec rules)
    Bad("unknown-auth-type", {"auth.type": "kerberos"}, "auth.type", "'munge' or 'slurm'"),
    Bad("key-generate-and-existing-secret", {"auth.key": {"generate": True, "existingSecret": {"name": "k", "key": "munge.key"}}}, "auth.key.generate", "give one source (drop generate or existingSecret)"),
    Bad("key-neither-source", {"auth.jwt": {"generate": False}}, "auth.jwt.existingSecret", "required when generate is false (or set generate: true)"),
    Bad("ldap-bind-dn-without-password", {"auth.ldap": {**LDAP, "bindDn": "cn=sssd,dc=acme,dc=example"}}, "auth.ldap.bindPasswordSecret", "required when bindDn is set"),
    Bad("ldap-password-without-bind-dn", {"auth.ldap": {**LDAP, "bindPasswordSecret": SECRET}}, "auth.ldap.bindDn", "required when bindPasswordSecret is set"),
    Bad("ldap-http-uri", {"auth.ldap": {**LDAP, "uris": ["http://ldap.acme.example"]}}, "auth.ldap.uris[0]", "an LDAP URI such as ldaps://ldap.example.com:636"),
    Bad("ldap-no-uris", {"auth.ldap": {**LDAP, "uris": []}}, "auth.ldap.uris", "at least 1 item"),
    Bad("ldap-bad-base-dn", {"auth.ldap": {**LDAP, "baseDn": "acme.example"}}, "auth.ldap.baseDn", "an LDAP DN such as dc=example,dc=com"),
    Bad("ldap-bad-filter", {"auth.ldap": {**LDAP, "userFilter": "objectClass=person"}}, "auth.ldap.userFilter", "an LDAP filter such as (objectClass=posixAccount)"),
]
# fmt: on


def _problems(data: dict[str, Any]) -> list[str]:
    with pytest.raises(SpecError) as info:
        load_spec(data)
    return info.value.problems


def test_base_is_valid() -> None:
    assert load_spec(MINIMAL).nodesets[0].name == "cpu"


def test_cases_are_distinct_and_many() -> None:
    assert len(CASES) >= 40
    assert len({c.id for c in CASES}) == len(CASES)
    changes = [repr(sorted(c.changes.items(), key=lambda kv: kv[0])) for c in CASES]
    assert len(set(changes)) == len(changes), "two cases make the same change"


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_invalid_spec_names_path_and_remedy(case: Bad) -> None:
    changes = case.changes
    blocks = "block" in repr(changes) and "topologies" not in changes  # named topologies: 26.05
    if blocks and "slurm" not in changes and case.path != "topology.plugin":
        changes = {"slurm": {"version": "24.11"}, **changes}  # the release block topology runs on
    problems = _problems(patched(changes))
    assert len(problems) == 1, problems
    path, _, message = problems[0].partition(": ")
    assert path == case.path, problems[0]
    assert case.valid in message, problems[0]


def test_every_field_problem_is_reported_at_once() -> None:
    data = patched({"nodesets[0].cpus": 0, "login.sourceRanges": ["nope"], "topology.plugin": "mesh"})
    problems = _problems(data)
    assert [p.partition(":")[0] for p in problems] == ["login.sourceRanges[0]", "nodesets[0].cpus", "topology.plugin"]


def test_every_cross_reference_problem_is_reported_at_once() -> None:
    data = patched(
        {
            "partitions[0].nodesets[1]": "gpu",
            "partitions[0].allowQos": ["gold"],
            "partitions[1]": {"name": "batch", "nodesets": ["cpu"]},
            "qos": [{"name": "high", "preempt": ["low"]}],
        }
    )
    assert [p.partition(":")[0] for p in _problems(data)] == [
        "partitions[1].name",
        "partitions[0].nodesets[1]",
        "partitions[0].allowQos[0]",
        "qos[0].preempt[0]",
    ]


def test_every_nodeset_rule_problem_is_reported_at_once() -> None:
    data = patched(
        {
            "nodesets[0].instanceType": "CPU-64",
            "nodesets[0].cpus": 96,
            "nodesets[0].memoryMib": 300_000,
            "nodesets[0].features": ["cpu"],
        }
    )
    assert len(_problems(data)) == 3


def test_not_a_mapping() -> None:
    with pytest.raises(SpecError) as info:
        load_spec(["name", "research"])
    assert info.value.problems == ["(root): expected a mapping of cluster settings, got list"]


def test_error_text_lists_each_problem_on_its_own_line() -> None:
    with pytest.raises(SpecError) as info:
        load_spec(patched({"nodesets[0].cpus": 0, "restapi.replicas": 0}), source="stacks/x.yaml")
    text = str(info.value)
    assert text.splitlines()[0] == "stacks/x.yaml: 2 problem(s)"
    assert "  - nodesets[0].cpus: 0 is too small; must be greater than 0" in text.splitlines()


def test_patched_helper_appends_sets_and_deletes() -> None:
    data = patched({"nodesets[1]": {"name": "b"}, "partitions[0].nodesets[1]": "b", "tenant": DELETE, "x.y": 1})
    assert [n["name"] for n in data["nodesets"]] == ["cpu", "b"]
    assert data["partitions"][0]["nodesets"] == ["cpu", "b"]
    assert "tenant" not in data and data["x"] == {"y": 1}
    assert MINIMAL["nodesets"] == [{"name": "cpu", "cpus": 4, "memoryMib": 4096}]


def test_globex_prod_keeps_its_cpu_nodes_out_of_the_gpu_partition() -> None:
    raw = yaml.safe_load(stack_path("globex-prod", FIXTURE_STACKS).read_text())["config"][CLUSTER_KEY]
    assert load_spec(raw).topology.block_sizes == [18, 36, 72]
    raw["partitions"][0]["nodesets"].append("cpu")  # gpu partition: gb200 (all-matching-nodes) and cpu
    problems = _problems(raw)
    assert len(problems) == 1 and problems[0].startswith("partitions[0].nodesets[1]: cpu has 4 replicas"), problems
