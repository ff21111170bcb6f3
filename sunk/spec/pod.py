"""Per-role pod and Service settings: where a role's pods run, what they pull, which labels,
annotations, environment, arguments, volumes and container securityContext they get, and how its
Service is exposed. One model, PodSettings, shared by every role (controller, accounting and its
MariaDB, restapi, login, each NodeSet, the runtime, the operator), the way Slinky's and SUNK's
Helm values repeat `nodeSelector`, `tolerations`, `podLabels`, `extraVolumes`... per component,
but typed and checked before any resource exists.

Merge rules (sunk.manifests.podsettings applies them):
- labels: `labels` go on the role's objects and its pods, `podLabels` on its pods only; sunk's
  own keys win and may not be given: every `slurm.sunk.dev/` key and the app.kubernetes.io keys
  selectors use are refused, so no user label can move a pod out of its Service or workload.
- annotations: `annotations` on the role's objects, `podAnnotations` on its pods; no key under
  `slurm.sunk.dev/` (sunk's config hashes roll pods with them).
- nodeSelector: added to sunk's (a NodeSet's `kubernetes.io/arch` comes from `architecture`);
  tolerations appended; affinity and topologySpreadConstraints as given (a NodeSet in
  all-matching-nodes mode pins its pods to their Node whatever its affinity says).
- imagePullSecrets: the cluster's `images.pullSecrets` first, then the role's; on every pod that
  runs the role's image (the accounting setup Job too). imagePullPolicy: every container of the pod.
- env, extraArgs, volumes and securityContext: the role's main container (slurmctld, slurmdbd,
  mariadb, slurmrestd, sshd, slurmd, syncer and scheduler, operator), never the sidecars. A
  volume's name, mount path or variable sunk uses in that pod is refused, naming what sunk uses it
  for; environment variables go after sunk's; extraArgs after sunk's arguments.
- securityContext: merged over sunk's, key by key; what would break the role (slurmd unprivileged,
  slurmctld as another user than SlurmUser, sshd without the capabilities it switches users with)
  or only weaken it (privileged on a daemon that needs nothing) is refused with the reason.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Literal

from pydantic import AfterValidator, Field, TypeAdapter, ValidationError, model_validator

from sunk import keys, roles
from sunk.problem import Problem, Problems
from sunk.spec import kubeschema
from sunk.spec.base import (
    RESERVED_MOUNTS,
    AbsPath,
    Cidr,
    DnsLabel,
    DnsSubdomain,
    LabelKey,
    Labels,
    LabelValue,
    Model,
    _label_key,
    _matcher,
)

PodRole = Literal["controller", "accounting", "mariadb", "restapi", "login", "compute", "runtime", "operator"]

SELECTOR_LABELS = (keys.APP_NAME, keys.APP_INSTANCE, keys.APP_COMPONENT, keys.APP_PART_OF, keys.APP_MANAGED_BY)
"""Labels sunk sets on every object; name, instance and component select its pods."""
MAX_ANNOTATIONS_BYTES = 128 * 1024
"""Of the API server's 256 KiB for all annotations of an object, what a role's own may take: the
rest is sunk's (hashes, s6 scripts on slurmd pods)."""


def _user_label_keys(values: dict[str, str]) -> dict[str, str]:
    """Not a label sunk sets itself (slurm.sunk.dev/*, app.kubernetes.io/name, instance, component, part-of, managed-by)."""
    for key in values:
        if keys.is_sunks(key) or key in SELECTOR_LABELS:
            raise ValueError(
                f"{key}: sunk sets this label itself (slurm.sunk.dev/*, any sunk.dev domain, and app.kubernetes.io/name, instance, "
                "component, part-of, managed-by: selectors and ownership use them); choose a key of your own, "
                "such as team or example.com/owner"
            )
    return values


def _annotations(values: dict[str, str]) -> dict[str, str]:
    """Annotation keys with the syntax of label keys, none under slurm.sunk.dev/, at most 128 KiB in all (MAX_ANNOTATIONS_BYTES)."""
    size = 0
    for key, value in values.items():
        _label_key(key)  # annotation keys have the syntax of label keys
        if keys.is_sunks(key):
            raise ValueError(
                f"{key}: annotations under slurm.sunk.dev/ are sunk's own, as are those of every other sunk.dev "
                "domain (config hashes roll pods with them); "
                "choose a key of your own, such as example.com/owner"
            )
        size += len(key.encode()) + len(value.encode())
    if size > MAX_ANNOTATIONS_BYTES:
        raise ValueError(
            f"{size} bytes of annotations; at most {MAX_ANNOTATIONS_BYTES} here (the API server allows 262144 "
            "per object, sunk's own included)"
        )
    return values


UserLabels = Annotated[Labels, AfterValidator(_user_label_keys)]
"""Labels a user adds to a role: Kubernetes syntax, none of sunk's keys."""
Annotations = Annotated[dict[str, str], AfterValidator(_annotations)]
"""Annotations a user adds: label-key syntax, none of sunk's keys, at most 128 KiB."""


