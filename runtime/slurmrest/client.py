"""SlurmRestClient: a small synchronous client of slurmrestd's API, in the newest data_parser
version both it and the server speak (runtime/slurmrest/versions.py: v0.0.45 on Slurm 26.05,
v0.0.42 on 24.11), found from the server's GET /openapi/v3 on first use.

Every reply goes through `_check`: Slurm errors become SlurmApiError (never retried, the same
request would fail the same way), transport failures, 502-504 and "slurmctld unreachable" are
retried with bounded exponential backoff and end as SlurmUnavailable."""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

import httpx
import msgspec
from pydantic import BaseModel, TypeAdapter

from .auth import TokenProvider
from .errors import CONTROLLER_UNREACHABLE, INVALID_NODE_NAME, SlurmApiError, SlurmError, SlurmUnavailable
from .models import DbJob, Diag, Job, JobSubmit, Node, Partition, Ping, Reservation
from .nodestate import NodeState, NodeStates, decode_node_states
from .versions import Discovered, choose, fallback, served_versions
from .wire import HttpxWire, Lost, NotSent, Urllib3Wire, Wire

T = TypeVar("T", bound=BaseModel)

_RETRY_STATUS = frozenset({502, 503, 504})
REDISCOVER = 30.0
"""Seconds a client that could not read the server's OpenAPI document keeps fallback() before asking
again (slurmrestd restarting, say): not once per request."""


def _release(payload: Mapping[str, Any]) -> str | None:
    """`meta.slurm.version` of a reply as a release (`26.05`), or None where it has none."""
    meta = payload.get("meta")
    slurm = meta.get("slurm") if isinstance(meta, dict) else None
    version = slurm.get("version") if isinstance(slurm, dict) else None
    if not isinstance(version, dict):
        return None
    try:
        return f"{int(version['major'])}.{int(version['minor']):02d}"
    except (KeyError, TypeError, ValueError):
        return None


def _errors(payload: Any) -> list[SlurmError]:
    if not isinstance(payload, dict):
        return []
    out = []
    for item in payload.get("errors") or []:
        if isinstance(item, dict):
            out.append(
                SlurmError(
                    code=int(item.get("error_number") or 0),
                    description=str(item.get("description") or item.get("error") or ""),
                    source=str(item.get("source") or ""),
                    message=str(item.get("error") or ""),
                )
            )
    return out


@functools.cache
def _adapter(model: type[T]) -> TypeAdapter[list[T]]:
    """Built once per model: a TypeAdapter costs more to make than to validate a short list."""
    return TypeAdapter(list[model])  # type: ignore[valid-type]


class _Transient(Exception):
    """Internal: this attempt failed in a way worth retrying."""


