"""Every controller's settings, read one way: a frozen pydantic model whose fields come from
`SUNK_<FIELD>` environment variables (a class may rename some in ENV, keeping the names its
Deployment already sets). Empty variables count as unset. Every problem names its variable."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import ClassVar, Self

from pydantic import BaseModel, ConfigDict, ValidationError


class SettingsError(ValueError):
    """Settings a controller can't start with; the message names each variable."""


class EnvSettings(BaseModel):
    # Field docstrings become descriptions: the generated reference (docs/reference/environment.md)
    # reads them.
    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    ENV: ClassVar[Mapping[str, str]] = {}
    """Field -> variable, where it is not SUNK_<FIELD>."""

    @classmethod
    def variable(cls, field: str) -> str:
        return cls.ENV.get(field, f"SUNK_{field.upper()}")

    @classmethod
    def variables(cls) -> dict[str, str]:
        return {field: cls.variable(field) for field in cls.model_fields}

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Self:
        """The settings from `env` (default: the process environment). Raises SettingsError."""
        env = os.environ if env is None else env
        values = {field: env[var] for field, var in cls.variables().items() if env.get(var, "") != ""}
        try:
            return cls.model_validate(values)
        except ValidationError as exc:
            problems = []
            for e in exc.errors(include_url=False):
                field = str(e["loc"][0]) if e["loc"] else ""
                name = cls.variable(field) if field in cls.model_fields else "(settings)"
                problems.append(f"{name}: {str(e['msg']).removeprefix('Value error, ')}")
            raise SettingsError("; ".join(problems)) from None

    def describe(self) -> str:
        """`VAR=value` for every setting, for the start-up log line (no secret is a setting)."""
        return " ".join(f"{self.variable(f)}={getattr(self, f)}" for f in type(self).model_fields)
