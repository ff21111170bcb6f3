"""The exporter's settings: read like the other controllers', bad values named by variable."""

from __future__ import annotations

import pytest
from sunk.runtime.common.settings import SettingsError
from sunk.runtime.exporter.settings import Settings

BASE = {
    "SUNK_CLUSTER": "research",
    "SUNK_NAMESPACE": "acme-research",
    "SUNK_SLURMRESTD_URL": "http://research-restapi:6820",
    "SUNK_JWT_KEY_FILE": "/etc/slurm/jwt/jwt_hs256.key",
}


def test_defaults_and_overrides() -> None:
    s = Settings.from_env(BASE)
    assert s.collect_interval == 30 and s.per_user_metrics is False
    s = Settings.from_env({**BASE, "SUNK_COLLECT_INTERVAL": "15", "SUNK_PER_USER_METRICS": "true"})
    assert s.collect_interval == 15 and s.per_user_metrics is True


@pytest.mark.parametrize(
    ("variable", "value"),
    [("SUNK_COLLECT_INTERVAL", "1"), ("SUNK_COLLECT_INTERVAL", "soon"), ("SUNK_PER_USER_METRICS", "maybe")],
)
def test_bad_values_name_their_variable(variable: str, value: str) -> None:
    with pytest.raises(SettingsError, match=variable):
        Settings.from_env({**BASE, variable: value})
