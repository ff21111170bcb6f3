"""Tokens for slurmrestd's rest_auth/jwt: a fixed token, or HS256 tokens minted from the key.

Slurm's auth/jwt accepts any HS256 token signed with its key whose claims carry `exp` and `sun`
(the Slurm user name), which is what `scontrol token` itself produces; minting locally saves a
round trip to slurmctld and lets a controller renew its own token forever."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol


class TokenProvider(Protocol):
    def token(self) -> str: ...


class StaticToken:
    """A token obtained elsewhere (e.g. `scontrol token` or a mounted Secret)."""

    def __init__(self, value: str) -> None:
        self._value = value

    def token(self) -> str:
        return self._value

    def __repr__(self) -> str:  # never print the secret
        return "StaticToken(***)"


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def mint_hs256(key: bytes, user: str, *, now: int, lifespan: int) -> str:
    """A compact JWS: base64url(header).base64url(claims).base64url(HMAC-SHA256 of the first two)."""
    header = {"alg": "HS256", "typ": "JWT"}
    claims = {"iat": now, "exp": now + lifespan, "sun": user}
    signing_input = ".".join(
        _b64url(json.dumps(part, separators=(",", ":"), sort_keys=True).encode()) for part in (header, claims)
    )
    signature = hmac.new(key, signing_input.encode("ascii"), hashlib.sha256).digest()
    return f"{signing_input}.{_b64url(signature)}"


class JwtMinter:
    """Mints and caches a token; renews it once less than a fifth of its lifespan is left, so a
    request never carries a token about to expire."""

    def __init__(self, key: bytes, user: str, *, lifespan: int = 3600, clock: Callable[[], float] = time.time) -> None:
        if len(key) < 16:
            raise ValueError("JWT key is shorter than 16 bytes; Slurm's key is 32 random bytes")
        self._key = key
        self.user = user
        self._lifespan = lifespan
        self._clock = clock
        self._token = ""
        self._expires = 0.0

    @classmethod
    def from_file(cls, path: str | Path, user: str, *, lifespan: int = 3600) -> JwtMinter:
        return cls(Path(path).read_bytes(), user, lifespan=lifespan)

    def token(self) -> str:
        now = self._clock()
        if now >= self._expires - self._lifespan / 5:
            issued = int(now)
            self._token = mint_hs256(self._key, self.user, now=issued, lifespan=self._lifespan)
            self._expires = issued + self._lifespan
        return self._token

    def __repr__(self) -> str:
        return f"JwtMinter(user={self.user!r})"