class Toleration(Model):
    """https://kubernetes.io/docs/concepts/scheduling-eviction/taint-and-toleration/"""

    key: LabelKey | None = None
    """Taint key. Default: none (with operator Exists: every taint)."""
    operator: Literal["Exists", "Equal"] = "Equal"
    """Default: Equal."""
    value: LabelValue | None = None
    """Taint value for operator Equal (a label value). Default: none."""
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None
    """Default: none (every effect)."""
    toleration_seconds: Annotated[int, Field(ge=0, le=2**31 - 1)] | None = None
    """Seconds a NoExecute taint is tolerated (effect NoExecute only, as Kubernetes requires; at most
    about 68 years). Default: forever."""

    @model_validator(mode="after")
    def _exists_has_no_value(self) -> Toleration:
        if self.operator == "Exists" and self.value is not None:
            raise Problems([Problem("value", "must be empty when operator is Exists")])
        if self.key is None and self.operator != "Exists":
            raise Problems(
                [Problem("operator", "a toleration without a key matches every taint only with operator Exists")]
            )
        if self.toleration_seconds is not None and self.effect != "NoExecute":
            raise Problems(
                [
                    Problem(
                        "tolerationSeconds",
                        "Kubernetes accepts it only with effect NoExecute (the time before eviction); "
                        "set effect: NoExecute or drop tolerationSeconds",
                    )
                ]
            )
        return self


def _schema(kind: str) -> AfterValidator:
    def check(value: Any) -> Any:
        return kubeschema.check(kind, value)

    check.__doc__ = f"Kubernetes' own schema of {kind}."

    return AfterValidator(check)


KUBERNETES_TYPE = "x-sunk-kubernetes-type"
"""JSON-schema key naming the Kubernetes definition a free-form field holds: the NodeSet CRD embeds
that definition there (sunk.manifests.nodeset_crd), so the API server checks it too."""


def _mark(fields: dict[str, str]) -> Any:
    """A `json_schema_extra` naming the Kubernetes definition of each listed field (`[]` first: of
    each item of a list)."""

    def extra(schema: dict[str, Any]) -> None:
        props = schema.get("properties") or {}
        for name, kind in fields.items():
            if name not in props:
                continue
            if kind.startswith("[]"):
                props[name]["items"] = {**props[name].get("items", {}), KUBERNETES_TYPE: kind[2:]}
            else:
                props[name][KUBERNETES_TYPE] = kind

    return extra


def _volume_source_types() -> dict[str, str]:
    volume = kubeschema.definitions()[kubeschema.ROOTS["Volume"]]["properties"]
    return {s: str(volume[s]["$ref"]).rsplit("/", 1)[-1] for s in VOLUME_SOURCES}


Affinity = Annotated[dict[str, Any], _schema("Affinity")]
"""Kubernetes affinity (nodeAffinity, podAffinity, podAntiAffinity), checked against its schema."""
TopologySpread = Annotated[dict[str, Any], _schema("TopologySpreadConstraint")]
"""One Kubernetes topologySpreadConstraint, checked against its schema."""

EnvName = Annotated[
    str,
    _matcher(r"[A-Za-z_][A-Za-z0-9_]*", "a C identifier: a letter or '_', then letters, digits, '_'", 255),
]


class EnvVar(Model):
    """An environment variable (https://kubernetes.io/docs/tasks/inject-data-application/define-environment-variable-container/)."""

    model_config = {**Model.model_config, "json_schema_extra": _mark({"valueFrom": kubeschema.ROOTS["EnvVarSource"]})}

    name: EnvName
    """Required."""
    value: str | None = None
    """Default: empty."""
    value_from: Annotated[dict[str, Any], _schema("EnvVarSource")] | None = None
    """A Kubernetes EnvVarSource (secretKeyRef, configMapKeyRef, fieldRef, resourceFieldRef),
    e.g. `{secretKeyRef: {name: s3, key: token}}`: a secret stays in its Secret. Default: none."""

    @model_validator(mode="after")
    def _one(self) -> EnvVar:
        if self.value is not None and self.value_from is not None:
            raise Problems([Problem("valueFrom", "give value or valueFrom, not both")])
        return self

    def manifest(self) -> dict[str, Any]:
        if self.value_from is not None:
            return {"name": self.name, "valueFrom": self.value_from}
        return {"name": self.name, "value": self.value or ""}


VOLUME_SOURCES = (
    "awsElasticBlockStore", "azureDisk", "azureFile", "cephfs", "cinder", "configMap", "csi", "downwardAPI",
    "emptyDir", "ephemeral", "fc", "flexVolume", "flocker", "gcePersistentDisk", "gitRepo", "glusterfs",
    "hostPath", "image", "iscsi", "nfs", "persistentVolumeClaim", "photonPersistentDisk", "portworxVolume",
    "projected", "quobyte", "rbd", "scaleIO", "secret", "storageos", "vsphereVolume",
)  # fmt: skip
"""Every volume source of the Kubernetes Volume (tests check the list against its schema)."""
MOUNT_FIELDS = ("mountPath", "readOnly", "subPath", "subPathExpr", "mountPropagation", "recursiveReadOnly")


