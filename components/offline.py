"""Evaluate a Pulumi program without the Pulumi CLI or a cluster, through Pulumi's mock engine.

The program runs exactly as `pulumi up` runs it (the same __main__.py, the same stack config, the
same components); the mock engine stands in for the engine and the providers. A recording
monitor keeps every registration as the engine would receive it: inputs (secrets still wrapped,
so they can be redacted), parent, dependencies and options such as ignoreChanges. Generated
values (random bytes, passwords, TLS keys) are one marker, MADE_AT_DEPLOY, and a Secret key whose
value holds it is left out of the manifest (its name listed in the `slurm.sunk.dev/made-at-deploy`
annotation): offline output holds no key and no placeholder a daemon would take, with or without
--show-secrets, and a pod that mounts such a key from an applied render fails to start instead of
running with a known key."""

from __future__ import annotations

import contextlib
import contextvars
import json
import os
import runpy
import sys
import traceback
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
from pulumi.runtime import mocks as pulumi_mocks
from pulumi.runtime import rpc, settings
from pulumi.runtime.stack import run_in_stack
from pulumi.runtime.sync_await import _sync_await

from sunk import keys
from sunk.manifests.meta import Manifest
from sunk.stackfile import PROJECT, read_stack_file

from ._k8s import reset_late

SECRET_KEY = rpc._special_sig_key
SECRET_SIG = rpc._special_secret_sig
UNKNOWN = rpc.UNKNOWN
REDACTED = "<redacted: sunk render --show-secrets shows the value>"
"""A value the program wrapped as secret and did not generate (sssd.conf, a user's own Secret)."""
MADE_AT_DEPLOY = "<generated at deploy time>"
"""What every generated value is offline (random bytes, passwords, TLS keys)."""
STACK_TYPE = "pulumi:pulumi:Stack"


@dataclass(frozen=True)
class AliasSpec:
    """One `pulumi.Alias` as the engine receives it: a full URN, or the parts that differ from the
    resource's own (an empty part means the resource's own name, type or parent)."""

    urn: str = ""
    name: str = ""
    type: str = ""
    parent: str = ""
    no_parent: bool = False


def _alias(message: Any) -> AliasSpec:
    if message.urn:
        return AliasSpec(urn=message.urn)
    spec = message.spec
    return AliasSpec(name=spec.name, type=spec.type, parent=spec.parentUrn, no_parent=bool(spec.noParent))


@dataclass(frozen=True)
class Registration:
    """One RegisterResource call, as the engine would receive it."""

    urn: str
    type: str
    name: str
    parent: str
    custom: bool
    inputs: dict[str, Any]
    dependencies: tuple[str, ...] = ()
    ignore_changes: tuple[str, ...] = ()
    additional_secret_outputs: tuple[str, ...] = ()
    provider: str = ""
    """`<provider urn>::<id>` when set explicitly or inherited from a parent; empty for the default."""
    protect: bool = False
    """The engine refuses to delete or replace it."""
    retain_on_delete: bool = False
    """`pulumi destroy` forgets it and leaves it in the cluster."""
    aliases: tuple[AliasSpec, ...] = ()
    """The earlier identities it answers to (a renamed type or name), as the program gave them."""

    @property
    def is_kubernetes_object(self) -> bool:
        return self.custom and self.type.startswith("kubernetes:") and "kind" in self.inputs


@dataclass
class Evaluation:
    """Everything one program run registered, plus its stack outputs."""

    project: str
    stack: str
    registrations: list[Registration]
    outputs: dict[str, Any] = field(default_factory=dict)

    def duplicate_urns(self) -> list[str]:
        """A real engine rejects these; the mock engine accepts them silently."""
        counts = Counter(r.urn for r in self.registrations)
        return sorted(urn for urn, n in counts.items() if n > 1)

    def kubernetes(self) -> list[Registration]:
        return [r for r in self.registrations if r.is_kubernetes_object]

    def components(self) -> list[Registration]:
        return [r for r in self.registrations if not r.custom]

    def generated(self) -> list[Registration]:
        """Custom resources that are not Kubernetes objects (random bytes, passwords, TLS keys)."""
        return [
            r
            for r in self.registrations
            if r.custom and not r.is_kubernetes_object and not r.type.startswith("pulumi:providers:")
        ]

    def manifests(self, *, show_secrets: bool = False) -> list[Manifest]:
        return [to_manifest(r.inputs, show_secrets=show_secrets) for r in self.kubernetes()]

    def plain_outputs(self, *, show_secrets: bool = False) -> dict[str, Any]:
        return {k: plain(v, show_secrets=show_secrets) for k, v in sorted(self.outputs.items())}


