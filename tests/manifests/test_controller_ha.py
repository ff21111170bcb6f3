"""controller.replicas 2-3: the spec's refusals, the StatefulSet, claim, budget and probes it
renders, the SlurmctldHost list, and the two shell scripts (primary-mark.sh, primary-probe.sh).
Real daemons prove the rest in tests/slurm/test_controller_ha.py."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from sunk import naming
from sunk.manifests import scripts
from sunk.manifests.auth import auth_refs
from sunk.manifests.cluster import cluster_manifests
from sunk.manifests.config import slurm_projection
from sunk.manifests.controller import disruption_budget, fenced, ready_probe, state_claim, statefulset
from sunk.manifests.meta import SLURM_UID
from sunk.manifests.network import role_policy
from sunk.render import render_slurm_files
from sunk.render.script import render
from sunk.render.slurm_conf import SLURMCTLD_TIMEOUT_HA
from sunk.spec import ClusterSpec, SpecError
from tests.support.specs import build_spec

RWX = {"accessMode": "ReadWriteMany", "storageClass": "nfs-client"}


def ha(replicas: int = 2, **controller: Any) -> ClusterSpec:
    return build_spec(controller={"replicas": replicas, "stateStorage": RWX, **controller})


def problems(**controller: Any) -> list[str]:
    with pytest.raises(SpecError) as info:
        build_spec(controller=controller)
    return info.value.problems


def test_ha_without_read_write_many_is_refused_naming_the_field_and_why() -> None:
    [problem] = problems(replicas=2, stateStorage={"accessMode": "ReadWriteOnce", "storageClass": "gp3"})
    path, _, message = problem.partition(": ")
    assert path == "controller.stateStorage.accessMode"
    assert "ReadWriteOnce" in message and "must be ReadWriteMany" in message and "replicas: 1" in message


def test_ha_where_the_storage_cant_be_known_is_refused() -> None:
    # Neither the access mode nor the class stated: the default class may be anything.
    found = problems(replicas=3)
    assert [p.partition(": ")[0] for p in found] == [
        "controller.stateStorage.accessMode",
        "controller.stateStorage.storageClass",
    ]
    assert "unset (ReadWriteOnce)" in found[0]
    assert "can't be known offline" in found[1]
    [problem] = problems(replicas=2, stateStorage={"accessMode": "ReadWriteMany"})
    assert problem.startswith("controller.stateStorage.storageClass: ")


@pytest.mark.parametrize("replicas", [0, 4])
def test_replicas_outside_one_to_three_are_refused(replicas: int) -> None:
    [problem] = problems(replicas=replicas)
    assert problem.startswith("controller.replicas: ")


def test_one_replica_is_restart_only_whatever_the_claim() -> None:
    spec = build_spec(controller={"stateStorage": RWX})
    assert not spec.controller.ha
    assert state_claim(spec)["spec"]["accessModes"] == ["ReadWriteMany"]
    sts = statefulset(spec, auth_refs(spec))["spec"]
    assert (sts["replicas"], sts["updateStrategy"], sts["podManagementPolicy"]) == (
        1,
        {"type": "RollingUpdate"},
        "OrderedReady",
    )
    assert "topologySpreadConstraints" not in sts["template"]["spec"]
    text = render_slurm_files(spec)["slurm.conf"]
    assert "SlurmctldTimeout=" not in text and "SlurmctldPrimaryOnProg=" not in text


def test_one_slurmctld_host_line_per_pod_in_order() -> None:
    spec = ha(3)
    files = render_slurm_files(spec)
    lines = files["slurm.conf"].splitlines()
    hosts = [line for line in lines if line.startswith("SlurmctldHost=")]
    assert hosts == [
        f"SlurmctldHost=research-controller-{i}(research-controller-{i}.research-controller.acme-research.svc.cluster.local)"
        for i in range(3)
    ]
    assert f"SlurmctldTimeout={SLURMCTLD_TIMEOUT_HA}" in lines
    assert "SlurmctldPrimaryOnProg=/etc/slurm/ha.d/primary-on" in lines
    assert "SlurmctldPrimaryOffProg=/etc/slurm/ha.d/primary-off" in lines
    assert {"ha.d/primary-on", "ha.d/primary-off"} <= set(files)


def test_the_statefulset_of_a_primary_and_backups() -> None:
    spec = ha(2)
    sts = statefulset(spec, auth_refs(spec))["spec"]
    assert sts["replicas"] == 2
    assert sts["updateStrategy"] == {"type": "OnDelete"}
    assert sts["podManagementPolicy"] == "Parallel"
    pod = sts["template"]["spec"]
    assert pod["topologySpreadConstraints"] == [
        {
            "maxSkew": 1,
            "minDomains": 2,
            "topologyKey": "kubernetes.io/hostname",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": sts["selector"]["matchLabels"]},
        }
    ]
    slurmctld = next(c for c in pod["containers"] if c["name"] == "slurmctld")
    assert slurmctld["readinessProbe"] == ready_probe(spec)
    assert slurmctld["readinessProbe"]["exec"]["command"] == scripts.sh(scripts.primary_probe())
    # Readiness starts once the startup probe passes: checked every 2 s, so a new primary is named
    # within 2 s of slurmctld listening; still 10 minutes to load a large state.
    startup = slurmctld["startupProbe"]
    assert startup["periodSeconds"] == 2 and startup["periodSeconds"] * startup["failureThreshold"] == 600
    assert state_claim(spec)["spec"]["accessModes"] == ["ReadWriteMany"]
    # The ha.d programs reach the controller pods, executable by SlurmUser.
    items = [
        s["configMap"]["items"][0]
        for s in slurm_projection(spec, "controller")["projected"]["sources"]
        if "configMap" in s
    ]
    modes = {i["path"]: i.get("mode") for i in items}
    assert modes["ha.d/primary-on"] == modes["ha.d/primary-off"] == 0o555


def test_a_users_own_node_spread_is_kept_and_not_doubled() -> None:
    own = {"maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "ScheduleAnyway"}
    zone = {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "ScheduleAnyway"}
    spec = ha(2, topologySpreadConstraints=[own])
    assert statefulset(spec, auth_refs(spec))["spec"]["template"]["spec"]["topologySpreadConstraints"] == [own]
    spec = ha(2, topologySpreadConstraints=[zone])
    keys = [
        c["topologyKey"]
        for c in statefulset(spec, auth_refs(spec))["spec"]["template"]["spec"]["topologySpreadConstraints"]
    ]
    assert keys == ["topology.kubernetes.io/zone", "kubernetes.io/hostname"]


def test_the_budget_is_the_same_and_keeps_the_only_ready_pod_the_primary() -> None:
    spec = ha(3)
    budget = disruption_budget(spec)["spec"]
    assert budget["minAvailable"] == 1 and budget["unhealthyPodEvictionPolicy"] == "AlwaysAllow"


@pytest.fixture
def sandbox(tmp_path: Path) -> dict[str, str]:
    """A fake `scontrol` (ping answers from $PING; reconfigure leaves a file) and `hostname`."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "scontrol").write_text(
        f'#!/bin/sh\nif [ "$1" = ping ]; then printf "%b" "$PING"; else echo "$@" >> {tmp_path}/calls; fi\n'
    )
    (bin_dir / "hostname").write_text("#!/bin/sh\necho research-controller-1\n")
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    return {"PATH": f"{bin_dir}:{os.environ['PATH']}", "TMP": str(tmp_path)}


