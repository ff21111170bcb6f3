"""Login: SSH login pods."""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import pulumi_tls as tls

from sunk import naming
from sunk.manifests.auth import AuthRefs, empty_secret, host_keys_secret_name
from sunk.manifests.login import SSH_PORT, authorized_keys_config, deployment, service
from sunk.spec.cluster import ClusterSpec

from ._k8s import Component, child, create, text, typed

PENDING = "<pending>"


class Login(Component):
    """sshd login pods with the Slurm clients, SSSD (LDAP users), shared volumes, and a Service
    (LoadBalancer by default). Host keys are generated once (pulumi-tls, kept in the Pulumi
    state) and stored in `<cluster>-login-host-keys`, so every replica and every restart shows
    users the same host key."""

    endpoint: pulumi.Output[str]
    """Where users ssh to: `host:port` (a LoadBalancer address once assigned)."""
    deployment: k8s.apps.v1.Deployment
    """sshd."""
    service: k8s.core.v1.Service
    host_keys: k8s.core.v1.Secret | None
    """The persisted sshd host keys; None when `persistHostKeys` is off or the cluster makes them."""

    def __init__(
        self,
        name: str,
        spec: ClusterSpec,
        *,
        namespace: pulumi.Input[str],
        refs: AuthRefs,
        keys_in_cluster: bool = False,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        """`keys_in_cluster`: the host keys are the in-cluster generator's (KeyGenerator)."""
        super().__init__("sunk:index:Login", name, opts)
        deps: list[pulumi.Resource] = []
        self.host_keys = None
        if spec.login.persist_host_keys and not keys_in_cluster:
            ed25519 = tls.PrivateKey(f"{name}-host-key-ed25519", algorithm="ED25519", opts=child(self))
            rsa = tls.PrivateKey(f"{name}-host-key-rsa", algorithm="RSA", rsa_bits=3072, opts=child(self))
            self.host_keys = typed(
                k8s.core.v1.Secret,
                create(
                    f"{name}-host-keys",
                    empty_secret(spec, host_keys_secret_name(spec), "login"),
                    child(self),
                    namespace=namespace,
                    string_data={
                        "ssh_host_ed25519_key": pulumi.Output.secret(ed25519.private_key_openssh),
                        "ssh_host_rsa_key": pulumi.Output.secret(rsa.private_key_openssh),
                    },
                ),
            )
            deps.append(self.host_keys)
        keys = authorized_keys_config(spec)
        if keys is not None:
            deps.append(create(f"{name}-authorized-keys", keys, child(self), namespace=namespace))
        sshd = create(f"{name}-sshd", deployment(spec, refs), child(self, depends_on=deps), namespace=namespace)
        self.deployment = typed(k8s.apps.v1.Deployment, sshd)
        svc = create(f"{name}-service", service(spec), child(self), namespace=namespace)
        self.service = typed(k8s.core.v1.Service, svc)
        self.endpoint = _endpoint(spec, svc)
        self.register_outputs({"endpoint": self.endpoint})


def _endpoint(spec: ClusterSpec, svc: pulumi.CustomResource) -> pulumi.Output[str]:
    kind = spec.login.service_kind
    if kind == "ClusterIP":
        return text(f"{naming.login(spec)}.{spec.ns}.svc.cluster.local:{SSH_PORT}")
    if kind == "NodePort":
        spec_out: pulumi.Output[Any] = svc.spec  # type: ignore[attr-defined]
        return spec_out.apply(lambda s: f"<any node address>:{_node_port(s)}")
    status: pulumi.Output[Any] = svc.status  # type: ignore[attr-defined]
    return status.apply(lambda s: f"{_lb_address(s)}:{SSH_PORT}")


def _get(obj: Any, key: str) -> Any:
    if obj is None:
        return None
    if isinstance(obj, dict):
        return obj.get(key)
    return getattr(obj, key, None)


def _node_port(service_spec: Any) -> str:
    ports = _get(service_spec, "ports") or []
    port = _get(ports[0], "node_port") if ports else None
    return str(int(port)) if port else PENDING


def _lb_address(status: Any) -> str:
    ingress = _get(_get(status, "load_balancer"), "ingress") or []
    if not ingress:
        return PENDING
    return str(_get(ingress[0], "ip") or _get(ingress[0], "hostname") or PENDING)
