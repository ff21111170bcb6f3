"""Reads the Job, JobSet or PodGroup that sizes a pod's gang (runtime/webhook/gangs.py), for the
admission review. Its ServiceAccount may get Jobs, JobSets and PodGroups in the listed namespaces
only (sunk.manifests.webhook). A JobSet whose CRD is not installed, a PodGroup where the API server
does not serve scheduling.k8s.io/v1alpha2, or a Job or JobSet already gone, reads as None: the pod
is then placed alone. Anything else (timeout, refusal, a PodGroup not created yet where the API is
served) refuses the pod, naming the object: its controller creates it again with backoff, and a
gang is never split by a failed read."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Protocol

from .admission import Refusal
from .gangs import JOBSET_API, PODGROUP_API, Owner

log = logging.getLogger("sunk.webhook")

READ_TIMEOUT = 2.0
"""Seconds one read may take: the API server gives the whole review 5 s (failurePolicy Fail)."""


class NotCreatedYet(LookupError):
    """The PodGroup a pod names does not exist (yet), where its API is served."""


class Owners(Protocol):
    def read(self, namespace: str, owner: Owner) -> Mapping[str, Any] | None:
        """The owner as JSON; None when it (or its kind) does not exist. Raises on anything else."""


def read_owner(owners: Owners, namespace: str, owner: Owner) -> Mapping[str, Any] | Refusal | None:
    """The owner for `review`, or the Refusal that says why it could not be read."""
    try:
        return owners.read(namespace, owner)
    except Exception as err:  # every failure refuses the pod: its controller retries
        log.warning("reading %s %s/%s failed: %s", owner.kind, namespace, owner.name, err)
        return Refusal(
            "metadata.ownerReferences",
            f"could not read {owner.kind} {owner.name} to size its gang ({type(err).__name__}); "
            "its controller creates the pod again",
        )


class KubeOwners:
    """Through the official client (in-cluster, or the kubeconfig outside)."""

    def __init__(self) -> None:
        from kubernetes import client, config

        try:
            config.load_incluster_config()  # type: ignore[no-untyped-call]
        except config.ConfigException:
            config.load_kube_config()  # type: ignore[no-untyped-call]
        self._client = client.ApiClient()
        self._batch = client.BatchV1Api(self._client)
        self._custom = client.CustomObjectsApi(self._client)

    def read(self, namespace: str, owner: Owner) -> Mapping[str, Any] | None:
        from kubernetes.client.exceptions import ApiException

        try:
            if owner.kind == "Job":
                job = self._batch.read_namespaced_job(owner.name, namespace, _request_timeout=READ_TIMEOUT)
                out: Mapping[str, Any] = self._client.sanitize_for_serialization(job)  # type: ignore[no-untyped-call]
                return out
            group, version, plural = PODGROUP_API if owner.kind == "PodGroup" else JOBSET_API
            found = self._custom.get_namespaced_custom_object(
                group, version, namespace, plural, owner.name, _request_timeout=READ_TIMEOUT
            )
            return found if isinstance(found, Mapping) else None
        except ApiException as err:
            if err.status != 404:
                raise
            if owner.kind == "PodGroup" and self._served(PODGROUP_API):
                raise NotCreatedYet(f"PodGroup {namespace}/{owner.name} not found") from None
            return None  # gone, or (JobSet, PodGroup) its API is not served

    def _served(self, api: tuple[str, str, str]) -> bool:
        """Whether the API server serves `api` (group, version, plural): its discovery document."""
        from kubernetes.client.exceptions import ApiException

        group, version, plural = api
        try:
            found = self._custom.get_api_resources(group, version, _request_timeout=READ_TIMEOUT)
        except ApiException as err:
            if err.status == 404:
                return False
            raise
        return any(r.name == plural for r in found.resources or [])