def _shorthand(data: Any) -> Any:
    """The NodeSet shorthands of earlier releases, as Kubernetes writes them: `hostPath: /x`,
    `claimName: c`, `emptyDir: true`, `configMap: name`."""
    if not isinstance(data, dict):
        return data
    out = dict(data)
    if isinstance(out.get("hostPath"), str):
        out["hostPath"] = {"path": out["hostPath"]}
    if isinstance(out.get("configMap"), str):
        out["configMap"] = {"name": out["configMap"]}
    if isinstance(out.get("emptyDir"), bool):
        if out["emptyDir"]:
            out["emptyDir"] = {}
        else:
            del out["emptyDir"]
    if "claimName" in out:
        claim: dict[str, Any] = {"claimName": out.pop("claimName")}
        if out.get("readOnly") is True:
            claim["readOnly"] = True
        out["persistentVolumeClaim"] = claim
    return out


Source = dict[str, Any] | None


class VolumeSpec(Model):
    """An extra volume and where the role's main container mounts it: `name`, `mountPath` and
    exactly one Kubernetes volume source, written as in a pod (`nfs: {server, path}`,
    `emptyDir: {medium: Memory, sizeLimit: 64Gi}`, `csi: {driver, volumeAttributes}`,
    `secret: {secretName}`, `persistentVolumeClaim: {claimName}`, `hostPath: {path}`, ...),
    checked against the Kubernetes schema (https://kubernetes.io/docs/concepts/storage/volumes/).
    NodeSets also take the short forms `hostPath: /path`, `claimName: c`, `emptyDir: true` and
    `configMap: name`."""

    model_config = {**Model.model_config, "json_schema_extra": _mark(_volume_source_types())}

    name: DnsLabel
    """Volume name in the pod; not one of the role's own (see the error for which). Required."""
    mount_path: AbsPath
    """Where the main container sees it. Required."""
    read_only: bool = False
    """Mount read-only. Default: false."""
    sub_path: str | None = None
    """Mount only this path inside the volume. Default: the whole volume."""
    mount_propagation: Literal["None", "HostToContainer", "Bidirectional"] | None = None
    """Default: None (Kubernetes' default). Bidirectional needs a privileged container (slurmd)."""
    awsElasticBlockStore: Source = None
    """The `awsElasticBlockStore` volume source, as in a pod. Default: none."""
    azureDisk: Source = None
    """The `azureDisk` volume source, as in a pod. Default: none."""
    azureFile: Source = None
    """The `azureFile` volume source, as in a pod. Default: none."""
    cephfs: Source = None
    """The `cephfs` volume source, as in a pod. Default: none."""
    cinder: Source = None
    """The `cinder` volume source, as in a pod. Default: none."""
    configMap: Source = None
    """The `configMap` volume source, as in a pod. Default: none."""
    csi: Source = None
    """The `csi` volume source, as in a pod. Default: none."""
    downwardAPI: Source = None
    """The `downwardAPI` volume source, as in a pod. Default: none."""
    emptyDir: Source = None
    """The `emptyDir` volume source, as in a pod. Default: none."""
    ephemeral: Source = None
    """The `ephemeral` volume source, as in a pod. Default: none."""
    fc: Source = None
    """The `fc` volume source, as in a pod. Default: none."""
    flexVolume: Source = None
    """The `flexVolume` volume source, as in a pod. Default: none."""
    flocker: Source = None
    """The `flocker` volume source, as in a pod. Default: none."""
    gcePersistentDisk: Source = None
    """The `gcePersistentDisk` volume source, as in a pod. Default: none."""
    gitRepo: Source = None
    """The `gitRepo` volume source, as in a pod. Default: none."""
    glusterfs: Source = None
    """The `glusterfs` volume source, as in a pod. Default: none."""
    hostPath: Source = None
    """The `hostPath` volume source, as in a pod. Default: none."""
    image: Source = None
    """The `image` volume source, as in a pod. Default: none."""
    iscsi: Source = None
    """The `iscsi` volume source, as in a pod. Default: none."""
    nfs: Source = None
    """The `nfs` volume source, as in a pod. Default: none."""
    persistentVolumeClaim: Source = None
    """The `persistentVolumeClaim` volume source, as in a pod. Default: none."""
    photonPersistentDisk: Source = None
    """The `photonPersistentDisk` volume source, as in a pod. Default: none."""
    portworxVolume: Source = None
    """The `portworxVolume` volume source, as in a pod. Default: none."""
    projected: Source = None
    """The `projected` volume source, as in a pod. Default: none."""
    quobyte: Source = None
    """The `quobyte` volume source, as in a pod. Default: none."""
    rbd: Source = None
    """The `rbd` volume source, as in a pod. Default: none."""
    scaleIO: Source = None
    """The `scaleIO` volume source, as in a pod. Default: none."""
    secret: Source = None
    """The `secret` volume source, as in a pod. Default: none."""
    storageos: Source = None
    """The `storageos` volume source, as in a pod. Default: none."""
    vsphereVolume: Source = None
    """The `vsphereVolume` volume source, as in a pod. Default: none."""

    @model_validator(mode="before")
    @classmethod
    def _short_forms(cls, data: Any) -> Any:
        return _shorthand(data)

    @model_validator(mode="after")
    def _one_source(self) -> VolumeSpec:
        given = [s for s in VOLUME_SOURCES if getattr(self, s) is not None]
        if len(given) != 1:
            raise Problems(
                [
                    Problem(
                        "name",
                        f"volume {self.name!r} needs exactly one volume source (nfs, emptyDir, csi, configMap, "
                        f"secret, persistentVolumeClaim, hostPath, ... as in a pod); got {', '.join(given) or 'none'}",
                    )
                ]
            )
        errors = kubeschema.problems("Volume", self.volume())
        host = self.hostPath
        path = host.get("path") if host is not None else None
        if isinstance(path, str) and (problem := _host_path_problem(path)) is not None:
            errors.append(Problem("hostPath.path", f"{problem}"))
        if self.sub_path is not None and (self.sub_path.startswith("/") or ".." in self.sub_path.split("/")):
            errors.append(Problem("subPath", f"{self.sub_path!r} must be a relative path without '..'"))
        if errors:
            raise Problems(errors)
        return self

    @property
    def source(self) -> str:
        return next(s for s in VOLUME_SOURCES if getattr(self, s) is not None)

    def volume(self) -> dict[str, Any]:
        """The pod's volume."""
        return {"name": self.name, self.source: getattr(self, self.source)}

    def mount(self) -> dict[str, Any]:
        """The container's volumeMount."""
        out: dict[str, Any] = {"name": self.name, "mountPath": self.mount_path}
        if self.read_only:
            out["readOnly"] = True
        if self.sub_path is not None:
            out["subPath"] = self.sub_path
        if self.mount_propagation is not None:
            out["mountPropagation"] = self.mount_propagation
        return out


