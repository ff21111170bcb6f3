"""Per-role pod and Service settings (sunk.spec.pod): each role's objects carry them, every object
stays valid for the Kubernetes schema, bad values are refused naming the field before any object
exists, and the names sunk reserves are exactly the ones its builders use."""

from __future__ import annotations

import os
import re
import stat
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest

from sunk.manifests import scripts
from sunk.manifests.auth import auth_refs
from sunk.manifests.cluster import cluster_manifests
from sunk.manifests.config import config_maps
from sunk.manifests.network import network_policies
from sunk.manifests.nodeset import resource_spec
from sunk.manifests.nodeset_pod import nodeset_pod
from sunk.manifests.operator import operator_manifests
from sunk.nodeset_resource import NodeSetResourceSpec
from sunk.policy import pod_problems
from sunk.scaffold import OPERATOR, STACK
from sunk.spec import kubeschema
from sunk.spec.base import RESERVED_MOUNTS
from sunk.spec.cluster import ClusterSpec
from sunk.spec.errors import SpecError, load_spec
from sunk.spec.operator import OperatorSpec, TenantPolicy
from sunk.spec.pod import ROLE_RULES, VOLUME_SOURCES, PodRole, reserved_mount
from sunk.stackfile import list_stacks, load_stack
from tests.support.stacks import FIXTURE_STACKS

K8S = "1.33"
BASE = load_stack("acme-dev", FIXTURE_STACKS).spec.model_dump(mode="json", by_alias=True, exclude_unset=True)

SETTINGS: dict[str, Any] = {
    "nodeSelector": {"pool": "system"},
    "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "slurm", "effect": "NoSchedule"}],
    "affinity": {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 10, "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}}
            ]
        }
    },
    "topologySpreadConstraints": [
        {"maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "ScheduleAnyway"}
    ],
    "priorityClassName": "hpc-high",
    "runtimeClassName": "nvidia",
    "imagePullSecrets": ["role-registry"],
    "imagePullPolicy": "Always",
    "labels": {"example.com/team": "hpc"},
    "annotations": {"example.com/owner": "ada"},
    "podLabels": {"pool": "slurm"},
    "podAnnotations": {"example.com/scrape": "true"},
    "env": [
        {"name": "HTTPS_PROXY", "value": "http://proxy:3128"},
        {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "tokens", "key": "t"}}},
    ],
    "volumes": [
        {"name": "tools", "mountPath": "/opt/tools", "readOnly": True, "nfs": {"server": "10.0.0.5", "path": "/tools"}},
        {"name": "dshm", "mountPath": "/dev/shm", "emptyDir": {"medium": "Memory", "sizeLimit": "8Gi"}},
        {"name": "certs", "mountPath": "/opt/certs", "secret": {"secretName": "certs", "defaultMode": 256}},
        {"name": "store", "mountPath": "/mnt/store", "csi": {"driver": "example.csi.io", "readOnly": True}},
    ],
    "securityContext": {"seccompProfile": {"type": "Localhost", "localhostProfile": "profiles/slurm.json"}},
}
MAIN: dict[str, str] = {
    "controller": "slurmctld",
    "accounting": "slurmdbd",
    "mariadb": "mariadb",
    "restapi": "slurmrestd",
    "login": "sshd",
    "syncer": "syncer",
    "scheduler": "scheduler",
}
"""Workload (by name suffix) -> its main container."""


def _with(data: dict[str, Any], **sections: Any) -> ClusterSpec:
    out = {**data}
    for path, value in sections.items():
        node = out
        keys = path.split("__")
        for key in keys[:-1]:
            node[key] = dict(node.get(key) or {})
            node = node[key]
        node[keys[-1]] = value
    return load_spec(out)


