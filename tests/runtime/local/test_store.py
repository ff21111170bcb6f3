"""The local cluster's store keeps the API server's contract where clients rely on it."""

from __future__ import annotations

from typing import Any

import pytest
from sunk.runtime.local.store import ApiError, Store


def _store() -> Store:
    store = Store()
    store.create(store.resource("v1/namespaces"), None, {"metadata": {"name": "ns"}})
    return store


def test_create_fills_what_the_api_server_fills_and_refuses_duplicates() -> None:
    store = _store()
    pods = store.resource("v1/pods")
    pod = store.create(pods, "ns", {"metadata": {"name": "p"}, "spec": {}})
    assert pod["metadata"]["namespace"] == "ns" and pod["metadata"]["uid"] and pod["metadata"]["generation"] == 1
    assert pod["status"] == {"phase": "Pending"} and pod["kind"] == "Pod"
    with pytest.raises(ApiError) as err:
        store.create(pods, "ns", {"metadata": {"name": "p"}})
    assert err.value.code == 409 and err.value.reason == "AlreadyExists"
    with pytest.raises(ApiError) as err:
        store.create(pods, "nowhere", {"metadata": {"name": "p"}})
    assert err.value.code == 404


def test_status_subresource_and_optimistic_concurrency() -> None:
    store = _store()
    deps = store.resource("apps/v1/deployments")
    dep = store.create(deps, "ns", {"metadata": {"name": "d"}, "spec": {"replicas": 1}})
    store.patch(deps, "ns", "d", "merge", {"status": {"readyReplicas": 1}}, "status")
    changed = store.patch(deps, "ns", "d", "merge", {"spec": {"replicas": 2}, "status": {"readyReplicas": 9}})
    assert changed["status"] == {"readyReplicas": 1}  # main writes leave status alone
    assert changed["metadata"]["generation"] == 2
    with pytest.raises(ApiError) as err:
        store.update(deps, "ns", "d", {**dep, "spec": {"replicas": 3}})  # dep's resourceVersion is stale
    assert err.value.code == 409


def test_finalizers_hold_and_owners_take_their_dependents() -> None:
    store = _store()
    cms = store.resource("v1/configmaps")
    owner = store.create(cms, "ns", {"metadata": {"name": "owner", "finalizers": ["x"]}})
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner["metadata"]["uid"]}
    store.create(cms, "ns", {"metadata": {"name": "child", "ownerReferences": [ref]}})
    held = store.delete(cms, "ns", "owner")
    assert held["metadata"]["deletionTimestamp"] and store.find(cms, "ns", "owner") is not None
    store.patch(cms, "ns", "owner", "merge", {"metadata": {"finalizers": None}})
    assert store.find(cms, "ns", "owner") is None and store.find(cms, "ns", "child") is None


def test_a_pod_on_a_node_waits_for_its_agent_unless_grace_is_zero() -> None:
    store = _store()
    pods = store.resource("v1/pods")
    store.create(pods, "ns", {"metadata": {"name": "p"}, "spec": {"nodeName": "n", "terminationGracePeriodSeconds": 7}})
    gone = store.delete(pods, "ns", "p")
    assert gone["metadata"]["deletionGracePeriodSeconds"] == 7 and store.find(pods, "ns", "p") is not None
    store.delete(pods, "ns", "p", grace=0)
    assert store.find(pods, "ns", "p") is None


def test_watch_from_a_version_and_410_below_the_history() -> None:
    # No event loop needed: a watch's queue is filled and read without waiting here.
    store = _store()
    cms = store.resource("v1/configmaps")
    store.create(cms, "ns", {"metadata": {"name": "a", "labels": {"k": "v"}}})
    since = str(store.version)
    store.create(cms, "ns", {"metadata": {"name": "b", "labels": {"k": "v"}}})
    store.patch(cms, "ns", "a", "merge", {"metadata": {"labels": {"k": "w"}}})
    watch = store.watch(cms, "ns", "k=v", "", since)
    events: list[Any] = []
    while not watch.queue.empty():
        event = watch.queue.get_nowait()
        assert event is not None
        events.append(watch.shown(event))
    # b was added; a left the selection, which a watch on k=v sees as a deletion
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("ADDED", "b"), ("DELETED", "a")]
    store._floor = store.version + 5
    with pytest.raises(ApiError) as err:
        store.watch(cms, "ns", "", "", since)
    assert err.value.code == 410


def test_a_crd_adds_its_kind_and_field_selectors_filter_lists() -> None:
    store = _store()
    crd = {
        "metadata": {"name": "things.example.com"},
        "spec": {
            "group": "example.com",
            "names": {"kind": "Thing", "plural": "things"},
            "scope": "Namespaced",
            "versions": [{"name": "v1", "served": True, "subresources": {"status": {}}}],
        },
    }
    store.create(store.resource("apiextensions.k8s.io/v1/customresourcedefinitions"), None, crd)
    things = store.registry.get("example.com/v1", "things")
    assert things is not None and things.status
    pods = store.resource("v1/pods")
    store.create(pods, "ns", {"metadata": {"name": "a"}, "spec": {"nodeName": "n1"}})
    store.create(pods, "ns", {"metadata": {"name": "b"}, "spec": {"nodeName": "n2"}})
    names = [p["metadata"]["name"] for p in store.list(pods, None, "", "spec.nodeName=n2")["items"]]
    assert names == ["b"]
