"""What the generator creates: the wanted Secrets (from the Job's environment) and each Secret's
body from generated values. Pure: no I/O, no randomness."""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from dataclasses import dataclass

from sunk.manifests.keygen import KINDS, TLS_KEYS, Kind


class PlanError(ValueError):
    """The wanted list can't be used; the message names the entry."""


@dataclass(frozen=True)
class Wanted:
    name: str
    items: tuple[tuple[str, Kind], ...]
    labels: Mapping[str, str]
    dns_names: tuple[str, ...] = ()
    """A TLS Secret's serving certificate names; empty for every other Secret."""

    @property
    def tls(self) -> bool:
        return bool(self.dns_names)


def _kind(value: object, where: str) -> Kind:
    for kind in KINDS:
        if value == kind:
            return kind
    raise PlanError(f"{where}.kind: {value!r} is not one of {', '.join(KINDS)}")


def parse(text: str) -> list[Wanted]:
    """SUNK_KEYGEN_SECRETS (sunk.manifests.keygen.secrets_json) -> the Secrets to make: the JSON
    list, each entry read (`_wanted`), then no name twice."""
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as err:
        raise PlanError(f"not JSON: {err}") from None
    if not isinstance(raw, list):
        raise PlanError("expected a list of Secrets")
    out = [_wanted(entry, f"[{i}]") for i, entry in enumerate(raw)]
    names = [w.name for w in out]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise PlanError(f"Secrets named twice: {', '.join(dup)}")
    return out


def _wanted(entry: object, where: str) -> Wanted:
    """One entry: its name, its keys each with a kind, its labels."""
    if not isinstance(entry, dict) or not isinstance(entry.get("name"), str) or not entry["name"]:
        raise PlanError(f"{where}.name: missing")
    items = entry.get("items")
    if not isinstance(items, list) or not items:
        raise PlanError(f"{where}.items: expected a non-empty list")
    pairs = []
    for j, item in enumerate(items):
        if not isinstance(item, dict) or not isinstance(item.get("key"), str) or not item["key"]:
            raise PlanError(f"{where}.items[{j}].key: missing")
        pairs.append((item["key"], _kind(item.get("kind"), f"{where}.items[{j}]")))
    labels = entry.get("labels") or {}
    if not isinstance(labels, dict) or not all(isinstance(v, str) for v in labels.values()):
        raise PlanError(f"{where}.labels: expected a map of strings")
    return Wanted(entry["name"], tuple(pairs), dict(labels), _dns_names(entry, pairs, where))


def _dns_names(entry: dict[str, object], pairs: list[tuple[str, Kind]], where: str) -> tuple[str, ...]:
    """A TLS Secret's names; it has exactly the TLS_KEYS, each of kind tls. Empty for the others."""
    names = entry.get("dnsNames") or []
    if not isinstance(names, list) or not all(isinstance(n, str) and n for n in names):
        raise PlanError(f"{where}.dnsNames: expected a list of names")
    tls = [key for key, kind in pairs if kind == "tls"]
    if (tls or names) and (tuple(key for key, _ in pairs) != TLS_KEYS or len(tls) != len(pairs) or not names):
        raise PlanError(f"{where}: a TLS Secret has exactly the keys {', '.join(TLS_KEYS)}, of kind tls, and dnsNames")
    return tuple(names)


def secret_body(wanted: Wanted, namespace: str, values: Mapping[str, bytes]) -> dict[str, object]:
    """The Secret to create: every key of `wanted` from `values` (KeyError: one is missing)."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/tls" if wanted.tls else "Opaque",
        "metadata": {"name": wanted.name, "namespace": namespace, "labels": dict(wanted.labels)},
        "data": {key: base64.b64encode(values[key]).decode() for key, _ in wanted.items},
    }


RENEW_FRACTION = 1 / 3
"""A serving certificate is renewed once less than a third of its life is left (cert-manager's
default): with a daily run, a month of runs for a 90-day certificate before it ends."""


def renewal_due(not_before: float, not_after: float, now: float) -> bool:
    """Whether a certificate valid from `not_before` to `not_after` is renewed at `now`."""
    return now >= not_after - (not_after - not_before) * RENEW_FRACTION


def renewed_body(current: Mapping[str, object], values: Mapping[str, bytes]) -> dict[str, object]:
    """The Secret `current` (as read) with the renewed keys of `values`; its other keys, labels and
    resourceVersion kept, so the replace fails (409) if anyone changed it meanwhile."""
    meta = current.get("metadata") or {}
    assert isinstance(meta, Mapping)
    data = dict(current.get("data") or {})  # type: ignore[call-overload]
    data.update({key: base64.b64encode(value).decode() for key, value in values.items()})
    kept = {k: meta[k] for k in ("name", "namespace", "labels", "annotations", "resourceVersion") if k in meta}
    return {"apiVersion": "v1", "kind": "Secret", "type": current.get("type", "Opaque"), "metadata": kept, "data": data}
