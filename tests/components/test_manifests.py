"""The pure builders under the components: what rolls pods and what only reconfigures, the
container start scripts (run for real with stand-in Slurm binaries), SSSD and the network fences."""

from __future__ import annotations

import os
import stat
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from sunk.components.offline import Evaluation

from sunk.images import MARIADB_ENTRYPOINT, MARIADB_UID, reference
from sunk.manifests import scripts
from sunk.manifests.accounting import mariadb_manifests
from sunk.manifests.auth import auth_refs, sssd_config_map
from sunk.manifests.cluster import cluster_manifests
from sunk.manifests.config import (
    accounting_hash,
    client_hash,
    controller_hash,
    nodeset_config_files,
    nodeset_hash,
    restart_lines,
    role_files,
    slurm_projection,
)
from sunk.manifests.login import login_hash
from sunk.manifests.network import network_policies
from sunk.manifests.nodeset_pod import template_hash
from sunk.manifests.sssd import render_sssd_conf
from sunk.nodeset_resource import NodeSetResourceSpec
from sunk.render import finalize_slurmdbd_conf, render_slurm_files
from sunk.spec.base import quantity_value
from sunk.spec.cluster import ClusterSpec
from tests.support.waiting import wait_for

from .conftest import LIBRARY, ROOT, STACKS


def _change(spec: ClusterSpec, **update: Any) -> ClusterSpec:
    data = spec.model_dump(by_alias=True, exclude_unset=True)
    for path, value in update.items():
        node = data
        keys = path.split("__")
        for key in keys[:-1]:
            node = node[int(key)] if isinstance(node, list) else node.setdefault(key, {})
        node[keys[-1]] = value
    return ClusterSpec.model_validate(data)


def test_reconfigurable_changes_roll_nothing(specs: dict[str, ClusterSpec]) -> None:
    spec = specs["acme-dev"]
    changed = _change(spec, partitions__0__maxTime="2-00:00:00")
    assert render_slurm_files(changed)["slurm.conf"] != render_slurm_files(spec)["slurm.conf"]
    assert controller_hash(changed) == controller_hash(spec)
    assert client_hash(changed) == client_hash(spec)
    assert nodeset_hash(changed, changed.nodesets[0]) == nodeset_hash(spec, spec.nodesets[0])
    assert accounting_hash(changed) == accounting_hash(spec)


def test_restart_class_changes_roll_slurmctld(specs: dict[str, ClusterSpec]) -> None:
    spec = specs["acme-dev"]
    bound = _change(spec, nodesets__0__maxNodes=300)  # MaxNodeCount: a reconfigure would kill slurmctld
    assert "MaxNodeCount=512" in restart_lines(render_slurm_files(spec)["slurm.conf"])
    assert controller_hash(bound) != controller_hash(spec)
    auth = _change(spec, auth__type="slurm")
    assert controller_hash(auth) != controller_hash(spec) and client_hash(auth) != client_hash(spec)


def test_only_what_a_role_reads_rolls_it(specs: dict[str, ClusterSpec]) -> None:
    spec = specs["acme-dev"]
    gres = _change(spec, nodesets__1__gpus={"type": "h100", "count": 1})
    assert nodeset_hash(gres, gres.nodesets[1]) != nodeset_hash(spec, spec.nodesets[1])
    assert nodeset_hash(gres, gres.nodesets[0]) == nodeset_hash(spec, spec.nodesets[0])  # the CPU nodes keep going
    dbd = _change(spec, accounting__extraSlurmdbdConf=["DebugLevel=debug"])
    assert accounting_hash(dbd) != accounting_hash(spec)
    assert controller_hash(dbd) == controller_hash(spec) and nodeset_hash(dbd, dbd.nodesets[0]) == nodeset_hash(
        spec, spec.nodesets[0]
    )
    keys = _change(spec, login__authorizedKeys=[])
    assert login_hash(keys) != login_hash(spec) and controller_hash(keys) == controller_hash(spec)


