"""Kubernetes timestamps (RFC 3339, UTC, `Z`): one spelling for every controller."""

from __future__ import annotations

from datetime import UTC, datetime

_SECONDS = "%Y-%m-%dT%H:%M:%SZ"


def rfc3339(moment: datetime) -> str:
    """Whole seconds, as metav1.Time (conditions, Events, annotations)."""
    return moment.astimezone(UTC).strftime(_SECONDS)


def rfc3339_micro(moment: datetime) -> str:
    """Microseconds, as metav1.MicroTime (Lease renew and acquire times)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_rfc3339(text: str) -> datetime:
    """What rfc3339 writes, back to an aware datetime. Raises ValueError on anything else."""
    return datetime.strptime(text, _SECONDS).replace(tzinfo=UTC)
