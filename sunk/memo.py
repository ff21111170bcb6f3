"""A value computed once per frozen object and handed to every consumer of that object.

The Slurm files of a spec are the case: slurm.conf, the ConfigMaps, each role's projection, each
NodeSet's files and its hash, and the pod gate all read them. Rendered by each consumer, a stack of
N NodeSets rendered them about 5N times, each render itself growing with N: `sunk validate` was
quadratic (63 s at 1,000 NodeSets). The public functions (`config_maps(spec)`,
`nodeset_resource(spec, ns, refs)`, the components) take the spec alone, so the value is kept
beside the spec rather than threaded through every signature: keyed by the object's identity
(never its value: hashing a spec by value costs what rendering does) and dropped when the object
is, so a changed spec (`model_copy`, `late`) is a new object and renders afresh."""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class PerObject(Generic[K, V]):
    """`compute(obj)`, once per live object `obj` (which must accept weak references)."""

    def __init__(self, compute: Callable[[K], V]) -> None:
        self._compute = compute
        self._values: dict[int, tuple[weakref.ref[K], V]] = {}

    def __call__(self, obj: K) -> V:
        key = id(obj)
        entry = self._values.get(key)
        if entry is not None and entry[0]() is obj:
            return entry[1]
        value = self._compute(obj)
        self._values[key] = (weakref.ref(obj, self._forget(key)), value)
        return value

    def _forget(self, key: int) -> Callable[[weakref.ref[K]], None]:
        def forget(ref: weakref.ref[K]) -> None:
            entry = self._values.get(key)
            if entry is not None and entry[0] is ref:
                del self._values[key]

        return forget

    def __len__(self) -> int:
        """How many objects hold a value now (for tests)."""
        return len(self._values)
