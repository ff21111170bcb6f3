"""Mutating admission webhooks, called on create as kube-apiserver calls them (the store's
mutating admission, store.Store.admission, after the built-in ones).

For each MutatingWebhookConfiguration, in name order, each webhook in its order: the request is
matched (`applies`: its rules' operations, apiGroups, apiVersions, resources and scope, then the
namespaceSelector against the namespace's labels, then the objectSelector against the object's),
an AdmissionReview v1 is POSTed over HTTPS to the Service's ready pod (or the `url`), the server's
certificate verified with the webhook's caBundle for `<service>.<namespace>.svc`, and the answer
read (`outcome`): refused with the webhook's status, or its JSONPatch applied. A call that fails
(no ready pod, TLS, timeout, a malformed answer) refuses the create under `failurePolicy: Fail`
(the default) and is passed over under `Ignore`, as kube-apiserver does.

This is the home-made API server's (issue 37 replaces it with kube-apiserver), kept small: the
call blocks the local API server's loop for its duration (bounded by `timeoutSeconds`; the webhook
answers in milliseconds); only CREATE is admitted (updates, deletes and connects never call a
webhook here); `reinvocationPolicy`, `matchConditions`, `matchPolicy: Equivalent`'s conversion
and validating webhooks are not modelled.
"""

from __future__ import annotations

import base64
import binascii
import copy
import http.client
import json
import logging
import socket
import ssl
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from .netpolicy import PolicyError, selects
from .patch import json_patch
from .resources import Resource
from .store import ApiError, Obj, Store

log = logging.getLogger("sunk.local.admission")

CONFIGURATIONS = "admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"
DEFAULT_TIMEOUT = 10
"""kube-apiserver's default timeoutSeconds (admissionregistration/v1)."""


@dataclass(frozen=True)
class Attributes:
    """What a webhook's rules and selectors are matched against."""

    operation: str
    group: str
    version: str
    resource: str
    kind: str
    namespaced: bool
    namespace: str
    name: str
    subresource: str = ""


# -- matching (pure) -----------------------------------------------------------------------------
def _listed(values: Iterable[str] | None, value: str) -> bool:
    values = list(values or [])
    return "*" in values or value in values


def _resource_listed(resources: Iterable[str] | None, resource: str, subresource: str) -> bool:
    """`pods` matches the pod only, `pods/status` its status, `pods/*` both, `*` every resource
    but no subresource, `*/*` everything (admissionregistration/v1 Rule.resources)."""
    wanted = f"{resource}/{subresource}" if subresource else resource
    for entry in resources or []:
        if entry in ("*/*", wanted) or (entry == "*" and not subresource):
            return True
        head, _, tail = entry.partition("/")
        if tail == "*" and head == resource:
            return True
        if head == "*" and tail and tail == subresource:
            return True
    return False


def rule_matches(rule: Mapping[str, Any], attrs: Attributes) -> bool:
    """One RuleWithOperations against the request."""
    scope = rule.get("scope") or "*"
    in_scope = scope == "*" or (scope == "Namespaced") == attrs.namespaced
    return (
        in_scope
        and _listed(rule.get("operations"), attrs.operation)
        and _listed(rule.get("apiGroups"), attrs.group)
        and _listed(rule.get("apiVersions"), attrs.version)
        and _resource_listed(rule.get("resources"), attrs.resource, attrs.subresource)
    )


def applies(
    hook: Mapping[str, Any],
    attrs: Attributes,
    namespace_labels: Mapping[str, str],
    object_labels: Mapping[str, str],
) -> bool:
    """Whether kube-apiserver would call this webhook: a rule matches, then the namespaceSelector
    (namespaced objects: their namespace's labels; a Namespace: its own; other cluster-scoped
    objects: never excluded), then the objectSelector. A selector that can't be read raises
    PolicyError (kube-apiserver refuses such a configuration when it is written)."""
    if not any(rule_matches(rule, attrs) for rule in hook.get("rules") or []):
        return False
    if attrs.namespaced or attrs.kind == "Namespace":
        labels = object_labels if attrs.kind == "Namespace" else namespace_labels
        if not selects(hook.get("namespaceSelector"), labels):
            return False
    return selects(hook.get("objectSelector"), object_labels)


def ordered(configurations: Iterable[Obj]) -> list[tuple[str, Obj]]:
    """(configuration name, webhook) in the order they are called: configurations by name, each
    one's webhooks in their order."""
    out = []
    for conf in sorted(configurations, key=lambda c: c["metadata"]["name"]):
        out += [(conf["metadata"]["name"], hook) for hook in conf.get("webhooks") or []]
    return out