_ABS_PATH: TypeAdapter[str] = TypeAdapter(AbsPath)


def _host_path_problem(value: str) -> str | None:
    """A hostPath must be a normalized absolute path (the tenant policy compares them as such)."""
    try:
        _ABS_PATH.validate_python(value)
    except ValidationError as err:
        return str(err.errors()[0]["msg"]).removeprefix("Value error, ")
    return None


SecurityContext = Annotated[dict[str, Any], _schema("SecurityContext")]


SLURM_OWN_ENV: dict[str, str] = {
    "SLURM_CONF": "points Slurm's daemons and clients at another slurm.conf than the one sunk renders "
    "(configless slurmd, the controller's and login's /etc/slurm)",
    "SLURMRESTD_SECURITY": "turns off slurmrestd's own safety checks (running as root or SlurmUser, "
    "unsharing its namespaces)",
}
"""Slurm's own environment that would take a daemon out of the configuration sunk renders: refused
in every role's env, with why."""


def _env_problems(env: list[EnvVar], rules: RoleRules) -> list[Problem]:
    """Slurm's own environment, what sunk sets on the container (and every SUNK_*), names given twice."""
    errors: list[Problem] = []
    seen_env: dict[str, int] = {}
    for i, e in enumerate(env):
        if e.name in SLURM_OWN_ENV:
            errors.append(Problem(f"env[{i}].name", f"{e.name} {SLURM_OWN_ENV[e.name]}; sunk sets what it must itself"))
        elif e.name.startswith("SUNK_") or e.name in rules.env:
            own = ", ".join(sorted(rules.env)) or "none besides those"
            errors.append(
                Problem(
                    f"env[{i}].name",
                    f"{e.name} is set by sunk on {rules.container} (its own: {own}, and every SUNK_*)",
                )
            )
        if e.name in seen_env:
            errors.append(Problem(f"env[{i}].name", f"{e.name} repeats env[{seen_env[e.name]}]"))
        seen_env.setdefault(e.name, i)
    return errors


POD_ROLE_ROWS: dict[str, tuple[str, ...]] = {
    "controller": ("controller",),
    "accounting": ("accounting",),
    "mariadb": ("mariadb",),
    "restapi": ("restapi",),
    "login": ("login",),
    "compute": ("slurmd",),
    "runtime": ("syncer", "scheduler", "exporter"),
    "operator": ("operator",),
}
"""The role table's rows (sunk.roles.ROLES) each spec section's pod settings reach."""


