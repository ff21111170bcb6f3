"""Which slurmrestd data_parser version the client uses: the newest one it speaks among those the
server serves, read from the server's own OpenAPI document (GET /openapi/v3). Pure.

Slurm 24.11 serves v0.0.40-v0.0.42, 26.05 v0.0.42-v0.0.45 (v0.0.42 deprecated there, removed in
26.11); both measured 2026-11. Every field the models read (runtime/slurmrest/models.py) is in v0.0.42 and
v0.0.45 with the same type: between them the node lost `power`, `external_sensors` and
`tres_weighted`, the job `power`, the ping `pinged` (for `status`), none of which is read, and
each gained fields that are not read (26.05's generated OpenAPI document, compared)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from sunk.images import release_of, shared_rest_api

SPOKEN = ("v0.0.45", "v0.0.42")
"""The versions the client speaks, newest first: each one proven on the real daemons of a
supported release (tests/runtime/slurmrest/test_real_slurm.py on 26.05 and 24.11). Which ones
a release serves is its row's (sunk.images.Release.rest_api)."""


def fallback() -> str:
    """What a client uses when it can't read the OpenAPI document: the newest version it speaks
    that every supported release serves (the releases' rows)."""
    return shared_rest_api(SPOKEN)


def preferred(release: str) -> str:
    """The version the client uses with a server of `release`: the newest it speaks that the
    release's row says its slurmrestd serves (what `choose` finds in that server's document)."""
    return choose(release_of(release).rest_api)


_PATH = re.compile(r"^/slurm(?:db)?/(v\d+\.\d+\.\d+)/")


class Discovered:
    """The version a client found in one server's document, for the next clients of that server
    to start from instead of reading the document again: a controller that makes a client per
    submitting thread paid ~65 ms of CPU (slurmrestd's and its own) per client for it, measured
    2026-12-07 on 26.05. Only a starting point: a client that meets a 404 of that version reads
    the document again, and clears what it finds stale here. One per slurmrestd address
    (connect.SlurmAccess holds it); an attribute write is atomic, so threads may share it."""

    def __init__(self) -> None:
        self.api: str | None = None


class NoCommonVersion(ValueError):
    """The server serves no data_parser version the client speaks."""


def served_versions(document: Mapping[str, Any]) -> list[str]:
    """The data_parser versions an OpenAPI document has paths for, newest first."""
    paths = document.get("paths")
    found = {m.group(1) for p in (paths if isinstance(paths, Mapping) else {}) if (m := _PATH.match(str(p)))}
    return sorted(found, key=_key, reverse=True)


def choose(served: Iterable[str], spoken: Iterable[str] = SPOKEN) -> str:
    """The newest version both sides have; NoCommonVersion naming both lists otherwise."""
    have = set(served)
    spoken = list(spoken)
    for version in sorted(spoken, key=_key, reverse=True):
        if version in have:
            return version
    raise NoCommonVersion(
        f"slurmrestd serves data_parser {', '.join(sorted(have, key=_key, reverse=True)) or 'nothing'}; "
        f"this sunk speaks {', '.join(spoken)}: run a Slurm release sunk supports"
    )


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.lstrip("v").split("."))