def test_roles_mount_only_their_files(specs: dict[str, ClusterSpec]) -> None:
    spec = specs["acme-dev"]
    assert role_files(spec, "restapi") == ["slurm.conf"]
    assert "slurmdbd.conf" not in role_files(spec, "login")
    assert "job_submit.lua" in role_files(spec, "controller")
    assert "accounting-setup.sh" in role_files(spec, "accounting-setup")
    sources = slurm_projection(spec, "accounting")["projected"]["sources"]
    assert sources == [
        {"configMap": {"name": "research-slurm-conf", "items": [{"key": "slurm.conf", "path": "slurm.conf"}]}},
        {"configMap": {"name": "research-slurmdbd-conf", "items": [{"key": "slurmdbd.conf", "path": "slurmdbd.conf"}]}},
    ]
    assert nodeset_config_files(spec, spec.nodeset("gpu")) == {
        "cgroup.conf": "research-cgroup-conf",
        "gres.conf": "research-gres-gpu-conf",
        "plugstack.conf": "research-plugstack-conf",
        "oci.conf": "research-oci-conf",
        "prolog.d/00-mark.sh": "research-prolog-00-mark-sh",
        "slurm.conf": "research-slurm-conf",
    }


def _deployed(spec: ClusterSpec) -> tuple[dict[str, Any], dict[str, Any]]:
    """(what decides a roll of each workload, data of each ConfigMap) for the whole cluster: the
    pod template of each Deployment and StatefulSet, and for each NodeSet the template hash the
    operator compares its pods with (given the keys of the ConfigMaps of the same render)."""
    objs = cluster_manifests(spec)
    data = {o["metadata"]["name"]: o["data"] for o in objs if o["kind"] == "ConfigMap"}
    keys = {name: list(d) for name, d in data.items()}
    rolls: dict[str, Any] = {}
    for o in objs:
        if o["kind"] in {"Deployment", "StatefulSet"}:
            rolls[o["metadata"]["name"]] = o["spec"]["template"]
        elif o["kind"] == "NodeSet":
            rolls[o["metadata"]["name"]] = template_hash(NodeSetResourceSpec.model_validate(o["spec"]), keys)
    return rolls, data


def _effect(before: ClusterSpec, after: ClusterSpec) -> tuple[set[str], set[str]]:
    """(workloads whose pods a change replaces, ConfigMaps it updates in place: running pods see
    those, and the reconfigure watcher applies them)."""
    (old_rolls, old_data), (new_rolls, new_data) = _deployed(before), _deployed(after)
    rolled = {n for n in old_rolls.keys() | new_rolls.keys() if old_rolls.get(n) != new_rolls.get(n)}
    updated = {n for n in old_data.keys() | new_data.keys() if old_data.get(n) != new_data.get(n)}
    return rolled, updated


@pytest.mark.parametrize(
    ("change", "rolled", "updated"),
    [
        # Reconfigurable: one ConfigMap changes, no pod is replaced.
        ({"partitions__0__maxTime": "2-00:00:00"}, set(), {"research-slurm-conf"}),
        # Scaling within maxNodes: slurm.conf is unchanged; the operator adds the pods.
        ({"nodesets__0__replicas": 5}, set(), set()),
        ({"scripts__prolog": {"00-mark.sh": "#!/bin/sh\necho changed\n"}}, set(), {"research-prolog-00-mark-sh"}),
        # gres-gpu.conf (and the node line): only the gpu NodeSet's pods.
        ({"nodesets__1__gpus": {"type": "h100", "count": 1}}, {"research-gpu"}, {"research-gres-gpu-conf"}),
        # Every gres file: every NodeSet, but slurmctld reconfigures.
        (
            {"extraConfig__gresConf": ["Name=mps Count=100"]},
            {"research-cpu", "research-gpu"},
            {"research-gres-conf", "research-gres-cpu-conf", "research-gres-gpu-conf"},
        ),
        # slurmdbd has no file-triggered reconfigure.
        ({"accounting__extraSlurmdbdConf": ["DebugLevel=debug"]}, {"research-accounting"}, {"research-slurmdbd-conf"}),
        # A new script is a new ConfigMap in the NodeSets' configFiles: their pods roll.
        (
            {"scripts__prolog": {"00-mark.sh": "#!/bin/sh\n", "10-more.sh": "#!/bin/sh\n"}},
            {"research-cpu", "research-gpu"},
            {"research-prolog-00-mark-sh", "research-prolog-10-more-sh"},
        ),
    ],
    ids=["partition", "scale", "prolog-body", "gres-gpu", "gres-all", "slurmdbd", "new-prolog"],
)
def test_a_change_rolls_only_what_must_roll(
    specs: dict[str, ClusterSpec], change: dict[str, Any], rolled: set[str], updated: set[str]
) -> None:
    """End to end over the cluster's manifests, per-file ConfigMaps included."""
    spec = specs["acme-dev"]
    assert _effect(spec, _change(spec, **change)) == (rolled, updated)


