"""Every controller's environment variables, read from its settings model (runtime/*/settings.py:
each field is one variable, SUNK_<FIELD> unless the class renames it) and from what every
controller reads at start (runtime/common/process.py)."""

from __future__ import annotations

from sunk.runtime.common import process
from sunk.runtime.common.settings import EnvSettings
from sunk.runtime.exporter.settings import Settings as ExporterSettings
from sunk.runtime.fence.__main__ import Settings as FenceSettings
from sunk.runtime.keygen.__main__ import Settings as KeygenSettings
from sunk.runtime.operator.settings import Settings as OperatorSettings
from sunk.runtime.scheduler.settings import Settings as SchedulerSettings
from sunk.runtime.syncer.settings import Settings as SyncerSettings
from sunk.runtime.webhook.__main__ import Settings as WebhookSettings

from .fields import constraints, default, type_name
from .markdown import code, page, table

CONTROLLERS: tuple[tuple[str, str, type[EnvSettings]], ...] = (
    ("operator", "the cluster-wide NodeSet operator (`sunk-operator` Deployment in sunk-system)", OperatorSettings),
    ("syncer", "each cluster's syncer (Slurm nodes and Kubernetes Nodes and pods)", SyncerSettings),
    ("scheduler", "each cluster's pod scheduler through Slurm", SchedulerSettings),
    ("exporter", "each cluster's Slurm metrics exporter", ExporterSettings),
    ("keygen", "each cluster's key generator Job (with `sunk:keys: cluster`)", KeygenSettings),
    ("webhook", "each cluster's pod admission webhook (with `inference.namespaces`)", WebhookSettings),
    (
        "fence",
        "the fence beside each slurmctld of a controller with backups (`controller.replicas` 2-3)",
        FenceSettings,
    ),
)
HEADER = ("Variable", "Type", "Default", "Constraints", "Description")


def _rows(settings: type[EnvSettings]) -> list[tuple[str, str, str, str, str]]:
    rows = []
    for name, field in settings.model_fields.items():
        rows.append(
            (
                code(settings.variable(name)),
                "JSON object" if type_name(field.annotation) == "object" else type_name(field.annotation),
                default(field),
                constraints(field),
                field.description or "",
            )
        )
    return rows


def environment_page() -> tuple[str, int]:
    """The page and how many variables it lists (one a controller reads counts once per controller)."""
    parts = [
        "## Every controller\n\n"
        + table(
            HEADER, [(code(process.LOG_LEVEL), _levels(), code('"INFO"'), "any case", "The controller's log level.")]
        )
    ]
    count = 1
    for name, what, settings in CONTROLLERS:
        rows = _rows(settings)
        count += len(rows)
        parts.append(f"## {name}\n\nRead by {what}; sunk's manifests set them.\n\n" + table(HEADER, rows))
    intro = (
        "What each controller reads from its environment at start. sunk's manifests set every "
        "variable a controller needs; this page is for reading a Deployment, running a controller "
        "by hand, or tuning one. A value that does not fit stops the controller at start with a "
        "message naming the variable (exit code 2). An empty variable counts as unset."
    )
    return page("Environment variables", intro, parts), count


def _levels() -> str:
    return "one of " + ", ".join(f'"{level}"' for level in process.LOG_LEVELS)
