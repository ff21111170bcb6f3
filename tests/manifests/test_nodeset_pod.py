"""The pure slurmd pod builder: contents, strict Kubernetes validity, and the template hash."""

from __future__ import annotations

from typing import Any

import kubernetes_validate
import pytest
from sunk.runtime.operator.admission import pod_requests, shortfalls

from sunk import keys, naming
from sunk.images import S6_INIT
from sunk.manifests.config import config_maps, nodeset_hash
from sunk.manifests.nodeset_pod import (
    headless_service,
    nodeset_pod,
    template_hash,
)
from sunk.render import node_conf
from sunk.spec.nodeset import INSTANCE_TYPES
from sunk.stackfile import list_stacks, load_stack
from tests.support.nodeset_objects import resource_spec
from tests.support.stacks import FIXTURE_STACKS

K8S = "1.30"
CLUSTER = load_stack("acme-dev", FIXTURE_STACKS).spec
KEYS = {cm["metadata"]["name"]: list(cm["data"]) for cm in config_maps(CLUSTER)}
"""The keys of the cluster's per-file ConfigMaps, as the operator reads them."""
OWNER = {"name": "research-gpu", "uid": "u-1"}


def gpu(**kw: Any) -> Any:
    return resource_spec(CLUSTER, "gpu", **kw)


def build(spec: Any = None, **kw: Any) -> dict[str, Any]:
    args: dict[str, Any] = {"namespace": "acme-research", "config_keys": KEYS, "owner": OWNER}
    args.update(kw)
    if "kube_node" not in args and "ordinal" not in args:
        args["ordinal"] = 1
    return nodeset_pod(spec or gpu(), **args)


def container(pod: dict[str, Any], name: str) -> dict[str, Any]:
    every = pod["spec"]["containers"] + pod["spec"].get("initContainers", [])
    return next(c for c in every if c["name"] == name)


def test_validates_strictly_and_is_deterministic() -> None:
    pod = build()
    kubernetes_validate.validate(pod, K8S, strict=True)
    assert build() == pod
    kubernetes_validate.validate(headless_service(gpu(), namespace="acme-research", owner=OWNER), K8S, strict=True)


def test_identity_hostname_labels_and_hashes() -> None:
    pod = build()
    meta, spec = pod["metadata"], pod["spec"]
    assert meta["name"] == "research-gpu-1"
    assert spec["hostname"] == "gpu-1"
    assert spec["subdomain"] == "research-gpu"
    assert meta["labels"][keys.NODESET] == "gpu"
    assert meta["labels"][keys.CLUSTER] == "research"
    assert meta["labels"][keys.NODE] == "gpu-1"
    assert meta["annotations"][keys.CONFIG_HASH] == nodeset_hash(CLUSTER, CLUSTER.nodeset("gpu"))
    assert meta["annotations"][keys.TEMPLATE_HASH] == template_hash(gpu(), KEYS)
    assert meta["ownerReferences"][0]["uid"] == "u-1"
    assert meta["ownerReferences"][0]["controller"] is True


def test_slurmd_runs_as_a_dynamic_node() -> None:
    slurmd = container(build(), "slurmd")
    assert slurmd["command"] == ["slurmd", "-D", "-Z", "-N", "gpu-1", "--conf", node_conf(gpu())]
    assert "Gres=gpu:h100:2" in slurmd["command"][-1]
    assert "Feature=gpu" in slurmd["command"][-1]


def _config_sources(pod: dict[str, Any]) -> list[dict[str, Any]]:
    etc = next(v for v in pod["spec"]["volumes"] if v["name"] == "sunk-slurm-etc")
    return [s["configMap"] for s in etc["projected"]["sources"] if "configMap" in s]


