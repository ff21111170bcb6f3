"""Read a stack file (stacks/Pulumi.<tenant>-<env>.yaml) into a validated spec.

The same function serves `__main__.py` (through Pulumi config), `sunk validate` and the tests,
so a stack that validates here is the stack `pulumi up` deploys."""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from sunk import stacklines, strictyaml
from sunk.podgate import gate_problems
from sunk.problem import Problem
from sunk.spec.cluster import ClusterSpec
from sunk.spec.errors import SpecError, format_errors, load_spec
from sunk.spec.operator import OperatorSpec

PROJECT = "sunk"
CLUSTER_KEY = f"{PROJECT}:cluster"
OPERATOR_KEY = f"{PROJECT}:operator"
ALLOW_STATE_REPLACEMENT_KEY = f"{PROJECT}:allowStateReplacement"
"""`true` lifts the protection of the state PVCs (slurmctld state, MariaDB data) for an `up`
that must replace them; absent or `false`, the engine refuses such a plan."""
KEYS_FROM_KEY = f"{PROJECT}:keys"
"""Where the cluster's keys and passwords are made: `pulumi` (the default: pulumi-random and
pulumi-tls, kept encrypted in the stack's state, as clusters deployed before had them) or `cluster`
(the in-cluster generator Job, sunk.manifests.keygen: no key ever enters the state). `sunk render`
always renders `cluster`: a rendered file never holds a key."""
KEY_SOURCES = ("pulumi", "cluster")
KEYS = (CLUSTER_KEY, OPERATOR_KEY, ALLOW_STATE_REPLACEMENT_KEY, KEYS_FROM_KEY)
STACK_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?-(dev|staging|prod|[a-z0-9]+)$")


@dataclass(frozen=True)
class Stack:
    name: str
    spec: ClusterSpec
    operator: OperatorSpec | None
    """The cluster-wide Operator this stack also installs (once per Kubernetes cluster), or None."""
    allow_state_replacement: bool = False
    """`sunk:allowStateReplacement`."""

    @property
    def deploy_operator(self) -> bool:
        return self.operator is not None


def project_dir(start: Path | None = None) -> Path | None:
    """The Pulumi project around `start` (default: the current directory): the nearest folder
    upwards holding Pulumi.yaml. The user's project, never the one sunk was installed from."""
    here = (start or Path.cwd()).resolve()
    for folder in [here, *here.parents]:
        if (folder / "Pulumi.yaml").is_file():
            return folder
    return None


def stacks_dir(start: Path | None = None) -> Path:
    """Where the project's stack files live: Pulumi.yaml's `stackConfigDir` (the project folder
    itself when unset, as for Pulumi); `stacks/` under `start` when there is no project."""
    project = project_dir(start)
    if project is None:
        return (start or Path.cwd()) / "stacks"
    try:
        doc = strictyaml.load((project / "Pulumi.yaml").read_text(errors="replace"))
    except strictyaml.StrictYamlError:
        doc = None
    configured = doc.get("stackConfigDir") if isinstance(doc, dict) else None
    return project / configured if isinstance(configured, str) and configured else project


def stack_path(stack: str, directory: Path | None = None) -> Path:
    """A stack name (`acme-dev`) or a path to a stack file."""
    candidate = Path(stack)
    if candidate.suffix in {".yaml", ".yml"} or candidate.is_file():
        return candidate
    return (directory or stacks_dir()) / f"Pulumi.{stack}.yaml"


def list_stacks(directory: Path | None = None) -> list[str]:
    folder = directory or stacks_dir()
    return sorted(p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in folder.glob("Pulumi.*.yaml"))


def no_stacks_reason(directory: Path | None = None) -> str:
    """Why a command that works on "every stack of the project" found none: there is no project
    around the current directory, or its stack folder holds no stack file. A command run from the
    wrong folder must say so and fail, never succeed having checked nothing."""
    if directory is None and project_dir() is None:
        return (
            f"no Pulumi project here: no Pulumi.yaml in {Path.cwd()} or any folder above it. Run this inside "
            "your project (or create one with `sunk init`)"
        )
    folder = directory or stacks_dir()
    return f"no stack files (Pulumi.<tenant>-<env>.yaml) in {folder}; add one, or create a project with `sunk init`"