def _mark(env: dict[str, str], primary: str) -> None:
    env["TMP"]
    subprocess.run(["/bin/sh", "-c", _mark_script(env, primary)], env=env, check=True)


def _mark_script(env: dict[str, str], primary: str) -> str:
    tmp = env["TMP"]
    return render(
        "primary-mark.sh", MARK=f"{tmp}/primary", STANDBY=f"{tmp}/standby", STOP=f"{tmp}/fence-stop", PRIMARY=primary
    )


def _slurmctld_stand_in(env: dict[str, str]) -> subprocess.Popen[bytes]:
    """A process that runs SlurmctldPrimaryOnProg as its child, as slurmctld does, then lives on."""
    return subprocess.Popen(["/bin/sh", "-c", '/bin/sh -c "$0"; exec sleep 60', _mark_script(env, "yes")], env=env)


def test_the_fences_stop_file_stops_the_slurmctld_that_marked_itself_primary(sandbox: dict[str, str]) -> None:
    """SlurmctldPrimaryOnProg's watcher: SIGTERM to its parent once the fence writes the stop file;
    a stop file left from before is cleared by the next takeover."""
    tmp = Path(sandbox["TMP"])
    (tmp / "fence-stop").write_text("old\n")
    ctld = _slurmctld_stand_in(sandbox)
    assert _wait_for(tmp / "primary") and not (tmp / "fence-stop").exists()
    subprocess.run(["sleep", "1.5"], check=True)
    assert ctld.poll() is None  # no stop file: it runs on
    (tmp / "fence-stop").write_text("the Lease is held by research-controller-0_1\n")
    assert ctld.wait(10) == -signal.SIGTERM


