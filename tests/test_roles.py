"""The per-role table (sunk.roles) against every pod sunk builds: each shipped stack's pods, its
slurmd pods, the operator, and variants that turn on what the stacks leave off (auth/slurm with
login's sackd, LDAP with a client certificate). A pod that gets more than its row, or a row that
promises what no pod has, fails here."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from sunk import roles
from sunk.manifests.auth import allowed_secret_names, secret_purposes
from sunk.manifests.cluster import cluster_manifests
from sunk.manifests.config import config_maps
from sunk.manifests.controller import fenced
from sunk.manifests.nodeset_pod import nodeset_pod
from sunk.manifests.operator import operator_manifests
from sunk.spec.cluster import ClusterSpec
from sunk.spec.operator import OperatorSpec
from sunk.stackfile import list_stacks, load_stack
from tests.support.nodeset_objects import resource_spec
from tests.support.stacks import FIXTURE_STACKS

COMPONENT = "app.kubernetes.io/component"
WORKLOADS = ("Deployment", "StatefulSet", "Job", "DaemonSet")


def _slurmd_pods(spec: ClusterSpec) -> list[dict[str, Any]]:
    keys = {cm["metadata"]["name"]: list(cm["data"]) for cm in config_maps(spec)}
    out = []
    for ns in spec.nodesets:
        rs = resource_spec(spec, ns.name)
        where: dict[str, Any] = {"ordinal": 0} if rs.mode == "replicas" else {"kube_node": "node-a"}
        out.append(nodeset_pod(rs, namespace=spec.ns, config_keys=keys, owner={"name": "n", "uid": "u"}, **where))
    return out


def _variant(stack: str, **changes: Any) -> ClusterSpec:
    doc = load_stack(stack, FIXTURE_STACKS).spec.model_dump(mode="json", by_alias=True, exclude_unset=True)
    for path, value in changes.items():
        node = doc
        *parents, last = path.split("__")
        for p in parents:
            node = node.setdefault(p, {})
        node[last] = value
    return ClusterSpec.model_validate(doc)


def _specs() -> dict[str, ClusterSpec]:
    out = {s: load_stack(s, FIXTURE_STACKS).spec for s in list_stacks(FIXTURE_STACKS)}
    out["acme-dev+slurm-auth"] = _variant("acme-dev", auth__type="slurm")
    # A release upgrade adds init containers (the dump, the waits, the state guard); under
    # auth/slurm the waits' Slurm files hold slurm.key, as wait-qos's do.
    out["acme-dev+upgrade"] = _variant("acme-dev", slurm__version="26.05", slurm__upgradeFrom="24.11")
    out["acme-dev+slurm-auth+upgrade"] = _variant(
        "acme-dev", auth__type="slurm", slurm__version="26.05", slurm__upgradeFrom="24.11"
    )
    # With backups: the fence container and its ServiceAccount's token.
    out["acme-dev+ha"] = _variant(
        "acme-dev",
        controller__replicas=2,
        controller__stateStorage__accessMode="ReadWriteMany",
        controller__stateStorage__storageClass="nfs-client",
    )
    out["acme-prod+ldap-client-cert"] = _variant(
        "acme-prod", auth__ldap__clientCertSecret={"name": "research-ldap-client"}
    )
    return out


SPECS = _specs()
OPERATOR = OperatorSpec()


def _objects(spec: ClusterSpec) -> list[dict[str, Any]]:
    return [*cluster_manifests(spec), *_slurmd_pods(spec), *operator_manifests(OPERATOR)]


def _pods(objs: list[dict[str, Any]]) -> Iterator[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(object, pod labels, pod spec) of every pod and pod template."""
    for m in objs:
        name = f"{m['kind']}/{m['metadata']['name']}"
        if m["kind"] == "Pod":
            yield name, m["metadata"]["labels"], m["spec"]
        elif m["kind"] in WORKLOADS:
            tmpl = m["spec"]["template"]
            yield name, tmpl["metadata"]["labels"], tmpl["spec"]


def _containers(pod: dict[str, Any]) -> list[dict[str, Any]]:
    return [*pod.get("initContainers", []), *pod["containers"]]


def _token(pod: dict[str, Any], objs: list[dict[str, Any]]) -> bool:
    if "automountServiceAccountToken" in pod:
        return bool(pod["automountServiceAccountToken"])
    account = pod.get("serviceAccountName", "default")
    for m in objs:
        if m["kind"] == "ServiceAccount" and m["metadata"]["name"] == account:
            return bool(m.get("automountServiceAccountToken", True))
    return True  # the namespace's default ServiceAccount mounts its token


