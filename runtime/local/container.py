"""What the node agent runs for a container, decided from the pod spec alone (pure).

`launch()` turns a container of a pod spec, its image's config and the pod's ConfigMaps and
Secrets into a `Launch`: argv, environment, user, groups, capabilities, working directory and
read-only root, as the kubelet and containerd decide them; or a `ConfigError` with the reason a
kubelet gives (CreateContainerConfigError). `volume_files()` does the same for the files of
configMap, secret, projected and downwardAPI volumes.

Image facts come from the image's OCI config; which part of an image's command is the entrypoint
and which the default arguments comes from sunk.images (the config unpacked by umoci keeps only
their concatenation).
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

Obj = dict[str, Any]
Lookup = Callable[[str, str], Mapping[str, str] | None]
"""(namespace, name) -> the object's data (Secret values decoded), or None when it does not exist."""

DEFAULT_CAPABILITIES = (
    "CHOWN", "DAC_OVERRIDE", "FSETID", "FOWNER", "MKNOD", "NET_RAW", "SETGID", "SETUID", "SETFCAP",
    "SETPCAP", "NET_BIND_SERVICE", "SYS_CHROOT", "KILL", "AUDIT_WRITE",
)  # fmt: skip
"""containerd's default set for a container that neither adds nor drops."""
ALL_CAPABILITIES = "ALL"


class ConfigError(Exception):
    """The container can't be started as specified: CreateContainerConfigError."""


@dataclass(frozen=True)
class Image:
    """What the pod spec falls back to: the image's config."""

    entrypoint: tuple[str, ...]
    cmd: tuple[str, ...]
    env: Mapping[str, str]
    uid: int
    gid: int
    workdir: str = "/"
    groups: Mapping[int, tuple[int, ...]] = field(default_factory=dict)
    """uid -> supplementary groups from the image's /etc/group (containerd adds them)."""
    primary: Mapping[int, int] = field(default_factory=dict)
    """uid -> its group in the image's /etc/passwd (a runAsUser without runAsGroup takes it)."""


@dataclass(frozen=True)
class Launch:
    argv: tuple[str, ...]
    env: Mapping[str, str]
    uid: int
    gid: int
    groups: tuple[int, ...]
    capabilities: tuple[str, ...]
    no_new_privs: bool
    read_only_root: bool
    cwd: str


_REF = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)|\$\$")


