"""One gate for every pod: the objects a stack would create, rendered before any of them exists,
checked against the Kubernetes schema, the per-role table (sunk.roles) and the operator's policy.

The spec's own checks name fields; this gate needs no field to know: it reads what the spec
actually puts into pods (a securityContext merged over sunk's, a volume, an env var, a label), so
a field added next month is checked the day it reaches a pod. It checks:

- every pod and pod template against the Kubernetes PodSpec schema and its value rules
  (sunk.spec.kubeschema), every object's annotations against the API server's 256 KiB;
- every container against its role's row: capabilities it adds, privilege, hostNetwork, hostPath
  (only on roles whose row allows the operator's policy to grant it); containers the row does not
  list (users' sidecars) add no capability and run unprivileged;
- a ServiceAccount token (automounted or projected) only in pods whose row grants one;
- every one of the cluster's own Secrets a container reaches (a volume it mounts, a projected
  source, env, envFrom), against what its role's row allows that container
  (`Role.container_secrets`): the LDAP bind password in the sssd sidecar only, sshd's host keys
  in login's sshd only; a Secret volume no container mounts, against the role's pods as a whole;
- slurmd pods against the stack's operator policy (sunk.policy.pod_problems, the function the
  operator runs before it creates a pod), when the stack installs the operator;
- object names unique per kind and namespace, and every Service selecting only pods of its role.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from sunk import keys, roles
from sunk.manifests.auth import auth_refs, secret_purposes
from sunk.manifests.cluster import cluster_manifests
from sunk.manifests.config import config_maps
from sunk.manifests.keygen import keygen_manifests
from sunk.manifests.nodeset import resource_spec
from sunk.manifests.nodeset_pod import headless_service, nodeset_pod
from sunk.manifests.operator import operator_manifests
from sunk.memo import PerObject
from sunk.policy import pod_problems
from sunk.spec import kubeschema
from sunk.spec.cluster import ClusterSpec
from sunk.spec.operator import OperatorSpec

WORKLOADS = ("Deployment", "StatefulSet", "Job", "DaemonSet", "ReplicaSet", "CronJob")
MAX_ANNOTATION_BYTES = 256 * 1024
"""What the API server allows for all annotations of one object."""

Manifest = dict[str, Any]


def stack_objects(spec: ClusterSpec, operator: OperatorSpec | None = None) -> tuple[list[Manifest], list[str]]:
    """Every object the stack makes, slurmd pods and their Services as the operator builds them
    included; and the problems of NodeSets whose pod can't be built at all."""
    objs = cluster_manifests(spec, operator.namespace if operator is not None else "sunk-system")
    # With keys from Pulumi the generator makes only the certificates: a Job of its own (its
    # name hashes its pod), checked here too whichever way the stack makes its keys.
    names = {(m["kind"], m["metadata"]["name"]) for m in objs}
    objs += [
        m
        for m in keygen_manifests(spec, keys_in_cluster=False)
        if m["kind"] == "Job" and (m["kind"], m["metadata"]["name"]) not in names
    ]
    config_keys = {cm["metadata"]["name"]: list(cm["data"]) for cm in config_maps(spec)}
    refs = auth_refs(spec)
    problems = []
    for i, ns in enumerate(spec.nodesets):
        try:
            rs = resource_spec(spec, ns, refs)
            where: dict[str, Any] = {"ordinal": 0} if rs.mode == "replicas" else {"kube_node": "node-0"}
            objs.append(nodeset_pod(rs, namespace=spec.ns, config_keys=config_keys, **where))
            objs.append(headless_service(rs, namespace=spec.ns))
        except ValueError as err:
            problems.append(f"nodesets[{i}]: its slurmd pod can't be built: {err}")
    if operator is not None:
        objs += operator_manifests(operator)
    return objs, problems


def _pods(objs: list[Manifest]) -> Iterator[tuple[str, Manifest, Manifest]]:
    """(object, pod metadata, pod spec) of every pod and pod template."""
    for m in objs:
        name = f"{m['kind']}/{m['metadata']['name']}"
        if m["kind"] == "Pod":
            yield name, m["metadata"], m["spec"]
        elif m["kind"] in WORKLOADS:
            tmpl = m["spec"]["jobTemplate"]["spec"]["template"] if m["kind"] == "CronJob" else m["spec"]["template"]
            yield name, tmpl.get("metadata") or {}, tmpl["spec"]


def _containers(pod: Manifest) -> list[Manifest]:
    return [*pod.get("initContainers", []), *pod.get("containers", []), *pod.get("ephemeralContainers", [])]