def _secrets(pod: dict[str, Any]) -> set[str]:
    out = set()
    for v in pod.get("volumes", []):
        if "secret" in v:
            out.add(v["secret"]["secretName"])
        for source in v.get("projected", {}).get("sources", []):
            if "secret" in source:
                out.add(source["secret"]["name"])
    return out


def _container_secrets(c: dict[str, Any], pod: dict[str, Any]) -> set[str]:
    """The Secrets one container reaches: volumes it mounts, env and envFrom."""
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    out = set()
    for mount in c.get("volumeMounts", []):
        out |= _secrets({"volumes": [volumes[mount["name"]]]})
    for env in c.get("env", []):
        ref = (env.get("valueFrom") or {}).get("secretKeyRef")
        if ref is not None:
            out.add(ref["name"])
    out |= {s["secretRef"]["name"] for s in c.get("envFrom", []) if "secretRef" in s}
    return out


def _user(c: dict[str, Any], pod: dict[str, Any]) -> int | None:
    for ctx in (c.get("securityContext") or {}, pod.get("securityContext") or {}):
        if "runAsUser" in ctx:
            return int(ctx["runAsUser"])
    return None


ALL = [(stack, name, labels, pod) for stack, spec in SPECS.items() for name, labels, pod in _pods(_objects(spec))]


def _role_of(labels: dict[str, str]) -> roles.Role:
    return roles.role(labels[COMPONENT])


@pytest.mark.parametrize(("stack", "name", "labels", "pod"), ALL, ids=[f"{a[0]}:{a[1]}" for a in ALL])
def test_every_pod_gets_exactly_what_its_row_grants(
    stack: str, name: str, labels: dict[str, str], pod: dict[str, Any]
) -> None:
    spec = SPECS[stack]
    row = _role_of(labels)
    user_sidecars = {s.name for ns in spec.nodesets for s in ns.sidecars} if row.name == "slurmd" else set()
    containers = {c["name"]: c for c in _containers(pod) if c["name"] not in user_sidecars}
    unknown = set(containers) - set(row.containers)
    assert not unknown, f"{name}: containers {sorted(unknown)} are not in role {row.name}'s row"
    for cname, c in containers.items():
        ctx = c.get("securityContext") or {}
        caps = ctx.get("capabilities") or {}
        assert caps.get("drop") == ["ALL"] or cname in row.privileged, f"{name}/{cname}: drops {caps.get('drop')}"
        assert frozenset(caps.get("add", [])) == row.capabilities(cname), f"{name}/{cname}: adds {caps.get('add')}"
        assert bool(ctx.get("privileged")) == (cname in row.privileged), f"{name}/{cname}: privileged"
        # No runAsUser: the image's user (root in the Slurm images, 10001 in the runtime's).
        uid = _user(c, pod)
        assert (uid == 0) <= (cname in row.root), f"{name}/{cname}: runs as root, not in the row"
        assert (cname in row.root) <= (uid in (0, None)), f"{name}/{cname}: runs as {uid}, the row says root"
        escalates = ctx.get("allowPrivilegeEscalation") is not False  # Kubernetes' default is true
        assert escalates == (cname in row.escalation), f"{name}/{cname}: allowPrivilegeEscalation"
        writable = not ctx.get("readOnlyRootFilesystem", False)
        assert writable == (cname in row.writable_root), f"{name}/{cname}: writable root {writable}"
        reached, may = _container_secrets(c, pod), allowed_secret_names(spec, row.name, cname)
        assert reached <= may, f"{name}/{cname}: reaches {sorted(reached - may)} beyond its row"
        ports = {p["containerPort"] for p in c.get("ports", [])}
        listened = {link.port for link in row.listens if link.port is not None}
        assert ports <= listened, f"{name}/{cname}: listens on {sorted(ports - listened)}, not in the row"
    # The controller's row grants a token for its fence, which only a controller with backups has.
    wants = row.token and (row.name != "controller" or fenced(spec))
    assert _token(pod, _objects(spec)) == wants, f"{name}: ServiceAccount token mounted"
    allowed = allowed_secret_names(spec, row.name)
    assert _secrets(pod) <= allowed, f"{name}: mounts {sorted(_secrets(pod) - allowed)} beyond its row"
    host_paths = [v["name"] for v in pod.get("volumes", []) if "hostPath" in v]
    assert not host_paths or row.host_paths == roles.POLICY, f"{name}: hostPath volumes {host_paths}"
    assert bool(pod.get("hostNetwork")) == row.host_network, f"{name}: hostNetwork"