def is_secret(value: Any) -> bool:
    return isinstance(value, dict) and value.get(SECRET_KEY) == SECRET_SIG


def plain(value: Any, *, show_secrets: bool) -> Any:
    """Mock-engine values -> what kubectl would see: secrets unwrapped or redacted, the engine's
    floats back to ints, unknowns spelled out."""
    if is_secret(value):
        return plain(value["value"], show_secrets=show_secrets) if show_secrets else REDACTED
    if isinstance(value, dict):
        return {k: plain(v, show_secrets=show_secrets) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v, show_secrets=show_secrets) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if value == UNKNOWN:
        return "<unknown until deployed>"
    return value


def to_manifest(inputs: Mapping[str, Any], *, show_secrets: bool) -> Manifest:
    obj: Manifest = plain(dict(inputs), show_secrets=show_secrets)
    if obj.get("kind") != "Secret" or obj.get("apiVersion") != "v1":
        return obj
    # The whole map is often one secret value, so the keys come from the unwrapped inputs.
    shown = plain(dict(inputs), show_secrets=True)
    values = {**shown.get("data", {}), **shown.get("stringData", {})}
    generated = sorted(k for k, v in values.items() if MADE_AT_DEPLOY in str(v))
    if generated:
        meta = obj["metadata"] = dict(obj["metadata"])
        meta["annotations"] = {**meta.get("annotations", {}), keys.MADE_AT_DEPLOY: ",".join(generated)}
    for part in ("data", "stringData"):
        if isinstance(obj.get(part), dict):
            obj[part] = {k: v for k, v in obj[part].items() if k not in generated}
    if not show_secrets:
        # Every other key stays visible, no value does.
        obj.pop("data", None)
        obj["stringData"] = dict.fromkeys(sorted(set(values) - set(generated)), REDACTED)
    for part in ("data", "stringData"):
        if obj.get(part) == {}:
            del obj[part]
    return obj


class ProgramFailed(Exception):
    """The program raised; `registrations` holds what it registered before (a spec error must
    leave it empty)."""

    def __init__(self, message: str, registrations: list[Registration]) -> None:
        super().__init__(message)
        self.registrations = registrations


class _Mocks(pulumi.runtime.Mocks):
    """Providers stand-in: Kubernetes objects echo their inputs; every generated value is the
    MADE_AT_DEPLOY marker, which no manifest keeps."""

    def __init__(self, stack: str, previous_outputs: Mapping[str, Any] | None = None) -> None:
        self.stack = stack
        self.previous_outputs = previous_outputs

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str | None, dict[Any, Any]]:
        outputs = dict(args.inputs)
        if args.typ == "random:index/randomBytes:RandomBytes":
            outputs.update(base64=MADE_AT_DEPLOY, hex=MADE_AT_DEPLOY)
        elif args.typ == "random:index/randomPassword:RandomPassword":
            outputs["result"] = MADE_AT_DEPLOY
        elif args.typ == "tls:index/privateKey:PrivateKey":
            outputs.update(
                private_key_openssh=MADE_AT_DEPLOY, private_key_pem=MADE_AT_DEPLOY, public_key_openssh=MADE_AT_DEPLOY
            )
        return f"{args.name}-id", outputs

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[Any, Any], list[tuple[str, str]]]:
        if args.token == "pulumi:pulumi:readStackOutputs" and self.previous_outputs is not None:
            # The stack's previous deployment, as the engine hands it to a stack reading itself.
            name = args.args.get("name", "")
            return {"name": name, "outputs": dict(self.previous_outputs), "secretOutputNames": []}, []
        return {}, []


class _RecordingMonitor(pulumi_mocks.MockMonitor):
    def __init__(self, mocks: _Mocks) -> None:
        super().__init__(mocks)
        self.registrations: list[Registration] = []
        self.stack_outputs: dict[str, Any] = {}
        self.stack_urns: set[str] = set()

    def RegisterResource(self, request: Any) -> Any:
        response = super().RegisterResource(request)  # type: ignore[no-untyped-call]
        if request.type == STACK_TYPE:
            self.stack_urns.add(response.urn)
            return response
        self.registrations.append(
            Registration(
                urn=response.urn,
                type=request.type,
                name=request.name,
                parent=request.parent,
                custom=bool(request.custom),
                inputs=rpc.deserialize_properties(request.object, keep_unknowns=True),
                dependencies=tuple(request.dependencies),
                ignore_changes=tuple(request.ignoreChanges),
                additional_secret_outputs=tuple(request.additionalSecretOutputs),
                provider=request.provider,
                protect=bool(request.protect),
                retain_on_delete=bool(request.retainOnDelete),
                aliases=tuple(_alias(a) for a in request.aliases),
            )
        )
        return response

    def RegisterResourceOutputs(self, request: Any) -> Any:
        if request.urn in self.stack_urns:
            outputs = rpc.deserialize_properties(request.outputs, keep_unknowns=True)
            if outputs:
                self.stack_outputs = outputs
        return super().RegisterResourceOutputs(request)  # type: ignore[no-untyped-call]


