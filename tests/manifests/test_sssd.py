"""Where the sssd sidecar goes: with auth.ldap, beside every pod's Slurm process that resolves
users (sshd, slurmd, slurmctld, slurmdbd), sharing only SSSD's sockets and memory cache with it;
the bind password and TLS files mounted into the sidecar alone; without LDAP, nowhere."""

from __future__ import annotations

from typing import Any

import kubernetes_validate

from sunk import keys
from sunk.manifests.auth import auth_refs
from sunk.manifests.cluster import cluster_manifests
from sunk.manifests.config import config_maps
from sunk.manifests.nodeset import resource_spec
from sunk.manifests.nodeset_pod import nodeset_pod
from sunk.manifests.sssd import MEMCACHE, PIPES
from sunk.stackfile import load_stack
from tests.support.stacks import FIXTURE_STACKS

PROD = load_stack("acme-prod", FIXTURE_STACKS).spec
DEV = load_stack("acme-dev", FIXTURE_STACKS).spec
MAIN = {"login": "sshd", "controller": "slurmctld", "accounting": "slurmdbd", "compute": "slurmd"}


def pods(spec: Any) -> dict[str, dict[str, Any]]:
    """The pod spec of each Slurm workload, by component; the slurmd pod as the operator builds it."""
    found = {}
    for m in cluster_manifests(spec):
        component = m["metadata"]["labels"].get("app.kubernetes.io/component")
        if m["kind"] in ("Deployment", "StatefulSet") and component in MAIN:
            found[component] = m["spec"]["template"]
    keys = {cm["metadata"]["name"]: list(cm["data"]) for cm in config_maps(spec)}
    ns = spec.nodesets[0]
    rs = resource_spec(spec, ns, auth_refs(spec))
    where: dict[str, Any] = {"ordinal": 0} if rs.mode == "replicas" else {"kube_node": "node-a"}
    pod = nodeset_pod(rs, namespace=spec.ns, config_keys=keys, **where)
    kubernetes_validate.validate(pod, "1.30", strict=True)
    found["compute"] = pod
    return found


def containers(pod: dict[str, Any]) -> dict[str, dict[str, Any]]:
    spec = pod["spec"]
    return {c["name"]: c for c in spec["containers"] + spec.get("initContainers", [])}


def mounts(container: dict[str, Any]) -> dict[str, str]:
    return {m["mountPath"]: m["name"] for m in container.get("volumeMounts", [])}


def test_every_slurm_pod_that_resolves_users_runs_sssd() -> None:
    found = pods(PROD)
    assert set(found) == set(MAIN)
    for component, pod in found.items():
        by_name = containers(pod)
        sssd, main = by_name["sssd"], by_name[MAIN[component]]
        assert sssd["restartPolicy"] == "Always", component  # a native sidecar: up before the main container
        assert sssd["image"] == main["image"], component
        assert mounts(main)[PIPES] == mounts(sssd)[PIPES] == "sunk-sss-pipes", component
        assert mounts(main)[MEMCACHE] == mounts(sssd)[MEMCACHE] == "sunk-sss-mc", component
        # Only the sidecar sees the password and the directory's TLS files.
        secret_dirs = {"/etc/sssd-bind", "/etc/sssd-ca", "/etc/sssd", "/etc/sssd-template"}
        for name, c in by_name.items():
            if name != "sssd":
                assert not secret_dirs & set(mounts(c)), (component, name)
        assert secret_dirs <= set(mounts(sssd)), component
        volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
        assert volumes["sunk-ldap-bind"]["secret"]["items"] == [{"key": "bind-password", "path": "password"}]
        assert volumes["sunk-sssd-template"]["configMap"]["name"] == "research-sssd-conf"


def test_a_changed_sssd_conf_rolls_the_pods() -> None:
    ldap = PROD.auth.ldap
    assert ldap is not None
    changed = PROD.model_copy(
        update={"auth": PROD.auth.model_copy(update={"ldap": ldap.model_copy(update={"tls_reqcert": "hard"})})}
    )
    before, after = pods(PROD), pods(changed)
    for component in ("controller", "accounting"):
        assert (
            before[component]["metadata"]["annotations"][keys.SSSD_HASH]
            != after[component]["metadata"]["annotations"][keys.SSSD_HASH]
        )
    assert before["login"]["metadata"]["annotations"] != after["login"]["metadata"]["annotations"]
    tpl = "slurm.sunk.dev/template-hash"
    assert before["compute"]["metadata"]["annotations"][tpl] != after["compute"]["metadata"]["annotations"][tpl]


def test_without_ldap_no_pod_runs_sssd() -> None:
    for component, pod in pods(DEV).items():
        assert "sssd" not in containers(pod), component
        assert PIPES not in mounts(containers(pod)[MAIN[component]]), component
        assert keys.SSSD_HASH not in pod["metadata"].get("annotations", {}), component