class SlurmRestClient:
    """Talks to one slurmrestd. Not thread-safe (one connection pool, runtime/slurmrest/wire.py);
    make one per thread.

    `requests` counts HTTP attempts (retries included), for metrics and benchmarks."""

    def __init__(
        self,
        base_url: str,
        *,
        user: str,
        token: TokenProvider,
        timeout: float = 10.0,
        retries: int = 3,
        backoff: float = 0.2,
        max_backoff: float = 2.0,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
        api: str | None = None,
        discovered: Discovered | None = None,
    ) -> None:
        """`api`: the data_parser version to use (`v0.0.42`); default: found from the server, or
        taken from `discovered` where another client of the same server found it (and written
        there once found)."""
        # Bounded on purpose: a controller's cycle must end; the next cycle is the real retry.
        self.retries = retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.user = user
        self._token = token
        self._sleep = sleep
        self.requests = 0
        self.release: str | None = None
        """The Slurm release (`26.05`) of the slurmrestd that gave the last Slurm reply, from its
        `meta.slurm.version`; None before one. A slurmrestd can't read a slurmctld of an older
        release (Slurm serves older clients only), so a read answered at R means slurmctld runs R
        or later."""
        self._api = api
        self._pinned = api is not None
        self._fallback_until = 0.0
        self._discovered = discovered
        self._http: Wire = (
            Urllib3Wire(base_url, timeout=timeout)
            if transport is None
            else HttpxWire(base_url, timeout=timeout, transport=transport)
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> SlurmRestClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- plumbing -----------------------------------------------------------------------------

    @property
    def api(self) -> str:
        """The data_parser version in use, read from GET /openapi/v3 the first time it is needed.
        A server that serves no version this client speaks is an error naming both (NoCommonVersion);
        one whose document can't be read gets fallback(), the newest version every supported release serves,
        and the document is asked for again after REDISCOVER seconds."""
        if self._api is None and self._discovered is not None and self._discovered.api is not None:
            self._api = self._discovered.api
        if self._api is None:
            if time.monotonic() < self._fallback_until:
                return fallback()
            try:
                reply = self._http.request(
                    "GET",
                    "/openapi/v3",
                    headers={"X-SLURM-USER-NAME": self.user, "X-SLURM-USER-TOKEN": self._token.token()},
                )
                document = json.loads(reply.content) if reply.status_code == 200 else None
            except (NotSent, Lost, ValueError):
                document = None
            if not isinstance(document, dict):
                self._fallback_until = time.monotonic() + REDISCOVER
                return fallback()
            self._api = choose(served_versions(document))
            if self._discovered is not None:
                self._discovered.api = self._api
        return self._api

    @property
    def _slurm(self) -> str:
        return f"/slurm/{self.api}"

    @property
    def _slurmdb(self) -> str:
        return f"/slurmdb/{self.api}"

    def _once(
        self,
        method: str,
        path: str,
        params: Mapping[str, Any] | None,
        body: Any,
        fast: Callable[[bytes], Any] | None = None,
    ) -> Any:
        """One request. With `fast`, a 200 reply is first decoded by it (a typed msgspec decoder);
        whatever it returns is the answer unless it reports errors, in which case (or if it can't
        decode the reply) the reply goes through the ordinary checks below."""
        headers = {"X-SLURM-USER-NAME": self.user, "X-SLURM-USER-TOKEN": self._token.token()}
        self.requests += 1
        reply = self._http.request(method, path, params=params, json=body, headers=headers)
        if fast is not None and reply.status_code == 200:
            try:
                decoded = fast(reply.content)
            except (msgspec.DecodeError, msgspec.ValidationError):
                decoded = None
            if decoded is not None and not getattr(decoded, "errors", None):
                return decoded
        try:
            payload = json.loads(reply.content)
        except ValueError:
            payload = None
        errors = _errors(payload)
        if any(e.code in CONTROLLER_UNREACHABLE for e in errors):
            raise _Transient(f"slurmctld unreachable: {errors[0].description}")
        if reply.status_code in _RETRY_STATUS:
            raise _Transient(f"HTTP {reply.status_code}")
        if errors:
            raise SlurmApiError(method, path, reply.status_code, errors)
        if reply.status_code >= 400 or not isinstance(payload, dict):
            if reply.status_code >= 500 and payload is None:
                # No Slurm payload at all: slurmrestd died mid-reply or a proxy answered.
                raise _Transient(f"HTTP {reply.status_code} without a Slurm reply")
            raise SlurmApiError(method, path, reply.status_code, [SlurmError(0, reply.text[:200])])
        self.release = _release(payload) or self.release
        return payload

    def call(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        body: Any = None,
        idempotent: bool = True,
    ) -> dict[str, Any]:
        """One request with retries. A non-idempotent request (job submit) is retried only when
        it surely never reached slurmrestd (connect failures), so a job is never submitted twice."""
        payload: dict[str, Any] = self._call(method, path, params=params, body=body, idempotent=idempotent)
        return payload

    def _call(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        body: Any = None,
        idempotent: bool = True,
        fast: Callable[[bytes], Any] | None = None,
    ) -> Any:
        try:
            return self._attempts(method, path, params, body, idempotent, fast)
        except SlurmApiError as err:
            moved = self._renegotiated(path, err)
            if moved is None:
                raise
            # The server no longer serves the version this client chose (a slurmrestd of an earlier
            # release after a set-back, or of a later one): it found no handler, so nothing ran,
            # and the request is sent again, once, in the version the server serves now.
            return self._attempts(method, moved, params, body, idempotent, fast)

    def _renegotiated(self, path: str, err: SlurmApiError) -> str | None:
        """`path` in the version the server's document names now, when `err` is the 404 of a
        version it no longer serves and the version was found from the server (not given); else None."""
        used = self._api
        # A 404 naming a job or node Slurm doesn't have is an answer, not a missing handler.
        if err.status != 404 or err.not_found or self._pinned or used is None:
            return None
        prefix = next((p for p in (f"/slurm/{used}/", f"/slurmdb/{used}/") if path.startswith(p)), None)
        if prefix is None:
            return None
        self._api = None
        if self._discovered is not None and self._discovered.api == used:
            self._discovered.api = None  # stale for every client of this server
        if self.api == used:
            return None
        return prefix.replace(used, self.api) + path[len(prefix) :]

    def _attempts(
        self,
        method: str,
        path: str,
        params: Mapping[str, Any] | None,
        body: Any,
        idempotent: bool,
        fast: Callable[[bytes], Any] | None,
    ) -> Any:
        last = ""
        for attempt in range(self.retries + 1):
            if attempt:
                self._sleep(min(self.max_backoff, self.backoff * 2 ** (attempt - 1)))
            try:
                return self._once(method, path, params, body, fast)
            except NotSent as exc:
                last = str(exc)
            except Lost as exc:
                last = str(exc)
                if not idempotent:
                    break
            except _Transient as exc:
                last = str(exc)
                if not idempotent:
                    break
        raise SlurmUnavailable(method, path, last)

    @staticmethod
    def _items(payload: dict[str, Any], key: str, model: type[T], path: str = "") -> list[T]:
        """The reply's `key` list. A reply without it (`200 {}`, `"nodes": null`: a proxy, a
        truncated or foreign answer) is not an empty list: acting on "no nodes" would let a
        controller delete busy slurmd pods. It raises SlurmUnavailable, so callers fail closed."""
        items = payload.get(key)
        if not isinstance(items, list):
            raise SlurmUnavailable("GET", path, f"the reply has no {key!r} list ({type(items).__name__})")
        return _adapter(model).validate_python(items)

    # --- calls ------------------------------------------------------------------------------

    def ping(self) -> list[Ping]:
        """slurmctld's answer to GET /ping; raises SlurmUnavailable when no controller responds."""
        pings = self._items(self.call("GET", f"{self._slurm}/ping/"), "pings", Ping, f"{self._slurm}/ping/")
        if not any(p.responding for p in pings):
            raise SlurmUnavailable("GET", f"{self._slurm}/ping/", "no slurmctld responding")
        return pings

    def list_nodes(self, *, future: bool = False) -> list[Node]:
        """All nodes in one call. FUTURE nodes are only listed when asked (`?flags=FUTURE`)."""
        params = {"flags": "FUTURE"} if future else None
        return self._items(
            self.call("GET", f"{self._slurm}/nodes/", params=params), "nodes", Node, f"{self._slurm}/nodes/"
        )

    def list_reservations(self) -> list[Reservation]:
        """Every reservation slurmctld holds, in one call."""
        path = f"{self._slurm}/reservations/"
        return self._items(self.call("GET", path), "reservations", Reservation, path)

    def node_states(self, *, future: bool = False) -> list[NodeState]:
        """All nodes, only the fields the syncer reads, decoded by msgspec from the reply's bytes
        (runtime/slurmrest/nodestate.py says why). Errors and replies without a `nodes` list are
        handled as in `list_nodes`: raised, never read as "no nodes"."""
        path = f"{self._slurm}/nodes/"
        reply = self._call("GET", path, params={"flags": "FUTURE"} if future else None, fast=decode_node_states)
        if isinstance(reply, NodeStates):
            if reply.nodes is None:
                raise SlurmUnavailable("GET", path, "the reply has no 'nodes' list")
            return reply.nodes
        # The fast decoder could not read it (or it had no `nodes`): the ordinary path says why.
        return [NodeState(n.name, n.state, n.reason, n.extra) for n in self._items(reply, "nodes", Node, path)]

    def get_node(self, name: str) -> Node:
        """One node (FUTURE ones included). slurmrestd 24.11 reports an unknown name as HTTP 200
        with an error numbered 0 ("Failure to query node"); that is raised as 2018 here. Any other
        error numbered 0 (a 401 from a proxy, an HTML page) stays an error, never "not found"."""
        path = f"{self._slurm}/node/{name}"
        try:
            nodes = self._items(self.call("GET", path, params={"flags": "FUTURE"}), "nodes", Node, path)
        except SlurmApiError as exc:
            if not (exc.code == 0 and exc.status == 200 and "Failure to query node" in exc.description):
                raise
            nodes = []
        if not nodes:
            raise SlurmApiError("GET", path, 200, [SlurmError(INVALID_NODE_NAME, f"Invalid node name {name}")])
        return nodes[0]

    @staticmethod
    def _node_body(
        state: str | Iterable[str] | None,
        reason: str | None,
        comment: str | None,
        extra: str | None,
        features: Iterable[str] | None,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {}
        if state is not None:
            body["state"] = [state] if isinstance(state, str) else list(state)
        if reason is not None:
            body["reason"] = reason
        if comment is not None:
            body["comment"] = comment
        if extra is not None:
            body["extra"] = extra
        if features is not None:
            body["features"] = list(features)
        if not body:
            raise ValueError("a node update needs at least one field")
        return body

    def update_node(
        self,
        name: str,
        *,
        state: str | Iterable[str] | None = None,
        reason: str | None = None,
        comment: str | None = None,
        extra: str | None = None,
        features: Iterable[str] | None = None,
    ) -> None:
        """POST /node/{name}. Drain: state="DRAIN" with a reason; resume: state="RESUME"."""
        body = self._node_body(state, reason, comment, extra, features)
        self.call("POST", f"{self._slurm}/node/{name}", body=body)

    def update_nodes(
        self,
        names: Iterable[str],
        *,
        state: str | Iterable[str] | None = None,
        reason: str | None = None,
        comment: str | None = None,
        extra: str | None = None,
        features: Iterable[str] | None = None,
    ) -> None:
        """POST /nodes/: the same update for many nodes in one request."""
        body = self._node_body(state, reason, comment, extra, features)
        body["name"] = sorted(set(names))
        if not body["name"]:
            return
        self.call("POST", f"{self._slurm}/nodes/", body=body)

    def delete_node(self, name: str) -> None:
        """DELETE /node/{name}; Slurm answers "busy" (2016) until the node is DOWN."""
        self.call("DELETE", f"{self._slurm}/node/{name}")

    def submit_job(self, job: JobSubmit) -> int:
        payload = self.call("POST", f"{self._slurm}/job/submit", body=job.body(), idempotent=False)
        return int(payload["job_id"])

    def allocate_job(self, job: JobSubmit, *, node: str | None = None) -> int:
        """POST /job/allocate with `immediate`: an allocation without a batch step (what
        `salloc --no-shell --immediate` makes), granted in the request or refused at once.
        slurmctld tries it at submission, where a batch job waits for its once-a-second pass;
        refused (SlurmApiError, e.g. 2016 when the nodes are busy or a job of higher priority waits)
        when it can't start now. Without `immediate` slurmrestd 24.11 blocks until it starts.
        With `node`, on that node only (`required_nodes`, as `salloc --nodelist`)."""
        body = job.body()
        body["job"].pop("script", None)
        body["job"]["immediate"] = True
        if node is not None:
            body["job"]["required_nodes"] = [node]
        payload = self.call("POST", f"{self._slurm}/job/allocate", body=body, idempotent=False)
        return int(payload["job_id"])

    def get_job(self, job_id: int) -> Job:
        jobs = self._items(self.call("GET", f"{self._slurm}/job/{job_id}"), "jobs", Job, f"{self._slurm}/job/{job_id}")
        if not jobs:
            raise SlurmApiError("GET", f"{self._slurm}/job/{job_id}", 200, [SlurmError(2017, "no such job")])
        return jobs[0]

    def list_jobs(self) -> list[Job]:
        return self._items(self.call("GET", f"{self._slurm}/jobs/"), "jobs", Job, f"{self._slurm}/jobs/")

    def cancel_job(self, job_id: int, *, signal: str | None = None) -> None:
        """DELETE /job/{id}. slurmrestd answers 200 even for an unknown job and reports the
        failure per job under `status[]`, so that list is checked too."""
        path = f"{self._slurm}/job/{job_id}"
        payload = self.call("DELETE", path, params={"signal": signal} if signal else None)
        for item in payload.get("status") or []:
            error = item.get("error") if isinstance(item, dict) else None
            if isinstance(error, dict) and int(error.get("code") or 0):
                raise SlurmApiError(
                    "DELETE",
                    path,
                    200,
                    [SlurmError(int(error["code"]), str(error.get("message") or error.get("string") or ""))],
                )

    def list_job_states(self) -> list[dict[str, Any]]:
        """GET /jobs/state/: every job's id and state only (cheap; raw dicts, as the scheduler
        reads them at every cycle)."""
        return list(self.call("GET", f"{self._slurm}/jobs/state/").get("jobs") or [])

    def list_jobs_raw(self) -> list[dict[str, Any]]:
        """GET /jobs/ as raw dicts (no model validation: the scheduler reads a few fields of many)."""
        return list(self.call("GET", f"{self._slurm}/jobs/").get("jobs") or [])

    def get_job_raw(self, job_id: int) -> list[dict[str, Any]]:
        """GET /job/{id} as raw dicts; raises SlurmApiError (not_found) for an unknown job."""
        return list(self.call("GET", f"{self._slurm}/job/{job_id}").get("jobs") or [])

    def cancel_jobs(self, job_ids: Iterable[int], *, ignore: Iterable[int] = ()) -> None:
        """DELETE /jobs/ for several jobs in one request. slurmrestd answers 200 and reports each
        job's failure under `status[]`: any code but those in `ignore` raises SlurmApiError."""
        path = f"{self._slurm}/jobs/"
        reply = self.call("DELETE", path, body={"jobs": [str(i) for i in job_ids]})
        skip = set(ignore)
        for item in reply.get("status") or []:
            error = (item or {}).get("error") or {}
            code = int(error.get("code") or 0)
            if code and code not in skip:
                why = str(error.get("message") or error.get("string") or "")
                raise SlurmApiError("DELETE", path, 200, [SlurmError(code, why)])

    def list_partitions(self) -> list[Partition]:
        """GET /partitions/: every partition, with its state and configured nodes."""
        path = f"{self._slurm}/partitions/"
        return self._items(self.call("GET", path), "partitions", Partition, path)

    def diag(self) -> Diag:
        """GET /diag/: slurmctld's scheduler statistics (what `sdiag` prints). A reply without
        `statistics` raises SlurmUnavailable, as a missing list does."""
        path = f"{self._slurm}/diag/"
        stats = self.call("GET", path).get("statistics")
        if not isinstance(stats, dict):
            raise SlurmUnavailable("GET", path, f"the reply has no 'statistics' object ({type(stats).__name__})")
        return Diag.model_validate(stats)

    def reconfigure(self) -> None:
        """GET /reconfigure/: slurmctld and every slurmd re-read their configuration."""
        self.call("GET", f"{self._slurm}/reconfigure/")

    def db_jobs(self, **filters: str | int) -> list[DbJob]:
        """GET /slurmdb/jobs with sacct-style filters, e.g. `job_name="x", start_time="now-1hour"`.
        A `state` filter needs a time window (start_time/end_time), as with sacct."""
        params = {key: str(value) for key, value in filters.items()}
        return self._items(
            self.call("GET", f"{self._slurmdb}/jobs/", params=params), "jobs", DbJob, f"{self._slurmdb}/jobs/"
        )
