"""pods/eviction's budget check, as the API server makes it."""

from __future__ import annotations

from typing import Any

from sunk.runtime.local.eviction import eviction_refusal


def _pod(name: str, ready: bool, phase: str = "Running") -> dict[str, Any]:
    conditions = [{"type": "Ready", "status": "True" if ready else "False"}]
    return {"metadata": {"name": name, "labels": {"app": "db"}}, "status": {"phase": phase, "conditions": conditions}}


def _pdb(**spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "db"}, "spec": {"selector": {"matchLabels": {"app": "db"}}, **spec}}


def test_min_available_and_max_unavailable() -> None:
    pods = [_pod("a", True), _pod("b", True)]
    assert eviction_refusal(pods[0], [_pdb(minAvailable=1)], pods) is None
    assert "needs 2" in (eviction_refusal(pods[0], [_pdb(minAvailable=2)], pods) or "")
    assert eviction_refusal(pods[0], [_pdb(maxUnavailable="50%")], pods) is None
    pods[1] = _pod("b", False)
    assert eviction_refusal(pods[0], [_pdb(maxUnavailable=1)], pods) is not None


def test_pending_and_unhealthy_pods_may_always_go_with_always_allow() -> None:
    pods = [_pod("a", True), _pod("b", False)]
    assert eviction_refusal(_pod("p", False, "Pending"), [_pdb(minAvailable=5)], pods) is None
    assert eviction_refusal(pods[1], [_pdb(minAvailable=2, unhealthyPodEvictionPolicy="AlwaysAllow")], pods) is None
    # IfHealthyBudget (the default): an unhealthy pod goes only while the budget is met
    assert eviction_refusal(pods[1], [_pdb(minAvailable=1)], pods) is None
    assert eviction_refusal(pods[1], [_pdb(minAvailable=2)], pods) is not None
