"""Node lifecycle (runtime/local/lifecycle.py) on a fake clock: DefaultTolerationSeconds, a silent
Node turning Unknown after the grace period, the not-ready/unreachable taints, taint-based
eviction (at once, after tolerationSeconds, never), pod GC on an out-of-service Node, and the
controller applying all of it to a store: a deleted pod on a lost Node stays Terminating until the
out-of-service taint, and a StatefulSet makes no new pod until then."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sunk.runtime.common.timefmt import rfc3339, rfc3339_micro
from sunk.runtime.local import lifecycle
from sunk.runtime.local.controllers import Controllers
from sunk.runtime.local.inventory import node as make_node
from sunk.runtime.local.lifecycle import (
    NOT_READY,
    OUT_OF_SERVICE,
    UNREACHABLE,
    Evict,
    ForceDelete,
    LifecycleController,
    MarkNodeUnknown,
    MarkPodNotReady,
    SetTaints,
    Settings,
)
from sunk.runtime.local.store import Store

T0 = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
SETTINGS = Settings()


def _node(
    name: str = "n1", ready: str = "True", heard: datetime = T0, taints: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    obj = make_node(name, {"cpu": "8", "memory": "8Gi"}, taints=taints or [])
    obj["metadata"]["creationTimestamp"] = rfc3339(T0 - timedelta(hours=1))
    obj["status"]["conditions"][0].update(status=ready, lastHeartbeatTime=rfc3339(heard))
    return obj


def _lease(renewed: datetime, name: str = "n1") -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"renewTime": rfc3339_micro(renewed)}}


def _plan(
    nodes: list[dict[str, Any]],
    leases: dict[str, Any],
    pods: list[dict[str, Any]],
    now: datetime,
    settings: Settings = SETTINGS,
) -> tuple[list[Any], datetime | None]:
    """One pass with a healthy spare Node beside `nodes` (a cluster whose every Node is lost is in
    full disruption: no NoExecute taints, see the zone tests below)."""
    spare = _node("spare", heard=now)
    actions, due, _ = lifecycle.plan([*nodes, spare], {**leases, "spare": _lease(now, "spare")}, pods, now, settings)
    return actions, due


def _pod(name: str = "p", tolerations: list[dict[str, Any]] | None = None, **extra: Any) -> dict[str, Any]:
    meta = {
        "namespace": "default",
        "name": name,
        "uid": f"uid-{name}",
        "creationTimestamp": rfc3339(T0 - timedelta(hours=1)),
    }
    meta.update(extra)
    status = {"conditions": [{"type": "Ready", "status": "True"}]}
    return {"metadata": meta, "spec": {"nodeName": "n1", "tolerations": tolerations or []}, "status": status}


def _unreachable(seconds: int | None) -> dict[str, Any]:
    out: dict[str, Any] = {"key": UNREACHABLE, "operator": "Exists", "effect": "NoExecute"}
    if seconds is not None:
        out["tolerationSeconds"] = seconds
    return out


# -- admission --------------------------------------------------------------------------------


def test_default_toleration_seconds_adds_both_tolerations_to_a_pod_without_them() -> None:
    added = lifecycle.default_tolerations(
        [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
        Settings(not_ready_toleration=30, unreachable_toleration=40),
    )
    assert added == [
        {"key": "gpu", "operator": "Exists", "effect": "NoSchedule"},
        {"key": NOT_READY, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30},
        {"key": UNREACHABLE, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 40},
    ]


@pytest.mark.parametrize(
    ("existing", "added"),
    [
        ([_unreachable(None)], [NOT_READY]),  # a forever toleration is kept as it is
        ([{"key": NOT_READY, "operator": "Exists"}], [UNREACHABLE]),  # no effect: every effect
        ([{"operator": "Exists"}], []),  # tolerates everything
        ([{"key": UNREACHABLE, "operator": "Exists", "effect": "NoSchedule"}], [NOT_READY, UNREACHABLE]),
    ],
)
def test_an_existing_toleration_of_the_taint_is_left_alone(existing: list[dict[str, Any]], added: list[str]) -> None:
    out = lifecycle.default_tolerations(existing, SETTINGS)
    assert out[: len(existing)] == existing
    assert [t["key"] for t in out[len(existing) :]] == added


def test_the_store_admits_pods_with_the_default_tolerations_and_nothing_else() -> None:
    store = Store()
    store.admission.append(lifecycle.admission(SETTINGS))
    store.create(store.resource("v1/namespaces"), None, {"metadata": {"name": "default"}})
    pod = store.create(store.resource("v1/pods"), "default", {"metadata": {"name": "p"}, "spec": {"containers": []}})
    assert {(t["key"], t["tolerationSeconds"]) for t in pod["spec"]["tolerations"]} == {
        (NOT_READY, 300),
        (UNREACHABLE, 300),
    }
    cm = store.create(store.resource("v1/configmaps"), "default", {"metadata": {"name": "c"}, "data": {}})
    assert "spec" not in cm


# -- node health and taints ---------------------------------------------------------------------


def test_a_node_heard_within_the_grace_period_stays_ready_and_untainted() -> None:
    now = T0 + timedelta(seconds=50)
    actions, due = _plan([_node()], {"n1": _lease(T0)}, [_pod()], now, SETTINGS)
    assert actions == [] and due is None


def test_a_silent_node_turns_unknown_gets_the_unreachable_taints_and_its_pods_not_ready() -> None:
    now = T0 + timedelta(seconds=51)
    actions, _ = _plan([_node()], {"n1": _lease(T0)}, [_pod()], now, SETTINGS)
    assert actions[0] == MarkNodeUnknown("n1")
    taints = next(a for a in actions if isinstance(a, SetTaints)).taints
    assert {(t["key"], t["effect"]) for t in taints} == {(UNREACHABLE, "NoSchedule"), (UNREACHABLE, "NoExecute")}
    assert next(t for t in taints if t["effect"] == "NoExecute")["timeAdded"] == rfc3339(now)
    assert MarkPodNotReady("default", "p", "uid-p") in actions


def test_the_lease_counts_as_the_heartbeat_and_the_grace_is_configurable() -> None:
    node = _node(heard=T0 - timedelta(minutes=5))  # the kubelet posts status rarely; the Lease is the heartbeat
    now = T0 + timedelta(seconds=15)
    assert _plan([node], {"n1": _lease(T0)}, [], now, SETTINGS)[0] == []
    short = Settings(node_monitor_grace=10)
    assert _plan([node], {"n1": _lease(T0)}, [], now, short)[0][0] == MarkNodeUnknown("n1")


def test_ready_false_gives_the_not_ready_taints_and_ready_again_removes_them_keeping_others() -> None:
    own = {"key": "gpu", "value": "", "effect": "NoSchedule"}
    actions, _ = _plan([_node(ready="False", taints=[own])], {"n1": _lease(T0)}, [], T0, SETTINGS)
    (set_taints,) = actions
    assert isinstance(set_taints, SetTaints)
    assert [(t["key"], t["effect"]) for t in set_taints.taints] == [
        ("gpu", "NoSchedule"), (NOT_READY, "NoSchedule"), (NOT_READY, "NoExecute"),
    ]  # fmt: skip
    recovered = _node(taints=list(set_taints.taints))
    assert _plan([recovered], {"n1": _lease(T0)}, [], T0, SETTINGS)[0] == [SetTaints("n1", (own,))]


def test_a_noexecute_taint_keeps_its_time_added_across_passes() -> None:
    first = T0 - timedelta(minutes=1)
    taints = [
        {"key": UNREACHABLE, "effect": "NoSchedule"},
        {"key": UNREACHABLE, "effect": "NoExecute", "timeAdded": rfc3339(first)},
    ]
    node = _node(ready="Unknown", taints=taints)
    assert _plan([node], {"n1": _lease(T0 - timedelta(minutes=2))}, [], T0, SETTINGS)[0] == []


# -- eviction ---------------------------------------------------------------------------------


def _on_lost_node(pods: list[dict[str, Any]], now: datetime, added: datetime = T0) -> tuple[list[Any], datetime | None]:
    taints = [
        {"key": UNREACHABLE, "effect": "NoSchedule"},
        {"key": UNREACHABLE, "effect": "NoExecute", "timeAdded": rfc3339(added)},
    ]
    node = _node(ready="Unknown", taints=taints)
    return _plan([node], {"n1": _lease(added - timedelta(minutes=1))}, pods, now, SETTINGS)


def test_a_pod_without_a_matching_toleration_is_evicted_at_once() -> None:
    gpu_only = [{"key": "gpu", "operator": "Exists", "effect": "NoExecute"}]
    actions, _ = _on_lost_node([_pod(tolerations=gpu_only)], T0)
    assert Evict("default", "p", "uid-p") in actions


def test_a_pod_is_evicted_once_its_smallest_toleration_seconds_have_passed() -> None:
    pod = _pod(tolerations=[_unreachable(30), {"operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 5}])
    # the first toleration matching the taint is the one used: 30 s, not the later 5 s
    actions, due = _on_lost_node([pod], T0 + timedelta(seconds=29))
    assert not any(isinstance(a, Evict) for a in actions) and due == T0 + timedelta(seconds=30)
    actions, due = _on_lost_node([pod], T0 + timedelta(seconds=30))
    assert Evict("default", "p", "uid-p") in actions and due is None


def test_a_pod_created_after_the_taint_counts_from_its_creation() -> None:
    pod = _pod(tolerations=[_unreachable(30)], creationTimestamp=rfc3339(T0 + timedelta(seconds=20)))
    _, due = _on_lost_node([pod], T0 + timedelta(seconds=40))
    assert due == T0 + timedelta(seconds=50)


def test_a_pod_tolerating_forever_stays() -> None:
    actions, due = _on_lost_node([_pod(tolerations=[_unreachable(None)])], T0 + timedelta(days=1))
    assert not any(isinstance(a, Evict) for a in actions) and due is None


def test_pod_gc_force_deletes_terminating_pods_only_on_a_not_ready_out_of_service_node() -> None:
    deleting = _pod("gone", deletionTimestamp=rfc3339(T0))
    running = _pod("kept", tolerations=[_unreachable(None)])
    out_of_service = {"key": OUT_OF_SERVICE, "value": "nodeshutdown", "effect": "NoExecute", "timeAdded": rfc3339(T0)}
    lost = _node(ready="Unknown", taints=[{"key": UNREACHABLE, "effect": "NoSchedule"},
                                          {"key": UNREACHABLE, "effect": "NoExecute", "timeAdded": rfc3339(T0)}])  # fmt: skip
    actions, _ = _plan([lost], {}, [deleting, running], T0, SETTINGS)
    assert not any(isinstance(a, ForceDelete) for a in actions)  # no taint: Terminating for good
    lost["spec"]["taints"].append(out_of_service)
    actions, _ = _plan([lost], {}, [deleting, running], T0, SETTINGS)
    assert ForceDelete("default", "gone", "uid-gone") in actions
    assert Evict("default", "kept", "uid-kept") in actions  # it does not tolerate out-of-service
    healthy = _node(taints=[out_of_service])
    actions, _ = _plan([healthy], {"n1": _lease(T0)}, [deleting], T0, SETTINGS)
    assert not any(isinstance(a, ForceDelete) for a in actions)  # Ready: its kubelet confirms deletions


# -- the controller on a store ------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


def _store(clock: Clock) -> Store:
    store = Store(clock=clock)
    store.admission.append(lifecycle.admission(SETTINGS))
    for namespace in ("default", "kube-node-lease"):
        store.create(store.resource("v1/namespaces"), None, {"metadata": {"name": namespace}})
    for name in ("n1", "n2"):
        store.create(store.resource("v1/nodes"), None, make_node(name, {"cpu": "8", "memory": "8Gi"}))
    return store


def _heartbeat(store: Store, name: str, now: datetime) -> None:
    leases = store.resource("coordination.k8s.io/v1/leases")
    body = {"metadata": {"name": name}, "spec": {"renewTime": rfc3339_micro(now)}}
    if store.find(leases, "kube-node-lease", name) is None:
        store.create(leases, "kube-node-lease", body)
    else:
        store.patch(leases, "kube-node-lease", name, "merge", body)


def test_a_statefulset_pod_on_a_lost_node_stays_terminating_until_the_out_of_service_taint() -> None:
    clock = Clock()
    store = _store(clock)
    pods, nodes = store.resource("v1/pods"), store.resource("v1/nodes")
    sts = {
        "metadata": {"name": "db"},
        "spec": {"replicas": 1, "serviceName": "db", "selector": {"matchLabels": {"app": "db"}},
                 "template": {"metadata": {"labels": {"app": "db"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}}},
    }  # fmt: skip
    store.create(store.resource("apps/v1/statefulsets"), "default", sts)
    controllers, nodes_control = Controllers(store), LifecycleController(store, SETTINGS)
    controllers.reconcile()
    store.patch(pods, "default", "db-0", "merge", {"spec": {"nodeName": "n1"}})
    ready = {"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}
    store.patch(pods, "default", "db-0", "merge", ready, "status")  # as its kubelet reported before the loss
    first = store.get(pods, "default", "db-0")["metadata"]["uid"]
    assert any(t["key"] == UNREACHABLE for t in store.get(pods, "default", "db-0")["spec"]["tolerations"])
    for second in range(0, 120, 5):  # n2's kubelet keeps beating; n1's stopped at T0
        clock.now = T0 + timedelta(seconds=second)
        _heartbeat(store, "n2", clock.now)
        if second == 0:
            _heartbeat(store, "n1", clock.now)
        nodes_control.reconcile(clock.now)
        controllers.reconcile()
    lost, alive = store.get(nodes, None, "n1"), store.get(nodes, None, "n2")
    assert lifecycle.ready_status(lost) == "Unknown" and lifecycle.ready_status(alive) == "True"
    assert {t["key"] for t in lost["spec"]["taints"]} == {UNREACHABLE}
    pod = store.get(pods, "default", "db-0")
    assert pod["metadata"]["uid"] == first and not pod["metadata"].get("deletionTimestamp")  # 300 s not yet passed
    assert next(c for c in pod["status"]["conditions"] if c["type"] == "Ready")["status"] == "False"
    store.delete(pods, "default", "db-0")  # kubectl delete pod: no kubelet to confirm it
    for _ in range(3):
        clock.now += timedelta(seconds=5)
        nodes_control.reconcile(clock.now)
        controllers.reconcile()
    pod = store.get(pods, "default", "db-0")
    assert pod["metadata"]["uid"] == first and pod["metadata"]["deletionTimestamp"]  # Terminating, no new one
    taints = [*lost["spec"]["taints"], {"key": OUT_OF_SERVICE, "value": "nodeshutdown", "effect": "NoExecute"}]
    store.patch(nodes, None, "n1", "merge", {"spec": {"taints": taints}})
    nodes_control.reconcile(clock.now)
    controllers.reconcile()
    again = store.get(pods, "default", "db-0")
    assert again["metadata"]["uid"] != first  # pod GC force-deleted it; the StatefulSet made it again
    controllers.reconcile()  # the default scheduler: only n2 takes it (n1 is tainted unreachable)
    assert store.get(pods, "default", "db-0")["spec"]["nodeName"] == "n2"


def test_a_short_toleration_evicts_at_its_deadline_and_the_node_recovers_when_heard_again() -> None:
    clock = Clock()
    store = _store(clock)
    pods, nodes = store.resource("v1/pods"), store.resource("v1/nodes")
    body = {"metadata": {"name": "short"}, "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "x"}],
                                                    "tolerations": [_unreachable(5)]}}  # fmt: skip
    store.create(pods, "default", body)
    store.create(
        pods,
        "default",
        {"metadata": {"name": "forever"}, "spec": {"nodeName": "n1", "tolerations": [_unreachable(None)]}},
    )
    nodes_control = LifecycleController(store, SETTINGS)
    _heartbeat(store, "n1", T0)
    clock.now = T0 + timedelta(seconds=55)
    _heartbeat(store, "n2", clock.now)  # n2's kubelet is alive (were both lost: full disruption)
    due = nodes_control.reconcile(clock.now)
    assert due == clock.now + timedelta(seconds=5)
    clock.now = due
    _heartbeat(store, "n2", clock.now)
    nodes_control.reconcile(clock.now)
    short = store.get(pods, "default", "short")
    assert short["metadata"]["deletionTimestamp"]  # graceful: Terminating on the lost Node
    assert any(
        c["type"] == "DisruptionTarget" and c["reason"] == "DeletionByTaintManager"
        for c in short["status"]["conditions"]
    )
    assert not store.get(pods, "default", "forever")["metadata"].get("deletionTimestamp")
    _heartbeat(store, "n1", clock.now)  # the agent is back: it posts Ready (agent.py), the taints go
    node = store.get(nodes, None, "n1")
    node["status"]["conditions"][0].update(status="True")
    store.update(nodes, None, "n1", node, "status")
    nodes_control.reconcile(clock.now)
    assert not store.get(nodes, None, "n1")["spec"].get("taints")


def test_a_deployment_replaces_its_terminating_pod_on_a_lost_node_at_once() -> None:
    clock = Clock()
    store = _store(clock)
    pods = store.resource("v1/pods")
    dep = {
        "metadata": {"name": "web"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}}},
    }  # fmt: skip
    store.create(store.resource("apps/v1/deployments"), "default", dep)
    controllers = Controllers(store)
    controllers.reconcile()
    (first,) = store.items(pods, "default")
    store.patch(pods, "default", first["metadata"]["name"], "merge", {"spec": {"nodeName": "n1"}})
    store.delete(pods, "default", first["metadata"]["name"])  # on a lost Node: Terminating, unconfirmed
    controllers.reconcile()
    names = {p["metadata"]["name"]: bool(p["metadata"].get("deletionTimestamp")) for p in store.items(pods, "default")}
    assert names[first["metadata"]["name"]] and sum(not gone for gone in names.values()) == 1


# -- node startup grace ---------------------------------------------------------------------------


def _registered(name: str = "n1") -> dict[str, Any]:
    """A Node its kubelet registered (created at T0) but never posted a condition on."""
    obj = _node(name)
    obj["metadata"]["creationTimestamp"] = rfc3339(T0)
    obj["status"]["conditions"] = []
    return obj


def test_a_node_that_never_posted_ready_turns_unknown_after_the_startup_grace_not_the_monitor_grace() -> None:
    node = _registered()
    actions, _ = _plan([node], {}, [_pod()], T0 + timedelta(seconds=59))
    assert actions == []  # 59 s: past the monitor grace (50 s), within the startup grace (60 s): no taint yet
    actions, _ = _plan([node], {}, [_pod()], T0 + timedelta(seconds=61))
    assert actions[0] == MarkNodeUnknown("n1", never=True)
    taints = next(a for a in actions if isinstance(a, SetTaints)).taints
    assert {(t["key"], t["effect"]) for t in taints} == {(UNREACHABLE, "NoSchedule"), (UNREACHABLE, "NoExecute")}
    short = Settings(node_startup_grace=20)
    assert _plan([node], {}, [], T0 + timedelta(seconds=21), short)[0][0] == MarkNodeUnknown("n1", never=True)


def test_the_controller_adds_never_updated_conditions_to_a_node_that_never_posted() -> None:
    clock = Clock()
    store = _store(clock)
    nodes = store.resource("v1/nodes")
    store.create(nodes, None, _registered("n3"))
    control = LifecycleController(store, SETTINGS)
    clock.now = T0 + timedelta(seconds=61)
    for name in ("n1", "n2"):
        _heartbeat(store, name, clock.now)
    control.reconcile(clock.now)
    conditions = {c["type"]: c for c in store.get(nodes, None, "n3")["status"]["conditions"]}
    assert set(conditions) == set(lifecycle.HEALTH_CONDITIONS)
    assert {(c["status"], c["reason"]) for c in conditions.values()} == {("Unknown", "NodeStatusNeverUpdated")}
    assert conditions["Ready"]["lastHeartbeatTime"] == rfc3339(T0)  # its creation
    assert lifecycle.ready_status(store.get(nodes, None, "n1")) == "True"


# -- eviction rate limits and zone disruption -----------------------------------------------------------


def _zone(prefix: str, size: int, lost: int, zone: str = "") -> list[dict[str, Any]]:
    """`size` Nodes in one zone, the first `lost` of them silent since T0 - 60 s."""
    out = []
    for i in range(size):
        node = _node(f"{prefix}{i}", heard=T0 - timedelta(seconds=60) if i < lost else T0 + timedelta(days=1))
        if zone:
            node["metadata"]["labels"]["topology.kubernetes.io/zone"] = zone
        out.append(node)
    return out


def _tainted(node: dict[str, Any]) -> bool:
    return any(t["effect"] == "NoExecute" and t["key"] == UNREACHABLE for t in node["spec"].get("taints") or [])


def _run(nodes: list[dict[str, Any]], seconds: float, settings: Settings = SETTINGS, step: float = 1.0,
         pods: list[dict[str, Any]] | None = None) -> tuple[dict[float, set[str]], list[Any]]:  # fmt: skip
    """Passes every `step` s from T0 for `seconds`, each pass's taints applied to the Nodes: when each
    Node got its NoExecute taint, and every eviction made."""
    memory = lifecycle.Memory()
    when: dict[float, set[str]] = {}
    evicted: list[tuple[float, str]] = []
    by_name = {n["metadata"]["name"]: n for n in nodes}
    t = 0.0
    while t <= seconds:
        now = T0 + timedelta(seconds=t)
        actions, _, memory = lifecycle.plan(list(by_name.values()), {}, pods or [], now, settings, memory)
        for action in actions:
            if isinstance(action, MarkNodeUnknown):
                by_name[action.node]["status"]["conditions"][0]["status"] = "Unknown"
            elif isinstance(action, SetTaints):
                before = _tainted(by_name[action.node])
                by_name[action.node]["spec"]["taints"] = list(action.taints)
                if not before and _tainted(by_name[action.node]):
                    when.setdefault(t, set()).add(action.node)
            elif isinstance(action, Evict):
                evicted.append((t, action.name))
        t += step
    return when, evicted


def test_a_healthy_zone_taints_its_lost_nodes_at_the_eviction_rate() -> None:
    """4 of 10 Nodes lost (under 55 %): the zone is Normal, one Node gets the NoExecute taint every
    10 s (0.1 per second, burst 1), in the order they went; the NoSchedule taint comes at once."""
    when, _ = _run(_zone("a", 10, 4), 35)
    assert when == {0.0: {"a0"}, 10.0: {"a1"}, 20.0: {"a2"}, 30.0: {"a3"}}
    actions, due, memory = lifecycle.plan(_zone("a", 10, 4), {}, [], T0, SETTINGS)
    assert due == T0 + timedelta(seconds=10)  # the controller wakes when the next token comes
    noschedule = [a.node for a in actions if isinstance(a, SetTaints)]
    assert noschedule == ["a0", "a1", "a2", "a3"] and memory.zones == {"": lifecycle.NORMAL}


def test_a_small_partly_down_zone_stops_tainting_and_a_large_one_slows_to_the_secondary_rate() -> None:
    when, _ = _run(_zone("a", 10, 6), 60)
    assert when == {}  # 6 of 10 down: PartialDisruption; 10 Nodes is not over the large-cluster threshold
    large = Settings(large_cluster_threshold=9)
    when, _ = _run(_zone("a", 10, 6), 250, large, step=5)
    assert when == {0.0: {"a0"}, 100.0: {"a1"}, 200.0: {"a2"}}  # 0.01 per second


def test_a_fully_down_zone_is_tainted_at_the_normal_rate_while_another_zone_is_up() -> None:
    nodes = _zone("a", 3, 3, zone="z-a") + _zone("b", 3, 0, zone="z-b")
    when, _ = _run(nodes, 25)
    assert when == {0.0: {"a0"}, 10.0: {"a1"}, 20.0: {"a2"}}


def test_when_every_zone_is_fully_down_no_node_is_tainted_and_no_pod_evicted_until_one_comes_back() -> None:
    """Full disruption (all Nodes of all zones not Ready): upstream takes the NoExecute taints off
    and stops; the NoSchedule taints stay. A Node heard again ends it: tainting resumes."""
    nodes = _zone("a", 2, 2, zone="z-a") + _zone("b", 2, 2, zone="z-b")
    nodes[0]["spec"]["taints"] = [{"key": UNREACHABLE, "effect": "NoExecute", "timeAdded": rfc3339(T0)}]
    pod = _pod("p", tolerations=[])  # on a0 ("n1" is not a Node here)
    pod["spec"]["nodeName"] = "a0"
    memory = lifecycle.Memory()
    actions, _, memory = lifecycle.plan(nodes, {}, [pod], T0, SETTINGS, memory)
    assert len(memory.zones) == 2 and set(memory.zones.values()) == {lifecycle.FULL}
    taints = {a.node: a.taints for a in actions if isinstance(a, SetTaints)}
    assert {(t["key"], t["effect"]) for t in taints["a0"]} == {(UNREACHABLE, "NoSchedule")}  # NoExecute taken off
    assert not any(isinstance(a, Evict) for a in actions)
    for node in nodes:
        node["spec"]["taints"] = list(taints.get(node["metadata"]["name"], node["spec"].get("taints") or []))
        node["status"]["conditions"][0]["status"] = "Unknown"
    later = T0 + timedelta(minutes=10)
    actions, _, memory = lifecycle.plan(nodes, {}, [pod], later, SETTINGS, memory)
    assert not any(isinstance(a, Evict) for a in actions)
    assert not any(_tainted({"spec": {"taints": list(a.taints)}}) for a in actions if isinstance(a, SetTaints))
    nodes[3]["status"]["conditions"][0].update(status="True", lastHeartbeatTime=rfc3339(later))  # b1 is back
    actions, due, memory = lifecycle.plan(nodes, {}, [pod], later, SETTINGS, memory)
    assert set(memory.zones.values()) == {lifecycle.FULL, lifecycle.NORMAL}
    assert not any(isinstance(a, Evict) for a in actions)  # the limiters come back drained (SwapLimiter)
    assert due == later + timedelta(seconds=10)
    actions, _, memory = lifecycle.plan(nodes, {}, [pod], due, SETTINGS, memory)
    tainted = [a.node for a in actions if isinstance(a, SetTaints) and _tainted({"spec": {"taints": list(a.taints)}})]
    assert tainted == ["a0", "b0"]  # one per zone: each zone's limiter lets one through
    assert Evict("default", "p", "uid-p") in actions


def test_zone_state_counts_a_node_without_ready_as_not_ready_and_needs_three_down() -> None:
    assert lifecycle.zone_state(["True", "False"], 0.55) == lifecycle.NORMAL  # 50 %, and only 1 down
    assert lifecycle.zone_state(["True", "False", None], 0.55) == lifecycle.NORMAL  # 2 down: fewer than 3
    assert lifecycle.zone_state(["True", "False", None, "Unknown"], 0.55) == lifecycle.PARTIAL
    assert lifecycle.zone_state([None, "False"], 0.55) == lifecycle.FULL


def test_a_node_labelled_exclude_disruption_does_not_count_toward_its_zone() -> None:
    nodes = _zone("a", 2, 1) + _zone("x", 1, 0)
    nodes[2]["metadata"]["labels"][lifecycle.EXCLUDE_DISRUPTION] = ""
    _, _, memory = lifecycle.plan(nodes, {}, [], T0, SETTINGS)
    assert memory.zones == {"": lifecycle.NORMAL}
    nodes[1]["status"]["conditions"][0]["lastHeartbeatTime"] = rfc3339(T0 - timedelta(seconds=60))
    _, _, memory = lifecycle.plan(nodes, {}, [], T0, SETTINGS)  # the excluded Node alone is Ready
    assert memory.zones == {"": lifecycle.FULL}


def test_the_limiter_bucket_swaps_full_unless_the_old_one_was_empty() -> None:
    full = lifecycle.Bucket(0.1, 1.0, T0)
    assert full.swap(0.01, T0) == lifecycle.Bucket(0.01, 1.0, T0)
    empty = lifecycle.Bucket(0.1, 0.0, T0)
    assert empty.swap(0.01, T0 + timedelta(seconds=5)) == lifecycle.Bucket(0.01, 0.0, T0 + timedelta(seconds=5))
    assert empty.swap(0.01, T0 + timedelta(seconds=10)).tokens == 1.0  # refilled meanwhile
    assert full.swap(0.0, T0).next_token() is None
    assert empty.next_token() == T0 + timedelta(seconds=10)


# -- pod GC ------------------------------------------------------------------------------------------


def test_pods_of_a_node_that_is_gone_are_deleted_after_the_quarantine() -> None:
    orphan = _pod("orphan")
    orphan["spec"]["nodeName"] = "gone"
    done = _pod("done", **{})
    done["spec"]["nodeName"] = "gone"
    done["status"]["phase"] = "Succeeded"
    actions, missing = lifecycle.pod_gc(["n1"], [orphan, done, _pod("kept")], T0, SETTINGS, {})
    assert actions == [] and missing == {"gone": T0}
    actions, missing = lifecycle.pod_gc(["n1"], [orphan, done], T0 + timedelta(seconds=39), SETTINGS, missing)
    assert actions == [] and missing == {"gone": T0}  # first seen missing at T0: the quarantine counts from there
    actions, missing = lifecycle.pod_gc(["n1"], [orphan, done], T0 + timedelta(seconds=40), SETTINGS, missing)
    assert set(actions) == {ForceDelete("default", "orphan", "uid-orphan", "orphaned"),
                            ForceDelete("default", "done", "uid-done", "orphaned")}  # fmt: skip
    actions, missing = lifecycle.pod_gc(["n1", "gone"], [orphan], T0 + timedelta(seconds=40), SETTINGS, {"gone": T0})
    assert actions == [] and missing == {}  # it came back: the quarantine starts over next time


def test_terminated_pods_over_the_threshold_go_evicted_first_then_oldest() -> None:
    def terminated(name: str, minutes: int, reason: str | None = None) -> dict[str, Any]:
        pod = _pod(name, creationTimestamp=rfc3339(T0 + timedelta(minutes=minutes)))
        pod["status"] = {"phase": "Failed" if reason else "Succeeded", **({"reason": reason} if reason else {})}
        return pod

    pods = [terminated("new", 3), terminated("old", 1), terminated("evicted", 5, "Evicted"), terminated("mid", 2),
            _pod("running")]  # fmt: skip
    actions, _ = lifecycle.pod_gc(["n1"], pods, T0, Settings(terminated_pod_gc_threshold=2), {})
    assert [a.name for a in actions] == ["evicted", "old"] and {a.why for a in actions} == {"terminated"}
    assert lifecycle.pod_gc(["n1"], pods, T0, Settings(terminated_pod_gc_threshold=0), {})[0] == []  # 0: off
    assert lifecycle.pod_gc(["n1"], pods, T0, SETTINGS, {})[0] == []  # 4 of 12500


def test_a_terminating_pod_never_bound_is_force_deleted() -> None:
    pod = _pod("pending", deletionTimestamp=rfc3339(T0))
    pod["spec"]["nodeName"] = ""
    actions, _ = lifecycle.pod_gc(["n1"], [pod], T0, SETTINGS, {})
    assert actions == [ForceDelete("default", "pending", "uid-pending", "unscheduled")]


def test_the_controller_deletes_the_pods_of_a_deleted_node_marked_failed() -> None:
    clock = Clock()
    store = _store(clock)
    pods, nodes = store.resource("v1/pods"), store.resource("v1/nodes")
    store.create(pods, "default", {"metadata": {"name": "p"}, "spec": {"nodeName": "n2", "containers": []}})
    seen: list[dict[str, Any]] = []
    store.listen(lambda e: seen.append(e.obj) if e.resource == "v1/pods" and e.type == "DELETED" else None)
    control = LifecycleController(store, SETTINGS)
    store.delete(nodes, None, "n2")
    for second in (0, 20, 39):
        clock.now = T0 + timedelta(seconds=second)
        _heartbeat(store, "n1", clock.now)
        due = control.reconcile(clock.now)
    assert store.find(pods, "default", "p") is not None and due == T0 + timedelta(seconds=40)
    clock.now = T0 + timedelta(seconds=40)
    _heartbeat(store, "n1", clock.now)
    control.reconcile(clock.now)
    assert store.find(pods, "default", "p") is None
    (gone,) = seen
    assert gone["status"]["phase"] == "Failed"
    assert any(c["type"] == "DisruptionTarget" and c["reason"] == "DeletionByPodGC"
               and c["message"] == "PodGC: node no longer exists" for c in gone["status"]["conditions"])  # fmt: skip


def test_a_zone_of_excluded_nodes_only_has_no_state_but_still_taints() -> None:
    nodes = _zone("a", 1, 1, zone="z-a") + _zone("x", 1, 1, zone="z-x") + _zone("b", 1, 0, zone="z-b")
    nodes[1]["metadata"]["labels"][lifecycle.EXCLUDE_DISRUPTION] = ""
    when, _ = _run(nodes, 0)
    assert when == {0.0: {"a0", "x0"}}
    _, _, memory = lifecycle.plan(nodes, {}, [], T0, SETTINGS)
    assert sorted(memory.zones.values()) == [lifecycle.FULL, lifecycle.NORMAL] and len(memory.buckets) == 3


def test_the_cluster_process_takes_the_lifecycle_flags_sunk_local_up_passes(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    """`sunk local up --node-startup-grace-period 30 --node-eviction-rate 0.5` reaches the
    cluster's Settings: the flags cli._start writes are the ones `python -m sunk.runtime.local` reads."""
    import sys

    from sunk.runtime.local import __main__ as entry
    from sunk.runtime.local import cli as local_cli

    want = Settings(20.0, 40, 40, node_startup_grace=30.0, eviction_rate=0.5)
    started: list[list[str]] = []

    class Started(Exception):
        pass

    def popen(argv: list[str], **_: Any) -> None:
        started.append(argv)
        raise Started

    monkeypatch.setattr("subprocess.Popen", popen)
    with pytest.raises(Started):
        local_cli._start(tmp_path, tmp_path, settings=want)
    got: list[Settings] = []

    def serve(workdir: Any, project: Any, settings: Settings) -> None:
        got.append(settings)

    monkeypatch.setattr(entry, "serve", serve)
    monkeypatch.setattr(entry, "serve_kubernetes", serve)
    monkeypatch.setattr("asyncio.run", lambda ran: ran)  # no loop made and closed in the test process
    monkeypatch.setattr(sys, "argv", ["python -m sunk.runtime.local", *started[0][3:]])
    entry.main()
    assert got == [want]
