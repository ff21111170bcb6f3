"""Kubernetes' own PodGroup on the real API server (k8s v1.36.3, GenericWorkload on, as an alpha API
needs it): a pod naming its PodGroup comes back from the API server with the field the webhook reads,
the webhook's reader (runtime/webhook/owners.py KubeOwners) gets the PodGroup and sizes the gang from
its gang policy, tells a PodGroup not created yet (refused) from an API not served (placed alone),
and the Role the render gives the webhook is all it needs for the read.

On demand (marker `controlplane`, `make test-controlplane`). The plane here is its own, started with
the gate, so the other control-plane modules keep the default API server."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes.client.exceptions import ApiException
from kubernetes.config import kube_config
from sunk.runtime.local.controlplane import ControlPlane
from sunk.runtime.webhook import gangs
from sunk.runtime.webhook.admission import NamespaceDefaults, owner_wanted
from sunk.runtime.webhook.owners import KubeOwners, NotCreatedYet

from sunk import keys
from sunk.manifests.webhook import OWNER_RULES
from tests.support.controlplane import get, kubectl, kubectl_run, wait_for

pytestmark = pytest.mark.controlplane

GATES = ("--feature-gates=GenericWorkload=true", "--runtime-config=scheduling.k8s.io/v1alpha2=true")
NS = "team-vision"


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    assert shutil.which("kubectl"), "the real kubectl must be on the PATH"
    with ControlPlane(tmp_path_factory.mktemp("controlplane"), api_server_flags=GATES) as started:
        kubectl(started, "create", "namespace", NS)
        # The ServiceAccount admission plugin refuses a pod until the controller made "default".
        wait_for(f"ServiceAccount {NS}/default", lambda: kubectl_run(started, "-n", NS, "get", "sa", "default",
                                                                      check=False).returncode == 0)  # fmt: skip
        yield started


def _webhook_kubeconfig(plane: ControlPlane, folder: Path) -> Path:
    """A kubeconfig for a ServiceAccount bound to the webhook's rendered Role (OWNER_RULES) in NS only."""
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "webhook", "namespace": NS}, "rules": OWNER_RULES}  # fmt: skip
    kubectl(plane, "apply", "-f", "-", stdin=json.dumps(role))
    kubectl(plane, "-n", NS, "create", "serviceaccount", "webhook")
    kubectl(plane, "-n", NS, "create", "rolebinding", "webhook", "--role=webhook", f"--serviceaccount={NS}:webhook")
    token = kubectl(plane, "-n", NS, "create", "token", "webhook").strip()
    config = json.loads(kubectl(plane, "config", "view", "--raw", "--minify", "-o", "json"))
    config["users"] = [{"name": "webhook", "user": {"token": token}}]
    config["contexts"][0]["context"]["user"] = "webhook"
    path = folder / "webhook.conf"
    path.write_text(json.dumps(config))
    return path


def test_a_pod_names_its_pod_group_and_the_webhook_sizes_the_gang_from_it(
    plane: ControlPlane, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    podgroup = {
        "apiVersion": "scheduling.k8s.io/v1alpha2",
        "kind": "PodGroup",
        "metadata": {"name": "llm-workers-0", "namespace": NS},
        "spec": {"schedulingPolicy": {"gang": {"minCount": 4}}},
    }
    kubectl(plane, "apply", "-f", "-", stdin=json.dumps(podgroup))
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "llm-0", "namespace": NS},
        "spec": {
            "schedulingGroup": {"podGroupName": "llm-workers-0"},
            "containers": [{"name": "main", "image": "example.invalid/x:1"}],
        },
    }
    kubectl(plane, "apply", "-f", "-", stdin=json.dumps(pod))
    stored = get(plane, "-n", NS, "pod", "llm-0")
    body = {"request": {"namespace": NS, "operation": "CREATE", "resource": {"resource": "pods"}, "object": stored}}
    wanted = owner_wanted(body, {NS: NamespaceDefaults(account="vision")})
    assert wanted == (NS, gangs.Owner("PodGroup", "llm-workers-0"))

    # The client reads KUBECONFIG once, at import: its default location is what KubeOwners loads.
    monkeypatch.setattr(kube_config, "KUBE_CONFIG_DEFAULT_LOCATION", str(_webhook_kubeconfig(plane, tmp_path)))
    owners = KubeOwners()
    read = owners.read(NS, wanted[1])
    assert read is not None
    uid = read["metadata"]["uid"]
    gang = gangs.podgroup_gang(stored["metadata"], read)
    assert gang == {keys.GROUP: "pg-" + uid.replace("-", ""), keys.GROUP_SIZE: "4"}

    with pytest.raises(NotCreatedYet):  # the API is served; the pod's group is not there yet
        owners.read(NS, gangs.Owner("PodGroup", "not-yet"))
    # Discovery: the served API, and one that is not (read as absent: placed alone).
    assert owners._served(gangs.PODGROUP_API)
    assert not owners._served(("scheduling.k8s.io", "v1alpha2", "workloadsets"))
    assert not owners._served(("example.invalid", "v1", "things"))
    # The Role is all it may read: a PodGroup in another namespace is refused (403), not absent.
    kubectl_run(plane, "create", "namespace", "other")
    with pytest.raises(ApiException, match=r"403|Forbidden"):
        owners.read("other", gangs.Owner("PodGroup", "llm-workers-0"))