def expand(text: str, env: Mapping[str, str]) -> str:
    """Kubernetes' $(VAR) expansion: known names are replaced, unknown ones kept, $$ escapes."""

    def sub(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        name = match.group(1)
        return env.get(name, match.group(0))

    return _REF.sub(sub, text)


def field_ref(pod: Obj, path: str) -> str:
    meta, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
    simple = {
        "metadata.name": meta.get("name"),
        "metadata.namespace": meta.get("namespace"),
        "metadata.uid": meta.get("uid"),
        "spec.nodeName": spec.get("nodeName"),
        "spec.serviceAccountName": spec.get("serviceAccountName", "default"),
        "status.podIP": status.get("podIP"),
        "status.hostIP": status.get("hostIP"),
        "status.podIPs": status.get("podIP"),
    }
    if path in simple:
        return str(simple[path] or "")
    found = re.fullmatch(r"metadata\.(labels|annotations)\['([^']+)'\]", path)
    if found:
        return str((meta.get(found.group(1)) or {}).get(found.group(2), ""))
    if path in ("metadata.labels", "metadata.annotations"):
        items = meta.get(path.split(".")[1]) or {}
        return "\n".join(f'{k}="{v}"' for k, v in sorted(items.items()))
    raise ConfigError(f"unsupported fieldRef {path!r}")


_UNITS = {"": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}


def quantity(text: str) -> float:
    found = re.fullmatch(r"([0-9.]+)(m|[kMGT]i?|)", str(text))
    if not found:
        raise ConfigError(f"quantity {text!r} is not understood")
    number, unit = float(found.group(1)), found.group(2)
    return number / 1000 if unit == "m" else number * _UNITS[unit]


def resource_ref(container: Obj, ref: Mapping[str, Any]) -> str:
    kind, _, name = str(ref.get("resource", "")).partition(".")
    value = ((container.get("resources") or {}).get(kind) or {}).get(name)
    if value is None:
        return "0"
    divisor = quantity(str(ref.get("divisor", "1")))
    amount = quantity(str(value)) / divisor
    return str(int(-(-amount // 1)))


def _key_ref(kind: str, ref: Mapping[str, Any], namespace: str, lookup: Lookup) -> str | None:
    data = lookup(namespace, ref.get("name", ""))
    optional = bool(ref.get("optional"))
    if data is None:
        if optional:
            return None
        raise ConfigError(f'{kind} "{ref.get("name")}" not found')
    if ref.get("key") not in data:
        if optional:
            return None
        raise ConfigError(f"couldn't find key {ref.get('key')} in {kind} {namespace}/{ref.get('name')}")
    return data[ref["key"]]


def environment(
    pod: Obj, container: Obj, image: Image, configmaps: Lookup, secrets: Lookup, cluster: Mapping[str, str]
) -> dict[str, str]:
    """The process environment: the image's, the cluster's service variables, then envFrom and
    env in order (later wins), each value $(VAR)-expanded against what came before."""
    namespace = (pod.get("metadata") or {}).get("namespace", "default")
    env = dict(image.env)
    env["HOSTNAME"] = (pod.get("spec") or {}).get("hostname") or (pod.get("metadata") or {}).get("name", "")
    env.update(cluster)
    for source in container.get("envFrom") or []:
        env.update(_env_from(source, namespace, configmaps, secrets))
    for var in container.get("env") or []:
        name = var["name"]
        if "value" in var:
            env[name] = expand(str(var["value"]), env)
            continue
        value = _value_from(pod, container, var.get("valueFrom") or {}, namespace, configmaps, secrets)
        if value is not None:
            env[name] = value
    return env


def _env_from(source: Mapping[str, Any], namespace: str, configmaps: Lookup, secrets: Lookup) -> dict[str, str]:
    """One envFrom entry: every key of its ConfigMap or Secret, with its prefix."""
    prefix = source.get("prefix", "")
    out: dict[str, str] = {}
    for kind, lookup, key in (("configmap", configmaps, "configMapRef"), ("secret", secrets, "secretRef")):
        ref = source.get(key)
        if ref is None:
            continue
        data = lookup(namespace, ref.get("name", ""))
        if data is None:
            if not ref.get("optional"):
                raise ConfigError(f'{kind} "{ref.get("name")}" not found')
            continue
        out.update({f"{prefix}{k}": v for k, v in data.items()})
    return out


def _value_from(
    pod: Obj, container: Obj, source: Mapping[str, Any], namespace: str, configmaps: Lookup, secrets: Lookup
) -> str | None:
    """An env variable's valueFrom: a ConfigMap or Secret key (None when optional and missing), a
    field of the pod, or a resource of the container."""
    if "configMapKeyRef" in source:
        return _key_ref("configmap", source["configMapKeyRef"], namespace, configmaps)
    if "secretKeyRef" in source:
        return _key_ref("secret", source["secretKeyRef"], namespace, secrets)
    if "fieldRef" in source:
        return field_ref(pod, source["fieldRef"].get("fieldPath", ""))
    if "resourceFieldRef" in source:
        return resource_ref(container, source["resourceFieldRef"])
    return ""


def capabilities(security: Mapping[str, Any]) -> tuple[str, ...]:
    if security.get("privileged"):
        return (ALL_CAPABILITIES,)
    caps = security.get("capabilities") or {}
    drop = {c.removeprefix("CAP_") for c in caps.get("drop") or []}
    add = [c.removeprefix("CAP_") for c in caps.get("add") or []]
    base = [] if ALL_CAPABILITIES in drop else [c for c in DEFAULT_CAPABILITIES if c not in drop]
    if ALL_CAPABILITIES in add:
        return (ALL_CAPABILITIES,)
    return tuple(sorted(set(base) | set(add)))


def launch(
    pod: Obj,
    container: Obj,
    image: Image,
    configmaps: Lookup,
    secrets: Lookup,
    cluster: Mapping[str, str],
) -> Launch:
    """What starts for `container`: its environment, its argv, the user and groups it runs as, its
    capabilities and the rest of its security context, and its working directory."""
    pod_security = (pod.get("spec") or {}).get("securityContext") or {}
    security = container.get("securityContext") or {}
    env = environment(pod, container, image, configmaps, secrets, cluster)
    argv = _argv(container, image, env)
    uid, gid, groups = _identity(pod_security, security, image)
    privileged = bool(security.get("privileged"))
    escalation = security.get("allowPrivilegeEscalation")
    return Launch(
        argv=tuple(argv),
        env=env,
        uid=uid,
        gid=gid,
        groups=tuple(dict.fromkeys(groups)),
        capabilities=capabilities(security),
        no_new_privs=escalation is False and not privileged,
        read_only_root=bool(security.get("readOnlyRootFilesystem")),
        cwd=container.get("workingDir") or image.workdir or "/",
    )


def _argv(container: Obj, image: Image, env: Mapping[str, str]) -> list[str]:
    """command and args over the image's entrypoint and cmd, as Kubernetes combines them, each
    $(VAR)-expanded."""
    command = container.get("command")
    args = container.get("args")
    if command is not None:
        argv = [expand(str(c), env) for c in command] + [expand(str(a), env) for a in args or []]
    elif args is not None:
        argv = [*image.entrypoint, *(expand(str(a), env) for a in args)]
    else:
        argv = [*image.entrypoint, *image.cmd]
    if not argv:
        raise ConfigError("no command specified")
    return argv


def _identity(pod_security: Mapping[str, Any], security: Mapping[str, Any], image: Image) -> tuple[int, int, list[int]]:
    """The uid, gid and groups: the container's securityContext over the pod's over the image's
    user (its primary group and the groups /etc/group gives it), then fsGroup and
    supplementalGroups; runAsNonRoot refuses root."""

    def pick(key: str) -> Any:
        return security.get(key, pod_security.get(key))

    uid = pick("runAsUser")
    uid = image.uid if uid is None else int(uid)
    gid = pick("runAsGroup")
    gid = (image.gid if pick("runAsUser") is None else image.primary.get(uid, 0)) if gid is None else int(gid)
    if pick("runAsNonRoot") and uid == 0:
        raise ConfigError("container has runAsNonRoot and image will run as root")
    groups = [gid, *image.groups.get(uid, ())]
    if pod_security.get("fsGroup") is not None:
        groups.append(int(pod_security["fsGroup"]))
    groups += [int(g) for g in pod_security.get("supplementalGroups") or []]
    return uid, gid, groups


# -- volumes of files -----------------------------------------------------------------------------

File = tuple[bytes, int]
"""Content and mode."""


def _items(
    data: Mapping[str, bytes], items: Sequence[Mapping[str, Any]] | None, mode: int, what: str, optional: bool
) -> dict[str, File]:
    if not items:
        return {key: (value, mode) for key, value in data.items()}
    out = {}
    for item in items:
        if item["key"] not in data:
            if optional:
                continue
            raise ConfigError(
                f"configmap references non-existent config key: {item['key']}"
                if what == "configmap"
                else f"references non-existent secret key: {item['key']}"
            )
        out[item["path"]] = (data[item["key"]], int(item.get("mode", mode)))
    return out


def volume_files(
    pod: Obj,
    volume: Obj,
    configmaps: Callable[[str, str], Mapping[str, bytes] | None],
    secrets: Callable[[str, str], Mapping[str, bytes] | None],
) -> dict[str, File] | None:
    """The files of a configMap, secret, projected or downwardAPI volume (None for other kinds).
    Raises ConfigError for a missing object or key that is not optional (the kubelet's
    FailedMount)."""
    namespace = (pod.get("metadata") or {}).get("namespace", "default")

    def source_files(kind: str, source: Mapping[str, Any], default_mode: int) -> dict[str, File]:
        if kind == "downwardAPI":
            out: dict[str, File] = {}
            for item in source.get("items") or []:
                if "fieldRef" in item:
                    text = field_ref(pod, item["fieldRef"].get("fieldPath", ""))
                else:
                    container: Obj = next(
                        (
                            c
                            for c in (pod.get("spec") or {}).get("containers") or []
                            if c["name"] == item["resourceFieldRef"].get("containerName")
                        ),
                        {},
                    )
                    text = resource_ref(container, item["resourceFieldRef"])
                out[item["path"]] = (text.encode(), int(item.get("mode", default_mode)))
            return out
        name = source.get("name") or source.get("secretName") or ""
        lookup = configmaps if kind == "configMap" else secrets
        data = lookup(namespace, name)
        optional = bool(source.get("optional"))
        if data is None:
            if optional:
                return {}
            raise ConfigError(f'{kind.lower()} "{name}" not found')
        return _items(data, source.get("items"), default_mode, kind.lower(), optional)

    for kind in ("configMap", "secret", "downwardAPI"):
        if kind in volume:
            source = volume[kind]
            return source_files(kind, source, int(source.get("defaultMode", 0o644)))
    if "projected" in volume:
        projected = volume["projected"]
        mode = int(projected.get("defaultMode", 0o644))
        files: dict[str, File] = {}
        for source in projected.get("sources") or []:
            for kind in ("configMap", "secret", "downwardAPI"):
                if kind in source:
                    files.update(source_files(kind, source[kind], mode))
            if "serviceAccountToken" in source:
                files[source["serviceAccountToken"].get("path", "token")] = (b"", mode)
        return files
    return None


def decoded(secret: Obj) -> dict[str, bytes]:
    data = {k: base64.b64decode(v) for k, v in (secret.get("data") or {}).items()}
    data.update({k: str(v).encode() for k, v in (secret.get("stringData") or {}).items()})
    return data


def configmap_bytes(configmap: Obj) -> dict[str, bytes]:
    data = {k: str(v).encode() for k, v in (configmap.get("data") or {}).items()}
    data.update({k: base64.b64decode(v) for k, v in (configmap.get("binaryData") or {}).items()})
    return data