def test_the_watcher_ends_with_the_mark_and_stops_nothing(sandbox: dict[str, str]) -> None:
    tmp = Path(sandbox["TMP"])
    ctld = _slurmctld_stand_in(sandbox)
    try:
        assert _wait_for(tmp / "primary")
        _mark(sandbox, "no")  # PrimaryOffProg: it gave control back
        subprocess.run(["sleep", "1.5"], check=True)
        (tmp / "fence-stop").write_text("too late\n")
        subprocess.run(["sleep", "1.5"], check=True)
        assert ctld.poll() is None
    finally:
        ctld.kill()
        ctld.wait()


def _wait_for(path: Path) -> bool:
    for _ in range(100):
        if path.exists():
            return True
        subprocess.run(["sleep", "0.05"], check=True)
    return False


HUP_STAND_IN = """
import signal, subprocess, sys, time
hups = []
signal.signal(signal.SIGHUP, lambda *_: hups.append(1))
subprocess.run(["/bin/sh", "-c", sys.argv[1]], check=True)
deadline = time.monotonic() + 4
while not hups and time.monotonic() < deadline:
    time.sleep(0.05)
print(len(hups))
"""
"""A stand-in slurmctld that runs SlurmctldPrimaryOnProg as its child and counts the SIGHUPs it
gets within 4 s of it. Python, not sh: a shell can't trap a signal ignored when it started, and
`nohup` (or a CI runner) may start the suite with SIGHUP ignored; slurmctld sets its handler
itself, as this does."""


def _hups_to_stand_in(env: dict[str, str], primary: str) -> int:
    ctld = subprocess.run(
        [sys.executable, "-c", HUP_STAND_IN, _mark_script(env, primary)], env=env, capture_output=True, text=True
    )
    assert ctld.returncode == 0, ctld.stderr
    return int(ctld.stdout)


def test_primary_marks_and_a_reconfigure_only_after_a_takeover(sandbox: dict[str, str]) -> None:
    """The reconfigure is a SIGHUP to the slurmctld that ran the program, never `scontrol
    reconfigure` (the fake scontrol would log it to `calls`)."""
    tmp = Path(sandbox["TMP"])
    assert _hups_to_stand_in(sandbox, "yes") == 0  # the primary at start: no reconfigure
    assert (tmp / "primary").exists() and not (tmp / "standby").exists()
    _mark(sandbox, "no")  # standing by
    assert not (tmp / "primary").exists() and (tmp / "standby").exists()
    # a takeover: one reconfigure, in the background after 2 s, to its own slurmctld
    assert _hups_to_stand_in(sandbox, "yes") == 1
    assert not (tmp / "calls").exists()
    assert (tmp / "primary").exists() and not (tmp / "standby").exists()


@pytest.mark.parametrize(
    ("marked", "ping", "ready"),
    [
        (
            True,
            "Slurmctld(primary) at research-controller-0 is DOWN\nSlurmctld(backup) at research-controller-1 is UP\n",
            True,
        ),
        (
            False,
            "Slurmctld(primary) at research-controller-0 is UP\nSlurmctld(backup) at research-controller-1 is UP\n",
            False,
        ),
        (
            True,
            "Slurmctld(primary) at research-controller-0 is UP\nSlurmctld(backup) at research-controller-1 is DOWN\n",
            False,
        ),
        (
            True,
            "Slurmctld(primary) at research-controller-0 is UP\nSlurmctld(backup2) at research-controller-10 is UP\n",
            False,
        ),
    ],
    ids=["took-over", "standby", "marked-but-not-answering", "a-longer-name-is-not-ours"],
)
def test_the_readiness_probe(sandbox: dict[str, str], marked: bool, ping: str, ready: bool) -> None:
    mark = Path(sandbox["TMP"]) / "primary"
    if marked:
        mark.touch()
    script = render("primary-probe.sh", MARK=str(mark))
    done = subprocess.run(["/bin/sh", "-c", script], env={**sandbox, "PING": ping}, check=False)
    assert (done.returncode == 0) is ready