class NoDefaultStack(ValueError):
    """A command given no STACK in a project with none or several stacks."""


def default_stack(directory: Path | None = None) -> str:
    """The stack a command means when given none: the project's only stack. With none or several
    it raises NoDefaultStack saying which exist, so a user's project never falls back to a stack
    name of sunk's own."""
    stacks = list_stacks(directory)
    if len(stacks) == 1:
        return stacks[0]
    if not stacks:
        raise NoDefaultStack(no_stacks_reason(directory))
    raise NoDefaultStack(f"this project has {len(stacks)} stacks; name one: {', '.join(stacks)}")


def _find_secure(value: Any, path: str) -> list[Problem]:
    if isinstance(value, dict):
        if set(value) == {"secure"}:
            return [
                Problem(
                    path,
                    "encrypted values are not read here; reference a Kubernetes Secret "
                    "(passwordSecret, bindPasswordSecret, existingSecret) instead",
                )
            ]
        return [p for k, v in value.items() for p in _find_secure(v, f"{path}.{k}" if path else str(k))]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _find_secure(v, f"{path}[{i}]")]
    return []


def _operator(value: Any, source: str) -> OperatorSpec | None:
    """`sunk:operator`: a boolean (or the text Pulumi hands a program, "true"/"false"; nothing
    that only looks like one: `yes`, `[false]`, 1), or the operator's settings (its tenant policy
    among them), which install it too."""
    if value is strictyaml.REFUSED:
        return None  # the YAML reader named it, with its line
    if isinstance(value, str) and value.strip().startswith("{"):  # Pulumi passes objects as JSON text
        try:
            value = strictyaml.load(value, json_text=True)
        except strictyaml.StrictYamlError as err:
            raise SpecError(_in_text(OPERATOR_KEY, err), source) from None
    if isinstance(value, str) and value.strip() in ("true", "false"):
        value = value.strip() == "true"
    if isinstance(value, bool):
        return OperatorSpec() if value else None
    if not isinstance(value, dict):
        raise SpecError(
            [
                Problem(
                    OPERATOR_KEY,
                    f"{value!r} is neither a boolean (true, false) nor the operator's settings (a mapping)",
                )
            ],
            source,
        )
    try:
        return OperatorSpec.model_validate(value, by_alias=True, by_name=False)
    except ValidationError as err:
        raise SpecError([p.under(OPERATOR_KEY) for p in format_errors(err, OperatorSpec)], source) from None


def _in_text(key: str, err: strictyaml.StrictYamlError) -> list[Problem]:
    """What the YAML reader refused in the JSON text Pulumi hands a program for `key`: each under
    the key, its line the text's own (not the stack file's), so none is looked up for it."""
    return [Problem(key, str(p), by_reader=True) for p in err.items]


def _unknown_key(key: str) -> str:
    close = difflib.get_close_matches(key, KEYS, n=1)
    hint = f"did you mean {close[0]}? " if close else ""
    return f"unknown setting; {hint}known: {', '.join(KEYS)}"


def parse_config(config: dict[str, Any], source: str) -> tuple[ClusterSpec, OperatorSpec | None]:
    """Pulumi config (`sunk:cluster`, `sunk:operator`) -> spec. Raises SpecError. In phases: the
    cluster's document (no unknown keys, none encrypted), then every setting, the operator and the
    spec in one round, then what needs both (the operator's policy against the stack's images,
    and the pod gate)."""
    raw = _cluster_document(config, source)
    problems = _settings_problems(config)
    operator = spec = None
    try:
        operator = _operator(config.get(OPERATOR_KEY, False), source)
    except SpecError as err:
        problems += err.items
    notes: list[str] = []
    try:
        spec = load_spec(raw, source)
    except SpecError as err:
        problems += err.items
        notes = err.notes
    if operator is not None and spec is not None and operator.namespace == spec.ns:
        problems.append(
            Problem(
                f"{OPERATOR_KEY}.namespace",
                f"{operator.namespace!r} is also the cluster's namespace; the operator serves every tenant from "
                "a namespace of its own (default sunk-system)",
            )
        )
    if problems or spec is None:
        raise SpecError(problems, source, notes=notes)
    return spec, _admitted(spec, operator, source)


