"""Why a pod waits and what the user must create (runtime/local/stuck.py): pure, over pods and
Events shaped as the kubelet and the scheduler write them."""

from __future__ import annotations

from typing import Any

from sunk.runtime.local.stuck import latest_warnings, made_in_cluster, reads, remedy, why

NS = "acme-research"


def pod(**spec: Any) -> dict[str, Any]:
    containers = [{"name": "slurmctld", "state": {"waiting": {"reason": "ContainerCreating"}}, "ready": False}]
    return {
        "metadata": {"name": "research-controller-0", "namespace": NS, "uid": "u1"},
        "spec": spec,
        "status": {"phase": "Pending", "containerStatuses": containers},
    }


def event(reason: str, message: str, at: str, uid: str = "u1", kind: str = "Warning") -> dict[str, Any]:
    return {"involvedObject": {"uid": uid}, "reason": reason, "message": message, "type": kind, "lastTimestamp": at}


LDAP = {
    "volumes": [
        {"name": "sunk-ldap-bind", "secret": {"secretName": "research-ldap", "items": [{"key": "password", "path": "p"}]}},
        {"name": "sunk-ldap-ca", "projected": {"sources": [
            {"secret": {"name": "research-ldap", "items": [{"key": "ca.crt", "path": "ca.crt"}]}}]}},
        {"name": "settings", "configMap": {"name": "research-files", "items": [{"key": "slurm.conf", "path": "s"}]}},
    ],
    "containers": [{"name": "c", "env": [{"name": "DB", "valueFrom": {"secretKeyRef": {"name": "db", "key": "pw"}}}]}],
}  # fmt: skip


def test_a_missing_secret_names_the_command_with_every_key_the_pod_reads() -> None:
    message = 'MountVolume.SetUp failed for volume "sunk-ldap-bind" : secret "research-ldap" not found'
    said = why(pod(**LDAP), event("FailedMount", message, "2026-12-05T10:00:00Z"))
    assert said.startswith(f"FailedMount: {message}; create it")
    assert said.endswith(
        f"kubectl create secret generic research-ldap -n {NS} --from-literal=ca.crt=<value> "
        "--from-literal=password=<value> --dry-run=client -o yaml | kubectl apply -f -"
    )


def test_a_configmap_a_key_and_a_claim_each_get_their_own_remedy() -> None:
    p = pod(**LDAP)
    assert "kubectl create configmap research-files -n acme-research --from-file=slurm.conf=<path>" in str(
        remedy(p, 'configmap "research-files" not found')
    )
    assert remedy(p, "secret references non-existent secret key: password") == (
        "add the key password to the Secret the pod names"
    )
    claim = str(remedy(p, 'persistentvolumeclaim "home" not found'))
    assert "PersistentVolumeClaim home in acme-research" in claim
    assert remedy(p, "0/3 nodes are available: node n1 is unschedulable") is None


def test_keys_come_from_volumes_projected_sources_and_env() -> None:
    p = pod(**LDAP)
    assert reads(p, "secret", "research-ldap") == ["ca.crt", "password"]
    assert reads(p, "secret", "db") == ["pw"]
    assert reads(p, "configMap", "research-files") == ["slurm.conf"]
    assert reads(p, "secret", "nothing") == []


def test_a_container_waiting_reason_comes_before_an_event_and_carries_the_remedy() -> None:
    p = pod(**LDAP)
    p["status"]["containerStatuses"][0]["state"] = {
        "waiting": {"reason": "CreateContainerConfigError", "message": 'secret "db" not found'}
    }
    said = why(p, event("FailedScheduling", "0/1 nodes are available", "2026-12-05T10:00:00Z"))
    assert said.startswith('slurmctld CreateContainerConfigError (secret "db" not found); create it')
    assert "--from-literal=pw=<value>" in said


def test_without_a_reason_or_event_the_phase_and_a_running_container_says_so() -> None:
    assert why(pod(), None) == "Pending"
    p = pod()
    p["status"]["containerStatuses"][0]["state"] = {"running": {}}
    assert why(p, event("FailedMount", "x", "t")) == "slurmctld running, not ready"


def test_the_newest_warning_of_each_object_counts_and_normal_events_do_not() -> None:
    events = [
        event("FailedScheduling", "old", "2026-12-05T10:00:00Z"),
        event("FailedMount", "new", "2026-12-05T10:05:00Z"),
        event("Scheduled", "normal", "2026-12-05T10:09:00Z", kind="Normal"),
        event("FailedMount", "other pod", "2026-12-05T10:01:00Z", uid="u2"),
    ]
    newest = latest_warnings(events)
    assert newest["u1"]["message"] == "new" and newest["u2"]["message"] == "other pod"


