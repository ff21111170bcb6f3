"""Gangs in the plan: what a gang of mixed shapes asks of Slurm, where it is placed (one block, one
leaf switch), and the two kinds of stuck gang, each with its own reason."""

from __future__ import annotations

from sunk.runtime.scheduler.marker import Marker
from sunk.runtime.scheduler.model import PodResources
from sunk.runtime.scheduler.plan import GANG_REFUSED, GANG_WAITING, Bind, Condition, Reject, Submit, plan
from sunk.runtime.scheduler.request import SWITCH_WAIT, Topology, submit_body

from sunk import keys

from .test_plan import job, member, pod, snap

BLOCK = Topology("block", block_nodes=2)


def test_a_gang_of_mixed_shapes_asks_each_node_for_the_gpu_workers_shape() -> None:
    """A CPU-only driver beside GPU workers: one job, every node the workers' GPUs (Slurm gives a
    job one GRES count per node), the driver bound with no GPU indices."""
    driver = member("driver", size=3, resources=PodResources(cpu_millis=500, memory_bytes=2**30))
    workers = [member(f"w-{i}", size=3, annotations={keys.GPUS: "4"}) for i in range(2)]
    [submit] = plan(snap([driver, *workers]), {}, now=500.0)
    assert isinstance(submit, Submit)
    assert (submit.request.nodes, submit.request.gpus) == (3, 4)
    running = job(
        7,
        driver.marker,
        "RUNNING",
        ("cpu-0", "cpu-1", "cpu-2"),
        gpu_indices={n: (0, 1, 2, 3) for n in ("cpu-0", "cpu-1", "cpu-2")},
    )
    binds = {
        a.pod.name: a.gpu_indices
        for a in plan(snap([driver, *workers], [running]), {}, now=2001.0)
        if isinstance(a, Bind)
    }
    assert binds == {"driver": "", "w-0": "0,1,2,3", "w-1": "0,1,2,3"}


def test_a_gang_larger_than_the_largest_block_is_refused_without_a_job() -> None:
    pods = [member(f"w-{i}") for i in range(3)]
    actions = plan(snap(pods), {}, now=500.0, topology=BLOCK)
    [reject] = actions
    assert isinstance(reject, Reject) and reject.reason == GANG_REFUSED
    assert "needs 3 nodes and the largest block of the topology holds 2" in reject.message
    assert "nothing behind it waits for it" in reject.message
    # Reported once: the pods remember it, and nothing is submitted behind their back.
    said = [member(f"w-{i}", scheduled=("False", GANG_REFUSED, reject.message)) for i in range(3)]
    assert plan(snap(said), {}, now=600.0, topology=BLOCK) == []
    # Blocks nothing behind it: a pod after it is submitted in the same pass.
    after = pod("next")
    assert [type(a) for a in plan(snap([*said, after]), {}, now=600.0, topology=BLOCK)] == [Submit]


def test_a_gang_that_fits_a_block_is_submitted_and_a_tree_gang_asks_for_one_leaf_switch() -> None:
    pods = [member(f"w-{i}", size=2) for i in range(2)]
    [submit] = plan(snap(pods), {}, now=500.0, topology=BLOCK)
    assert isinstance(submit, Submit) and submit.request.switches is None
    [tree] = plan(snap(pods), {}, now=500.0, topology=Topology("tree"))
    assert isinstance(tree, Submit)
    body = submit_body(tree.request, tree.marker)["job"]
    assert body["required_switches"] == {"set": True, "infinite": False, "number": 1}
    assert body["wait_for_switch"] == SWITCH_WAIT
    [single] = plan(snap([pod("web")]), {}, now=500.0, topology=Topology("tree"))
    assert isinstance(single, Submit) and "required_switches" not in submit_body(single.request, single.marker)["job"]


def test_a_gang_that_will_fit_later_says_what_it_waits_for_with_an_event() -> None:
    pods = [member(f"w-{i}", size=2) for i in range(2)]
    pending = job(7, Marker("group", "ml", "train"), "PENDING", reason="Resources")
    actions = plan(snap(pods, [pending]), {}, now=500.0, topology=BLOCK)
    message = "Slurm job 7 is pending (Resources): the gang waits for 2 nodes free at once in one block"
    assert actions == [Condition(p.ref, GANG_WAITING, message, event=True) for p in pods]
    said = [member(f"w-{i}", size=2, scheduled=("False", GANG_WAITING, message)) for i in range(2)]
    assert plan(snap(said, [pending]), {}, now=600.0, topology=BLOCK) == []