def review_request(attrs: Attributes, obj: Obj, uid: str, user: str) -> Obj:
    """The AdmissionReview v1 body the webhook is sent."""
    gvr = {"group": attrs.group, "version": attrs.version, "resource": attrs.resource}
    gvk = {"group": attrs.group, "version": attrs.version, "kind": attrs.kind}
    request: Obj = {
        "uid": uid,
        "kind": gvk,
        "resource": gvr,
        "requestKind": gvk,
        "requestResource": gvr,
        "name": attrs.name,
        "operation": attrs.operation,
        "userInfo": {"username": user},
        "object": obj,
        "oldObject": None,
        "dryRun": False,
        "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"},
    }
    if attrs.subresource:
        request["subResource"] = attrs.subresource
    if attrs.namespaced:
        request["namespace"] = attrs.namespace
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


class CallFailed(Exception):
    """The webhook could not be called or its answer could not be read: failurePolicy decides."""


def outcome(hook_name: str, answer: Any, uid: str, obj: Obj) -> Obj:
    """The object after the webhook's answer: patched, or unchanged; ApiError when it refused.
    CallFailed when the answer is not a readable AdmissionReview v1 response for this request."""
    response = answer.get("response") if isinstance(answer, dict) else None
    if not isinstance(response, dict) or answer.get("kind") != "AdmissionReview":
        raise CallFailed("the answer is not an AdmissionReview")
    if answer.get("apiVersion") != "admission.k8s.io/v1":
        raise CallFailed(f"expected admission.k8s.io/v1, got {answer.get('apiVersion')!r}")
    if response.get("uid") != uid:
        raise CallFailed(f"expected response.uid={uid!r}, got {response.get('uid')!r}")
    if not response.get("allowed"):
        status = response.get("status") or {}
        code = status.get("code") or 403
        message = status.get("message") or "without explanation"
        reason = status.get("reason") or ("Forbidden" if code == 403 else "BadRequest")
        raise ApiError(int(code), str(reason), f'admission webhook "{hook_name}" denied the request: {message}')
    patch = response.get("patch")
    if not patch:
        return obj
    if response.get("patchType") != "JSONPatch":
        raise CallFailed(f"patchType {response.get('patchType')!r}: only JSONPatch is defined")
    try:
        ops = json.loads(base64.b64decode(patch, validate=True))
        patched = json_patch(copy.deepcopy(obj), ops)
    except (ValueError, binascii.Error, TypeError, KeyError, IndexError, ApiError) as err:
        raise CallFailed(f"its JSONPatch can't be applied: {err}") from None
    if not isinstance(patched, dict):
        raise CallFailed("its JSONPatch left no object")
    return patched


def failure(hook: Mapping[str, Any], hook_name: str, err: Exception) -> ApiError | None:
    """What a failed call means: the create refused (failurePolicy Fail, the default), or None to
    go on without this webhook (Ignore)."""
    if hook.get("failurePolicy", "Fail") == "Ignore":
        return None
    return ApiError(500, "InternalError", f'Internal error occurred: failed calling webhook "{hook_name}": {err}')


# -- the call (I/O) ------------------------------------------------------------------------------
def _target_port(service: Obj, port: int, pod: Obj) -> int:
    """The pod port a Service port sends to: its targetPort, a number or a container port's name."""
    entry = next((p for p in (service.get("spec") or {}).get("ports") or [] if p.get("port") == port), None)
    if entry is None:
        raise CallFailed(f"service {service['metadata']['name']} has no port {port}")
    target = entry.get("targetPort", port)
    if isinstance(target, int):
        return target
    for container in (pod.get("spec") or {}).get("containers") or []:
        for p in container.get("ports") or []:
            if p.get("name") == target:
                return int(p["containerPort"])
    raise CallFailed(f"pod {pod['metadata']['name']} has no port named {target}")


def _ready(pod: Obj) -> bool:
    status = pod.get("status") or {}
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])
    return bool(ready and status.get("podIP") and not pod["metadata"].get("deletionTimestamp"))


def endpoint(store: Store, ref: Mapping[str, Any]) -> tuple[str, int, str]:
    """(pod IP, port, the name the certificate must hold) for a clientConfig.service: the first
    ready pod the Service selects, as its endpoints would list it."""
    ns, name, port = ref.get("namespace", ""), ref.get("name", ""), int(ref.get("port") or 443)
    service = store.find(store.resource("v1/services"), ns, name)
    if service is None:
        raise CallFailed(f'service "{name}" not found')
    selector = (service.get("spec") or {}).get("selector") or {}
    pods = sorted(
        (p for p in store.items(store.resource("v1/pods"), ns) if selector and _ready(p) and selects({"matchLabels": selector}, p["metadata"].get("labels") or {})),
        key=lambda p: p["metadata"]["name"],
    )  # fmt: skip
    if not pods:
        raise CallFailed(f'no endpoints available for service "{name}"')
    return pods[0]["status"]["podIP"], _target_port(service, port, pods[0]), f"{name}.{ns}.svc"


