"""The informer (runtime/common/informer.py): list + watch with resourceVersion, 410 relists,
reconnects with backoff, selectors, a bounded store and "changed since". Rounds are driven
synchronously with `step()` against an in-memory server that keeps the API server's contract
(tests/support/listwatch.py); the thread and the official-client source run against kubesim."""

from __future__ import annotations

import functools
import threading
from dataclasses import dataclass
from typing import Any

import pytest
from kubernetes import client
from sunk.runtime.common.informer import Informer, backoff
from sunk.runtime.common.kubewatch import KubeListWatch
from sunk.runtime.common.selectors import parse_selector, selector_matches
from sunk.runtime.common.store import Gone, Store, WatchError, handle_event, object_key

from tests.support.kubesim import KubeSim
from tests.support.listwatch import FakeListWatch
from tests.support.rawclient import as_body


@dataclass(frozen=True)
class Slim:
    """What a controller keeps of a Node: two fields of a large object."""

    name: str
    cordoned: bool


def slim(obj: dict[str, Any]) -> Slim | None:
    if (obj["metadata"].get("labels") or {}).get("skip") == "yes":
        return None
    return Slim(obj["metadata"]["name"], bool((obj.get("spec") or {}).get("unschedulable")))


def node(name: str, *, cordoned: bool = False, labels: dict[str, str] | None = None) -> dict[str, Any]:
    big = {"images": [{"names": [f"registry/image-{i}"], "sizeBytes": i} for i in range(50)]}
    spec = {"unschedulable": True} if cordoned else {}
    return {"metadata": {"name": name, "labels": dict(labels or {})}, "spec": spec, "status": big}


def informer(source: FakeListWatch, **kwargs: Any) -> Informer[Slim]:
    return Informer(source, slim, name="nodes", jitter=lambda: 0.0, **kwargs)


def test_a_list_then_a_watch_from_its_version_keeps_only_projections() -> None:
    server = FakeListWatch()
    for i in range(5):
        server.put(node(f"n{i}"))
    inf = informer(server, page=2)
    assert inf.step() == 0.0  # list (3 pages) + a watch the server ended with nothing new
    first = inf.view()
    assert first.synced and first.changed is None  # no cursor: look at everything
    assert first.items == {f"n{i}": Slim(f"n{i}", False) for i in range(5)}
    assert [c["continue"] for c in server.list_calls] == ["", "5:2", "5:4"]
    assert server.watch_calls[-1]["resource_version"] == "5"  # the list's version, not "" (which would replay)

    server.put(node("n1", cordoned=True))
    server.put(node("n9"))
    server.remove("n3")
    server.put(node("n4"))  # rewritten unchanged: no change for the controller
    assert inf.step() == 0.0
    view = inf.view(first.seq)
    assert view.changed == frozenset({"n1", "n9", "n3"})
    assert "n3" not in view.items and view.items["n1"].cordoned
    assert inf.view(view.seq).changed == frozenset()
    assert len(server.list_calls) == 3  # no new list: the watch carried it all
    # Bounded: the store holds the projections, never the raw objects with their image lists.
    assert all(isinstance(v, Slim) for v in view.items.values())


def test_410_on_the_watch_relists_and_the_gap_shows_up_as_changes() -> None:
    server = FakeListWatch()
    for name in ("a", "b", "c"):
        server.put(node(name))
    inf = informer(server)
    inf.step()
    seq = inf.seq
    # While the informer is away, b is deleted, c cordoned, and the history is compacted.
    server.remove("b")
    server.put(node("c", cordoned=True))
    server.put(node("d"))
    server.compact()
    assert inf.step() == 0.0  # the watch answers ERROR 410: relist at once, no backoff
    assert inf.resource_version == ""
    assert inf.step() == 0.0
    assert inf.relists == 1 and inf.errors == 0
    view = inf.view(seq)
    assert view.changed == frozenset({"b", "c", "d"})
    assert set(view.items) == {"a", "c", "d"} and view.items["c"].cordoned
    assert inf.resource_version == str(server.version)


def test_410_as_an_http_status_and_an_expired_continue_token_relist_too() -> None:
    server = FakeListWatch()
    for i in range(4):
        server.put(node(f"n{i}"))
    inf = informer(server, page=2)
    inf.step()
    server.gone_on_watch = True
    assert inf.step() == 0.0 and inf.resource_version == ""
    # The relist's continue token expires between its pages: the list starts over.
    real_list = server.list

    def list_then_expire(**kwargs: Any) -> dict[str, Any]:
        reply = real_list(**kwargs)
        server.expire_continues()
        return reply

    server.list = list_then_expire  # type: ignore[method-assign]
    inf.step()  # Gone from the second page: a fresh list next round
    assert inf.resource_version == "" and inf.synced
    server.list = real_list  # type: ignore[method-assign]
    inf.step()
    assert set(inf.view().items) == {f"n{i}" for i in range(4)}