def _cluster_document(config: dict[str, Any], source: str) -> Any:
    """`sunk:cluster` as a document (Pulumi hands a program JSON text), once no key is unknown,
    the cluster is there and none of it is encrypted. Raises SpecError."""
    raw = config.get(CLUSTER_KEY)
    unknown = sorted(k for k in config if k.startswith(f"{PROJECT}:") and k not in KEYS)
    if unknown:
        raise SpecError([Problem(k, _unknown_key(k)) for k in unknown], source)
    if raw is None:
        raise SpecError(
            [
                Problem(
                    CLUSTER_KEY,
                    "missing; the stack must define the cluster (a program that builds its spec in code instead "
                    "is checked by `sunk render STACK --out DIR`, which runs it)",
                )
            ],
            source,
        )
    if isinstance(raw, str):  # Pulumi passes structured config as JSON text
        try:
            raw = strictyaml.load(raw, json_text=True)
        except strictyaml.StrictYamlError as err:
            raise SpecError(_in_text(CLUSTER_KEY, err), source) from None
    secure = _find_secure(raw, "")
    if secure:
        raise SpecError(secure, source)
    return raw


def _settings_problems(config: dict[str, Any]) -> list[Problem]:
    """`sunk:allowStateReplacement` and `sunk:keys`, each one of its values."""
    problems: list[Problem] = []
    allow = config.get(ALLOW_STATE_REPLACEMENT_KEY, False)
    if allow is not strictyaml.REFUSED and not (
        isinstance(allow, bool) or (isinstance(allow, str) and allow.strip() in ("true", "false"))
    ):
        problems.append(Problem(ALLOW_STATE_REPLACEMENT_KEY, f"{allow!r} is not a boolean (true, false)"))
    source_of_keys = config.get(KEYS_FROM_KEY, "pulumi")
    if source_of_keys not in KEY_SOURCES:
        problems.append(Problem(KEYS_FROM_KEY, f"{source_of_keys!r} is not one of {', '.join(KEY_SOURCES)}"))
    return problems


def _admitted(spec: ClusterSpec, operator: OperatorSpec | None, source: str) -> OperatorSpec | None:
    """What needs the valid spec and operator both: the operator's policy admits the stack's slurmd
    images, and everything the spec puts into pods passes the pod gate. The operator, its policy
    and image completed from the stack. Raises SpecError."""
    if operator is not None:
        operator = _policy_follows_registry(spec, operator)
        refused = _refused_images(spec, operator)
        if refused:
            raise SpecError(refused, source)
    # Everything the spec puts into pods, as rendered, before any resource exists.
    gate = gate_problems(spec, operator)
    if gate:
        raise SpecError([Problem("pods", p) for p in gate], source)
    if operator is not None and "image" not in operator.model_fields_set:
        operator = operator.model_copy(update={"image": spec.images.runtime})  # the stack's runtime image
    return operator


def _policy_follows_registry(spec: ClusterSpec, operator: OperatorSpec) -> OperatorSpec:
    """Without its own imagePrefixes, the operator admits the images of the stack's registry
    (`images.registry`), not only sunk's default one, which would refuse every slurmd pod."""
    if "image_prefixes" in operator.policy.model_fields_set or spec.images.registry is None:
        return operator
    policy = operator.policy.model_copy(update={"image_prefixes": [f"{spec.images.registry}/"]})
    return operator.model_copy(update={"policy": policy})


