"""The components through Pulumi's mock engine: the shape rules of STYLE.md and the issue, checked
on every stack's real program and on the library program."""

from __future__ import annotations

from typing import Any

import pytest
from sunk.components.offline import Evaluation, Registration, is_secret, plain

from sunk.manifests import parts
from sunk.manifests.parts import components
from sunk.spec.cluster import ClusterSpec

from .conftest import LIBRARY, STACKS

ALL = [*STACKS, LIBRARY]
COMPONENT_TYPES = {f"sunk:index:{c}" for c in components()}
"""Every component: the parts' (sunk.manifests.parts) and the two a program creates."""
TOP_LEVEL = {f"sunk:index:{c}" for c in parts.TOP_LEVEL}


def _programs_own(r: Registration) -> bool:
    """A resource the calling program registered itself (the library program's Namespace)."""
    return "::pulumi:pulumi:Stack::" in r.parent and not r.type.startswith("sunk:")


def _objects(ev: Evaluation) -> list[dict[str, Any]]:
    return ev.manifests(show_secrets=True)


def _pod_templates(ev: Evaluation) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(workload object, pod template) of every Deployment, StatefulSet and Job."""
    return [(o, o["spec"]["template"]) for o in _objects(ev) if o["kind"] in {"Deployment", "StatefulSet", "Job"}]


@pytest.mark.parametrize("name", ALL)
def test_no_duplicate_urns_or_objects(evaluations: dict[str, Evaluation], name: str) -> None:
    ev = evaluations[name]
    assert ev.duplicate_urns() == []
    ids = [(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]) for o in _objects(ev)]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize("name", ALL)
def test_every_child_is_parented_and_named_after_its_parent(evaluations: dict[str, Evaluation], name: str) -> None:
    ev = evaluations[name]
    by_urn = {r.urn: r for r in ev.registrations}
    for r in ev.registrations:
        if r.type in TOP_LEVEL or r.type.startswith("pulumi:providers:") or _programs_own(r):
            continue
        parent = by_urn.get(r.parent)
        assert parent is not None, f"{r.type} {r.name} has no parent component (parent={r.parent!r})"
        assert parent.type in COMPONENT_TYPES, f"{r.name}: parent {parent.type} is not a sunk component"
        assert r.name.startswith(f"{parent.name}-"), f"{r.name} is not named `{parent.name}-<suffix>`"
        # The URN carries the type chain of its parents: the engine sees the same tree.
        assert f"{parent.type}$" in r.urn


@pytest.mark.parametrize("name", ALL)
def test_type_tokens_and_component_shape(evaluations: dict[str, Evaluation], name: str) -> None:
    ev = evaluations[name]
    components = ev.components()
    assert {c.type for c in components} <= COMPONENT_TYPES
    assert any(c.type == "sunk:index:SlurmCluster" for c in components)
    # Components hold no inputs: everything they do is in their children.
    assert all(c.inputs == {} for c in components)


def test_library_children_inherit_the_callers_provider(evaluations: dict[str, Evaluation]) -> None:
    ev = evaluations[LIBRARY]
    providers = [r for r in ev.registrations if r.type == "pulumi:providers:kubernetes"]
    assert [p.name for p in providers] == ["platform"], "components must never construct a provider"
    for r in ev.kubernetes():
        assert r.provider.startswith(providers[0].urn), f"{r.name} does not use the caller's provider"


@pytest.mark.parametrize("name", ALL)
def test_secrets_are_secret_everywhere(evaluations: dict[str, Evaluation], name: str) -> None:
    ev = evaluations[name]
    for r in ev.kubernetes():
        if r.inputs.get("kind") == "Secret":
            for part in ("data", "stringData"):
                value = r.inputs.get(part)
                if value is None:
                    continue
                assert is_secret(value) or all(is_secret(v) for v in value.values()), f"{r.name}.{part}"
        else:
            assert not _contains_secret(r.inputs), f"{r.name} ({r.inputs.get('kind')}) carries a secret value"
    for r in ev.generated():
        assert r.additional_secret_outputs, f"{r.type} {r.name}: generated values must be secret outputs"
    for key, value in ev.outputs.items():
        assert not _contains_secret(value), f"stack output {key} is secret: exports must hold nothing secret"


def _contains_secret(value: Any) -> bool:
    if is_secret(value):
        return True
    if isinstance(value, dict):
        return any(_contains_secret(v) for v in value.values())
    if isinstance(value, list):
        return any(_contains_secret(v) for v in value)
    return False


@pytest.mark.parametrize("name", ALL)
def test_no_generated_value_leaks_into_non_secret_objects(evaluations: dict[str, Evaluation], name: str) -> None:
    ev = evaluations[name]
    secrets = [o for o in _objects(ev) if o["kind"] == "Secret"]
    values = {
        v
        for s in secrets
        for part in ("data", "stringData")
        for v in (s.get(part) or {}).values()
        if isinstance(v, str) and len(v) >= 16
    }
    others = [o for o in _objects(ev) if o["kind"] != "Secret"]
    text = repr(others) + repr(ev.plain_outputs(show_secrets=True))
    assert not [v for v in values if v in text]


@pytest.mark.parametrize("name", ALL)
def test_selectors_match_pod_labels(evaluations: dict[str, Evaluation], name: str) -> None:
    objs = _objects(evaluations[name])
    pods = [(w["metadata"].get("namespace"), t["metadata"]["labels"]) for w, t in _pod_templates(evaluations[name])]

    def matched(ns: str | None, selector: dict[str, str]) -> bool:
        return any(pns == ns and selector.items() <= labels.items() for pns, labels in pods)

    for o in objs:
        ns = o["metadata"].get("namespace")
        if o["kind"] in {"Deployment", "StatefulSet"}:
            sel = o["spec"]["selector"]["matchLabels"]
            assert sel.items() <= o["spec"]["template"]["metadata"]["labels"].items(), o["metadata"]["name"]
        if o["kind"] == "Service":
            assert matched(ns, o["spec"]["selector"]), f"Service {o['metadata']['name']} selects no pod"
        if o["kind"] == "PodDisruptionBudget":
            assert matched(ns, o["spec"]["selector"]["matchLabels"])
        if o["kind"] == "NetworkPolicy":
            # slurmd pods are the operator's, not in the render: their selectors are checked
            # against the operator's pods in tests/test_roles.py.
            def slurmd(sel: dict[str, str]) -> bool:
                return sel.get("app.kubernetes.io/component") == "slurmd"

            sel = o["spec"]["podSelector"]["matchLabels"]
            assert slurmd(sel) or matched(ns, sel), o["metadata"]["name"]
            for rule in [*o["spec"].get("ingress", []), *o["spec"].get("egress", [])]:
                for peer in rule.get("from", rule.get("to", [])):
                    if "namespaceSelector" not in peer and "ipBlock" not in peer:
                        got = peer["podSelector"]["matchLabels"]
                        assert slurmd(got) or matched(ns, got), f"{o['metadata']['name']}: {peer}"
        if o["kind"] == "StatefulSet":
            service = next(
                s for s in objs if s["kind"] == "Service" and s["metadata"]["name"] == o["spec"]["serviceName"]
            )
            assert service["spec"]["selector"].items() <= o["spec"]["template"]["metadata"]["labels"].items()


def _containers(template: dict[str, Any]) -> list[dict[str, Any]]:
    spec = template["spec"]
    return [*spec.get("initContainers", []), *spec["containers"]]


@pytest.mark.parametrize("name", ALL)
def test_probes_and_resources_on_every_container(evaluations: dict[str, Evaluation], name: str) -> None:
    templates = _pod_templates(evaluations[name])
    assert templates
    for workload, template in templates:
        one_shot = [c["name"] for c in template["spec"].get("initContainers", []) if c.get("restartPolicy") != "Always"]
        for c in _containers(template):
            where = f"{workload['kind']} {workload['metadata']['name']} / {c['name']}"
            res = c.get("resources", {})
            assert {"cpu", "memory"} <= set(res.get("requests", {})), f"{where}: requests"
            assert "memory" in res.get("limits", {}), f"{where}: memory limit"
            if (workload["kind"] == "Job" and c.get("restartPolicy") != "Always") or c["name"] in one_shot:
                continue  # a one-shot step or init container: it exits, nothing to probe (none allowed)
            assert "livenessProbe" in c, f"{where}: liveness probe"
            if "restartPolicy" not in c:  # main containers gate readiness; sidecars gate startup
                assert "readinessProbe" in c, f"{where}: readiness probe"
            else:
                assert "startupProbe" in c, f"{where}: startup probe"


ROOT_ALLOWED = {"munge", "sackd", "sshd", "sssd"}
"""Containers that start as root, each for a stated reason in sunk.manifests (munged's key
ownership, sackd's root-owned key on login, sshd, sssd). None is privileged; slurmd pods come
from the operator."""


@pytest.mark.parametrize("name", ALL)
def test_pod_security(evaluations: dict[str, Evaluation], name: str) -> None:
    for workload, template in _pod_templates(evaluations[name]):
        for c in _containers(template):
            sc = c["securityContext"]
            assert not sc.get("privileged", False), c["name"]
            assert sc["seccompProfile"]["type"] == "RuntimeDefault"
            assert "ALL" in sc["capabilities"]["drop"]
            if c["name"] in ROOT_ALLOWED:
                continue
            assert sc["runAsNonRoot"] is True, f"{workload['metadata']['name']}/{c['name']} must run as non-root"
            assert sc["runAsUser"] != 0
            assert sc["allowPrivilegeEscalation"] is False
        assert template["spec"].get("hostNetwork") is not True


@pytest.mark.parametrize("name", ALL)
def test_rbac_is_least_privilege(evaluations: dict[str, Evaluation], name: str) -> None:
    objs = _objects(evaluations[name])
    for o in objs:
        if o["kind"] in {"Role", "ClusterRole"}:
            for rule in o["rules"]:
                assert "*" not in rule["verbs"] and "*" not in rule["resources"], o["metadata"]["name"]
                assert "escalate" not in rule["verbs"] and "bind" not in rule["verbs"]
                if "secrets" in rule["resources"]:
                    # Reads only by name; the key generator may create Secrets, and get and update
                    # by name only the certificates it renews.
                    generator = o["metadata"]["labels"]["app.kubernetes.io/component"] == "keygen"
                    assert o["kind"] == "Role" and (
                        (rule["verbs"] == ["get"] and rule.get("resourceNames"))
                        or (generator and rule["verbs"] == ["create"] and not rule.get("resourceNames"))
                        or (generator and rule["verbs"] == ["get", "update"] and rule.get("resourceNames"))
                    ), "secrets only by name, only get, only namespaced; the generator creates, renews by name"
        if o["kind"] in {"RoleBinding", "ClusterRoleBinding"}:
            assert o["roleRef"]["name"] not in {"cluster-admin", "admin", "edit"}
    cluster_roles = [o for o in objs if o["kind"] == "ClusterRole"]
    for cr in cluster_roles:
        if cr["metadata"]["name"] != "sunk-operator":
            # Tenant ClusterRoles touch nodes (cluster-scoped) and their own namespace only; the
            # scheduler may also list and watch (no get, no write) pods everywhere, to sum what is
            # already on a Node before binding, as the kubelet will (from a watch: no per-bind read of the pod).
            for rule in cr["rules"]:
                if rule["resources"] == ["mutatingwebhookconfigurations"]:
                    # The webhook writes its CA into its own configuration, named, and no other.
                    assert rule["resourceNames"] == [cr["metadata"]["name"]] and rule["verbs"] == ["get", "patch"]
                    continue
                assert set(rule["resources"]) <= {"nodes", "nodes/status", "namespaces", "pods"}, cr["metadata"]["name"]
                if "namespaces" in rule["resources"]:
                    assert rule["resourceNames"] and rule["verbs"] == ["get"]
                if "pods" in rule["resources"]:
                    assert cr["metadata"]["name"].endswith("-scheduler") and rule["verbs"] == ["list", "watch"]


def test_tenant_cluster_roles_never_collide(evaluations: dict[str, Evaluation]) -> None:
    """acme-prod and globex-prod share one Kubernetes cluster: cluster-scoped names differ."""
    names: dict[str, str] = {}
    for stack in STACKS:
        for o in _objects(evaluations[stack]):
            if "namespace" in o["metadata"] or o["kind"] in {"CustomResourceDefinition", "Namespace"}:
                continue
            if o["metadata"]["name"].startswith("sunk-operator"):
                continue
            tenant = o["metadata"]["labels"]["slurm.sunk.dev/tenant"]
            assert names.setdefault(o["metadata"]["name"], tenant) == tenant


def test_topology_config_map_is_left_to_the_operator(evaluations: dict[str, Evaluation]) -> None:
    topo = [r for r in evaluations["acme-dev"].kubernetes() if r.inputs["metadata"]["name"] == "research-topology"]
    assert len(topo) == 1 and topo[0].ignore_changes == ("data",)
    others = [r for r in evaluations["acme-dev"].kubernetes() if r is not topo[0]]
    assert all(r.ignore_changes == () for r in others)
    assert not [r for r in evaluations["globex-dev"].kubernetes() if r.inputs["metadata"]["name"].endswith("-topology")]


@pytest.mark.parametrize("name", STACKS)
def test_nodesets_wait_for_the_crd_when_the_stack_installs_it(evaluations: dict[str, Evaluation], name: str) -> None:
    ev = evaluations[name]
    crd = [r for r in ev.kubernetes() if r.inputs["kind"] == "CustomResourceDefinition"]
    nodesets_component = next(r for r in ev.components() if r.type == "sunk:index:NodeSets")
    if crd:
        assert crd[0].urn in nodesets_component.dependencies
    else:
        assert not any("CustomResourceDefinition" in d for d in nodesets_component.dependencies)


@pytest.mark.parametrize("name", STACKS)
def test_workloads_wait_for_config_and_keys(evaluations: dict[str, Evaluation], name: str) -> None:
    ev = evaluations[name]
    by_type = {r.type: r for r in ev.components()}
    # The SDK expands a dependency on a component into its children.
    parents = {by_type["sunk:index:SlurmConfig"].urn, by_type["sunk:index:Auth"].urn}
    needed = {r.urn for r in ev.kubernetes() if r.parent in parents}
    assert needed
    for token in ("sunk:index:Controller", "sunk:index:NodeSets"):
        assert needed <= set(by_type[token].dependencies), token


@pytest.mark.parametrize("name", ALL)
def test_every_object_carries_tenant_labels_and_explicit_names(evaluations: dict[str, Evaluation], name: str) -> None:
    for r in evaluations[name].kubernetes():
        if _programs_own(r):
            continue
        o = plain(r.inputs, show_secrets=False)
        assert o["metadata"]["name"], f"{r.name}: no explicit metadata.name (offline renders need them)"
        labels = o["metadata"].get("labels", {})
        assert labels.get("app.kubernetes.io/part-of") == "sunk", r.name


def _registered(ev: Evaluation, kind: str, name: str) -> Registration:
    return next(r for r in ev.kubernetes() if r.inputs.get("kind") == kind and r.inputs["metadata"]["name"] == name)


def test_role_settings_reach_the_registered_resources(evaluations: dict[str, Evaluation]) -> None:
    """acme-prod's per-role pod and Service settings as the engine receives them, through the
    components (sunk.spec.pod): the login Service's load balancer, the daemons' Node placement and
    pull Secret, the GPU NodeSet's volumes (the operator builds slurmd pods from them)."""
    ev = evaluations["acme-prod"]
    login = plain(_registered(ev, "Service", "research-login").inputs, show_secrets=False)
    assert login["spec"]["type"] == "LoadBalancer" and login["spec"]["loadBalancerClass"] == "service.k8s.aws/nlb"
    assert login["spec"]["loadBalancerSourceRanges"] == ["203.0.113.0/24"]
    assert login["metadata"]["annotations"]["service.beta.kubernetes.io/aws-load-balancer-scheme"] == "internet-facing"
    assert login["metadata"]["labels"]["acme.example/cost-center"] == "hpc"
    system = {"node-role.acme.example/slurm-system": "true"}
    for kind, name in (
        ("StatefulSet", "research-controller"),
        ("Deployment", "research-accounting"),
        ("Deployment", "research-syncer"),
        ("Deployment", "research-scheduler"),
    ):
        pod = plain(_registered(ev, kind, name).inputs, show_secrets=False)["spec"]["template"]["spec"]
        assert pod["nodeSelector"] == system, name
        assert pod["tolerations"] == [
            {"key": "node-role.acme.example/slurm-system", "operator": "Exists", "effect": "NoSchedule"}
        ], name
        assert pod["imagePullSecrets"] == [{"name": "acme-registry"}], name
    controller = plain(_registered(ev, "StatefulSet", "research-controller").inputs, show_secrets=False)
    assert controller["spec"]["template"]["spec"]["priorityClassName"] == "acme-hpc-critical"
    h100 = plain(_registered(ev, "NodeSet", "research-h100").inputs, show_secrets=False)["spec"]
    volumes = {v["name"]: v for v in h100["volumes"]}
    assert volumes["dshm"]["emptyDir"] == {"medium": "Memory", "sizeLimit": "256Gi"}
    assert volumes["tools"]["nfs"] == {"server": "nfs.acme.example", "path": "/exports/tools"}
    assert h100["imagePullSecrets"] == ["acme-registry"]
    operator = plain(_registered(ev, "Deployment", "sunk-operator").inputs, show_secrets=False)
    assert operator["spec"]["template"]["spec"]["priorityClassName"] == "system-cluster-critical"
    assert operator["spec"]["template"]["spec"]["nodeSelector"] == system
    assert ev.plain_outputs()["loginEndpoint"] == "<pending>:22"


@pytest.mark.parametrize("name", STACKS)
def test_the_exporter_is_deployed_with_monitoring_scraped_at_its_interval_and_let_through(
    pulumi_keys: dict[str, Evaluation], specs: dict[str, ClusterSpec], name: str
) -> None:
    """Where monitoring and its exporter are on, Monitoring makes the exporter's
    Deployment (the JWT Secret of Auth, no Kubernetes token), its Service, and a ServiceMonitor that
    selects that Service at the exporter's read interval; slurmrestd's NetworkPolicy admits it."""
    ev = pulumi_keys[name]
    objects = {(o["kind"], o["metadata"]["name"]): o for o in _objects(ev)}
    exporters = [k for k in objects if k[0] == "Deployment" and k[1].endswith("-exporter")]
    monitoring = [c for c in ev.components() if c.type == "sunk:index:Monitoring"]
    spec = specs[name]
    if not (spec.monitoring.enabled and spec.monitoring.exporter.enabled):
        assert not exporters
        return
    (deployment,) = (objects[k] for k in exporters)
    (parent,) = monitoring
    reg = next(
        r for r in ev.kubernetes() if r.inputs.get("kind") == "Deployment" and r.name.endswith("-exporter-deployment")
    )
    assert reg.parent == parent.urn
    auth = next(c for c in ev.components() if c.type == "sunk:index:Auth")
    keys = {r.urn for r in ev.kubernetes() if r.parent == auth.urn}
    assert keys and keys <= set(parent.dependencies)  # it starts with its JWT key there
    pod = deployment["spec"]["template"]
    assert pod["spec"]["automountServiceAccountToken"] is False
    volume, conf = pod["spec"]["volumes"]
    assert volume["secret"]["secretName"] == objects[("Secret", f"{spec.name}-jwt")]["metadata"]["name"]
    env = {e["name"]: e["value"] for e in pod["spec"]["containers"][0]["env"]}
    # slurm.conf (no key) from the stack's own ConfigMap, where SUNK_SLURM_CONF_FILE says: squeue reads the jobs.
    (source,) = conf["projected"]["sources"]
    assert ("ConfigMap", source["configMap"]["name"]) in objects and source["configMap"]["items"][0][
        "key"
    ] == "slurm.conf"
    mount = next(m for m in pod["spec"]["containers"][0]["volumeMounts"] if m["name"] == conf["name"])
    assert env["SUNK_SLURM_CONF_FILE"] == f"{mount['mountPath']}/slurm.conf" and mount["readOnly"]
    interval = spec.monitoring.exporter.interval
    assert env["SUNK_COLLECT_INTERVAL"] == str(int(interval[:-1]) * (60 if interval.endswith("m") else 1))
    service = objects[("Service", f"{spec.name}-exporter")]
    assert service["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    monitor = objects[("ServiceMonitor", f"{spec.name}-exporter")]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert monitor["spec"]["endpoints"][0] == {"port": "metrics", "path": "/metrics", "interval": interval}
    # The runtime's ServiceMonitor does not scrape it a second time.
    runtime_monitor = objects[("ServiceMonitor", f"{spec.name}-runtime")]
    assert not runtime_monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    policy = objects[("NetworkPolicy", f"{spec.name}-restapi")]
    sources = [s.get("podSelector", {}).get("matchLabels", {}) for s in policy["spec"]["ingress"][0]["from"]]
    assert any(s.items() <= pod["metadata"]["labels"].items() for s in sources)
