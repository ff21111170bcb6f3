"""Webhook: the pod admission webhook of the opted-in namespaces (inference.namespaces)."""

from __future__ import annotations

import pulumi

from sunk.manifests.webhook import webhook_manifests
from sunk.spec.cluster import ClusterSpec

from ._k8s import Component, child, create


class Webhook(Component):
    """The webhook's Deployment and Service, its access to its own MutatingWebhookConfiguration
    (by name), the scheduler's Role and RoleBinding and the webhook's read of Jobs, JobSets and PodGroups in each
    listed namespace, and the configuration itself,
    registered last, once the Deployment it calls is there (sunk.manifests.webhook)."""

    def __init__(
        self,
        name: str,
        spec: ClusterSpec,
        *,
        namespace: pulumi.Input[str],
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("sunk:index:Webhook", name, opts)
        made: list[pulumi.Resource] = []
        for m in webhook_manifests(spec):
            kind = m["kind"]
            meta = m["metadata"]
            if meta.get("namespace", spec.ns) != spec.ns:
                # A grant in an opted-in namespace (that namespace, not the tenant's): the
                # scheduler's pod rules, or the webhook's read of the Jobs, JobSets and PodGroups of gangs.
                who = "scheduler" if meta["labels"]["app.kubernetes.io/component"] == "scheduler" else "owners"
                made.append(create(f"{name}-{who}-{meta['namespace']}-{kind.lower()}", m, child(self)))
                continue
            suffix = {"MutatingWebhookConfiguration": "configuration"}.get(kind, kind.lower())
            waits = made if kind == "MutatingWebhookConfiguration" else []
            made.append(create(f"{name}-{suffix}", m, child(self, depends_on=waits), namespace=namespace))
        self.register_outputs({})
