"""The key generator: its plan, its values, and the rendered Job's own command and settings run
against a Kubernetes API (kubesim) that holds the rest of the render, twice, on two clusters, and
once more on a cluster where some Secrets already exist; then from the runtime image itself."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from sunk.runtime.harness.image_process import RuntimeImage
from sunk.runtime.keygen.__main__ import OpensslCertificates, Settings, generate
from sunk.runtime.keygen.plan import PlanError, Wanted, parse, renewal_due, secret_body
from sunk.runtime.keygen.values import PASSWORD_ALPHABET, make

from sunk.manifests.cluster import cluster_manifests
from sunk.manifests.keygen import secrets_json, wanted_secrets
from sunk.spec.cluster import ClusterSpec
from sunk.stackfile import load_stack
from tests.support.kubesim import KubeSim
from tests.support.stacks import FIXTURE_STACKS

ROOT = Path(__file__).resolve().parents[3]


def _spec(stack: str = "acme-dev") -> ClusterSpec:
    return load_stack(stack, FIXTURE_STACKS).spec


def _job(spec: ClusterSpec) -> dict[str, Any]:
    (job,) = [
        m
        for m in cluster_manifests(spec)
        if m["kind"] == "Job" and m["metadata"]["labels"]["app.kubernetes.io/component"] == "keygen"
    ]
    return job


def _job_env(spec: ClusterSpec) -> dict[str, str]:
    (container,) = _job(spec)["spec"]["template"]["spec"]["containers"]
    assert container["command"] == ["python", "-m", "sunk.runtime.keygen"]
    return {e["name"]: e["value"] for e in container["env"]}


def _kubeconfig(sim: KubeSim, path: Path) -> Path:
    path.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "k", "cluster": {"server": sim.url}}],
                "users": [{"name": "u", "user": {}}],
                "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
                "current-context": "c",
            }
        )
    )
    return path


def _apply_render(sim: KubeSim, spec: ClusterSpec) -> None:
    """The render's objects this API serves (ConfigMaps, Secrets, Services), created as
    `kubectl apply -f` would create them."""
    core = client.CoreV1Api(sim.api_client())
    sim.add_namespace(spec.ns)
    for m in cluster_manifests(spec):
        if m["kind"] == "ConfigMap":
            core.create_namespaced_config_map(spec.ns, client.V1ConfigMap.model_validate(m))
        elif m["kind"] == "Secret":
            core.create_namespaced_secret(spec.ns, client.V1Secret.model_validate(m))
        elif m["kind"] == "Service":
            core.create_namespaced_service(spec.ns, client.V1Service.model_validate(m))


def _secrets(sim: KubeSim, namespace: str) -> dict[str, dict[str, bytes]]:
    core = client.CoreV1Api(sim.api_client())
    out = {}
    for s in core.list_namespaced_secret(namespace).items:
        assert s.metadata is not None and s.metadata.name is not None
        out[s.metadata.name] = {k: base64.b64decode(v) for k, v in (s.data or {}).items()}
    return out


def _run_job(env: dict[str, str], kubeconfig: Path, work: Path) -> subprocess.CompletedProcess[str]:
    """The Job's container: its command with its environment (the work folder moved off /run)."""
    run_env = {**os.environ, **env, "KUBECONFIG": str(kubeconfig), "SUNK_WORK_DIR": str(work)}
    return subprocess.run(
        [sys.executable, "-m", "sunk.runtime.keygen"], env=run_env, capture_output=True, text=True, timeout=120
    )


@pytest.fixture
def sims() -> Iterator[tuple[KubeSim, KubeSim]]:
    with KubeSim() as a, KubeSim() as b:
        yield a, b


def test_the_rendered_job_makes_fresh_keys_on_each_cluster_and_logs_no_value(
    sims: tuple[KubeSim, KubeSim], tmp_path: Path
) -> None:
    spec = _spec()
    env = _job_env(spec)
    made = []
    for i, sim in enumerate(sims):
        _apply_render(sim, spec)
        result = _run_job(env, _kubeconfig(sim, tmp_path / f"kubeconfig-{i}"), tmp_path)
        assert result.returncode == 0, result.stderr
        secrets = _secrets(sim, spec.ns)
        for want in wanted_secrets(spec):
            assert want.name in secrets, want.name
            assert set(secrets[want.name]) == {k for k, _ in want.items}
        for value in (v for s in wanted_secrets(spec) for v in secrets[s.name].values()):
            shown = value.decode(errors="replace")
            assert value not in (result.stdout + result.stderr).encode() and shown not in result.stderr
        assert f"created Secret {spec.ns}/research-auth (munge.key)" in result.stderr
        made.append(secrets)
    first, second = made
    auth = first["research-auth"]["munge.key"]
    assert len(auth) == 1024 and len(first["research-jwt"]["jwt_hs256.key"]) == 32
    password = first["research-mariadb"]["password"].decode()
    assert len(password) == 32 and set(password) <= set(PASSWORD_ALPHABET)
    assert first["research-login-host-keys"]["ssh_host_ed25519_key"].startswith(b"-----BEGIN OPENSSH PRIVATE KEY")
    for want in wanted_secrets(spec):
        for key, _ in want.items:
            assert first[want.name][key] != second[want.name][key], f"{want.name}/{key} is the same on both clusters"


