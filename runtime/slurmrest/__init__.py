"""Typed client of slurmrestd (data_parser v0.0.45 on Slurm 26.05, v0.0.42 on 24.11, found from
the server: versions.py), shared by the syncer, the operator and the scheduler.

    from sunk.runtime.slurmrest import SlurmRestClient, JwtMinter
    client = SlurmRestClient(url, user="slurm", token=JwtMinter.from_file(key_path, "slurm"))
    for node in client.list_nodes(): ...

The data types (models, podref, errors, cache, auth) import no HTTP library, so pure modules
(the controllers' plans and models) can use them; the client, which needs urllib3 and httpx, is imported
only when it is asked for.
"""

from typing import TYPE_CHECKING, Any

from .auth import JwtMinter, StaticToken, TokenProvider, mint_hs256
from .cache import NodeCache, NodeDiff
from .errors import (
    INVALID_JOB_ID,
    INVALID_NODE_NAME,
    NODES_BUSY,
    SlurmApiError,
    SlurmError,
    SlurmRestError,
    SlurmUnavailable,
)
from .models import BASE_STATES, DbJob, Diag, Job, JobSubmit, Node, Partition, Ping, Reservation, no_val
from .podref import PodRef, read_pod_ref, write_pod_ref
from .versions import NoCommonVersion

if TYPE_CHECKING:
    from .client import SlurmRestClient


def __getattr__(name: str) -> Any:
    if name == "SlurmRestClient":
        from .client import SlurmRestClient

        return SlurmRestClient
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "BASE_STATES",
    "INVALID_JOB_ID",
    "INVALID_NODE_NAME",
    "NODES_BUSY",
    "DbJob",
    "Diag",
    "Job",
    "JobSubmit",
    "JwtMinter",
    "NoCommonVersion",
    "Node",
    "NodeCache",
    "NodeDiff",
    "Partition",
    "Ping",
    "PodRef",
    "Reservation",
    "SlurmApiError",
    "SlurmError",
    "SlurmRestClient",
    "SlurmRestError",
    "SlurmUnavailable",
    "StaticToken",
    "TokenProvider",
    "mint_hs256",
    "no_val",
    "read_pod_ref",
    "write_pod_ref",
]