def test_the_probe_and_marks_name_the_same_file() -> None:
    assert f"mark={naming.PRIMARY_MARK}" in scripts.primary_probe()
    spec = ha(2)
    assert f"mark={naming.PRIMARY_MARK}" in render_slurm_files(spec)["ha.d/primary-on"]


def test_nothing_but_the_slurmctld_host_lines_names_a_controller_pod() -> None:
    """Everything that talks to slurmctld (slurmd, login, slurmrestd, the runtime's syncer,
    exporter and scheduler, the operator) reads the SlurmctldHost list from the one slurm.conf, so
    it follows a takeover; none may hold a pod's own address."""
    spec = ha(3)
    pods = [naming.controller_host(spec, i) for i in range(3)]
    for manifest in cluster_manifests(spec):
        if manifest["kind"] == "ConfigMap":
            continue  # the rendered files, below
        text = json.dumps(manifest)
        assert not [p for p in pods if f"{p}." in text], manifest["metadata"]["name"]
    files = render_slurm_files(spec)
    assert not [path for path, text in files.items() if path != "slurm.conf" and any(f"{p}." in text for p in pods)]
    conf = files["slurm.conf"]
    assert [line for line in conf.splitlines() if any(f"{p}." in line for p in pods)] == [
        line for line in conf.splitlines() if line.startswith("SlurmctldHost=")
    ]


def _by_kind(spec: ClusterSpec) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for m in cluster_manifests(spec):
        out.setdefault(m["kind"], []).append(m)
    return out


def test_with_backups_the_fence_may_write_only_the_clusters_lease() -> None:
    spec = ha(2)
    name = naming.controller_fence(spec)
    kinds = _by_kind(spec)
    [role] = [r for r in kinds["Role"] if r["metadata"]["name"] == name]
    assert role["rules"] == [
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "resourceNames": [name],
            "verbs": ["get", "update"],
        },
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
    ]
    [binding] = [b for b in kinds["RoleBinding"] if b["metadata"]["name"] == name]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": name, "namespace": spec.ns}]
    assert binding["roleRef"]["name"] == name
    pod = statefulset(spec, auth_refs(spec))["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == name and pod["automountServiceAccountToken"] is True
    [fence] = [c for c in pod["containers"] if c["name"] == "fence"]
    assert fence["image"] == spec.images.runtime.ref and fence["command"] == ["python", "-m", "sunk.runtime.fence"]
    env = {e["name"]: e.get("value") or e["valueFrom"]["fieldRef"]["fieldPath"] for e in fence["env"]}
    assert env == {
        "SUNK_NAMESPACE": spec.ns,
        "SUNK_LEASE": name,
        "SUNK_PRIMARY_MARK": naming.PRIMARY_MARK,
        "SUNK_STOP_FILE": naming.FENCE_STOP,
        "SUNK_POD_NAME": "metadata.name",
        "SUNK_POD_UID": "metadata.uid",
    }
    # It shares /run/slurmctld with slurmctld: the mark it reads, the stop file it writes.
    assert fence["volumeMounts"] == [{"name": "run", "mountPath": "/run/slurmctld"}]
    assert fence["securityContext"]["runAsUser"] == SLURM_UID


def test_one_controller_has_no_fence_and_no_token() -> None:
    spec = build_spec()
    names = {m["metadata"]["name"] for m in cluster_manifests(spec)}
    assert naming.controller_fence(spec) not in names
    pod = statefulset(spec, auth_refs(spec))["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False and "serviceAccountName" not in pod
    assert [c["name"] for c in pod["containers"]] == ["slurmctld", "reconfigure"]


@pytest.mark.parametrize("replicas", [1, 2])
def test_only_a_fenced_controller_may_reach_the_api_server(replicas: int) -> None:
    network = {"apiServerCidrs": ["10.0.0.1/32"]}
    controller: dict[str, Any] = {"replicas": replicas, **({"stateStorage": RWX} if replicas > 1 else {})}
    spec = build_spec(controller=controller, network=network)
    egress = role_policy(spec, "controller", "sunk-system")["spec"]["egress"]
    to_api = [r for r in egress if {"ipBlock": {"cidr": "10.0.0.1/32"}} in r.get("to", [])]
    assert bool(to_api) == fenced(spec) == (replicas > 1)