def test_existing_secrets_are_left_alone_and_a_second_run_changes_nothing(
    sims: tuple[KubeSim, KubeSim], tmp_path: Path
) -> None:
    spec = _spec()
    sim = sims[0]
    _apply_render(sim, spec)
    core = client.CoreV1Api(sim.api_client())
    mine = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "research-jwt"}, "data": {"x": "bXlvd24="}}
    core.create_namespaced_secret(spec.ns, client.V1Secret.model_validate(mine))
    kubeconfig = _kubeconfig(sim, tmp_path / "kubeconfig")
    result = _run_job(_job_env(spec), kubeconfig, tmp_path)
    assert result.returncode == 0, result.stderr
    assert f"kept Secret {spec.ns}/research-jwt: it exists" in result.stderr
    after_first = _secrets(sim, spec.ns)
    assert after_first["research-jwt"] == {"x": b"myown"}
    again = _run_job(_job_env(spec), kubeconfig, tmp_path)
    assert again.returncode == 0, again.stderr
    assert "created" not in again.stderr
    assert _secrets(sim, spec.ns) == after_first


def test_secrets_the_spec_names_are_not_the_generators() -> None:
    """globex-prod brings its own slurm.key and JWT Secrets: the generator makes only the rest."""
    names = {w.name for w in wanted_secrets(_spec("globex-prod"))}
    assert names == {"sim-mariadb", "sim-login-host-keys"}
    assert "globex-slurm-key" not in names and "globex-jwt" not in names


def test_the_generator_may_only_create_secrets_without_a_webhook() -> None:
    spec = _spec()
    (role,) = [
        m
        for m in cluster_manifests(spec)
        if m["kind"] == "Role" and m["metadata"]["labels"]["app.kubernetes.io/component"] == "keygen"
    ]
    assert role["rules"] == [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]}]


def test_bad_settings_name_the_variable_and_the_entry() -> None:
    with pytest.raises(PlanError, match=r"\[0\]\.items\[0\]\.kind: 'random-7' is not one of"):
        parse('[{"name": "a", "items": [{"key": "k", "kind": "random-7"}]}]')
    with pytest.raises(PlanError, match="Secrets named twice: a"):
        parse(
            '[{"name": "a", "items": [{"key": "k", "kind": "random-32"}]}, {"name": "a", "items": [{"key": "j", "kind": "random-32"}]}]'
        )
    result = subprocess.run(
        [sys.executable, "-m", "sunk.runtime.keygen"],
        env={**os.environ, "SUNK_NAMESPACE": "n", "SUNK_KEYGEN_SECRETS": "{"},
        capture_output=True,
        text=True,
    )
    assert result.returncode == 2 and "SUNK_KEYGEN_SECRETS: not JSON" in result.stderr


def test_the_wanted_list_round_trips_and_bodies_carry_every_key() -> None:
    spec = _spec()
    wanted = parse(secrets_json(wanted_secrets(spec)))
    assert [w.name for w in wanted] == [w.name for w in wanted_secrets(spec)]
    w = Wanted("s", (("a", "random-32"), ("b", "password-32")), {"l": "v"})
    body = secret_body(w, "ns", {"a": b"\x00\x01", "b": b"pw"})
    assert body["data"] == {"a": "AAE=", "b": "cHc="} and body["metadata"] == {
        "name": "s",
        "namespace": "ns",
        "labels": {"l": "v"},
    }
    with pytest.raises(KeyError):
        secret_body(w, "ns", {"a": b"x"})


@pytest.mark.parametrize(("kind", "algorithm"), [("ssh-ed25519", "ssh-ed25519"), ("ssh-rsa-3072", "ssh-rsa")])
def test_host_keys_are_keys_ssh_reads(kind: Any, algorithm: str, tmp_path: Path) -> None:
    key = make(kind, tmp_path)
    assert list(tmp_path.iterdir()) == []  # nothing left behind
    path = tmp_path / "k"
    path.write_bytes(key)
    path.chmod(0o600)
    public = subprocess.run(["ssh-keygen", "-y", "-f", str(path)], capture_output=True, text=True, check=True).stdout
    assert public.startswith(algorithm + " ")
    assert make(kind, tmp_path) != key