@contextlib.contextmanager
def _program_dir(folder: Path) -> Iterator[None]:
    """The language host runs a program from its folder, with that folder importable."""
    old_cwd, old_path = Path.cwd(), list(sys.path)
    os.chdir(folder)
    sys.path.insert(0, str(folder))
    try:
        yield
    finally:
        os.chdir(old_cwd)
        sys.path[:] = old_path


def _described(err: BaseException, program: Path) -> str:
    """The program's error as its author needs it: where in their own code it was raised (the
    innermost frame in the program's folder, never sunk's or an installed package's) and what.
    A RunError is the program's own message to the user (a spec's problems) and stays as it is."""
    if isinstance(err, pulumi.RunError):
        return str(err)
    folder = program.parent.resolve()
    package = Path(__file__).resolve().parent.parent  # sunk/ (components/ and runtime/ are links in a checkout)
    installed = {Path(p).resolve() for p in sys.path if "-packages" in p}
    installed |= {package, Path(__file__).resolve().parent, (package / "runtime").resolve()}
    here: traceback.FrameSummary | None = None
    for frame in traceback.extract_tb(err.__traceback__):
        path = Path(frame.filename).resolve()
        if path.is_relative_to(folder) and not any(path.is_relative_to(i) for i in installed):
            here = frame
    what = f"{type(err).__name__}: {err}" if str(err) else type(err).__name__
    if here is None:
        return what
    shown = Path(here.filename)
    with contextlib.suppress(ValueError):
        shown = shown.resolve().relative_to(Path.cwd().resolve())
    return f"{shown}:{here.lineno}: {what}" + (f"\n    {here.line}" if here.line else "")


def _evaluate(
    program: Path,
    project: str,
    stack: str,
    config: Mapping[str, str],
    secret_keys: Sequence[str],
    previous_outputs: Mapping[str, Any] | None,
) -> Evaluation:
    mocks = _Mocks(stack, previous_outputs)
    monitor = _RecordingMonitor(mocks)
    pulumi.runtime.set_mocks(mocks, project=project, stack=stack, preview=False, monitor=monitor)
    # set_mocks installs a root Stack for unit tests; the real entry point makes its own.
    settings.ROOT.set(None)
    monitor.registrations.clear()
    pulumi.runtime.set_all_config(dict(config), list(secret_keys))
    reset_late()

    def run() -> None:
        runpy.run_path(str(program), run_name="__main__")

    with _program_dir(program.parent):
        try:
            _sync_await(run_in_stack(run))
        except Exception as err:
            raise ProgramFailed(_described(err, program), list(monitor.registrations)) from err
    return Evaluation(
        project=project, stack=stack, registrations=list(monitor.registrations), outputs=monitor.stack_outputs
    )


def evaluate(
    program: Path,
    *,
    stack: str,
    config: Mapping[str, str],
    project: str = PROJECT,
    secret_keys: Sequence[str] = (),
    previous_outputs: Mapping[str, Any] | None = None,
) -> Evaluation:
    """Run `program` (a Pulumi __main__.py) for `stack` with `config` (Pulumi's flat
    `project:key` -> string form). Each call runs in a fresh context, so stacks evaluated one
    after another in one process never see each other's settings, config or root resource.
    `previous_outputs`: the outputs of the stack's previous deployment, as the program reads them back
    (sunk.components.program.previous_release); None: a first deploy."""
    return contextvars.Context().run(_evaluate, program, project, stack, config, secret_keys, previous_outputs)


def stack_config(path: Path, project: str = PROJECT) -> tuple[dict[str, str], list[str]]:
    """A stack file's `config:` in the form the engine hands a program: `project:key` -> string,
    structured values as JSON. `secure:` values cannot be decrypted offline: placeholders."""
    doc = read_stack_file(path)
    raw = doc.get("config") or {}
    config: dict[str, str] = {}
    secret: list[str] = []
    for key, value in raw.items():
        full = key if ":" in key else f"{project}:{key}"
        if isinstance(value, dict) and set(value) == {"secure"}:
            config[full] = "<secure value: not decrypted offline>"
            secret.append(full)
        elif isinstance(value, str):
            config[full] = value
        else:
            config[full] = json.dumps(value, sort_keys=True)
    return config, secret