def _everywhere() -> ClusterSpec:
    data = {**BASE, "images": {**BASE.get("images", {}), "pullSecrets": ["cluster-registry"]}}
    nodesets = [{**ns, **SETTINGS} for ns in BASE["nodesets"]]
    return _with(
        {**data, "nodesets": nodesets},
        controller=SETTINGS | BASE.get("controller", {}) | {"extraArgs": ["-v"]},
        accounting=SETTINGS | BASE.get("accounting", {}) | {"extraArgs": ["-v"], "mariadb": SETTINGS},
        restapi=SETTINGS | BASE.get("restapi", {}),
        login=SETTINGS | BASE.get("login", {}) | {"extraArgs": ["-o", "LogLevel=VERBOSE"]},
        runtime=SETTINGS,
    )


def _pod_of(obj: dict[str, Any]) -> dict[str, Any]:
    pod: dict[str, Any] = obj["spec"]["template"]
    return pod


def _check_pod(pod: dict[str, Any], main: str | None, where: str) -> None:
    spec = pod["spec"]
    assert spec["nodeSelector"]["pool"] == "system", where
    assert {"key": "dedicated", "operator": "Equal", "value": "slurm", "effect": "NoSchedule"} in spec["tolerations"]
    assert spec["priorityClassName"] == "hpc-high" and spec["runtimeClassName"] == "nvidia", where
    assert [s["name"] for s in spec["imagePullSecrets"]] == ["cluster-registry", "role-registry"], where
    every = [*spec.get("initContainers", []), *spec["containers"]]
    assert {c.get("imagePullPolicy") for c in every} == {"Always"}, where
    assert pod["metadata"]["labels"]["example.com/team"] == "hpc" and pod["metadata"]["labels"]["pool"] == "slurm"
    assert pod["metadata"]["annotations"]["example.com/scrape"] == "true", where
    assert spec["topologySpreadConstraints"][0]["topologyKey"] == "kubernetes.io/hostname", where
    if main is None:
        return
    container = next(c for c in spec["containers"] if c["name"] == main)
    env = {e["name"]: e for e in container["env"]}
    assert env["HTTPS_PROXY"]["value"] == "http://proxy:3128", where
    assert env["TOKEN"]["valueFrom"] == {"secretKeyRef": {"name": "tokens", "key": "t"}}, where
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert mounts["/opt/tools"] == {"name": "tools", "mountPath": "/opt/tools", "readOnly": True}, where
    assert volumes["tools"]["nfs"] == {"server": "10.0.0.5", "path": "/tools"}, where
    assert volumes["dshm"]["emptyDir"] == {"medium": "Memory", "sizeLimit": "8Gi"}, where
    assert volumes["store"]["csi"]["driver"] == "example.csi.io", where
    assert container["securityContext"]["seccompProfile"]["type"] == "Localhost", where
    others = [c for c in every if c["name"] != main]
    assert all(not any(m["name"] == "tools" for m in c.get("volumeMounts", [])) for c in others), where


def test_every_role_carries_its_settings_and_stays_schema_valid() -> None:
    spec = _everywhere()
    objs = cluster_manifests(spec)
    seen = set()
    for obj in objs:
        kubernetes_validate.validate(obj, K8S, strict=True) if obj["kind"] != "NodeSet" else None
        name = obj["metadata"]["name"]
        if obj["kind"] in {"Deployment", "StatefulSet"}:
            role = next(r for r in MAIN if name.endswith(f"-{r}"))
            _check_pod(_pod_of(obj), MAIN[role], name)
            assert obj["metadata"]["labels"]["example.com/team"] == "hpc"
            assert obj["metadata"]["annotations"]["example.com/owner"] == "ada"
            seen.add(role)
        elif obj["kind"] == "Job":
            _check_pod(_pod_of(obj), None, name)  # the accounting setup Job: scheduling and pulls only
            seen.add("setup")
    assert seen == {*MAIN, "setup"}
    keys = {cm["metadata"]["name"]: list(cm["data"]) for cm in config_maps(spec)}
    for ns in spec.nodesets:
        resource = NodeSetResourceSpec.model_validate(
            next(o for o in objs if o["kind"] == "NodeSet" and o["metadata"]["name"].endswith(ns.name))["spec"]
        )
        pod = nodeset_pod(resource, namespace=spec.ns, config_keys=keys, ordinal=0)
        kubernetes_validate.validate(pod, K8S, strict=True)
        _check_pod(pod, "slurmd", ns.name)
        assert pod["spec"]["containers"][0]["securityContext"]["privileged"] is True  # merged, not replaced
        assert pod["spec"]["nodeSelector"]["kubernetes.io/arch"] == "amd64"


