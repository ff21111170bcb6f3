"""slurmd pods of a NodeSet: the pure builder the NodeSet operator calls, one pod per Slurm node.

Slurm nodes are dynamic: each pod runs `slurmd -D -Z -N <node> --conf "<node conf>"`, which
registers the node with slurmctld in ~0.2 s (measured 2026-11 on 24.11) and reaches the NodeSet's
partitions through `NodeSet=<name> Feature=<name>` in slurm.conf. Scaling therefore never edits
slurm.conf nor restarts slurmctld. The pod's hostname is the Slurm node name.

Files in the pod:
- /etc/slurm: one projected volume with a configMap source per entry of the NodeSet's
  configFiles (path -> ConfigMap holding that one file as its only key; the components list the
  node-side files, with this NodeSet's `gres-<nodeset>.conf` as `gres.conf`), topology.conf from
  the operator's ConfigMap when the cluster has a topology (slurmd will not start without it),
  plus, for auth/slurm, `slurm.key` from the auth Secret. The JWT key never reaches a compute pod.
- /etc/munge: the munge key, copied by the munge sidecar (munged insists on owning its key).
- /var/lib/sss/pipes and /var/lib/sss/mc: with the cluster's auth.ldap (spec.sssd), the sockets and
  memory cache of an sssd native sidecar (sunk.manifests.sssd), so job steps run as directory
  users with their groups.
- /etc/cont-init.d/<name> and /etc/services.d/<name>/run: the NodeSet's s6 one-shots and s6
  services, each carried in a pod annotation and projected by the downward API (no extra object
  to create or garbage-collect). With either, slurmd runs under the slurmd image's sunk-init
  (sunk.images.S6_INIT): the one-shots run to completion in name order, then Debian's s6
  supervises the services, and slurmd runs in the foreground.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Mapping
from typing import Any

from sunk import keys, naming
from sunk.images import S6_INIT
from sunk.manifests.podsettings import apply_pod, object_meta
from sunk.manifests.scripts import munge_start, sh
from sunk.manifests.sssd import CLIENT_MOUNTS, sssd_sidecar, sssd_volumes
from sunk.nodeset_resource import API_VERSION, KIND, NodeSetResourceSpec
from sunk.render import node_conf
from sunk.render.files import gres_file
from sunk.render.gres import Gres, node_gres
from sunk.roles import MUNGE_CAPABILITIES
from sunk.spec.base import ResourceList, Resources
from sunk.spec.nodeset import MUNGE_RESOURCES, Sidecar

SLURMD = "slurmd"
MUNGE = "munge"
MUNGE_KEY_DIR = "/etc/munge-key"
MUNGE_RUN = "/run/munge"
S6_SERVICES = "/etc/services.d"
S6_ONESHOTS = "/etc/cont-init.d"
GRES_FILE = "gres.conf"

_EXECUTABLE = 0o755


def _short_hash(text: str, n: int = 8) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:n]


def pod_name(spec: NodeSetResourceSpec, slurm_node: str) -> str:
    """`<cluster>-<slurm node>` in replicas mode (the node already starts with the NodeSet name);
    `<cluster>-<nodeset>-<slurm node>` in all-matching-nodes, where the node is a Kubernetes Node
    name that two NodeSets may share."""
    return naming.nodeset_pod(spec.cluster_name, spec.name, slurm_node, replicas=spec.mode == "replicas")


def service_name(spec: NodeSetResourceSpec) -> str:
    """Headless Service giving each slurmd pod a DNS name `<node>.<service>` (pod subdomain)."""
    return naming.nodeset_service(spec.cluster_name, spec.name)


def selector_labels(spec: NodeSetResourceSpec) -> dict[str, str]:
    return {keys.CLUSTER: spec.cluster_name, keys.NODESET: spec.name}


_HASH_EXCLUDED = {"replicas", "max_nodes", "update_strategy", "topology", "topologies", "topology_extra"}


ConfigKeys = Mapping[str, Collection[str]]
"""The keys of each ConfigMap the operator found, by name."""


def template_hash(spec: NodeSetResourceSpec, config_keys: ConfigKeys) -> str:
    """Hash of every input of the pod template: spec fields that shape the pod (scaling, update
    strategy and topology do not; configFiles does) and the keys of the ConfigMaps it names.
    Equal hash = pod up to date. ConfigMap contents are not inputs: they reach running pods."""
    data = {
        "spec": spec.model_dump(mode="json", by_alias=True, exclude=_HASH_EXCLUDED),
        "keys": {name: sorted(config_keys.get(name) or ()) for name in sorted(set(spec.config_files.values()))},
    }
    return _short_hash(json.dumps(data, sort_keys=True, separators=(",", ":")), 16)


def config_items(spec: NodeSetResourceSpec, config_keys: ConfigKeys) -> list[tuple[str, str, str]]:
    """(path under /etc/slurm, ConfigMap, key) for each of spec.config_files, sorted by path. Each
    ConfigMap holds one file as its only key; a missing one, or one with several keys, is an error
    (the operator waits for the first and reports the second as TemplateValid=False)."""
    out = []
    for path, name in sorted(spec.config_files.items()):
        found = config_keys.get(name)
        if found is None:
            raise ValueError(f"ConfigMap {name} (for {path}) not found")
        keys = sorted(found)
        if len(keys) != 1:
            listed = f": {', '.join(keys)}" if keys else ""
            raise ValueError(
                f"ConfigMap {name} (for {path}) must hold exactly one key, the file; it has {len(keys)}{listed}"
            )
        out.append((path, name, keys[0]))
    return out


def _quantities(rl: ResourceList) -> dict[str, str]:
    return {k: v for k, v in (("cpu", rl.cpu), ("memory", rl.memory)) if v is not None}


def _resources(r: Resources, extra: Mapping[str, int] | None = None) -> dict[str, Any]:
    requests: dict[str, Any] = _quantities(r.requests)
    limits: dict[str, Any] = _quantities(r.limits)
    for name, count in (extra or {}).items():
        # Extended resources (GPUs) cannot be overcommitted: request and limit must be equal.
        requests[name] = limits[name] = str(count)  # a Quantity: some clients refuse a JSON number
    out: dict[str, Any] = {}
    if requests:
        out["requests"] = requests
    if limits:
        out["limits"] = limits
    return out


def slurmd_resources(spec: NodeSetResourceSpec) -> Resources:
    """The spec's resources, or by resourceMode: exclusive requests the whole Slurm node (CPUs,
    RealMemory) so the kubelet reserves what Slurm hands to jobs; shared requests slurmd's own
    overhead. No CPU limit (throttling); memory limit RealMemory plus headroom (jobs run inside)."""
    return spec.slurmd_resources


def slurmd_command(spec: NodeSetResourceSpec, slurm_node: str, gres: Gres | None = None) -> list[str]:
    """`slurmd -D -Z -N <node> --conf "<node conf>" <slurmdArgs>`: a dynamic node, in the
    foreground (with `power`: `slurmd -D -b -N <node>`, a CLOUD node slurm.conf defines); under
    sunk-init when the NodeSet has s6 one-shots or services. `gres`: the node's own (its Node's
    labels), else the NodeSet's."""
    if spec.power is not None:
        # A CLOUD node of slurm.conf (render.cloud_nodes): its definition is there, not in --conf.
        # -b: report the slurmd start as the node's boot. A container sees the Kubernetes Node's
        # uptime, older than Slurm's power-up request, and slurmctld then keeps "waiting for boot"
        # of the node until ResumeTimeout marks it DOWN (measured 2026-11 on 24.11).
        cmd = [SLURMD, "-D", "-b", "-N", slurm_node, *spec.slurmd_args]
    else:
        cmd = [SLURMD, "-D", "-Z", "-N", slurm_node, "--conf", node_conf(spec, gres), *spec.slurmd_args]
    return [S6_INIT, *cmd] if spec.s6_scripts or spec.s6_oneshots else cmd