def _token_problems(role: str, i: int, volume: VolumeSpec) -> list[Problem]:
    """A ServiceAccount token in a projected volume, on a role whose every row keeps the token
    out of its pods (sunk.roles: `token`): in login's shells and slurmd's jobs any user could read
    it and act as the pod's ServiceAccount."""
    if all(roles.role(row).token for row in POD_ROLE_ROWS[role]):
        return []
    sources = (volume.projected or {}).get("sources") or []
    return [
        Problem(
            f"volumes[{i}].projected.sources[{j}].serviceAccountToken",
            f"a ServiceAccount token; the {role} pods get none (sunk.roles grants tokens only to the pods that "
            "call the Kubernetes API: syncer, scheduler, keygen, operator), and users' shells or jobs could read it",
        )
        for j, source in enumerate(sources)
        if isinstance(source, dict) and source.get("serviceAccountToken") is not None
    ]


@dataclass(frozen=True)
class RoleRules:
    """What a role's main container already uses and what its securityContext must keep."""

    container: str
    """The main container (what env, extraArgs, volumes and securityContext apply to)."""
    volumes: frozenset[str] = frozenset()
    """Volume names sunk gives the pod."""
    mounts: tuple[str, ...] = ()
    """Mount paths of the main container beyond sunk.spec.base.RESERVED_MOUNTS."""
    env: frozenset[str] = frozenset()
    """Variables sunk sets on the main container (SUNK_* are reserved everywhere)."""
    user: str = ""
    """Why runAsUser, runAsGroup and runAsNonRoot are fixed."""
    root: bool = False
    """The container runs as root (sshd, slurmd)."""
    privileged: bool = False
    """slurmd only."""
    capabilities: tuple[str, ...] = ()
    """Capabilities sunk adds, which the container needs."""
    read_only_root: bool | None = None
    """True: sunk mounts its root read-only (false would weaken it); False: the container writes its
    root filesystem (true breaks it); None: either."""
    why_writable: str = ""
    extra_args: bool = True
    """The role takes extraArgs (the runtime and operator are configured by environment, slurmd's
    arguments are the NodeSet's)."""


SSHD_CAPABILITIES: tuple[str, ...] = tuple(sorted(roles.SSHD_CAPABILITIES))
"""What sshd keeps on login (everything else dropped): the login manifest grants exactly these,
and a login securityContext may not drop them."""

_AUTH = frozenset({"munge-socket", "munge-key", "munge-state"})
ROLE_RULES: dict[PodRole, RoleRules] = {
    "controller": RoleRules(
        "slurmctld",
        volumes=frozenset({"slurm-config", "state", "run", "tmp"}) | _AUTH,
        mounts=("/run/slurmctld", "/tmp"),
        user="slurmctld runs as SlurmUser (slurm, 64030), which owns StateSaveLocation and which slurm.conf names",
        read_only_root=True,
    ),
    "accounting": RoleRules(
        "slurmdbd",
        volumes=frozenset({"slurm-config", "db-password", "conf", "run", "tmp"}) | _AUTH,
        mounts=("/run/slurmdbd", "/tmp"),
        user="slurmdbd runs as SlurmUser (slurm, 64030), which slurmdbd.conf names and which reads its 0600 file",
        read_only_root=True,
    ),
    "mariadb": RoleRules(
        "mariadb",
        volumes=frozenset({"data", "run", "tmp", "secret"}),
        mounts=("/etc/mariadb-secret", "/tmp"),
        env=frozenset({"MARIADB_DATABASE", "MARIADB_USER", "MARIADB_PASSWORD_FILE", "MARIADB_ROOT_PASSWORD_FILE"}),
        user="MariaDB runs as mysql (999), which owns its data volume",
        read_only_root=True,
    ),
    "restapi": RoleRules(
        "slurmrestd",
        volumes=frozenset({"slurm-config"}),
        env=frozenset({"SLURM_JWT"}),
        user="slurmrestd runs as nobody: it refuses to run as root or as SlurmUser",
        read_only_root=True,
    ),
    "login": RoleRules(
        "sshd",
        volumes=frozenset({"slurm-config", "sack-socket", "sackd-config", "host-keys", "authorized-keys"}) | _AUTH,
        user="sshd runs as root: it binds port 22 and switches to each user who logs in",
        root=True,
        capabilities=SSHD_CAPABILITIES,
        read_only_root=False,
        why_writable="the login start script installs the host keys into /etc/ssh",
    ),
    "compute": RoleRules(
        "slurmd",
        user="slurmd runs as root: it starts each job step as the job's user",
        root=True,
        privileged=True,
        read_only_root=False,
        why_writable="slurmd, slurmstepd and sunk-init write under /run, /var and /etc at start",
        extra_args=False,
    ),
    "runtime": RoleRules(
        "syncer",
        volumes=frozenset({"jwt", "slurm-config"}),
        user="the runtime runs as its image's user (10001)",
        read_only_root=True,
        extra_args=False,
    ),
    "operator": RoleRules(
        "operator",
        user="the operator runs as its image's user (10001)",
        read_only_root=True,
        extra_args=False,
    ),
}