def test_410_again_right_after_a_list_backs_off_instead_of_spinning() -> None:
    server = FakeListWatch()
    server.put(node("a"))
    inf = informer(server)
    inf.step()
    server.gone_on_watch = True
    assert inf.step() == 0.0
    server.gone_on_watch = True
    assert inf.step() > 0  # listed, and the watch from that very list is Gone again
    assert inf.errors == 1


def test_a_dropped_watch_resumes_from_the_last_version_with_backoff_and_no_list() -> None:
    server = FakeListWatch()
    server.put(node("a"))
    inf = informer(server, backoff_base=0.5, backoff_cap=4.0)
    inf.step()
    server.put(node("b"))
    server.put(node("c"))
    server.fail_after = 1  # the stream is cut after delivering b
    assert inf.step() == 0.5
    assert set(inf.view().items) == {"a", "b"}
    resumed_at = inf.resource_version
    # The server is unreachable for a while: the delay doubles up to the cap.
    server.fail_watches = 4
    assert [inf.step() for _ in range(4)] == [1.0, 2.0, 4.0, 4.0]  # doubling on from the cut, capped
    assert inf.step() == 0.0  # reconnected: c arrives, from the version after b
    assert server.watch_calls[-1]["resource_version"] == resumed_at
    assert set(inf.view().items) == {"a", "b", "c"}
    assert len(server.list_calls) == 1 and inf.relists == 0
    assert "connection refused" in inf.last_error
    # A later failure starts from the base delay again.
    server.fail_watches = 1
    assert inf.step() == 0.5


def test_a_failed_first_list_is_retried_and_the_store_is_not_synced_meanwhile() -> None:
    server = FakeListWatch()
    server.put(node("a"))
    server.fail_lists = 1
    inf = informer(server)
    assert inf.step() > 0
    assert not inf.synced and inf.view().items == {}  # "empty" must not read as "no Nodes"
    inf.step()
    assert inf.synced and set(inf.view().items) == {"a"}


def test_an_empty_watch_is_treated_as_a_failure_not_a_busy_loop() -> None:
    server = FakeListWatch()
    server.put(node("a"))
    server.bookmarks = False
    inf = informer(server)
    inf.step()  # list + a watch with nothing to say
    assert inf.errors == 1 and "without an event" in inf.last_error


def test_selectors_filter_on_the_server_and_again_in_the_informer() -> None:
    for ignoring in (False, True):  # kmock ignores selectors: the informer must not rely on them
        server = FakeListWatch(ignore_selectors=ignoring)
        server.put(node("gpu-1", labels={"pool": "gpu"}))
        server.put(node("cpu-1", labels={"pool": "cpu"}))
        server.put(node("gpu-skip", labels={"pool": "gpu", "skip": "yes"}))  # the transform refuses it
        inf = informer(server, label_selector="pool=gpu")
        inf.step()
        assert set(inf.view().items) == {"gpu-1"}
        seq = inf.seq
        server.put(node("gpu-1", labels={"pool": "cpu"}))  # leaves the selection
        server.put(node("cpu-1", labels={"pool": "gpu"}))  # joins it
        server.bookmark()
        inf.step()
        view = inf.view(seq)
        assert set(view.items) == {"cpu-1"} and view.changed == frozenset({"gpu-1", "cpu-1"})
        assert server.list_calls[0]["label_selector"] == "pool=gpu"


def test_label_selector_syntax() -> None:
    labels = {"app": "slurmd", "tier": "gpu"}
    cases = {
        "": True,
        "app": True,
        "!app": False,
        "!missing": True,
        "app=slurmd": True,
        "app==slurmd": True,
        "app!=slurmd": False,
        "missing!=x": True,
        "tier in (gpu, cpu)": True,
        "tier notin (gpu,cpu)": False,
        "missing notin (a)": True,
        "app=slurmd,tier in (cpu,hbm)": False,
        "app, tier=gpu": True,
    }
    for selector, expected in cases.items():
        assert selector_matches(parse_selector(selector), labels) is expected, selector
    for bad in ("a=b=c", "a b", "x in y", "=v"):
        with pytest.raises(ValueError, match="label selector term"):
            parse_selector(bad)


def test_bookmarks_move_the_version_and_change_nothing() -> None:
    store: Store[Slim] = Store()
    version = handle_event(store, {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "42"}}}, slim)
    assert version == "42" and store.seq == 0
    with pytest.raises(Gone):
        handle_event(store, {"type": "ERROR", "object": {"code": 410, "message": "too old"}}, slim)
    with pytest.raises(WatchError, match="500"):
        handle_event(store, {"type": "ERROR", "object": {"code": 500, "reason": "InternalError"}}, slim)
    with pytest.raises(WatchError, match="unknown watch event type"):
        handle_event(store, {"type": "SURPRISE", "object": {}}, slim)


def test_the_change_log_is_bounded_and_says_so_when_a_reader_fell_behind() -> None:
    store: Store[int] = Store(log_limit=3)
    for i in range(3):
        store.upsert(f"k{i}", i)
    assert store.changes(0) == frozenset({"k0", "k1", "k2"})
    store.upsert("k3", 3)
    assert store.changes(0) is None  # k0's entry fell off: the reader must look at everything
    assert store.changes(1) == frozenset({"k1", "k2", "k3"})
    assert store.changes(4) == frozenset()
    assert store.replace({"k3": 3, "k4": 4}) == 4  # k0-k2 deleted, k4 added; k3 unchanged
    assert store.changes(4) is None and store.changes(5) == frozenset({"k1", "k2", "k4"})


