"""Accounting: slurmdbd and its database."""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s
import pulumi_random as random

from sunk import keys, naming
from sunk.manifests.accounting import backup_claims, mariadb_manifests, setup_job, slurmdbd_manifests
from sunk.manifests.auth import AuthRefs, db_secret_name, empty_secret
from sunk.spec.cluster import ClusterSpec

from ._k8s import Component, child, create, state_options, text, typed


class Accounting(Component):
    """slurmdbd (Deployment and Service `<cluster>-accounting`) on an in-cluster MariaDB
    (StatefulSet, PVC, and a Secret with generated passwords) or on the external database of the
    spec (password from the referenced Secret). A Job registers the cluster and creates the QOS.

    slurmdbd.conf in the ConfigMap holds no password: slurmdbd's start script appends
    StoragePass from the mounted Secret to a private copy (sunk.manifests.scripts)."""

    host: pulumi.Output[str]
    """The slurmdbd Service (AccountingStorageHost)."""
    deployment: k8s.apps.v1.Deployment
    """slurmdbd."""
    service: k8s.core.v1.Service
    """slurmdbd's Service."""
    database: k8s.apps.v1.StatefulSet | None
    """The in-cluster MariaDB; None with an external database."""
    database_claim: k8s.core.v1.PersistentVolumeClaim | None
    """MariaDB's data: retained on destroy; protected unless `allow_state_replacement`."""
    database_secret: k8s.core.v1.Secret | None
    """The generated database passwords; None with an external database or when the cluster makes them."""

    def __init__(
        self,
        name: str,
        spec: ClusterSpec,
        *,
        namespace: pulumi.Input[str],
        refs: AuthRefs,
        allow_state_replacement: bool = False,
        keys_in_cluster: bool = False,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        """`keys_in_cluster`: the database passwords are the in-cluster generator's (KeyGenerator)."""
        super().__init__("sunk:index:Accounting", name, opts)
        self.database = self.database_claim = self.database_secret = None
        db: list[pulumi.Resource] = []
        if refs.generate_db:
            # Alphanumeric: the password ends up in a `Key=Value` line of slurmdbd.conf.
            if not keys_in_cluster:
                user = random.RandomPassword(f"{name}-db-password", length=32, special=False, opts=child(self))
                root = random.RandomPassword(f"{name}-db-root-password", length=32, special=False, opts=child(self))
                self.database_secret = typed(
                    k8s.core.v1.Secret,
                    create(
                        f"{name}-db-secret",
                        empty_secret(spec, db_secret_name(spec), "mariadb"),
                        child(self),
                        namespace=namespace,
                        string_data={
                            keys.DB_PASSWORD: pulumi.Output.secret(user.result),
                            keys.DB_ROOT_PASSWORD: pulumi.Output.secret(root.result),
                        },
                    ),
                )
                db.append(self.database_secret)
            claim, service, sts = mariadb_manifests(spec)
            data = create(
                f"{name}-db-data", claim, child(self, **state_options(allow_state_replacement)), namespace=namespace
            )
            self.database_claim = typed(k8s.core.v1.PersistentVolumeClaim, data)
            db += [data, create(f"{name}-db-service", service, child(self), namespace=namespace)]
            self.database = typed(
                k8s.apps.v1.StatefulSet,
                create(f"{name}-mariadb", sts, child(self, depends_on=list(db)), namespace=namespace),
            )
            db.append(self.database)
        # The dump's volume (slurm.upgradeFrom): kept in the cluster when the stack drops it, as the
        # only way back to the old release's database.
        for claim_manifest in backup_claims(spec):
            db.append(
                create(
                    f"{name}-backup-{spec.slurm.upgrade_from}",
                    claim_manifest,
                    child(self, retain_on_delete=True),
                    namespace=namespace,
                )
            )
        deployment, service = slurmdbd_manifests(spec, refs)
        dbd = create(f"{name}-slurmdbd", deployment, child(self, depends_on=db), namespace=namespace)
        svc = create(f"{name}-service", service, child(self), namespace=namespace)
        self.deployment = typed(k8s.apps.v1.Deployment, dbd)
        self.service = typed(k8s.core.v1.Service, svc)
        create(f"{name}-setup", setup_job(spec, refs), child(self, depends_on=[dbd, svc]), namespace=namespace)
        self.host = text(naming.accounting(spec))
        self.register_outputs({"host": self.host})
