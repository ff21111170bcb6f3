"""OfficialKube reads every write's reply to the end. A raw reply (`_preload_content=False`) left
unread keeps its connection out of urllib3's pool, so the next request opens a new TCP
connection: the lease renewal every few seconds did. The fake API records whether each reply was
read; what it cannot model is the pool itself (tests/runtime/operator/test_kmock.py talks HTTP)."""

from __future__ import annotations

from typing import Any

from kubernetes import client
from sunk.runtime.operator.kube import OfficialKube


class Reply:
    def __init__(self) -> None:
        self.read = False

    @property
    def data(self) -> bytes:
        self.read = True
        return b"{}"


class Api:
    """Any method call returns a fresh Reply, kept for the test."""

    def __init__(self) -> None:
        self.replies: list[tuple[str, Reply]] = []

    def __getattr__(self, name: str) -> Any:
        def call(*_args: Any, **_kwargs: Any) -> Reply:
            reply = Reply()
            self.replies.append((name, reply))
            return reply

        return call


def test_every_write_reads_its_reply() -> None:
    kube = OfficialKube(client.ApiClient())
    apis = {"_core": Api(), "_coord": Api(), "_policy": Api(), "_custom": Api()}
    for attr, api in apis.items():
        setattr(kube, attr, api)
    meta = {"metadata": {"namespace": "acme", "name": "x"}}
    kube.patch_config_map("acme", "x", {"data": {}})
    kube.create_config_map(meta)
    kube.create_pod(meta)
    kube.delete_pod("acme", "x")
    kube.create_service(meta)
    kube.create_budget(meta)
    kube.delete_budget("acme", "x")
    kube.create_event(meta)
    assert kube.create_lease(meta)
    assert kube.patch_lease("acme", "x", [{"op": "test", "path": "/spec", "value": {}}])
    replies = [(name, r) for api in apis.values() for name, r in api.replies]
    assert len(replies) == 10
    assert [name for name, r in replies if not r.read] == []
