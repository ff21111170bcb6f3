"""Deprecated module, kept for one release: slurmctld's component is `Controller`, in
sunk.components.controller (import it from sunk.api)."""

from __future__ import annotations

import warnings
from typing import Any


def __getattr__(name: str) -> Any:
    if name != "ControlPlane":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    warnings.warn(
        "sunk.components.controlplane.ControlPlane is deprecated: use sunk.components.Controller",
        DeprecationWarning,
        stacklevel=2,
    )
    from .controller import Controller

    return Controller