def _volumes(spec: NodeSetResourceSpec, config_keys: ConfigKeys, own_gres: bool = False) -> tuple[list[Any], list[Any]]:
    """(pod volumes, slurmd volume mounts). `own_gres`: gres.conf comes from the pod's annotation."""
    # Files in folders are the prolog, epilog and health check scripts slurmd executes.
    sources: list[dict[str, Any]] = [
        {
            "configMap": {
                "name": name,
                "items": [{"key": key, "path": path, **({"mode": _EXECUTABLE} if "/" in path else {})}],
            }
        }
        for path, name, key in config_items(spec, config_keys)
        if not (own_gres and path == GRES_FILE)
    ]
    if (topology_file := spec.topology_file) is not None:
        # slurmd loads the topology plugin too and will not start without topology.conf (it
        # retries for a minute, then exits): the operator's ConfigMap, as slurmctld mounts it
        # (topology.yaml, with named topologies, the same way).
        topology = {"key": topology_file, "path": topology_file}
        sources.append({"configMap": {"name": naming.topology_config_map(spec.cluster_name), "items": [topology]}})
    if own_gres:
        field = {"fieldPath": f"metadata.annotations['{keys.GRES_CONF}']"}
        sources.append({"downwardAPI": {"items": [{"path": GRES_FILE, "fieldRef": field}]}})
    if spec.auth_type == "slurm":
        key = spec.auth_secret_key or "slurm.key"
        sources.append(
            {"secret": {"name": spec.auth_secret, "items": [{"key": key, "path": "slurm.key", "mode": 0o400}]}}
        )
    volumes: list[dict[str, Any]] = [
        {"name": "sunk-slurm-etc", "projected": {"sources": sources}},
        {"name": "sunk-spool", "emptyDir": {}},
    ]
    mounts: list[dict[str, Any]] = [
        {"name": "sunk-slurm-etc", "mountPath": naming.SLURM_ETC, "readOnly": True},
        {"name": "sunk-spool", "mountPath": naming.SLURMD_SPOOL},
    ]
    if spec.auth_type == "munge":
        volumes += [
            {
                "name": "sunk-munge-key",
                "secret": {
                    "secretName": spec.auth_secret,
                    "items": [{"key": spec.auth_secret_key or "munge.key", "path": keys.MUNGE_KEY, "mode": 0o400}],
                },
            },
            {"name": "sunk-munge-run", "emptyDir": {}},
        ]
        mounts.append({"name": "sunk-munge-run", "mountPath": MUNGE_RUN})
    # One-shots are files in their folder; a service is a folder with its `run` script.
    for volume, folder, prefix, scripts, suffix in (
        ("sunk-s6-oneshots", S6_ONESHOTS, keys.S6_ONESHOT_PREFIX, spec.s6_oneshots, ""),
        ("sunk-s6", S6_SERVICES, keys.S6_SERVICE_PREFIX, spec.s6_scripts, "/run"),
    ):
        if not scripts:
            continue
        items = [
            {
                "path": f"{name}{suffix}",
                "fieldRef": {"fieldPath": f"metadata.annotations['{prefix}{name}']"},
                "mode": _EXECUTABLE,
            }
            for name in sorted(scripts)
        ]
        volumes.append({"name": volume, "downwardAPI": {"items": items}})
        mounts.append({"name": volume, "mountPath": folder, "readOnly": True})
    for sv in spec.shared_volumes:
        if "compute" not in sv.mount_on:
            continue
        claim = sv.existing_claim or naming.shared_claim(spec.cluster_name, sv.name)
        vname = naming.shared_volume(sv.name)
        volumes.append({"name": vname, "persistentVolumeClaim": {"claimName": claim, "readOnly": sv.read_only}})
        mounts.append({"name": vname, "mountPath": sv.mount_path, "readOnly": sv.read_only})
    _unique("volume name", [v["name"] for v in volumes])
    _unique("mount path", [m["mountPath"] for m in mounts])
    return volumes, mounts


