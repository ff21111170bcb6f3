"""A host on a local cluster's bridge that is not a pod: a network namespace at a fixed address of
the cluster's subnet (pods take .2 to .251), as a site's directory or database server is."""

from __future__ import annotations

import contextlib
import hashlib
import ipaddress
import subprocess
from collections.abc import Iterator


@contextlib.contextmanager
def host_on_bridge(bridge: str, subnet: str, last_octet: int, prefix: str) -> Iterator[tuple[str, str]]:
    """A network namespace `sunk-<prefix>-<tag>` on `bridge` at address .`last_octet` of `subnet`.
    Yields (namespace, address); removed afterwards, and first where a killed run left it."""
    network = ipaddress.IPv4Network(subnet)
    address = str(network.network_address + last_octet)
    tag = hashlib.sha256(bridge.encode()).hexdigest()[:8]
    name, veth = f"sunk-{prefix}-{tag}", f"s{prefix}{tag}"

    def ip(*args: str, check: bool = True) -> None:
        subprocess.run(["ip", *args], check=check, capture_output=True)

    ip("link", "del", veth, check=False)  # left by a run that was killed
    ip("netns", "del", name, check=False)
    try:
        ip("netns", "add", name)
        ip("link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", name)
        ip("link", "set", veth, "master", bridge, "up")
        ip("-n", name, "addr", "add", f"{address}/{network.prefixlen}", "dev", "eth0")
        ip("-n", name, "link", "set", "eth0", "up")
        ip("-n", name, "link", "set", "lo", "up")
        yield name, address
    finally:
        ip("link", "del", veth, check=False)
        ip("netns", "del", name, check=False)