def _refused_images(spec: ClusterSpec, operator: OperatorSpec) -> list[Problem]:
    """The stack's slurmd images (its registry's, or a NodeSet's own) that its own operator's policy
    would refuse, each naming both fields; the pod gate (sunk.podgate) covers the sidecars."""
    prefixes = operator.policy.image_prefixes
    where: dict[str, str] = {}
    for i, ns in enumerate(spec.nodesets):
        own = "image" in ns.model_fields_set
        where.setdefault(
            spec.slurmd_image(ns).ref,
            f"{CLUSTER_KEY}.nodesets[{i}].image" if own else f"{CLUSTER_KEY}.images (registry or slurmd)",
        )
    return [
        Problem(
            f"{OPERATOR_KEY}.policy.imagePrefixes",
            f"{', '.join(prefixes) or 'none'} refuse {image}, which {field} gives slurmd pods: the operator "
            f"would create none of them; add its registry to imagePrefixes or change {field}",
        )
        for image, field in sorted(where.items())
        if not any(image.startswith(p) for p in prefixes)
    ]


def read_stack_file(path: Path) -> Any:
    """A stack file's document, read strictly (sunk.strictyaml: no aliases, no duplicate keys,
    YAML 1.2 scalars, bounded size and depth). Raises SpecError naming the line and field."""
    return _read(path)[0]


def _read(path: Path, *, partial: bool = False) -> tuple[Any, str, list[Problem]]:
    """(document, text, refusals) of a stack file. With `partial`, a file whose only problems
    are refused scalars comes back with those scalars as strictyaml.REFUSED and the refusals
    listed, so the spec around them is checked in the same round; otherwise any refusal raises."""
    if path.stat().st_size > strictyaml.MAX_BYTES:
        raise SpecError(
            [Problem("(file)", f"over {strictyaml.MAX_BYTES} bytes; a stack file is configuration", by_reader=True)],
            str(path),
        )
    try:
        text = strictyaml.decode(path.read_bytes())
        return strictyaml.load(text) or {}, text, []
    except strictyaml.StrictYamlError as err:
        if partial and err.document is not None:
            return err.document, text, err.items
        raise SpecError(err.items, str(path)) from None


def load_stack(stack: str, directory: Path | None = None) -> Stack:
    path = stack_path(stack, directory)
    name = path.name.removeprefix("Pulumi.").removesuffix(".yaml")
    if not path.is_file():
        known = ", ".join(list_stacks(path.parent)) or "none"
        raise SpecError([Problem(None, f"stack {stack!r}: no file {path}; stacks: {known}")], str(path))
    doc, text, refusals = _read(path, partial=True)
    config = doc.get("config") if isinstance(doc, dict) else None
    if not isinstance(config, dict):
        raise SpecError(
            [*refusals, Problem("config", "the stack file needs a `config:` mapping", by_reader=True)], str(path)
        )
    try:
        spec, operator = parse_config(config, str(path))
    except SpecError as err:
        node = stacklines.config_node(stacklines.compose(text))
        found = stacklines.with_lines(err.items, node, CLUSTER_KEY)
        raise SpecError([*refusals, *found], err.source, notes=err.notes) from None
    if refusals:
        raise SpecError(refusals, str(path))
    return Stack(name=name, spec=spec, operator=operator, allow_state_replacement=allows_state_replacement(config))


def allows_state_replacement(config: dict[str, Any]) -> bool:
    """`sunk:allowStateReplacement` is exactly true (YAML or the text Pulumi hands a program)."""
    value = config.get(ALLOW_STATE_REPLACEMENT_KEY, False)
    return value is True or (isinstance(value, str) and value.strip() == "true")


def keys_from(config: dict[str, Any]) -> str:
    """`sunk:keys`: `pulumi` (default) or `cluster` (parse_config refused anything else)."""
    value = config.get(KEYS_FROM_KEY, "pulumi")
    return "cluster" if value == "cluster" else "pulumi"