def security_problems(role: PodRole, ctx: dict[str, Any]) -> list[Problem]:
    """What in a user's container securityContext would break `role`, or weaken it for nothing:
    its user, its privileges (privileged, escalation), its capabilities, its root filesystem."""
    rules = ROLE_RULES[role]
    return [
        *_user_problems(role, rules, ctx),
        *_privilege_problems(role, rules, ctx),
        *_capability_problems(role, rules, ctx),
        *_root_fs_problems(role, rules, ctx),
    ]


def _user_problems(role: PodRole, rules: RoleRules, ctx: dict[str, Any]) -> list[Problem]:
    """The user and group: sunk fixes them."""
    out = []
    for key in ("runAsUser", "runAsGroup", "runAsNonRoot"):
        if key in ctx:
            out.append(Problem(f"securityContext.{key}", f"fixed by sunk; {rules.user}"))
    return out


def _privilege_problems(role: PodRole, rules: RoleRules, ctx: dict[str, Any]) -> list[Problem]:
    """privileged and allowPrivilegeEscalation, each as the role needs it."""
    out = []
    privileged = ctx.get("privileged")
    if rules.privileged and privileged is False:
        out.append(
            Problem(
                "securityContext.privileged",
                "slurmd must stay privileged: it creates a cgroup and device filter per "
                "job, starts steps as the job's user and lets pyxis/enroot mount container filesystems",
            )
        )
    elif not rules.privileged and privileged is True:
        out.append(
            Problem(
                "securityContext.privileged",
                f"nothing in {rules.container} needs it, and a privileged container is "
                "root on the Node; only slurmd runs privileged",
            )
        )
    escalation = ctx.get("allowPrivilegeEscalation")
    if not rules.root and escalation is True:
        out.append(
            Problem(
                "securityContext.allowPrivilegeEscalation",
                f"{rules.container} runs unprivileged and never escalates; true only weakens it",
            )
        )
    if role == "login" and escalation is False:
        out.append(
            Problem(
                "securityContext.allowPrivilegeEscalation",
                "false sets no_new_privs on sshd, so the setuid programs "
                "users run after logging in (su, sudo, newgrp) stop working",
            )
        )
    return out


def _capability_problems(role: PodRole, rules: RoleRules, ctx: dict[str, Any]) -> list[Problem]:
    """Capabilities: none reach a non-root container; sshd keeps the ones it needs."""
    out = []
    caps = ctx.get("capabilities") or {}
    if caps and not rules.root:
        out.append(
            Problem(
                "securityContext.capabilities",
                f"{rules.container} runs as a non-root user with every capability "
                "dropped and no privilege escalation, so added capabilities never reach it",
            )
        )
    elif caps and not rules.privileged:
        needed = sorted(set(caps.get("drop") or ()) & {*rules.capabilities, "ALL"} - {"ALL"})
        if "ALL" in (caps.get("drop") or ()) or needed:
            out.append(
                Problem(
                    "securityContext.capabilities.drop",
                    f"sshd needs {', '.join(rules.capabilities)} (sunk drops every "
                    "other); add capabilities with capabilities.add instead",
                )
            )
    return out


def _root_fs_problems(role: PodRole, rules: RoleRules, ctx: dict[str, Any]) -> list[Problem]:
    """readOnlyRootFilesystem, as the role needs it."""
    out = []
    ro = ctx.get("readOnlyRootFilesystem")
    if rules.read_only_root is False and ro is True:
        out.append(Problem("securityContext.readOnlyRootFilesystem", f"{rules.why_writable}"))
    if rules.read_only_root is True and ro is False:
        out.append(
            Problem(
                "securityContext.readOnlyRootFilesystem",
                f"sunk runs {rules.container} with a read-only root "
                "and nothing it does writes there; false only weakens it",
            )
        )
    return out


def reserved_mount(role: PodRole, path: str) -> str | None:
    """The mount of sunk's that `path` would hide or sit inside, in `role`'s main container."""
    for reserved in (*RESERVED_MOUNTS, *ROLE_RULES[role].mounts):
        if path == reserved or path.startswith(reserved + "/") or reserved.startswith(path + "/"):
            return reserved
    return None


