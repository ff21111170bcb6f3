"""Pure topology plan: write the ConfigMap when the Nodes say otherwise; reconfigure once the
kubelet has had time to refresh slurmctld's copy and the registered nodes it names changed."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from sunk.runtime.operator.model import Pod
from sunk.runtime.operator.topology import (
    Reconfigure,
    TopologyObserved,
    WriteTopology,
    config_map,
    plan_topology,
    reconfigure_key,
    slurmd_identities,
)

from sunk import keys
from sunk.render import TopologyNode
from sunk.spec.scheduling import NamedTopologySpec, TopologySpec

TREE = TopologySpec(plugin="tree", label_keys=["spine", "leaf"])
NOW = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
DELAY = timedelta(seconds=90)
NODES = [TopologyNode("cpu-0", {"spine": "s1", "leaf": "l1"}), TopologyNode("cpu-1", {"spine": "s1", "leaf": "l2"})]


def observe(
    cm: dict[str, Any] | None, registered: frozenset[str] | None = frozenset(), spec: TopologySpec = TREE
) -> TopologyObserved:
    return TopologyObserved("ns", "research", spec, (), NODES, cm, registered)


def written(seconds_ago: int) -> str:
    return (NOW - timedelta(seconds=seconds_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")


def current_text() -> str:
    out = plan_topology(observe(None), NOW, DELAY)
    assert isinstance(out[0], WriteTopology)
    return out[0].text


def test_none_plugin_does_nothing() -> None:
    assert plan_topology(observe(None, spec=TopologySpec()), NOW, DELAY) == []


def test_missing_configmap_is_created_from_node_labels() -> None:
    (action,) = plan_topology(observe(None), NOW, DELAY)
    assert isinstance(action, WriteTopology) and action.create
    assert action.name == "research-topology"
    assert "SwitchName=s1-l1 Nodes=cpu-0" in action.text
    assert "SwitchName=s1 Switches=s1-l1,s1-l2" in action.text
    assert action.written == "2026-11-01T12:00:00Z"


def test_changed_labels_rewrite_the_text() -> None:
    cm = config_map("ns", "research", "old", written(1000))
    (action,) = plan_topology(observe(cm), NOW, DELAY)
    assert isinstance(action, WriteTopology) and not action.create


def test_reconfigure_waits_for_the_kubelet_then_runs_once() -> None:
    text = current_text()
    registered = frozenset({"cpu-0"})
    assert plan_topology(observe(config_map("ns", "research", text, written(10)), registered), NOW, DELAY) == []
    cm = config_map("ns", "research", text, written(100))
    (action,) = plan_topology(observe(cm, registered), NOW, DELAY)
    assert isinstance(action, Reconfigure) and action.key == reconfigure_key(text, registered, NODES)
    cm["metadata"]["annotations"][keys.TOPOLOGY_RECONFIGURED] = action.key
    assert plan_topology(observe(cm, registered), NOW, DELAY) == []
    # A node named in topology.conf registered since: it joins its switch only on reconfigure.
    (again,) = plan_topology(observe(cm, frozenset({"cpu-0", "cpu-1", "other"})), NOW, DELAY)
    assert isinstance(again, Reconfigure) and again.key != action.key


def test_reconfigure_is_retried_while_the_kubelet_may_still_be_refreshing() -> None:
    # Each try finds whatever file the kubelet has written by then; they thin out (10, 20, 40 s) and
    # the last one comes at the delay.
    text = current_text()
    registered = frozenset({"cpu-0", "cpu-1"})
    retry = timedelta(seconds=10)
    key = reconfigure_key(text, registered, NODES)

    def plan(age: int, done: str | None = None) -> list[Any]:
        cm = config_map("ns", "research", text, written(age))
        if done is not None:
            cm["metadata"]["annotations"][keys.TOPOLOGY_RECONFIGURED] = done
        return plan_topology(observe(cm, registered), NOW, DELAY, retry)

    assert plan(5) == []  # before the first retry
    (first,) = plan(12)
    assert isinstance(first, Reconfigure) and first.key == f"{key}+0"
    assert plan(19, done=first.key) == []  # the same try is not repeated
    (second,) = plan(25, done=first.key)
    assert isinstance(second, Reconfigure) and second.key == f"{key}+1"
    assert plan(39, done=second.key) == []  # the tries thin out: the next at 40 s
    (third,) = plan(41, done=second.key)
    assert isinstance(third, Reconfigure) and third.key == f"{key}+2"
    (last,) = plan(95, done=third.key)
    assert isinstance(last, Reconfigure) and last.key == key
    assert plan(200, done=key) == []
    # Without a retry interval only the reconfigure at the delay happens.
    assert plan_topology(observe(config_map("ns", "research", text, written(50)), registered), NOW, DELAY) == []


def test_no_reconfigure_without_slurm() -> None:
    cm = config_map("ns", "research", current_text(), written(1000))
    assert plan_topology(observe(cm, None), NOW, DELAY) == []


def test_missing_or_bad_stamp_counts_as_old() -> None:
    cm = config_map("ns", "research", current_text(), "yesterday-ish")
    assert isinstance(plan_topology(observe(cm), NOW, DELAY)[0], Reconfigure)
    del cm["metadata"]["annotations"][keys.TOPOLOGY_WRITTEN]
    assert isinstance(plan_topology(observe(cm), NOW, DELAY)[0], Reconfigure)


BLOCK = TopologySpec(plugin="block", label_keys=["clique"], block_sizes=[2])
RACK = [TopologyNode("gb-0", {"clique": "a"}), TopologyNode("gb-1", {"clique": "a"})]


def test_a_block_is_written_only_once_enough_of_its_nodes_registered() -> None:
    # slurmctld 24.11 exits on a block with fewer registered nodes than the base block size.
    def text(registered: frozenset[str] | None) -> list[str]:
        obs = TopologyObserved("ns", "research", BLOCK, (), RACK, None, registered)
        return [a.text for a in plan_topology(obs, NOW, DELAY) if isinstance(a, WriteTopology)]

    (one,) = text(frozenset({"gb-0"}))
    assert "# BlockName=a Nodes=gb-[0-1] (fewer registered nodes than the base block size 2)" in one
    (both,) = text(frozenset({"gb-0", "gb-1"}))
    assert "\nBlockName=a Nodes=gb-[0-1]\n" in both
    assert text(None) == []  # Slurm unreadable: nothing is written


NAMED = (
    NamedTopologySpec(name="fabric", plugin="tree", label_keys=["spine", "leaf"], default=True),
    NamedTopologySpec(name="nvl", plugin="block", label_keys=["clique"], block_sizes=[2]),
)
CLIQUES = [TopologyNode(n.name, {**n.labels, "clique": "c0"}) for n in NODES]


def observe_named(cm: dict[str, Any] | None, registered: frozenset[str] | None) -> TopologyObserved:
    return TopologyObserved("ns", "research", TopologySpec(), (), CLIQUES, cm, registered, topologies=NAMED)


def test_named_topologies_write_topology_yaml_from_the_registered_nodes() -> None:
    (action,) = plan_topology(observe_named(None, frozenset({"cpu-0", "cpu-1"})), NOW, DELAY)
    assert isinstance(action, WriteTopology) and action.create and action.key == "topology.yaml"
    assert '- topology: "nvl"' in action.text and 'block: "c0"' in action.text
    assert 'switch: "s1-l1"' in action.text
    body = config_map("ns", "research", action.text, action.written, action.key)
    assert body["data"] == {"topology.yaml": action.text}


def test_named_topologies_with_a_block_one_wait_for_slurm() -> None:
    (created,) = plan_topology(observe_named(None, None), NOW, DELAY)  # nothing can start without it
    assert isinstance(created, WriteTopology) and created.create and "block:" not in created.text
    stale = config_map("ns", "research", "old", written(1000), "topology.yaml")
    assert plan_topology(observe_named(stale, None), NOW, DELAY) == []


def test_a_block_not_yet_full_is_flat_until_its_nodes_register() -> None:
    (action,) = plan_topology(observe_named(None, frozenset({"cpu-0"})), NOW, DELAY)
    assert isinstance(action, WriteTopology) and "flat: true" in action.text and "block:" not in action.text


def test_named_topologies_reconfigure_once_the_yaml_is_current() -> None:
    registered = frozenset({"cpu-0", "cpu-1"})
    (write,) = plan_topology(observe_named(None, registered), NOW, DELAY)
    assert isinstance(write, WriteTopology)
    cm = config_map("ns", "research", write.text, written(100), write.key)
    (action,) = plan_topology(observe_named(cm, registered), NOW, DELAY)
    assert isinstance(action, Reconfigure)
    old = config_map("ns", "research", write.text, written(100))  # the same text under topology.conf
    assert isinstance(plan_topology(observe_named(old, registered), NOW, DELAY)[0], WriteTopology)


def test_a_stack_moving_to_named_topologies_gets_its_yaml_even_while_slurm_is_unreadable() -> None:
    # The ConfigMap still holds only the topology.conf Pulumi created: slurmctld cannot mount
    # topology.yaml, so Slurm stays unreadable until the operator writes it, with no block yet.
    old = config_map("ns", "research", "SwitchName=root\n", written(1000))
    (action,) = plan_topology(observe_named(old, None), NOW, DELAY)
    assert isinstance(action, WriteTopology) and not action.create and action.key == "topology.yaml"
    assert "block:" not in action.text and "flat: true" in action.text
    assert 'switch: "s1-l1"' in action.text  # the tree needs no registration to be safe
    current = config_map("ns", "research", action.text, written(1000), action.key)
    assert plan_topology(observe_named(current, None), NOW, DELAY) == []  # then it waits for Slurm


def test_a_reconfigures_own_slurmd_re_exec_asks_for_no_other_reconfigure() -> None:
    # `scontrol reconfigure` re-execs every slurmd in its container: SlurmdStartTime moves to the
    # reconfigure's second. The key must not move with it, or each reconfigure causes the next.
    text = current_text()
    registered = frozenset({"cpu-0", "cpu-1"})
    pods = [
        Pod("research-cpu-0", "cpu-0", node_name="n0", uid="a", started=1_000),
        Pod("research-cpu-1", "cpu-1", node_name="n1", uid="b", started=1_000),
    ]

    def plan(slurmd_started: dict[str, int], done: str | None, live: list[Pod] = pods) -> list[Any]:
        cm = config_map("ns", "research", text, written(1000))
        if done is not None:
            cm["metadata"]["annotations"][keys.TOPOLOGY_RECONFIGURED] = done
        started = slurmd_identities(live, slurmd_started)
        observed = TopologyObserved("ns", "research", TREE, (), NODES, cm, registered, started=started)
        return plan_topology(observed, NOW, DELAY)

    (first,) = plan({"cpu-0": 1_002, "cpu-1": 1_003}, None)
    assert isinstance(first, Reconfigure)
    assert plan({"cpu-0": 5_000, "cpu-1": 5_000}, first.key) == []  # the re-exec it caused
    # cpu-1's pod replaced: slurmctld still holds the old slurmd's record until the new one
    # registers, which then calls for a reconfigure (26.05 leaves it out of its switches).
    replaced = [pods[0], Pod("research-cpu-1", "cpu-1", node_name="n1", uid="c", started=6_000)]
    (early,) = plan({"cpu-0": 5_000, "cpu-1": 5_000}, first.key, replaced)
    (registered_again,) = plan({"cpu-0": 5_000, "cpu-1": 6_001}, early.key, replaced)
    assert isinstance(registered_again, Reconfigure) and registered_again.key not in (first.key, early.key)
    assert plan({"cpu-0": 9_000, "cpu-1": 9_000}, registered_again.key, replaced) == []


def test_slurmd_identities_follow_pod_and_container_not_the_slurmd_process() -> None:
    pod = Pod("research-cpu-0", "cpu-0", node_name="n0", uid="a", started=1_000)
    assert slurmd_identities([pod], {"cpu-0": 1_000}) == {"cpu-0": "a/0"}
    assert slurmd_identities([pod], {"cpu-0": 999}) == {}  # an earlier slurmd's record
    assert slurmd_identities([pod], {}) == {}  # not registered
    assert slurmd_identities([Pod("p", "cpu-0", uid="a")], {"cpu-0": 1_000}) == {}  # not running
    assert slurmd_identities([Pod("p", "cpu-0", uid="a", started=1, deleting=True)], {"cpu-0": 2}) == {}
    restarted = Pod("research-cpu-0", "cpu-0", node_name="n0", uid="a", started=2_000, restarts=1)
    assert slurmd_identities([restarted], {"cpu-0": 2_001}) == {"cpu-0": "a/1"}


def test_a_pod_reads_its_slurmd_containers_start_and_restarts() -> None:
    obj: dict[str, Any] = {
        "metadata": {"name": "research-cpu-0", "uid": "u"},
        "spec": {"hostname": "cpu-0", "nodeName": "n0"},
        "status": {
            "phase": "Running",
            "containerStatuses": [
                {"name": "other", "restartCount": 7, "state": {"running": {"startedAt": "2026-11-01T00:00:00Z"}}},
                {"name": "slurmd", "restartCount": 2, "state": {"running": {"startedAt": "2026-11-01T12:00:00Z"}}},
            ],
        },
    }
    pod = Pod.from_object(obj)
    assert (pod.started, pod.restarts) == (int(NOW.timestamp()), 2)
    obj["status"]["containerStatuses"] = [{"name": "slurmd", "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]
    assert Pod.from_object(obj).started is None
    obj["status"]["containerStatuses"] = [{"name": "slurmd", "state": {"running": {"startedAt": "yesterday"}}}]
    assert Pod.from_object(obj).started is None  # unreadable: not a reason to stop reconciling