def test_each_config_file_is_one_source_of_its_own_config_map() -> None:
    pod = build()
    sources = _config_sources(pod)
    assert all(len(s["items"]) == 1 for s in sources)
    files = {s["items"][0]["path"]: (s["name"], s["items"][0]["key"], s["items"][0].get("mode")) for s in sources}
    assert files == {
        "cgroup.conf": ("research-cgroup-conf", "cgroup.conf", None),
        "gres.conf": ("research-gres-gpu-conf", "gres-gpu.conf", None),
        "plugstack.conf": ("research-plugstack-conf", "plugstack.conf", None),
        "oci.conf": ("research-oci-conf", "oci.conf", None),
        "prolog.d/00-mark.sh": ("research-prolog-00-mark-sh", "00-mark.sh", 0o755),
        "slurm.conf": ("research-slurm-conf", "slurm.conf", None),
        # slurmd reads topology.conf too (the operator's ConfigMap, as slurmctld's)
        "topology.conf": ("research-topology", "topology.conf", None),
    }
    no_topology = {s["items"][0]["path"] for s in _config_sources(build(gpu(topology={"plugin": "none"})))}
    assert "topology.conf" not in no_topology
    mounts = {m["mountPath"]: m for m in container(pod, "slurmd")["volumeMounts"]}
    assert mounts["/etc/slurm"]["readOnly"] is True


def test_the_pod_mounts_exactly_the_config_files_of_the_resource() -> None:
    """The builder trusts configFiles (the components chose the node-side files) and takes each
    ConfigMap's one key as the operator read it (and topology.conf when the cluster has a topology:
    here it has none)."""
    spec = gpu(configFiles={"slurm.conf": "x-slurm", "epilog.d/99-clean.sh": "x-clean"}, topology={"plugin": "none"})
    pod = build(spec, config_keys={"x-slurm": ["slurm.conf"], "x-clean": ["clean"], "unrelated": ["a", "b"]})
    assert [(s["name"], s["items"]) for s in _config_sources(pod)] == [
        ("x-clean", [{"key": "clean", "path": "epilog.d/99-clean.sh", "mode": 0o755}]),
        ("x-slurm", [{"key": "slurm.conf", "path": "slurm.conf"}]),
    ]
    with pytest.raises(ValueError, match=r"ConfigMap x-clean .* not found"):
        build(spec, config_keys={"x-slurm": ["slurm.conf"]})
    with pytest.raises(ValueError, match=r"ConfigMap x-slurm .*exactly one key.* it has 2: a, b"):
        build(spec, config_keys={"x-slurm": ["a", "b"], "x-clean": ["clean"]})


def test_munge_runs_as_a_native_sidecar_without_privilege() -> None:
    pod = build()
    munge = container(pod, "munge")
    assert munge in pod["spec"]["initContainers"]
    assert munge["restartPolicy"] == "Always"
    assert munge["securityContext"]["allowPrivilegeEscalation"] is False
    assert "privileged" not in munge["securityContext"]
    key = next(v["secret"] for v in pod["spec"]["volumes"] if v["name"] == "sunk-munge-key")
    assert key == {"secretName": "research-auth", "items": [{"key": "munge.key", "path": "munge.key", "mode": 0o400}]}
    other = next(
        v["secret"] for v in build(gpu(authSecretKey="key"))["spec"]["volumes"] if v["name"] == "sunk-munge-key"
    )
    assert other["items"][0]["key"] == "key"
    assert container(pod, "slurmd")["securityContext"] == {"privileged": True, "seccompProfile": {"type": "Unconfined"}}
    assert (
        munge["securityContext"]["seccompProfile"]
        == pod["spec"]["securityContext"]["seccompProfile"]
        == {"type": "RuntimeDefault"}
    )
    # JWT key never reaches compute.
    assert "research-jwt" not in str(pod)


def test_auth_slurm_projects_the_key_and_has_no_munge() -> None:
    pod = build(gpu(authType="slurm"))
    kubernetes_validate.validate(pod, K8S, strict=True)
    assert "initContainers" not in pod["spec"]
    etc = next(v for v in pod["spec"]["volumes"] if v["name"] == "sunk-slurm-etc")
    secret = etc["projected"]["sources"][-1]["secret"]
    assert secret == {"name": "research-auth", "items": [{"key": "slurm.key", "path": "slurm.key", "mode": 0o400}]}
    renamed = build(gpu(authType="slurm", authSecretKey="k"))["spec"]["volumes"][0]["projected"]["sources"][-1]
    assert renamed["secret"]["items"][0]["key"] == "k"