def test_sunks_own_labels_and_selectors_win() -> None:
    spec = _everywhere()
    sts = next(
        o
        for o in cluster_manifests(spec)
        if o["kind"] == "StatefulSet" and o["metadata"]["name"].endswith("-controller")
    )
    template_labels = sts["spec"]["template"]["metadata"]["labels"]
    assert all(template_labels[k] == v for k, v in sts["spec"]["selector"]["matchLabels"].items())


def test_extra_args_follow_the_daemons_own() -> None:
    spec = _everywhere()
    objs = {o["metadata"]["name"]: o for o in cluster_manifests(spec) if o["kind"] in {"StatefulSet", "Deployment"}}

    def main(suffix: str) -> dict[str, Any]:
        pod = _pod_of(next(o for n, o in objs.items() if n.endswith(suffix)))
        return next(c for c in pod["spec"]["containers"] if c["name"] == MAIN[suffix.lstrip("-")])

    # A start script gets them as "$@" after its $0 (the container's name).
    assert main("-controller")["args"] == ["slurmctld", "-v"]
    assert main("-accounting")["args"] == ["slurmdbd", "-v"]
    assert main("-login")["args"] == ["sshd", "-o", "LogLevel=VERBOSE"]


def test_a_start_script_hands_extra_args_to_its_daemon(tmp_path: Path) -> None:
    """The slurmdbd start script, run as the container runs it (`sh -c script $0 args...`), passes
    the arguments to slurmdbd (a stand-in that prints them)."""
    etc, run = tmp_path / "etc", tmp_path / "run"
    etc.mkdir()
    run.mkdir()
    (etc / "slurm.conf").write_text("ClusterName=c\n")
    (etc / "slurmdbd.conf").write_text("DbdHost=x\n")
    (tmp_path / "password").write_text("pw\n")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "slurmdbd"
    fake.write_text('#!/bin/sh\necho "$@"\n')
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    script = scripts.slurmdbd_start(str(etc), str(tmp_path / "password"), str(run))
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    done = subprocess.run(
        ["/bin/sh", "-c", script, "slurmdbd", "-v", "-v"], env=env, capture_output=True, text=True, check=True
    )
    assert done.stdout == "-D -v -v\n"
    done = subprocess.run(["/bin/sh", "-c", script], env=env, capture_output=True, text=True, check=True)
    assert done.stdout == "-D\n"


def test_services_take_their_settings() -> None:
    spec = _with(
        BASE,
        login__serviceType=None,
        login__service={
            "type": "NodePort",
            "nodePort": 30022,
            "externalTrafficPolicy": "Local",
            "annotations": {"example.com/a": "b"},
        },
        restapi__service={
            "type": "LoadBalancer",
            "sourceRanges": ["10.20.0.0/16"],
            "loadBalancerIP": "10.20.0.10",
            "loadBalancerClass": "example.com/internal",
        },
        controller__service={"annotations": {"external-dns.alpha.kubernetes.io/hostname": "slurmctld.example.com"}},
    )
    services = {o["metadata"]["name"]: o for o in cluster_manifests(spec) if o["kind"] == "Service"}
    for svc in services.values():
        kubernetes_validate.validate(svc, K8S, strict=True)
    login = services["research-login"]
    assert login["spec"]["type"] == "NodePort" and login["spec"]["ports"][0]["nodePort"] == 30022
    assert login["spec"]["externalTrafficPolicy"] == "Local"
    assert login["metadata"]["annotations"] == {"example.com/a": "b"}
    rest = services["research-restapi"]["spec"]
    assert rest["type"] == "LoadBalancer" and rest["loadBalancerIP"] == "10.20.0.10"
    assert rest["loadBalancerClass"] == "example.com/internal" and rest["loadBalancerSourceRanges"] == ["10.20.0.0/16"]
    assert rest["externalTrafficPolicy"] == "Local"  # the NetworkPolicy sees the client's address
    ctld = services["research-controller"]
    assert ctld["spec"]["clusterIP"] == "None" and ctld["metadata"]["annotations"]
    policy = next(p for p in network_policies(spec, "sunk-system") if p["metadata"]["name"] == "research-restapi")
    assert {"ipBlock": {"cidr": "10.20.0.0/16"}} in policy["spec"]["ingress"][0]["from"]