def owner_references(owner: Mapping[str, str]) -> list[dict[str, Any]]:
    """What the operator creates for a NodeSet (pods, the headless Service) is owned by it: the
    garbage collector removes it with the NodeSet, after its dependents (blockOwnerDeletion)."""
    return [
        {
            "apiVersion": API_VERSION,
            "kind": KIND,
            "name": owner["name"],
            "uid": owner["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]


def _unique(what: str, values: list[str]) -> None:
    seen = set()
    for v in values:
        if v in seen:
            raise ValueError(f"{what} {v!r} is used twice in the slurmd pod (a NodeSet volume clashes with sunk's own)")
        seen.add(v)


def _munge_sidecar(spec: NodeSetResourceSpec) -> dict[str, Any]:
    """munged as a native sidecar (an init container that keeps running): it starts, and its
    socket exists, before slurmd, which fails to authenticate without it."""
    return {
        "name": MUNGE,
        "image": spec.slurmd_image,
        "command": sh(munge_start(MUNGE_RUN, MUNGE_KEY_DIR, keys.MUNGE_KEY, threads=4)),
        "restartPolicy": "Always",
        "startupProbe": {
            "exec": {"command": ["test", "-S", naming.MUNGE_SOCKET]},
            "periodSeconds": 1,
            "failureThreshold": 60,
        },
        "resources": _resources(MUNGE_RESOURCES),
        "securityContext": {
            # Root only to chown the key and socket directory, then munged runs as munge.
            "runAsUser": 0,
            "runAsNonRoot": False,
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"], "add": sorted(MUNGE_CAPABILITIES)},
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "volumeMounts": [
            {"name": "sunk-munge-key", "mountPath": MUNGE_KEY_DIR, "readOnly": True},
            {"name": "sunk-munge-run", "mountPath": MUNGE_RUN},
        ],
    }


def _affinity(spec: NodeSetResourceSpec, kube_node: str | None) -> dict[str, Any] | None:
    affinity = dict(spec.affinity or {})
    if kube_node is None:
        return affinity or None
    # Like the DaemonSet controller: the Node already matched the NodeSet's required terms, so the
    # pod is pinned with one term naming it; preferred terms and pod (anti-)affinity stay.
    node_aff = dict(affinity.get("nodeAffinity") or {})
    node_aff["requiredDuringSchedulingIgnoredDuringExecution"] = {
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [kube_node]}]}]
    }
    affinity["nodeAffinity"] = node_aff
    return affinity