def test_exclusive_requests_the_slurm_node_and_its_gpus() -> None:
    pod = build(gpu(resourceMode="exclusive"))
    res = container(pod, "slurmd")["resources"]
    assert res["requests"] == {"cpu": "16", "memory": "65536Mi", "nvidia.com/gpu": "2"}
    assert res["limits"] == {"memory": "66560Mi", "nvidia.com/gpu": "2"}
    assert pod["metadata"]["labels"][keys.RESOURCE_MODE] == "exclusive"
    own = gpu(resources={"requests": {"cpu": "2", "memory": "1Gi"}, "limits": {"memory": "65Gi"}})
    assert container(build(own), "slurmd")["resources"]["requests"]["cpu"] == "2"


def test_shared_requests_only_slurmd_overhead_and_no_gpus() -> None:
    pod = build()  # acme-dev's gpu NodeSet is shared
    kubernetes_validate.validate(pod, K8S, strict=True)
    res = container(pod, "slurmd")["resources"]
    # No GPU request: the device plugin keeps all of them for pods. No CPU limit; the memory
    # limit is RealMemory plus headroom, since Slurm jobs run in this pod's cgroup.
    assert res == {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"memory": "66560Mi"}}
    assert pod["metadata"]["labels"][keys.RESOURCE_MODE] == "shared"
    # Slurm knows too: placeholder jobs can ask for --constraint=sunk_shared.
    assert "Feature=gpu,sunk_shared" in container(pod, "slurmd")["command"][-1]
    assert "Feature=gpu " in container(build(gpu(resourceMode="exclusive")), "slurmd")["command"][-1] + " "
    # The shared Nodes' NoSchedule taint (docs/how-to/inference.md) is tolerated by slurmd, the
    # Node's own pod, and by no exclusive NodeSet's.
    assert keys.SHARED_TOLERATION in pod["spec"]["tolerations"]
    exclusive = build(gpu(resourceMode="exclusive"))["spec"].get("tolerations") or []
    assert keys.SHARED not in [t.get("key") for t in exclusive]
    tuned = container(build(gpu(slurmdOverhead={"cpu": "2", "memory": "3Gi"})), "slurmd")["resources"]
    assert tuned["requests"] == {"cpu": "2", "memory": "3Gi"}


def test_resource_mode_rolls_the_pods() -> None:
    assert template_hash(gpu(resourceMode="exclusive"), KEYS) != template_hash(gpu(), KEYS)


def test_volumes_shared_and_nodeset() -> None:
    spec = gpu(
        sharedVolumes=[
            {"name": "home", "mountPath": "/home", "existingClaim": "homes"},
            {"name": "data", "mountPath": "/data", "create": {"size": "1Ti"}, "readOnly": True},
            {"name": "logins", "mountPath": "/l", "existingClaim": "x", "mountOn": ["login"]},
        ],
        volumes=[
            {"name": "scratch", "mountPath": "/scratch", "hostPath": "/mnt/nvme"},
            {"name": "cache", "mountPath": "/cache", "emptyDir": True},
            {"name": "models", "mountPath": "/models", "claimName": "models", "readOnly": True},
            {"name": "extra", "mountPath": "/opt/extra", "configMap": "extra-cm"},
        ],
    )
    pod = build(spec)
    kubernetes_validate.validate(pod, K8S, strict=True)
    vols = {v["name"]: v for v in pod["spec"]["volumes"]}
    assert vols["shared-home"]["persistentVolumeClaim"] == {"claimName": "homes", "readOnly": False}
    assert vols["shared-data"]["persistentVolumeClaim"] == {"claimName": "research-data", "readOnly": True}
    assert "shared-logins" not in vols
    assert vols["scratch"]["hostPath"] == {"path": "/mnt/nvme"}
    assert vols["cache"]["emptyDir"] == {}
    assert vols["extra"]["configMap"] == {"name": "extra-cm"}
    mounts = {m["mountPath"]: m for m in container(pod, "slurmd")["volumeMounts"]}
    assert mounts["/data"]["readOnly"] is True
    assert mounts["/models"]["name"] == "models"