@pytest.fixture
def bin_dir(tmp_path: Path) -> Path:
    """Stand-ins for Slurm binaries: they record how they were called."""
    folder = tmp_path / "bin"
    folder.mkdir()
    log = tmp_path / "calls.log"
    for name, body in {
        "scontrol": f'echo "scontrol $*" >> {log}',
        "slurmdbd": 'echo "SLURM_CONF=$SLURM_CONF"; stat -c %a "$(dirname "$SLURM_CONF")/slurmdbd.conf"',
    }.items():
        path = folder / name
        path.write_text(f"#!/bin/sh\n{body}\n")
        path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return folder


def test_reconfigure_watcher_reconfigures_only_what_it_may(tmp_path: Path, bin_dir: Path) -> None:
    etc = tmp_path / "etc"
    (etc / "jwt").mkdir(parents=True)
    (etc / "slurm.conf").write_text("ClusterName=c\nMaxNodeCount=4\nPartitionName=p MaxTime=10\n")
    (etc / "jwt" / "jwt_hs256.key").write_text("k1")
    log = tmp_path / "calls.log"
    script = scripts.reconfigure_watcher(str(etc), period=0.1, heartbeat=str(tmp_path / "alive"))
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    proc = subprocess.Popen(["/bin/sh", "-c", script], env=env, stdout=subprocess.PIPE, text=True)
    try:
        wait_for("the watcher's heartbeat", lambda: (tmp_path / "alive").exists(), timeout=10)
        (etc / "jwt" / "jwt_hs256.key").write_text("k2")  # keys are not configuration
        (etc / "slurm.conf").write_text("ClusterName=c\nMaxNodeCount=4\nPartitionName=p MaxTime=20\n")
        wait_for("one reconfigure", lambda: log.exists() and log.read_text() == "scontrol reconfigure\n", timeout=10)
        (etc / "slurm.conf").write_text("ClusterName=c\nMaxNodeCount=9\nPartitionName=p MaxTime=30\n")
        time.sleep(0.6)
        assert log.read_text() == "scontrol reconfigure\n", "a restart-class change must not reconfigure"
    finally:
        proc.kill()
        out, _ = proc.communicate()
    assert "restart-class settings changed" in out


def test_reconfigure_watcher_stops_on_sigterm_with_status_0(tmp_path: Path, bin_dir: Path) -> None:
    """It is its container's PID 1, where an unhandled SIGTERM is ignored (the pod's deletion then
    waits out the grace period): it handles it, mid-sleep, and exits 0 (killed by the signal: -15)."""
    etc = tmp_path / "etc"
    etc.mkdir()
    (etc / "slurm.conf").write_text("ClusterName=c\n")
    script = scripts.reconfigure_watcher(str(etc), period=30, heartbeat=str(tmp_path / "alive"))
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    proc = subprocess.Popen(["/bin/sh", "-c", script], env=env, stdout=subprocess.DEVNULL)
    try:
        wait_for("the watcher's heartbeat", lambda: (tmp_path / "alive").exists(), timeout=10)
        time.sleep(0.2)  # inside its 30 s sleep
        proc.terminate()
        assert proc.wait(timeout=10) == 0
    finally:
        proc.kill()


def test_slurmdbd_start_mirrors_finalize_slurmdbd_conf(
    tmp_path: Path, bin_dir: Path, specs: dict[str, ClusterSpec]
) -> None:
    spec = specs["acme-dev"]
    files = render_slurm_files(spec)
    etc, run = tmp_path / "etc", tmp_path / "run"
    etc.mkdir()
    run.mkdir()
    (etc / "slurm.conf").write_text(files["slurm.conf"])
    (etc / "slurmdbd.conf").write_text(files["slurmdbd.conf"])
    secret = tmp_path / "password"
    secret.write_text("s3cret-Pass\n")
    script = scripts.slurmdbd_start(str(etc), str(secret), str(run))
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    out = subprocess.run(["/bin/sh", "-c", script], env=env, capture_output=True, text=True, check=True).stdout
    assert out.split() == [f"SLURM_CONF={run}/slurm.conf", "600"]
    assert (run / "slurmdbd.conf").read_text() == finalize_slurmdbd_conf(files["slurmdbd.conf"], "s3cret-Pass")
    secret.write_text("two\nlines")
    bad = subprocess.run(["/bin/sh", "-c", script], env=env, capture_output=True, text=True)
    assert bad.returncode != 0 and "one line" in bad.stderr