def test_a_repeated_event_is_one_event_counted_up_and_another_message_is_another() -> None:
    from sunk.runtime.local import events

    from tests.support.fakestore import FakeStore

    store = FakeStore()
    store.create(store.resource("v1/namespaces"), None, {"metadata": {"name": NS}})
    involved = {"kind": "Pod", "metadata": {"name": "p", "namespace": NS, "uid": "u1"}}
    kubelet, scheduler = events.Recorder(store, "kubelet"), events.Recorder(store, "default-scheduler")
    kubelet.event(involved, events.WARNING, "FailedMount", 'secret "x" not found', host="n1")
    kubelet.event(involved, events.WARNING, "FailedMount", 'secret "x" not found', host="n1")
    scheduler.event(involved, events.WARNING, "FailedScheduling", "0/1 nodes are available")
    listed = sorted(store.items(store.resource("v1/events"), NS), key=lambda e: e["reason"])
    assert [(e["reason"], e["count"], e["type"]) for e in listed] == [("FailedMount", 2, "Warning"),
                                                                       ("FailedScheduling", 1, "Warning")]  # fmt: skip
    assert listed[0]["involvedObject"] == {"apiVersion": "v1", "kind": "Pod", "namespace": NS, "name": "p", "uid": "u1"}
    assert listed[0]["source"] == {"component": "kubelet", "host": "n1"}


def _controller(name: str, ready: bool, running: bool = True, owner: str = "sts-1") -> dict[str, Any]:
    state = {"running": {}} if running else {"waiting": {"reason": "CrashLoopBackOff"}}
    return {
        "metadata": {"name": name, "labels": {"app.kubernetes.io/component": "controller"},
                     "ownerReferences": [{"kind": "StatefulSet", "uid": owner}]},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": str(ready)}],
                   "containerStatuses": [{"name": "slurmctld", "state": state}]},
    }  # fmt: skip


def test_up_counts_a_running_slurmctld_backup_beside_its_ready_primary_as_done() -> None:
    """With backups only the primary is Ready (its readiness probe): `sunk local up` must not wait
    for ever on the standby, yet must wait on a crashing one, and on one with no primary beside it."""
    from sunk.runtime.local.cli import standing_by

    primary, backup = _controller("c-0", True), _controller("c-1", False)
    assert standing_by(backup, [primary, backup]) and not standing_by(primary, [primary, backup])
    assert not standing_by(backup, [backup])  # no primary: both wait
    assert not standing_by(_controller("c-1", False, running=False), [primary])
    assert not standing_by(_controller("c-1", False, owner="other"), [primary])
    login = {**backup, "metadata": {**backup["metadata"], "labels": {"app.kubernetes.io/component": "login"}}}
    assert not standing_by(login, [primary, login])


def test_what_the_cluster_makes_itself_is_waited_on_not_asked_for() -> None:
    """The demo's first minute: slurmctld's pod mounts the JWT Secret the key generator Job has not
    written yet. `sunk local up` printed "sunk never makes it" with a `kubectl create` command; the
    Job's own list of Secrets (the render's SUNK_KEYGEN_SECRETS) says it will come."""
    from sunk.manifests.cluster import cluster_manifests
    from sunk.stackfile import load_stack
    from tests.support.stacks import FIXTURE_STACKS

    spec = load_stack("acme-dev", FIXTURE_STACKS).spec
    render = cluster_manifests(spec)
    jobs = [m for m in render if m["kind"] == "Job" and "keygen" in m["metadata"]["name"]]
    statefulsets = [m for m in render if m["kind"] == "StatefulSet"]
    made = made_in_cluster(jobs, statefulsets)
    jwt = ("secret", NS, "research-jwt")
    assert made[jwt].startswith("the key generator Job research-keygen-")
    message = 'MountVolume.SetUp failed for volume "slurm-config" : secret "research-jwt" not found'
    said = why(pod(**LDAP), event("FailedMount", message, "2026-12-05T10:00:00Z"), made)
    assert said.endswith("makes it: waiting for it") and "kubectl" not in said
    # A Secret the stack names and nothing in the cluster makes still gets its command.
    other = 'MountVolume.SetUp failed for volume "sunk-ldap-bind" : secret "research-ldap" not found'
    assert "kubectl create secret generic research-ldap" in why(pod(**LDAP), event("FailedMount", other, "t"), made)
    # A StatefulSet's claims are made by its controller, one per ordinal below its replicas.
    sts = {
        "metadata": {"name": "db", "namespace": NS},
        "spec": {"replicas": 2, "volumeClaimTemplates": [{"metadata": {"name": "data"}}]},
    }
    claims = made_in_cluster([], [sts])
    assert sorted(claims) == [("persistentvolumeclaim", NS, f"data-db-{i}") for i in (0, 1)]
    assert remedy(pod(), 'persistentvolumeclaim "data-db-1" not found', claims) == (
        "the StatefulSet db makes it: waiting for it"
    )
