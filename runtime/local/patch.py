"""The three patch types the API server accepts on a write, applied to a stored object (pure).

- JSON merge patch (RFC 7386, `application/merge-patch+json`): maps merge, null deletes, lists
  are replaced. kubectl uses it for custom resources.
- Strategic merge patch (`application/strategic-merge-patch+json`): kubectl's client-side apply,
  cordon, label and scale use it on built-in kinds. Lists the Kubernetes types declare with a
  patch merge key (containers by name, volumeMounts by mountPath, ...) merge element by element;
  the directives kubectl sends are honoured: `$patch` (replace, delete, merge), `$retainKeys`,
  `$setElementOrder/<list>` and `$deleteFromPrimitiveList/<list>`.
- JSON patch (RFC 6902, `application/json-patch+json`).

Not modelled: server-side apply's field ownership (apply patches are refused with 415 so kubectl
says so), and a merge key that depends on the Go type rather than the field's name: `ports`
merges by containerPort where the elements have one (a Container's) and by port otherwise (a
Service's), which is what the Kubernetes types declare for the two lists sunk renders.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any


class PatchError(ValueError):
    """A patch that does not apply (the API server answers 422 or 400)."""


MERGE_KEYS: dict[str, str] = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "conditions": "type",
    "ownerReferences": "uid",
    "imagePullSecrets": "name",
    "hostAliases": "ip",
    "topologySpreadConstraints": "topologyKey",
    "resourceClaims": "name",
    "addresses": "type",
}
"""Lists the Kubernetes types mark `patchStrategy: merge`, by field name, with their merge key."""
MERGED_PRIMITIVE_LISTS = frozenset({"finalizers"})
"""Lists of scalars whose patch strategy is merge (a union) rather than replace."""


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


def _list_key(field: str, items: list[Any]) -> str | None:
    if field == "ports":
        return "containerPort" if any(isinstance(i, dict) and "containerPort" in i for i in items) else "port"
    return MERGE_KEYS.get(field)


def strategic_merge(original: Any, patch: Any) -> Any:
    """Apply a strategic merge patch to `original` (neither is changed): the patch's own
    directives first ($patch, $retainKeys), then each key merged or a list directive applied,
    then the lists reordered as $setElementOrder asks."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if not isinstance(original, dict):
        original = {}
    directive = patch.get("$patch")
    if directive == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    if directive == "delete":
        return None
    out = copy.deepcopy(original)
    retain = patch.get("$retainKeys")
    if isinstance(retain, list):
        for key in list(out):
            if key not in retain and key not in patch:
                del out[key]
    orders: dict[str, list[Any]] = {}
    for key, value in patch.items():
        if not _list_directive(out, orders, key, value):
            _merge_key(out, key, value)
    for field, order in orders.items():
        if isinstance(out.get(field), list):
            out[field] = _ordered(field, out[field], order)
    return out


def _list_directive(out: dict[str, Any], orders: dict[str, list[Any]], key: str, value: Any) -> bool:
    """True when `key` is a directive, not a field: $patch and $retainKeys (done already),
    $setElementOrder/FIELD (kept in `orders` for the end) and $deleteFromPrimitiveList/FIELD
    (applied to `out` now)."""
    if key in ("$patch", "$retainKeys"):
        return True
    if key.startswith("$setElementOrder/"):
        orders[key.partition("/")[2]] = value
        return True
    if key.startswith("$deleteFromPrimitiveList/"):
        field = key.partition("/")[2]
        if isinstance(out.get(field), list):
            out[field] = [v for v in out[field] if v not in value]
        return True
    return False


def _merge_key(out: dict[str, Any], key: str, value: Any) -> None:
    """One field of the patch into `out`: null deletes, lists merge, maps merge deeply."""
    if value is None:
        out.pop(key, None)
    elif isinstance(value, list):
        out[key] = _merge_list(key, out.get(key), value)
    elif isinstance(value, dict):
        merged = strategic_merge(out.get(key), value)
        if merged is None:
            out.pop(key, None)
        else:
            out[key] = merged
    else:
        out[key] = value


