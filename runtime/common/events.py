"""core/v1 Events, built one way by every controller."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from .timefmt import rfc3339

MESSAGE_LIMIT = 1024
"""The API server refuses longer Event messages."""


def event(
    involved: Mapping[str, str],
    reason: str,
    message: str,
    *,
    now: datetime,
    component: str,
    warning: bool = False,
    instance: str | None = None,
) -> dict[str, Any]:
    """An Event about `involved` (apiVersion, kind, namespace, name, uid), in its namespace. The
    name is made unique here (the API server's generateName would add the same kind of suffix;
    kmock has none)."""
    stamp = rfc3339(now)
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{involved['name']}.{uuid.uuid4().hex[:16]}", "namespace": involved["namespace"]},
        "involvedObject": dict(involved),
        "reason": reason,
        "message": message[:MESSAGE_LIMIT],
        "type": "Warning" if warning else "Normal",
        "source": {"component": component},
        "reportingComponent": component,
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    }
    if instance is not None:
        body["reportingInstance"] = instance
    return body