# all-matching-nodes pods stay on their Node through short outages and cordons, as DaemonSet
# pods do: a flapping or cordoned Node should not kill the Slurm jobs running on it (the syncer
# drains its Slurm node meanwhile), and a replaced pod must come back to the same Node.
DAEMON_TOLERATIONS = (
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
)


def _slurm_node(spec: NodeSetResourceSpec, ordinal: int | None, kube_node: str | None) -> str:
    """The Slurm node (and pod hostname) of the pod asked for: exactly one of `ordinal` (replicas
    mode) or `kube_node` (all-matching-nodes)."""
    if (ordinal is None) == (kube_node is None):
        raise ValueError("give exactly one of ordinal (replicas mode) or kube_node (all-matching-nodes)")
    if (ordinal is not None) != (spec.mode == "replicas"):
        raise ValueError(f"mode {spec.mode}: {'ordinal' if spec.mode == 'replicas' else 'kube_node'} required")
    if ordinal is not None:
        return naming.slurm_node_name(spec.name, ordinal)
    return naming.slurm_node_for_kube_node(kube_node or "")


def _pod_metadata(
    spec: NodeSetResourceSpec,
    node: str,
    gres: Gres | None,
    *,
    namespace: str,
    config_keys: ConfigKeys,
    ordinal: int | None,
    kube_node: str | None,
    owner: Mapping[str, str] | None,
) -> dict[str, Any]:
    """Name, labels (the node's, for the operator's selectors) and the annotations the operator
    and the pod's s6 read: hashes, ordinal or Node, s6 scripts, this Node's own gres.conf."""
    labels = {
        **selector_labels(spec),
        keys.NODE: node,
        keys.APP_COMPONENT: SLURMD,
        keys.RESOURCE_MODE: spec.resource_mode,
    }
    annotations = {
        keys.CONFIG_HASH: spec.config_hash,
        keys.TEMPLATE_HASH: template_hash(spec, config_keys),
        **({keys.ORDINAL: str(ordinal)} if ordinal is not None else {keys.KUBE_NODE: kube_node or ""}),
        **{f"{keys.S6_ONESHOT_PREFIX}{name}": body for name, body in sorted(spec.s6_oneshots.items())},
        **{f"{keys.S6_SERVICE_PREFIX}{name}": body for name, body in sorted(spec.s6_scripts.items())},
        **({keys.GRES_CONF: gres_file(gres, spec.gres_extra)} if gres is not None else {}),
    }
    metadata: dict[str, Any] = {
        "name": pod_name(spec, node),
        "namespace": namespace,
        "labels": labels,
        "annotations": annotations,
    }
    if owner is not None:
        metadata["ownerReferences"] = owner_references(owner)
    return metadata


