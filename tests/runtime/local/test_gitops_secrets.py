"""The GitOps path for every stack feature that names a Secret the user makes, on one local
cluster: a directory (auth.ldap: the bind password, its CA and a client certificate, so TLS both
ways), an external database (its password), and keys the user brings (the munge key and the JWT
key). The stack is rendered by `sunk render` without `--show-secrets` (what a user commits), the
Secrets are made out of band as docs/how-to/gitops-render.md says (kubectl, from files), the
render is applied with the README's command, and every pod comes up Ready: sssd from the
render's ConfigMap and the bind password, slurmdbd on the external database, slurmctld past its
wait for slurmdbd, login, restapi and the operator's slurmd pods.

The directory is a real slapd (TLS only, client certificates required) and the external database
a MariaDB from sunk's image in a namespace of its own: both on the cluster's network as a site's
servers would be. No value of any Secret is in the render or in any ConfigMap of the cluster."""

from __future__ import annotations

import base64
import json
import os
import secrets
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from sunk.runtime.harness.directory import DirectoryGroup, DirectoryUser, LocalLdap
from sunk.runtime.local.stuck import why as stuck_why

from sunk.manifests.accounting import mariadb_manifests
from sunk.spec import load_spec
from tests.runtime.local.test_gitops import ROOT, Empty
from tests.support.bridgehost import host_on_bridge
from tests.support.localcluster import sunk
from tests.support.stacks import FIXTURE_PROJECT

pytestmark = pytest.mark.slurm

NS = "acme-research"
DB_NS = "acme-db"
STACK = "acme-gitops"
MUNGE_KEY_BYTES = 1024
JWT_KEY_BYTES = 32


def _stack(ldap: LocalLdap) -> dict[str, Any]:
    """A small cluster (one slurmd) with every feature that names a user's Secret."""
    return {
        "sunk:operator": True,
        "sunk:cluster": {
            "name": "research",
            "tenant": "acme",
            "slurm": {"version": "26.05"},
            "login": {"serviceType": "ClusterIP"},
            "nodesets": [{"name": "cpu", "replicas": 1, "cpus": 2, "memoryMib": 2048}],
            "partitions": [{"name": "batch", "nodesets": ["cpu"], "default": True}],
            "auth": {
                "key": {"existingSecret": {"name": "research-munge", "key": "munge.key"}},
                "jwt": {"existingSecret": {"name": "research-tokens", "key": "jwt.key"}},
                "ldap": {
                    "uris": [ldap.address_uri],  # StartTLS, the server verified against the CA
                    "baseDn": ldap.base_dn,
                    "bindDn": ldap.service_dn,
                    "bindPasswordSecret": {"name": "research-ldap", "key": "password"},
                    "caSecret": {"name": "research-ldap", "key": "ca.crt"},
                    "clientCertSecret": {"name": "research-ldap-client"},
                },
            },
            "accounting": {
                "external": {
                    "host": f"site-db.{DB_NS}.svc.cluster.local",
                    "database": "slurm_acct_db",
                    "user": "slurm",
                    "passwordSecret": {"name": "research-db", "key": "password"},
                }
            },
        },
    }


def _stack_minimal() -> dict[str, Any]:
    return {
        "name": "research",
        "tenant": "acme",
        "nodesets": [{"name": "cpu", "cpus": 2, "memoryMib": 2048}],
        "partitions": [{"name": "batch", "nodesets": ["cpu"]}],
    }


def _site_database(password: str) -> list[dict[str, Any]]:
    """The site's database server: sunk's MariaDB StatefulSet and Service, moved to a namespace of
    their own under the name site-db, with none of sunk's labels (no NetworkPolicy of the stack
    selects it), and their Secret holding `password` for slurmdbd's user."""
    cluster = _stack_minimal()
    spec = load_spec(cluster)
    labels = {"app": "site-db"}
    out: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": DB_NS}},
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "site-db", "namespace": DB_NS},
            "stringData": {"password": password, "root-password": secrets.token_hex(24)},
        },
    ]
    for obj in mariadb_manifests(spec):
        obj = json.loads(json.dumps(obj).replace('"research-mariadb', '"site-db'))
        obj["metadata"] = {"name": obj["metadata"]["name"], "namespace": DB_NS, "labels": labels}
        if obj["kind"] == "StatefulSet":
            obj["spec"]["selector"] = {"matchLabels": labels}
            obj["spec"]["template"]["metadata"]["labels"] = labels
        elif obj["kind"] == "Service":
            obj["spec"]["selector"] = labels
        elif obj["kind"] != "PersistentVolumeClaim":
            continue
        out.append(obj)
    return out