def test_volume_clash_is_refused_by_the_nodeset_model_before_any_pod() -> None:
    """Mount clashes the operator alone would catch, after `pulumi up`: the NodeSet (spec and custom resource)
    refuses them, so `pulumi up` never creates a NodeSet the operator can't build pods for."""
    with pytest.raises(ValueError, match="is sunk's own in the slurmd pod"):
        gpu(volumes=[{"name": "sunk-spool", "mountPath": "/x", "emptyDir": True}])
    with pytest.raises(ValueError, match="would hide or sit inside sunk's own mount /etc/slurm"):
        gpu(volumes=[{"name": "etc", "mountPath": "/etc/slurm", "emptyDir": True}])
    with pytest.raises(ValueError, match="would hide or sit inside sunk's own mount /run/munge"):
        gpu(volumes=[{"name": "run", "mountPath": "/run", "emptyDir": True}])
    with pytest.raises(ValueError, match=r"'\.' and '\.\.' segments are not allowed"):
        gpu(volumes=[{"name": "h", "mountPath": "/data", "hostPath": "/srv/../etc"}])
    with pytest.raises(ValueError, match="no trailing '/'"):
        gpu(volumes=[{"name": "h", "mountPath": "/data/", "emptyDir": True}])


def test_sidecars_and_s6_scripts() -> None:
    spec = gpu(
        sidecars=[
            {
                "name": "exporter",
                "image": {"repository": "ghcr.io/x/dcgm", "tag": "3"},
                "args": ["--port=9400"],
                "env": [{"name": "A", "value": "b"}],
            }
        ],
        s6Scripts={"sshd": "#!/bin/sh\nexec /usr/sbin/sshd -D\n"},
    )
    pod = build(spec)
    kubernetes_validate.validate(pod, K8S, strict=True)
    exporter = container(pod, "exporter")
    assert exporter["image"] == "ghcr.io/x/dcgm:3"
    assert exporter["env"] == [{"name": "A", "value": "b"}]
    assert exporter["resources"]["requests"] == {"cpu": "50m", "memory": "64Mi"}
    assert "securityContext" not in exporter
    assert pod["metadata"]["annotations"]["s6.slurm.sunk.dev/sshd"].startswith("#!/bin/sh")
    s6 = next(v for v in pod["spec"]["volumes"] if v["name"] == "sunk-s6")
    assert s6["downwardAPI"]["items"][0]["path"] == "sshd/run"
    assert container(pod, "slurmd")["command"][:2] == ["/usr/local/sbin/sunk-init", "slurmd"]
    assert not any(v["name"] == "sunk-s6-oneshots" for v in pod["spec"]["volumes"])


def test_s6_oneshots_reach_cont_init_d_and_start_slurmd_under_sunk_init() -> None:
    """One-shots alone are enough for sunk-init; each is a file of its own (sunk-init runs them in
    name order), in a volume apart from the services' so neither hides the other's folder."""
    spec = gpu(s6Oneshots={"20-b": "#!/bin/sh\necho b\n", "10-a": "#!/bin/sh\necho a\n"})
    pod = build(spec)
    kubernetes_validate.validate(pod, K8S, strict=True)
    assert container(pod, "slurmd")["command"][:2] == [S6_INIT, "slurmd"]
    assert pod["metadata"]["annotations"]["s6-oneshot.slurm.sunk.dev/10-a"] == "#!/bin/sh\necho a\n"
    volume = next(v for v in pod["spec"]["volumes"] if v["name"] == "sunk-s6-oneshots")
    assert volume["downwardAPI"]["items"] == [
        {
            "path": name,
            "fieldRef": {"fieldPath": f"metadata.annotations['s6-oneshot.slurm.sunk.dev/{name}']"},
            "mode": 0o755,
        }
        for name in ("10-a", "20-b")
    ]
    mount = next(m for m in container(pod, "slurmd")["volumeMounts"] if m["name"] == "sunk-s6-oneshots")
    assert mount == {"name": "sunk-s6-oneshots", "mountPath": "/etc/cont-init.d", "readOnly": True}
    assert not any(v["name"] == "sunk-s6" for v in pod["spec"]["volumes"])
    both = build(gpu(s6Oneshots={"a": "#!/bin/sh\n"}, s6Scripts={"b": "#!/bin/sh\n"}))
    assert {"sunk-s6", "sunk-s6-oneshots"} <= {v["name"] for v in both["spec"]["volumes"]}
    assert container(build(), "slurmd")["command"][0] == "slurmd"  # neither: slurmd itself
    cpu = build(resource_spec(CLUSTER, "cpu"))  # acme-dev's cpu NodeSet has a one-shot
    kubernetes_validate.validate(cpu, K8S, strict=True)
    assert container(cpu, "slurmd")["command"][0] == S6_INIT