def test_operator_takes_its_settings() -> None:
    op = OperatorSpec.model_validate(
        {"nodeSelector": {"pool": "system"}, "priorityClassName": "system-cluster-critical", "imagePullSecrets": ["reg"],
         "annotations": {"example.com/owner": "platform"}, "env": [{"name": "HTTPS_PROXY", "value": "http://p:3128"}]}
    )  # fmt: skip
    objs = operator_manifests(op)
    deployment = next(o for o in objs if o["kind"] == "Deployment")
    for obj in objs:
        if obj["kind"] != "CustomResourceDefinition":
            kubernetes_validate.validate(obj, K8S, strict=True)
    pod = deployment["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"pool": "system"} and pod["priorityClassName"] == "system-cluster-critical"
    assert pod["imagePullSecrets"] == [{"name": "reg"}]
    assert pod["containers"][0]["env"][-1] == {"name": "HTTPS_PROXY", "value": "http://p:3128"}
    assert deployment["metadata"]["annotations"] == {"example.com/owner": "platform"}


# ----- refused before any object exists, naming the field ------------------------------------

BAD: list[tuple[str, dict[str, Any], str]] = [
    ("label-sunk-key", {"controller__podLabels": {"slurm.sunk.dev/cluster": "x"}}, "controller.podLabels: slurm.sunk.dev/cluster: sunk sets this label itself"),
    ("label-selector-key", {"login__labels": {"app.kubernetes.io/component": "x"}}, "login.labels: app.kubernetes.io/component: sunk sets this label itself"),
    ("label-value", {"restapi__podLabels": {"team": "a b"}}, "restapi.podLabels.team: 'a b' is not a Kubernetes label value"),
    ("annotation-sunk-key", {"accounting__podAnnotations": {"slurm.sunk.dev/config-hash": "x"}}, "accounting.podAnnotations: slurm.sunk.dev/config-hash: annotations under slurm.sunk.dev/ are sunk's own"),
    ("annotation-key", {"login__annotations": {"bad key": "x"}}, "login.annotations: 'bad key' is not a Kubernetes label key"),
    ("nfs-without-server", {"login__volumes": [{"name": "t", "mountPath": "/t", "nfs": {"path": "/x"}}]}, "login.volumes[0].nfs.server: required field is missing"),
    ("emptydir-unknown-field", {"controller__volumes": [{"name": "t", "mountPath": "/t", "emptyDir": {"medium": "Memory", "size": "1Gi"}}]}, "controller.volumes[0].emptyDir.size: unknown field; known: medium, sizeLimit"),
    ("volume-no-source", {"restapi__volumes": [{"name": "t", "mountPath": "/t"}]}, "restapi.volumes[0].name: volume 't' needs exactly one volume source"),
    ("volume-reserved-name", {"controller__volumes": [{"name": "state", "mountPath": "/t", "emptyDir": {}}]}, "controller.volumes[0].name: 'state' is sunk's own in the slurmctld pod"),
    ("volume-reserved-mount", {"accounting__volumes": [{"name": "t", "mountPath": "/etc/slurm-db/x", "emptyDir": {}}]}, "accounting.volumes[0].mountPath: /etc/slurm-db/x would hide or sit inside sunk's own mount /etc/slurm-db"),
    ("volume-role-mount", {"accounting__mariadb__volumes": [{"name": "t", "mountPath": "/etc/mariadb-secret", "emptyDir": {}}]}, "accounting.mariadb.volumes[0].mountPath: /etc/mariadb-secret would hide"),
    ("volume-shared-path", {"login__volumes": [{"name": "t", "mountPath": "/home", "emptyDir": {}}], "sharedVolumes": [{"name": "home", "mountPath": "/home", "existingClaim": "h", "mountOn": ["login"]}]}, "login.volumes[0].mountPath: /home is also where shared volume home mounts on login"),
    ("bidirectional-unprivileged", {"login__volumes": [{"name": "t", "mountPath": "/t", "emptyDir": {}, "mountPropagation": "Bidirectional"}]}, "login.volumes[0].mountPropagation: Bidirectional needs a privileged container"),
    ("env-sunk", {"runtime__env": [{"name": "SUNK_CLUSTER", "value": "x"}]}, "runtime.env[0].name: SUNK_CLUSTER is set by sunk"),
    ("env-role", {"restapi__env": [{"name": "SLURM_JWT", "value": "x"}]}, "restapi.env[0].name: SLURM_JWT is set by sunk on slurmrestd"),
    ("env-value-from", {"login__env": [{"name": "A", "valueFrom": {"secretKeyRef": {"key": 1}}}]}, "login.env[0].valueFrom.secretKeyRef.key: string is required"),
    ("env-both", {"login__env": [{"name": "A", "value": "x", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}]}, "login.env[0].valueFrom: give value or valueFrom, not both"),
    ("slurmd-unprivileged", {"nodesets": [{**BASE["nodesets"][0], "securityContext": {"privileged": False}}, *BASE["nodesets"][1:]]}, "nodesets[0].securityContext.privileged: slurmd must stay privileged"),
    ("slurmctld-user", {"controller__securityContext": {"runAsUser": 0}}, "controller.securityContext.runAsUser: fixed by sunk; slurmctld runs as SlurmUser"),
    ("restapi-privileged", {"restapi__securityContext": {"privileged": True}}, "restapi.securityContext.privileged: nothing in slurmrestd needs it"),
    ("login-read-only", {"login__securityContext": {"readOnlyRootFilesystem": True}}, "login.securityContext.readOnlyRootFilesystem: the login start script installs the host keys"),
    ("login-drop-setuid", {"login__securityContext": {"capabilities": {"drop": ["SETUID"]}}}, "login.securityContext.capabilities.drop: sshd needs"),
    ("controller-capabilities", {"controller__securityContext": {"capabilities": {"add": ["NET_ADMIN"]}}}, "controller.securityContext.capabilities: slurmctld runs as a non-root user"),
    ("security-schema", {"controller__securityContext": {"seccompProfile": {"kind": "x"}}}, "controller.securityContext.seccompProfile.kind: unknown field"),
    ("affinity-schema", {"restapi__affinity": {"nodeAffinity": {"required": []}}}, "restapi.affinity.nodeAffinity.required: unknown field"),
    ("spread-schema", {"login__topologySpreadConstraints": [{"maxSkew": "1"}]}, "login.topologySpreadConstraints[0].maxSkew: integer is required"),
    ("priority-class-name", {"controller__priorityClassName": "High"}, "controller.priorityClassName: 'High' is not valid: a DNS-1123 subdomain"),
    ("pull-secret-name", {"images__pullSecrets": ["Reg_1"]}, "images.pullSecrets[0]: 'Reg_1' is not valid: a DNS-1123 subdomain"),
    ("pull-policy", {"login__imagePullPolicy": "Sometimes"}, "login.imagePullPolicy: 'Sometimes' is not valid; give 'Always', 'IfNotPresent' or 'Never'"),
    ("toleration-no-key", {"runtime__tolerations": [{"operator": "Equal", "value": "x"}]}, "runtime.tolerations[0].operator: a toleration without a key matches every taint only with operator Exists"),
    ("node-port-cluster-ip", {"login__service": {"type": "ClusterIP", "nodePort": 30022}}, "login.service.nodePort: only applies to type NodePort or LoadBalancer, not ClusterIP"),
    ("node-port-range", {"login__service": {"nodePort": 22}}, "login.service.nodePort: 22 is too small; must be greater than or equal to 30000"),
    ("lb-ip", {"login__service": {"loadBalancerIP": "10.0.0.300"}}, "login.service.loadBalancerIP: '10.0.0.300' is not an IP address"),
    ("lb-class-node-port", {"login__service": {"type": "NodePort", "loadBalancerClass": "example.com/lb"}}, "login.service.loadBalancerClass: only applies to type LoadBalancer, not NodePort"),
    ("two-service-types", {"login__serviceType": "NodePort", "login__service": {"type": "LoadBalancer"}}, "login.serviceType: also given as service.type"),
    ("ranges-cluster-policy", {"login__service": {"sourceRanges": ["10.0.0.0/8"], "externalTrafficPolicy": "Cluster"}}, "login.service.externalTrafficPolicy: Cluster hides the client's address"),
    ("restapi-exposed-open", {"restapi__service": {"type": "LoadBalancer"}}, "restapi.service.sourceRanges: a LoadBalancer slurmrestd is fenced by its NetworkPolicy"),
    ("restapi-node-port", {"restapi__service": {"type": "NodePort"}}, "restapi.service.type: a NodePort slurmrestd stays fenced"),
    ("slurmd-annotations-beside-s6", {"nodesets": [{**BASE["nodesets"][0], "s6Scripts": {"big": "#!/bin/sh\n" + "x" * 150_000}, "podAnnotations": {"example.com/blob": "y" * 120_000}}, *BASE["nodesets"][1:]]}, "nodesets[0].podAnnotations: 120016 bytes beside "),
    ("extra-args-runtime", {"runtime__extraArgs": ["-v"]}, "runtime.extraArgs: unknown field"),
    ("auth-key-on-login", {"login__volumes": [{"name": "k", "mountPath": "/k", "secret": {"secretName": "research-auth"}}]}, "login.volumes[0].secret.secretName: research-auth holds the cluster's munge key; in login pods users could read it"),
    ("jwt-key-in-slurmd-env", {"nodesets": [{**BASE["nodesets"][0], "env": [{"name": "K", "valueFrom": {"secretKeyRef": {"name": "research-jwt", "key": "jwt_hs256.key"}}}]}, *BASE["nodesets"][1:]]}, "nodesets[0].env[0].valueFrom.secretKeyRef.name: research-jwt holds the JWT signing key"),
    ("db-password-projected-on-login", {"login__volumes": [{"name": "k", "mountPath": "/k", "projected": {"sources": [{"secret": {"name": "research-mariadb"}}]}}]}, "login.volumes[0].projected.sources[0].secret.name: research-mariadb holds the accounting database passwords"),
]  # fmt: skip


@pytest.mark.parametrize(("changes", "expected"), [(c, e) for _, c, e in BAD], ids=[i for i, _, _ in BAD])
def test_bad_settings_are_refused_naming_the_field(changes: dict[str, Any], expected: str) -> None:
    data = {**BASE}
    plain = {k: v for k, v in changes.items() if "__" not in k}
    data.update(plain)
    with pytest.raises(SpecError) as err:
        _with(data, **{k: v for k, v in changes.items() if "__" in k})
    assert any(p.startswith(expected) for p in err.value.problems), err.value.problems


# ----- the reserved names are the builders' own -------------------------------------------------


def _pods(spec: ClusterSpec) -> list[tuple[PodRole, str, dict[str, Any], Any]]:
    """(role, main container, pod, its settings) for every pod a stack makes, slurmd pods and the
    operator's included."""
    out: list[tuple[PodRole, str, dict[str, Any], Any]] = []
    roles: dict[str, PodRole] = {
        "controller": "controller", "accounting": "accounting", "mariadb": "mariadb", "restapi": "restapi",
        "login": "login", "syncer": "runtime", "scheduler": "runtime", "exporter": "runtime",
        "webhook": "runtime",
    }  # fmt: skip
    for obj in cluster_manifests(spec):
        if obj["kind"] in {"Deployment", "StatefulSet"}:
            suffix = obj["metadata"]["name"].rsplit("-", 1)[-1]
            out.append((roles[suffix], MAIN.get(suffix, suffix), _pod_of(obj), _section(spec, roles[suffix])))
    keys = {cm["metadata"]["name"]: list(cm["data"]) for cm in config_maps(spec)}
    for ns in spec.nodesets:
        resource = resource_spec(spec, ns, auth_refs(spec))
        kw: dict[str, Any] = {"ordinal": 0} if ns.mode == "replicas" else {"kube_node": "node-a"}
        out.append(("compute", "slurmd", nodeset_pod(resource, namespace=spec.ns, config_keys=keys, **kw), ns))
    deployment = next(o for o in operator_manifests(OperatorSpec()) if o["kind"] == "Deployment")
    out.append(("operator", "operator", deployment["spec"]["template"], OperatorSpec()))
    return out


@pytest.mark.parametrize("stack", list_stacks(FIXTURE_STACKS))
def test_every_name_sunk_uses_is_reserved_for_its_role(stack: str) -> None:
    """What the builders give each pod is what the spec refuses to users, so the two cannot drift."""
    spec = load_stack(stack, FIXTURE_STACKS).spec
    shared = {v.mount_path for v in spec.shared_volumes}
    for role, main, pod, section in _pods(spec):
        rules = ROLE_RULES[role]
        for volume in pod["spec"].get("volumes", []):
            name = volume["name"]
            user = any(v.name == name for v in section.volumes)
            assert user or name in rules.volumes or name.startswith(("sunk-", "shared-")), (role, name)
        container = next(c for c in pod["spec"]["containers"] if c["name"] == main)
        for mount in container.get("volumeMounts", []):
            path = mount["mountPath"]
            user = any(v.mount_path == path for v in section.volumes)
            assert user or path in shared or reserved_mount(role, path) is not None, (role, path)
        for env in container.get("env", []):
            user = any(e.name == env["name"] for e in section.env)
            assert user or env["name"].startswith("SUNK_") or env["name"] in rules.env, (role, env["name"])


def _section(spec: ClusterSpec, role: PodRole) -> Any:
    return {
        "controller": spec.controller, "accounting": spec.accounting, "mariadb": spec.accounting.mariadb,
        "restapi": spec.restapi, "login": spec.login, "runtime": spec.runtime,
    }[role]  # fmt: skip


def test_the_reserved_mounts_include_the_base_ones() -> None:
    for role in ROLE_RULES:
        assert all(reserved_mount(role, m) == m for m in RESERVED_MOUNTS)


def test_every_kubernetes_volume_source_is_a_field() -> None:
    volume = kubeschema.definitions()[kubeschema.ROOTS["Volume"]]
    assert set(VOLUME_SOURCES) == set(volume["properties"]) - {"name"}


# ----- the operator's tenant policy still holds ----------------------------------------------


def test_tenant_policy_still_sees_every_host_path_and_image() -> None:
    spec = load_stack("acme-prod", FIXTURE_STACKS).spec
    h100 = spec.nodeset("h100")
    keys = {cm["metadata"]["name"]: list(cm["data"]) for cm in config_maps(spec)}
    policy = TenantPolicy(host_paths=["/mnt/local-nvme"], image_prefixes=["registry.acme.example/hpc/"])
    ok = nodeset_pod(resource_spec(spec, h100, auth_refs(spec)), namespace=spec.ns, config_keys=keys, kube_node="n1")
    kubernetes_validate.validate(ok, K8S, strict=True)
    assert pod_problems(policy, ok) == []  # NFS, memory emptyDir and the allowed hostPath pass
    data = h100.model_dump(mode="json", by_alias=True, exclude_unset=True)
    data["volumes"] = [*data["volumes"], {"name": "etc", "mountPath": "/host-etc", "hostPath": {"path": "/etc"}}]
    bad_ns = type(h100).model_validate(data)
    bad = nodeset_pod(resource_spec(spec, bad_ns, auth_refs(spec)), namespace=spec.ns, config_keys=keys, kube_node="n1")
    assert pod_problems(policy, bad) == ["volume etc: hostPath /etc is not allowed; allowed: /mnt/local-nvme"]
    other = TenantPolicy(host_paths=["/mnt/local-nvme"])  # the default image prefix: acme's mirror is not allowed
    assert any("registry.acme.example/hpc/slurmd" in p for p in pod_problems(other, ok))


def test_security_context_merges_over_sunks() -> None:
    """Capabilities are a union (sshd keeps the ones it needs), other keys replace sunk's."""
    spec = _with(
        BASE,
        login__securityContext={"capabilities": {"add": ["SYS_PTRACE"]}, "appArmorProfile": {"type": "RuntimeDefault"}},
        controller__securityContext={"appArmorProfile": {"type": "RuntimeDefault"}},
    )
    objs = {o["metadata"]["name"]: o for o in cluster_manifests(spec) if o["kind"] in {"Deployment", "StatefulSet"}}
    sshd = next(c for c in _pod_of(objs["research-login"])["spec"]["containers"] if c["name"] == "sshd")
    ctx = sshd["securityContext"]
    assert ctx["capabilities"]["drop"] == ["ALL"]
    assert ctx["capabilities"]["add"][-1] == "SYS_PTRACE" and "SETUID" in ctx["capabilities"]["add"]
    assert ctx["appArmorProfile"] == {"type": "RuntimeDefault"} and ctx["runAsUser"] == 0
    ctld = next(c for c in _pod_of(objs["research-controller"])["spec"]["containers"] if c["name"] == "slurmctld")
    assert ctld["securityContext"]["appArmorProfile"] == {"type": "RuntimeDefault"}
    assert ctld["securityContext"]["runAsNonRoot"] is True and ctld["securityContext"]["readOnlyRootFilesystem"] is True
    watcher = next(c for c in _pod_of(objs["research-controller"])["spec"]["containers"] if c["name"] == "reconfigure")
    assert "appArmorProfile" not in watcher["securityContext"]  # the main container only


def test_the_scaffolds_commented_examples_validate(tmp_path: Path) -> None:
    """`sunk init` shows pod settings as comments; uncommented, they are a valid stack."""
    text = STACK.format(tenant="demo", operator=OPERATOR, release="26.05")
    examples = re.findall(r"^( *)# ((?:sunk:operator|images|service|tolerations|volumes):.*)$", text, flags=re.M)
    assert len(examples) == 5
    uncommented = text.replace("      service: {type: ClusterIP}\n", "")  # the example takes its place
    # The operator's policy must admit the example's registry, or validate refuses its NodeSet pods.
    uncommented = uncommented.replace("  sunk:operator: true\n", "")
    uncommented = re.sub(
        r"^( *)# ((?:sunk:operator|images|service|tolerations|volumes):.*)$", r"\1\2", uncommented, flags=re.M
    )
    path = tmp_path / "Pulumi.demo-dev.yaml"
    path.write_text(uncommented)
    spec = load_stack(str(path)).spec
    assert spec.login.service.source_ranges == ["203.0.113.0/24"] and spec.images.pull_secrets == [
        "registry-credentials"
    ]
    assert spec.nodesets[0].volumes[0].emptyDir == {"medium": "Memory", "sizeLimit": "2Gi"}