def _slurmd_container(
    spec: NodeSetResourceSpec, node: str, gres: Gres | None, mounts: list[dict[str, Any]]
) -> dict[str, Any]:
    # Exclusive: the GPUs are the slurmd pod's. Shared: none, so the device plugin hands them to
    # pods (slurmd is privileged and sees every device; Slurm's GRES accounting splits them).
    gpus = spec.slurmd_extended or None
    return {
        "name": SLURMD,
        "image": spec.slurmd_image,
        "command": slurmd_command(spec, node, gres),
        "ports": [{"name": SLURMD, "containerPort": naming.SLURMD_PORT, "protocol": "TCP"}],
        # slurmd listens only once it has registered with slurmctld.
        "readinessProbe": {"tcpSocket": {"port": naming.SLURMD_PORT}, "periodSeconds": 5},
        "resources": _resources(slurmd_resources(spec), gpus),
        # Privileged because slurmd must create a cgroup per job and constrain its devices (cgroup
        # v2 device filters are BPF programs), start job steps as the job's user, and let
        # pyxis/enroot mount container filesystems: a reduced capability set breaks each of these.
        # No seccomp filter applies to a privileged container either way; Unconfined says so
        # instead of implying one.
        "securityContext": {"privileged": True, "seccompProfile": {"type": "Unconfined"}},
        "volumeMounts": mounts,
    }


def _sidecar(sc: Sidecar) -> dict[str, Any]:
    """One of the NodeSet's own sidecars."""
    c: dict[str, Any] = {"name": sc.name, "image": sc.image.ref, "resources": _resources(sc.resources)}
    if sc.command:
        c["command"] = list(sc.command)
    if sc.args:
        c["args"] = list(sc.args)
    if sc.env:
        c["env"] = [{"name": e.name, "value": e.value} for e in sc.env]
    return c