def test_pods_select_their_architecture_beside_the_nodesets_selector() -> None:
    assert build()["spec"]["nodeSelector"] == {
        "kubernetes.io/arch": "amd64",
        "node.kubernetes.io/instance-type": "H100x8",
    }
    arm = gpu(architecture="arm64", nodeSelector={})
    pod = build(arm)
    kubernetes_validate.validate(pod, K8S, strict=True)
    assert pod["spec"]["nodeSelector"] == {"kubernetes.io/arch": "arm64"}


def test_all_matching_nodes_pins_to_the_node() -> None:
    spec = gpu(mode="all-matching-nodes", replicas=None, affinity={"podAntiAffinity": {}})
    pod = build(spec, kube_node="gpu-node-7")
    kubernetes_validate.validate(pod, K8S, strict=True)
    assert pod["metadata"]["name"] == "research-gpu-gpu-node-7"
    assert pod["spec"]["hostname"] == "gpu-node-7"
    terms = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms["nodeSelectorTerms"] == [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["gpu-node-7"]}]}
    ]
    assert pod["spec"]["affinity"]["podAntiAffinity"] == {}
    keys = [t.get("key") for t in pod["spec"]["tolerations"]]
    assert keys == [
        "nvidia.com/gpu",
        "slurm.sunk.dev/shared",
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
        "node.kubernetes.io/unschedulable",
    ]
    assert pod["metadata"]["annotations"]["slurm.sunk.dev/kube-node"] == "gpu-node-7"


def test_kube_node_names_that_are_not_hostnames() -> None:
    assert naming.slurm_node_for_kube_node("node-1") == "node-1"
    dotted = naming.slurm_node_for_kube_node("ip-10-0-0-1.ec2.internal")
    assert dotted.startswith("ip-10-0-0-1-ec2-internal-") and len(dotted) <= 63
    long = naming.slurm_node_for_kube_node("a" * 80)
    assert len(long) <= 63 and long != naming.slurm_node_for_kube_node("a" * 81)


def test_mode_and_member_must_agree() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        nodeset_pod(gpu(), namespace="n", config_keys=KEYS, ordinal=1, kube_node="x")
    with pytest.raises(ValueError, match="kube_node required"):
        nodeset_pod(gpu(mode="all-matching-nodes", replicas=None), namespace="n", config_keys=KEYS, ordinal=0)


def test_template_hash_tracks_pod_inputs_only() -> None:
    base = template_hash(gpu(), KEYS)
    assert template_hash(gpu(configHash="other"), KEYS) != base
    assert template_hash(gpu(slurmdImage="ghcr.io/x/slurmd:2"), KEYS) != base
    more = {**gpu().config_files, "prolog.d/01-more.sh": "research-prolog-01-more-sh"}
    assert template_hash(gpu(configFiles=more), {**KEYS, "research-prolog-01-more-sh": ["01-more.sh"]}) != base
    assert template_hash(gpu(), {**KEYS, "research-slurm-conf": ["renamed"]}) != base
    # Scaling, update strategy and topology do not roll pods.
    assert template_hash(gpu(replicas=7), KEYS) == base
    assert template_hash(gpu(updateStrategy={"maxUnavailable": "50%"}), KEYS) == base
    assert template_hash(gpu(topology={"plugin": "none"}), KEYS) == base
    # Files slurmd does not read do not roll pods either.
    assert template_hash(gpu(), {k: v for k, v in KEYS.items() if k != "research-slurmdbd-conf"}) == base


