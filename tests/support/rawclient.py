"""The official `kubernetes` client as the runtime tests use it: plain dicts in, raw JSON out.

Its generated methods annotate every body as a model (`body: V1Node`) and every reply as the model
it would decode, but the tests send dicts (serialized as they are, as OfficialKube relies on) and
read with `_preload_content=False`, which returns urllib3's response undecoded. These helpers say
so once, instead of at each call."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import urllib3


def as_body(obj: Mapping[str, Any]) -> Any:
    """`obj` as a request body: the client sends a dict as it is, in place of the model it names."""
    return obj


def http(reply: object) -> urllib3.BaseHTTPResponse:
    """The reply of a call made with `_preload_content=False`: urllib3's response, not a model."""
    assert isinstance(reply, urllib3.BaseHTTPResponse), type(reply)
    return reply


def raw(reply: object) -> dict[str, Any]:
    """The JSON object of a reply read with `_preload_content=False`."""
    data: dict[str, Any] = json.loads(http(reply).data)
    return data