def post(address: tuple[str, int], server_name: str, path: str, ca_bundle: str, body: Obj, timeout: float) -> Any:
    """POST the review over HTTPS, the server's certificate verified against the caBundle (PEM,
    base64 as in clientConfig) for `server_name`; the answer as JSON."""
    try:
        context = ssl.create_default_context(cadata=base64.b64decode(ca_bundle).decode() if ca_bundle else None)
    except (ValueError, ssl.SSLError) as err:
        raise CallFailed(f"caBundle can't be read: {err}") from None
    try:
        with (
            socket.create_connection(address, timeout=timeout) as raw,
            context.wrap_socket(raw, server_hostname=server_name) as sock,
        ):
            connection = http.client.HTTPConnection(server_name, timeout=timeout)
            connection.sock = sock
            data = json.dumps(body).encode()
            connection.request("POST", path, data, {"Content-Type": "application/json", "Accept": "application/json"})
            reply = connection.getresponse()
            text = reply.read()
    except (OSError, http.client.HTTPException) as err:
        raise CallFailed(f'failed to call webhook: Post "https://{server_name}{path}": {err}') from None
    if reply.status != 200:
        raise CallFailed(f"the webhook answered {reply.status}: {text[:200]!r}")
    try:
        return json.loads(text)
    except ValueError as err:
        raise CallFailed(f"the answer is not JSON: {err}") from None


Poster = Callable[[tuple[str, int], str, str, str, Obj, float], Any]


class Webhooks:
    """The store's admission step that calls the registered mutating webhooks on create."""

    def __init__(self, store: Store, user: str = "system:admin", poster: Poster = post) -> None:
        self.store, self.user, self.post = store, user, poster

    def __call__(self, res: Resource, obj: Obj) -> None:
        configurations = self.store.registry.get("admissionregistration.k8s.io/v1", "mutatingwebhookconfigurations")
        if configurations is None or res.key == CONFIGURATIONS:
            return
        hooks = ordered(self.store.items(configurations, None))
        if not hooks:
            return
        meta = obj.get("metadata") or {}
        attrs = Attributes("CREATE", res.group, res.version, res.plural, res.kind, res.namespaced,
                           meta.get("namespace", ""), meta.get("name", ""))  # fmt: skip
        ns_labels: Mapping[str, str] = {}
        if res.namespaced:
            ns = self.store.find(self.store.resource("v1/namespaces"), None, attrs.namespace)
            ns_labels = ((ns or {}).get("metadata") or {}).get("labels") or {}
        for _, hook in hooks:
            name = str(hook.get("name", ""))
            try:
                if not applies(hook, attrs, ns_labels, meta.get("labels") or {}):
                    continue
            except PolicyError as err:
                refused = failure(hook, name, err)
                if refused is not None:
                    raise refused from None
                continue
            patched = self._call(hook, name, attrs, obj)
            if patched is not obj:  # the store's object is the one it keeps: changed in place
                obj.clear()
                obj.update(patched)
                meta = obj.get("metadata") or {}

    def _call(self, hook: Mapping[str, Any], name: str, attrs: Attributes, obj: Obj) -> Obj:
        client = hook.get("clientConfig") or {}
        timeout = float(hook.get("timeoutSeconds") or DEFAULT_TIMEOUT)
        uid = str(uuid.uuid4())
        try:
            if client.get("service"):
                ip, port, server_name = endpoint(self.store, client["service"])
                path = client["service"].get("path") or "/"
            else:
                url = urlsplit(str(client.get("url") or ""))
                if url.scheme != "https" or not url.hostname:
                    raise CallFailed("clientConfig has neither a service nor an https url")
                ip, port, server_name, path = url.hostname, url.port or 443, url.hostname, url.path or "/"
            answer = self.post((ip, port), server_name, path, client.get("caBundle") or "",
                               review_request(attrs, obj, uid, self.user), timeout)  # fmt: skip
            return outcome(name, answer, uid, obj)
        except CallFailed as err:
            refused = failure(hook, name, err)
            if refused is not None:
                log.info("%s/%s refused: %s", attrs.namespace, attrs.name, refused.message)
                raise refused from None
            log.info("webhook %s passed over (failurePolicy Ignore): %s", name, err)
            return obj
