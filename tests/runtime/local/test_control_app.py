"""cluster.control_app's POST /nodes (`sunk local apply` adding a NodeSet's Nodes): it answers once
the new Nodes can take pods, and says which are still held back when they can't in time. A fake
NodeAgents stands in for the agents (their registration and the real node lifecycle are
test_node_lifecycle's)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

from aiohttp.test_utils import TestClient, TestServer
from sunk.runtime.local.cluster import control_app


class FakeAgents:
    """add_nodes registers; schedulable waits, or times out naming the Nodes as NodeAgents does."""

    def __init__(self, held: list[str]) -> None:
        self.held = held
        self.agent = None
        self.store = None
        self.waited: list[list[str]] = []

    def add_nodes(self, nodes: Iterable[dict[str, Any]]) -> list[str]:
        return [n["metadata"]["name"] for n in nodes]

    async def schedulable(self, names: Iterable[str]) -> None:
        self.waited.append(list(names))
        if self.held:
            raise TimeoutError(f"Nodes not schedulable after 60 s: {'; '.join(self.held)}")


def _post(agents: FakeAgents, names: list[str]) -> tuple[int, dict[str, Any]]:
    async def post() -> tuple[int, dict[str, Any]]:
        async with TestClient(TestServer(control_app(agents))) as client:  # type: ignore[arg-type]
            answer = await client.post("/nodes", json=[{"metadata": {"name": n}} for n in names])
            return answer.status, await answer.json()

    loop = asyncio.new_event_loop()  # not asyncio.run: it leaves the main thread without a loop for later tests
    try:
        return loop.run_until_complete(post())
    finally:
        loop.close()


def test_new_nodes_are_answered_once_schedulable() -> None:
    agents = FakeAgents(held=[])
    status, said = _post(agents, ["local-gpu-0", "local-gpu-1"])
    assert status == 200 and said["added"] == ["local-gpu-0", "local-gpu-1"]
    assert agents.waited == [["local-gpu-0", "local-gpu-1"]]


def test_nodes_still_held_back_are_named_in_a_refusal() -> None:
    agents = FakeAgents(held=["local-gpu-1: tainted node.kubernetes.io/not-ready"])
    status, said = _post(agents, ["local-gpu-0", "local-gpu-1"])
    assert status == 503
    assert "local-gpu-1: tainted node.kubernetes.io/not-ready" in said["message"]