def test_settings_read_the_jobs_environment() -> None:
    env = _job_env(_spec())
    s = Settings.from_env(env)
    assert s.namespace == "acme-research" and str(s.work_dir) == "/tmp"


@pytest.mark.parametrize("stack", ["acme-dev", "acme-prod"])
def test_the_generator_runs_from_the_runtime_image(runtime_image: RuntimeImage, tmp_path: Path, stack: str) -> None:
    """The Job's command from the image the Job names: its python, its wheels, its ssh-keygen, and
    for acme-prod (inference namespaces listed) its openssl, making the webhook's certificate."""
    spec = _spec(stack)
    with KubeSim() as sim:
        _apply_render(sim, spec)
        # Under the host's /tmp, which the image's user can reach (pytest's own folders are 0700).
        work = Path(tempfile.mkdtemp(prefix="sunk-keygen-", dir="/tmp"))
        os.chown(work, runtime_image.uid, runtime_image.gid)
        env = {
            **_job_env(spec),
            "KUBECONFIG": str(_kubeconfig(sim, tmp_path / "kubeconfig")),
            "SUNK_WORK_DIR": str(work),
        }
        proc = runtime_image.popen(
            "sunk.runtime.keygen", env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        _out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        secrets = _secrets(sim, spec.ns)
        assert {w.name for w in wanted_secrets(spec)} <= set(secrets)
        assert secrets["research-login-host-keys"]["ssh_host_rsa_key"].startswith(b"-----BEGIN OPENSSH PRIVATE KEY")
        if stack == "acme-prod":
            made = secrets["research-webhook-tls"]
            assert made["tls.crt"].startswith(b"-----BEGIN CERTIFICATE") and b"PRIVATE KEY" in made["ca.key"]
        assert list(work.iterdir()) == []
        work.rmdir()


# -- the webhook's serving certificate ---------------------------------------------------------------
def _openssl(*args: str) -> str:
    return subprocess.run(["openssl", *args], capture_output=True, text=True, check=True).stdout


class _Secrets:
    """An in-memory SecretApi: create, read, replace (resourceVersion checked)."""

    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}

    def create(self, namespace: str, body: dict[str, Any]) -> bool:
        name = body["metadata"]["name"]
        if name in self.objects:
            return False
        self.objects[name] = {**body, "metadata": {**body["metadata"], "resourceVersion": "1"}}
        return True

    def read(self, namespace: str, name: str) -> dict[str, Any]:
        copied: dict[str, Any] = json.loads(json.dumps(self.objects[name]))
        return copied

    def replace(self, namespace: str, body: dict[str, Any]) -> None:
        current = self.objects[body["metadata"]["name"]]
        assert body["metadata"]["resourceVersion"] == current["metadata"]["resourceVersion"]
        version = str(int(current["metadata"]["resourceVersion"]) + 1)
        self.objects[body["metadata"]["name"]] = {**body, "metadata": {**body["metadata"], "resourceVersion": version}}


def _pem(secret: dict[str, Any], key: str, folder: Path) -> Path:
    path = folder / key.replace(".", "-")
    path.write_bytes(base64.b64decode(secret["data"][key]))
    return path