@pytest.mark.parametrize("name", [*STACKS, LIBRARY])
def test_every_container_script_parses(evaluations: dict[str, Evaluation], name: str) -> None:
    for obj in evaluations[name].manifests():
        template = obj.get("spec", {}).get("template", {})
        pod = template.get("spec", {})
        for c in [*pod.get("initContainers", []), *pod.get("containers", [])]:
            cmd = c.get("command", [])
            if cmd[:2] == ["/bin/sh", "-c"]:
                check = subprocess.run(["/bin/sh", "-n", "-c", cmd[2]], capture_output=True, text=True)
                assert check.returncode == 0, f"{obj['metadata']['name']}/{c['name']}: {check.stderr}"


def test_sssd_conf_never_holds_the_bind_password(specs: dict[str, ClusterSpec]) -> None:
    spec = specs["acme-prod"]
    assert spec.auth.ldap is not None
    conf = render_sssd_conf(spec.auth.ldap)
    assert "ldap_uri = ldaps://ldap.acme.example:636" in conf
    assert "ldap_default_bind_dn = cn=sssd,ou=services,dc=acme,dc=example" in conf
    assert "ldap_default_authtok =" not in conf
    assert conf.rstrip().splitlines()[-1].startswith("ldap_default_authtok_type")  # appended after, same section
    assert sssd_config_map(specs["acme-dev"]) is None


def test_network_fences(specs: dict[str, ClusterSpec]) -> None:
    """Before: slurmctld admitted any pod of the cluster on 6817, and only MariaDB and slurmrestd
    were fenced. Now a default deny covers every pod of the cluster and each role admits what its
    row of the table lists."""
    dev = {p["metadata"]["name"]: p["spec"] for p in network_policies(specs["acme-dev"], "sunk-system")}
    assert dev["research-default-deny"] == {
        "podSelector": {"matchLabels": {"slurm.sunk.dev/cluster": "research"}},
        "policyTypes": ["Ingress", "Egress"],
    }

    def of(role: str) -> dict[str, Any]:
        return {
            "podSelector": {"matchLabels": {"slurm.sunk.dev/cluster": "research", "app.kubernetes.io/component": role}}
        }

    (ctld_in,) = dev["research-controller"]["ingress"]
    assert ctld_in["ports"] == [{"protocol": "TCP", "port": 6817}]
    assert of("slurmd") in ctld_in["from"] and of("login") in ctld_in["from"]
    assert {"namespaceSelector": {}} not in ctld_in["from"] and of("scheduler") not in ctld_in["from"]
    assert dev["research-mariadb"]["ingress"] == [
        {"from": [of("accounting")], "ports": [{"protocol": "TCP", "port": 3306}]}
    ]
    rest = dev["research-restapi"]["ingress"][0]["from"]
    assert rest[-1]["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": "sunk-system"}}
    # Only the API callers may reach the Kubernetes API.
    api = [
        name
        for name, p in dev.items()
        if any(
            r.get("ports") == [{"protocol": "TCP", "port": 443}, {"protocol": "TCP", "port": 6443}]
            for r in p.get("egress", [])
        )
    ]
    assert sorted(api) == ["research-keygen", "research-scheduler", "research-syncer"]
    # login: 22 from the Service's source ranges (acme-prod's office range) or, with none, anywhere.
    prod = {p["metadata"]["name"]: p["spec"] for p in network_policies(specs["acme-prod"], None)}
    assert prod["research-login"]["ingress"][0] == {
        "from": [{"ipBlock": {"cidr": "203.0.113.0/24"}}],
        "ports": [{"protocol": "TCP", "port": 22}],
    }
    assert dev["research-login"]["ingress"][0] == {"ports": [{"protocol": "TCP", "port": 22}]}
    # external DB and LDAP over TLS: their own ports, from slurmdbd only.
    assert {"ports": [{"protocol": "TCP", "port": 3306}]} in prod["research-accounting"]["egress"]
    assert {"ports": [{"protocol": "TCP", "port": 636}]} in prod["research-controller"]["egress"]
    assert "research-mariadb" not in prod  # external DB: nothing of ours to fence
    off = specs["acme-dev"].model_copy(
        update={"network": specs["acme-dev"].network.model_copy(update={"policies": False})}
    )
    assert network_policies(off, None) == []


def _sel(cluster: str, component: str) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": "slurm",
        "app.kubernetes.io/instance": cluster,
        "app.kubernetes.io/component": component,
    }