@pytest.mark.parametrize("stack", list_stacks(FIXTURE_STACKS))
def test_every_shipped_slurmd_pod_fits_its_instance_type(stack: str) -> None:
    """The built pods, summed as a kubelet sums them (runtime/operator/admission.py, not the spec's
    own arithmetic), fit what their instance type gives one pod, and so does the Slurm node."""
    cluster = load_stack(stack, FIXTURE_STACKS).spec
    keys = {cm["metadata"]["name"]: list(cm["data"]) for cm in config_maps(cluster)}
    checked = 0
    for ns in cluster.nodesets:
        if ns.instance_type is None:
            continue
        spec = resource_spec(cluster, ns.name)
        where = {"kube_node": "n1"} if spec.mode == "all-matching-nodes" else {"ordinal": 0}
        pod = nodeset_pod(spec, namespace=cluster.ns, config_keys=keys, **where)
        want = pod_requests(pod)
        avail = INSTANCE_TYPES[ns.instance_type].available
        alloc = {"cpu": avail.cpu_m, "memory": avail.memory_mib * 2**20, "pods": 110}
        if ns.gpus is not None:
            alloc[ns.gpus.resource_name] = avail.gpus
        assert shortfalls(alloc, {}, want) == [], (stack, ns.name)
        # Beside it, Slurm's node must fit too: jobs in exclusive mode are inside the pod's
        # requests; in shared mode a pod Slurm places here may request the whole node.
        if ns.resource_mode == "shared":
            assert ns.cpus * 1000 + want["cpu"] <= avail.cpu_m, (stack, ns.name)
            assert ns.memory_mib * 2**20 + want["memory"] <= avail.memory_mib * 2**20, (stack, ns.name)
        checked += 1
    assert checked == sum(ns.instance_type is not None for ns in cluster.nodesets)


GFD = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.count": "4", "nvidia.com/gpu.replicas": "2"}


def _etc_sources(pod: dict[str, Any]) -> list[dict[str, Any]]:
    etc = next(v for v in pod["spec"]["volumes"] if v["name"] == "sunk-slurm-etc")
    return list(etc["projected"]["sources"])


def _labelled(**gpus: Any) -> Any:
    return gpu(
        mode="all-matching-nodes",
        replicas=None,
        gpus={"type": "h100", "count": 2, "fromNodeLabels": True, **gpus},
    )


def test_gpus_from_node_labels_give_the_pod_its_own_gres() -> None:
    pod = build(_labelled(), kube_node="node-a", node_labels=GFD)
    kubernetes_validate.validate(pod, K8S, strict=True)
    command = container(pod, "slurmd")["command"]
    assert "Gres=gpu:h100_80gb_hbm3:4,shard:8" in command[command.index("--conf") + 1].split()
    gres_conf = pod["metadata"]["annotations"]["slurm.sunk.dev/gres-conf"]
    assert gres_conf.splitlines()[1:] == [
        "Name=gpu Type=h100_80gb_hbm3 File=/dev/nvidia[0-3]",
        "Name=shard Count=8 File=/dev/nvidia[0-3]",
    ]
    sources = _etc_sources(pod)
    # gres.conf comes from the annotation, not from the NodeSet's ConfigMap.
    assert [s for s in _config_sources(pod) if s["items"][0]["path"] == "gres.conf"] == []
    projected = [s["downwardAPI"]["items"] for s in sources if "downwardAPI" in s]
    assert projected == [
        [{"path": "gres.conf", "fieldRef": {"fieldPath": "metadata.annotations['slurm.sunk.dev/gres-conf']"}}]
    ]


def test_a_node_without_labels_or_a_spec_without_the_option_keeps_the_nodeset_gres() -> None:
    plain = build(_labelled(), kube_node="node-b", node_labels={})
    assert "slurm.sunk.dev/gres-conf" in plain["metadata"]["annotations"]
    assert "Gres=gpu:h100:2" in container(plain, "slurmd")["command"][-1].split()
    off = build(gpu(mode="all-matching-nodes", replicas=None), kube_node="node-a", node_labels=GFD)
    assert "slurm.sunk.dev/gres-conf" not in off["metadata"]["annotations"]
    assert not [s for s in _etc_sources(off) if "downwardAPI" in s]


def test_mig_labels_without_nvml_refuse_to_build_naming_the_field() -> None:
    mig = {"nvidia.com/mig.strategy": "single", "nvidia.com/gpu.product": "A100-SXM4-40GB-MIG-1g.5gb",
           "nvidia.com/gpu.count": "7"}  # fmt: skip
    with pytest.raises(ValueError, match=r"^gpus\.autodetect: "):
        build(_labelled(), kube_node="node-m", node_labels=mig)
    pod = build(_labelled(autodetect="nvml"), kube_node="node-m", node_labels=mig)
    assert pod["metadata"]["annotations"]["slurm.sunk.dev/gres-conf"].splitlines()[1:] == ["AutoDetect=nvml"]