def _create_secret(cluster: Empty, *args: str) -> None:
    """`kubectl create secret …`, as the docs say, sent as YAML through apply (the local API
    server reads JSON and YAML, not the protobuf `kubectl create` sends)."""
    made = cluster.kubectl("create", "secret", *args, "-n", NS, "--dry-run=client", "-o", "yaml")
    done = subprocess.run(
        ["kubectl", "--kubeconfig", cluster.kubeconfig, "apply", "-f", "-"],
        input=made.stdout, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr


def _not_ready(cluster: Empty) -> list[str]:
    pods = json.loads(cluster.kubectl("get", "pods", "-A", "-o", "json").stdout)["items"]
    left = []
    for pod in pods:
        status = pod.get("status") or {}
        if status.get("phase") == "Succeeded":
            continue
        why = stuck_why(pod, None) or "; ".join(
            c.get("message", "") for c in status.get("conditions") or [] if c.get("message")
        )
        ready = any(c["type"] == "Ready" and c["status"] == "True" for c in status.get("conditions") or [])
        if not ready or pod["metadata"].get("deletionTimestamp"):
            left.append(f"{pod['metadata']['namespace']}/{pod['metadata']['name']}: {why or status.get('phase')}")
    return left


@pytest.fixture(scope="module")
def booted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Empty, Path, dict[str, bytes]]]:
    built = sunk("images", "build", env=dict(os.environ), timeout=1800)
    assert built.returncode == 0, built.stderr
    work = tmp_path_factory.mktemp("gitops-secrets")
    cluster = Empty(work / "clusters", ROOT)
    alice = DirectoryUser("alice", 20001, 20000, ())
    try:
        with (
            host_on_bridge(cluster.state.bridge, cluster.state.subnet, 252, "gdir") as (netns, address),
            LocalLdap.start(
                [alice], [DirectoryGroup("research", 20000, ("alice",))],
                require_client_cert=True, address=address, netns=netns,
            ) as ldap,
        ):  # fmt: skip
            # The user's project: the fixture program, with this stack.
            project = work / "project"
            (project / "stacks").mkdir(parents=True)
            for name in ("Pulumi.yaml", "__main__.py"):
                shutil.copy(FIXTURE_PROJECT / name, project / name)
            stack_file = project / "stacks" / f"Pulumi.{STACK}.yaml"
            stack_file.write_text(yaml.safe_dump({"config": _stack(ldap)}, sort_keys=False))
            render = work / "render"
            done = sunk("render", STACK, "--out", str(render), env=dict(os.environ), cwd=project)
            assert done.returncode == 0, done.stderr
            from sunk.runtime.local.offcluster import override_render

            override_render(render)  # the named off-cluster changes only (cgroups, node sizes)

            # The user's Secrets, made out of band from files, as the docs list them.
            values = {
                "munge.key": os.urandom(MUNGE_KEY_BYTES),
                "jwt.key": os.urandom(JWT_KEY_BYTES),
                "db": secrets.token_urlsafe(24).encode(),
                "bind": ldap.bind_password.encode(),
                "client.key": ldap.tls.client_key.encode(),
            }
            files = work / "secrets"
            files.mkdir()
            for name, value in {
                **values,
                "ca.crt": ldap.tls.ca.encode(),
                "client.crt": ldap.tls.client_cert.encode(),
            }.items():
                (files / name).write_bytes(value)
            cluster.apply(render)  # before the Secrets: pods wait for them
            _create_secret(cluster, "generic", "research-munge", f"--from-file=munge.key={files / 'munge.key'}")
            _create_secret(cluster, "generic", "research-tokens", f"--from-file=jwt.key={files / 'jwt.key'}")
            _create_secret(cluster, "generic", "research-db", f"--from-file=password={files / 'db'}")
            _create_secret(
                cluster, "generic", "research-ldap",
                f"--from-file=password={files / 'bind'}", f"--from-file=ca.crt={files / 'ca.crt'}",
            )  # fmt: skip
            _create_secret(
                cluster,
                "tls",
                "research-ldap-client",
                f"--cert={files / 'client.crt'}",
                f"--key={files / 'client.key'}",
            )
            site = work / "site-db.yaml"
            site.write_text(yaml.safe_dump_all(_site_database(values["db"].decode())))
            cluster.kubectl("apply", "-f", str(site))
            yield cluster, render, values
    finally:
        cluster.down()


def test_a_plain_render_with_every_users_secret_boots_every_pod_ready(
    booted: tuple[Empty, Path, dict[str, bytes]],
) -> None:
    cluster, _, _ = booted
    deadline = time.monotonic() + 420
    left = _not_ready(cluster)
    while time.monotonic() < deadline:
        left = _not_ready(cluster)
        nodes = json.loads(cluster.kubectl("get", "pods", "-n", NS, "-o", "json").stdout)["items"]
        slurmd = [p for p in nodes if p["metadata"]["name"].startswith("research-cpu-")]
        if not left and slurmd:
            break
        time.sleep(3)
    else:
        pytest.fail(f"pods not Ready: {left}")
    login = ("exec", "-n", NS, "deploy/research-login", "-c", "sshd", "--")
    # The directory resolves through sssd (the ConfigMap's sssd.conf plus the bind password) and
    # slurmdbd answers from the external database.
    assert cluster.kubectl(*login, "id", "-u", "alice").stdout.split() == ["20001"]
    assert "research" in cluster.kubectl(*login, "sacctmgr", "-n", "-P", "show", "cluster", "format=Cluster").stdout


def test_no_secret_value_is_in_the_render_or_any_configmap(booted: tuple[Empty, Path, dict[str, bytes]]) -> None:
    cluster, render, values = booted
    text = b"".join(p.read_bytes() for p in render.rglob("*.yaml"))
    maps = cluster.kubectl("get", "configmaps", "-A", "-o", "json").stdout.encode()
    assert not [p for p in render.rglob("*.yaml") if yaml.safe_load(p.read_text())["kind"] == "Secret"]
    for name, value in values.items():
        for form in (value, base64.b64encode(value)):
            assert form not in text, name
            assert form not in maps, name
