"""The one split every controller's loop makes of a failure: retriable (the server was
unreachable, busy or restarting: nothing is concluded, the next cycle tries again) or permanent
(the server answered and refused: the request as made will not succeed, so it is reported and not
repeated unchanged). The clients' errors derive from one or the other."""

from __future__ import annotations


class RetriableError(Exception):
    """No usable answer: connection refused, timeout, 5xx, or a backend unreachable behind the
    server. Conclude nothing from it (fail closed) and retry next cycle."""


class PermanentError(Exception):
    """The server answered and refused this request (bad input, unknown object, denied)."""
