"""`pulumi up` of a stack with backup controllers finishes: Pulumi's Kubernetes provider waits for a
StatefulSet until readyReplicas equals replicas, and only the primary slurmctld is ever Ready (its
readiness probe; a standby passes only liveness), so the provider would time out every update after
10 minutes. The controller StatefulSet with backups carries `pulumi.com/skipAwait`; without backups
it is waited for as before. Pulumi's mocks can't model the provider's await itself: the test
checks the annotation the provider reads."""

from __future__ import annotations

import json
from pathlib import Path

from sunk.components.offline import evaluate, stack_config

from sunk import keys
from sunk.stackfile import stack_path
from tests.support.stacks import FIXTURE_STACKS

ROOT = Path(__file__).resolve().parents[2]


def _controller_annotations(replicas: int) -> dict[str, str]:
    config, secret = stack_config(stack_path("globex-dev", FIXTURE_STACKS))
    cluster = json.loads(config["sunk:cluster"])
    if replicas > 1:
        cluster["controller"] = {
            **cluster.get("controller", {}),
            "replicas": replicas,
            "stateStorage": {"accessMode": "ReadWriteMany", "storageClass": "nfs-client"},
        }
    config["sunk:cluster"] = json.dumps(cluster)
    ev = evaluate(ROOT / "__main__.py", stack="globex-dev", config=config, secret_keys=secret)
    (sts,) = [r for r in ev.kubernetes() if r.inputs.get("kind") == "StatefulSet" and r.name.endswith("-slurmctld")]
    annotations: dict[str, str] = sts.inputs["metadata"].get("annotations") or {}
    return annotations


def test_the_controllers_with_backups_are_not_waited_for_and_one_controller_is() -> None:
    assert _controller_annotations(2).get(keys.PULUMI_SKIP_AWAIT) == "true"
    assert keys.PULUMI_SKIP_AWAIT not in _controller_annotations(1)