def test_the_webhook_certificate_is_made_for_its_service_and_renewed_a_third_before_its_end(tmp_path: Path) -> None:
    """acme-prod lists inference namespaces: the generator makes <cluster>-webhook-tls, a CA and a
    serving certificate for the webhook Service's names that the CA verifies; later runs keep it
    until a third of its life is left, then renew it with the same CA and a new key (the CA's own
    rollover: test_rollover.py); a TLS Secret
    without ca.key (cert-manager's) is never touched."""
    spec = _spec("acme-prod")
    wanted = parse(secrets_json(wanted_secrets(spec)))
    (cert,) = [w for w in wanted if w.tls]
    assert cert.name == f"{spec.name}-webhook-tls"
    assert cert.dns_names[0] == f"{spec.name}-webhook.{spec.ns}.svc"
    api, certs = _Secrets(), OpensslCertificates(tmp_path)
    lines = generate(api, spec.ns, wanted, lambda w, k: make(dict(w.items)[k], tmp_path), certs, time.time())
    assert f"created Secret {spec.ns}/{cert.name} (ca.crt, ca.key, tls.crt, tls.key)" in lines
    made = api.objects[cert.name]
    assert made["type"] == "kubernetes.io/tls" and set(made["data"]) == {"ca.crt", "ca.key", "tls.crt", "tls.key"}
    ca, crt = _pem(made, "ca.crt", tmp_path), _pem(made, "tls.crt", tmp_path)
    assert ": OK" in _openssl("verify", "-CAfile", str(ca), str(crt))
    text = _openssl("x509", "-noout", "-text", "-in", str(crt))
    for name in cert.dns_names:
        assert f"DNS:{name}" in text
    assert "TLS Web Server Authentication" in text and "CA:FALSE" in text
    not_before, not_after = certs.validity(base64.b64decode(made["data"]["tls.crt"]))
    assert round((not_after - not_before) / 86400) == 90

    ca_end = certs.validity(base64.b64decode(made["data"]["ca.crt"]))[1]
    again = generate(api, spec.ns, [cert], lambda w, k: b"", certs, not_after - 31 * 86400)
    assert again == [f"kept Secret {spec.ns}/{cert.name}: not yet due for renewal (its serving certificate ends "
                     f"{time.strftime('%Y-%m-%d', time.gmtime(not_after))}, its CA ends "
                     f"{time.strftime('%Y-%m-%d', time.gmtime(ca_end))})"]  # fmt: skip
    assert api.objects[cert.name]["data"] == made["data"]

    renewed = generate(api, spec.ns, [cert], lambda w, k: b"", certs, not_after - 29 * 86400)
    assert renewed[0].startswith(f"renew-serving in Secret {spec.ns}/{cert.name} (tls.crt, tls.key): less than")
    after = api.objects[cert.name]
    assert after["data"]["ca.crt"] == made["data"]["ca.crt"] and after["data"]["ca.key"] == made["data"]["ca.key"]
    assert after["data"]["tls.crt"] != made["data"]["tls.crt"] and after["data"]["tls.key"] != made["data"]["tls.key"]
    assert after["metadata"]["labels"] == made["metadata"]["labels"]
    assert ": OK" in _openssl("verify", "-CAfile", str(ca), str(_pem(after, "tls.crt", tmp_path)))
    for line in lines + again + renewed:  # names and dates, never a value
        assert not any(v in line for v in after["data"].values())

    foreign = _Secrets()
    foreign.objects[cert.name] = {"metadata": {"name": cert.name, "resourceVersion": "7"},
                                  "data": {k: made["data"][k] for k in ("ca.crt", "tls.crt", "tls.key")}}  # fmt: skip
    kept = generate(foreign, spec.ns, [cert], lambda w, k: b"", certs, not_after)
    assert kept == [
        f"kept Secret {spec.ns}/{cert.name}: it has no ca.key (not made by the generator), so its maker renews it"
    ]


def test_renewal_is_due_in_the_last_third() -> None:
    assert not renewal_due(0, 90, 59.9) and renewal_due(0, 90, 60) and renewal_due(0, 90, 100)


def test_a_tls_entry_has_the_tls_keys_and_names() -> None:
    entry = {"name": "t", "items": [{"key": k, "kind": "tls"} for k in ("ca.crt", "ca.key", "tls.crt", "tls.key")]}
    with pytest.raises(PlanError, match=r"\[0\]: a TLS Secret has exactly the keys ca.crt, ca.key, tls.crt, tls.key"):
        parse(json.dumps([entry]))  # no dnsNames
    with pytest.raises(PlanError, match="a TLS Secret has exactly the keys"):
        parse(json.dumps([{**entry, "items": entry["items"][:2], "dnsNames": ["a"]}]))
    with pytest.raises(PlanError, match=r"\[0\]\.dnsNames: expected a list of names"):
        parse(json.dumps([{**entry, "dnsNames": "a"}]))
    assert parse(json.dumps([{**entry, "dnsNames": ["a.b.svc"]}]))[0].dns_names == ("a.b.svc",)


def test_the_renewal_cronjob_runs_the_jobs_pod_and_may_read_only_the_certificate() -> None:
    spec = _spec("acme-prod")
    manifests = [
        m for m in cluster_manifests(spec) if m["metadata"]["labels"].get("app.kubernetes.io/component") == "keygen"
    ]
    (job,) = [m for m in manifests if m["kind"] == "Job"]
    (cron,) = [m for m in manifests if m["kind"] == "CronJob"]
    assert cron["metadata"]["name"] == f"{spec.name}-keygen-renew"
    assert cron["spec"]["jobTemplate"]["spec"]["template"] == job["spec"]["template"]
    assert cron["spec"]["concurrencyPolicy"] == "Forbid"
    (role,) = [m for m in manifests if m["kind"] == "Role"]
    assert role["rules"] == [
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]},
        {
            "apiGroups": [""],
            "resources": ["secrets"],
            "verbs": ["get", "update"],
            "resourceNames": [f"{spec.name}-webhook-tls"],
        },
    ]
    assert not [m for m in cluster_manifests(_spec()) if m["kind"] == "CronJob"]  # acme-dev: no webhook