class PodSettings(Model):
    """Where and how a role's pods run; every field defaults to nothing added."""

    model_config = {
        **Model.model_config,
        "json_schema_extra": _mark(
            {
                "affinity": kubeschema.ROOTS["Affinity"],
                "topologySpreadConstraints": "[]" + kubeschema.ROOTS["TopologySpreadConstraint"],
                "securityContext": kubeschema.ROOTS["SecurityContext"],
            }
        ),
    }

    POD_ROLE: ClassVar[PodRole] = "controller"
    """The role whose reserved names and securityContext rules apply (set by each subclass)."""

    node_selector: Labels = {}
    """Kubernetes nodeSelector, added to sunk's
    (https://kubernetes.io/docs/concepts/scheduling-eviction/assign-pod-node/). Default: none."""
    tolerations: list[Toleration] = []
    """Appended to sunk's. Default: none."""
    affinity: Affinity | None = None
    """Kubernetes affinity (nodeAffinity, podAffinity, podAntiAffinity), checked against its schema.
    Default: none."""
    topology_spread_constraints: list[TopologySpread] = []
    """Kubernetes topologySpreadConstraints (https://kubernetes.io/docs/concepts/scheduling-eviction/topology-spread-constraints/).
    Default: none."""
    priority_class_name: DnsSubdomain | None = None
    """An existing PriorityClass (https://kubernetes.io/docs/concepts/scheduling-eviction/pod-priority-preemption/).
    Default: none."""
    runtime_class_name: DnsSubdomain | None = None
    """An existing RuntimeClass, e.g. `nvidia` where the NVIDIA container runtime is a RuntimeClass
    rather than the Nodes' default (https://kubernetes.io/docs/concepts/containers/runtime-class/).
    Default: none (the Nodes' default runtime)."""
    image_pull_secrets: list[DnsSubdomain] = []
    """Secrets (type kubernetes.io/dockerconfigjson) in the cluster's namespace to pull this role's
    images with, after images.pullSecrets. Default: none."""
    image_pull_policy: Literal["Always", "IfNotPresent", "Never"] | None = None
    """imagePullPolicy of every container of the role's pods. Default: Kubernetes' (IfNotPresent
    for a tag other than latest)."""
    labels: UserLabels = {}
    """Labels on the role's objects and pods (not sunk's keys). Default: none."""
    annotations: Annotations = {}
    """Annotations on the role's objects (workload, Service, claims). Default: none."""
    pod_labels: UserLabels = {}
    """Labels on the role's pods only. Default: none."""
    pod_annotations: Annotations = {}
    """Annotations on the role's pods only. Default: none."""
    env: list[EnvVar] = []
    """Environment of the main container, after sunk's (`value`, or `valueFrom` a Secret or
    ConfigMap key or a field). Default: none."""
    volumes: list[VolumeSpec] = []
    """Extra volumes mounted into the main container, any Kubernetes volume source. Default: none."""
    security_context: SecurityContext | None = None
    """Container securityContext merged over sunk's, key by key, where it is safe: seccompProfile,
    appArmorProfile, seLinuxOptions, readOnlyRootFilesystem; capabilities.add on sshd. Default: sunk's."""

    @model_validator(mode="after")
    def _pod_rules(self) -> PodSettings:
        role = type(self).POD_ROLE
        rules = ROLE_RULES[role]
        errors: list[Problem] = []
        seen_names: dict[str, int] = {}
        seen_paths: dict[str, int] = {}
        for i, v in enumerate(self.volumes):
            if v.name.startswith(("sunk-", "shared-")) or v.name in rules.volumes:
                own = f"{', '.join(sorted(rules.volumes))} and " if rules.volumes else ""
                errors.append(
                    Problem(
                        f"volumes[{i}].name",
                        f"{v.name!r} is sunk's own in the {rules.container} pod (sunk names its "
                        f"volumes {own}sunk-* and shared-*); choose another name",
                    )
                )
            if (hit := reserved_mount(role, v.mount_path)) is not None:
                errors.append(
                    Problem(
                        f"volumes[{i}].mountPath", f"{v.mount_path} would hide or sit inside sunk's own mount {hit}"
                    )
                )
            if v.name in seen_names:
                errors.append(Problem(f"volumes[{i}].name", f"{v.name!r} repeats volumes[{seen_names[v.name]}]"))
            if v.mount_path in seen_paths:
                errors.append(
                    Problem(f"volumes[{i}].mountPath", f"{v.mount_path} repeats volumes[{seen_paths[v.mount_path]}]")
                )
            seen_names.setdefault(v.name, i)
            seen_paths.setdefault(v.mount_path, i)
            errors += _token_problems(role, i, v)
            if v.mount_propagation == "Bidirectional" and not rules.privileged:
                errors.append(
                    Problem(
                        f"volumes[{i}].mountPropagation", "Bidirectional needs a privileged container; only slurmd is"
                    )
                )
        errors += _env_problems(self.env, rules)
        if self.security_context is not None:
            errors += security_problems(role, self.security_context)
        both = set(self.labels) & set(self.pod_labels)
        errors += [
            Problem(f"podLabels.{k}", "also in labels (which reach the pods too); give it once")
            for k in sorted(both)
            if self.labels[k] != self.pod_labels[k]
        ]
        if errors:
            raise Problems(errors)
        return self


