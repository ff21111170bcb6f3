"""The three controllers share one shape, so a reader who knows one finds their way in
the others: the same files, settings read the same way, the same metrics/health port variable."""

from __future__ import annotations

from pathlib import Path

import pytest
from sunk.runtime.common.settings import EnvSettings
from sunk.runtime.exporter.settings import Settings as ExporterSettings
from sunk.runtime.operator.settings import Settings as OperatorSettings
from sunk.runtime.scheduler.settings import Settings as SchedulerSettings
from sunk.runtime.syncer.settings import Settings as SyncerSettings

RUNTIME = Path(__file__).resolve().parents[2] / "runtime"
SUPPORT = Path(__file__).resolve().parents[1] / "support"
SHAPE = {"__init__", "__main__", "settings", "model", "plan", "kube", "slurm", "loop", "metrics"}


@pytest.mark.parametrize("controller", ["operator", "syncer", "scheduler"])
def test_each_controller_has_the_shared_files(controller: str) -> None:
    files = {p.stem for p in (RUNTIME / controller).glob("*.py")}
    assert files >= SHAPE, sorted(SHAPE - files)


@pytest.mark.parametrize("controller", ["operator", "syncer", "scheduler", "exporter"])
def test_each_controller_has_its_fakes_in_the_test_support(controller: str) -> None:
    """In-memory SlurmApi/KubeApi for the glue tests live beside the tests, not in the package."""
    assert (SUPPORT / "fakes" / f"{controller}.py").is_file()
    assert not (RUNTIME / controller / "fakes.py").exists()


def test_the_exporter_has_the_same_shape_less_kubernetes() -> None:
    """It reads only Slurm: `collect` is its plan (pure), and it has no Kubernetes client."""
    files = {p.stem for p in (RUNTIME / "exporter").glob("*.py")}
    wanted = (SHAPE - {"plan", "kube"}) | {"collect"}
    assert files >= wanted, sorted(wanted - files)


@pytest.mark.parametrize("settings", [OperatorSettings, SyncerSettings, SchedulerSettings, ExporterSettings])
def test_settings_are_read_one_way_and_name_their_variables(settings: type[EnvSettings]) -> None:
    assert issubclass(settings, EnvSettings)
    assert settings.variable("metrics_port") == "SUNK_METRICS_PORT"
    assert all(var.startswith("SUNK_") for var in settings.variables().values())
    with pytest.raises(ValueError, match="SUNK_METRICS_PORT"):
        settings.from_env({"SUNK_METRICS_PORT": "eighty", "SUNK_CLUSTER": "c", "SUNK_NAMESPACE": "n"})