def _init_containers(
    spec: NodeSetResourceSpec, volumes: list[dict[str, Any]], mounts: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """sssd and munge, as native sidecars; sssd's volumes and slurmd's client mounts are added to
    `volumes` and `mounts`."""
    init: list[dict[str, Any]] = []
    if spec.sssd is not None:
        # Job steps run as the user, with the user's groups: slurmd resolves them through sssd.
        init.append(sssd_sidecar(spec.slurmd_image, spec.sssd))
        volumes.extend(sssd_volumes(spec.sssd))
        mounts.extend(CLIENT_MOUNTS)
    if spec.auth_type == "munge":
        init.append(_munge_sidecar(spec))
    return init


def _placement(spec: NodeSetResourceSpec, kube_node: str | None) -> dict[str, Any]:
    """nodeSelector, affinity and tolerations (a DaemonSet's, for all-matching-nodes)."""
    placement: dict[str, Any] = {"nodeSelector": spec.pod_node_selector}
    affinity = _affinity(spec, kube_node)
    if affinity:
        placement["affinity"] = affinity
    tolerations = [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in spec.tolerations]
    if spec.resource_mode == "shared" and keys.SHARED_TOLERATION not in tolerations:
        # The shared Nodes' taint keeps pods the webhook missed away; slurmd is the Node's own.
        tolerations.append(dict(keys.SHARED_TOLERATION))
    if kube_node is not None:
        tolerations += [t for t in DAEMON_TOLERATIONS if t not in tolerations]
    if tolerations:
        placement["tolerations"] = tolerations
    return placement


def nodeset_pod(
    spec: NodeSetResourceSpec,
    *,
    namespace: str,
    config_keys: ConfigKeys,
    ordinal: int | None = None,
    kube_node: str | None = None,
    owner: Mapping[str, str] | None = None,
    node_labels: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The slurmd pod of ordinal `ordinal` (replicas mode) or of Kubernetes Node `kube_node`
    (all-matching-nodes). `config_keys` are the keys of the ConfigMaps spec.config_files names;
    `owner` is the NodeSet's metadata (name, uid) for the owner reference; `node_labels` are
    kube_node's labels (gpus.fromNodeLabels reads them).

    In phases: the Slurm node, its GRES, the metadata, the volumes, the containers (slurmd, the
    NodeSet's sidecars, sssd and munge), the placement, then the NodeSet's pod settings."""
    node = _slurm_node(spec, ordinal, kube_node)
    # gpus.fromNodeLabels: this node's GRES from its Node's GPU feature discovery labels (raises
    # ValueError, which the operator reports, for MIG without autodetect nvml).
    gres = None
    if spec.gpus is not None and spec.gpus.from_node_labels and kube_node is not None:
        gres = node_gres(spec.gpus, node_labels or {})
    metadata = _pod_metadata(
        spec,
        node,
        gres,
        namespace=namespace,
        config_keys=config_keys,
        ordinal=ordinal,
        kube_node=kube_node,
        owner=owner,
    )
    volumes, mounts = _volumes(spec, config_keys, own_gres=gres is not None)
    init = _init_containers(spec, volumes, mounts)
    pod_spec: dict[str, Any] = {
        "hostname": node,
        "subdomain": service_name(spec),
        # Every other container (munge, sssd, the NodeSet's own sidecars) runs under the
        # container runtime's default seccomp profile.
        "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [_slurmd_container(spec, node, gres, mounts), *(_sidecar(sc) for sc in spec.sidecars)],
        "volumes": volumes,
        "enableServiceLinks": False,
        # slurmd never talks to the Kubernetes API.
        "automountServiceAccountToken": False,
    }
    if init:
        pod_spec["initContainers"] = init
    pod_spec.update(_placement(spec, kube_node))
    # The NodeSet's pod settings (sunk.spec.pod): labels, annotations, pulls, priority, spread,
    # and slurmd's env, volumes and securityContext; its images.pullSecrets are already in the spec.
    pod = apply_pod({"metadata": metadata, "spec": pod_spec}, spec, main=SLURMD)
    return {"apiVersion": "v1", "kind": "Pod", **pod}


def headless_service(
    spec: NodeSetResourceSpec, *, namespace: str, owner: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """The Service behind the pods' `subdomain`: `<node>.<service>.<namespace>.svc` resolves,
    for MPI and srun between nodes, even before a pod is ready."""
    metadata: dict[str, Any] = object_meta(
        {"name": service_name(spec), "namespace": namespace, "labels": selector_labels(spec)}, spec
    )
    if owner is not None:
        metadata["ownerReferences"] = owner_references(owner)
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata,
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": selector_labels(spec),
            "ports": [{"name": SLURMD, "port": naming.SLURMD_PORT, "targetPort": naming.SLURMD_PORT}],
        },
    }
