"""The client's HTTP exchange on urllib3 (runtime/slurmrest/wire.py), against real sockets: what
goes out, and which failures the client sends again. The happy path against real slurmrestd is
every test under tests/slurm/ and tests/runtime/slurmrest/test_real_slurm.py; these are the
failures a real slurmrestd can't be made to show on demand (a refused connection, one that breaks
after the request, a keep-alive connection the server closed while idle)."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress

import pytest
from sunk.runtime.slurmrest import SlurmRestClient, SlurmUnavailable
from sunk.runtime.slurmrest.auth import StaticToken
from sunk.runtime.slurmrest.models import JobSubmit
from sunk.runtime.slurmrest.wire import Lost, NotSent, Urllib3Wire

OK = b'{"jobs": [], "job_id": 7, "errors": [], "warnings": []}'


def _read_request(conn: socket.socket) -> bytes:
    """One HTTP/1.1 request, headers and Content-Length body; b"" when the client closed."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return b""
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        (int(line.split(b":", 1)[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")), 0
    )
    while len(body) < length:
        body += conn.recv(65536)
    return head + b"\r\n\r\n" + body


def _reply(body: bytes = OK, status: str = "200 OK") -> bytes:
    return f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body


@contextmanager
def server(serve: Callable[[socket.socket, list[bytes]], None]) -> Iterator[tuple[str, list[bytes], list[int]]]:
    """A listening socket on 127.0.0.1; `serve` handles each accepted connection with the list of
    requests seen so far. Yields the base URL, that list and the connection count."""
    listener = socket.create_server(("127.0.0.1", 0))
    seen: list[bytes] = []
    connections = [0]
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            connections[0] += 1
            threading.Thread(target=_guard, args=(serve, conn, seen), daemon=True).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}", seen, connections
    finally:
        stop.set()
        thread.join()
        listener.close()


def _guard(serve: Callable[[socket.socket, list[bytes]], None], conn: socket.socket, seen: list[bytes]) -> None:
    with conn, suppress(OSError):
        serve(conn, seen)


def keep_alive(conn: socket.socket, seen: list[bytes]) -> None:
    while request := _read_request(conn):
        seen.append(request)
        conn.sendall(_reply())


def one_per_connection(conn: socket.socket, seen: list[bytes]) -> None:
    """Answers one request, then closes the connection without saying so (an idle timeout)."""
    if request := _read_request(conn):
        seen.append(request)
        conn.sendall(_reply())


def breaks_after_request(conn: socket.socket, seen: list[bytes]) -> None:
    """Reads the request, then drops the connection without a reply (slurmrestd killed mid-request)."""
    if request := _read_request(conn):
        seen.append(request)


def client(url: str, sleeps: list[float] | None = None, retries: int = 2) -> SlurmRestClient:
    return SlurmRestClient(
        url,
        user="slurm",
        token=StaticToken("tok"),
        retries=retries,
        sleep=(sleeps if sleeps is not None else []).append,
        api="v0.0.45",
        timeout=5.0,
    )


def test_the_request_goes_out_as_slurmrestd_reads_it_and_the_connection_is_kept() -> None:
    with server(keep_alive) as (url, seen, connections):
        rest = client(url + "/")
        assert rest.submit_job(JobSubmit(script="#!/bin/sh\ntrue\n")) == 7
        rest.call("GET", "/slurm/v0.0.45/nodes/", params={"flags": "FUTURE", "update_time": 5})
        rest.close()
    head, _, body = seen[0].partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    headers = {k.lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:])}
    assert lines[0] == "POST /slurm/v0.0.45/job/submit HTTP/1.1"
    assert headers["x-slurm-user-name"] == "slurm" and headers["x-slurm-user-token"] == "tok"
    assert headers["content-type"] == "application/json"
    assert json.loads(body)["job"]["script"] == "#!/bin/sh\ntrue\n"
    assert seen[1].split(b"\r\n")[0] == b"GET /slurm/v0.0.45/nodes/?flags=FUTURE&update_time=5 HTTP/1.1"
    assert b"content-length" not in seen[1].lower()  # no body on a GET
    assert connections[0] == 1  # both on one connection


def test_a_connection_the_server_closed_while_idle_is_replaced_before_a_submit_goes_out() -> None:
    # A submit is sent once or not at all: over a connection the server already closed it would
    # be lost, and the client would not send it again. The pool sees the close first and connects anew.
    with server(one_per_connection) as (url, seen, connections):
        rest = client(url)
        assert rest.submit_job(JobSubmit(script="#!/bin/sh\ntrue\n")) == 7
        time.sleep(0.2)  # the server's FIN arrives
        assert rest.submit_job(JobSubmit(script="#!/bin/sh\ntrue\n")) == 7
        rest.close()
    assert len(seen) == 2 and connections[0] == 2


def test_a_refused_connection_is_retried_even_for_a_submit_and_ends_as_unavailable() -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{listener.getsockname()[1]}"
    listener.close()  # nothing listens there now
    sleeps: list[float] = []
    rest = client(url, sleeps)
    with pytest.raises(SlurmUnavailable) as err:
        rest.submit_job(JobSubmit(script="#!/bin/sh\ntrue\n"))
    assert rest.requests == 3 and len(sleeps) == 2  # never sent, so safe to send again
    assert "NewConnectionError" in str(err.value)
    with pytest.raises(NotSent):
        Urllib3Wire(url, timeout=1.0).request("GET", "/")


def test_a_connection_broken_after_the_request_repeats_a_read_but_never_a_submit() -> None:
    with server(breaks_after_request) as (url, seen, _):
        sleeps: list[float] = []
        rest = client(url, sleeps)
        with pytest.raises(SlurmUnavailable):
            rest.submit_job(JobSubmit(script="#!/bin/sh\ntrue\n"))
        assert len(seen) == 1 and sleeps == []  # it may have run: not sent again
        seen.clear()
        with pytest.raises(SlurmUnavailable):
            rest.list_job_states()
        assert len(seen) == 3 and len(sleeps) == 2  # a read is sent again
        with pytest.raises(Lost):
            Urllib3Wire(url, timeout=1.0).request("GET", "/x")


def test_a_reply_that_is_not_json_is_an_error_naming_its_start() -> None:
    def html(conn: socket.socket, seen: list[bytes]) -> None:
        while request := _read_request(conn):
            seen.append(request)
            conn.sendall(_reply(b"<html>proxy says no</html>", "403 Forbidden"))

    with server(html) as (url, _, _):
        rest = client(url)
        with pytest.raises(Exception) as err:
            rest.list_job_states()
        rest.close()
    assert "403" in str(err.value) and "<html>proxy says no</html>" in str(err.value)