def test_backoff_doubles_to_a_cap() -> None:
    assert [backoff(n, 0.5, 3.0) for n in (1, 2, 3, 4, 5)] == [0.5, 1.0, 2.0, 3.0, 3.0]


def test_object_keys() -> None:
    assert object_key({"metadata": {"name": "n1"}}) == "n1"
    assert object_key({"metadata": {"name": "p", "namespace": "ns"}}) == "ns/p"


# --- the thread and the official-client source, over HTTP (kubesim) --------------------------


def test_the_informer_thread_follows_a_real_http_watch_and_stops_promptly() -> None:
    with KubeSim() as sim:
        api = client.CoreV1Api(sim.api_client())
        capacity = {"cpu": "4", "memory": "8Gi"}
        for name in ("k-1", "k-2"):
            api.create_node(
                as_body({"metadata": {"name": name}, "status": {"capacity": capacity}}), _preload_content=False
            )
        woken = threading.Event()
        inf = Informer(KubeListWatch(api.list_node), slim, name="nodes", on_change=woken.set)
        with inf:
            assert inf.wait_synced(10)
            assert set(inf.view().items) == {"k-1", "k-2"}
            seq = inf.seq
            woken.clear()
            api.patch_node("k-2", {"spec": {"unschedulable": True}}, _preload_content=False)
            assert inf.wait_for_change(seq, 10)
            assert woken.wait(10)
            view = inf.view(seq)
            assert view.changed == frozenset({"k-2"}) and view.items["k-2"].cordoned
            api.delete_node("k-1", _preload_content=False)
            assert inf.wait_for_change(view.seq, 10)
            assert set(inf.view().items) == {"k-2"}
            assert inf.lists == 1 and inf.errors == 0
        assert inf._thread is not None and not inf._thread.is_alive()  # stop() unblocked the read


def test_the_official_client_source_pages_and_maps_410() -> None:
    with KubeSim() as sim:
        core = client.CoreV1Api(sim.api_client())
        source = KubeListWatch(functools.partial(core.list_namespaced_pod, "ns"))
        reply = source.list(label_selector="app=x", field_selector="", limit=10, continue_token="")
        assert reply["items"] == []
        dead = KubeListWatch(
            client.CoreV1Api(client.ApiClient(client.Configuration(host="http://127.0.0.1:9"))).list_node
        )
        with pytest.raises(WatchError):
            dead.list(label_selector="", field_selector="", limit=10, continue_token="")
        with pytest.raises(WatchError):
            dead.watch(resource_version="1", label_selector="", field_selector="", timeout_seconds=1)

        class Expired(Exception):
            status = 410
            reason = "Expired"

        def gone(**kwargs: Any) -> Any:
            raise Expired()

        with pytest.raises(Gone):
            KubeListWatch(gone).list(label_selector="", field_selector="", limit=1, continue_token="x")


def test_a_write_observed_from_its_reply_shows_at_once_and_older_events_do_not_undo_it() -> None:
    server = FakeListWatch()
    for i in range(3):
        server.put(node(f"n{i}"))
    inf = informer(server)
    inf.step()
    server.put(node("n1", cordoned=True))  # someone else's changes, versions 4 and 5, still on their way
    server.put(node("n1"))
    server.put(node("n1", cordoned=True))  # our write (version 6), whose reply we hold
    before = inf.seq
    inf.observe(server.objects["n1"])
    after = inf.view(before)
    assert after.changed == frozenset({"n1"}) and after.items["n1"] == Slim("n1", True)  # no watch event yet
    inf.step()  # the watch now delivers 4 and 5 (older than our write: skipped) and 6 (ours: equal)
    assert inf.view(after.seq).changed == frozenset()  # never back to uncordoned, not even for a moment
    assert inf.resource_version == "6"
    server.put(node("n1"))  # a later change (version 7) applies as usual
    inf.step()
    assert inf.get("n1") == Slim("n1", False)


def test_observe_ignores_what_is_no_object_and_a_relist_forgets_observed_writes() -> None:
    server = FakeListWatch()
    server.put(node("n0"))
    inf = informer(server)
    inf.step()
    seq = inf.seq
    inf.observe({"kind": "Status"})  # a reply without metadata changes nothing
    assert inf.seq == seq
    inf.observe({"metadata": {"name": "n0", "resourceVersion": "99"}, "spec": {"unschedulable": True}})
    assert inf.get("n0") == Slim("n0", True)
    server.put(node("n0", labels={"a": "b"}))
    server.put(node("n0"))
    server.compact()  # the next watch gets 410: a list, which is newer than anything observed
    inf.step()
    inf.step()
    assert inf.relists == 1 and inf.get("n0") == Slim("n0", False)
