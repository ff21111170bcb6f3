from __future__ import annotations

import pytest
from sunk.runtime.common.settings import SettingsError
from sunk.runtime.syncer.settings import Settings

GOOD = {
    "SUNK_CLUSTER": "acme",
    "SUNK_NAMESPACE": "acme-dev",
    "SUNK_SLURMRESTD_URL": "http://acme-restapi:6820",
    "SUNK_JWT_KEY_FILE": "/etc/slurm/jwt/jwt_hs256.key",
}


def test_defaults_and_overrides() -> None:
    s = Settings.from_env(GOOD)
    assert (s.slurm_user, s.metrics_port, s.sync_interval) == ("slurm", 8080, 1.0)
    s = Settings.from_env({**GOOD, "SUNK_METRICS_PORT": "9100", "SUNK_SYNC_INTERVAL": "2.5", "SUNK_SLURM_USER": "root"})
    assert (s.slurm_user, s.metrics_port, s.sync_interval) == ("root", 9100, 2.5)


def test_every_problem_names_its_variable() -> None:
    env = {k: v for k, v in GOOD.items() if k != "SUNK_NAMESPACE"}
    env.update(SUNK_SLURMRESTD_URL="acme:6820", SUNK_SYNC_INTERVAL="0")
    with pytest.raises(SettingsError) as info:
        Settings.from_env(env)
    for var in ("SUNK_NAMESPACE", "SUNK_SLURMRESTD_URL", "SUNK_SYNC_INTERVAL"):
        assert var in str(info.value)