def _merge_list(field: str, original: Any, patch: list[Any]) -> list[Any]:
    """A list field: replaced whole by a $patch: replace element, merged as a set when it is one of
    the primitive lists Kubernetes merges, merged element by element on its patch merge key, or
    else replaced."""
    current = list(original) if isinstance(original, list) else []
    if any(isinstance(i, dict) and i.get("$patch") == "replace" for i in patch):
        return [copy.deepcopy(i) for i in patch if not (isinstance(i, dict) and i.get("$patch") == "replace")]
    if field in MERGED_PRIMITIVE_LISTS:
        return current + [v for v in patch if v not in current]
    key = _list_key(field, current + patch)
    if key is None or not all(isinstance(i, dict) for i in patch):
        return copy.deepcopy(patch)
    return _merge_by_key(field, key, current, patch)


def _merge_by_key(field: str, key: str, current: list[Any], patch: list[Any]) -> list[Any]:
    """Each map of the patch merged into the element with the same `key`, appended when there is
    none, or that element deleted ($patch: delete)."""
    for item in patch:
        if key not in item:
            raise PatchError(f"map in the {field} list has no {key!r} (its patch merge key)")
        index = next((n for n, c in enumerate(current) if isinstance(c, dict) and c.get(key) == item[key]), None)
        if item.get("$patch") == "delete":
            if index is not None:
                del current[index]
        elif index is None:
            current.append(strategic_merge({}, item))
        else:
            current[index] = strategic_merge(current[index], item)
    return current


def _ordered(field: str, items: list[Any], order: list[Any]) -> list[Any]:
    """Reorder merged elements as `$setElementOrder` lists them; the others keep their place after."""
    key = _list_key(field, items)

    def ident(item: Any) -> Any:
        return item.get(key) if key and isinstance(item, dict) else item

    wanted = [ident(o) for o in order]
    first = sorted((i for i in items if ident(i) in wanted), key=lambda i: wanted.index(ident(i)))
    return first + [i for i in items if ident(i) not in wanted]


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError(f"JSON patch path {path!r} does not start with /")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _parent(doc: Any, parts: list[str]) -> Any:
    for part in parts[:-1]:
        if isinstance(doc, list):
            doc = doc[int(part)]
        elif isinstance(doc, dict) and part in doc:
            doc = doc[part]
        else:
            raise PatchError(f"JSON patch path /{'/'.join(parts)}: {part} does not exist")
    return doc


def json_patch(target: Any, ops: Sequence[Mapping[str, Any]]) -> Any:
    """RFC 6902."""
    doc = copy.deepcopy(target)
    for op in ops:
        kind, parts = op.get("op"), _pointer(str(op.get("path", "")))
        if kind in ("move", "copy"):
            src = _pointer(str(op.get("from", "")))
            value = copy.deepcopy(_get(doc, src))
            if kind == "move":
                doc = _remove(doc, src)
            doc = _add(doc, parts, value)
        elif kind == "add":
            doc = _add(doc, parts, copy.deepcopy(op.get("value")))
        elif kind == "remove":
            doc = _remove(doc, parts)
        elif kind == "replace":
            doc = _add(_remove(doc, parts), parts, copy.deepcopy(op.get("value")))
        elif kind == "test":
            if _get(doc, parts) != op.get("value"):
                raise PatchError(f"JSON patch test failed at {op.get('path')}")
        else:
            raise PatchError(f"unknown JSON patch op {kind!r}")
    return doc


def _get(doc: Any, parts: list[str]) -> Any:
    for part in parts:
        try:
            doc = doc[int(part)] if isinstance(doc, list) else doc[part]
        except (KeyError, IndexError, ValueError, TypeError):
            raise PatchError(f"JSON patch path /{'/'.join(parts)} does not exist") from None
    return doc


def _add(doc: Any, parts: list[str], value: Any) -> Any:
    if not parts:
        return value
    parent, last = _parent(doc, parts), parts[-1]
    if isinstance(parent, list):
        parent.insert(len(parent) if last == "-" else int(last), value)
    elif isinstance(parent, dict):
        parent[last] = value
    else:
        raise PatchError(f"JSON patch path /{'/'.join(parts)}: parent is not a container")
    return doc


def _remove(doc: Any, parts: list[str]) -> Any:
    _get(doc, parts)
    parent, last = _parent(doc, parts), parts[-1]
    if isinstance(parent, list):
        del parent[int(last)]
    else:
        del parent[last]
    return doc