def test_existing_secrets_are_referenced_not_created(specs: dict[str, ClusterSpec]) -> None:
    refs = auth_refs(specs["globex-prod"])
    assert (refs.auth.secret, refs.auth.key, refs.generate_auth) == ("globex-slurm-key", "slurm.key", False)
    assert (refs.jwt.secret, refs.generate_jwt) == ("globex-jwt", False)
    prod = auth_refs(specs["acme-prod"])
    assert prod.db_password is not None and prod.db_password.secret == "research-db" and not prod.generate_db


def test_slurmrestd_loads_the_slurmdbd_plugin_only_with_accounting(specs: dict[str, ClusterSpec]) -> None:
    from sunk.manifests.restapi import restapi_manifests

    def plugins(stack: str) -> str:
        spec = specs[stack]
        cmd = restapi_manifests(spec, auth_refs(spec))[0]["spec"]["template"]["spec"]["containers"][0]["command"]
        return str(cmd[cmd.index("-s") + 1])

    assert plugins("acme-dev") == "openapi/slurmctld,openapi/slurmdbd"
    assert plugins("globex-dev") == "openapi/slurmctld"  # accounting disabled


def test_mariadb_asks_only_what_our_image_does(specs: dict[str, ClusterSpec]) -> None:
    """The entrypoint reads every MARIADB_* variable the manifest sets, the readiness probe is a
    command the image has on the socket the entrypoint starts, and the user is the image's."""
    entrypoint = (ROOT / "runtime/images/mariadb/rootfs" / MARIADB_ENTRYPOINT.lstrip("/")).read_text()
    sts = next(m for m in mariadb_manifests(specs["acme-dev"]) if m["kind"] == "StatefulSet")
    container = sts["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == reference("mariadb")
    assert [e["name"] for e in container["env"]] == [
        "MARIADB_DATABASE",
        "MARIADB_USER",
        "MARIADB_PASSWORD_FILE",
        "MARIADB_ROOT_PASSWORD_FILE",
    ]
    assert all(e["name"] in entrypoint for e in container["env"])
    probe = container["readinessProbe"]["exec"]["command"]
    assert probe == ["mariadb-admin", "--socket=/run/mysqld/mysqld.sock", "ping"]
    assert "socket=/run/mysqld/mysqld.sock" in entrypoint
    assert container["securityContext"]["runAsUser"] == MARIADB_UID == 999


def test_mariadb_memory_holds_the_buffer_pool_slurmdbd_needs(specs: dict[str, ClusterSpec]) -> None:
    """slurmdbd 24.11 logs errors under a 2G buffer pool or a short lock wait (measured); the
    container's memory request holds the pool and the limit leaves headroom above it."""
    in_cluster = [s for s in specs.values() if s.accounting.enabled and s.accounting.external is None]
    assert in_cluster
    for spec in in_cluster:
        sts = next(m for m in mariadb_manifests(spec) if m["kind"] == "StatefulSet")
        container = sts["spec"]["template"]["spec"]["containers"][0]
        args = dict(a.removeprefix("--").split("=", 1) for a in container["args"])
        assert args["innodb-lock-wait-timeout"] == "900"
        pool = args["innodb-buffer-pool-size"]
        assert pool.endswith("M") and int(pool[:-1]) * 2**20 >= 2 * 2**30  # MariaDB's M is MiB
        memory = {part: quantity_value(container["resources"][part]["memory"]) for part in ("requests", "limits")}
        assert memory["requests"] >= int(pool[:-1]) * 2**20
        assert memory["limits"] - int(pool[:-1]) * 2**20 >= 512 * 2**20
    assert quantity_value("2560Mi") == 2.5 * 2**30 and quantity_value("3G") == 3e9 and quantity_value("500m") == 0.5


def test_the_accounting_setup_job_is_a_new_job_when_its_pod_changes(specs: dict[str, ClusterSpec]) -> None:
    """A Job's template is immutable (kube-apiserver refuses the apply: "field is immutable"), so a
    change of its pod, such as another release's image, must name a new Job; an unchanged spec keeps
    its name. Found by the upgrade drill on the local cluster's real API server."""
    from sunk.manifests.accounting import setup_job

    spec = specs["acme-dev"]
    refs = auth_refs(spec)
    older = _change(spec, slurm__version="24.11")
    jobs = [setup_job(s, refs) for s in (spec, older, spec)]
    assert jobs[0]["spec"]["template"] != jobs[1]["spec"]["template"]
    assert jobs[0]["metadata"]["name"] != jobs[1]["metadata"]["name"]
    assert jobs[0]["metadata"]["name"] == jobs[2]["metadata"]["name"]
