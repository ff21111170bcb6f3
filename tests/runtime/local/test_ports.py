"""NodePort and LoadBalancer Services on 127.0.0.1: a nodePort allocated and written back, the
LoadBalancer's ingress, and a connection relayed to a Ready pod behind the Service."""

from __future__ import annotations

import asyncio
import socket

from sunk.runtime.local.ports import NODE_PORTS, Ports, target_of

from tests.support.fakestore import FakeStore


def _pod(name: str, ip: str, ready: bool) -> dict[str, object]:
    conditions = [{"type": "Ready", "status": "True" if ready else "False"}]
    return {
        "metadata": {"name": name, "labels": {"app": "login"}},
        "spec": {"containers": [{"name": "sshd", "ports": [{"name": "ssh", "containerPort": 2222}]}]},
        "status": {"phase": "Running", "podIP": ip, "conditions": conditions},
    }


def test_the_target_is_a_ready_pod_and_a_named_port_resolves() -> None:
    service = {"metadata": {"namespace": "ns"}, "spec": {"selector": {"app": "login"}}}
    pods = [{**_pod("a", "10.0.0.1", False), "metadata": {"name": "a", "namespace": "ns", "labels": {"app": "login"}}},
            {**_pod("b", "10.0.0.2", True), "metadata": {"name": "b", "namespace": "ns", "labels": {"app": "login"}}}]  # fmt: skip
    assert target_of(service, {"port": 22, "targetPort": "ssh"}, pods) == ("10.0.0.2", 2222)
    assert target_of(service, {"port": 22}, pods) == ("10.0.0.2", 22)
    assert target_of(service, {"port": 22}, pods[:1]) is None


def test_a_load_balancer_gets_a_node_port_on_loopback_that_reaches_its_pod() -> None:
    async def main() -> None:
        async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            writer.write(b"SSH-2.0-echo " + await reader.readline())
            await writer.drain()
            writer.close()

        backend = await asyncio.start_server(echo, "127.0.0.1", 0)
        backend_port = backend.sockets[0].getsockname()[1]
        store = FakeStore()
        store.create(store.resource("v1/namespaces"), None, {"metadata": {"name": "ns"}})
        store.create(store.resource("v1/pods"), "ns", _pod("login-0", "127.0.0.1", True))
        service = {
            "metadata": {"name": "login"},
            "spec": {"type": "LoadBalancer", "selector": {"app": "login"}, "ports": [{"port": 22, "targetPort": backend_port}]},
        }  # fmt: skip
        store.create(store.resource("v1/services"), "ns", service)
        ports = Ports(store)
        try:
            await ports.reconcile()
            stored = store.get(store.resource("v1/services"), "ns", "login")
            node_port = stored["spec"]["ports"][0]["nodePort"]
            assert node_port in NODE_PORTS
            assert stored["status"]["loadBalancer"]["ingress"] == [{"ip": "127.0.0.1"}]
            reader, writer = await asyncio.open_connection("127.0.0.1", node_port)
            writer.write(b"hello\n")
            await writer.drain()
            assert await asyncio.wait_for(reader.read(), 10) == b"SSH-2.0-echo hello\n"
            writer.close()
            # back to ClusterIP: the port is closed
            store.patch(store.resource("v1/services"), "ns", "login", "merge", {"spec": {"type": "ClusterIP"}})
            await ports.reconcile()
            assert node_port not in ports.listeners
        finally:
            ports.close()
            backend.close()

    loop = asyncio.new_event_loop()  # not asyncio.run: it leaves the main thread without a loop for later tests
    try:
        loop.run_until_complete(main())
    finally:
        loop.close()


def test_a_load_balancer_whose_port_can_not_listen_publishes_no_ingress() -> None:
    """The ingress says the load balancer takes connections: while a nodePort has no listener (here
    another socket holds it) the Service gets none, and gets it once the port is free."""

    async def main() -> None:
        holder = socket.socket()
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        held = holder.getsockname()[1]
        store = FakeStore()
        store.create(store.resource("v1/namespaces"), None, {"metadata": {"name": "ns"}})
        service = {
            "metadata": {"name": "login"},
            "spec": {"type": "LoadBalancer", "selector": {"app": "login"}, "ports": [{"port": 22, "nodePort": held}]},
        }
        store.create(store.resource("v1/services"), "ns", service)
        ports = Ports(store)
        try:
            assert await ports.reconcile() is False
            stored = store.get(store.resource("v1/services"), "ns", "login")
            assert held not in ports.listeners
            assert not (stored.get("status") or {}).get("loadBalancer", {}).get("ingress"), stored["status"]
            holder.close()
            assert await ports.reconcile() is True
            stored = store.get(store.resource("v1/services"), "ns", "login")
            assert held in ports.listeners
            assert stored["status"]["loadBalancer"]["ingress"] == [{"ip": "127.0.0.1"}]
        finally:
            holder.close()
            ports.close()

    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(main())
    finally:
        loop.close()