def test_every_row_is_some_pod_and_every_grant_is_used() -> None:
    """A row no pod plays, or a container or a container's secret purpose no pod uses, is a
    promise the table keeps for nothing: remove it."""
    seen_roles: set[str] = set()
    used: set[tuple[str, str, str]] = set()
    for stack, _name, labels, pod in ALL:
        row = _role_of(labels)
        seen_roles.add(row.name)
        spec = SPECS[stack]
        purposes = secret_purposes(spec)
        for c in _containers(pod):
            used.add((row.name, "container", c["name"]))
            for secret in _container_secrets(c, pod):
                used |= {(row.name, f"secret of {c['name']}", p) for p in purposes.get(secret, ())}
    assert seen_roles == set(roles.ROLES), sorted(set(roles.ROLES) - seen_roles)
    promised = {(r.name, "container", c) for r in roles.ROLES.values() for c in r.containers}
    promised |= {(r.name, f"secret of {c}", p) for r in roles.ROLES.values() for c, ps in r.container_secrets.items()
                 for p in ps}  # fmt: skip
    assert all(set(r.container_secrets) <= set(r.containers) for r in roles.ROLES.values())
    assert promised <= used, sorted(promised - used)


def test_links_name_roles_or_outside_parties_and_agree_both_ways() -> None:
    """A role's `talks_to` a role is that role's `listens` from it, on the same port."""
    names = set(roles.ROLES)
    for row in roles.ROLES.values():
        for link in (*row.listens, *row.talks_to):
            assert set(link.peers) <= names | roles.OUTSIDE, (row.name, link)
    for row in roles.ROLES.values():
        for link in row.talks_to:
            for peer in link.peers:
                if peer in roles.OUTSIDE:
                    continue
                accepted = [
                    lk for lk in roles.ROLES[peer].listens if row.name in lk.peers and lk.port in (link.port, None)
                ]
                assert accepted, f"{row.name} talks to {peer} on {link.port}, which {peer} does not accept"
        for link in row.listens:
            for peer in link.peers:
                if peer in roles.OUTSIDE:
                    continue
                out = roles.ROLES[peer].talks_to
                assert any(
                    (row.name in lk.peers or roles.ANYWHERE in lk.peers) and lk.port in (link.port, None) for lk in out
                ), f"{row.name} accepts {peer} on {link.port}, which {peer} never opens"


def test_unknown_role_names_the_roles_there_are() -> None:
    with pytest.raises(KeyError, match="no pod role 'ssh'; roles: accounting, accounting-setup"):
        roles.role("ssh")


def test_a_secret_serving_two_purposes_is_allowed_where_either_is() -> None:
    spec = SPECS["acme-prod"]
    assert secret_purposes(spec)["research-ldap"] == {"ldap-bind", "ldap-ca"}
    assert "research-ldap" in allowed_secret_names(spec, "login")
    assert "research-ldap" not in allowed_secret_names(spec, "restapi")
    assert allowed_secret_names(spec, "operator") == frozenset()


def test_pod_security_admission_is_privileged_only_where_slurmd_runs() -> None:
    """slurmd must be privileged, so its tenant namespace enforces `privileged` (warning on
    baseline, auditing restricted); the operator's namespace, where no row is privileged,
    enforces `restricted`."""
    from sunk.manifests.cluster import namespace as tenant_namespace
    from sunk.manifests.operator import namespace as operator_namespace

    assert any(r.privileged for r in roles.ROLES.values() if r.name == "slurmd")
    assert not roles.ROLES["operator"].privileged and not roles.ROLES["operator"].root
    tenant = tenant_namespace(SPECS["acme-dev"])["metadata"]["labels"]
    assert tenant["pod-security.kubernetes.io/enforce"] == "privileged"
    system = operator_namespace(OPERATOR)["metadata"]["labels"]
    assert {k: v for k, v in system.items() if k.startswith("pod-security")} == {
        "pod-security.kubernetes.io/enforce": "restricted",
        "pod-security.kubernetes.io/warn": "restricted",
        "pod-security.kubernetes.io/audit": "restricted",
    }