def _volume_secrets(pod: Manifest) -> dict[str, list[tuple[str, bool]]]:
    """Volume name -> (Secret name, whole) of each Secret it holds; `whole`: every key of the
    Secret, not only the items it names."""
    out: dict[str, list[tuple[str, bool]]] = {}
    for v in pod.get("volumes", []):
        sources = [v["secret"]] if "secret" in v else []
        sources += [s["secret"] for s in (v.get("projected") or {}).get("sources", []) if "secret" in s]
        for source in sources:
            name = source.get("secretName", source.get("name", ""))
            out.setdefault(v["name"], []).append((name, not source.get("items")))
    return out


def _secret_reach(pod: Manifest) -> list[tuple[str | None, str, str, bool]]:
    """(container, where, Secret name, whole) of every way the pod reaches a Secret: each
    container's mounts, env and envFrom, and (container None) each Secret volume no container
    mounts, which the kubelet still fetches onto the Node."""
    volumes = _volume_secrets(pod)
    mounted: set[str] = set()
    out: list[tuple[str | None, str, str, bool]] = []
    for c in _containers(pod):
        name = c["name"]
        for mount in c.get("volumeMounts", []):
            mounted.add(mount["name"])
            for secret, whole in volumes.get(mount["name"], []):
                out.append((name, f"container {name} mounts volume {mount['name']}", secret, whole))
        for env in c.get("env", []):
            ref = (env.get("valueFrom") or {}).get("secretKeyRef")
            if ref is not None:
                out.append((name, f"container {name} env {env['name']}", ref.get("name", ""), False))
        for source in c.get("envFrom", []):
            if "secretRef" in source:
                out.append((name, f"container {name} envFrom", source["secretRef"].get("name", ""), True))
    for volume, secrets in volumes.items():
        if volume not in mounted:
            out += [(None, f"volume {volume}", secret, whole) for secret, whole in secrets]
    return out


def _secret_problems(spec: ClusterSpec, row: roles.Role, pod: Manifest) -> list[str]:
    """Each of the cluster's own Secrets a container reaches must hold a purpose its row allows
    that container (every purpose, when it reaches the whole Secret); a volume no container
    mounts, one the role allows some container."""
    ours = secret_purposes(spec)
    problems = []
    for container, where, name, whole in _secret_reach(pod):
        purposes = ours.get(name)
        if purposes is None:
            continue
        allowed = row.secrets if container is None else row.container_secrets.get(container, frozenset())
        if not (purposes <= allowed if whole else purposes & allowed):
            who = f"role {row.name}'s pods" if container is None else f"container {container} of role {row.name}"
            problems.append(
                f"{where}: Secret {name} holds {', '.join(sorted(purposes))}, which {who} may not reach "
                f"(allowed there: {', '.join(sorted(allowed)) or 'none'})"
            )
    return problems


def _container_problems(row: roles.Role, c: Manifest) -> list[str]:
    name = c["name"]
    ctx = c.get("securityContext") or {}
    added = frozenset((ctx.get("capabilities") or {}).get("add") or ())
    allowed = row.containers.get(name, frozenset())
    problems = []
    if not added <= allowed:
        problems.append(
            f"container {name} adds capabilities {sorted(added - allowed)} beyond role {row.name}'s "
            f"({', '.join(sorted(allowed)) or 'none'})"
        )
    if ctx.get("privileged") and name not in row.privileged:
        problems.append(f"container {name} runs privileged, which role {row.name} does not allow")
    if ctx.get("allowPrivilegeEscalation") and name not in row.privileged | row.root:
        problems.append(f"container {name} allows privilege escalation, which role {row.name} does not allow")
    return problems


def _pod_problems(spec: ClusterSpec, operator: OperatorSpec | None, meta: Manifest, pod: Manifest) -> list[str]:
    """One pod against its role's row: the pod's own shape (schema, names, containers, host
    access), then the Secrets it reaches, then the operator's tenant policy where the role's
    host paths follow it."""
    component = (meta.get("labels") or {}).get(keys.APP_COMPONENT, "")
    row = roles.ROLES.get(component)
    if row is None:
        return [f"pod of role {component!r}, which the role table does not know"]
    problems = _shape_problems(row, pod) + _secret_problems(spec, row, pod) + _token_problems(row, pod)
    if row.host_paths == roles.POLICY and operator is not None:
        problems += pod_problems(operator.policy, {"spec": pod})
    return problems


def _token_problems(row: roles.Role, pod: Manifest) -> list[str]:
    """A ServiceAccount token only in the pods whose row grants one (`Role.token`): automounted
    (Kubernetes mounts one unless the pod says false) or in a projected volume."""
    if row.token:
        return []
    problems = []
    if pod.get("automountServiceAccountToken", True) is not False:
        problems.append(f"automountServiceAccountToken is not false, and role {row.name} gets no token")
    projected = [
        v["name"]
        for v in pod.get("volumes", [])
        if any("serviceAccountToken" in s for s in (v.get("projected") or {}).get("sources", []))
    ]
    if projected:
        problems.append(f"volumes {projected} project a ServiceAccount token, and role {row.name} gets none")
    return problems