def secret_references(settings: PodSettings) -> list[tuple[str, str]]:
    """(field path, Secret name) of every Secret the settings put in the pod: secret volumes,
    projected secret sources, env valueFrom secretKeyRef."""
    out = []
    for i, v in enumerate(settings.volumes):
        if v.secret is not None and isinstance(v.secret.get("secretName"), str):
            out.append((f"volumes[{i}].secret.secretName", v.secret["secretName"]))
        for j, source in enumerate((v.projected or {}).get("sources") or []):
            name = (source.get("secret") or {}).get("name") if isinstance(source, dict) else None
            if isinstance(name, str):
                out.append((f"volumes[{i}].projected.sources[{j}].secret.name", name))
    for i, e in enumerate(settings.env):
        name = ((e.value_from or {}).get("secretKeyRef") or {}).get("name")
        if isinstance(name, str):
            out.append((f"env[{i}].valueFrom.secretKeyRef.name", name))
    return out


ExtraArgs = Annotated[
    list[Annotated[str, _matcher(r"[^\x00]*", "an argument without NUL", 4096)]], Field(max_length=64)
]
"""Arguments appended to a daemon's own (slurmctld -D, slurmdbd -D, slurmrestd, sshd -D -e, mariadbd)."""


def _ip_or_none(value: str | None) -> str | None:
    """An IP address such as 203.0.113.10."""
    return None if value is None else _ip(value)


def _ip(value: str) -> str:
    try:
        ipaddress.ip_address(value)
    except ValueError:
        raise ValueError(f"{value!r} is not an IP address such as 203.0.113.10") from None
    return value


ServiceType = Literal["LoadBalancer", "NodePort", "ClusterIP"]


class ServiceSettings(Model):
    """How a role's Service is exposed (https://kubernetes.io/docs/concepts/services-networking/service/)."""

    type: ServiceType | None = None
    """ClusterIP, NodePort or LoadBalancer. Default: the role's (login LoadBalancer, restapi ClusterIP)."""
    annotations: Annotations = {}
    """Annotations on the Service, e.g. a cloud's load-balancer settings
    (`service.beta.kubernetes.io/aws-load-balancer-scheme: internal`). Default: none."""
    labels: UserLabels = {}
    """Labels on the Service. Default: none."""
    load_balancer_ip: Annotated[str | None, AfterValidator(_ip_or_none), Field(alias="loadBalancerIP")] = None
    """A fixed address, where the cloud honours it (deprecated in Kubernetes for cloud-specific
    annotations, still widely used). LoadBalancer only. Default: none."""
    load_balancer_class: Annotated[str, AfterValidator(_label_key)] | None = None
    """Which load-balancer implementation serves it, e.g. `service.k8s.aws/nlb`. LoadBalancer only.
    Default: the cluster's default."""
    node_port: Annotated[int, Field(ge=30000, le=32767)] | None = None
    """A fixed node port, in the default range 30000-32767. NodePort or LoadBalancer. Default: allocated."""
    external_traffic_policy: Literal["Cluster", "Local"] | None = None
    """Local keeps the client's address (needed by source ranges and NetworkPolicies); NodePort or
    LoadBalancer. Default: Cluster, or Local where the role has source ranges."""
    source_ranges: list[Cidr] = []
    """loadBalancerSourceRanges: who may connect. LoadBalancer only. Default: anyone."""

    def problems(self, kind: ServiceType, ranges: list[str] | None = None) -> list[Problem]:
        """What does not apply to a Service of type `kind` (the type in effect), whose source
        ranges in effect are `ranges` (default: sourceRanges)."""
        ranges = self.source_ranges if ranges is None else ranges
        errors: list[Problem] = []
        if kind != "LoadBalancer":
            for name, value in (
                ("loadBalancerIP", self.load_balancer_ip),
                ("loadBalancerClass", self.load_balancer_class),
                ("sourceRanges", self.source_ranges or None),
            ):
                if value is not None:
                    errors.append(Problem(f"{name}", f"only applies to type LoadBalancer, not {kind}"))
        if kind == "ClusterIP":
            if self.node_port is not None:
                errors.append(Problem("nodePort", "only applies to type NodePort or LoadBalancer, not ClusterIP"))
            if self.external_traffic_policy is not None:
                errors.append(
                    Problem("externalTrafficPolicy", "only applies to type NodePort or LoadBalancer, not ClusterIP")
                )
        if ranges and self.external_traffic_policy == "Cluster":
            errors.append(
                Problem(
                    "externalTrafficPolicy",
                    "Cluster hides the client's address behind a node's, so sourceRanges could "
                    "not hold; use Local (the default with sourceRanges)",
                )
            )
        return errors


class HeadlessServiceSettings(Model):
    """Metadata of a headless Service (slurmctld's: its DNS name is SlurmctldHost, so its type is fixed)."""

    annotations: Annotations = {}
    """Default: none."""
    labels: UserLabels = {}
    """Default: none."""


__all__ = [
    "MOUNT_FIELDS",
    "ROLE_RULES",
    "VOLUME_SOURCES",
    "EnvVar",
    "ExtraArgs",
    "HeadlessServiceSettings",
    "PodRole",
    "PodSettings",
    "ServiceSettings",
    "Toleration",
    "VolumeSpec",
]