def _shape_problems(row: roles.Role, pod: Manifest) -> list[str]:
    """The PodSpec's schema, names given twice, each container, host network and host paths."""
    problems = [str(p) for p in kubeschema.problems("PodSpec", pod)]
    for what, names in (
        ("container", [c["name"] for c in _containers(pod)]),
        ("volume", [v["name"] for v in pod.get("volumes", [])]),
    ):
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            problems.append(f"{what} names {twice} twice in one pod (a name the spec gives equals sunk's own)")
    for c in _containers(pod):
        problems += _container_problems(row, c)
    if bool(pod.get("hostNetwork")) != row.host_network:
        problems.append(f"hostNetwork {bool(pod.get('hostNetwork'))}, which role {row.name} does not allow")
    host_paths = [v["name"] for v in pod.get("volumes", []) if "hostPath" in v]
    if host_paths and row.host_paths != roles.POLICY:
        problems.append(f"hostPath volumes {host_paths}: role {row.name} may mount none")
    return problems


def _selector_problems(objs: list[Manifest]) -> list[str]:
    """A Service selecting pods of another role sends its traffic there (a user label equal to
    one of sunk's selectors would do it). Pods are indexed by label, so each Service reads only
    the pods carrying its selector's rarest label, not every pod (a NodeSet's Service selects one
    NodeSet's pods: without the index, N NodeSets cost N x N)."""
    problems = []
    pods = [(name, meta.get("labels") or {}) for name, meta, _ in _pods(objs)]
    by_label: dict[tuple[str, str], list[int]] = {}
    for i, (_, labels) in enumerate(pods):
        for pair in labels.items():
            by_label.setdefault(pair, []).append(i)
    for m in objs:
        if m["kind"] != "Service":
            continue
        selector = (m.get("spec") or {}).get("selector") or {}
        # A NodeSet's headless Service (the operator's) carries no component label: its pods are slurmd.
        own = (m["metadata"].get("labels") or {}).get(keys.APP_COMPONENT) or (
            "slurmd" if keys.NODESET in selector else None
        )
        if not selector or own is None:
            continue
        fewest = min((by_label.get(pair, []) for pair in selector.items()), key=len)
        for name, labels in (pods[i] for i in fewest):
            if labels.get(keys.APP_COMPONENT) != own and all(labels.get(k) == v for k, v in selector.items()):
                problems.append(
                    f"Service/{m['metadata']['name']} selects {name}, a {labels.get(keys.APP_COMPONENT)} pod; "
                    "a label the spec adds equals one of sunk's selectors"
                )
    return problems


_passed: PerObject[ClusterSpec, list[bool]] = PerObject(lambda _spec: [])
"""Holds True once the spec object has passed the gate."""


def admitted(spec: ClusterSpec) -> bool:
    """Whether this spec object has passed the gate already, with or without an operator: the gate
    runs once per deploy. Passing with an operator covers the gate without one (the operator only
    adds objects and its policy's checks), so the program's SlurmCluster does not gate again the
    spec its stack's validation (sunk.stackfile.parse_config) gated."""
    return bool(_passed(spec))


def gate_problems(spec: ClusterSpec, operator: OperatorSpec | None = None) -> list[str]:
    """Every problem of every object the stack would create (see the module docstring)."""
    problems = _problems(spec, operator)
    if not problems:
        _passed(spec)[:] = [True]
    return problems


def _problems(spec: ClusterSpec, operator: OperatorSpec | None) -> list[str]:
    objs, problems = stack_objects(spec, operator)
    seen: dict[tuple[str, str, str], int] = {}
    for m in objs:
        meta = m["metadata"]
        ident = (m["kind"], meta.get("namespace", ""), meta["name"])
        seen[ident] = seen.get(ident, 0) + 1
        size = sum(len(k.encode()) + len(str(v).encode()) for k, v in (meta.get("annotations") or {}).items())
        if size > MAX_ANNOTATION_BYTES:
            problems.append(f"{m['kind']}/{meta['name']}: {size} bytes of annotations; the API server allows 262144")
    problems += [
        f"{kind}/{name}: two objects of this name (in {ns or 'the cluster'})"
        for (kind, ns, name), n in seen.items()
        if n > 1
    ]
    for name, meta, pod in _pods(objs):
        problems += [f"{name}: {p}" for p in _pod_problems(spec, operator, meta, pod)]
    problems += _selector_problems(objs)
    return problems
